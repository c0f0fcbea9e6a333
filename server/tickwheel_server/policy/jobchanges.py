"""What a job change does to the job's executions that have not started: pure rules, table-tested.

The store reads the executions in the transaction that changes the job,
calls these, and applies the answer in that same transaction (see
``docs/architecture.md``, "Job changes"). Three rules:

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

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tickwheel.v1 import job_pb2

from ..schedule import Fire, Schedule, next_fire

_TICK = timedelta(microseconds=1)


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
