"""Business-day arithmetic over a calendar: which local days are business days, and moving an instant to one.

A :class:`BusinessCalendar` is a time zone, the ISO weekdays (Monday 1 ...
Sunday 7) that are business days, holiday dates and half-day dates. A local
day of the zone is:

- a holiday (:attr:`DayKind.HOLIDAY`) when its date is one of ``holidays``,
  whatever its weekday;
- closed (:attr:`DayKind.CLOSED`) when its weekday is not a business weekday;
- a half-day (:attr:`DayKind.HALF_DAY`) when its date is one of
  ``half_days`` (a business day with shortened hours: it *is* a business
  day, the kind only tells it apart);
- a business day (:attr:`DayKind.BUSINESS`) otherwise.

Moving an instant to the next or previous business day keeps its wall time
in the calendar's zone; a wall time that does not exist on the target day (a
daylight-saving gap) becomes the first instant after the gap, and one that
exists twice (a repeated hour) the earlier of the two, as fixed-time jobs
treat them (docs/architecture.md, "Calendars"). Everything is bounded to the
dates :data:`MIN_DATE` to :data:`MAX_DATE`: a search that would leave them
answers None. Searches cost at most one step per day, and each week holds a
business weekday, so a search crosses at most ``7 × (holidays + 1)`` days.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

from .zones import ZoneRegistry, default_registry

MIN_DATE = date(1900, 1, 1)
"""The earliest date a calendar holds or a search reaches."""
MAX_DATE = date(2200, 12, 31)
"""The latest date a calendar holds or a search reaches."""
MONDAY_TO_FRIDAY = frozenset(range(1, 6))
"""The business weekdays of a calendar that names none."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class DayKind(enum.Enum):
    BUSINESS = "business"
    HALF_DAY = "half_day"
    HOLIDAY = "holiday"
    CLOSED = "closed"
    """Not a business weekday (a weekend, for a Monday-to-Friday calendar)."""


class Direction(enum.Enum):
    NEXT = "next"
    PREVIOUS = "previous"


@dataclass(frozen=True)
class BusinessCalendar:
    """What a stored calendar says, decoded. ``ValueError`` when it has no
    business weekday, a weekday outside 1..7, a date outside
    :data:`MIN_DATE`..:data:`MAX_DATE`, or a half-day that is not a
    business day (a holiday, or on a closed weekday): the API refuses those
    before any calendar is built, so the searches here always end."""

    zone: str
    business_weekdays: frozenset[int]
    holidays: frozenset[date] = frozenset()
    half_days: frozenset[date] = frozenset()

    def __post_init__(self) -> None:
        if not self.business_weekdays or not self.business_weekdays <= frozenset(range(1, 8)):
            raise ValueError(f"business weekdays must be a non-empty subset of 1..7, not {sorted(self.business_weekdays)}")
        for day in (*self.holidays, *self.half_days):
            if not MIN_DATE <= day <= MAX_DATE:
                raise ValueError(f"{day.isoformat()} is outside {MIN_DATE.isoformat()}..{MAX_DATE.isoformat()}")
        for day in self.half_days:
            if day in self.holidays or day.isoweekday() not in self.business_weekdays:
                raise ValueError(f"half-day {day.isoformat()} is not a business day")


def calendar(zone: str, weekdays: Iterable[int] = (), holidays: Iterable[date] = (),
             half_days: Iterable[date] = ()) -> BusinessCalendar:
    """A :class:`BusinessCalendar`; no ``weekdays`` means Monday to Friday."""
    chosen = frozenset(weekdays) or MONDAY_TO_FRIDAY
    return BusinessCalendar(zone, chosen, frozenset(holidays), frozenset(half_days))


def day_kind(cal: BusinessCalendar, day: date) -> DayKind:
    """What ``day`` (a local date of the calendar's zone) is."""
    if day in cal.holidays:
        return DayKind.HOLIDAY
    if day.isoweekday() not in cal.business_weekdays:
        return DayKind.CLOSED
    if day in cal.half_days:
        return DayKind.HALF_DAY
    return DayKind.BUSINESS


def is_business_day(cal: BusinessCalendar, day: date) -> bool:
    """True for a business day or a half-day."""
    return day_kind(cal, day) in (DayKind.BUSINESS, DayKind.HALF_DAY)


def next_business_day(cal: BusinessCalendar, day: date) -> date | None:
    """The first business day strictly after ``day``; None when there is
    none up to :data:`MAX_DATE`."""
    return _search(cal, day, 1)


def previous_business_day(cal: BusinessCalendar, day: date) -> date | None:
    """The last business day strictly before ``day``; None when there is
    none from :data:`MIN_DATE` on."""
    return _search(cal, day, -1)


def _search(cal: BusinessCalendar, day: date, step: int) -> date | None:
    candidate = day
    while True:
        if (step > 0 and candidate >= MAX_DATE) or (step < 0 and candidate <= MIN_DATE):
            return None
        candidate = candidate + timedelta(days=step)
        if is_business_day(cal, candidate):
            return candidate


def local_day(cal: BusinessCalendar, at: datetime, registry: ZoneRegistry | None = None) -> date:
    """The date of the aware instant ``at`` in the calendar's zone."""
    return _local(cal, at, registry)[0]


def wall_instant(cal: BusinessCalendar, day: date, wall: time, registry: ZoneRegistry | None = None) -> datetime:
    """The UTC instant at which the calendar's zone shows ``wall`` (naive)
    on ``day``: the earlier of two in a repeated hour, the first instant
    after the gap when the wall time falls in one."""
    return zone_wall_instant(cal.zone, day, wall, registry)


def zone_wall_instant(zone_key: str, day: date, wall: time, registry: ZoneRegistry | None = None) -> datetime:
    """:func:`wall_instant` in the zone ``zone_key`` (a job's own zone)."""
    zone = (registry or default_registry()).get(zone_key)
    seconds = (datetime.combine(day, wall.replace(microsecond=0)) - datetime(1970, 1, 1)) // timedelta(seconds=1)
    instants = zone.instants_of_wall(seconds)
    if instants:
        return _EPOCH + timedelta(seconds=instants[0], microseconds=wall.microsecond)
    gap = zone.gap_of_wall(seconds)
    assert gap is not None, "a wall time that no instant shows lies in a gap"
    return _EPOCH + timedelta(seconds=gap[0])


def move_to_business_day(
    cal: BusinessCalendar, at: datetime, direction: Direction, registry: ZoneRegistry | None = None
) -> datetime | None:
    """``at`` itself when its local day is a business day; otherwise the
    next (or previous) business day's instant at ``at``'s wall time (see
    :func:`wall_instant`). None when no business day lies that way within
    :data:`MIN_DATE`..:data:`MAX_DATE`, or ``at``'s own day is outside them."""
    day, wall = _local(cal, at, registry)
    if not MIN_DATE <= day <= MAX_DATE:
        return None
    if is_business_day(cal, day):
        return at
    target = next_business_day(cal, day) if direction is Direction.NEXT else previous_business_day(cal, day)
    return None if target is None else wall_instant(cal, target, wall, registry)


def _local(cal: BusinessCalendar, at: datetime, registry: ZoneRegistry | None) -> tuple[date, time]:
    return zone_local(cal.zone, at, registry)


def zone_local(zone_key: str, at: datetime, registry: ZoneRegistry | None = None) -> tuple[date, time]:
    """The local date and wall time of the aware instant ``at`` in the zone ``zone_key``."""
    if at.tzinfo is None:
        raise ValueError("an instant must be timezone-aware")
    zone = (registry or default_registry()).get(zone_key)
    utc = at.astimezone(timezone.utc)
    seconds = (utc - _EPOCH) // timedelta(seconds=1)
    local = utc.replace(tzinfo=None) + timedelta(seconds=zone.offset_at(seconds))
    return local.date(), local.time()
