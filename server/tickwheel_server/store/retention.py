"""The SQL of retention: what history the store keeps, and the per-job daily
rollups that outlive it.

The window (default 30 days) applies to everything that ended:

- An execution is pruned when it ended (``succeeded``, ``dead`` or
  ``canceled``) and both its nominal instant and its end are before the
  cutoff. The nominal instant keeps the promise that a backfill
  deduplicates within the window (docs/architecture.md, Semantics:
  Retention); the end keeps an old occurrence that was
  backfilled or replayed recently. Executions that have not ended are never
  pruned.
- Its attempts go in the same transaction, by primary key, and are first
  added to ``attempt_rollups`` for (job, UTC day of the attempt's start):
  runs, failures, lateness percentiles. So history never has attempts
  without their execution, and the rollup counts each attempt exactly once.
  A plain success's attempt, recorded on its execution row rather than in
  ``attempts`` (migration 0025), is rolled up from that row as it goes.
- A dead letter's open alert (dead letter or poison) is resolved in the
  transaction that prunes it: the condition is gone with the execution.
- A skip range is pruned when its last skipped occurrence (``to_at``) is
  before the cutoff; a resolved alert when it was resolved before it
  (:meth:`~tickwheel_server.store.alerts.AlertStore.prune`).
- Rollups are kept for their own window (default 400 days).
- Create request ids are kept for their own window, the contract's 24
  hours (:mod:`.requests`), whatever the history's.

Every prune is a bounded batch (default 1000 rows) in its own short
transaction that touches only rows that ended, which no dispatcher, gateway
or outcome writes; the runner pauses between batches. Nothing is deleted by
a table scan: executions are walked tenant by tenant on
``executions_ended_tenant`` with a cursor (:mod:`.ended_walk`),
skips on ``skips_to``, rollups on ``attempt_rollups_day``, request ids on
``request_ids_created``.

Safe to run on several servers at once: every delete re-checks its
condition and the rollup counts only the attempt rows its own DELETE
returned, and the rollup rows are read and written in the same
SERIALIZABLE transaction (two runners conflict and one retries, on SQLite
they take turns). :class:`~tickwheel_server.maintenance.retention.Retention`
still elects one runner per cluster so the work is not done twice.

On PostgreSQL, ``attempts`` is partitioned by UTC day of ``started_at``
(migration 0013): ``attempts_pYYYYMMDD`` per day and ``attempts_default``
for what no day's partition holds. There a pass first keeps partitions for
today and the next ``partitions_ahead`` days, then takes out every day
partition whose whole day is before the cutoff: it is detached (one short
transaction, the only step that locks ``attempts`` as a whole, bounded by
``partition_lock_timeout``), rolled up in bounded batches walked by primary
key (the walk's position is kept in ``attempt_partition_walks`` in the
transaction of each batch, so each row is counted once whatever stops the
runner) and dropped in the transaction of its last batch. Attempts in the
default partition older than the cutoff are deleted in bounded batches and
rolled up. Only then are executions pruned, so the attempts they take with
them are the few the partitions did not (the current day's, the default's).
An execution kept past the window (not ended, or ended recently) thereby
loses its attempts older than the window: they are in the rollups.

Lateness percentiles are read from a
:class:`~tickwheel_server.policy.rollups.LatenessSketch` stored with the
rollup, so that batches of one day merge exactly; what a batch adds to each
(job, day) and the partitions' names and plan are decided in
:mod:`tickwheel_server.policy.rollups`, and written by :mod:`.rollups`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import from_us, to_us

from ..alerts.catalogue import dead_letter_key, poison_key
from ..policy.rollups import (
    DAY_US, PARTITION_PREFIX, AttemptPartitions, day_of, partition_day, partition_name, summarise_attempts,
)  # fmt: skip
from . import requests
from .alerts import AlertStore
from .base import SqlStore, one_of, pairs_in
from .classify import LOCK_NOT_AVAILABLE
from .rollups import Rollup, merge_rollups
from .transactions import sqlstate_of
from .tables import attempt_rollups, attempts, executions, skips
from .ended_walk import WalkKey, oldest_ended
from .timeline import TERMINAL, in_group

log = logging.getLogger(__name__)

DEFAULT_PARTITION = "attempts_default"


@dataclass(frozen=True)
class PartitionBatch:
    """What one batch of a detached day partition's rollup did."""

    rows: int
    """Attempt rows rolled up."""
    dropped: bool
    """This batch dropped the table (it had rolled up the last rows)."""
    done: bool
    """Nothing is left of the table (dropped by this batch or before)."""
    total: int = 0
    """Rows the whole walk rolled up, when this batch dropped the table."""


class _AttemptOnRow(NamedTuple):
    """An attempt recorded on its execution row, as the rollup reads an attempt row."""

    execution_id: str
    status: str
    started_at: int
    lateness_us: int


@dataclass(frozen=True)
class ExecutionBatch:
    """What one execution-pruning batch did."""

    examined: int
    """Ended executions nominally before the cutoff read by the batch (at most the limit)."""
    executions: int
    """Executions deleted."""
    attempts: int
    """Attempts deleted (and rolled up): rows of ``attempts``, and those recorded on the execution rows deleted."""
    resolved: int
    """Open alerts of the dead letters deleted, resolved with them."""
    next_key: WalkKey | None
    """(tenant, nominal µs, id) to continue after; None when the walk reached the cutoff."""


class RetentionStore(SqlStore):
    """Pruning and rollups. Every method is one bounded transaction.

    With ``alerts``, the open alerts of dead letters are resolved in the
    transaction that prunes them (number them afterwards with
    :meth:`AlertStore.sequence_after_commit`)."""

    def __init__(self, engine, clock: Clock, alerts: AlertStore | None = None) -> None:
        super().__init__(engine, clock)
        self._alerts = alerts

    async def prune_executions(
        self, cutoff: datetime, *, after: WalkKey | None = None, limit: int = 1000
    ) -> ExecutionBatch:
        """Walk up to ``limit`` ended executions nominally before ``cutoff``
        in ``(tenant, nominal_at, id)`` order, starting after ``after``
        (:func:`.ended_walk.oldest_ended`: at most ``limit`` tenants a batch); delete
        those that ended before ``cutoff`` with their attempts, rolling the
        attempts up first. Executions that have not ended are not walked;
        those that ended after the cutoff are passed over (the cursor moves
        past them; a later pass sees them again).

        One transaction: the walk (``executions_ended_tenant``, LIMIT), the
        delete (re-checking status and end), the attempts' delete by primary
        key, the rollup rows read and written, and the dead letters' open
        alerts resolved. Retried on conflict as a whole, so nothing is
        counted twice."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        cutoff_us = to_us(cutoff)
        now = self.clock.now()
        now_us = to_us(now)
        returning = self.caps.returning
        alerts_store = self._alerts

        def fn(conn: Connection) -> ExecutionBatch:
            columns = (
                executions.c.id, executions.c.nominal_at, executions.c.status, executions.c.finished_at,
                executions.c.job_id, executions.c.tenant, executions.c.due_at, executions.c.ready_at,
                executions.c.attempt_started_at,
            )
            rows, next_key = oldest_ended(conn, columns, cutoff_us, after, limit)
            if not rows:
                return ExecutionBatch(0, 0, 0, 0, next_key)
            ended = {
                row.id: (row.job_id, row.tenant)
                for row in rows
                if row.status in TERMINAL and row.finished_at is not None and row.finished_at < cutoff_us
            }
            dead = {row.id for row in rows if row.status == "dead"}
            if not ended:
                return ExecutionBatch(len(rows), 0, 0, 0, next_key)
            delete = executions.delete().where(
                one_of(self.caps, executions.c.id, sorted(ended)),
                *in_group(TERMINAL),
                executions.c.finished_at < cutoff_us,
            )
            if returning:
                gone = set(conn.execute(delete.returning(executions.c.id)).scalars())
            else:  # the rows read are this transaction's snapshot (SERIALIZABLE / SQLite)
                conn.execute(delete)
                gone = set(ended)
            if not gone:
                return ExecutionBatch(len(rows), 0, 0, 0, next_key)
            columns = (attempts.c.execution_id, attempts.c.status, attempts.c.started_at, attempts.c.lateness_us)
            doomed = attempts.delete().where(one_of(self.caps, attempts.c.execution_id, sorted(gone)))
            if returning:
                history = conn.execute(doomed.returning(*columns)).all()
            else:
                history = conn.execute(sa.select(*columns).where(doomed.whereclause)).all()
                conn.execute(doomed)
            # A plain success's attempt went with its row (migration 0025).
            history = list(history) + [
                _AttemptOnRow(row.id, "succeeded", row.attempt_started_at,
                              max(0, row.attempt_started_at - max(row.due_at, row.ready_at)))
                for row in rows if row.id in gone and row.attempt_started_at is not None
            ]
            merge_rollups(conn, summarise_attempts(history, ended), now_us, self.caps.row_locks)
            resolved = []
            if alerts_store is not None and gone & dead:
                keys = [key for ident in sorted(gone & dead) for key in (dead_letter_key(ident), poison_key(ident))]
                resolved = alerts_store.resolve_many_in(conn, keys, now=now)
            return ExecutionBatch(len(rows), len(gone), len(history), len(resolved), next_key)

        return await self._tx(fn)

    async def prune_skips(self, cutoff: datetime, *, limit: int = 1000) -> int:
        """Delete up to ``limit`` skip ranges whose last skipped occurrence is
        before ``cutoff``, oldest first (``skips_to``); how many."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        cutoff_us = to_us(cutoff)

        def fn(conn: Connection) -> int:
            ids = conn.execute(
                sa.select(skips.c.id).where(skips.c.to_at < cutoff_us).order_by(skips.c.to_at).limit(limit)
            ).scalars().all()
            if ids:
                conn.execute(skips.delete().where(one_of(self.caps, skips.c.id, ids), skips.c.to_at < cutoff_us))
            return len(ids)

        return await self._tx(fn)

    async def prune_request_ids(self, now: datetime, *, limit: int = 1000) -> int:
        """Delete up to ``limit`` create request ids past their window
        (:data:`~.requests.REQUEST_RETENTION` before ``now``), oldest first
        (``request_ids_created``); how many (:func:`.requests.prune`)."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        now_us = to_us(now)
        return await self._tx(lambda conn: requests.prune(conn, now_us, limit))

    async def prune_rollups(self, before_day: datetime, *, limit: int = 1000) -> int:
        """Delete up to ``limit`` rollups of days before ``before_day``'s,
        oldest first (``attempt_rollups_day``); how many."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        cutoff = day_of(to_us(before_day))

        def fn(conn: Connection) -> int:
            keys = conn.execute(
                sa.select(attempt_rollups.c.job_id, attempt_rollups.c.day)
                .where(attempt_rollups.c.day < cutoff)
                .order_by(attempt_rollups.c.day)
                .limit(limit)
            ).all()
            if keys:
                rollup_keys = (attempt_rollups.c.job_id, attempt_rollups.c.day)
                pairs = [tuple(k) for k in keys]
                conn.execute(attempt_rollups.delete().where(pairs_in(self.caps, rollup_keys, pairs, ("TEXT", "BIGINT"))))
            return len(keys)

        return await self._tx(fn)

    # -- day partitions of attempts (PostgreSQL) -------------------------------------------------

    async def attempt_partitions(self) -> AttemptPartitions | None:
        """The day partitions of ``attempts``; None where it is not
        partitioned (SQLite, CockroachDB, PostgreSQL before migration 0013)."""
        if not self.caps.declarative_partitioning:
            return None

        def fn(conn: Connection) -> AttemptPartitions | None:
            partitioned = conn.execute(sa.text(
                "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('attempts'))"
            )).scalar_one()
            if not partitioned:
                return None
            rows = conn.execute(sa.text(
                "SELECT c.relname, EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid "
                "AND i.inhparent = to_regclass('attempts')) AS attached "
                "FROM pg_class c WHERE c.relkind = 'r' AND c.relname LIKE :pattern AND pg_table_is_visible(c.oid)"
            ), {"pattern": PARTITION_PREFIX.replace("_", "\\_") + "%"}).all()
            days = [(row.relname, partition_day(row.relname), row.attached) for row in rows]
            return AttemptPartitions(
                attached=tuple(sorted(day for _, day, attached in days if attached and day is not None)),
                detached=tuple(sorted(name for name, day, attached in days if not attached and day is not None)),
            )

        return await self._tx(fn, idempotent=True)

    async def create_partition(self, day_us: int, *, lock_timeout: float = 1.0) -> bool:
        """Give the UTC day starting at ``day_us`` its partition; False when
        it could not now: the default partition holds rows of that day
        (they stay there), or a lock was not granted within
        ``lock_timeout`` seconds.

        Created apart and then attached: ``ATTACH PARTITION`` takes a SHARE
        UPDATE EXCLUSIVE lock on ``attempts`` (reads and writes go on),
        where ``CREATE TABLE … PARTITION OF`` would take ACCESS EXCLUSIVE;
        it holds ACCESS EXCLUSIVE on the default partition while checking
        that none of its rows belong to the new day."""
        name = partition_name(day_us)

        def fn(conn: Connection) -> bool:
            _set_lock_timeout(conn, lock_timeout)
            _partition_ddl_turn(conn)
            if conn.execute(sa.text("SELECT to_regclass(:name)"), {"name": name}).scalar_one() is not None:
                return False  # another runner made it
            stray = conn.execute(sa.text(
                f"SELECT EXISTS (SELECT 1 FROM {DEFAULT_PARTITION} WHERE started_at >= :lo AND started_at < :hi)"
            ), {"lo": day_us, "hi": day_us + DAY_US}).scalar_one()
            if stray:
                return False
            conn.execute(sa.text(f"CREATE TABLE {name} (LIKE attempts INCLUDING DEFAULTS)"))
            conn.execute(sa.text(
                f"ALTER TABLE attempts ATTACH PARTITION {name} FOR VALUES FROM ({day_us}) TO ({day_us + DAY_US})"
            ))
            return True

        return await self._unless_locked(fn, name)

    async def detach_partition(self, day_us: int, *, lock_timeout: float = 1.0) -> bool:
        """Take the day's partition out of ``attempts`` (its rows leave the
        history at once; new rows of that day go to the default partition)
        and start its rollup walk; False when the lock was not granted within
        ``lock_timeout`` seconds (tried again next pass).

        ``DETACH PARTITION`` takes an ACCESS EXCLUSIVE lock on ``attempts``
        for this short transaction: results being recorded and history reads
        wait at most ``lock_timeout``, and hand-out never touches
        ``attempts``. (``DETACH … CONCURRENTLY`` is refused on a table with a
        default partition.)"""
        name = partition_name(day_us)

        def fn(conn: Connection) -> bool:
            _set_lock_timeout(conn, lock_timeout)
            _partition_ddl_turn(conn)
            attached = conn.execute(sa.text(
                "SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(:name) "
                "AND inhparent = to_regclass('attempts'))"
            ), {"name": name}).scalar_one()
            if not attached:
                return False  # another runner took it out
            conn.execute(sa.text(f"ALTER TABLE attempts DETACH PARTITION {name}"))
            conn.execute(sa.text(
                "INSERT INTO attempt_partition_walks (partition, after_key, rows) VALUES (:name, NULL, 0) "
                "ON CONFLICT (partition) DO NOTHING"
            ), {"name": name})
            return True

        return await self._unless_locked(fn, name)

    async def roll_up_detached(self, name: str, *, limit: int = 1000) -> PartitionBatch:
        """Roll up the next ``limit`` rows (by primary key) of the detached
        day table ``name`` into ``attempt_rollups``; when fewer were left,
        drop the table.

        One transaction: the walk's position (``attempt_partition_walks``,
        locked), the rows read with their execution's job and tenant (an
        execution already gone counts under the job its id names), the
        rollups merged and the position advanced, or the table dropped. A
        second runner waits on the position's lock and then conflicts, so
        no row is counted twice."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        if partition_day(name) is None:
            raise ValueError(f"not a day partition of attempts: {name!r}")
        now_us = to_us(self.clock.now())
        row_locks = self.caps.row_locks

        def fn(conn: Connection) -> PartitionBatch:
            walk = conn.execute(sa.text(
                "SELECT after_key, rows FROM attempt_partition_walks WHERE partition = :name FOR UPDATE"
            ), {"name": name}).first()
            if walk is None:
                if conn.execute(sa.text("SELECT to_regclass(:name)"), {"name": name}).scalar_one() is None:
                    return PartitionBatch(0, dropped=False, done=True)  # another runner finished it
                conn.execute(sa.text(
                    "INSERT INTO attempt_partition_walks (partition, after_key, rows) VALUES (:name, NULL, 0)"
                ), {"name": name})
                after, done = None, 0
            else:
                after, done = (json.loads(walk.after_key) if walk.after_key else None), walk.rows
            query = (
                "SELECT a.execution_id, a.attempt, a.delivery, a.started_at, a.status, a.lateness_us, "
                "coalesce(e.job_id, split_part(a.execution_id, ':', 1)) AS job_id, coalesce(e.tenant, '') AS tenant "
                f"FROM {name} AS a LEFT JOIN executions AS e ON e.id = a.execution_id "
            )
            params: dict = {"limit": limit}
            if after is not None:
                query += "WHERE (a.execution_id, a.attempt, a.delivery, a.started_at) > (:e, :a, :d, :s) "
                params.update(e=after[0], a=after[1], d=after[2], s=after[3])
            query += "ORDER BY a.execution_id, a.attempt, a.delivery, a.started_at LIMIT :limit"
            rows = conn.execute(sa.text(query), params).all()
            tenant_of = {row.execution_id: (row.job_id, row.tenant) for row in rows}
            merge_rollups(conn, summarise_attempts(rows, tenant_of), now_us, row_locks)
            if len(rows) < limit:
                conn.execute(sa.text(f"DROP TABLE {name}"))
                conn.execute(sa.text("DELETE FROM attempt_partition_walks WHERE partition = :name"), {"name": name})
                return PartitionBatch(len(rows), dropped=True, done=True, total=done + len(rows))
            last = rows[-1]
            conn.execute(sa.text(
                "UPDATE attempt_partition_walks SET after_key = :key, rows = rows + :n WHERE partition = :name"
            ), {"key": json.dumps([last.execution_id, last.attempt, last.delivery, last.started_at]),
                "n": len(rows), "name": name})
            return PartitionBatch(len(rows), dropped=False, done=False)

        return await self._tx(fn)

    async def prune_default_partition(self, cutoff: datetime, *, limit: int = 1000) -> int:
        """Delete up to ``limit`` attempts started before ``cutoff`` from
        the default partition, rolling them up first; how many. (The
        default partition holds only what no day's partition did, so it is
        small and read without an index.)"""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        cutoff_us = to_us(cutoff)
        now_us = to_us(self.clock.now())
        row_locks = self.caps.row_locks

        def fn(conn: Connection) -> int:
            rows = conn.execute(sa.text(
                f"DELETE FROM {DEFAULT_PARTITION} WHERE ctid IN (SELECT ctid FROM {DEFAULT_PARTITION} "
                "WHERE started_at < :cutoff LIMIT :limit) RETURNING execution_id, status, started_at, lateness_us"
            ), {"cutoff": cutoff_us, "limit": limit}).all()
            if not rows:
                return 0
            ids = sorted({row.execution_id for row in rows})
            known = {
                row.id: (row.job_id, row.tenant)
                for row in conn.execute(
                    sa.select(executions.c.id, executions.c.job_id, executions.c.tenant).where(one_of(self.caps, executions.c.id, ids))
                )
            }
            tenant_of = {ident: known.get(ident, (ident.split(":", 1)[0], "")) for ident in ids}
            merge_rollups(conn, summarise_attempts(rows, tenant_of), now_us, row_locks)
            return len(rows)

        return await self._tx(fn)

    async def _unless_locked(self, fn: Callable[[Connection], bool], name: str) -> bool:
        try:
            return await self._tx(fn, handled=frozenset({LOCK_NOT_AVAILABLE}))  # its own lock_timeout, not an outage
        except sa_exc.DBAPIError as error:
            if sqlstate_of(error) != LOCK_NOT_AVAILABLE:
                raise
            log.info("retention: %s: lock not granted in time; trying again next pass", name)
            return False

    async def rollups(self, job_id: str, *, since: datetime | None = None, limit: int = 400) -> list[Rollup]:
        """A job's rollups, newest day first, from ``since``'s day on; at most
        ``limit`` (a range scan on the primary key)."""
        query = sa.select(attempt_rollups).where(attempt_rollups.c.job_id == job_id)
        if since is not None:
            query = query.where(attempt_rollups.c.day >= day_of(to_us(since)))
        query = query.order_by(attempt_rollups.c.day.desc()).limit(limit)

        def fn(conn: Connection) -> list[Rollup]:
            return [
                Rollup(
                    job_id=row.job_id, tenant=row.tenant, day=from_us(row.day), runs=row.runs, failures=row.failures,
                    lateness_p50=timedelta(microseconds=row.lateness_p50_us),
                    lateness_p90=timedelta(microseconds=row.lateness_p90_us),
                    lateness_p99=timedelta(microseconds=row.lateness_p99_us),
                )
                for row in conn.execute(query)
            ]

        return await self._tx(fn, idempotent=True)


def _partition_ddl_turn(conn: Connection) -> None:
    """Runners change the partitions of attempts one at a time (a
    transaction-level advisory lock), so a second runner sees the first
    one's partition made or detached instead of failing on it."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PARTITION_DDL_LOCK})


_PARTITION_DDL_LOCK = 0x7477_6174_7470  # "twattp": changes to the day partitions of attempts


def _set_lock_timeout(conn: Connection, seconds: float) -> None:
    """Wait at most ``seconds`` for a lock in this transaction: a DDL
    statement queued for a strong lock makes everyone after it queue too."""
    conn.execute(sa.text(f"SET LOCAL lock_timeout = '{max(1, round(seconds * 1000))}ms'"))
