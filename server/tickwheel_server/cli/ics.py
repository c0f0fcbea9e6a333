"""Holiday dates from an iCalendar (RFC 5545) file: bounded reading, all-day events only, yearly rules expanded.

:func:`holidays_from_ics` turns the bytes of a ``.ics`` file into the
sorted, distinct dates a calendar's ``holidays`` takes, parsed with the
``icalendar`` package. The rules, each refused with an :class:`IcsError`
that names the event rather than guessed around:

- Every VEVENT must be all-day (``DTSTART;VALUE=DATE``): a timed event is
  not a holiday. An event covers ``DTSTART`` up to ``DTEND`` (exclusive) or
  ``DURATION`` whole days, one day when it has neither; at most
  :data:`MAX_EVENT_DAYS` days. ``STATUS:CANCELLED`` events are left out.
- A recurring event's ``RRULE`` must be yearly: ``FREQ=YEARLY`` with
  ``INTERVAL``, ``COUNT``, ``UNTIL``, ``BYMONTH``, ``BYMONTHDAY`` and
  ``BYDAY`` (``4TH``, ``-1MO``), what holiday feeds use; any other part is
  refused. Its occurrences from ``DTSTART`` (not before
  :data:`~tickwheel_server.schedule.businessdays.MIN_DATE`) to ``until``
  are taken, ``EXDATE`` removed, ``RDATE`` added, and occurrences that a
  ``RECURRENCE-ID`` event of the same ``UID`` overrides replaced by it.
- Every date must lie within the dates a calendar may hold (1900 to 2200).

The work is bounded whatever the file: at most :data:`MAX_ICS_BYTES` are
read, at most :data:`MAX_EVENTS` events looked at, a rule is expanded year
by year (one year's candidates at a time) only up to ``until`` and stops at
:data:`MAX_DATES` dates, and more dates than that fail the import.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from tickwheel_server.cli.parse import read_at_most
from tickwheel_server.schedule.businessdays import MAX_DATE, MIN_DATE

MAX_ICS_BYTES = 8 * 1024 * 1024
"""The largest file an import reads."""
MAX_EVENTS = 20_000
"""The most VEVENTs a file may hold."""
MAX_DATES = 10_000
"""The most holiday dates an import may yield (a calendar's limit)."""
MAX_EVENT_DAYS = 366
"""The longest one event may be, in days."""


class IcsError(ValueError):
    """The file cannot be imported; the message says why and names the event."""


@dataclass(frozen=True)
class IcsHolidays:
    dates: list[date]
    """Sorted, distinct."""
    events: int
    """How many VEVENTs gave dates."""
    cancelled: int
    """How many VEVENTs were left out as ``STATUS:CANCELLED``."""


def read_ics(path: str) -> bytes:
    """At most :data:`MAX_ICS_BYTES` of ``path``; IcsError when it is larger or unreadable."""
    try:
        data = read_at_most(path, MAX_ICS_BYTES)
    except OSError as error:
        raise IcsError(f"{error.strerror or error}: {path}") from None
    if len(data) > MAX_ICS_BYTES:
        raise IcsError(f"{path} is larger than {MAX_ICS_BYTES // (1024 * 1024)} MiB, more than an import reads")
    return data


def holidays_from_ics(data: bytes, *, until: date) -> IcsHolidays:
    """The holiday dates ``data`` (an iCalendar file's bytes) states, yearly
    rules expanded up to ``until`` (at most
    :data:`~tickwheel_server.schedule.businessdays.MAX_DATE`). IcsError
    when the file breaks a rule of the module docstring."""
    import icalendar

    if len(data) > MAX_ICS_BYTES:
        raise IcsError(f"the file is larger than {MAX_ICS_BYTES // (1024 * 1024)} MiB")
    until = min(until, MAX_DATE)
    try:
        parsed = icalendar.Calendar.from_ical(data)
    except Exception as error:  # the parser raises ValueError, KeyError, IndexError ... on malformed input
        raise IcsError(f"not an iCalendar file: {_short(error)}") from None
    if getattr(parsed, "name", "") != "VCALENDAR":
        raise IcsError(f"not an iCalendar file: it starts with {getattr(parsed, 'name', '?')!r}, not VCALENDAR")
    events = [c for c in parsed.walk() if c.name == "VEVENT"]
    if len(events) > MAX_EVENTS:
        raise IcsError(f"the file holds {len(events)} events, more than the {MAX_EVENTS} an import takes")
    overrides: dict[str, set[date]] = {}
    for index, event in enumerate(events):
        if "RECURRENCE-ID" in event:
            overrides.setdefault(str(event.get("UID", "")), set()).add(
                _all_day(event, "RECURRENCE-ID", _label(index, event))
            )
    found: set[date] = set()
    used = cancelled = 0
    for index, event in enumerate(events):
        label = _label(index, event)
        if str(event.get("STATUS", "")).upper() == "CANCELLED":
            cancelled += 1
            continue
        if event.errors:
            raise IcsError(f"{label}: malformed property {_short(event.errors[0])}")
        for day in _event_days(event, label, until, overrides.get(str(event.get("UID", "")), set())):
            if not MIN_DATE <= day <= MAX_DATE:
                raise IcsError(f"{label}: {day.isoformat()} is outside {MIN_DATE.isoformat()} to {MAX_DATE.isoformat()}")
            found.add(day)
            if len(found) > MAX_DATES:
                raise IcsError(f"the file holds more than {MAX_DATES} holiday dates, more than a calendar takes")
        used += 1
    return IcsHolidays(dates=sorted(found), events=used, cancelled=cancelled)


def _event_days(event: Any, label: str, until: date, overridden: set[date]) -> Iterable[date]:
    start = _all_day(event, "DTSTART", label)
    span = _span(event, start, label)
    starts = [start]
    if "RRULE" in event:
        starts = _yearly(event, start, label, until, overridden)
    elif "RDATE" in event or "EXDATE" in event:
        raise IcsError(f"{label}: RDATE or EXDATE without an RRULE")
    for first in starts:
        for offset in range(span):
            yield first + timedelta(days=offset)


_WEEKDAY_CODES = {"MO": 0, "TU": 1, "WE": 2, "TH": 3, "FR": 4, "SA": 5, "SU": 6}
_BYDAY = re.compile(r"^([+-]?[0-9]{1,2})?(MO|TU|WE|TH|FR|SA|SU)\Z")
_RULE_PARTS = frozenset({"FREQ", "INTERVAL", "COUNT", "UNTIL", "BYMONTH", "BYMONTHDAY", "BYDAY", "WKST"})


@dataclass(frozen=True)
class _Rule:
    """The yearly RRULE subset holiday feeds use (RFC 5545 3.3.10)."""

    interval: int
    count: int | None
    until: date | None
    months: tuple[int, ...]
    month_days: tuple[int, ...]
    weekdays: tuple[tuple[int | None, int], ...]
    """(ordinal or None, weekday 0 Monday .. 6 Sunday)."""


def _yearly(event: Any, start: date, label: str, until: date, overridden: set[date]) -> list[date]:
    """The occurrences of the event's yearly rule from ``start`` to ``until``
    (or the rule's own UNTIL, COUNT), with EXDATE, RDATE and overrides
    applied. At most one year's candidates per year from ``start`` (not
    before MIN_DATE) to ``until`` (not after MAX_DATE) are computed."""
    rule = _rule(event["RRULE"], start, label)
    end = min(until, rule.until) if rule.until else until
    days: list[date] = []
    for year in range(start.year, end.year + 1, rule.interval):
        for day in _year_days(year, rule):
            if day < start:
                continue
            if day > end or (rule.count is not None and len(days) == rule.count):
                break
            days.append(day)
            if len(days) > MAX_DATES:
                raise IcsError(f"{label}: its RRULE yields more than {MAX_DATES} dates before {end.isoformat()}")
    excluded = _date_list(event, "EXDATE", label) | overridden
    added = _date_list(event, "RDATE", label)
    return sorted((set(days) | added) - excluded)


def _rule(rules: Any, start: date, label: str) -> _Rule:
    if isinstance(rules, list):
        raise IcsError(f"{label}: more than one RRULE")
    parts = {str(key).upper(): value for key, value in rules.items()}
    frequency = [str(f).upper() for f in parts.get("FREQ", [])]
    if frequency != ["YEARLY"]:
        raise IcsError(f"{label}: RRULE FREQ={','.join(frequency) or '?'}: only yearly rules are imported")
    unknown = sorted(set(parts) - _RULE_PARTS)
    if unknown:
        raise IcsError(f"{label}: RRULE {unknown[0]} is not imported (FREQ=YEARLY with INTERVAL, COUNT, UNTIL, "
                       "BYMONTH, BYMONTHDAY and BYDAY is)")  # fmt: skip
    if start < MIN_DATE:
        raise IcsError(f"{label}: a recurring event must start on or after {MIN_DATE.isoformat()}")
    try:
        interval = int(_one(parts, "INTERVAL", 1, label))
        count = int(_one(parts, "COUNT", 0, label)) or None
        months = tuple(int(m) for m in parts.get("BYMONTH", []))
        month_days = tuple(int(d) for d in parts.get("BYMONTHDAY", []))
    except (TypeError, ValueError):
        raise IcsError(f"{label}: RRULE INTERVAL, COUNT, BYMONTH and BYMONTHDAY take whole numbers") from None
    weekdays = []
    for text in parts.get("BYDAY", []):
        found = _BYDAY.match(str(text).upper().replace(" ", ""))
        if found is None or (found[1] is not None and not 1 <= abs(int(found[1])) <= 53):
            raise IcsError(f"{label}: RRULE BYDAY {_short(text)} is not a weekday such as MO, 2MO or -1FR")
        weekdays.append((int(found[1]) if found[1] else None, _WEEKDAY_CODES[found[2]]))
    if interval < 1 or (count is not None and count < 1):
        raise IcsError(f"{label}: RRULE INTERVAL and COUNT must be at least 1")
    if not all(1 <= m <= 12 for m in months) or not all(1 <= abs(d) <= 31 for d in month_days):
        raise IcsError(f"{label}: RRULE BYMONTH is 1 to 12 and BYMONTHDAY 1 to 31 or -31 to -1")
    if month_days and any(ordinal is not None for ordinal, _ in weekdays):
        raise IcsError(f"{label}: RRULE BYDAY with an ordinal and BYMONTHDAY together are not imported")
    stated = _one(parts, "UNTIL", None, label)
    until = stated.date() if isinstance(stated, datetime) else stated
    if until is not None and not isinstance(until, date):
        raise IcsError(f"{label}: RRULE UNTIL is not a date")
    if not months and not month_days and not weekdays:
        months, month_days = (start.month,), (start.day,)
    elif months and not month_days and not weekdays:
        month_days = (start.day,)
    return _Rule(interval, count, until, months, month_days, tuple(weekdays))


def _one(parts: dict, name: str, default: Any, label: str) -> Any:
    values = parts.get(name)
    if not values:
        return default
    if len(values) != 1:
        raise IcsError(f"{label}: RRULE {name} takes one value")
    return values[0]


def _year_days(year: int, rule: _Rule) -> list[date]:
    """The rule's dates in ``year``, ascending: BYMONTH and BYMONTHDAY
    expand, BYDAY limits them when BYMONTHDAY is given and expands within
    each month (BYMONTH given) or the year otherwise, an ordinal picking
    the n-th (from the end when negative)."""
    months = rule.months or tuple(range(1, 13))
    found: set[date] = set()
    if rule.month_days:
        allowed = {weekday for _, weekday in rule.weekdays}
        for month in months:
            length = calendar.monthrange(year, month)[1]
            for value in rule.month_days:
                day = value if value > 0 else length + 1 + value
                if 1 <= day <= length and (not allowed or date(year, month, day).weekday() in allowed):
                    found.add(date(year, month, day))
        return sorted(found)
    spans = (
        [(date(year, m, 1), date(year, m, calendar.monthrange(year, m)[1])) for m in months]
        if rule.months else [(date(year, 1, 1), date(year, 12, 31))]
    )  # fmt: skip
    for first, last in spans:
        for ordinal, weekday in rule.weekdays:
            matching = [first + timedelta(days=offset) for offset in range((last - first).days + 1)
                        if (first + timedelta(days=offset)).weekday() == weekday]  # fmt: skip
            if ordinal is None:
                found.update(matching)
            elif 1 <= abs(ordinal) <= len(matching):
                found.add(matching[ordinal - 1] if ordinal > 0 else matching[ordinal])
    return sorted(found)


def _date_list(event: Any, name: str, label: str) -> set[date]:
    values = event.get(name)
    if values is None:
        return set()
    found = set()
    for group in values if isinstance(values, list) else [values]:
        for item in getattr(group, "dts", []):
            if isinstance(item.dt, datetime) or not isinstance(item.dt, date):
                raise IcsError(f"{label}: {name} {item.dt} is not a date: only all-day events are holidays")
            found.add(item.dt)
    return found


def _all_day(event: Any, name: str, label: str) -> date:
    prop = event.get(name)
    if prop is None:
        raise IcsError(f"{label}: no {name}")
    value = getattr(prop, "dt", None)
    if isinstance(value, datetime) or not isinstance(value, date):
        raise IcsError(f"{label}: {name} {value} has a time of day: only all-day events (VALUE=DATE) are holidays")
    return value


def _span(event: Any, start: date, label: str) -> int:
    if "DTEND" in event:
        days = (_all_day(event, "DTEND", label) - start).days
    elif "DURATION" in event:
        duration = getattr(event["DURATION"], "dt", None)
        if not isinstance(duration, timedelta) or duration % timedelta(days=1):
            raise IcsError(f"{label}: DURATION {duration} is not a whole number of days")
        days = duration.days
    else:
        days = 1
    if not 1 <= days <= MAX_EVENT_DAYS:
        raise IcsError(f"{label}: it lasts {days} days; an event lasts 1 to {MAX_EVENT_DAYS} days")
    return days


def _label(index: int, event: Any) -> str:
    summary = str(event.get("SUMMARY", ""))
    return f"VEVENT {index + 1}" + (f" ({_short(summary)})" if summary else "")


def _short(value: object, limit: int = 80) -> str:
    text = ascii(str(value))[1:-1]
    return text if len(text) <= limit else text[:limit] + "..."
