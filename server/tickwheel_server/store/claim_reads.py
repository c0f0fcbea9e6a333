"""The dispatcher's claim reads (see :mod:`.dispatch`): the due jobs of the
owned partitions, one batch in the order of ``job_cursors_due``, and what a due
row says: its definition if the claim can read it, its cursor, the fires
after it (pure); and the claimed executions its timer wheel is rebuilt from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import NamedTuple

import sqlalchemy as sa

from tickwheel.shared.ids import from_us

from ..jobspec import DefinitionCache, JobDefinition
from ..policy.backlog import MAX_NOT_STARTED_CAP
from ..schedule import Fire, ScheduleError, next_fire
from . import pipeline
from .base import array_literal, driver_sql, execute_arrays, one_of, tuples
from .engine import Capabilities
from .quarantine import JOB_UNREADABLE, SCHEDULE_UNCOMPUTABLE, Unreadable
from .isolation import status_in
from .partitions import epochs_statement, stale_of
from .tables import executions, job_cursors, jobs, tenants
from .timeline import NOT_STARTED, in_group

_new_fire = partial(tuple.__new__, Fire)


class DueRow(NamedTuple):
    """A due job as the claim's SELECT returns it."""

    id: str
    tenant: str
    partition: int
    version: int
    next_run_at: int
    next_due_at: int | None
    run_count: int | None
    tenant_state: str | None
    """The tenant's state, '' for a tenant row missing (read once a run of the tenant's rows: :func:`due_rows`)."""
    next_nominal_at: int | None
    """Set only while ``next_run_at`` is the earlier instant a ``previous`` rule moved the cursor to."""
    spec: bytes | None
    """The job's definition at the cursor's version when the SELECT read it (``specs``), else None."""
    waiting: int
    """The job's executions not started, counted up to :data:`~..policy.backlog.MAX_NOT_STARTED_CAP`."""


_SPEC_OF_ROW = "(SELECT j.spec FROM jobs AS j WHERE j.id = c.job_id AND j.version = c.version) AS spec "
# The job's executions not started, up to the largest cap: a range scan of
# executions_not_started_job (its predicate as the index writes it) that
# stops at the LIMIT; a healthy job has one or two entries there.
_WAITING_OF_ROW = (
    "(SELECT count(*) FROM (SELECT 1 FROM executions AS e WHERE e.job_id = c.job_id "
    f"AND e.status IN ('scheduled', 'waiting') LIMIT {MAX_NOT_STARTED_CAP}) AS w) AS waiting "
)


_CURSOR_COLUMNS = "job_id, tenant, partition, version, next_run_at, next_due_at, run_count, next_nominal_at"

# The fence (:func:`fenced_due`): a partition is scanned only while its
# stored epoch is the one held. The epochs' check sent just before in the
# same round trip has share-locked those rows, and this statement's
# snapshot, taken after it, reads the same epochs. Per partition of the
# lateral form, a probe of ``partitions``' primary key that gates its scan
# (it names no cursor column: a one-time filter); in the one-statement
# form, the owned partitions whose epoch is held, as an array.
_HELD = "EXISTS (SELECT 1 FROM partitions AS pt WHERE pt.partition = p.partition AND pt.epoch = p.epoch)"
_LIVE = (
    "ARRAY(SELECT held.partition FROM unnest(CAST(:owned AS INTEGER[]), CAST(:epochs AS BIGINT[])) "
    "AS held (partition, epoch) JOIN partitions AS pt ON pt.partition = held.partition AND pt.epoch = held.epoch)"
)


def due_sql(*, excluding: bool, skip_locked: bool, specs: bool, lateral: bool = False) -> str:
    """The claim's SELECT as driver SQL (PostgreSQL and CockroachDB): the
    owned partitions, their epochs and the excluded keys as one array
    parameter each, so the statement's text is the same every tick, and its
    rows read as the driver's tuples (no SQLAlchemy compilation nor ``Row``
    per row).

    Fenced in itself: it scans only the owned partitions whose stored epoch
    is the one held (``partitions``' primary key, once a partition, before
    the scan), so it can go in the epochs' check's round trip, after it
    (:func:`fenced_due`): a stale partition's jobs are neither read nor
    locked.

    The due cursors come from ``job_cursors_due`` (the narrow cursor table,
    migration 0032) and nothing of ``jobs`` is read here: the definitions
    come from the cache, or by primary key for those it lacks
    (:func:`definitions`). FOR UPDATE locks the cursors, the one row a
    claim writes (a job write locks both rows, so it and a claim exclude
    each other on the cursor). Per returned row, one probe of the tenants'
    primary key: it leaves the scan on the index (and its LIMIT) as it is.

    ORDER BY the order of job_cursors_due itself, so the index gives it with no
    sort and the scan stops at the LIMIT. Without it the plan hangs on the
    statistics of next_run_at, which every claim makes stale: estimating
    many rows due, PostgreSQL prefers a Seq Scan that would stop early, and
    when nothing is due it reads the whole table every tick. (Not
    next_run_at alone: across partitions the index cannot give that order,
    and a sort would read every due row before the LIMIT.)

    ``lateral`` (PostgreSQL): the same rows in the same order, one LIMITed
    scan per partition, ``unnest`` of the owned partitions (sorted by the
    caller) joined LATERAL to ``job_cursors_due`` at ``partition = p``
    ORDER BY ``next_run_at``, the outer LIMIT stopping the nested loop at
    the batch. The one-statement form's plan still hangs on the statistics
    of the row count: on cursors stored after the last ANALYZE (a batch of
    one-offs, estimated at 8 rows where 5 000 are due) PostgreSQL prices
    the ordered scan and a Bitmap Heap Scan with a Sort alike and takes the
    latter, which reads and sorts every due row of the owned partitions for
    each batch: quadratic over a drain. Per partition, equality on the
    index's first column leaves nothing to sort, and a small estimate makes
    the plain index scan the cheaper one, so each batch reads about itself
    whatever the statistics say. The outer query has no ORDER BY (the
    planner would sort every partition's LIMIT): the nested loop's order is
    the array's, then each scan's (``tests/conformance/test_claim_fresh_rows.py``).
    Elsewhere (CockroachDB) the one-statement form is sent.

    The excluded keys (what this process cannot read, at the version it
    could not read) as NOT (:excluded @> ARRAY[key]), not key <> ALL(:excluded):
    the planner prices the latter as dropping nearly every row (0.995 ^ n)
    and trades the ordered scan that stops at the LIMIT for reading and
    sorting every due row; an array containment gets its default
    selectivity, so the plan stays that of the claim without exclusions.

    ``specs``: each row's definition too, a scalar subquery on ``jobs``'
    primary key evaluated only for the rows returned (at the cursor's
    version: NULL for a job row missing or at another), for a claim that
    expects to parse most of its batch (one-off jobs, each claimed once):
    no round trip more for :func:`definitions`. Without it a claim whose
    definitions are cached (recurring jobs) reads nothing of ``jobs``."""
    due = "c.state = 'active' AND c.next_run_at <= :horizon"
    if excluding:
        due += " AND NOT (CAST(:excluded AS TEXT[]) @> ARRAY[c.job_id || '@' || CAST(c.version AS TEXT)])"
    lock = " FOR UPDATE OF c SKIP LOCKED" if skip_locked else ""
    state = "COALESCE((SELECT tenants.state FROM tenants WHERE tenants.name = c.tenant), '')"
    if lateral:  # once a run of a tenant's rows (no window beside FOR UPDATE: the one-statement form reads each)
        state = f"CASE WHEN c.tenant = lag(c.tenant) OVER () THEN NULL ELSE {state} END"
    sql = (
        "SELECT c.job_id, c.tenant, c.partition, c.version, c.next_run_at, c.next_due_at, c.run_count, "
        f"{state} AS tenant_state, c.next_nominal_at, "
        + (_SPEC_OF_ROW if specs else "CAST(NULL AS BYTEA) AS spec ")
        + ", " + _WAITING_OF_ROW
    )
    if lateral:
        sql += (
            "FROM unnest(CAST(:owned AS INTEGER[]), CAST(:epochs AS BIGINT[])) AS p (partition, epoch) "
            "CROSS JOIN LATERAL "
            f"(SELECT {_CURSOR_COLUMNS} FROM job_cursors AS c WHERE c.partition = p.partition AND {due} AND {_HELD} "
            f"ORDER BY c.next_run_at LIMIT :batch{lock}) AS c LIMIT :batch"
        )
    else:
        sql += (
            f"FROM job_cursors AS c WHERE {due} AND c.partition = ANY({_LIVE}) "
            f"ORDER BY c.partition, c.next_run_at LIMIT :batch{lock}"
        )
    return driver_sql(sql)


DUE_SQL = {
    (excluding, skip_locked, specs, lateral): due_sql(
        excluding=excluding, skip_locked=skip_locked, specs=specs, lateral=lateral
    )
    for excluding in (False, True)
    for skip_locked in (False, True)
    for specs in (False, True)
    for lateral in (False, True)
}
"""By (excluding, skip_locked, specs, lateral)."""


def fenced_due(conn, owned: Mapping[int, int], sql: str, parameters: dict) -> tuple[set[int], list[tuple]]:
    """BEGIN, the epochs' check and the due SELECT ``sql`` (of
    :data:`DUE_SQL`; ``parameters`` without the partitions) in one round
    trip (:func:`.pipeline.send`), PostgreSQL and CockroachDB: the
    partitions of ``owned`` (partition -> the epoch held) that are stale,
    and the due rows of the others.

    The check runs first and share-locks the partitions' rows (a raise of
    their epoch then waits for this transaction); the SELECT, a statement
    after it (at READ COMMITTED a snapshot taken after those locks; at
    SERIALIZABLE the same snapshot), reads the same epochs, and scans only
    the partitions whose epoch is the one held: what :func:`.partitions.check_epochs`
    then a SELECT of the live partitions returned, one round trip sooner."""
    partitions = sorted(owned)
    due = dict(parameters, owned=array_literal(partitions), epochs=array_literal([owned[p] for p in partitions]))
    due = {name: array_literal(value) if isinstance(value, list) else value for name, value in due.items()}
    stored, rows = pipeline.send(conn, [epochs_statement(conn, owned), (sql, due)])
    return stale_of(owned, dict(stored)), rows


def due_select(live: list[int], horizon_us: int, batch: int, excluded: list[str], skip_locked: bool):
    """The same SELECT for SQLite (an ``IN`` list, no arrays)."""
    cursors = job_cursors.c
    spec = (
        sa.select(jobs.c.spec)
        .where(jobs.c.id == cursors.job_id, jobs.c.version == cursors.version)
        .scalar_subquery()
        .label("spec")
    )
    tenant_state = (
        sa.func.coalesce(sa.select(tenants.c.state).where(tenants.c.name == cursors.tenant).scalar_subquery(), "")
        .label("tenant_state")
    )
    waiting = (
        sa.select(sa.func.count())
        .select_from(
            sa.select(sa.literal(1)).where(executions.c.job_id == cursors.job_id, *in_group(NOT_STARTED))
            .correlate(job_cursors).limit(MAX_NOT_STARTED_CAP).subquery()
        )
        .scalar_subquery()
        .label("waiting")
    )
    query = (
        sa.select(
            cursors.job_id, cursors.tenant, cursors.partition, cursors.version, cursors.next_run_at,
            cursors.next_due_at, cursors.run_count, tenant_state, cursors.next_nominal_at, spec, waiting,
        )
        .where(status_in(cursors.state, "active"), cursors.partition.in_(live), cursors.next_run_at <= horizon_us)
        .order_by(cursors.partition, cursors.next_run_at)
        .limit(batch)
    )  # fmt: skip
    if excluded:
        query = query.where((cursors.job_id + "@" + sa.cast(cursors.version, sa.Text)).not_in(excluded))
    if skip_locked:
        query = query.with_for_update(skip_locked=True)
    return query


_make_due = DueRow._make


def due_rows(found) -> list[DueRow]:
    """The claim SELECT's tuples as :class:`DueRow`, each with its tenant's
    state: the lateral form reads it once a run of one tenant's rows and
    sends NULL for the rest of the run (a one-tenant batch of 1 000 rows
    probes ``tenants`` once, not 1 000 times); the state is carried down
    here. A tenant row missing reads as '', never NULL."""
    rows = list(map(_make_due, found))
    state = None
    for index, row in enumerate(rows):
        if row.tenant_state is None:
            rows[index] = row._replace(tenant_state=state)
        else:
            state = row.tenant_state
    return rows


_SPECS = driver_sql("SELECT id, version, spec FROM jobs WHERE id = ANY(CAST(:ids AS TEXT[]))")


def definitions(
    conn, arrays: bool, rows: list[DueRow], cache: DefinitionCache, *, read: bool
) -> tuple[list[JobDefinition | None], bool]:
    """Each due row's definition at its cursor's version: from ``cache``,
    else from the row (``read``: the SELECT carried the definitions), else
    read by ``jobs``' primary key (one statement for the batch's misses),
    parsed into ``cache``. None for a row whose job row is missing or at
    another version (a cursor no job write wrote: :func:`claimable` makes
    it unreadable). With them, whether the next SELECT should carry the
    definitions: when most of this batch missed the cache."""
    found = [cache.cached(row.id, row.version) for row in rows]
    missing = [row.id for row, definition in zip(rows, found) if definition is None]
    if not missing:
        return found, False
    if read:
        specs = {row.id: (row.version, row.spec) for row in rows if row.spec is not None}
    elif arrays:
        read_rows = tuples(execute_arrays(conn, _SPECS, {"ids": missing}))
        specs = {ident: (version, spec) for ident, version, spec in read_rows}
    else:
        query = sa.select(jobs.c.id, jobs.c.version, jobs.c.spec).where(jobs.c.id.in_(missing))
        specs = {ident: (version, spec) for ident, version, spec in conn.execute(query)}
    for index, row in enumerate(rows):
        if found[index] is None:
            version, spec = specs.get(row.id, (None, None))
            if version == row.version:
                found[index] = cache.parse(row.id, row.version, spec)  # it missed above
    return found, 2 * len(missing) > len(rows)


REVIEW_COLUMNS = (
    jobs.c.id, jobs.c.partition, job_cursors.c.state, jobs.c.spec, jobs.c.version, job_cursors.c.next_run_at,
    job_cursors.c.next_due_at, job_cursors.c.run_count, job_cursors.c.next_nominal_at,
)  # fmt: skip
"""What the quarantine's review reads of a job (FROM :data:`JOB_WITH_CURSOR`): :func:`dispatchable`'s row."""


def scheduled_select(caps: Capabilities, partitions: list[int], until_us: int, limit: int):
    """The executions of ``partitions`` still ``scheduled`` and ready by
    ``until_us``, oldest first (what the timer wheel is rebuilt from). One
    range scan of ``executions_scheduled_tenant (ready_at, tenant, partition)`` up to
    ``until_us``, keeping the partitions asked for: it passes over the
    entries of the others (a rare read: no index by partition is kept for
    it, which would cost an entry at every insert of a scheduled row)."""
    return (
        sa.select(executions.c.id, executions.c.partition, executions.c.ready_at)
        .where(
            # A literal: a prepared statement's generic plan can use the partial index.
            status_in(executions.c.status, "scheduled"),
            one_of(caps, executions.c.partition, partitions, "INTEGER"),
            executions.c.ready_at <= until_us,
        )
        .order_by(executions.c.ready_at)
        .limit(limit)
    )


# ------------------------------------------------------------ what a due row says


def claimable(definition: JobDefinition | None) -> JobDefinition:
    """``definition`` if the claim can read it; raises :class:`Unreadable`
    (``job_unreadable``) with its problem otherwise, or when there is none
    (a cursor without its job row at its version) (pure)."""
    if definition is None:
        raise Unreadable(JOB_UNREADABLE, "no job row at the cursor's version")
    if definition.problem is not None:
        raise Unreadable(JOB_UNREADABLE, definition.problem)
    return definition


def claim_cursor(row, instants: dict[int, datetime] | None = None) -> Fire:
    """A due row's cursor (its next fire) as a :class:`Fire` (pure); raises
    :class:`Unreadable` for impossible values (a due instant missing, before
    the nominal one or out of range, a negative run count, a nominal instant
    kept beside a scan key not before it). The nominal instant is
    ``next_nominal_at`` when set, otherwise ``next_run_at``.

    ``instants`` (microseconds → instant) is a memo the caller keeps for one
    batch: the jobs of a batch share a few cursors (minute boundaries), and
    converting each again costs more than the rest of this check."""
    next_run_at, next_due_at = row.next_run_at, row.next_due_at
    if row.next_nominal_at is not None:
        # ``previous`` moved the cursor's occurrence earlier: the row is
        # scanned at that instant, the cursor is the nominal one.
        if next_run_at is None or row.next_nominal_at <= next_run_at:
            raise Unreadable(JOB_UNREADABLE, "next_nominal_at is not after next_run_at")
        next_run_at = row.next_nominal_at
    if next_due_at is None:
        raise Unreadable(JOB_UNREADABLE, "next_due_at is NULL while next_run_at is set")
    if row.run_count is None or row.run_count < 0:
        raise Unreadable(JOB_UNREADABLE, f"run_count {row.run_count} is negative")
    if next_due_at < next_run_at:
        raise Unreadable(JOB_UNREADABLE, "next_due_at is before next_run_at (jitter only delays)")
    if instants is None:
        instants = {}
    try:
        nominal = instants.get(next_run_at)
        if nominal is None:
            nominal = instants[next_run_at] = from_us(next_run_at)
        due = instants.get(next_due_at)
        if due is None:
            due = instants[next_due_at] = from_us(next_due_at)
    except OverflowError:
        raise Unreadable(JOB_UNREADABLE, f"next_run_at {next_run_at} or next_due_at is out of range") from None
    return _new_fire((nominal, due, 0, ""))


def following_fires(spec: JobDefinition, run_count: int) -> Callable[[Fire, int], Fire | None]:
    """The ``following`` function of a plan (see :func:`plan_claim`): the
    engine's next fire, an error of the engine raised as :class:`Unreadable`
    (``schedule_uncomputable``), never taken for the schedule's end."""

    def following(fire: Fire, runs: int) -> Fire | None:
        try:
            return next_fire(spec.schedule, fire.nominal_at, runs_so_far=run_count + runs)
        except (ScheduleError, ValueError, OverflowError) as error:
            raise Unreadable(SCHEDULE_UNCOMPUTABLE, str(error)) from None

    return following


def dispatchable(row) -> bool:
    """Whether this server reads a job row and computes its next fire (pure)."""
    try:
        spec = claimable(JobDefinition.parse(row.id, row.version, row.spec))
        following_fires(spec, row.run_count)(claim_cursor(row), 0)
    except Unreadable:
        return False
    return True
