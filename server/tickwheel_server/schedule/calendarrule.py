"""A job's calendar rule: what happens to one nominal occurrence that is not on a business day (pure).

An occurrence is on a business day when the date of its nominal instant in
the *calendar's* zone is a business day (or a half-day) of the calendar
(:mod:`.businessdays`). Otherwise the job's rule decides
(docs/architecture.md, "Calendars"):

- ``only``: :attr:`Verdict.DROP`, nothing runs and nothing is recorded;
- ``skip``: :attr:`Verdict.SKIP`, nothing runs, a ``calendar`` skip is recorded;
- ``next``: :attr:`Verdict.RUN` on the first later day of the *job's* zone
  whose instant at the nominal wall time falls on a business day, due at
  that instant plus the job's jitter; a wall time in a DST gap becomes the
  first instant after the gap, a repeated one the earlier instant. When that
  instant is at or after the schedule's next nominal occurrence, or no
  business day is found up to :data:`~.businessdays.MAX_DATE`, the
  occurrence is :attr:`Verdict.SKIP` instead: two runs never collapse into
  one silently, and the order of runs is the order of their nominal instants.
- ``previous``: the mirror of ``next``: the last earlier day whose instant
  at the nominal wall time falls on a business day, strictly after the
  schedule's previous nominal occurrence and not before ``not_before`` (the
  instant the decision is made: a run is never moved into the past);
  otherwise :attr:`Verdict.SKIP`. :func:`decide_previous` decides it where
  the previous occurrence is not at hand (only the schedule's walk forward
  is), and :func:`reached_at` is the instant the claim must reach the
  occurrence by (its scan key, ``job_cursors.next_run_at``).

The nominal instant (and so the execution id) never changes; only the due
instant does. Bounded: a search steps one local day at a time and stops at
the neighbouring occurrence or after ``7 × (holidays + 1) + 2`` days (every
week holds a business weekday, so a business day lies within that).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from .businessdays import (
    MAX_DATE, MIN_DATE, BusinessCalendar, is_business_day, local_day, next_business_day, previous_business_day,
    zone_local, zone_wall_instant,
)
from .zones import ZoneRegistry


class CalendarRule(enum.Enum):
    ONLY = "only"
    NEXT = "next"
    PREVIOUS = "previous"
    SKIP = "skip"


class Verdict(enum.Enum):
    RUN = "run"
    """The occurrence runs, due at :attr:`Decision.due_at` (moved or not)."""
    DROP = "drop"
    """Nothing runs and nothing is recorded (``only``)."""
    SKIP = "skip"
    """Nothing runs; a ``calendar`` skip is recorded."""


class Decision(NamedTuple):
    verdict: Verdict
    due_at: datetime | None
    """For RUN: when the occurrence may be handed out (never before it)."""
    note: str = ""
    """Empty for a business day; otherwise what the calendar did, for previews and skip records."""

    @property
    def moved(self) -> bool:
        return self.verdict is Verdict.RUN and bool(self.note)


def decide(
    cal: BusinessCalendar,
    name: str,
    rule: CalendarRule,
    nominal_at: datetime,
    due_at: datetime,
    *,
    zone: str,
    next_nominal_at: datetime | None,
    previous_nominal_at: datetime | None = None,
    not_before: datetime | None = None,
    registry: ZoneRegistry | None = None,
) -> Decision:
    """What calendar ``name`` (``cal``) and ``rule`` make of the occurrence
    at ``nominal_at`` (due at ``due_at``: nominal plus jitter) of a job whose
    schedule runs in ``zone``.

    ``next_nominal_at`` is the schedule's next nominal occurrence (None when
    the schedule ends after this one); ``previous_nominal_at`` the one
    before and ``not_before`` the earliest instant a run may be moved to
    (``previous`` only). A business day's occurrence runs as it is."""
    day = local_day(cal, nominal_at, registry)
    if MIN_DATE <= day <= MAX_DATE and is_business_day(cal, day):
        return Decision(Verdict.RUN, due_at)
    why = f"{day.isoformat()} is not a business day of calendar {name}"
    if rule is CalendarRule.ONLY:
        return Decision(Verdict.DROP, None, why)
    if rule is CalendarRule.SKIP:
        return Decision(Verdict.SKIP, None, why)
    step = 1 if rule is CalendarRule.NEXT else -1
    moved = _search(cal, nominal_at, step, zone, next_nominal_at if step > 0 else previous_nominal_at, registry)
    if moved is not None and step < 0 and not_before is not None and moved < not_before:
        moved = None
    if moved is None:
        bound = "the next occurrence" if step > 0 else "the previous occurrence"
        return Decision(Verdict.SKIP, None, f"{why}: no business day before {bound}")
    return Decision(
        Verdict.RUN, moved + (due_at - nominal_at), f"{why}: moved to {_rfc3339(moved, zone, registry)}"
    )


def decide_previous(
    cal: BusinessCalendar,
    name: str,
    nominal_at: datetime,
    due_at: datetime,
    *,
    zone: str,
    first_from: Callable[[datetime], datetime | None],
    not_before: datetime | None,
    registry: ZoneRegistry | None = None,
) -> Decision:
    """:func:`decide` under ``previous`` for an occurrence whose previous
    nominal occurrence is not known: ``first_from(at)`` is the schedule's
    first nominal occurrence at or after ``at`` (None when there is none).
    A moved instant with an occurrence at or after it and before
    ``nominal_at`` would collide with that occurrence: the occurrence is
    then skipped, as :func:`decide` skips it given the previous occurrence.
    Costs one more walk of the schedule only when the rule moves the run."""
    decision = decide(
        cal, name, CalendarRule.PREVIOUS, nominal_at, due_at, zone=zone, next_nominal_at=None,
        not_before=not_before, registry=registry,
    )  # fmt: skip
    if not decision.moved:
        return decision
    first = first_from(decision.due_at - (due_at - nominal_at))
    if first is None or first >= nominal_at:
        return decision
    return decide(
        cal, name, CalendarRule.PREVIOUS, nominal_at, due_at, zone=zone, next_nominal_at=None,
        previous_nominal_at=first, not_before=not_before, registry=registry,
    )  # fmt: skip


def reached_at(decision: Decision, nominal_at: datetime, due_at: datetime) -> datetime:
    """The instant a claim must reach an occurrence by (its scan key): the
    moved instant when the rule moved it earlier (``previous``), otherwise
    the nominal one (a run moved later is still reached at its nominal
    instant, as before: the claim decides it then)."""
    if decision.moved:
        moved = decision.due_at - (due_at - nominal_at)
        if moved < nominal_at:
            return moved
    return nominal_at


def _search(
    cal: BusinessCalendar, nominal_at: datetime, step: int, zone: str, bound: datetime | None,
    registry: ZoneRegistry | None,
) -> datetime | None:
    """The first instant at ``nominal_at``'s wall time in ``zone``, ``step``
    days at a time away from it, whose calendar day is a business day;
    None when it reaches ``bound`` (the neighbouring occurrence), the date
    bounds or the search's length.

    A candidate whose calendar day is not a business day jumps towards the
    calendar's next (previous) business day, landing two days short of it
    (the calendar's zone and ``zone`` may disagree on the date by a day, and
    their offsets may move apart by up to a day between the two dates: a
    daylight-saving change, a zone crossing the date line): a
    run of holidays costs a few candidates, not one per day (a search used
    to cross up to ``7 × (holidays + 1)`` days, each a zone conversion)."""
    day, wall = zone_local(zone, nominal_at, registry)
    offset = 0
    for _ in range(7 * (len(cal.holidays) + 1) + 3):
        offset += 1
        candidate_day = day + timedelta(days=step * offset)
        if not MIN_DATE <= candidate_day <= MAX_DATE:
            return None
        candidate = zone_wall_instant(zone, candidate_day, wall, registry)
        if bound is not None and (candidate >= bound if step > 0 else candidate <= bound):
            return None
        calendar_day = local_day(cal, candidate, registry)
        if not MIN_DATE <= calendar_day <= MAX_DATE:
            continue
        if is_business_day(cal, calendar_day):
            return candidate
        target = next_business_day(cal, calendar_day) if step > 0 else previous_business_day(cal, calendar_day)
        if target is None:
            return None
        offset += max(0, abs((target - calendar_day).days) - 3)
    return None


def _rfc3339(at: datetime, zone: str, registry: ZoneRegistry | None) -> str:
    day, wall = zone_local(zone, at, registry)
    local = datetime.combine(day, wall)
    offset = local - at.replace(tzinfo=None)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"{local.isoformat(timespec='seconds')}{sign}{minutes // 60:02d}:{minutes % 60:02d}"
