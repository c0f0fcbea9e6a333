"""The job store's records: what it takes and returns, and a job row read as one.

:class:`JobRecord` is a job as stored; :class:`NewJob`, :class:`CursorView`,
:data:`Reschedule` and :class:`SkippedSpan` are what the API decides and
hands to :class:`~tickwheel_server.store.jobs.JobStore`. :func:`job_record`
and :func:`get_job` are the one place a ``jobs`` row becomes a record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us

from ..errors import NotFound
from ..policy.jobchanges import Pending, Recreation
from .tables import jobs

JOB_STATES = ("active", "paused", "completed")


@dataclass(frozen=True)
class NewJob:
    """What the API decided for a job about to be created."""

    id: str
    tenant: str
    name: str
    spec: bytes
    time_zone: str
    next_run_at: datetime | None
    next_due_at: datetime | None
    tzdata_version: str
    payload_size: int


@dataclass(frozen=True)
class JobRecord:
    """A job as stored (instants in UTC)."""

    id: str
    tenant: str
    partition: int
    name: str
    state: str
    spec: bytes
    time_zone: str
    next_run_at: datetime | None
    next_due_at: datetime | None
    run_count: int
    tzdata_version: str
    pause_reason: str
    version: int
    created_at: datetime
    updated_at: datetime
    paused_at: datetime | None = None


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
job's new cursor (see :func:`tickwheel_server.policy.jobchanges.plan_recreation`)."""


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


def _opt(micros: int | None) -> datetime | None:
    return None if micros is None else from_us(micros)


def job_record(row) -> JobRecord:
    """The record of a ``jobs`` row."""
    return JobRecord(
        id=row.id,
        tenant=row.tenant,
        partition=row.partition,
        name=row.name,
        state=row.state,
        spec=bytes(row.spec),
        time_zone=row.time_zone,
        next_run_at=_opt(row.next_run_at),
        next_due_at=_opt(row.next_due_at),
        run_count=row.run_count,
        tzdata_version=row.tzdata_version,
        pause_reason=row.pause_reason,
        version=row.version,
        created_at=from_us(row.created_at),
        updated_at=from_us(row.updated_at),
        paused_at=_opt(row.paused_at),
    )


def get_job(conn: Connection, tenant: str, job_id: str) -> JobRecord:
    """``tenant``'s job ``job_id``, or NotFound (also for another tenant's job)."""
    row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id, jobs.c.tenant == tenant)).first()
    if row is None:
        raise NotFound("job", job_id)
    return job_record(row)
