"""Creating jobs, one or a batch: request ids, the quota, the rows, in few statements.

:func:`create_jobs` is the transaction body of
:meth:`~tickwheel_server.store.jobs.JobStore.create` and
:meth:`~tickwheel_server.store.jobs.JobStore.create_many`. Whatever the
batch's size it costs a fixed number of statements: the tenant's limits,
one insert of the request ids (``ON CONFLICT DO NOTHING``: a request id
already recorded is a repeat, told apart without reading the index first),
one update of a quota slot (:mod:`.quota`), one insert of the jobs; a batch
with repeats reads their jobs with one more, one over the quota deletes its
refused request ids with one more. No row every create writes: concurrent
creates of one tenant touch different quota slots and different index
entries (docs/architecture.md, "Job writes at scale").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, partition_of, to_us

from ..errors import NotFound, QuotaExceeded, TickwheelError
from . import quota
from .base import tuples
from .engine import Capabilities
from .jobrecords import JobRecord, NewJob, job_record
from .tables import job_requests, jobs, tenants

# PostgreSQL and CockroachDB: one statement over arrays each, sent as driver
# SQL with binary array parameters (as the claim's writes): a fixed text, one
# plan, whatever the batch; SQLAlchemy would compile a multi-row VALUES anew
# for every batch size.
_RECORD_REQUESTS = (
    "INSERT INTO job_requests (tenant, request_id, job_id, created_at) "
    "SELECT CAST(%(tenant)b AS TEXT), v.request_id, v.job_id, CAST(%(created_at)b AS BIGINT) "
    "FROM unnest(CAST(%(request_ids)b AS TEXT[]), CAST(%(job_ids)b AS TEXT[])) AS v (request_id, job_id) "
    "ON CONFLICT (tenant, request_id) DO NOTHING RETURNING request_id"
)
_INSERT_JOBS = (
    "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, next_run_at, next_due_at, run_count, "
    "tzdata_version, pause_reason, paused_at, version, created_at, updated_at, quota_slot) "
    "SELECT v.id, CAST(%(tenant)b AS TEXT), v.partition, v.name, v.state, v.spec, v.time_zone, v.next_run_at, "
    "v.next_due_at, 0, v.tzdata_version, '', NULL, 1, CAST(%(now)b AS BIGINT), CAST(%(now)b AS BIGINT), "
    "CAST(%(slot)b AS INTEGER) "
    "FROM unnest(CAST(%(ids)b AS TEXT[]), CAST(%(partitions)b AS INTEGER[]), CAST(%(names)b AS TEXT[]), "
    "CAST(%(states)b AS TEXT[]), CAST(%(specs)b AS BYTEA[]), CAST(%(zones)b AS TEXT[]), "
    "CAST(%(next_runs)b AS BIGINT[]), CAST(%(next_dues)b AS BIGINT[]), CAST(%(tzdata)b AS TEXT[])) "
    "AS v (id, partition, name, state, spec, time_zone, next_run_at, next_due_at, tzdata_version)"
)

Outcome = tuple[JobRecord, bool] | TickwheelError
"""What became of one item: (the job, whether this call created it), or why
nothing was written for it."""


def create_jobs(
    conn: Connection,
    caps: Capabilities,
    tenant: str,
    items: Sequence[tuple[NewJob, str]],
    *,
    slot: int,
    partition_count: int,
    now_us: int,
) -> list[Outcome]:
    """Create each (job, request id) of ``tenant`` unless its request id was
    seen; one outcome per item, in order.

    - NotFound (raised: nothing written) when the tenant does not exist.
    - An item whose request id was recorded before (by an earlier call, or
      by an earlier item of this one) gets the job that request created,
      ``created`` False, and writes nothing, whatever its own definition;
      NotFound("job") when that job was deleted since.
    - A new item over the tenant's ``max_payload_bytes``, or past its
      ``max_jobs`` (the items in order: the first ones that fit are
      created), gets QuotaExceeded and writes nothing.
    - Every other item is created: its request id recorded, a unit of the
      quota taken from ``slot``, the job row inserted (``quota_slot`` =
      ``slot``), all in the caller's transaction.
    """
    limits = conn.execute(
        sa.select(tenants.c.max_jobs, tenants.c.max_payload_bytes).where(tenants.c.name == tenant)
    ).first()
    if limits is None:
        raise NotFound("tenant", tenant)
    outcomes: list[Outcome | None] = [None] * len(items)
    first_of: dict[str, int] = {}
    repeats: list[int] = []
    candidates: list[int] = []
    oversized: list[int] = []
    for index, (job, request_id) in enumerate(items):
        if job.tenant != tenant:
            raise ValueError("every job must be the tenant's")
        if request_id in first_of:
            repeats.append(index)
        elif job.payload_size > limits.max_payload_bytes:
            first_of[request_id] = index
            oversized.append(index)
        else:
            first_of[request_id] = index
            candidates.append(index)
    fresh = _record_requests(conn, caps, tenant, [items[i][1] for i in candidates],
                             [items[i][0].id for i in candidates], now_us)
    new = [i for i in candidates if items[i][1] in fresh]
    seen = [i for i in candidates if items[i][1] not in fresh]
    granted = quota.take(conn, caps, tenant, slot, len(new))
    refused, new = new[granted:], new[:granted]
    if refused:
        _forget_requests(conn, tenant, [items[i][1] for i in refused])
        for index in refused:
            outcomes[index] = QuotaExceeded(
                tenant, "max_jobs", limits.max_jobs, "the tenant has as many jobs as it may"
            )
    if new:
        created = [items[i][0] for i in new]
        partitions = [partition_of(job.id, partition_count) for job in created]
        if caps.is_sqlite:
            conn.execute(jobs.insert(), [_job_row(job, p, slot, now_us) for job, p in zip(created, partitions)])
        else:
            conn.exec_driver_sql(_INSERT_JOBS, dict(
                tenant=tenant, now=now_us, slot=slot, ids=[job.id for job in created], partitions=partitions,
                names=[job.name for job in created], states=[_state(job) for job in created],
                specs=[job.spec for job in created], zones=[job.time_zone for job in created],
                next_runs=[_us(job.next_run_at) for job in created], next_dues=[_us(job.next_due_at) for job in created],
                tzdata=[job.tzdata_version for job in created],
            ))  # fmt: skip
        created_at = from_us(now_us)
        for index, job, partition in zip(new, created, partitions):
            outcomes[index] = (_record(job, partition, created_at), True)
    if seen or oversized:
        # An oversized item whose request id was seen is a repeat like any
        # other: it gets the job its first request created.
        found = _jobs_of_requests(conn, tenant, [items[i][1] for i in seen + oversized])
        for index in seen:
            outcomes[index] = found[items[index][1]]
        for index in oversized:
            outcomes[index] = found.get(items[index][1]) or QuotaExceeded(
                tenant, "max_payload_bytes", limits.max_payload_bytes,
                f"payload of {items[index][0].payload_size} bytes is over the limit",
            )
    for index in repeats:
        first = outcomes[first_of[items[index][1]]]
        outcomes[index] = (first[0], False) if isinstance(first, tuple) else first
    assert all(outcome is not None for outcome in outcomes)
    return outcomes  # type: ignore[return-value]


def _record_requests(
    conn: Connection, caps: Capabilities, tenant: str, request_ids: list[str], job_ids: list[str], now_us: int
) -> set[str]:
    """Insert the (request id, job id) pairs not recorded yet; returns the
    request ids inserted."""
    if not request_ids:
        return set()
    if not caps.is_sqlite:
        result = conn.exec_driver_sql(
            _RECORD_REQUESTS, dict(tenant=tenant, created_at=now_us, request_ids=request_ids, job_ids=job_ids)
        )
        return {row[0] for row in tuples(result)}
    statement = (
        sqlite.insert(job_requests)
        .values([dict(tenant=tenant, request_id=request_id, job_id=job_id, created_at=now_us)
                 for request_id, job_id in zip(request_ids, job_ids)])
        .on_conflict_do_nothing(index_elements=["tenant", "request_id"])
        .returning(job_requests.c.request_id)
    )  # fmt: skip
    return set(conn.execute(statement).scalars())


def _forget_requests(conn: Connection, tenant: str, request_ids: list[str]) -> None:
    conn.execute(
        job_requests.delete().where(job_requests.c.tenant == tenant, job_requests.c.request_id.in_(request_ids))
    )


def _jobs_of_requests(conn: Connection, tenant: str, request_ids: list[str]) -> dict[str, Outcome]:
    """What each recorded request id of ``tenant`` created: (its job, False),
    or NotFound when the job was deleted since."""
    rows = conn.execute(
        sa.select(job_requests.c.request_id, job_requests.c.job_id, jobs)
        .join(jobs, sa.and_(jobs.c.id == job_requests.c.job_id, jobs.c.tenant == job_requests.c.tenant), isouter=True)
        .where(job_requests.c.tenant == tenant, job_requests.c.request_id.in_(request_ids))
    ).all()
    return {
        row.request_id: (job_record(row), False) if row.id is not None else NotFound("job", row.job_id)
        for row in rows
    }


def _us(at: datetime | None) -> int | None:
    return None if at is None else to_us(at)


def _state(job: NewJob) -> str:
    return "active" if job.next_run_at is not None else "completed"


def _job_row(job: NewJob, partition: int, slot: int, now_us: int) -> dict:
    return dict(
        id=job.id, tenant=job.tenant, partition=partition, name=job.name, state=_state(job), spec=job.spec,
        time_zone=job.time_zone, next_run_at=_us(job.next_run_at), next_due_at=_us(job.next_due_at), run_count=0,
        tzdata_version=job.tzdata_version, pause_reason="", paused_at=None, version=1, created_at=now_us,
        updated_at=now_us, quota_slot=slot,
    )


def _record(job: NewJob, partition: int, created_at: datetime) -> JobRecord:
    """The record of the row a create inserted, as :func:`.jobrecords.job_record`
    would read it back (instants to the microsecond, as stored)."""
    return JobRecord(
        id=job.id, tenant=job.tenant, partition=partition, name=job.name, state=_state(job), spec=job.spec,
        time_zone=job.time_zone, next_run_at=_stored(job.next_run_at), next_due_at=_stored(job.next_due_at),
        run_count=0, tzdata_version=job.tzdata_version, pause_reason="", version=1, created_at=created_at,
        updated_at=created_at, paused_at=None,
    )


def _stored(at: datetime | None) -> datetime | None:
    # A datetime holds microseconds already: only the zone can differ from what is read back.
    return at if at is None or at.tzinfo is timezone.utc else from_us(to_us(at))
