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
answers None. A search costs at most seven steps of a day and one jump
over a run of holidays, whatever the calendar holds: the first business day
past each holiday is found once per calendar and direction
(:meth:`BusinessCalendar.past_holiday`), so a calendar of 10 000
consecutive holidays costs each search no more than one of none (it once
walked day by day, up to ``7 × (holidays + 1)`` days a search, and a
preview or a claim decides many occurrences).
"""

from __future__ import annotations

import enum
import functools
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

    def past_holiday(self, holiday: date, step: int) -> date | None:
        """The first business day after (``step`` 1) or before (-1) the
        holiday ``holiday``, None when there is none within the bounds."""
        return (self._after_holidays if step > 0 else self._before_holidays)[holiday]

    @functools.cached_property
    def weekday_gaps(self) -> dict[tuple[int, int], int]:
        """(step, ISO weekday) -> days from a day of that weekday to the next
        (1) or previous (-1) business weekday, 1 to 7."""
        return {
            (step, weekday): next(n for n in range(1, 8) if (weekday - 1 + step * n) % 7 + 1 in self.business_weekdays)
            for step in (1, -1) for weekday in range(1, 8)
        }

    @functools.cached_property
    def _after_holidays(self) -> dict[date, date | None]:
        return _past_holidays(self, 1)

    @functools.cached_property
    def _before_holidays(self) -> dict[date, date | None]:
        return _past_holidays(self, -1)


def _past_holidays(cal: BusinessCalendar, step: int) -> dict[date, date | None]:
    """:meth:`BusinessCalendar.past_holiday` of every holiday for ``step``:
    the holidays taken against the search's direction, each answered by the
    business weekday past it, or by that day's own answer when it is a
    holiday too (at most seven steps a holiday, once per calendar)."""
    found: dict[date, date | None] = {}
    for holiday in sorted(cal.holidays, reverse=step > 0):
        weekday = _business_weekday(cal, holiday, step)
        found[holiday] = found[weekday] if weekday is not None and weekday in cal.holidays else weekday
    return found


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
    candidate = _business_weekday(cal, day, step)
    if candidate is not None and candidate in cal.holidays:
        return cal.past_holiday(candidate, step)
    return candidate


def _business_weekday(cal: BusinessCalendar, day: date, step: int) -> date | None:
    """The first day ``step`` days at a time from ``day`` (excluded) on a
    business weekday, holiday or not; None past the bounds."""
    candidate = day + timedelta(days=step * cal.weekday_gaps[step, day.isoweekday()])
    return candidate if MIN_DATE <= candidate <= MAX_DATE else None


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
