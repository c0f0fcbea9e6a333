"""Quartz's day terms in cron expressions: which day of a month each names.

Day of month (docs/architecture.md, "Semantics"):

- ``L``: the month's last day; ``L-n`` (0 <= n <= 30): n days before it (a
  month shorter than n + 1 days has none);
- ``nW`` (1 <= n <= 31): the weekday (Monday to Friday) nearest day n, never
  leaving the month: the 1st on a Saturday moves to Monday the 3rd, the
  last day on a Sunday to the Friday before; a month without day n has none;
- ``LW``: the month's last weekday.

Day of week (Sunday 0 or 7, or a name):

- ``d#k`` (1 <= k <= 5): the k-th such weekday of the month (a month
  without a fifth has none), ``FRI#3``;
- ``dL``: the month's last such weekday, ``FRIL``, ``5L``.

A term names at most one day of each month, so the matcher asks, month by
month, for a bit mask of the days the whole expression matches
(:func:`month_mask_function`): the plain values of each day field, plus
these terms' days, combined by Vixie's rule (either field when both are
restricted, both otherwise).
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date

from .errors import ScheduleError

_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_SATURDAY, _SUNDAY = 6, 0

_LAST = re.compile(r"L(?:-(\d+))?")
_NEAREST = re.compile(r"(\d+)W")
_NTH = re.compile(r"(\w+)#(\d+)")
_LAST_OF = re.compile(r"(\w+)L")


@dataclass(frozen=True, slots=True)
class DayTerm:
    """One Quartz day term. ``kind``: ``L`` (``value`` days before the last
    day), ``W`` (nearest weekday to day ``value``), ``LW``, ``#`` (the
    ``week``-th weekday ``value``) or ``DL`` (the last weekday ``value``)."""

    kind: str
    value: int = 0
    week: int = 0
    text: str = ""

    def day_in(self, length: int, first_weekday: int) -> int:
        """The day of a month of ``length`` days starting on ``first_weekday``
        (Sunday 0) that this term names, or 0 when it names none."""
        kind = self.kind
        if kind == "L":
            day = length - self.value
            return day if day >= 1 else 0
        if kind == "W":
            return _nearest_weekday(self.value, length, first_weekday) if self.value <= length else 0
        if kind == "LW":
            return _nearest_weekday(length, length, first_weekday)
        if kind == "#":
            day = 1 + (self.value - first_weekday) % 7 + 7 * (self.week - 1)
            return day if day <= length else 0
        last_weekday = (first_weekday + length - 1) % 7
        return length - (last_weekday - self.value) % 7

    def describe(self) -> str:
        """In words, for ``tickwheel cron next --explain``."""
        kind = self.kind
        if kind == "L":
            return f"{self.text}: the last day of the month" + (f" less {self.value}" if self.value else "")
        if kind == "W":
            return f"{self.text}: the weekday nearest day {self.value}"
        if kind == "LW":
            return f"{self.text}: the last weekday of the month"
        if kind == "#":
            return f"{self.text}: the {_ORDINALS[self.week]} {_DAY_NAMES[self.value]} of the month"
        return f"{self.text}: the last {_DAY_NAMES[self.value]} of the month"


def terms_naming(terms: Iterable[DayTerm], day: date) -> list[DayTerm]:
    """Those of ``terms`` that name ``day`` (for ``--explain``)."""
    first_weekday, length = calendar.monthrange(day.year, day.month)
    first_weekday = (first_weekday + 1) % 7  # calendar counts from Monday 0; here Sunday is 0
    return [term for term in terms if term.day_in(length, first_weekday) == day.day]


def _nearest_weekday(day: int, length: int, first_weekday: int) -> int:
    weekday = (first_weekday + day - 1) % 7
    if weekday == _SATURDAY:
        return day - 1 if day > 1 else day + 2
    if weekday == _SUNDAY:
        return day + 1 if day < length else day - 2
    return day


def parse_day_of_month_term(text: str, fail: Callable[[str], ScheduleError]) -> DayTerm | None:
    """``text`` as a day-of-month Quartz term; None when it is not one (no L
    or W in it). Raises ``fail(reason)`` on a malformed one."""
    upper = text.upper()
    if "L" not in upper and "W" not in upper:
        return None
    if upper == "LW":
        return DayTerm("LW", text=upper)
    if (m := _LAST.fullmatch(upper)) is not None:
        offset = int(m.group(1) or 0)
        if offset > 30:
            raise fail(f"{text!r}: n in L-n must be 0 to 30")
        return DayTerm("L", offset, text=upper)
    if (m := _NEAREST.fullmatch(upper)) is not None:
        day = int(m.group(1))
        if not 1 <= day <= 31:
            raise fail(f"{text!r}: the day in nW must be 1 to 31")
        return DayTerm("W", day, text=upper)
    raise fail(f"bad term {text!r} (Quartz day terms: L, L-n, nW, LW; no ranges or steps)")


def parse_day_of_week_term(
    text: str, weekday: Callable[[str], int], fail: Callable[[str], ScheduleError]
) -> DayTerm | None:
    """``text`` as a day-of-week Quartz term (``d#k``, ``dL``); None when it
    is not one. ``weekday`` reads ``d`` (a number 0-7 or a name; it raises
    on anything else). Raises ``fail(reason)`` on a malformed term."""
    upper = text.upper()
    if "#" in upper:
        m = _NTH.fullmatch(upper)
        if m is None:
            raise fail(f"bad term {text!r} (use d#k, say FRI#3: the third Friday)")
        day, week = weekday(m.group(1)) % 7, int(m.group(2))
        if not 1 <= week <= 5:
            raise fail(f"{text!r}: k in d#k must be 1 to 5")
        return DayTerm("#", day, week, text=upper)
    if upper.endswith("L"):
        m = _LAST_OF.fullmatch(upper)
        if m is None:
            raise fail(f"bad term {text!r} (use dL, say FRIL or 5L: the last Friday)")
        return DayTerm("DL", weekday(m.group(1)) % 7, text=upper)
    return None


def _bits(days: Iterable[int]) -> int:
    mask = 0
    for day in days:
        mask |= 1 << day
    return mask


@functools.lru_cache(maxsize=128)
def _days_by_first_weekday(weekdays: frozenset[int]) -> tuple[int, ...]:
    """``[w]``: the days 1-31 whose weekday is listed, in a month starting on
    weekday ``w`` (pure; one per set of weekdays, of which there are 128)."""
    return tuple(_bits(d for d in range(1, 32) if (w + d - 1) % 7 in weekdays) for w in range(7))


def month_mask_function(
    days: frozenset[int],
    weekdays: frozenset[int],
    dom_terms: tuple[DayTerm, ...],
    dow_terms: tuple[DayTerm, ...],
    either: bool,
) -> Callable[[int, int], int]:
    """``mask(length, first_weekday)``: bit ``d`` set for each day ``d`` of
    such a month that the day fields match. ``days`` and ``weekdays`` are the
    fields' plain values (all of them for ``*``); ``either`` is Vixie's rule
    (both fields restricted: a day matches if either does)."""
    plain_days = _bits(days)
    by_first = _days_by_first_weekday(weekdays)

    def mask(length: int, first_weekday: int) -> int:
        of_month = plain_days
        for term in dom_terms:
            of_month |= 1 << term.day_in(length, first_weekday)
        of_week = by_first[first_weekday]
        for term in dow_terms:
            of_week |= 1 << term.day_in(length, first_weekday)
        matched = (of_month | of_week) if either else (of_month & of_week)
        return matched & ((2 << length) - 2)  # days 1..length; bit 0 is "none"

    return mask
