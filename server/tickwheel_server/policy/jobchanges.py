"""What a job change (update, pause, resume) plans: pure rules, table-tested.

The API decodes the request and the stored definition and calls the plans
(:func:`plan_update`, :func:`resume_plan`); the store reads the executions in
the transaction that changes the job, calls the rules below, and applies the
answer in that same transaction (see ``docs/architecture.md``, "Job
changes"). No clock is read: ``now`` is passed in.

Where the cursor goes:

- **Update** (:func:`plan_update`, :func:`next_cursor`, :func:`replan`).
  A schedule change moves the cursor to the new schedule's first occurrence
  not yet accounted for; a paused job records the old schedule's paused span
  so far.
- **Resume** (:func:`resume_plan`, :func:`paused_span`). The paused span's
  occurrences still within the job's misfire threshold (its most recent,
  at most :func:`resume_late_limit`; judged by the instant the job's
  calendar moved each to, when it names one) run late: the cursor starts
  at the earliest of them. The older ones become one skip range; with none late
  the cursor is the first occurrence after ``now``.

What happens to the executions not started. Three rules:

- **Resume** (:func:`expired_at_resume`). A pause holds the job's
  executions not started; the resume releases each one unless it is a
  scheduled occurrence that never reached a worker and is now more than the
  misfire threshold past its due instant. Those join the paused span's skip
  range; everything else (future or late within the threshold, retries,
  re-deliveries, triggers, backfills) runs.
- **Update, what a run carries** (:func:`row_refresh`). An execution row
  carries its payload and its handler (the routing of the hand-out); the
  target's other fields, the timeout, the retry, overlap and misfire
  policies and the concurrency keys are read from the job when they are
  used. So only a payload change refreshes the pending occurrences' payload,
  and only a handler change (or a change between handler and HTTP) moves
  the rows' routing.
- **Update, when a run happens** (:func:`plan_recreation`). When the
  schedule changes (expression, zone, DST policy, jitter, start, end,
  max_runs, one-off instant), the pending occurrences are planned again
  under the new schedule with the id rule of the dispatcher: an instant the
  new schedule keeps keeps its row (and so its id), re-created in place with
  the new due instant, payload and handler; an instant it does not have is
  canceled; an instant of the new schedule between them that has no row is
  created.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from tickwheel.v1 import job_pb2

from ..schedule import Fire, Schedule, ScheduleKind, first_fire, next_fire
from .backlog import not_started_cap
from .misfire import is_missed

_TICK = timedelta(microseconds=1)

MAX_COUNTED_SKIPS = 100_000
"""A paused span is counted occurrence by occurrence up to this many (see :func:`paused_span`)."""


# --- resume -----------------------------------------------------------------------------------


def expired_at_resume(
    *, origin: str, attempt: int, delivery: int, due_at: datetime, now: datetime, threshold: timedelta
) -> bool:
    """True when a held execution is not released by a resume at ``now``.

    Only a scheduled occurrence on its first attempt that no worker ever
    received (``delivery`` 0) expires, and only when it is more than
    ``threshold`` (the job's misfire threshold) past its due instant: the
    dispatcher's definition of a missed occurrence. A retry or a
    re-delivery already started once; a trigger or a backfill was asked
    for: they run, however late.
    """
    return origin == "scheduled" and attempt == 1 and delivery == 0 and now - due_at > threshold


# --- update: what a run carries ---------------------------------------------------------------


@dataclass(frozen=True)
class RowRefresh:
    """What an update writes on the rows of executions not started, beyond a re-plan."""

    payload: bytes | None
    """The new payload for the pending occurrences; None: unchanged."""
    handler_changed: bool
    handler: str | None
    """The new definition's handler (None: an HTTP target)."""


def _handler(job: job_pb2.Job) -> str | None:
    # jobspec.handler_of's rule; jobspec cannot be imported here (it imports
    # the API's converters, which import the store, which imports this).
    return job.target.handler.name if job.target.WhichOneof("kind") == "handler" else None


def row_refresh(stored: job_pb2.Job, changed: job_pb2.Job) -> RowRefresh:
    """Compare two definitions on what an execution row carries."""
    handler = _handler(changed)
    return RowRefresh(
        payload=changed.payload if changed.payload != stored.payload else None,
        handler_changed=handler != _handler(stored),
        handler=handler,
    )


# --- update: when a run happens ---------------------------------------------------------------


@dataclass(frozen=True)
class Pending:
    """A scheduled occurrence claimed ahead that has not started: origin
    ``scheduled``, first attempt, never handed out, ``scheduled`` or
    ``waiting`` (perhaps held by a pause)."""

    nominal_at: datetime
    due_at: datetime


@dataclass(frozen=True)
class Recreation:
    """An update's re-plan of a job's pending occurrences and its cursor."""

    kept: dict[datetime, Fire] = field(default_factory=dict)
    """Pending instants the new schedule has: nominal instant → the new fire (its due instant)."""
    created: list[Fire] = field(default_factory=list)
    """Instants of the new schedule among the pending ones that have no row yet (all in the future)."""
    canceled: list[datetime] = field(default_factory=list)
    """Pending instants the new schedule does not have."""
    next_fire: Fire | None = None
    """The new cursor (None: the schedule has ended)."""
    runs: int = 0
    """``run_count`` afterwards: the runs before the pending ones, plus those kept and created."""


def plan_recreation(
    schedule: Schedule, pending: Sequence[Pending], start: Fire | None, *, now: datetime, runs_so_far: int
) -> Recreation:
    """Re-plan ``pending`` under ``schedule``, the cursor starting at ``start``.

    ``start`` is the new schedule's first occurrence not yet accounted for
    by anything but the pending rows (the API's cursor rule; at or before
    ``now`` only when the dispatcher is behind or a one-off's instant is
    past), and ``runs_so_far`` the occurrences consumed before the pending
    ones (what ``max_runs`` counts).

    - A pending instant before ``start`` is kept when it is an occurrence of
      the new schedule, canceled otherwise.
    - From ``start`` the new schedule is walked through the last pending
      instant, as the dispatcher would: an occurrence with a pending row is
      kept, one without a row is created when it is in the future. A past
      one without a row ends the walk there: the cursor stays on it and the
      dispatcher's misfire policy decides it (no pending row lies after it:
      ``start`` is only past for a backlog, which is after every pending
      row, or for a one-off, which has one occurrence).
    - Pending instants the walk did not keep are canceled; the cursor is the
      walk's next occurrence.
    """
    at = {p.nominal_at for p in pending}
    ordered = sorted(at)
    kept: dict[datetime, Fire] = {}
    created: list[Fire] = []
    runs = runs_so_far
    for nominal in ordered:
        if start is not None and nominal >= start.nominal_at:
            break
        fire = next_fire(schedule, nominal - _TICK, runs)
        if fire is not None and fire.nominal_at == nominal:
            kept[nominal] = fire
            runs += 1
    fire = start
    if fire is not None and schedule.max_runs and runs >= schedule.max_runs:
        fire = None
    last = ordered[-1] if ordered else None
    while fire is not None and last is not None and fire.nominal_at <= last:
        if fire.nominal_at in at:
            kept[fire.nominal_at] = fire
        elif fire.nominal_at > now:
            created.append(fire)
        else:
            break
        runs += 1
        fire = next_fire(schedule, fire.nominal_at, runs)
    canceled = [nominal for nominal in ordered if nominal not in kept]
    return Recreation(kept=kept, created=created, canceled=canceled, next_fire=fire, runs=runs)


# --- update and resume: where the cursor goes ------------------------------------------------


@dataclass(frozen=True)
class CursorView:
    """What an update's reschedule decision sees, read in the update's
    transaction (so it includes whatever the dispatcher committed before)."""

    state: str
    next_run_at: datetime | None
    """The cursor before the update: the first occurrence not yet consumed."""
    run_count: int
    """Occurrences consumed so far, including any ``skipped`` the update
    records, not counting the ``pending`` ones (the update plans them again)."""
    last_created_at: datetime | None
    """Nominal instant of the job's latest scheduled or backfilled execution
    (any status) other than the ``pending`` ones, or None. A new cursor must
    lie after it: those ids exist."""
    pending: tuple[Pending, ...] = ()
    """The scheduled occurrences claimed ahead that have not started (first
    attempt, never handed out): what the update re-creates."""


Reschedule = Callable[[CursorView], Recreation]
"""A pure decision: the pending occurrences under the new schedule and the
job's new cursor (see :func:`plan_recreation`)."""


@dataclass(frozen=True)
class SkippedSpan:
    """Occurrences a pause kept from running, as the API counted them with the
    engine: the first (the stored cursor), the last, and how many."""

    from_at: datetime
    to_at: datetime
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or self.to_at < self.from_at:
            raise ValueError("a skipped span holds at least one occurrence, from_at <= to_at")


class StoredCursor(Protocol):
    """What the plans read of a stored job (``store.jobs.JobRecord`` has it)."""

    @property
    def state(self) -> str: ...
    @property
    def next_run_at(self) -> datetime | None: ...
    @property
    def next_due_at(self) -> datetime | None: ...
    @property
    def run_count(self) -> int: ...
    @property
    def tzdata_version(self) -> str: ...


def _cursor_fire(next_run_at: datetime, next_due_at: datetime | None) -> Fire:
    return Fire(next_run_at, next_due_at or next_run_at, 0)


@dataclass(frozen=True)
class UpdatePlan:
    """What :meth:`JobStore.update` needs beyond the new definition."""

    reschedule: Reschedule | None
    """None: the schedule did not change, the cursor and the pending occurrences stay."""
    skipped: SkippedSpan | None
    """A paused job whose schedule changed: the old schedule's paused span so far."""
    tzdata_version: str


def next_cursor(schedule: Schedule, now: datetime, accounted_until: datetime | None, view: CursorView) -> Fire | None:
    """Where an updated job's cursor goes: the first occurrence of the new
    ``schedule`` not yet accounted for. Pure; the store calls it with what its
    transaction read.

    - Never at or before an occurrence that already has an execution
      (``view.last_created_at``: its id exists) or that ``accounted_until``
      says is recorded as skipped. The update's pending occurrences are not
      in ``view.last_created_at``: :func:`replan` decides them.
    - Cron: from ``now`` on; but an active job whose cursor is already past
      (the dispatcher is behind) keeps that backlog: the new schedule's
      occurrences from the old cursor on, which the dispatcher's misfire
      policy then runs or records.
    - One-off: its instant, even when past (the misfire policy decides, as at
      CreateJob), unless already accounted for.
    """
    floors = [t for t in (view.last_created_at, accounted_until) if t is not None]
    accounted = max(floors) if floors else None
    if schedule.kind is not ScheduleKind.CRON:
        if accounted is None:
            return first_fire(schedule, now)
        return next_fire(schedule, accounted, view.run_count)
    after = now
    if view.state == "active" and view.next_run_at is not None and view.next_run_at <= now:
        after = view.next_run_at - _TICK
    if accounted is not None and accounted > after:
        after = accounted
    return next_fire(schedule, after, view.run_count)


def replan(schedule: Schedule, now: datetime, accounted_until: datetime | None, view: CursorView) -> Recreation:
    """An updated job's pending occurrences and cursor under its new
    ``schedule`` (pure): the cursor rule of :func:`next_cursor`, then
    :func:`plan_recreation` from there."""
    start = next_cursor(schedule, now, accounted_until, view)
    return plan_recreation(schedule, view.pending, start, now=now, runs_so_far=view.run_count)


def plan_update(job: StoredCursor, stored: Schedule, changed: Schedule, now: datetime, *, tzdata: str) -> UpdatePlan:
    """Decide an update's cursor. ``stored`` is ``job``'s schedule, ``changed``
    the new one (decoded and checked by the caller), ``tzdata`` the release
    the new schedule is computed against.

    - Same schedule: nothing to reschedule; the job keeps its tzdata version.
    - Otherwise the store re-plans with :func:`replan` in its transaction; a
      paused job whose cursor is at or before ``now`` first records the old
      schedule's paused span (:func:`paused_span`), which the new cursor
      then lies after.

    CPU-bound when a paused span is long: run it off the event loop.
    """
    if changed == stored:
        return UpdatePlan(None, None, job.tzdata_version)
    skipped = None
    if job.state == "paused" and job.next_run_at is not None and job.next_run_at <= now:
        skipped = paused_span(stored, _cursor_fire(job.next_run_at, job.next_due_at), now, job.run_count).skipped
    accounted_until = None if skipped is None else skipped.to_at
    return UpdatePlan(functools.partial(replan, changed, now, accounted_until), skipped, tzdata)


@dataclass(frozen=True)
class PausedSpan:
    next_fire: Fire | None
    """The new cursor: the first occurrence not skipped. The first after now
    (the old cursor when it is still in the future); at resume, the earliest
    of the span's late occurrences that run (see :func:`paused_span`); None
    when the schedule ended while paused."""
    skipped: SkippedSpan | None
    """The occurrences from the old cursor up to now that do not run; None when there were none."""
    capped: bool = False
    """True when the span held more than the counting limit (see :func:`paused_span`)."""
    late: tuple[Fire, ...] = ()
    """The span's occurrences that run late, oldest first (the cursor is the first of them)."""
    after: Fire | None = None
    """With ``late``: the first occurrence after now (None: the schedule ends before)."""
    late_limit: int = 0
    """How many late ones may run, held executions released included (:func:`resume_late_limit`)."""

    @property
    def counted(self) -> int:
        """The span's occurrences counted one by one (what a resume is charged for)."""
        skipped = 0 if self.skipped is None else self.skipped.count
        return skipped if self.capped else skipped + len(self.late)

    def beside(self, released: int) -> PausedSpan:
        """This span at a resume that released ``released`` held executions
        (the claim's cap counts them too): only the most recent
        ``late_limit - released`` late ones still run, the older join the
        skip range (which still starts at the stored cursor)."""
        drop = len(self.late) - max(0, self.late_limit - released)
        if drop <= 0:
            return self
        dropped, kept = self.late[:drop], self.late[drop:]
        before = self.skipped
        skipped = SkippedSpan(
            dropped[0].nominal_at if before is None else before.from_at, dropped[-1].nominal_at,
            drop + (0 if before is None else before.count),
        )
        return replace(self, next_fire=kept[0] if kept else self.after, skipped=skipped, late=kept)


def _last_fires_at_or_before(schedule: Schedule, now: datetime, floor: datetime, k: int = 1) -> list[Fire]:
    """The last ``k`` fires nominally in ``(floor, now]`` (``max_runs``
    ignored), oldest first, found in windows that double backwards from
    ``now``: it lists only the fires of the first window that holds ``k``
    (or reaches ``floor``)."""
    width = timedelta(minutes=1)
    while True:
        start = max(now - width, floor)
        found: collections.deque[Fire] = collections.deque(maxlen=k)
        fire = next_fire(schedule, start)
        while fire is not None and fire.nominal_at <= now:
            found.append(fire)
            fire = next_fire(schedule, fire.nominal_at)
        if len(found) == k or start == floor:
            return list(found)
        width *= 2


def _own_due(fire: Fire) -> datetime:
    return fire.due_at


def _late_tail(
    tail: Sequence[Fire], now: datetime, threshold: timedelta | None, late_limit: int,
    due_of: Callable[[Fire], datetime] = _own_due,
) -> int:
    """How many of ``tail``'s last fires (at most ``late_limit``) are due
    (``due_of``) within ``threshold`` of ``now`` (not missed), counting back
    from the newest."""
    if threshold is None or late_limit < 1:
        return 0
    late = 0
    for fire in reversed(tail):
        if late == late_limit or is_missed(due_of(fire), now=now, threshold=threshold):
            break
        late += 1
    return late


def paused_span(
    schedule: Schedule, cursor: Fire, now: datetime, runs_so_far: int, *, limit: int = MAX_COUNTED_SKIPS,
    threshold: timedelta | None = None, late_limit: int = 0, due_of: Callable[[Fire], datetime] | None = None,
    reach_of: Callable[[Fire], datetime] | None = None,
) -> PausedSpan:
    """What a pause kept from running, and where the job resumes. Pure.

    ``cursor`` is the stored cursor (the first occurrence not consumed when
    the job was paused). An occurrence is in the span when it is nominally at
    or before ``now``; the job resumes at the first one nominally after
    ``now`` ("future"), or at ``cursor`` when that is still in the future
    (nothing skipped).

    Late ones (a resume: ``threshold``, the job's misfire threshold, and
    ``late_limit`` given). The span's most recent occurrences whose due
    instant is within ``threshold`` of ``now`` (not missed: the
    dispatcher's rule), at most ``late_limit`` of them, are not skipped:
    the cursor starts at the earliest of them, so the dispatcher's claim
    creates them, late, as it creates any late occurrence; only the older
    ones are the skip range. Whether the claim ran the occurrence ahead
    (a held execution) or not, an occurrence that came due while paused
    runs late when the resume is within the threshold of its due instant.

    A job's calendar (``policy.calendarplan.resume_instants``) moves
    occurrences: ``due_of(fire)`` is when one is due as moved (None: its own
    ``due_at``), what lateness is judged by, as the claim judges it (a
    Saturday's run moved to Monday is not missed by a resume on Sunday);
    ``reach_of(fire)``, at or before its nominal instant, when it came due
    (a ``previous`` move to the Friday before a Monday: a resume after
    Friday's run finds it in the span; None: the nominal instant).

    Bounded: at most ``limit`` (:data:`MAX_COUNTED_SKIPS`) occurrences are
    counted one by one. A longer span (a job every minute paused for more
    than ~70 days) is recorded with ``count`` = ``limit`` (what was counted,
    a lower bound; ``capped`` says so), while ``to_at`` is still the true
    last occurrence skipped, found by a backward search (with the late ones
    after it), and the cursor still the first after ``now`` or the first
    late one. ``max_runs`` then counts the recorded ``count`` only.
    """
    def came_due(fire: Fire) -> bool:  # the reach only matters after now: it is never after the nominal instant
        return fire.nominal_at <= now or (reach_of is not None and reach_of(fire) <= now)

    if not came_due(cursor):
        return PausedSpan(cursor, None)
    due = due_of or _own_due
    tail: collections.deque[Fire] = collections.deque([cursor], maxlen=max(late_limit, 0) + 1)
    count = 1
    fire = next_fire(schedule, cursor.nominal_at, runs_so_far + count)
    while fire is not None and came_due(fire):
        if count >= limit:
            found = _last_fires_at_or_before(schedule, now, tail[-1].nominal_at, tail.maxlen or 1)
            tail.extend(found)
            following = next_fire(schedule, now, runs_so_far + count)
            return _span_of(
                cursor, list(tail), count, following, now, threshold, late_limit, due, uncounted=len(found)
            )
        count += 1
        tail.append(fire)
        fire = next_fire(schedule, fire.nominal_at, runs_so_far + count)
    return _span_of(cursor, list(tail), count, fire, now, threshold, late_limit, due)


def _span_of(
    cursor: Fire, tail: list[Fire], count: int, following: Fire | None, now: datetime,
    threshold: timedelta | None, late_limit: int, due_of: Callable[[Fire], datetime] = _own_due, *,
    uncounted: int | None = None,
) -> PausedSpan:
    """The span from ``cursor`` whose last fires are ``tail``, ``count`` of
    them counted one by one (``uncounted``: the span was capped, and that
    many of ``tail``'s last ones were found by the backward search, not
    counted), ``following`` the first after ``now``: its late ones run."""
    capped = uncounted is not None
    late = _late_tail(tail, now, threshold, late_limit, due_of)
    if late == 0:
        skipped = SkippedSpan(cursor.nominal_at, tail[-1].nominal_at, count)
        return PausedSpan(following, skipped, capped=capped, late_limit=late_limit)
    start = tail[-late]
    fires = tuple(tail[-late:])
    if start.nominal_at == cursor.nominal_at:
        return PausedSpan(start, None, late=fires, after=following, late_limit=late_limit)
    # Capped: the count stays what was counted (a lower bound) unless the late ones reach into it.
    count = count - late if uncounted is None else min(count, count + uncounted - late)
    skipped = SkippedSpan(cursor.nominal_at, tail[-late - 1].nominal_at, count)
    return PausedSpan(start, skipped, capped, late=fires, after=following, late_limit=late_limit)


def resume_late_limit(policy: str, run_all_limit: int) -> int:
    """How many of a paused span's late occurrences a resume lets run: one
    less than the job's backlog cap
    (:func:`~tickwheel_server.policy.backlog.not_started_cap`: 10, plus
    ``run_all_limit`` under ``run_all``), so the claim that creates them
    has room for the next occurrence on time. A claim never creates more
    than the cap (held executions released count in it): what a pause can
    hold, and what a resume releases, are bounded alike."""
    return not_started_cap(policy, run_all_limit) - 1


def resume_plan(
    schedule: Schedule, job: StoredCursor, now: datetime, *, threshold: timedelta, late_limit: int,
    due_of: Callable[[Fire], datetime] | None = None, reach_of: Callable[[Fire], datetime] | None = None,
) -> PausedSpan:
    """:func:`paused_span` for a paused job as stored at its resume,
    ``schedule`` its decoded schedule, ``threshold`` its misfire threshold
    and ``late_limit`` how many late occurrences may run
    (:func:`resume_late_limit`), ``due_of`` and ``reach_of`` what its
    calendar makes of an occurrence: nothing when
    the job has no cursor (its schedule ended). CPU-bound for long spans."""
    if job.next_run_at is None:
        return PausedSpan(None, None)
    return paused_span(
        schedule, _cursor_fire(job.next_run_at, job.next_due_at), now, job.run_count,
        threshold=threshold, late_limit=late_limit, due_of=due_of, reach_of=reach_of,
    )
