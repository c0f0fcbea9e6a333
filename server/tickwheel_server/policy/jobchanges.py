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
- **Resume** (:func:`resume_plan`, :func:`paused_span`). The paused span
  becomes one skip range and the cursor the first occurrence after ``now``.

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

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from tickwheel.v1 import job_pb2

from ..schedule import Fire, Schedule, ScheduleKind, first_fire, next_fire

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
    """The new cursor: the first occurrence after now (the old cursor when it
    is still in the future); None when the schedule ended while paused."""
    skipped: SkippedSpan | None
    """The occurrences from the old cursor up to now; None when there were none."""
    capped: bool = False
    """True when the span held more than the counting limit (see :func:`paused_span`)."""


def _last_fire_at_or_before(schedule: Schedule, now: datetime, floor: datetime) -> datetime | None:
    """The last fire nominally in ``(floor, now]`` (``max_runs`` ignored), found
    in windows that double backwards from ``now``: it lists only the fires of
    the first window that holds one."""
    width = timedelta(minutes=1)
    while True:
        start = max(now - width, floor)
        last = None
        fire = next_fire(schedule, start)
        while fire is not None and fire.nominal_at <= now:
            last = fire.nominal_at
            fire = next_fire(schedule, last)
        if last is not None or start == floor:
            return last
        width *= 2


def paused_span(
    schedule: Schedule, cursor: Fire, now: datetime, runs_so_far: int, *, limit: int = MAX_COUNTED_SKIPS
) -> PausedSpan:
    """What a pause kept from running, and where the job resumes. Pure.

    ``cursor`` is the stored cursor (the first occurrence not consumed when
    the job was paused). An occurrence is in the span when it is nominally at
    or before ``now``; the job resumes at the first one nominally after
    ``now`` ("future"), or at ``cursor`` when that is still in the future
    (nothing skipped).

    Bounded: at most ``limit`` (:data:`MAX_COUNTED_SKIPS`) occurrences are
    counted one by one. A longer span (a job every minute paused for more
    than ~70 days) is recorded with ``count`` = ``limit`` (what was counted,
    a lower bound; ``capped`` says so), while ``to_at`` is still the true
    last occurrence before ``now``, found by a backward search, and the
    cursor still the first after ``now``. ``max_runs`` then counts the
    recorded ``count`` only.
    """
    if cursor.nominal_at > now:
        return PausedSpan(cursor, None)
    count, last = 1, cursor.nominal_at
    fire = next_fire(schedule, last, runs_so_far + count)
    while fire is not None and fire.nominal_at <= now:
        if count >= limit:
            last = _last_fire_at_or_before(schedule, now, last) or last
            following = next_fire(schedule, now, runs_so_far + count)
            return PausedSpan(following, SkippedSpan(cursor.nominal_at, last, count), capped=True)
        count, last = count + 1, fire.nominal_at
        fire = next_fire(schedule, last, runs_so_far + count)
    return PausedSpan(fire, SkippedSpan(cursor.nominal_at, last, count))


def resume_plan(schedule: Schedule, job: StoredCursor, now: datetime) -> PausedSpan:
    """:func:`paused_span` for a paused job as stored, ``schedule`` its
    decoded schedule: nothing when the job has no cursor (its schedule ended).
    CPU-bound for long spans."""
    if job.next_run_at is None:
        return PausedSpan(None, None)
    return paused_span(schedule, _cursor_fire(job.next_run_at, job.next_due_at), now, job.run_count)
