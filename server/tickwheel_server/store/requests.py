"""Request ids of the create calls (CreateJob, BatchCreateJobs, CreateCalendar): recorded, looked up, pruned.

One table, ``request_ids (tenant, kind, request_id)``, holds what each
create request made (``target``: the job id, the calendar's name) and when
(``created_at``). A request id is remembered for :data:`REQUEST_RETENTION`
from its first call, exactly: a row older than that is dead (no lookup
sees it, and recording the id again takes the row over as a new request)
whether or not it has been pruned yet, so the window does not depend on
how far the pruning has got. Pruning (:func:`prune`) is the retention
runner's, in bounded batches off the create path, oldest first on
``request_ids_created``.

Every function runs in the caller's transaction and is scoped to one tenant
and one kind: a request id of another tenant, or of another kind of create,
is another request (docs/architecture.md, "Data").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from . import driver
from .base import array_literal, one_of
from .engine import Capabilities, capabilities
from .tables import request_ids
from .transactions import sqlstate_of

REQUEST_RETENTION = timedelta(hours=24)
"""How long a create's request id is remembered (the contract's "idempotent
for 24 hours", CreateJobRequest and CreateCalendarRequest)."""
REQUEST_RETENTION_US = int(REQUEST_RETENTION / timedelta(microseconds=1))

JOB = "job"
"""The kind of CreateJob and BatchCreateJobs items; the target is the job id."""
CALENDAR = "calendar"
"""The kind of CreateCalendar; the target is the calendar's name."""

# PostgreSQL and CockroachDB: one statement over arrays, sent as driver SQL
# with array literals (:func:`.base.array_literal`, cheaper to build than
# psycopg's list dumpers): a fixed text, one plan, whatever the batch.
# A row already there is taken over only when it is past the window (the
# conflicting row is locked either way, so a concurrent prune waits for this
# transaction instead of deleting a row it reads next).
_INSERT = (
    "INSERT INTO request_ids (tenant, kind, request_id, target, created_at) "
    "SELECT CAST(%(tenant)s AS TEXT), CAST(%(kind)s AS TEXT), v.request_id, v.target, "
    "CAST(%(created_at)s AS BIGINT) "
)
_ON_CONFLICT = (
    " ON CONFLICT (tenant, kind, request_id) DO UPDATE SET target = excluded.target, created_at = excluded.created_at "
    "WHERE request_ids.created_at < CAST(%(cutoff)s AS BIGINT)"
)
_RECORD = (
    _INSERT + "FROM unnest(CAST(%(request_ids)s AS TEXT[]), CAST(%(targets)s AS TEXT[])) AS v (request_id, target)"
    + _ON_CONFLICT + " RETURNING request_id"
)


UNIQUE_VIOLATION = "23505"
OPTIMISTIC_FROM = 64
"""From this many request ids :func:`record_jobs` tries the plain insert first:
two round trips more (the savepoint), small beside that many rows, and a
repeat costs the plain insert's work again."""


# A create of jobs records its request ids and reads the tenant's limits in
# one statement (a round trip less a group): an id whose payload is over
# ``max_payload_bytes`` is not recorded (nor any of a tenant that does not
# exist); the limits come back on every row, or on one row with a NULL id
# when nothing was recorded; no row: no such tenant. Both reads of
# ``tenants`` see the statement's snapshot. A SELECT over a data-modifying
# CTE's RETURNING, and a scalar subquery over it: PostgreSQL and CockroachDB
# (its one limit, two CTEs modifying one table, does not arise).
_INSERT_SIZED = (
    _INSERT + "FROM unnest(CAST(%(request_ids)s AS TEXT[]), CAST(%(targets)s AS TEXT[]), "
    "CAST(%(sizes)s AS BIGINT[])) AS v (request_id, target, size) "
    "WHERE v.size <= (SELECT max_payload_bytes FROM tenants WHERE name = %(tenant)s)"
)


def recorded_jobs() -> str:
    """:data:`_RECORD_JOBS`' insert as a CTE named ``recorded`` (its rows: the
    request ids recorded), for a statement that goes on to use them
    (:mod:`.jobcreate`'s group in one statement); parameters as
    :func:`record_jobs` binds them (:func:`record_jobs_parameters`). A
    function, not a constant: a fragment is no statement of its own."""
    return "recorded AS (" + _INSERT_SIZED + _ON_CONFLICT + " RETURNING request_id)"


_RECORD_JOBS = (
    "WITH " + recorded_jobs() + " "
    "SELECT t.max_jobs, t.max_payload_bytes, r.request_id FROM tenants AS t LEFT JOIN recorded AS r ON true "
    "WHERE t.name = %(tenant)s"
)
# Its plain form, without ON CONFLICT: tried first, in a savepoint, for a
# batch of :data:`OPTIMISTIC_FROM` ids or more. PostgreSQL's ON CONFLICT
# checks each row's key before inserting it and confirms the insert after (a
# speculative insertion; loadtest/RESULTS.md, "BatchCreateJobs' write"); a
# plain insert checks the key once, as it enters the index. Any id already
# there (a repeat, a concurrent insert that committed, a row past the window)
# fails it with a unique violation, and the savepoint rolls back to
# :data:`_RECORD_JOBS`, which tells them apart. Every id that fits is
# recorded, so only how many comes back.
_INSERT_FRESH_JOBS = (
    "WITH recorded AS (" + _INSERT_SIZED + " RETURNING 1) "
    "SELECT t.max_jobs, t.max_payload_bytes, (SELECT count(*) FROM recorded) FROM tenants AS t "
    "WHERE t.name = %(tenant)s"
)


def cutoff(now_us: int) -> int:
    """Rows created before this instant are past the window at ``now_us``."""
    return now_us - REQUEST_RETENTION_US


def record(
    conn: Connection, caps: Capabilities, tenant: str, kind: str, ids: Sequence[str], targets: Sequence[str],
    now_us: int,
) -> set[str]:
    """Record each (request id, target) of ``tenant`` and ``kind`` not
    recorded within the window; returns the request ids recorded by this
    call. One that is not returned was recorded within the window (its
    row is locked until the caller's transaction ends, so it stays).

    Ids are inserted in sorted order: an insert waits for a concurrent
    transaction that inserted the same id, so two batches repeating each
    other's ids in different orders would each wait for the other. (Jobs'
    request ids on PostgreSQL and CockroachDB: :func:`record_jobs`.)"""
    if not ids:
        return set()
    pairs = sorted(zip(ids, targets))
    before = cutoff(now_us)
    if not caps.is_sqlite:
        parameters = dict(
            tenant=tenant, kind=kind, created_at=now_us, cutoff=before,
            request_ids=array_literal([request_id for request_id, _ in pairs]),
            targets=array_literal([target for _, target in pairs]),
        )  # fmt: skip
        return {row[0] for row in driver.rows(conn, _RECORD, parameters)}
    statement = sqlite.insert(request_ids).values(
        [dict(tenant=tenant, kind=kind, request_id=request_id, target=target, created_at=now_us)
         for request_id, target in pairs]
    )  # fmt: skip
    statement = statement.on_conflict_do_update(
        index_elements=["tenant", "kind", "request_id"],
        set_=dict(target=statement.excluded.target, created_at=statement.excluded.created_at),
        where=request_ids.c.created_at < before,
    ).returning(request_ids.c.request_id)
    return set(conn.execute(statement).scalars())


def record_jobs(
    conn: Connection, tenant: str, ids: Sequence[str], targets: Sequence[str], sizes: Sequence[int], now_us: int,
) -> tuple[tuple[int, int] | None, set[str]]:
    """PostgreSQL and CockroachDB: :func:`record` of kind :data:`JOB` for
    the ids whose payload size is within the tenant's ``max_payload_bytes``,
    in the statement that reads the tenant's limits; returns
    ((``max_jobs``, ``max_payload_bytes``), the ids recorded), or (None,
    nothing recorded) when the tenant does not exist. Ids sorted and a
    batch of :data:`OPTIMISTIC_FROM` or more inserted plainly first in a
    savepoint, as :func:`record`: the answer is the same."""
    triples = sorted(zip(ids, targets, sizes))
    parameters = record_jobs_parameters(tenant, triples, now_us)
    if len(triples) >= OPTIMISTIC_FROM:
        driver.savepoint(conn)
        try:
            rows = driver.rows(conn, _INSERT_FRESH_JOBS, parameters)
        except sa_exc.IntegrityError as error:
            if sqlstate_of(error) != UNIQUE_VIOLATION:
                raise
            driver.rollback_to_savepoint(conn)
        else:
            if not rows:
                return None, set()
            max_jobs, max_payload, _ = rows[0]
            return (max_jobs, max_payload), {request_id for request_id, _, size in triples if size <= max_payload}
    rows = driver.rows(conn, _RECORD_JOBS, parameters)
    if not rows:
        return None, set()
    return (rows[0][0], rows[0][1]), {row[2] for row in rows if row[2] is not None}


def record_jobs_parameters(tenant: str, triples: Sequence[tuple[str, str, int]], now_us: int) -> dict:
    """The parameters of :func:`recorded_jobs` for ``triples`` (request id,
    job id, payload size), sorted by request id (:func:`record`'s order)."""
    return dict(
        tenant=tenant, kind=JOB, created_at=now_us, cutoff=cutoff(now_us),
        request_ids=array_literal([request_id for request_id, _, _ in triples]),
        targets=array_literal([target for _, target, _ in triples]),
        sizes=array_literal([size for _, _, size in triples]),
    )  # fmt: skip


def forget(conn: Connection, tenant: str, kind: str, ids: Sequence[str]) -> None:
    """Delete the rows of ``ids`` (recorded by this transaction for items
    it then refused: their next call is a new request)."""
    if ids:
        conn.execute(
            request_ids.delete().where(
                request_ids.c.tenant == tenant, request_ids.c.kind == kind,
                one_of(capabilities(conn), request_ids.c.request_id, ids),
            )
        )


def target_of(conn: Connection, tenant: str, kind: str, request_id: str, now_us: int) -> str | None:
    """What ``request_id`` of ``tenant`` and ``kind`` made, if it was
    recorded within the window; None otherwise."""
    return conn.execute(
        sa.select(request_ids.c.target).where(
            request_ids.c.tenant == tenant,
            request_ids.c.kind == kind,
            request_ids.c.request_id == request_id,
            request_ids.c.created_at >= cutoff(now_us),
        )
    ).scalar()


def prune(conn: Connection, now_us: int, limit: int) -> int:
    """Delete up to ``limit`` rows past the window at ``now_us``, oldest
    first (a range of ``request_ids_created`` with a LIMIT); how many.
    The delete checks the age again, so a row a create took over meanwhile
    stays."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    before = cutoff(now_us)
    oldest = (
        sa.select(request_ids.c.tenant, request_ids.c.kind, request_ids.c.request_id)
        .where(request_ids.c.created_at < before)
        .order_by(request_ids.c.created_at)
        .limit(limit)
    )
    return conn.execute(
        request_ids.delete().where(
            sa.tuple_(request_ids.c.tenant, request_ids.c.kind, request_ids.c.request_id).in_(oldest),
            request_ids.c.created_at < before,
        )
    ).rowcount
