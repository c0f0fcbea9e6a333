"""Creating jobs, one or a batch: request ids, the quota, the rows, in few statements.

:func:`create_jobs` is the transaction body of
:meth:`~tickwheel_server.store.jobs.JobStore.create` and
:meth:`~tickwheel_server.store.jobs.JobStore.create_many`. It takes the batch
column by column (:class:`.jobrecords.NewJobs`) and answers a created job
with :data:`CREATED` rather than a record: no Python object per job on
the way to the rows. Whatever the batch's size it costs a fixed number of
statements. On PostgreSQL a CreateJob group's (fewer than 64 jobs, each its
own request id) is one: the request ids' insert, which reads the tenant's
limits (:func:`.requests.record_jobs`: a request id recorded within its
window is a repeat, told apart without reading first), the units taken from
a quota slot only when every id was recorded, and the jobs' insert only when
they were taken (:func:`_record_and_insert`); when a request id was seen
or a payload is over the limit, the ids it recorded come back and the
group goes on as a batch's does, and a dry slot raises
:class:`.quota.SlotDry` as the jobs' insert does. Otherwise (CockroachDB,
a larger batch) two: the request ids' insert, reading the limits, and the
jobs' insert, which takes their units from a quota slot in the same
statement (:data:`.quota.TAKE_FIRST`); a batch of :data:`.quota.SAVEPOINT_FROM` jobs
or more sends both under a savepoint each (never released: one round trip
each, :func:`.driver.savepoint`), rolled back when the plain insert of
its request ids met one already there or its slot was dry; one dealing
the quota again updates its slot (:mod:`.quota`) in a statement of its
own, and SQLite reads the limits in one too. A batch
with repeats reads their jobs with one more, one over the quota deletes its
refused request ids with one more. No row every create writes: concurrent
creates of one tenant touch different quota slots and different index
entries (docs/architecture.md, "Job writes at scale").
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, partition_of

from ..errors import NotFound, QuotaExceeded, TickwheelError
from ..jobspec import calendar_named, calendar_ref
from . import driver, quota, requests
from .base import array_literal, one_of
from .binary_arrays import ByteaArray
from .calendarcursor import rekey_previous
from .engine import Capabilities, capabilities
from .jobrecords import JOB_COLUMNS, JOB_WITH_CURSOR, JobRecord, NewJobs, job_record
from .tables import job_cursors, jobs, tenants
from .tables import request_ids as request_rows

# PostgreSQL and CockroachDB: one statement over arrays, sent as driver SQL:
# a fixed text, one plan, whatever the batch; SQLAlchemy would compile a
# multi-row VALUES anew for every batch size. The definitions go as a binary
# array, every other column as an array literal (:func:`.base.array_literal`:
# psycopg's list dumpers cost a Python call per element and more per list).
# The jobs' cursors (``job_cursors``, migration 0032) go in the same
# statement: the jobs' insert is a CTE and the cursors' insert writes its
# rows only once it inserted (all or none: the jobs' insert has no ON
# CONFLICT), so one round trip still writes a group.
def _group_statements() -> tuple[str, str, str]:
    """The jobs' insert, the same with the units taken first, and a group of
    fresh jobs in one statement; their common parts are fragments (a CTE, an
    insert reading it), kept local so that no module constant is one."""
    job_rows = (
        "ins AS (INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, "
        "tzdata_version, pause_reason, paused_at, version, created_at, updated_at, quota_slot, calendar) "
        "SELECT v.id, CAST(%(tenant)s AS TEXT), v.partition, v.name, v.state, v.spec, v.time_zone, "
        "v.tzdata_version, '', NULL, 1, CAST(%(now)s AS BIGINT), CAST(%(now)s AS BIGINT), "
        "CAST(%(slot)s AS INTEGER), v.calendar "
        "FROM unnest(CAST(%(ids)s AS TEXT[]), CAST(%(partitions)s AS INTEGER[]), CAST(%(names)s AS TEXT[]), "
        "CAST(%(states)s AS TEXT[]), CAST(%(specs)b AS BYTEA[]), CAST(%(zones)s AS TEXT[]), "
        "CAST(%(tzdata)s AS TEXT[]), CAST(%(calendars)s AS TEXT[])) "
        "AS v (id, partition, name, state, spec, time_zone, tzdata_version, calendar){taken} RETURNING 1)"
    )
    cursor_rows = (
        "INSERT INTO job_cursors (job_id, tenant, partition, state, version, next_run_at, next_due_at, run_count, "
        "next_nominal_at) "
        "SELECT c.id, CAST(%(tenant)s AS TEXT), c.partition, c.state, 1, c.next_run_at, c.next_due_at, 0, NULL "
        "FROM unnest(CAST(%(ids)s AS TEXT[]), CAST(%(partitions)s AS INTEGER[]), CAST(%(states)s AS TEXT[]), "
        "CAST(%(next_runs)s AS BIGINT[]), CAST(%(next_dues)s AS BIGINT[])) "
        "AS c (id, partition, state, next_run_at, next_due_at) WHERE EXISTS (SELECT 1 FROM ins)"
    )
    after_taken = " WHERE EXISTS (SELECT 1 FROM taken)"
    insert_jobs = "WITH " + job_rows.format(taken="") + " " + cursor_rows
    # The same rows with the quota's units taken first (:data:`.quota.TAKE_FIRST`):
    # a group's update and insert in one round trip.
    take_and_insert = quota.TAKE_FIRST.rstrip() + ", " + job_rows.format(taken=after_taken) + " " + cursor_rows
    # A group of fresh jobs in one statement (:func:`_record_and_insert`): the
    # request ids recorded (:func:`.requests.recorded_jobs`, reading the tenant's
    # limits), the units taken only when every id was recorded (each new, its
    # payload within the limit), the rows inserted only when they were taken.
    # Otherwise nothing but the recorded ids is written, and they come back for
    # the usual decisions; no row: no such tenant.
    record_and_insert = (
        "WITH " + requests.recorded_jobs() + ", taken AS (" + quota.JOBS.take_sql
        + " AND (SELECT count(*) FROM recorded) = CAST(%(want)s AS BIGINT) RETURNING slot), "
        + job_rows.format(taken=after_taken) + ", cursors AS (" + cursor_rows + " RETURNING 1) "
        "SELECT t.max_jobs, t.max_payload_bytes, EXISTS (SELECT 1 FROM taken), "
        "CASE WHEN EXISTS (SELECT 1 FROM taken) THEN NULL ELSE (SELECT array_agg(request_id) FROM recorded) END "
        "FROM tenants AS t WHERE t.name = %(tenant)s"
    )
    return insert_jobs, take_and_insert, record_and_insert


_INSERT_JOBS, _TAKE_AND_INSERT_JOBS, _RECORD_AND_INSERT_JOBS = _group_statements()

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
    deal: bool = False,
) -> list[Outcome | None]:
    """Create each job of ``batch`` unless its request id was seen; one
    outcome per job, in order.

    - NotFound (raised: nothing written) when the tenant does not exist.
    - An item whose request id was recorded within
      :data:`~.requests.REQUEST_RETENTION` (by an earlier call, or by an
      earlier item of this one) gets the job that request created,
      ``created`` False, and writes nothing, whatever its own definition;
      NotFound("job") when that job was deleted since.
    - A new item over the tenant's ``max_payload_bytes``, or past its
      ``max_jobs`` (the items in order: the first ones that fit are
      created), gets QuotaExceeded and writes nothing.
    - Every other item is created (:data:`CREATED`): its request id
      recorded, a unit of the quota taken from ``slot``, the job row
      inserted (``quota_slot`` = ``slot``, ``created_at`` = ``now_us``),
      all in the caller's transaction.

    Raises :class:`.quota.SlotDry` (nothing to keep: roll back) when
    ``slot`` could not cover the new items on an engine with row locks;
    run it again with ``deal`` True, which deals the tenant's quota again
    at once (:func:`.quota.take`).
    """
    tenant = batch.tenant
    request_ids = batch.request_ids
    first_of: dict[str, int] = {}
    repeats: list[int] = []
    for index, request_id in enumerate(request_ids):
        if request_id in first_of:
            repeats.append(index)
        else:
            first_of[request_id] = index
    firsts = list(first_of.values())
    if not repeats and in_one_statement(caps, len(batch), deal=deal):
        limits, created, fresh = _record_and_insert(conn, batch, slot, partition_count, now_us)
        if created:
            return [CREATED] * len(batch)
        if limits is not None and len(fresh) == len(batch):  # every id new and within the limit: the slot was dry
            raise quota.SlotDry(tenant, slot)
    else:
        limits, fresh = _record(conn, caps, batch, firsts if repeats else None, now_us)
    if limits is None:
        raise NotFound("tenant", tenant)
    max_jobs, max_payload = limits
    outcomes: list[Outcome | None] = [None] * len(batch)
    sizes = batch.payload_sizes
    oversized = [index for index in firsts if sizes[index] > max_payload]
    candidates = [index for index in firsts if sizes[index] <= max_payload] if oversized else firsts
    if len(fresh) == len(candidates):
        new, seen = candidates, []
    else:
        new = [i for i in candidates if request_ids[i] in fresh]
        seen = [i for i in candidates if request_ids[i] not in fresh]
    chosen = new if len(new) < len(batch) else None
    previous: list[str] | None = None
    if quota.taken_in_insert(caps, len(new), deal=deal):
        previous = _insert_jobs(conn, caps, batch, chosen, slot, partition_count, now_us, take=True)
        if previous is None:
            raise quota.SlotDry(tenant, slot)
    elif quota.tried_in_insert(caps, len(new), deal=deal):
        driver.savepoint(conn)
        previous = _insert_jobs(conn, caps, batch, chosen, slot, partition_count, now_us, take=True)
        if previous is None:  # the slot was dry: nothing inserted, its lock let go, dealt again below
            driver.rollback_to_savepoint(conn)
            deal = True
    if previous is None:
        granted = quota.take(conn, caps, tenant, slot, len(new), deal=deal)
        refused, new = new[granted:], new[:granted]
        if refused:
            requests.forget(conn, tenant, requests.JOB, [request_ids[i] for i in refused])
            for index in refused:
                outcomes[index] = QuotaExceeded(
                    tenant, "max_jobs", max_jobs, "the tenant has as many jobs as it may"
                )
        chosen = new if len(new) < len(batch) else None
        previous = _insert_jobs(conn, caps, batch, chosen, slot, partition_count, now_us) if new else None
    if previous:
        # A ``previous`` job is scanned at the instant its first run moves to.
        rekey_previous(conn, previous, from_us(now_us), tenant=tenant)
    if seen or oversized:
        # An oversized item whose request id was seen is a repeat like any
        # other: it gets the job its first request created.
        found = _jobs_of_requests(conn, tenant, [request_ids[i] for i in seen + oversized], now_us)
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


def in_one_statement(caps: Capabilities, size: int, *, deal: bool = False) -> bool:
    """Whether a batch of ``size`` jobs, its request ids all different, is
    first tried in one statement (:func:`_record_and_insert`): PostgreSQL,
    where its units are taken in its insert (:func:`.quota.taken_in_insert`)
    and its ids recorded without a savepoint (fewer than
    :data:`.requests.OPTIMISTIC_FROM`): a CreateJob group."""
    return caps.is_postgres and size < requests.OPTIMISTIC_FROM and quota.taken_in_insert(caps, size, deal=deal)


def _record_and_insert(
    conn: Connection, batch: NewJobs, slot: int, partition_count: int, now_us: int
) -> tuple[tuple[int, int] | None, bool, set[str]]:
    """``batch`` created in one statement if every one of its request ids
    is new, every payload within the tenant's limit and ``slot`` can cover
    them all: (the tenant's ``max_jobs`` and ``max_payload_bytes``, True,
    nothing). Otherwise only the ids :func:`.requests.record_jobs` would
    record are (limits, False, those ids), and the caller decides the rest
    as after :func:`_record`; (None, False, nothing): no such tenant,
    nothing written."""
    parameters, previous = _job_parameters(batch, None, slot, partition_count, now_us)
    triples = sorted(zip(batch.request_ids, batch.ids, batch.payload_sizes))
    rows = driver.rows(conn, _RECORD_AND_INSERT_JOBS, parameters | requests.record_jobs_parameters(
        batch.tenant, triples, now_us))  # fmt: skip
    if not rows:
        return None, False, set()
    max_jobs, max_payload, created, recorded = rows[0]
    if created and previous:
        rekey_previous(conn, previous, from_us(now_us), tenant=batch.tenant)
    return (max_jobs, max_payload), created, set(recorded or ())


def _record(
    conn: Connection, caps: Capabilities, batch: NewJobs, chosen: list[int] | None, now_us: int
) -> tuple[tuple[int, int] | None, set[str]]:
    """The tenant's ``max_jobs`` and ``max_payload_bytes`` (None when it
    does not exist), and the request ids of ``batch``'s items at
    ``chosen`` (None: every one) recorded (:func:`.requests.record`) of
    those within ``max_payload_bytes``: one statement on PostgreSQL and
    CockroachDB (:func:`.requests.record_jobs`), two on SQLite."""

    def column(values: list) -> list:
        return values if chosen is None else [values[i] for i in chosen]

    if not caps.is_sqlite:
        return requests.record_jobs(conn, batch.tenant, column(batch.request_ids), column(batch.ids),
                                    column(batch.payload_sizes), now_us)  # fmt: skip
    row = conn.execute(
        sa.select(tenants.c.max_jobs, tenants.c.max_payload_bytes).where(tenants.c.name == batch.tenant)
    ).first()
    if row is None:
        return None, set()
    fitting = [index for index in (range(len(batch)) if chosen is None else chosen)
               if batch.payload_sizes[index] <= row[1]]  # fmt: skip
    fresh = requests.record(conn, caps, batch.tenant, requests.JOB, [batch.request_ids[i] for i in fitting],
                            [batch.ids[i] for i in fitting], now_us)  # fmt: skip
    return (row[0], row[1]), fresh


def _insert_jobs(
    conn: Connection, caps: Capabilities, batch: NewJobs, chosen: list[int] | None, slot: int, partition_count: int,
    now_us: int, *, take: bool = False,
) -> list[str] | None:
    """Insert the rows of ``batch``'s jobs at ``chosen`` (None: every one);
    the ids of those naming a calendar with the rule ``previous``. With
    ``take`` (PostgreSQL and CockroachDB, :func:`.quota.taken_in_insert`)
    their units are taken from ``slot`` in the same statement, and nothing
    is inserted (None) when it could not cover them."""
    if not caps.is_sqlite:
        parameters, previous = _job_parameters(batch, chosen, slot, partition_count, now_us)
        inserted = driver.rowcount(conn, _TAKE_AND_INSERT_JOBS if take else _INSERT_JOBS, parameters)
        return previous if inserted or not take else None
    columns, previous = _job_columns(batch, chosen, partition_count)
    ids, partitions, states, specs, calendars = columns
    conn.execute(jobs.insert(), [
        dict(id=job_id, tenant=batch.tenant, partition=partition, name=name, state=state, spec=spec,
             time_zone=zone, tzdata_version=tzdata, pause_reason="", paused_at=None, version=1,
             created_at=now_us, updated_at=now_us, quota_slot=slot, calendar=calendar)
        for job_id, partition, name, state, spec, zone, tzdata, calendar in zip(
            ids, partitions, _column(batch.names, chosen), states, specs, _column(batch.zones, chosen),
            _column(batch.tzdata, chosen), calendars,
        )
    ])  # fmt: skip
    conn.execute(job_cursors.insert(), [
        dict(job_id=job_id, tenant=batch.tenant, partition=partition, state=state, version=1,
             next_run_at=next_run, next_due_at=next_due, run_count=0, next_nominal_at=None)
        for job_id, partition, state, next_run, next_due in zip(
            ids, partitions, states, _column(batch.next_runs, chosen), _column(batch.next_dues, chosen)
        )
    ])  # fmt: skip
    return previous


def _column(values: list, chosen: list[int] | None) -> list:
    return values if chosen is None else [values[i] for i in chosen]


def _job_columns(
    batch: NewJobs, chosen: list[int] | None, partition_count: int
) -> tuple[tuple[list, list, list, list, list], list[str]]:
    """(ids, partitions, states, definitions, calendars) of ``batch``'s jobs
    at ``chosen`` (None: every one), and the ids of those naming a calendar
    with the rule ``previous``."""
    ids = _column(batch.ids, chosen)
    partitions = [partition_of(job_id, partition_count) for job_id in ids]
    next_runs = _column(batch.next_runs, chosen)
    if None in next_runs:
        states = ["active" if at is not None else "completed" for at in next_runs]
    else:  # every job has a next run (the usual batch)
        states = ["active"] * len(ids)
    specs = _column(batch.specs, chosen)
    if calendar_named(specs):
        refs = [calendar_ref(spec) for spec in specs]
        calendars = [name for name, _ in refs]
        previous = [job_id for job_id, (_, earlier) in zip(ids, refs) if earlier]
    else:  # no definition names a calendar (the usual batch): none parsed
        calendars, previous = [""] * len(ids), []
    return (ids, partitions, states, specs, calendars), previous


def _job_parameters(
    batch: NewJobs, chosen: list[int] | None, slot: int, partition_count: int, now_us: int
) -> tuple[dict, list[str]]:
    """The parameters of the jobs' insert (:data:`_INSERT_JOBS` and the
    statements built on it) for ``batch``'s jobs at ``chosen`` (None: every
    one), and the ids of those naming a calendar with the rule ``previous``."""
    (ids, partitions, states, specs, calendars), previous = _job_columns(batch, chosen, partition_count)
    return dict(
        tenant=batch.tenant, now=now_us, slot=slot, want=len(ids), ids=array_literal(ids),
        partitions=array_literal(partitions), names=array_literal(_column(batch.names, chosen)),
        states=array_literal(states), specs=ByteaArray(specs), zones=array_literal(_column(batch.zones, chosen)),
        next_runs=array_literal(_column(batch.next_runs, chosen)),
        next_dues=array_literal(_column(batch.next_dues, chosen)),
        tzdata=array_literal(_column(batch.tzdata, chosen)), calendars=array_literal(calendars),
    ), previous  # fmt: skip


def _jobs_of_requests(conn: Connection, tenant: str, ids: list[str], now_us: int) -> dict[str, Outcome]:
    """What each request id of ``tenant`` recorded within the window
    created: (its job, False), or NotFound when the job was deleted since."""
    rows = conn.execute(
        sa.select(request_rows.c.request_id, request_rows.c.target, *JOB_COLUMNS)
        .select_from(request_rows)
        .join(
            JOB_WITH_CURSOR, sa.and_(jobs.c.id == request_rows.c.target, jobs.c.tenant == request_rows.c.tenant),
            isouter=True,
        )
        .where(
            request_rows.c.tenant == tenant,
            request_rows.c.kind == requests.JOB,
            one_of(capabilities(conn), request_rows.c.request_id, ids),
            request_rows.c.created_at >= requests.cutoff(now_us),
        )
    ).all()
    return {
        row.request_id: (job_record(row), False) if row.id is not None else NotFound("job", row.target)
        for row in rows
    }
