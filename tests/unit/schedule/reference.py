"""A brute-force reference for the schedule engine, independent of its code.

:func:`brute_force` walks UTC minute by minute through ``zoneinfo`` (never
through the engine's zone tables or matcher) and applies the DST rule of
docs/architecture.md (Semantics) literally at each minute:

- the wall time is a match when every field matches (Vixie's day rule);
- a match at the second occurrence of a repeated wall time (``fold == 1``)
  fires only when the job's repeat policy says both;
- when the wall clock jumped forward since the previous minute, the skipped
  wall times that match collapse into one fire at this minute when the gap
  policy shifts (and the gap is at most 3 hours).

To stay fast it jumps over stretches where nothing can fire: the rest of a
day that does not match, of an hour that does not match, or up to the next
matching minute, but only when the UTC offset is the same at both ends of the
jump (so no transition lies inside it).

Also here: :func:`transitions_in_year` (offset changes found by scanning
``zoneinfo``) and :func:`tzif_bytes` (writes a TZif v2 file for synthetic
zones).
"""

from __future__ import annotations

import struct
import calendar
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo

UTC = timezone.utc
MINUTE = timedelta(minutes=1)
LARGE = timedelta(hours=3)


@dataclass(frozen=True)
class Rule:
    """A cron rule as plain sets (weekday 0 = Sunday) plus the job's policies."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_star: bool
    dow_star: bool
    wild: bool
    gap: str = "auto"
    repeat: str = "auto"
    dom_terms: tuple[tuple[int | str, ...], ...] = ()
    """Quartz day-of-month terms: ("L", n), ("W", n), ("LW",)."""
    dow_terms: tuple[tuple[int | str, ...], ...] = ()
    """Quartz day-of-week terms: ("#", weekday, k), ("DL", weekday); Sunday 0."""

    def day_matches(self, wall: datetime) -> bool:
        if wall.month not in self.months:
            return False
        dom = wall.day in self.days or any(wall.day in _term_days(t, wall.year, wall.month) for t in self.dom_terms)
        dow = wall.isoweekday() % 7 in self.weekdays or any(
            wall.day in _term_days(t, wall.year, wall.month) for t in self.dow_terms)
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def matches(self, wall: datetime) -> bool:
        return wall.minute in self.minutes and wall.hour in self.hours and self.day_matches(wall)

    def shifts(self, gap: timedelta) -> bool:
        if gap > LARGE:
            return False
        if self.gap == "auto":
            return not self.wild
        return self.gap == "shift"

    def once(self, repeat: timedelta) -> bool:
        if self.repeat == "auto":
            return not self.wild and repeat <= LARGE
        return self.repeat == "once"

    def ever_fires(self) -> bool:
        if self.dom_terms or self.dow_terms:
            # Weekdays repeat every 28 years between 1901 and 2099.
            return any(self.day_matches(datetime(year, month, day))
                       for year in range(2000, 2028) for month in self.months
                       for day in range(1, calendar.monthrange(year, month)[1] + 1))
        if not (self.dom_star or self.dow_star):
            return True
        longest = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}
        return any(min(self.days) <= longest[m] for m in self.months)


@lru_cache(maxsize=None)
def _term_days(term: tuple[int | str, ...], year: int, month: int) -> frozenset[int]:
    """The days of ``year``-``month`` a Quartz term names, by the words of its
    definition: the last day less n; the weekday (Monday-Friday) of the month
    nearest day n; the last weekday; the k-th and the last of a weekday."""
    length = calendar.monthrange(year, month)[1]
    days = range(1, length + 1)
    weekdays = [d for d in days if date(year, month, d).weekday() < 5]
    kind = term[0]
    if kind == "L":
        return frozenset({length - int(term[1])} & set(days))
    if kind == "W":
        n = int(term[1])
        return frozenset({min(weekdays, key=lambda d: abs(d - n))}) if n <= length else frozenset()
    if kind == "LW":
        return frozenset({max(weekdays)})
    same = [d for d in days if date(year, month, d).isoweekday() % 7 == int(term[1]) % 7]
    if kind == "#":
        k = int(term[2])
        return frozenset({same[k - 1]}) if k <= len(same) else frozenset()
    assert kind == "DL", term
    return frozenset({same[-1]})


def _wall(t: datetime, zone: ZoneInfo) -> tuple[datetime, int]:
    local = t.astimezone(zone)
    return local.replace(tzinfo=None, fold=0), local.fold


def brute_force(rule: Rule, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """Every fire in ``(after, until]`` (UTC datetimes), by walking UTC minutes."""
    fires: list[datetime] = []
    t = after.astimezone(UTC).replace(second=0, microsecond=0)
    prev_wall, _ = _wall(t, zone)
    t += MINUTE
    while t <= until:
        wall, fold = _wall(t, zone)
        fired = False
        step = wall - prev_wall
        if step > MINUTE and rule.shifts(step - MINUTE):
            skipped = prev_wall + MINUTE
            while skipped < wall:
                if rule.matches(skipped):
                    fired = True
                    break
                skipped += MINUTE
        if rule.matches(wall):
            if fold == 1:
                local = t.astimezone(zone)
                repeat = local.replace(fold=0).utcoffset() - local.utcoffset()
                if not rule.once(repeat):
                    fired = True
            else:
                fired = True
        if fired and t > after:
            fires.append(t)
        target = _skip_target(rule, wall)
        if target is not None:
            jump = target - wall
            landing = t + jump
            if t.astimezone(zone).utcoffset() == landing.astimezone(zone).utcoffset():
                t = landing
                prev_wall, _ = _wall(t - MINUTE, zone)
                continue
        prev_wall = wall
        t += MINUTE
    return fires


def _skip_target(rule: Rule, wall: datetime) -> datetime | None:
    """A later wall time such that none strictly between could fire, or None."""
    if not rule.day_matches(wall):
        target = wall.replace(hour=23, minute=50)
    elif wall.hour not in rule.hours:
        target = wall.replace(minute=59)
    else:
        later = [m for m in rule.minutes if m > wall.minute]
        target = wall.replace(minute=min(later)) if later else wall.replace(minute=59)
    return target if target - wall > MINUTE else None


@lru_cache(maxsize=None)
def transitions_in_year(key: str, year: int) -> tuple[datetime, ...]:
    """UTC instants in ``year`` where ``key``'s offset changes (zoneinfo scan)."""
    zone = ZoneInfo(key)
    start = datetime(year, 1, 1, tzinfo=UTC)
    step = timedelta(hours=6)
    found = []
    t = start
    offset = t.astimezone(zone).utcoffset()
    while t.year == year:
        nxt = t + step
        new = nxt.astimezone(zone).utcoffset()
        if new != offset:
            lo, hi = t, nxt  # offset(lo) == offset, offset(hi) == new
            while hi - lo > timedelta(seconds=1):
                mid = lo + (hi - lo) / 2
                mid = mid.replace(microsecond=0)
                if mid.astimezone(zone).utcoffset() == offset:
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
            offset = new
        t = nxt
    return tuple(found)


def tzif_bytes(
    transitions: list[tuple[int, int]],
    types: list[tuple[int, bool, str]],
    footer: str,
) -> bytes:
    """A TZif version 2 file: ``transitions`` are ``(utc_second, type_index)``,
    ``types`` ``(utc_offset, is_dst, abbreviation)``, ``footer`` a POSIX TZ string."""
    abbrs = b""
    index = {}
    for _, _, abbr in types:
        if abbr not in index:
            index[abbr] = len(abbrs)
            abbrs += abbr.encode() + b"\0"

    def block(size: str) -> bytes:
        header = b"TZif2" + b"\0" * 15 + struct.pack(">6l", 0, 0, 0, len(transitions), len(types), len(abbrs))
        body = b"".join(struct.pack(">" + size, t) for t, _ in transitions)
        body += bytes(i for _, i in transitions)
        body += b"".join(struct.pack(">lBB", off, dst, index[abbr]) for off, dst, abbr in types)
        return header + body + abbrs

    return block("l") + block("q") + b"\n" + footer.encode() + b"\n"
