"""The business-day calendars of one claim batch: loaded in one read, kept per version, applied to each plan.

:class:`CalendarCache` answers the calendars a batch's jobs name with one
SELECT of their versions (and a second of the definitions it does not hold
at those versions, when there are any): no round trip per job, and a
calendar is decoded once per version. A calendar that is gone (or cannot be
decoded) is absent from the answer: the job is then left out of the claim as
``schedule_uncomputable`` with the reason, never run as if it named none.

:func:`calendar_plan` is the pure step (the rule over a plan,
:mod:`~tickwheel_server.policy.calendarplan`); :func:`record_calendar_skips`
writes its skip ranges (reason ``calendar``) in the claim's transaction.
:class:`PreviousClaim` is a ``previous`` job's rule within one claim: when
its occurrences are reached, when they are due, where its cursor is scanned.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import date, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from tickwheel.v1 import calendar_pb2

from ..jobspec import JobDefinition
from ..policy.calendarplan import apply_calendar, decide_previous_for
from ..policy.claim import Plan, PlannedSkip
from ..schedule import Fire, ScheduleError
from ..schedule.businessdays import BusinessCalendar, calendar
from ..schedule.calendarrule import CalendarRule, Decision, Verdict, decide, reached_at
from .base import pairs_in
from .claim_writes import record_skip
from .engine import capabilities
from .quarantine import SCHEDULE_UNCOMPUTABLE, Unreadable
from .tables import calendars

CALENDAR_REASON = "calendar"
"""The reason of a skip range the calendar rule records."""

Key = tuple[str, str]
"""(tenant, calendar name)."""


def decode_calendar(spec: bytes) -> BusinessCalendar:
    """A stored calendar definition (``calendars.spec``) as the arithmetic
    computes with it; ``ValueError`` when it does not decode."""
    try:
        message = calendar_pb2.Calendar.FromString(spec)
        return calendar(
            message.time_zone, message.business_days,
            [date.fromisoformat(d) for d in message.holidays], [date.fromisoformat(d) for d in message.half_days],
        )  # fmt: skip
    except Exception as error:  # DecodeError, a malformed date, an empty weekday set
        raise ValueError(f"the calendar's definition does not decode: {error}") from None


class CalendarCache:
    """Decoded calendars by (tenant, name), valid for one stored version
    (its ``version`` and ``updated_at``: a calendar deleted and created
    again under its name starts again at version 1): a bounded LRU, safe
    across threads."""

    def __init__(self, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self._entries: OrderedDict[Key, tuple[tuple[int, int], BusinessCalendar]] = OrderedDict()
        self._lock = threading.Lock()
        self.decoded = 0
        """How many definitions were read and decoded (a test sees the cache work)."""

    def load_for(
        self, conn: Connection, rows: Iterable, definitions: Iterable[JobDefinition | None]
    ) -> dict[Key, BusinessCalendar]:
        """The calendars the due ``rows`` name (``definitions``: theirs, in
        the same order; None for a row without one), by (tenant, name)."""
        keys = set()
        for row, definition in zip(rows, definitions):
            ref = None if definition is None else definition.calendar
            if ref is not None:
                keys.add((row.tenant, ref.name))
        return self.load(conn, keys) if keys else {}

    def load(self, conn: Connection, keys: set[Key]) -> dict[Key, BusinessCalendar]:
        """The calendars of ``keys`` that exist and decode, at their stored
        versions: one SELECT of the versions, one more of the definitions
        not cached at them."""
        if not keys:
            return {}
        wanted = sorted(keys)
        caps = capabilities(conn)
        versions = {
            (row.tenant, row.name): (row.version, row.updated_at)
            for row in conn.execute(
                sa.select(calendars.c.tenant, calendars.c.name, calendars.c.version, calendars.c.updated_at)
                .where(pairs_in(caps, (calendars.c.tenant, calendars.c.name), wanted, ("TEXT", "TEXT")))
            )
        }  # fmt: skip
        found: dict[Key, BusinessCalendar] = {}
        missing: list[Key] = []
        with self._lock:
            for key, version in versions.items():
                entry = self._entries.get(key)
                if entry is not None and entry[0] == version:
                    self._entries.move_to_end(key)
                    found[key] = entry[1]
                else:
                    missing.append(key)
        if missing:
            rows = conn.execute(
                sa.select(calendars.c.tenant, calendars.c.name, calendars.c.version, calendars.c.updated_at,
                          calendars.c.spec)
                .where(pairs_in(caps, (calendars.c.tenant, calendars.c.name), missing, ("TEXT", "TEXT")))
            ).all()
            for row in rows:
                try:
                    decoded = decode_calendar(bytes(row.spec))
                except ValueError:
                    continue
                key = (row.tenant, row.name)
                found[key] = decoded
                with self._lock:
                    self.decoded += 1
                    self._entries[key] = ((row.version, row.updated_at), decoded)
                    self._entries.move_to_end(key)
                    while len(self._entries) > self.max_entries:
                        self._entries.popitem(last=False)
        return found


def _calendar_of(row, ref, loaded: dict[Key, BusinessCalendar]) -> BusinessCalendar:
    """The calendar job ``row`` names (``ref``); :class:`Unreadable` when it is gone."""
    cal = loaded.get((row.tenant, ref.name))
    if cal is None:
        raise Unreadable(SCHEDULE_UNCOMPUTABLE, f"calendar {ref.name!r} does not exist (or does not decode)")
    return cal


_RULE_ERRORS = (ScheduleError, LookupError, ValueError, OverflowError)
"""What the rule raises for a day or instant it cannot compute: the job is then ``schedule_uncomputable``."""


def _uncomputable(ref, error: Exception) -> Unreadable:
    return Unreadable(SCHEDULE_UNCOMPUTABLE, f"calendar {ref.name!r}: {error}")


class PreviousClaim:
    """A ``previous`` job's rule within one claim (pure): each occurrence
    decided once, for the plan's walk (:meth:`reach`), its misfire test
    (:meth:`due`), the calendar's verdict (:meth:`decision`) and the new
    cursor's scan key.

    An occurrence is never moved before ``now`` (the claim's instant), except
    the cursor's when its row holds a moved instant (``next_nominal_at``
    set): that was decided, not before its own write, when the cursor was
    written, so a claim that comes late (an outage) finds it due in the past
    and the misfire policy judges it, as for a ``next`` run."""

    __slots__ = ("_cal", "_name", "_schedule", "_now", "_trusted", "_decided")

    def __init__(self, row, spec: JobDefinition, loaded: dict[Key, BusinessCalendar], cursor: Fire, now: datetime):
        ref = spec.calendar
        self._cal = _calendar_of(row, ref, loaded)
        self._name = ref.name
        self._schedule = spec.schedule
        self._now = now
        self._trusted = cursor.nominal_at if row.next_nominal_at is not None else None
        self._decided: dict[datetime, Decision] = {}

    def decision(self, nominal_at: datetime, due_at: datetime) -> Decision:
        """The rule's verdict on the occurrence at ``nominal_at``; :class:`Unreadable` when it cannot be computed."""
        decided = self._decided.get(nominal_at)
        if decided is None:
            not_before = None if nominal_at == self._trusted else self._now
            try:
                decided = decide_previous_for(self._cal, self._name, self._schedule, nominal_at, due_at, not_before)
            except _RULE_ERRORS as error:
                raise Unreadable(SCHEDULE_UNCOMPUTABLE, f"calendar {self._name!r}: {error}") from None
            self._decided[nominal_at] = decided
        return decided

    def reach(self, fire: Fire) -> datetime:
        """The instant the claim must reach ``fire`` by: its scan key."""
        return reached_at(self.decision(fire.nominal_at, fire.due_at), fire.nominal_at, fire.due_at)

    def due(self, fire: Fire) -> datetime:
        """When ``fire`` is due as the rule leaves it (its own due instant unless moved)."""
        decided = self.decision(fire.nominal_at, fire.due_at)
        return decided.due_at if decided.verdict is Verdict.RUN else fire.due_at


def calendar_plan(
    row, spec: JobDefinition, plan: Plan, loaded: dict[Key, BusinessCalendar], previous: PreviousClaim | None = None
) -> tuple[Plan, list[PlannedSkip]]:
    """``plan`` as the job's calendar leaves it, and the skip ranges to
    record (pure); ``previous`` is the job's rule in this claim when it is
    ``previous``. :class:`Unreadable` (``schedule_uncomputable``) when the
    calendar is gone or the rule cannot be computed."""
    ref = spec.calendar
    cal = _calendar_of(row, ref, loaded)
    zone = spec.schedule.zone
    try:
        if previous is not None:
            applied = apply_calendar(
                plan, lambda execution, following: previous.decision(execution.nominal_at, execution.due_at)
            )
        else:
            applied = apply_calendar(
                plan,
                lambda execution, following: decide(
                    cal, ref.name, ref.rule, execution.nominal_at, execution.due_at, zone=zone,
                    next_nominal_at=following,
                ),
            )
    except _RULE_ERRORS as error:
        raise _uncomputable(ref, error) from None
    return applied.plan, applied.skips


def calendar_due(row, spec: JobDefinition, loaded: dict[Key, BusinessCalendar]) -> Callable[[Fire], datetime] | None:
    """For the claim's misfire test (``plan_claim``'s ``due_of``): the
    instant the job's calendar makes an occurrence due, where ``next`` moves
    it (a Saturday's run due on Monday is not missed on Sunday); None for
    the rules that never move a run (``previous`` has
    :meth:`PreviousClaim.due`). :class:`Unreadable`
    (``schedule_uncomputable``) when the calendar is gone."""
    ref = spec.calendar
    if ref.rule is not CalendarRule.NEXT:
        return None
    cal = _calendar_of(row, ref, loaded)
    zone = spec.schedule.zone

    def due_of(fire: Fire) -> datetime:
        try:
            decision = decide(cal, ref.name, ref.rule, fire.nominal_at, fire.due_at, zone=zone, next_nominal_at=None)
        except _RULE_ERRORS as error:
            raise _uncomputable(ref, error) from None
        return decision.due_at if decision.verdict is Verdict.RUN else fire.due_at

    return due_of


def record_calendar_skips(conn: Connection, row, skips: list[PlannedSkip], now_us: int) -> None:
    """Record each range (extending the job's open ``calendar`` range that continues at its first occurrence)."""
    for skip in skips:
        record_skip(conn, row, skip, CALENDAR_REASON, now_us)
