"""Creating jobs, one or a batch: request ids, the quota, the rows, in few statements.

:func:`create_jobs` is the transaction body of
:meth:`~tickwheel_server.store.jobs.JobStore.create` and
:meth:`~tickwheel_server.store.jobs.JobStore.create_many`. It takes the batch
column by column (:class:`.jobrecords.NewJobs`) and answers a created job
with :data:`CREATED` rather than a record: no Python object per job on
the way to the rows. Whatever the batch's size it costs a fixed number of statements: the tenant's limits,
one insert of the request ids (``ON CONFLICT DO NOTHING``: a request id
already recorded is a repeat, told apart without reading the index first),
one update of a quota slot (:mod:`.quota`), one insert of the jobs; a batch
with repeats reads their jobs with one more, one over the quota deletes its
refused request ids with one more. No row every create writes: concurrent
creates of one tenant touch different quota slots and different index
entries (docs/architecture.md, "Job writes at scale").
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, partition_of

from ..errors import NotFound, QuotaExceeded, TickwheelError
from ..jobspec import calendar_column
from . import quota
from .base import tuples
from .engine import Capabilities
from .jobrecords import JobRecord, NewJobs, job_record
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
    "tzdata_version, pause_reason, paused_at, version, created_at, updated_at, quota_slot, calendar) "
    "SELECT v.id, CAST(%(tenant)b AS TEXT), v.partition, v.name, v.state, v.spec, v.time_zone, v.next_run_at, "
    "v.next_due_at, 0, v.tzdata_version, '', NULL, 1, CAST(%(now)b AS BIGINT), CAST(%(now)b AS BIGINT), "
    "CAST(%(slot)b AS INTEGER), v.calendar "
    "FROM unnest(CAST(%(ids)b AS TEXT[]), CAST(%(partitions)b AS INTEGER[]), CAST(%(names)b AS TEXT[]), "
    "CAST(%(states)b AS TEXT[]), CAST(%(specs)b AS BYTEA[]), CAST(%(zones)b AS TEXT[]), "
    "CAST(%(next_runs)b AS BIGINT[]), CAST(%(next_dues)b AS BIGINT[]), CAST(%(tzdata)b AS TEXT[]), "
    "CAST(%(calendars)b AS TEXT[])) "
    "AS v (id, partition, name, state, spec, time_zone, next_run_at, next_due_at, tzdata_version, calendar)"
)

Outcome = tuple[JobRecord, bool] | TickwheelError
"""What became of one item: (the job, whether this call created it), or why
nothing was written for it."""
CREATED = None
"""The outcome of an item :func:`create_jobs` created as its batch gives it
(its record is :meth:`.jobrecords.NewJobs.record`, not built unless asked)."""


def create_jobs(
    conn: Connection,
    caps: Capabilities,
    batch: NewJobs,
    *,
    slot: int,
    partition_count: int,
    now_us: int,
) -> list[Outcome | None]:
    """Create each job of ``batch`` unless its request id was seen; one
    outcome per job, in order.

    - NotFound (raised: nothing written) when the tenant does not exist.
    - An item whose request id was recorded before (by an earlier call, or
      by an earlier item of this one) gets the job that request created,
      ``created`` False, and writes nothing, whatever its own definition;
      NotFound("job") when that job was deleted since.
    - A new item over the tenant's ``max_payload_bytes``, or past its
      ``max_jobs`` (the items in order: the first ones that fit are
      created), gets QuotaExceeded and writes nothing.
    - Every other item is created (:data:`CREATED`): its request id
      recorded, a unit of the quota taken from ``slot``, the job row
      inserted (``quota_slot`` = ``slot``, ``created_at`` = ``now_us``),
      all in the caller's transaction.
    """
    tenant = batch.tenant
    request_ids = batch.request_ids
    limits = conn.execute(
        sa.select(tenants.c.max_jobs, tenants.c.max_payload_bytes).where(tenants.c.name == tenant)
    ).first()
    if limits is None:
        raise NotFound("tenant", tenant)
    outcomes: list[Outcome | None] = [None] * len(batch)
    first_of: dict[str, int] = {}
    repeats: list[int] = []
    candidates: list[int] = []
    oversized: list[int] = []
    max_payload = limits.max_payload_bytes
    for index, (request_id, payload_size) in enumerate(zip(request_ids, batch.payload_sizes)):
        if request_id in first_of:
            repeats.append(index)
            continue
        first_of[request_id] = index
        if payload_size > max_payload:
            oversized.append(index)
        else:
            candidates.append(index)
    everyone = len(candidates) == len(batch)
    fresh = _record_requests(conn, caps, tenant, request_ids if everyone else [request_ids[i] for i in candidates],
                             batch.ids if everyone else [batch.ids[i] for i in candidates], now_us)  # fmt: skip
    if len(fresh) == len(candidates):
        new, seen = candidates, []
    else:
        new = [i for i in candidates if request_ids[i] in fresh]
        seen = [i for i in candidates if request_ids[i] not in fresh]
    granted = quota.take(conn, caps, tenant, slot, len(new))
    refused, new = new[granted:], new[:granted]
    if refused:
        _forget_requests(conn, tenant, [request_ids[i] for i in refused])
        for index in refused:
            outcomes[index] = QuotaExceeded(
                tenant, "max_jobs", limits.max_jobs, "the tenant has as many jobs as it may"
            )
    if new:
        _insert_jobs(conn, caps, batch, new if len(new) < len(batch) else None, slot, partition_count, now_us)
    if seen or oversized:
        # An oversized item whose request id was seen is a repeat like any
        # other: it gets the job its first request created.
        found = _jobs_of_requests(conn, tenant, [request_ids[i] for i in seen + oversized])
        for index in seen:
            outcomes[index] = found[request_ids[index]]
        for index in oversized:
            outcomes[index] = found.get(request_ids[index]) or QuotaExceeded(
                tenant, "max_payload_bytes", max_payload,
                f"payload of {batch.payload_sizes[index]} bytes is over the limit",
            )
    if repeats:
        created_at = from_us(now_us)
        for index in repeats:
            first_index = first_of[request_ids[index]]
            first = outcomes[first_index]
            if first is CREATED:
                outcomes[index] = (batch.record(first_index, partition_of(batch.ids[first_index], partition_count),
                                                created_at), False)  # fmt: skip
            else:
                outcomes[index] = (first[0], False) if isinstance(first, tuple) else first
    return outcomes


def _insert_jobs(
    conn: Connection, caps: Capabilities, batch: NewJobs, chosen: list[int] | None, slot: int, partition_count: int,
    now_us: int,
) -> None:
    """Insert the rows of ``batch``'s jobs at ``chosen`` (None: every one)."""

    def column(values: list) -> list:
        return values if chosen is None else [values[i] for i in chosen]

    ids = column(batch.ids)
    partitions = [partition_of(job_id, partition_count) for job_id in ids]
    next_runs = column(batch.next_runs)
    states = ["active" if at is not None else "completed" for at in next_runs]
    specs = column(batch.specs)
    calendars = [calendar_column(spec) for spec in specs]
    if caps.is_sqlite:
        conn.execute(jobs.insert(), [
            dict(id=job_id, tenant=batch.tenant, partition=partition, name=name, state=state, spec=spec,
                 time_zone=zone, next_run_at=next_run, next_due_at=next_due, run_count=0, tzdata_version=tzdata,
                 pause_reason="", paused_at=None, version=1, created_at=now_us, updated_at=now_us, quota_slot=slot,
                 calendar=calendar)
            for job_id, partition, name, state, spec, zone, next_run, next_due, tzdata, calendar in zip(
                ids, partitions, column(batch.names), states, specs, column(batch.zones), next_runs,
                column(batch.next_dues), column(batch.tzdata), calendars,
            )
        ])  # fmt: skip
        return
    conn.exec_driver_sql(_INSERT_JOBS, dict(
        tenant=batch.tenant, now=now_us, slot=slot, ids=ids, partitions=partitions, names=column(batch.names),
        states=states, specs=specs, zones=column(batch.zones), next_runs=next_runs,
        next_dues=column(batch.next_dues), tzdata=column(batch.tzdata), calendars=calendars,
    ))  # fmt: skip


def _record_requests(
    conn: Connection, caps: Capabilities, tenant: str, request_ids: list[str], job_ids: list[str], now_us: int
) -> set[str]:
    """Insert the (request id, job id) pairs not recorded yet; returns the
    request ids inserted."""
    if not request_ids:
        return set()
    # In request id order: an insert waits for a concurrent transaction
    # that inserted the same request id, so two batches repeating each
    # other's ids in different orders would each wait for the other.
    pairs = sorted(zip(request_ids, job_ids))
    request_ids, job_ids = [r for r, _ in pairs], [j for _, j in pairs]
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
