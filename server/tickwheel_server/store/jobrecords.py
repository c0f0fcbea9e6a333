"""The job store's records: what it takes and returns, and a job row read as one.

:class:`JobRecord` is a job as stored; :class:`NewJob` is what the API
decides and hands to :class:`~tickwheel_server.store.jobs.JobStore` (the
plans of a job change, ``CursorView``, ``Reschedule`` and ``SkippedSpan``,
are :mod:`tickwheel_server.policy.jobchanges`'). :func:`job_record`
and :func:`get_job` are the one place a ``jobs`` row becomes a record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us

from ..errors import NotFound
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


def get_job(conn: Connection, tenant: str, job_id: str, *, share: bool = False) -> JobRecord:
    """``tenant``'s job ``job_id``, or NotFound (also for another tenant's job).

    ``share``: the row stays share-locked until the transaction ends, where
    the engine has row locks: a change of the job (delete, pause) that
    locks it waits for this transaction, and reads what it wrote.
    """
    query = sa.select(jobs).where(jobs.c.id == job_id, jobs.c.tenant == tenant)
    if share and conn.dialect.name != "sqlite":
        query = query.with_for_update(read=True)
    row = conn.execute(query).first()
    if row is None:
        raise NotFound("job", job_id)
    return job_record(row)
