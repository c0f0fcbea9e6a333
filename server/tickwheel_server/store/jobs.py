"""Jobs: definitions, state and the schedule cursor (``next_run_at``).

The store treats a job's definition (``spec``, the serialised
``tickwheel.v1.Job``) as opaque bytes; the API layer validates it and computes
the first fire before calling :meth:`JobStore.create`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import NotFound, QuotaExceeded
from ..ids import from_us, partition_of, to_us
from .base import SqlStore
from .tables import job_requests, jobs, tenants

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


def _opt(micros: int | None) -> datetime | None:
    return None if micros is None else from_us(micros)


def _from_row(row) -> JobRecord:
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
    )


def _get(conn: Connection, tenant: str, job_id: str) -> JobRecord:
    row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id, jobs.c.tenant == tenant)).first()
    if row is None:
        raise NotFound("job", job_id)
    return _from_row(row)


class JobStore(SqlStore):
    """Jobs of every tenant; every method is scoped to one tenant.

    A job of another tenant is indistinguishable from a missing one (NotFound).
    """

    def __init__(self, engine, clock, *, partition_count: int) -> None:
        super().__init__(engine, clock)
        if partition_count < 1:
            raise ValueError("partition_count must be >= 1")
        self.partition_count = partition_count

    async def create(self, job: NewJob, request_id: str) -> tuple[JobRecord, bool]:
        """Create ``job`` unless ``request_id`` was seen for this tenant.

        Returns (the job, True) when created, (the job the first request
        created, False) on a repeat; a repeat writes nothing. In one
        transaction: the request id is recorded, the tenant's job count and
        payload quotas are checked (QuotaExceeded, nothing written), the job
        row is inserted. Committed before it returns.
        """
        now_us = to_us(self.clock.now())
        partition = partition_of(job.id, self.partition_count)

        def fn(conn: Connection) -> tuple[JobRecord, bool]:
            seen = conn.execute(
                sa.select(job_requests.c.job_id).where(
                    job_requests.c.tenant == job.tenant, job_requests.c.request_id == request_id
                )
            ).scalar()
            if seen is not None:
                return _get(conn, job.tenant, seen), False
            tenant = conn.execute(
                sa.select(tenants.c.job_count, tenants.c.max_jobs, tenants.c.max_payload_bytes).where(
                    tenants.c.name == job.tenant
                )
            ).first()
            if tenant is None:
                raise NotFound("tenant", job.tenant)
            if job.payload_size > tenant.max_payload_bytes:
                raise QuotaExceeded(
                    job.tenant,
                    "max_payload_bytes",
                    tenant.max_payload_bytes,
                    f"payload of {job.payload_size} bytes is over the limit",
                )
            if tenant.job_count >= tenant.max_jobs:
                raise QuotaExceeded(job.tenant, "max_jobs", tenant.max_jobs, "the tenant has as many jobs as it may")
            conn.execute(
                tenants.update()
                .where(tenants.c.name == job.tenant)
                .values(job_count=tenants.c.job_count + 1)
            )
            conn.execute(
                jobs.insert().values(
                    id=job.id,
                    tenant=job.tenant,
                    partition=partition,
                    name=job.name,
                    state="active" if job.next_run_at is not None else "completed",
                    spec=job.spec,
                    time_zone=job.time_zone,
                    next_run_at=None if job.next_run_at is None else to_us(job.next_run_at),
                    next_due_at=None if job.next_due_at is None else to_us(job.next_due_at),
                    run_count=0,
                    tzdata_version=job.tzdata_version,
                    pause_reason="",
                    paused_at=None,
                    version=1,
                    created_at=now_us,
                    updated_at=now_us,
                )
            )
            conn.execute(
                job_requests.insert().values(
                    tenant=job.tenant, request_id=request_id, job_id=job.id, created_at=now_us
                )
            )
            return _get(conn, job.tenant, job.id), True

        return await self._tx(fn)

    async def get(self, tenant: str, job_id: str) -> JobRecord:
        """The job, or NotFound (also for another tenant's job)."""
        return await self._tx(lambda conn: _get(conn, tenant, job_id))

    async def list(
        self, tenant: str, *, after_id: str = "", limit: int = 100, state: str = "", name_prefix: str = ""
    ) -> list[JobRecord]:
        """Up to ``limit`` of ``tenant``'s jobs with ids after ``after_id``, by id.

        A range scan on ``jobs_tenant (tenant, id)`` with a LIMIT.
        """
        if not tenant:
            raise ValueError("tenant is required")
        return await self.search(tenant=tenant, after_id=after_id, limit=limit, state=state, name_prefix=name_prefix)

    async def search(
        self, *, tenant: str = "", after_id: str = "", limit: int = 100, state: str = "", name_prefix: str = ""
    ) -> list[JobRecord]:
        """Like :meth:`list`, across every tenant when ``tenant`` is empty (operators only)."""
        if state and state not in JOB_STATES:
            raise ValueError(f"unknown job state {state!r}")

        def fn(conn: Connection) -> list[JobRecord]:
            query = sa.select(jobs).where(jobs.c.id > after_id)
            if tenant:
                query = query.where(jobs.c.tenant == tenant)
            if state:
                query = query.where(jobs.c.state == state)
            if name_prefix:
                query = query.where(jobs.c.name.startswith(name_prefix, autoescape=True))
            query = query.order_by(jobs.c.id).limit(limit)
            return [_from_row(row) for row in conn.execute(query)]

        return await self._tx(fn)
