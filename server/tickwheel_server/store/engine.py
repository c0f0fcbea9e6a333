"""The store's engine layer: URLs, engines and what each can do.

Three engines, one SQL subset (the one CockroachDB and PostgreSQL share):

- ``sqlite:///path`` (``tickwheel dev``): WAL journal, foreign keys on, a
  busy timeout, and every transaction opened with ``BEGIN IMMEDIATE`` so a
  read-then-write transaction can never fail half way on a lock upgrade; the
  database serialises writers. ``sqlite://`` is a private in-memory database
  for unit tests, used by one transaction at a time (a pool of one
  connection; StaticPool would let two threads interleave on it).
- ``postgresql+psycopg://…`` and ``cockroachdb+psycopg://…`` (the
  sqlalchemy-cockroachdb dialect). Both run at SERIALIZABLE by default, which
  is CockroachDB's only sensible level and the one the test suite runs
  PostgreSQL at, so SQLSTATE 40001 is an everyday event that
  :func:`~tickwheel_server.store.transactions.run_in_transaction` absorbs.
  PostgreSQL sessions start with JIT off (:func:`.sessionoptions.postgres_options`); the
  server's sessions also with a ``lock_timeout`` and an
  ``idle_in_transaction_session_timeout`` (:func:`.sessionoptions.wait_limits`).

Engine-specific SQL goes behind :class:`Capabilities`, never behind a check
of the URL string.
"""

from __future__ import annotations

import select
import sqlite3
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from psycopg import pq as psycopg_pq
from psycopg.pq import TransactionStatus
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url
from sqlalchemy.pool import QueuePool

from . import binary_arrays
from .errors import StoreConfigError
from .sessionoptions import IDLE_IN_TRANSACTION_TIMEOUT, session_options, wait_limits

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
COCKROACHDB = "cockroachdb"

_ISOLATION_LEVELS = {
    SQLITE: {"SERIALIZABLE"},
    POSTGRESQL: {"SERIALIZABLE", "REPEATABLE READ", "READ COMMITTED"},
    COCKROACHDB: {"SERIALIZABLE", "READ COMMITTED"},
}


# --------------------------------------------------------------------------- URLs


def parse_store_url(url: str | URL) -> URL:
    """Validate a store URL and return it with its driver made explicit.

    Accepted: ``sqlite://`` (memory), ``sqlite:///relative/path``,
    ``sqlite:////absolute/path``, ``postgresql[+psycopg]://…`` (also
    ``postgres://``) and ``cockroachdb[+psycopg]://…``. PostgreSQL and
    CockroachDB always use psycopg 3. Raises :class:`StoreConfigError` for
    anything else, with the password hidden.
    """
    try:
        parsed = make_url(url)
    except sa_exc.ArgumentError as exc:  # its text names no part of the URL
        raise StoreConfigError(f"store URL is not a URL: {exc}") from None
    except ValueError:
        # The port's text, quoted by int(), may be the tail of a password
        # holding an unencoded @ or ':': never repeated.
        raise StoreConfigError(
            "store URL is not a URL: its port is not a number (in a password, write @ as %40, : as %3A, / as %2F)"
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "postgres":
        backend = POSTGRESQL
    if backend == SQLITE:
        if driver not in ("", "pysqlite"):
            raise StoreConfigError(f"store URL {shown}: SQLite uses the built-in driver, not {driver!r}")
        return parsed.set(drivername=SQLITE)
    if backend in (POSTGRESQL, COCKROACHDB):
        if driver not in ("", "psycopg"):
            raise StoreConfigError(
                f"store URL {shown}: use {backend}+psycopg:// (psycopg 3), not the {driver!r} driver"
            )
        return parsed.set(drivername=f"{backend}+psycopg")
    raise StoreConfigError(
        f"store URL {shown}: unsupported engine {backend!r}; "
        "use sqlite:///PATH, postgresql+psycopg://… or cockroachdb+psycopg://…"
    )


def _is_sqlite_memory(url: URL) -> bool:
    database = url.database or ""
    return database in ("", ":memory:") or "mode=memory" in database


# -------------------------------------------------------------------- engines


def create_store_engine(
    url: str | URL,
    *,
    isolation: str | None = None,
    pool_size: int = 5,
    max_overflow: int = 10,
    pool_timeout: float = 30.0,
    connect_timeout: int = 5,
    sqlite_busy_timeout: float = 5.0,
    lock_timeout: float | None = None,
    idle_in_transaction_timeout: float | None = None,
    echo: bool = False,
) -> Engine:
    """Build the SQLAlchemy engine for a store URL (see :func:`parse_store_url`).

    ``isolation`` defaults to SERIALIZABLE everywhere (SQLite transactions are
    serialised by ``BEGIN IMMEDIATE`` and accept only that). PostgreSQL also
    accepts REPEATABLE READ and READ COMMITTED, CockroachDB READ COMMITTED;
    anything else raises :class:`StoreConfigError` here, before any connection.

    ``pool_size``/``max_overflow``/``pool_timeout`` size the connection pool
    (in-memory SQLite has a pool of one, so one transaction at a time). ``connect_timeout`` (seconds) bounds each
    PostgreSQL/CockroachDB connection attempt; a pooled connection the
    server has closed since it was last used is replaced when it is checked
    out (:func:`closed_by_server`: no round trip), so a restarted server
    costs a reconnect, not an error; one that dies while in use fails its
    transaction with a connection error, which the retry path retries.
    ``sqlite_busy_timeout`` (seconds) is how long a SQLite transaction waits
    for another writer before failing with a retryable "database is locked".
    PostgreSQL sessions start with JIT off unless the URL's ``options`` (or
    ``PGOPTIONS``) set ``jit`` (:func:`.sessionoptions.postgres_options`).

    ``lock_timeout`` and ``idle_in_transaction_timeout`` (seconds; None or 0
    leaves them to the database) start every PostgreSQL and CockroachDB
    session with ``lock_timeout`` and ``idle_in_transaction_session_timeout``
    (:func:`.sessionoptions.wait_limits`), unless the URL's ``options`` set them (a lock
    timeout of their own wins; an idle limit of theirs only where it is
    shorter: ours is a ceiling, which every transaction, the claim's
    included, runs under without a statement of its own): a
    statement that waits longer for a lock fails with 55P03, which
    :mod:`.transactions` retries as a refusal (at most
    :data:`~.transactions.LOCK_TIMEOUT_ATTEMPTS` attempts while a table is
    held, :data:`~.transactions.ROW_LOCK_ATTEMPTS` when only rows were), and a session
    left idle in a transaction longer is ended by the database, its locks
    released. The server's engine sets both; the migration tool's and the
    tests' leave them to the database. SQLite ignores them.

    Nothing connects until the engine is first used.
    """
    parsed = parse_store_url(url)
    backend = parsed.get_backend_name()
    level = (isolation or "SERIALIZABLE").upper().replace("_", " ")
    if level not in _ISOLATION_LEVELS[backend]:
        allowed = ", ".join(sorted(_ISOLATION_LEVELS[backend]))
        raise StoreConfigError(f"isolation {isolation!r} is not supported on {backend}; use one of: {allowed}")
    if pool_size < 1 or max_overflow < 0 or pool_timeout <= 0:
        raise StoreConfigError("pool_size must be >= 1, max_overflow >= 0 and pool_timeout > 0")
    if connect_timeout < 1 or sqlite_busy_timeout < 0:
        raise StoreConfigError("connect_timeout must be >= 1 s and sqlite_busy_timeout >= 0")
    limits = wait_limits(lock_timeout, idle_in_transaction_timeout)

    if backend == SQLITE:
        return _create_sqlite_engine(
            parsed,
            busy_timeout=sqlite_busy_timeout,
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_timeout=pool_timeout,
            echo=echo,
        )

    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = connect_timeout
    if "application_name" not in parsed.query:
        connect_args["application_name"] = "tickwheel"
    settings = ({"jit": "off"} if backend == POSTGRESQL else {}) | limits
    if settings:  # CockroachDB's sessions get no options of ours unless limits are asked
        # The idle limit is a ceiling: a longer one in the URL would let a server frozen
        # in a transaction (a claim's partitions: store.partitions) hold its locks past its session.
        connect_args["options"] = session_options(parsed, settings, ceilings=frozenset({IDLE_IN_TRANSACTION_TIMEOUT}))
    engine = sa.create_engine(
        parsed,
        isolation_level=level,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout,
        connect_args=connect_args,
        echo=echo,
    )

    used: weakref.WeakSet[Any] = weakref.WeakSet()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Also on psycopg's global adapters, which a connection copies when
        # made: here for one made before that module was first imported.
        binary_arrays.register(dbapi_connection.adapters)

    @event.listens_for(engine, "checkin")
    def _on_checkin(dbapi_connection: Any, _record: Any) -> None:
        if dbapi_connection is not None:
            used.add(dbapi_connection)

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        # Instead of pool_pre_ping's round trip on every checkout: the pool
        # replaces this connection, and every one pooled before it (as
        # after a failed ping: a restart closes them all), then checks out
        # a new one.
        if closed_by_server(dbapi_connection, used=dbapi_connection in used):
            raise sa_exc.InvalidatePoolError("the server closed this pooled connection")

    return engine


def closed_by_server(connection: Any, *, used: bool) -> bool:
    """Whether an idle psycopg ``connection`` (in the pool: no statement in
    flight) is unusable, known without a round trip: closed, or, once
    ``used`` (it has answered a statement), the server has sent it
    something. Every answer a used connection was sent has been read, and
    nothing here listens for notifications, so what arrives while it is
    idle is the server going away (shut down, restarted, the session
    terminated: an error, then the end of the stream) or, rarely, a notice
    of no consequence, after which a new connection costs a reconnect. A
    connection never used may hold what its set-up left (a TLS session
    ticket), so only its state is checked. A server that becomes
    unreachable without closing the connection is not detected: the first
    statement fails with a connection error, which the retry path retries,
    as after a ping that passed a moment before."""
    if connection.closed or connection.broken:
        return True
    pgconn = connection.pgconn
    if pgconn.status != psycopg_pq.ConnStatus.OK:
        return True
    if not used:
        return False
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN)
    return bool(poller.poll(0))


def refuse_ended_session(conn: Connection) -> None:
    """Before a COMMIT is sent in ``conn``'s open transaction (psycopg):
    if the server already sent something unasked (:func:`closed_by_server`, no
    round trip), its session ended while the transaction sat idle (past
    its ``idle_in_transaction_session_timeout``: a server frozen in the
    middle of it, woken), and nothing of it was applied. Then the connection
    is invalidated and a plain connection error raised, retried, rather than
    a COMMIT sent into the closed session and its failure taken for a commit
    in doubt (:class:`~.errors.AmbiguousCommitError`)."""
    if conn.dialect.driver != "psycopg" or conn.invalidated:
        return
    dbapi = conn.connection.dbapi_connection
    if dbapi.info.transaction_status == TransactionStatus.INTRANS and closed_by_server(dbapi, used=True):
        conn.invalidate()
        raise sa_exc.DisconnectionError("the server ended the transaction's session before its COMMIT was sent")


def _create_sqlite_engine(
    url: URL,
    *,
    busy_timeout: float,
    pool_size: int,
    max_overflow: int,
    pool_timeout: float,
    echo: bool,
) -> Engine:
    memory = _is_sqlite_memory(url)
    if memory:
        engine = _create_sqlite_memory_engine(busy_timeout=busy_timeout, pool_timeout=pool_timeout, echo=echo)
    else:
        engine = sa.create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": busy_timeout},
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_timeout=pool_timeout,
            echo=echo,
        )
    busy_ms = int(busy_timeout * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Take BEGIN away from the driver so that _on_begin decides it.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if not memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock up front (waiting up to the busy
        # timeout), so a transaction that reads then writes cannot fail at
        # its first write with SQLITE_BUSY_SNAPSHOT.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _create_sqlite_memory_engine(*, busy_timeout: float, pool_timeout: float, echo: bool) -> Engine:
    """A private in-memory database that one transaction at a time may use.

    A pool of exactly one connection serialises users across threads (the
    async wrapper runs attempts in executor threads); a caller that waits
    longer than ``pool_timeout`` gets a retryable pool timeout. The database
    is a named shared-cache one, kept alive by an idle anchor connection, so
    it survives the pool replacing its connection and lives as long as the
    engine.
    """
    return sa.create_engine(
        "sqlite://",
        creator=_MemoryDatabase(busy_timeout),
        poolclass=QueuePool,
        pool_size=1,
        max_overflow=0,
        pool_timeout=pool_timeout,
        echo=echo,
    )


class _MemoryDatabase:
    """Connects to one named shared-cache in-memory SQLite database.

    The idle anchor connection keeps the database alive while the pool (which
    holds this creator, also across ``engine.dispose()``) exists.
    """

    def __init__(self, busy_timeout: float) -> None:
        self._name = f"file:tickwheel-{uuid.uuid4().hex}?mode=memory&cache=shared"
        self._busy_timeout = busy_timeout
        self._anchor = sqlite3.connect(self._name, uri=True, check_same_thread=False)

    def __call__(self) -> sqlite3.Connection:
        return sqlite3.connect(self._name, uri=True, check_same_thread=False, timeout=self._busy_timeout)


# -------------------------------------------------------------- capabilities


@dataclass(frozen=True)
class Capabilities:
    """What the connected engine can do; engine-specific SQL checks these.

    Detected from the SQLAlchemy dialect (and its server version once it has
    connected), never from the URL string.
    """

    dialect: str
    """``"sqlite"``, ``"postgresql"`` or ``"cockroachdb"``."""
    is_sqlite: bool
    is_postgres: bool
    """PostgreSQL proper; False on CockroachDB even though it speaks the protocol."""
    is_cockroach: bool
    row_locks: bool
    """``SELECT … FOR UPDATE`` locks rows. False on SQLite, where the whole
    database is locked by ``BEGIN IMMEDIATE`` instead."""
    skip_locked: bool
    """``FOR UPDATE SKIP LOCKED`` is available (PostgreSQL, CockroachDB)."""
    returning: bool
    """``INSERT/UPDATE/DELETE … RETURNING`` (SQLite >= 3.35 too)."""
    on_conflict: bool
    """``INSERT … ON CONFLICT … DO NOTHING/UPDATE`` (SQLite >= 3.24 too)."""
    declarative_partitioning: bool
    """``PARTITION BY RANGE`` tables (PostgreSQL >= 11 only)."""
    advisory_locks: bool
    """``pg_advisory_xact_lock`` (PostgreSQL only)."""
    transactional_ddl: bool
    """DDL commits or rolls back with its transaction. False on CockroachDB,
    whose schema changes finish asynchronously after COMMIT: there, keep one
    schema change per migration and never mix DDL with writes to the same
    table in one transaction."""


def capabilities(bind: Engine | Connection | Dialect) -> Capabilities:
    """The :class:`Capabilities` of an engine, connection or dialect."""
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    name = dialect.name
    if name == SQLITE:
        version = sqlite3.sqlite_version_info
        return Capabilities(
            dialect=SQLITE,
            is_sqlite=True,
            is_postgres=False,
            is_cockroach=False,
            row_locks=False,
            skip_locked=False,
            returning=bool(dialect.insert_returning and dialect.update_returning),
            on_conflict=version >= (3, 24, 0),
            declarative_partitioning=False,
            advisory_locks=False,
            transactional_ddl=True,
        )
    if name == COCKROACHDB:
        return Capabilities(
            dialect=COCKROACHDB,
            is_sqlite=False,
            is_postgres=False,
            is_cockroach=True,
            row_locks=True,
            skip_locked=True,
            returning=True,
            on_conflict=True,
            declarative_partitioning=False,
            advisory_locks=False,
            transactional_ddl=False,
        )
    if name == POSTGRESQL:
        server = getattr(dialect, "server_version_info", None)
        return Capabilities(
            dialect=POSTGRESQL,
            is_sqlite=False,
            is_postgres=True,
            is_cockroach=False,
            row_locks=True,
            skip_locked=True,
            returning=True,
            on_conflict=True,
            declarative_partitioning=server is None or tuple(server) >= (11,),
            advisory_locks=True,
            transactional_ddl=True,
        )
    raise StoreConfigError(f"unsupported SQL dialect {name!r}")
