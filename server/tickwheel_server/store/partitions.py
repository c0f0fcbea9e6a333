"""Partition fencing epochs: what the store is authoritative for in ownership.

etcd decides who owns a partition (a compare-and-create key under the owner's
session); the store decides whose writes count. A partition's *epoch* is the
etcd create revision of its owner's key (``Ownership.fencing_revision``):
strictly greater for every later owner. The protocol:

1. An owner that wins a partition in etcd raises the stored epoch to its
   fencing revision (:meth:`PartitionStore.raise_epoch`). The raise never
   lowers the epoch, so a deposed owner whose raise arrives late cannot undo
   its successor's.
2. Every transaction that writes as a partition owner (the dispatcher's claim)
   first calls :func:`check_epochs` with the epochs it holds, in that same
   transaction, and writes only for the partitions whose stored epoch is still
   the one it holds. A deposed owner that has not yet noticed (its session
   expired a moment ago; its claim was already running in a thread) finds the
   successor's higher epoch and writes nothing for that partition.

Why the check holds against a concurrent raise (the read in step 2 and the
write in step 1 touch the same row):

* PostgreSQL: :func:`check_epochs` reads the rows ``FOR SHARE``. A raise
  updates the row, which needs a lock that conflicts with a share lock, so:

  - claim first: the raise waits until the claim commits or rolls back; the
    claim's writes are then ordered before the new epoch in real time, as
    they are in the serial order, and the new owner (which rebuilds from the
    store after raising) sees them.
  - raise first, committed: the claim reads the new epoch and refuses.
  - raise first, not yet committed: the claim waits on the row lock; once the
    raise commits, the claim fails with SQLSTATE 40001 at SERIALIZABLE or
    REPEATABLE READ (its snapshot predates the update), is retried by
    :func:`~tickwheel_server.store.transactions.run_in_transaction` and then
    refuses; at READ COMMITTED it re-reads the updated row and refuses.

  So the fence holds at every isolation level PostgreSQL accepts, not only
  through SERIALIZABLE's dependency tracking. A shared lock is the friendly
  one: claims never block each other (several batches of one owner may run
  at once) and only a raise, which happens once per ownership change, waits.
  Lock order is ascending partition in both the check and the batched raise,
  so they cannot deadlock each other.
* CockroachDB: every transaction is SERIALIZABLE by default and a raise that
  writes a row the claim has read is pushed above the claim's read timestamp
  (or the claim's read waits for the raise's intent and then sees the new
  epoch), so the same three cases hold; ``FOR SHARE`` takes a real lock under
  READ COMMITTED and is harmless otherwise.
* SQLite: ``BEGIN IMMEDIATE`` serialises every writing transaction, so a
  raise and a claim never overlap.

A frozen holder: a claim's shared locks make the successor's raise wait
until the claim's transaction ends, and a server frozen between the claim's
statements (SIGSTOP, a VM stall, a long GC pause) ends it only when the
database ends its session. Every session of the server's engine starts with
``idle_in_transaction_session_timeout`` at most the session TTL
(``ServerConfig.store_idle_limit``, a connect option: ``sessionoptions.wait_limits``;
a longer one in the store URL's options is replaced, never obeyed), so the
claim's transaction is bounded without a statement of its own: by the time
the frozen server's etcd session has expired and a successor raises, the
database has ended the claim's session (or soon will), its work rolled back
and its locks released. The frozen server, once it wakes,
finds its connection gone, retries on a new one and meets the successor's
epoch.

``run_in_transaction_async`` may leave an attempt running in its thread after
the caller is cancelled (a session loss cancels the dispatcher's task, not the
thread); that attempt still goes through :func:`check_epochs`, which is the
point of fencing in the store rather than only in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from . import pipeline
from .base import SqlStore, array_literal, driver_sql, one_of
from .engine import capabilities

# Mirrors migration 0004_partitions.
partitions_table = sa.Table(
    "partitions",
    sa.MetaData(),
    sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

# One statement on all three engines (ON CONFLICT … DO UPDATE … WHERE is in
# SQLite >= 3.24, PostgreSQL >= 9.5 and CockroachDB). An equal epoch is the
# same ownership raising again (an etcd create revision belongs to exactly one
# key creation), so it counts as taking effect: the raise is idempotent and a
# retry after an ambiguous commit is harmless.
_RAISE = sa.text(
    """
    INSERT INTO partitions (partition, epoch, owner, updated_at)
    VALUES (:partition, :epoch, :owner, :updated_at)
    ON CONFLICT (partition) DO UPDATE
    SET epoch = excluded.epoch, owner = excluded.owner, updated_at = excluded.updated_at
    WHERE partitions.epoch <= excluded.epoch
    """
)


@dataclass(frozen=True)
class PartitionEpoch:
    """A partition's row: its fencing epoch and who raised it, when."""

    partition: int
    epoch: int
    owner: str
    updated_at: datetime


def check_epochs(conn: Connection, owned: Mapping[int, int]) -> set[int]:
    """The partitions of ``owned`` (partition -> epoch we hold) whose stored
    epoch is not the one we hold: missing rows, and rows raised past us.

    Pure SQL on ``conn``, for use INSIDE the caller's transaction, before its
    writes: write only for partitions not returned. Reads the rows with a
    shared lock where the engine has row locks (see the module docstring for
    why that makes a concurrent raise wait or makes this transaction retry).
    One statement, whatever the number of partitions. Writes nothing. On
    PostgreSQL and CockroachDB, in a transaction that ``begins_itself``
    (the claim's), it is the first statement and the BEGIN goes with it in
    one round trip (:func:`.pipeline.send`).
    """
    if not owned:
        return set()
    row_locks = capabilities(conn).row_locks
    if conn.dialect.name == "sqlite":
        query = (
            sa.select(partitions_table.c.partition, partitions_table.c.epoch)
            .where(partitions_table.c.partition.in_(sorted(owned)))
            .order_by(partitions_table.c.partition)
        )
        if row_locks:
            query = query.with_for_update(read=True)
        stored = dict(conn.execute(query).tuples().all())
    else:  # one array parameter, as driver SQL
        stored = dict(pipeline.send(conn, [epochs_statement(conn, owned)])[0])
    return stale_of(owned, stored)


def epochs_statement(conn: Connection, owned: Mapping[int, int]) -> pipeline.Statement:
    """:func:`check_epochs`'s SELECT (PostgreSQL and CockroachDB) for a
    caller that sends it in a round trip with statements of its own
    (:func:`.pipeline.send`, the check first); :func:`stale_of` reads its rows."""
    return _CHECK_EPOCHS[capabilities(conn).row_locks], {"owned": array_literal(sorted(owned))}


def stale_of(owned: Mapping[int, int], stored: Mapping[int, int]) -> set[int]:
    """The partitions of ``owned`` whose ``stored`` epoch (partition ->
    epoch, as read) is missing or not the one held."""
    return {partition for partition, epoch in owned.items() if stored.get(partition) != epoch}


_CHECK_EPOCHS = {
    locked: driver_sql(
        "SELECT partition, epoch FROM partitions WHERE partition = ANY(CAST(:owned AS INTEGER[])) ORDER BY partition"
        + (" FOR SHARE" if locked else "")
    )
    for locked in (False, True)
}
"""The epoch check's SELECT (PostgreSQL and CockroachDB), without and with its shared row locks."""


def raise_epochs_in(conn: Connection, epochs: Mapping[int, int], owner: str, now_us: int) -> set[int]:
    """Raise each partition's stored epoch to ``epochs[partition]`` unless it
    is already higher (inserting missing rows), inside the caller's
    transaction. Returns the partitions whose stored epoch is now the given
    one (raised, or already equal); the others were raised past it by a later
    owner and are left alone. Rows are written in ascending partition order."""
    took: set[int] = set()
    for partition in sorted(epochs):
        epoch = epochs[partition]
        if epoch < 1:
            raise ValueError(f"partition {partition}: epochs are etcd revisions (>= 1), got {epoch}")
        result = conn.execute(
            _RAISE, {"partition": partition, "epoch": epoch, "owner": owner, "updated_at": now_us}
        )
        if result.rowcount == 1:
            took.add(partition)
    return took


class PartitionStore(SqlStore):
    """The ``partitions`` table. Every method is one retried transaction."""

    async def raise_epoch(self, partition: int, epoch: int, owner: str) -> bool:
        """Set ``partition``'s epoch to ``epoch`` if that is not lower than the
        stored one (creating the row if missing), recording ``owner``.

        Returns True when the stored epoch is ``epoch`` afterwards, False when
        a later owner had already raised it higher (the caller's ownership is
        stale: it must not act as owner). Never lowers an epoch. Idempotent.
        """
        return partition in await self.raise_epochs({partition: epoch}, owner)

    async def raise_epochs(self, epochs: Mapping[int, int], owner: str) -> set[int]:
        """:meth:`raise_epoch` for several partitions in ONE transaction;
        returns the partitions for which it took effect."""
        if not epochs:
            return set()
        now_us = to_us(self.clock.now())
        wanted = dict(epochs)
        return await self._tx(lambda conn: raise_epochs_in(conn, wanted, owner, now_us), idempotent=True)

    async def epochs(self, partitions: Iterable[int] | None = None) -> dict[int, int]:
        """Stored epoch per partition, for ``partitions`` (all rows when None);
        partitions without a row are absent."""
        return {row.partition: row.epoch for row in await self.rows(partitions)}

    async def rows(self, partitions: Iterable[int] | None = None) -> list[PartitionEpoch]:
        """The rows for ``partitions`` (all when None), by partition."""
        wanted = None if partitions is None else sorted(set(partitions))

        def fn(conn: Connection) -> list[PartitionEpoch]:
            query = sa.select(partitions_table).order_by(partitions_table.c.partition)
            if wanted is not None:
                if not wanted:
                    return []
                query = query.where(one_of(self.caps, partitions_table.c.partition, wanted, "INTEGER"))
            return [
                PartitionEpoch(row.partition, row.epoch, row.owner, from_us(row.updated_at))
                for row in conn.execute(query)
            ]

        return await self._tx(fn, idempotent=True)

    async def max_epoch(self) -> int:
        """The highest stored epoch, 0 when there is none.

        A lease store whose revisions start again from 1 (the in-process store
        of ``tickwheel dev`` after a restart, an etcd cluster rebuilt from
        nothing) must first be moved past this, or every raise is refused."""

        def fn(conn: Connection) -> int:
            return conn.execute(sa.select(sa.func.max(partitions_table.c.epoch))).scalar() or 0

        return await self._tx(fn, idempotent=True)
