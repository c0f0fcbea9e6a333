"""Versioned schema migrations.

A migration is a file in :mod:`tickwheel_server.store.migrations` named
``NNNN_name.py`` or ``NNNN_name.sql`` (four digits, lower-case name). A
Python migration defines ``upgrade(conn, caps)``: ``conn`` is a SQLAlchemy
``Connection`` inside the migration's transaction (on CockroachDB a
:class:`~tickwheel_server.store.migrate_steps.OneByOne`, whose every
``execute`` is a transaction of its own) and ``caps`` the engine's
:class:`~tickwheel_server.store.engine.Capabilities`, so engine-specific DDL
(PostgreSQL partitions, say) sits behind a capability check. A ``.sql``
migration is run statement by statement on every engine, so it must keep to
the SQL that SQLite, PostgreSQL and CockroachDB share.

What the database records: ``schema_migrations(version, name, applied_at)``,
one row per applied migration (``applied_at`` in microseconds since the
epoch, like every instant in the store), and ``schema_migrations_lock``, one row:
the lock every migrating transaction updates first (PostgreSQL, SQLite), or
the lease of the one migrator at work (CockroachDB: ``locked_by`` its
holder, ``locked_at`` when last renewed; NULL when free).

Contract of :func:`migrate`:

- On an engine with transactional DDL (PostgreSQL, SQLite) each migration
  runs in its own transaction together with the row that records it, so it
  is applied completely and recorded, or not at all. On CockroachDB, whose
  DDL is not transactional (and refused after a write in one transaction
  up to v21.2), each statement of a migration runs in a transaction of its
  own and the version row is written after the last
  (:mod:`~tickwheel_server.store.migrate_steps`): a migration stopped
  halfway stays unrecorded with its first statements applied, and the next
  run applies it again from the start, which is why every migration's
  statements may run again. A failure leaves the earlier migrations
  applied and raises :class:`~tickwheel_server.store.errors.MigrationError`.
- Idempotent: migrations already recorded are skipped; running it again
  applies nothing.
- Safe to run concurrently from several servers. PostgreSQL and SQLite:
  each migrating transaction first updates the lock row, so they queue on
  its row lock (SQLite: ``BEGIN IMMEDIATE`` serialises them) and each
  re-reads the recorded versions after acquiring it; under SERIALIZABLE
  the waiter gets SQLSTATE 40001 when the holder commits and is retried by
  ``run_in_transaction``. A backfill batch (the bounded copies before a
  migration's own transaction) holds the lock row shared, so an upgrade
  dropping what the batches read waits for the batch under way, and the
  next batch finds the migration recorded. CockroachDB: the lock row is a lease
  (:class:`~tickwheel_server.store.migrate_steps.Lease`), taken and renewed
  by conditional updates in transactions of their own, never beside DDL.
  No advisory locks: CockroachDB has none.
- Migrations are applied in version order; a version recorded in the
  database but unknown to this code (a newer release migrated) is left
  alone.
"""

from __future__ import annotations

import importlib
import importlib.resources
import logging
import os
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from tickwheel.shared.clock import Clock, SystemClock
from tickwheel.shared.ids import from_us, to_us

from .engine import Capabilities, capabilities
from .errors import MigrationError
from .migrate_steps import DEFAULT_LEASE, Lease, OneByOne
from .migrations._ddl import has_table
from .transactions import run_in_transaction

log = logging.getLogger(__name__)

MIGRATIONS_PACKAGE = "tickwheel_server.store.migrations"
_FILE_NAME = re.compile(r"^(?P<version>\d{4})_(?P<name>[a-z0-9][a-z0-9_]*)\.(?P<kind>py|sql)\Z")
_LOCK_ROW_ID = 1

_metadata = sa.MetaData()
schema_migrations = sa.Table(
    "schema_migrations",
    _metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("applied_at", sa.BigInteger, nullable=False),  # microseconds since the epoch, UTC
)
schema_migrations_lock = sa.Table(
    "schema_migrations_lock",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("locked_by", sa.String(200), nullable=True),
    sa.Column("locked_at", sa.BigInteger, nullable=True),
)

Upgrade = Callable[[Connection, Capabilities], None]


@dataclass(frozen=True)
class Migration:
    """One schema change: ``upgrade(conn, caps)`` applies it inside a transaction."""

    version: int
    name: str
    upgrade: Upgrade
    source: str = ""
    """Where it came from (a file name), for messages."""
    prepare: Upgrade | None = None
    backfill: Callable[[Connection, Capabilities, str], str | None] | None = None
    """A copy too large for one transaction (migration 0032): before
    ``upgrade``, ``prepare(conn, caps)`` runs in a transaction of its own,
    then ``backfill(conn, caps, after)`` one bounded batch a transaction,
    from ``after`` = "" on, each returning where the next starts (None:
    done). Both must be safe to run again, and by two servers at once."""

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"


@dataclass(frozen=True)
class AppliedMigration:
    """A migration recorded in ``schema_migrations``; ``applied_at`` is aware UTC."""

    version: int
    name: str
    applied_at: datetime


# ------------------------------------------------------------------ loading


def load_migrations(package: str = MIGRATIONS_PACKAGE) -> list[Migration]:
    """The migrations shipped in ``package``, in version order.

    Raises :class:`MigrationError` for a file that looks like a migration but
    is misnamed, a duplicate version, or a Python migration without a
    callable ``upgrade``.
    """
    migrations: list[Migration] = []
    for entry in sorted(importlib.resources.files(package).iterdir(), key=lambda e: e.name):
        file_name = entry.name
        if file_name.startswith(("_", ".")) or not file_name.endswith((".py", ".sql")):
            continue
        match = _FILE_NAME.match(file_name)
        if match is None:
            raise MigrationError(f"{package}: {file_name!r} is not named NNNN_lower_case_name.py or .sql")
        version, name, kind = int(match["version"]), match["name"], match["kind"]
        if kind == "py":
            module = importlib.import_module(f"{package}.{file_name[:-3]}")
            upgrade = getattr(module, "upgrade", None)
            if not callable(upgrade):
                raise MigrationError(f"{package}.{file_name}: defines no upgrade(conn, caps) function")
            steps = dict(prepare=getattr(module, "prepare", None), backfill=getattr(module, "backfill", None))
        else:
            upgrade = _sql_upgrade(file_name, entry.read_text(encoding="utf-8"))
            steps = {}
        migrations.append(Migration(version, name, upgrade, source=f"{package}/{file_name}", **steps))
    _check_order(migrations)
    return migrations


def _check_order(migrations: Sequence[Migration]) -> None:
    seen: dict[int, Migration] = {}
    for migration in migrations:
        if migration.version < 1:
            raise MigrationError(f"migration {migration.label}: versions start at 1")
        if migration.version in seen:
            raise MigrationError(
                f"migration version {migration.version} is defined twice: "
                f"{seen[migration.version].source or seen[migration.version].label} and "
                f"{migration.source or migration.label}"
            )
        seen[migration.version] = migration


def _sql_upgrade(file_name: str, text: str) -> Upgrade:
    statements = split_sql(text)
    if not statements:
        raise MigrationError(f"{file_name}: contains no SQL statement")

    def upgrade(conn: Connection, _caps: Capabilities) -> None:
        # no_parameters: a literal % must reach the server as it is.
        raw = conn.execution_options(no_parameters=True)
        for statement in statements:
            raw.exec_driver_sql(statement)

    return upgrade


def split_sql(text: str) -> list[str]:
    """Split a SQL script into statements at top-level semicolons.

    Understands '…' and "…" quoting (with doubled quotes), ``--`` and
    ``/* */`` comments. Dollar quoting is refused: it is not in the SQL
    subset the three engines share.
    """
    statements: list[str] = []
    current: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in ("'", '"'):
            end = i + 1
            while True:
                end = text.find(ch, end)
                if end == -1:
                    raise MigrationError("unterminated quoted string in SQL migration")
                if end + 1 < n and text[end + 1] == ch:
                    end += 2
                    continue
                break
            current.append(text[i : end + 1])
            i = end + 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end == -1 else end + 1
            current.append("\n")
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end == -1:
                raise MigrationError("unterminated /* comment in SQL migration")
            i = end + 2
            current.append(" ")
        elif ch == "$" and re.match(r"\$[A-Za-z_]*\$", text[i:]):
            raise MigrationError("dollar-quoted strings are not supported in SQL migrations")
        elif ch == ";":
            statement = "".join(current).strip()
            if statement:
                statements.append(statement)
            current = []
            i += 1
        else:
            current.append(ch)
            i += 1
    statement = "".join(current).strip()
    if statement:
        statements.append(statement)
    return statements


# ------------------------------------------------------------------ reading


def _read_applied(conn: Connection) -> list[AppliedMigration]:
    if not has_table(conn, capabilities(conn), schema_migrations.name):  # a catalog read every engine takes
        return []
    rows = conn.execute(
        sa.select(schema_migrations.c.version, schema_migrations.c.name, schema_migrations.c.applied_at).order_by(
            schema_migrations.c.version
        )
    )
    return [AppliedMigration(row.version, row.name, from_us(row.applied_at)) for row in rows]


def applied_migrations(engine: Engine) -> list[AppliedMigration]:
    """The migrations recorded in the database, in version order (empty if none)."""
    return run_in_transaction(engine, _read_applied)


def current_version(engine: Engine) -> int:
    """The highest recorded migration version, 0 for a database never migrated."""
    applied = applied_migrations(engine)
    return applied[-1].version if applied else 0


def pending_migrations(engine: Engine, migrations: Sequence[Migration] | None = None) -> list[Migration]:
    """The known migrations not yet recorded in the database, in version order."""
    known = list(load_migrations() if migrations is None else migrations)
    done = {m.version for m in applied_migrations(engine)}
    return sorted((m for m in known if m.version not in done), key=lambda m: m.version)


# ------------------------------------------------------------------ applying


def _ensure_bookkeeping(engine: Engine, caps: Capabilities) -> None:
    """Create the bookkeeping tables and the lock row if missing.

    Two servers may race here. PostgreSQL and CockroachDB report the loser
    of concurrent CREATE TABLEs as a duplicate (42P07, or a unique violation
    on the catalog); then the tables exist and that is all we wanted.
    Without transactional DDL each statement is a transaction of its own.
    """

    def create(conn: Connection | OneByOne) -> None:
        conn.execute(sa.schema.CreateTable(schema_migrations, if_not_exists=True))
        conn.execute(sa.schema.CreateTable(schema_migrations_lock, if_not_exists=True))
        conn.execute(
            sa.text("INSERT INTO schema_migrations_lock (id) VALUES (:id) ON CONFLICT (id) DO NOTHING"),
            {"id": _LOCK_ROW_ID},
        )

    for attempt in range(1, 4):
        try:
            if caps.transactional_ddl:
                run_in_transaction(engine, create, idempotent=True)
            else:
                create(OneByOne(engine, lambda: None))
            return
        except (sa_exc.IntegrityError, sa_exc.ProgrammingError):
            if attempt == 3:
                raise
            log.debug("concurrent creation of the migration tables; checking again", exc_info=True)


def migrate(
    engine: Engine,
    *,
    migrations: Sequence[Migration] | None = None,
    target: int | None = None,
    clock: Clock | None = None,
    holder: str | None = None,
    lease: timedelta = DEFAULT_LEASE,
) -> list[AppliedMigration]:
    """Apply every known migration not yet recorded, up to ``target`` if given.

    ``migrations`` defaults to :func:`load_migrations`; ``clock`` stamps
    ``applied_at``; ``holder`` names this process in the lock row (default
    ``host:pid``); ``lease`` is how long CockroachDB's migration lease
    outlives its holder's last renewal. Returns the migrations this call
    applied, in order (empty when the database was up to date or another
    process applied them first). See the module docstring for the
    guarantees.
    """
    known = sorted(load_migrations() if migrations is None else migrations, key=lambda m: m.version)
    _check_order(known)
    if target is not None:
        known = [m for m in known if m.version <= target]
    clock = clock or SystemClock()
    holder = holder or f"{socket.gethostname()}:{os.getpid()}"
    caps = capabilities(engine)

    _ensure_bookkeeping(engine, caps)
    stepwise = None if caps.transactional_ddl else Lease(engine, holder, clock, lease)
    recorded = {m.version for m in applied_migrations(engine)}
    if known and recorded and max(recorded) > known[-1].version:
        log.warning(
            "database schema is at version %d, newer than this release knows (%d)", max(recorded), known[-1].version
        )

    applied: list[AppliedMigration] = []
    for migration in known:
        if migration.version in recorded:
            continue
        now = clock.now()
        try:
            if stepwise is not None:
                result = _apply_stepwise(engine, migration, caps, stepwise, now)
            else:
                _backfill(engine, migration, caps)
                result = run_in_transaction(
                    engine,
                    lambda conn, m=migration: _apply_one(conn, m, caps, holder, now),
                    idempotent=True,  # the version check under the lock makes a re-run a no-op
                )
        except Exception as exc:
            raise MigrationError(f"migration {migration.label} failed: {exc}", applied=applied) from exc
        if result is not None:
            log.info("applied migration %s", migration.label)
            applied.append(result)
    return applied


def _backfill(engine: Engine, migration: Migration, caps: Capabilities) -> None:
    """``migration``'s prepare and backfill steps, each batch its own
    transaction, until done or another process recorded the migration."""
    if migration.backfill is None:
        return

    def step(conn: Connection, run: Callable[[Connection], str | None]) -> tuple[bool, str | None]:
        # The lock row shared: another process's upgrade (which takes it
        # exclusively, then drops what a batch reads) waits for this batch,
        # and a batch begun after that upgrade committed sees its version row.
        conn.execute(
            sa.select(schema_migrations_lock.c.id)
            .where(schema_migrations_lock.c.id == _LOCK_ROW_ID)
            .with_for_update(read=True)
        )
        return (True, None) if _is_recorded(conn, migration.version) else (False, run(conn))

    def prepare(conn: Connection) -> None:
        if migration.prepare is not None:
            migration.prepare(conn, caps)

    done, _ = run_in_transaction(engine, lambda conn: step(conn, prepare), idempotent=True)
    after: str | None = ""
    while not done and after is not None:
        done, after = run_in_transaction(
            engine, lambda conn, at=after: step(conn, lambda c: migration.backfill(c, caps, at)), idempotent=True
        )
        if after is not None:
            log.info("migration %s: backfilled up to %s", migration.label, after)


def _is_recorded(conn: Connection, version: int) -> bool:
    return conn.execute(
        sa.select(schema_migrations.c.version).where(schema_migrations.c.version == version)
    ).first() is not None


def _apply_stepwise(
    engine: Engine, migration: Migration, caps: Capabilities, lease: Lease, now: datetime
) -> AppliedMigration | None:
    """``migration`` on an engine without transactional DDL, under ``lease``:
    prepare, each backfill batch and each statement of ``upgrade`` a
    transaction of its own, the version row last (module docstring)."""
    lease.take()
    try:
        if run_in_transaction(engine, lambda conn: _is_recorded(conn, migration.version)):
            return None  # another migrator applied it while this one waited
        one_by_one = OneByOne(engine, lease.renew)
        if migration.prepare is not None:
            migration.prepare(one_by_one, caps)
        after: str | None = "" if migration.backfill is not None else None
        while after is not None:
            lease.renew()
            after = run_in_transaction(engine, lambda conn, at=after: migration.backfill(conn, caps, at), idempotent=True)
            if after is not None:
                log.info("migration %s: backfilled up to %s", migration.label, after)
        migration.upgrade(one_by_one, caps)

        def record(conn: Connection) -> int:
            lease.renew(conn)  # in this transaction: recorded only by the lease's holder
            return conn.execute(
                sa.text(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (:version, :name, :at) "
                    "ON CONFLICT (version) DO NOTHING"
                ),
                dict(version=migration.version, name=migration.name, at=to_us(now)),
            ).rowcount

        if run_in_transaction(engine, record, idempotent=True) != 1:
            return None
        return AppliedMigration(migration.version, migration.name, from_us(to_us(now)))
    finally:
        lease.release()


def _apply_one(
    conn: Connection, migration: Migration, caps: Capabilities, holder: str, now: datetime
) -> AppliedMigration | None:
    taken = conn.execute(
        sa.update(schema_migrations_lock)
        .where(schema_migrations_lock.c.id == _LOCK_ROW_ID)
        .values(locked_by=holder, locked_at=to_us(now))
    )
    if taken.rowcount != 1:
        raise MigrationError("the schema_migrations_lock row is missing")
    if _is_recorded(conn, migration.version):
        return None
    migration.upgrade(conn, caps)
    conn.execute(sa.insert(schema_migrations).values(version=migration.version, name=migration.name, applied_at=to_us(now)))
    return AppliedMigration(migration.version, migration.name, from_us(to_us(now)))
