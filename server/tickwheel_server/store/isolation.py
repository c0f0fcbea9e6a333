"""Slots, queues and the cancel signal, inside the transactions that change
an execution's status (hand-out, outcome, requeue, reap, release, cancel,
pause/update/delete).

Concurrency keys are counted in ``concurrency_keys.running``. The hand-out
that starts an execution takes one slot of each key its job names and records
them in ``executions.held_keys``; whatever ends that delivery (outcome,
requeue, reap, release) gives back exactly those, in the same transaction,
under the key row's lock, and wakes as many of the key's waiters as there are
free slots, oldest ready first. So the count cannot drift when a server dies:
its executions' slots come back when the reaper requeues them.

Waking moves a ``waiting`` execution back to ``scheduled`` (its ``ready_at``
unchanged, so it is ready at once and ahead of newer work in its tenant's
line); the next hand-out decides again, and one that still cannot start
waits again without losing its place (queues are ordered by ``ready_at``).
Waking more than will fit is harmless; waking too few would strand a queue,
so every path that frees a turn wakes.

Lock order, to keep transactions from deadlocking one another:
``tenant_gates`` (only a hand-out round takes them, its capped tenants'
in name order, before any other lock it may wait for), then executions
rows (running ones first; rows taken with SKIP LOCKED never wait), then
``concurrency_keys`` (sorted by tenant and key), then the waiting
executions woken. An undo of writes in doubt is a transaction of its own
(:mod:`.doubt`), never the first part of a round's.

The cancel signal for a running execution is two columns,
``cancel_requested_at`` and ``cancel_reason``, written by whoever decides;
the server whose session owns the execution finds it with a scan of the
``executions_cancel_requested`` partial index (about once a second) and tells
the worker.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from . import manualslots
from .base import driver_sql, execute_arrays, pairs_in, tuples
from .engine import Capabilities, capabilities
from .peertext import escaped_text
from .tables import concurrency_keys, executions

PAUSED_WAIT = "(job paused)"
"""The ``wait_key`` of an execution its job's pause holds (status
``waiting``). Not a key name (those are ``[A-Za-z0-9_.:-]``), so no key
slot and no job wake-up (those wake ``wait_key`` NULL) ever moves it: only
ResumeJob releases it, and UpdateJob, DeleteJob or CancelExecution end it.
The hand-out's overlap view and the lateness watch leave such executions
out (:func:`not_held`)."""


def not_held(table=executions):
    """The condition that leaves out executions held by their job's pause."""
    return sa.or_(table.c.wait_key.is_(None), table.c.wait_key != PAUSED_WAIT).self_group()


def status_in(column, *values: str):
    """``column IN ('a', 'b')`` with the values as SQL literals, so that a
    partial index on them is usable whatever plan the statement gets (a
    generic plan of a prepared statement cannot match a bound parameter)."""
    literals = [sa.literal_column(f"'{value}'") for value in values]
    return column == literals[0] if len(literals) == 1 else column.in_(literals)


def status_by_key(column, value: str):
    """``column = 'value'`` for rows found by their key (an ``= ANY`` over
    the primary key), through COALESCE, which no partial index's predicate
    matches: stated plainly, a generic plan (which takes an array for ten
    elements) could read the status's partial index instead and search the
    keys' array for each row it holds (rows times keys)."""
    return sa.func.coalesce(column, "") == sa.literal_column(f"'{value}'")


def insert_for(conn: Connection, table):
    return (sqlite if conn.dialect.name == "sqlite" else postgresql).insert(table)


@dataclass(frozen=True, slots=True)
class KeyRow:
    tenant: str
    name: str
    max_running: int
    running: int
    limit_set_at: int
    head_ready_at: int | None = None


def lock_keys(
    conn: Connection, caps: Capabilities, pairs: Iterable[tuple[str, str]], *, heads: bool = False
) -> dict[tuple[str, str], KeyRow]:
    """The rows of ``pairs`` (tenant, key) that exist, locked in key order;
    with ``heads``, each with the ``ready_at`` of its oldest waiter."""
    wanted = sorted(set(pairs))
    if not wanted:
        return {}
    columns = [concurrency_keys.c.tenant, concurrency_keys.c.name, concurrency_keys.c.max_running,
               concurrency_keys.c.running, concurrency_keys.c.limit_set_at]
    if heads:
        waiting = executions.alias("waiting")
        columns.append(
            sa.select(waiting.c.ready_at)
            .where(
                status_in(waiting.c.status, "waiting"),
                waiting.c.tenant == concurrency_keys.c.tenant,
                waiting.c.wait_key == concurrency_keys.c.name,
            )
            .order_by(waiting.c.ready_at)
            .limit(1)
            .scalar_subquery()
            .label("head_ready_at")
        )
    query = (
        sa.select(*columns)
        .where(pairs_in(caps, (concurrency_keys.c.tenant, concurrency_keys.c.name), wanted, ("TEXT", "TEXT")))
        .order_by(concurrency_keys.c.tenant, concurrency_keys.c.name)
    )
    if caps.row_locks:
        query = query.with_for_update(of=concurrency_keys)
    found = {}
    for row in conn.execute(query):
        found[(row.tenant, row.name)] = KeyRow(
            row.tenant, row.name, row.max_running, row.running, row.limit_set_at,
            row.head_ready_at if heads else None,
        )
    return found


def ensure_keys(conn: Connection, rows: Sequence[tuple[str, str, int, int]]) -> None:
    """Create missing key rows (tenant, key, limit, set_at) with no slot taken;
    existing ones are left alone (their limit is the most recent job write's)."""
    if rows:
        conn.execute(
            insert_for(conn, concurrency_keys).on_conflict_do_nothing(index_elements=["tenant", "name"]),
            [dict(tenant=t, name=n, max_running=limit, running=0, limit_set_at=at) for t, n, limit, at in rows],
        )


def set_key_limits(conn: Connection, caps: Capabilities, tenant: str, limits: Mapping[str, int], set_at: int) -> None:
    """A job naming ``limits`` (key → limit) was written at ``set_at``: the
    most recent write wins, for every job naming the key. A raised limit
    wakes as many waiters as it frees slots."""
    if not limits:
        return
    statement = insert_for(conn, concurrency_keys)
    statement = statement.on_conflict_do_update(
        index_elements=["tenant", "name"],
        set_=dict(max_running=statement.excluded.max_running, limit_set_at=statement.excluded.limit_set_at),
        where=concurrency_keys.c.limit_set_at <= statement.excluded.limit_set_at,
    )
    conn.execute(
        statement,
        [dict(tenant=tenant, name=name, max_running=limit, running=0, limit_set_at=set_at)
         for name, limit in sorted(limits.items())],
    )
    wake_keys(conn, caps, [(tenant, name) for name in limits])


def take_slots(conn: Connection, taken: Mapping[tuple[str, str], int]) -> None:
    """Add the slots a hand-out took (the rows are locked by the caller)."""
    if taken:
        conn.execute(
            concurrency_keys.update()
            .where(concurrency_keys.c.tenant == sa.bindparam("b_tenant"), concurrency_keys.c.name == sa.bindparam("b_name"))
            .values(running=concurrency_keys.c.running + sa.bindparam("b_taken")),
            [dict(b_tenant=t, b_name=n, b_taken=count) for (t, n), count in sorted(taken.items())],
        )


def release_slots(conn: Connection, caps: Capabilities, held: Iterable[tuple[str, str | None]]) -> None:
    """Give back the slots of deliveries that ended: (tenant, ``held_keys``)
    pairs as read from their rows; then wake waiters into the free slots."""
    counts: Counter[tuple[str, str]] = Counter()
    for tenant, held_keys in held:
        for name in json.loads(held_keys) if held_keys else ():
            counts[(tenant, name)] += 1
    if not counts:
        return
    rows = lock_keys(conn, caps, counts)
    updates = []
    wakes = []
    for pair, row in rows.items():
        running = max(0, row.running - counts[pair])
        updates.append(dict(b_tenant=row.tenant, b_name=row.name, b_running=running))
        if row.max_running > running:
            wakes.append((row.tenant, row.name, row.max_running - running))
    conn.execute(
        concurrency_keys.update()
        .where(concurrency_keys.c.tenant == sa.bindparam("b_tenant"), concurrency_keys.c.name == sa.bindparam("b_name"))
        .values(running=sa.bindparam("b_running")),
        updates,
    )
    wake_key_waiters(conn, wakes)


def wake_keys(conn: Connection, caps: Capabilities, pairs: Iterable[tuple[str, str]]) -> None:
    """Wake as many waiters of each key as it has free slots (after
    executions woken for a slot were canceled before starting, or a limit
    was raised)."""
    rows = lock_keys(conn, caps, (pair for pair in pairs if pair[1] != PAUSED_WAIT))
    wake_key_waiters(conn, [(r.tenant, r.name, r.max_running - r.running) for r in rows.values()
                            if r.max_running > r.running])


def wake_key_waiters(conn: Connection, wakes: Sequence[tuple[str, str, int]]) -> None:
    """(tenant, key, n): the n oldest-ready executions waiting on the key are scheduled again."""
    if not wakes:
        return
    waiting = executions.alias("waiting")
    oldest = (
        sa.select(waiting.c.id)
        .where(
            status_in(waiting.c.status, "waiting"),
            waiting.c.tenant == sa.bindparam("b_tenant"),
            waiting.c.wait_key == sa.bindparam("b_key"),
        )
        .order_by(waiting.c.ready_at, waiting.c.id)
        .limit(sa.bindparam("b_n"))
    )
    conn.execute(
        executions.update()
        .where(executions.c.id.in_(oldest.scalar_subquery()), status_in(executions.c.status, "waiting"))
        .values(status="scheduled"),
        [dict(b_tenant=t, b_key=k, b_n=n) for t, k, n in sorted(wakes)],
    )


_JOBS_WITH_WAITERS = driver_sql(
    "SELECT w.job_id FROM executions AS w WHERE w.job_id = ANY (CAST(:jobs AS TEXT[])) "
    "AND w.status = 'waiting' AND w.wait_key IS NULL GROUP BY w.job_id"
)
"""The jobs of a list that have an execution waiting for the job (``executions_job_waits``)."""


def wake_jobs(conn: Connection, job_ids: Iterable[str]) -> None:
    """Each job's oldest execution waiting for the job (not for a key) is
    scheduled again: one of its executions ended, the job may be free. One
    statement finds the jobs that have such waiters (``executions_job_waits``,
    which holds only them: usually none), one more wakes them."""
    wanted = sorted(set(job_ids))
    if not wanted:
        return
    waiting = executions.alias("waiting")
    if not capabilities(conn).is_sqlite:  # a batch of results names thousands of jobs: one array parameter
        queued = [row[0] for row in tuples(execute_arrays(conn, _JOBS_WITH_WAITERS, {"jobs": wanted}))]
    else:
        queued = conn.execute(
            sa.select(waiting.c.job_id)
            .where(waiting.c.job_id.in_(wanted), status_in(waiting.c.status, "waiting"), waiting.c.wait_key.is_(None))
            .group_by(waiting.c.job_id)
        ).scalars().all()
    if not queued:
        return
    oldest = (
        sa.select(waiting.c.id)
        .where(
            waiting.c.job_id == sa.bindparam("b_job"),
            status_in(waiting.c.status, "waiting"),
            waiting.c.wait_key.is_(None),
        )
        .order_by(waiting.c.nominal_at, waiting.c.id)
        .limit(1)
    )
    conn.execute(
        executions.update()
        .where(executions.c.id.in_(oldest.scalar_subquery()), status_in(executions.c.status, "waiting"))
        .values(status="scheduled"),
        [dict(b_job=job_id) for job_id in sorted(queued)],
    )


def after_not_started_canceled(conn: Connection, caps: Capabilities, rows: Iterable) -> None:
    """Executions that had not started were canceled (rows with ``id``,
    ``job_id``, ``tenant``, ``wait_key``, ``manual_slot``): the next in
    line behind their job is woken, a key whose woken execution it was
    hands the turn on, and the manual runs among them give their quota
    units back (:mod:`.manualslots`)."""
    rows = list(rows)
    manualslots.give_back(conn, [(row.tenant, row.manual_slot) for row in rows])
    wake_keys(conn, caps, ((row.tenant, row.wait_key) for row in rows if row.wait_key))
    wake_jobs(conn, (row.job_id for row in rows))


def request_cancel(conn: Connection, stops: Sequence[tuple[str, str]], now_us: int) -> int:
    """Ask the owners of these running executions, (id, reason) pairs, to
    stop them; the reason (``"canceled: …"``) becomes their ``dead_reason``.
    A request already made stands. Returns how many were asked now."""
    if not stops:
        return 0
    return conn.execute(
        executions.update()
        .where(
            executions.c.id == sa.bindparam("b_id"),
            status_in(executions.c.status, "running"),
            executions.c.cancel_requested_at.is_(None),
        )
        .values(cancel_requested_at=now_us, cancel_reason=sa.bindparam("b_reason")),
        [dict(b_id=ident, b_reason=escaped_text(reason)) for ident, reason in sorted(set(stops))],
    ).rowcount
