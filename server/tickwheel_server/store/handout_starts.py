"""Step 4 of a hand-out round: which taken candidates start, in the round's
transaction (see :mod:`.handout`).

The pure rules (:mod:`tickwheel_server.policy.admission`) decide; this module
reads what they look at (the candidates' jobs and definitions, the jobs'
running and queued executions, the concurrency keys' rows, locked) and
writes what they decided: the candidates that start keep ``running`` and
take their key slots; the others give their delivery back and wait, are
skipped (deleted, counted in a skip range with reason ``overlap``) or
canceled; what an overlap ``replace`` replaces is canceled. Every function
runs inside the round's transaction and commits nothing itself.

On PostgreSQL (READ COMMITTED) the running executions an overlap decision
reads are share-locked (:data:`_BUSY_SHARED`), read after the not-started
ones, and each ``replace`` job takes an advisory lock (:func:`lock_replacing`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..jobspec import DefinitionCache, JobDefinition
from ..policy.admission import ANYTHING_GOES, Active, Candidate, KeyState, Replace, Rules, Skip
from . import manualslots
from .base import driver_sql, execute_arrays, one_of
from .engine import Capabilities, capabilities
from .isolation import PAUSED_WAIT, ensure_keys, insert_for, lock_keys, not_held, take_slots, wake_keys
from .skiptally import counted
from .tables import executions, jobs, skips
from .timeline import NOT_STARTED, in_group

OVERLAP_REASON = "overlap"
UNION_BRANCHES = 100
"""Scans per UNION ALL statement (SQLite's compound SELECT limit is 500)."""
SkipHook = Callable[[Connection, list[Skip]], None]
"""Called inside the round's transaction with the occurrences its overlap policies skipped (raises their alerts)."""

_ACTIVE_COLUMNS = (
    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.status, executions.c.origin,
    executions.c.nominal_at, executions.c.ready_at, executions.c.attempt, executions.c.allow_overlap,
    executions.c.wait_key, executions.c.cancel_requested_at,
)

# Running, or waiting for a retry: the predicate of executions_busy, written
# as it is there so that every engine matches the partial index.
_BUSY = sa.text("(executions.status = 'running' OR (executions.status = 'scheduled' AND executions.attempt > 1))")

# Per job, its oldest executions not started (executions_not_started_job, one range each).
_JOBS_BY_ID = sa.text("SELECT id, version, spec, updated_at FROM jobs WHERE id = ANY (CAST(:ids AS TEXT[]))")

# What the overlap policies look at, part one (PostgreSQL, READ COMMITTED):
# the candidates' jobs' executions that run or wait for a retry
# (executions_busy, one array parameter), other than this round's own, each
# row share-locked. A result being recorded for one of them holds its row
# (FOR UPDATE) until it commits: the round then reads the row as it ends up,
# and a round that locked first makes the result wait, so the result's
# wake-up sees a waiter this round queued behind it.
_BUSY_SHARED = driver_sql(
    "SELECT e.id, e.job_id, e.tenant, e.status, e.origin, e.nominal_at, e.ready_at, e.attempt, e.allow_overlap, "
    "e.wait_key, e.cancel_requested_at FROM executions AS e "
    "WHERE e.job_id = ANY (CAST(:jobs AS TEXT[])) "
    "AND (e.status = 'running' OR (e.status = 'scheduled' AND e.attempt > 1)) "
    "AND (e.owner IS DISTINCT FROM :owner OR e.handed_out_at IS DISTINCT FROM :at) "
    "FOR SHARE OF e"
)

# Part two: per job, its oldest executions not started up to its newest
# candidate (executions_not_started_job, one LIMITed range each), leaving out
# those its pause holds (isolation.PAUSED_WAIT): they are in no line.
_NOT_STARTED = driver_sql(
    "SELECT a.id, a.job_id, a.tenant, a.status, a.origin, a.nominal_at, a.ready_at, a.attempt, a.allow_overlap, "
    "a.wait_key, a.cancel_requested_at "
    "FROM unnest(CAST(:jobs AS TEXT[]), CAST(:limits AS INTEGER[]), CAST(:uptos AS BIGINT[])) AS q (job_id, n, upto) "
    "CROSS JOIN LATERAL ("
    "SELECT e.id, e.job_id, e.tenant, e.status, e.origin, e.nominal_at, e.ready_at, e.attempt, e.allow_overlap, "
    "e.wait_key, e.cancel_requested_at FROM executions AS e "
    "WHERE e.job_id = q.job_id AND e.status IN ('scheduled', 'waiting') AND e.nominal_at <= q.upto "
    f"AND (e.wait_key IS NULL OR e.wait_key <> '{PAUSED_WAIT}') "
    "ORDER BY e.nominal_at, e.id LIMIT q.n"
    ") AS a"
)

# Transaction advisory locks on jobs (PostgreSQL), one per job, taken in one
# order (the sorted subquery is scanned in its order) so rounds never deadlock.
_LOCK_JOBS = driver_sql(
    "SELECT pg_advisory_xact_lock(s.k) FROM ("
    "SELECT DISTINCT hashtextextended(j, 0) AS k FROM unnest(CAST(:jobs AS TEXT[])) AS j ORDER BY 1"
    ") AS s"
)


# What :func:`settle` writes per candidate, on PostgreSQL and CockroachDB one
# statement per kind for the round (the ids and each row's value as arrays,
# ``ANY`` beside the join for the primary key's path), where an executemany
# sent one UPDATE per candidate; SQLite keeps the executemany. The rows are
# the round's own, locked by its take.
_BY_ID = "WHERE executions.id = ANY (CAST(:ids AS TEXT[])) AND executions.id = v.id"
_GIVE_BACK = "owner = NULL, handed_out_at = NULL, delivery = executions.delivery - 1"
_HOLD_FROM_ARRAYS = driver_sql(
    "UPDATE executions SET held_keys = v.held_keys, wait_key = NULL "
    f"FROM unnest(CAST(:ids AS TEXT[]), CAST(:values AS TEXT[])) AS v (id, held_keys) {_BY_ID}"
)
_WAIT_FROM_ARRAYS = driver_sql(
    "UPDATE executions SET status = 'waiting', wait_key = v.wait_key, "
    f"waiting_since = COALESCE(executions.waiting_since, CAST(:at AS BIGINT)), {_GIVE_BACK} "
    f"FROM unnest(CAST(:ids AS TEXT[]), CAST(:values AS TEXT[])) AS v (id, wait_key) {_BY_ID}"
)
_CANCEL_FROM_ARRAYS = driver_sql(
    "UPDATE executions SET status = 'canceled', finished_at = CAST(:at AS BIGINT), dead_reason = v.reason, "
    f"{_GIVE_BACK} FROM unnest(CAST(:ids AS TEXT[]), CAST(:values AS TEXT[])) AS v (id, reason) {_BY_ID}"
)


class Job(NamedTuple):
    """A candidate's job: its definition and when it was last written."""

    definition: JobDefinition
    updated_at: int


def jobs_of(conn: Connection, caps: Capabilities, lateral: bool, definitions: DefinitionCache, rows: list) -> dict[str, Job]:
    """The candidates' jobs: definition (parsed once per distinct
    definition) and when last written; read with the rows where the take
    returned them, else in one statement."""
    found: dict[str, Job] = {}
    if caps.is_postgres and lateral:
        for row in rows:
            if row.spec is not None and row.job_id not in found:
                found[row.job_id] = Job(definitions.get(row.job_id, row.job_version, row.spec), row.job_updated_at)
        return found
    job_ids = sorted({row.job_id for row in rows})
    if caps.is_sqlite:
        query = sa.select(jobs.c.id, jobs.c.version, jobs.c.spec, jobs.c.updated_at).where(jobs.c.id.in_(job_ids))
        read = conn.execute(query)
    else:  # one array parameter: one statement text whatever the count, so its plan is reused
        read = conn.execute(_JOBS_BY_ID, dict(ids=job_ids))
    for job_id, version, spec, updated_at in read:
        found[job_id] = Job(definitions.get(job_id, version, spec), updated_at)
    return found

def lock_replacing(conn: Connection, caps: Capabilities, rules: dict[str, Rules]) -> None:
    """Rounds at READ COMMITTED take turns per ``replace`` job.

    Everywhere else the overlap decision needs no lock of its own: a
    round sees another server's candidate of the same job as
    ``scheduled`` and ready, so the newer of two waits behind or is
    skipped for the older (never both start), and the running executions
    it reads are share-locked (:data:`_BUSY_SHARED`), so a result being
    recorded for one is either seen or waits for the round, and its
    wake-up then sees a waiter the round queued. Under ``replace``, though, each round's
    newest occurrence replaces only what is older, so two servers could
    each start one; a transaction advisory lock per such job, taken in
    one order before the job's executions are read, makes the second
    round read what the first committed."""
    if not caps.is_postgres:  # serializable elsewhere
        return
    replacing = sorted(job_id for job_id, rule in rules.items() if rule.overlap == "replace")
    if replacing:
        execute_arrays(conn, _LOCK_JOBS, dict(jobs=replacing))

def active(
    conn: Connection, caps: Capabilities, lateral: bool, candidates: list[Candidate], rules: dict[str, Rules], owner: str,
    at_us: int,
) -> list[Active]:
    """What the overlap policies of the candidates' jobs look at: every
    execution of those jobs that runs or waits for a retry
    (``executions_busy``), and each job's oldest executions not started,
    up to its newest candidate, as many as it has candidates and two
    more (``executions_not_started_job``, one LIMITed range per job): enough to
    know what is ahead of each candidate, however long a job's queue (a
    backfill) is. For a job with nothing else going on, both read index
    entries only. On PostgreSQL (READ COMMITTED) the running ones are
    share-locked and this round's own candidates left out."""
    wanted = Counter(c.job_id for c in candidates if rules.get(c.job_id, ANYTHING_GOES).overlap != "allow")
    if not wanted:
        return []
    job_ids = sorted(wanted)
    upto: dict[str, int] = {}
    for candidate in candidates:
        upto[candidate.job_id] = max(upto.get(candidate.job_id, candidate.nominal_at), candidate.nominal_at)
    # Not started first, then running: at READ COMMITTED each statement
    # reads what was committed when it began, so an execution another
    # round starts between the two is read as not started, as running,
    # or both (the running row wins below), never as neither.
    if caps.is_postgres and lateral:
        rows = execute_arrays(
            conn,
            _NOT_STARTED,
            dict(jobs=job_ids, limits=[wanted[j] + 2 for j in job_ids], uptos=[upto[j] for j in job_ids]),
        ).all()
    else:
        rows = _union_all(conn, [
            sa.select(*_ACTIVE_COLUMNS)
            .where(
                executions.c.job_id == job_id,
                *in_group(NOT_STARTED),
                executions.c.nominal_at <= upto[job_id],
                not_held(),
            )
            .order_by(executions.c.nominal_at, executions.c.id)
            .limit(wanted[job_id] + 2)
            for job_id in job_ids
        ])
    if caps.is_postgres:  # READ COMMITTED
        rows += execute_arrays(conn, _BUSY_SHARED, dict(jobs=job_ids, owner=owner, at=at_us)).all()
    else:  # serializable: the snapshot and the engine's conflict checks do what the locks do
        rows += conn.execute(sa.select(*_ACTIVE_COLUMNS).where(one_of(caps, executions.c.job_id, job_ids), _BUSY)).all()
    # The candidates come back (they run now): they are not "others".
    mine = {c.id for c in candidates}
    found = {
        ident: Active(ident, job_id, tenant, status, origin, nominal_at, ready_at, attempt, bool(allow_overlap),
                      wait_key, cancel_requested_at is not None)
        for (ident, job_id, tenant, status, origin, nominal_at, ready_at, attempt, allow_overlap, wait_key,
             cancel_requested_at) in rows
        if ident not in mine
    }
    return list(found.values())

def cancel_replaced(conn: Connection, caps: Capabilities, replaced: list[Replace], at_us: int) -> None:
    """Cancel what an overlap ``replace`` replaced before it started: every
    execution of the job not started, older than the replacing one, that
    may not overlap (one statement for the round)."""
    if not replaced:
        return
    older = sa.or_(*[
        sa.and_(
            executions.c.job_id == r.job_id,
            sa.tuple_(executions.c.nominal_at, executions.c.id) < sa.tuple_(sa.literal(r.nominal_at), sa.literal(r.id)),
        )
        for r in replaced
    ])
    reasons = sa.case(*[(executions.c.job_id == r.job_id, r.reason) for r in replaced], else_=executions.c.dead_reason)
    canceled = conn.execute(
        executions.update()
        .where(
            one_of(caps, executions.c.job_id, sorted({r.job_id for r in replaced})),
            *in_group(NOT_STARTED),
            executions.c.allow_overlap.is_(False),
            older,
        )
        .values(status="canceled", finished_at=at_us, dead_reason=reasons)
        .returning(executions.c.id, executions.c.tenant, executions.c.wait_key, executions.c.manual_slot)
    ).all()
    manualslots.give_back(conn, [(row.tenant, row.manual_slot) for row in canceled])
    # A key whose freed slot had woken one of them hands the turn on.
    wake_keys(conn, caps, {(row.tenant, row.wait_key) for row in canceled if row.wait_key})

def lock_candidate_keys(
    conn: Connection, caps: Capabilities, admitted: list[Candidate], rules: dict[str, Rules], jobs: dict[str, Job]
) -> dict:
    """The rows of every key the admitted candidates' jobs name, locked,
    with their queues' heads; a key no job write created yet is created
    with the limit its job names."""
    wanted: dict[tuple[str, str], tuple[int, int]] = {}
    for candidate in admitted:
        job = jobs.get(candidate.job_id)
        for name, key_limit in rules.get(candidate.job_id, ANYTHING_GOES).keys:
            wanted.setdefault((candidate.tenant, name), (key_limit, job.updated_at if job else 0))
    if not wanted:
        return {}
    rows = lock_keys(conn, caps, wanted, heads=True)
    missing = [(t, n, *wanted[(t, n)]) for t, n in sorted(wanted) if (t, n) not in rows]
    if missing:
        ensure_keys(conn, missing)
        rows = lock_keys(conn, caps, wanted, heads=True)
    return {pair: KeyState(row.max_running, row.running, row.head_ready_at) for pair, row in rows.items()}

def settle(
    conn: Connection, decision, at_us: int, on_skip: SkipHook | None, took: Sequence = (),
) -> None:
    """Give every taken candidate its end state for this round: those
    that start keep ``running`` and take their key slots; the others give
    back the delivery they were taken with and wait (``waiting``, for
    their job or a key; ``waiting_since`` keeps the attempt's first
    wait), are canceled (replaced), or are skipped (deleted if never
    handed out before, canceled if they were: their attempts stay).
    ``took``: the rows the round took (``id``, ``tenant``,
    ``manual_slot``); those holding a unit of their tenant's manual-run
    quota give it back when they start, are canceled or are skipped
    (:mod:`.manualslots`), and keep it when they wait."""
    per_row = conn.dialect.name == "sqlite"
    holding = [start for start in decision.start if start.keys or start.candidate.wait_key]
    if holding:
        held = [(start.candidate.id, json.dumps(list(start.keys)) if start.keys else None) for start in holding]
        if per_row:
            conn.execute(
                executions.update()
                .where(executions.c.id == sa.bindparam("b_id"))
                .values(held_keys=sa.bindparam("b_keys"), wait_key=None),
                [dict(b_id=ident, b_keys=keys) for ident, keys in held],
            )
        else:
            _by_arrays(conn, _HOLD_FROM_ARRAYS, held)
        taken: Counter[tuple[str, str]] = Counter()
        for start in holding:
            for name in start.keys:
                taken[(start.candidate.tenant, name)] += 1
        take_slots(conn, taken)
    back = dict(owner=None, handed_out_at=None, delivery=executions.c.delivery - 1)
    if decision.wait:
        waits = [(w.candidate.id, w.key) for w in decision.wait]
        if per_row:
            conn.execute(
                executions.update()
                .where(executions.c.id == sa.bindparam("b_id"))
                .values(
                    status="waiting", wait_key=sa.bindparam("b_key"),
                    waiting_since=sa.func.coalesce(executions.c.waiting_since, at_us), **back,
                ),
                [dict(b_id=ident, b_key=key) for ident, key in waits],
            )
        else:
            _by_arrays(conn, _WAIT_FROM_ARRAYS, waits, at_us)
    ended = [(c.id, c.reason) for c in decision.cancel]
    ended += [(s.candidate.id, "canceled: skipped by the overlap policy") for s in decision.skip
              if s.candidate.delivery > 0]
    if ended:
        if per_row:
            conn.execute(
                executions.update()
                .where(executions.c.id == sa.bindparam("b_id"))
                .values(status="canceled", finished_at=at_us, dead_reason=sa.bindparam("b_reason"), **back),
                [dict(b_id=ident, b_reason=reason) for ident, reason in ended],
            )
        else:
            _by_arrays(conn, _CANCEL_FROM_ARRAYS, ended, at_us)
    fresh = [s.candidate.id for s in decision.skip if s.candidate.delivery == 0]
    manual = {row.id: (row.tenant, row.manual_slot) for row in took if row.manual_slot is not None}
    if manual:  # started, canceled or skipped: no longer waiting to start (the rows are not written again)
        gone = [start.candidate.id for start in decision.start] + [ident for ident, _ in ended] + fresh
        manualslots.give_back(conn, [manual[i] for i in gone if i in manual])
    if fresh:
        conn.execute(executions.delete().where(one_of(capabilities(conn), executions.c.id, fresh)))
    _skip_ranges(conn, decision.skip, at_us)
    if decision.skip and on_skip is not None:
        on_skip(conn, decision.skip)


def _by_arrays(conn: Connection, statement: str, rows: list[tuple[str, str | None]], at_us: int | None = None) -> None:
    """One of :func:`settle`'s array statements over (execution id, value)
    pairs; ``at_us`` for those that stamp an instant."""
    parameters = dict(ids=[ident for ident, _ in rows], values=[value for _, value in rows])
    execute_arrays(conn, statement, parameters if at_us is None else {**parameters, "at": at_us})


def _skip_ranges(conn: Connection, skipped: list[Skip], at_us: int) -> None:
    """Count skipped occurrences in the skip range (reason ``overlap``) of
    the execution they were skipped for: one range while it runs."""
    if not skipped:
        return
    counted(OVERLAP_REASON, len(skipped))
    ranges: dict[str, dict] = {}
    for item in sorted(skipped, key=lambda s: (s.candidate.nominal_at, s.candidate.id)):
        c = item.candidate
        ident = f"{item.blocker_id}:overlap"
        found = ranges.get(ident)
        if found is None:
            ranges[ident] = dict(id=ident, job_id=c.job_id, tenant=c.tenant, from_at=c.nominal_at,
                                 to_at=c.nominal_at, continues_at=None, count=1, reason=OVERLAP_REASON,
                                 created_at=at_us)
        else:
            found["to_at"] = max(found["to_at"], c.nominal_at)
            found["from_at"] = min(found["from_at"], c.nominal_at)
            found["count"] += 1
    statement = insert_for(conn, skips)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["id"],
            set_=dict(
                from_at=sa.case((statement.excluded.from_at < skips.c.from_at, statement.excluded.from_at),
                                else_=skips.c.from_at),
                to_at=sa.case((statement.excluded.to_at > skips.c.to_at, statement.excluded.to_at),
                              else_=skips.c.to_at),
                count=skips.c.count + statement.excluded.count,
            ),
        ),
        list(ranges.values()),
    )


def _union_all(conn: Connection, scans: list) -> list:
    """The rows of ``scans`` (SELECTs with their own ORDER BY and LIMIT), in
    statements of at most :data:`UNION_BRANCHES` branches."""
    rows: list = []
    for start in range(0, len(scans), UNION_BRANCHES):
        chunk = [sa.select(scan.subquery()) for scan in scans[start:start + UNION_BRANCHES]]
        rows += conn.execute(chunk[0] if len(chunk) == 1 else sa.union_all(*chunk)).all()
    return rows
