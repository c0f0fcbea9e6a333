"""Migrating an engine whose DDL is not transactional (CockroachDB): every
statement a transaction of its own, under a lease row instead of a row lock.

Why not one transaction per migration, as on PostgreSQL and SQLite
(:func:`~tickwheel_server.store.migrate.migrate`'s other path, which updates
the lock row and then runs the migration's DDL): CockroachDB

- up to v21.2 (and on a v22.1 cluster before its upgrade is finalised)
  refuses a schema change after a write in the same transaction, SQLSTATE
  0A000 "schema change statement cannot follow a statement that has written
  in the same transaction" (cockroach#26508, #54477; lifted by #76279);
- on every version guarantees atomicity only to a transaction holding one
  schema change: others in a transaction with writes may fail at COMMIT
  after those writes committed (XXA00, cockroach#42061), a ``DROP COLUMN``
  beside another schema change that fails can lose data, and statements of
  the declarative and the legacy schema changer on one object may not share
  a transaction (docs, "Online Schema Changes": "Schema changes within
  transactions", "Declarative schema changer");
- from v25.1 commits the open transaction before each schema change by
  default (``autocommit_before_ddl``, cockroach#133180): a lock row written
  before the DDL is released by that commit, and the version row written
  after it lands outside any transaction.

So here each statement of ``upgrade`` (and of ``prepare``) runs in its own
transaction, alone (40001 retried by ``run_in_transaction``), each backfill
batch in its own, and the version row is written last, once every statement
has run. A migration is therefore not atomic on CockroachDB: stopped
halfway, its first statements stay applied and its version unrecorded, and
the next run starts it again from its first statement. Every migration's
statements are written to be run again (``IF NOT EXISTS`` / ``IF EXISTS``,
upserts, catalog reads where the syntax has no guard: ``migrations/_ddl.py``).

Mutual exclusion without a transaction held across the DDL (and without
advisory locks, which CockroachDB does not have): :class:`Lease`, the one
row of ``schema_migrations_lock`` taken by a conditional UPDATE in a
transaction of its own, renewed (conditionally again) before every
statement, released at the end. A lease not renewed for ``ttl`` (a migrator
that died) may be taken over; its former holder then stops before its next
statement. Takeover is safe because every statement may run again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NamedTuple

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.result import FrozenResult

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from .errors import MigrationError
from .transactions import run_in_transaction

log = logging.getLogger(__name__)

DEFAULT_LEASE = timedelta(minutes=5)
"""How long a lease not renewed keeps other migrators out (a migrator that
died holding it); renewed before every statement, so only a single
statement longer than this (an index built on a large table) lets another
migrator in beside a live one."""

_TAKE = text(
    "UPDATE schema_migrations_lock SET locked_by = :holder, locked_at = :now "
    "WHERE id = 1 AND (locked_by IS NULL OR locked_by = :holder OR locked_at IS NULL OR locked_at < :stale)"
)
_RENEW = text("UPDATE schema_migrations_lock SET locked_at = :now WHERE id = 1 AND locked_by = :holder")
_RELEASE = text(
    "UPDATE schema_migrations_lock SET locked_by = NULL, locked_at = NULL WHERE id = 1 AND locked_by = :holder"
)
_HOLDER = text("SELECT locked_by FROM schema_migrations_lock WHERE id = 1")


class Lease:
    """The migration lease of ``holder`` on ``schema_migrations_lock``."""

    poll = 0.25
    """Seconds between two tries to take a lease another migrator holds."""

    def __init__(self, engine: Engine, holder: str, clock: Clock, ttl: timedelta = DEFAULT_LEASE) -> None:
        if ttl <= timedelta(0):
            raise ValueError("the migration lease must last longer than zero")
        self.engine, self.holder, self.clock, self.ttl = engine, holder, clock, ttl

    def take(self) -> None:
        """Return once this holder has the lease, waiting while another holds a live one."""
        while True:
            now = to_us(self.clock.now())
            params = dict(holder=self.holder, now=now, stale=now - self.ttl // timedelta(microseconds=1))
            if run_in_transaction(self.engine, lambda c: c.execute(_TAKE, params).rowcount, idempotent=True) == 1:
                return
            self.wait()

    def wait(self) -> None:
        row = run_in_transaction(self.engine, lambda c: c.execute(_HOLDER).first())
        if row is None:
            raise MigrationError("the schema_migrations_lock row is missing")
        log.info("waiting for the migration lease held by %s", row.locked_by)
        time.sleep(self.poll)

    def renew(self, conn: Connection | None = None) -> None:
        """Renew the lease, in ``conn``'s transaction if given (else one of
        its own); :class:`MigrationError` if another holder took it over."""

        def renew(c: Connection) -> int:
            return c.execute(_RENEW, dict(holder=self.holder, now=to_us(self.clock.now()))).rowcount

        if (renew(conn) if conn is not None else run_in_transaction(self.engine, renew, idempotent=True)) != 1:
            raise MigrationError(f"{self.holder} lost the migration lease (not renewed for {self.ttl}); stopped")

    def release(self) -> None:
        """Give the lease back; if that fails (the store is gone), the
        error that ended the migration is the one raised, and the lease
        expires after ``ttl``."""
        try:
            run_in_transaction(self.engine, lambda c: c.execute(_RELEASE, dict(holder=self.holder)), idempotent=True)
        except Exception:
            log.warning("could not give back the migration lease of %s; it expires", self.holder, exc_info=True)


class Done(NamedTuple):
    """What a statement that returns no rows gives back."""

    rowcount: int


class OneByOne:
    """What ``upgrade(conn, caps)`` (and ``prepare``) is given on this path,
    in place of a Connection: each ``execute`` / ``exec_driver_sql`` is a
    transaction of its own, after ``before()`` (the lease's renewal). Rows
    are read whole before that transaction commits; a statement that
    returns none gives its :class:`Done`."""

    def __init__(self, engine: Engine, before: Callable[[], None], options: dict | None = None) -> None:
        self.engine, self.dialect, self._before, self._options = engine, engine.dialect, before, options or {}

    def execution_options(self, **options: Any) -> OneByOne:
        return OneByOne(self.engine, self._before, {**self._options, **options})

    def execute(self, statement: Any, parameters: Any = None) -> Any:
        return self._run(lambda conn: conn.execute(statement, parameters))

    def exec_driver_sql(self, statement: str, parameters: Any = None) -> Any:
        return self._run(lambda conn: conn.exec_driver_sql(statement, parameters))

    def _run(self, call: Callable[[Connection], Any]) -> Any:
        self._before()

        def once(conn: Connection) -> FrozenResult | Done:
            result = call(conn.execution_options(**self._options) if self._options else conn)
            return result.freeze() if result.returns_rows else Done(result.rowcount)

        # Idempotent: every migration statement may run again (module docstring).
        out = run_in_transaction(self.engine, once, idempotent=True)
        return out() if isinstance(out, FrozenResult) else out
