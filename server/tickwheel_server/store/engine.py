"""The store's engine layer: URLs, capabilities and retried transactions.

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
  :func:`run_in_transaction` absorbs.

Engine-specific SQL goes behind :class:`Capabilities`, never behind a check
of the URL string.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import sqlite3
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url
from sqlalchemy.pool import QueuePool

from tickwheel.shared.clock import Clock, SystemClock

from .errors import (
    AmbiguousCommitError,
    StoreConfigError,
    StoreUnavailableError,
    TransactionConflictError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

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
    except (sa_exc.ArgumentError, ValueError) as exc:
        raise StoreConfigError(f"store URL is not a URL: {exc}") from None
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
    echo: bool = False,
) -> Engine:
    """Build the SQLAlchemy engine for a store URL (see :func:`parse_store_url`).

    ``isolation`` defaults to SERIALIZABLE everywhere (SQLite transactions are
    serialised by ``BEGIN IMMEDIATE`` and accept only that). PostgreSQL also
    accepts REPEATABLE READ and READ COMMITTED, CockroachDB READ COMMITTED;
    anything else raises :class:`StoreConfigError` here, before any connection.

    ``pool_size``/``max_overflow``/``pool_timeout`` size the connection pool
    (in-memory SQLite has a pool of one, so one transaction at a time). ``connect_timeout`` (seconds) bounds each
    PostgreSQL/CockroachDB connection attempt; pooled connections are pinged
    before use, so a restarted server costs a reconnect, not an error.
    ``sqlite_busy_timeout`` (seconds) is how long a SQLite transaction waits
    for another writer before failing with a retryable "database is locked".

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
    return sa.create_engine(
        parsed,
        isolation_level=level,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout,
        pool_pre_ping=True,
        connect_args=connect_args,
        echo=echo,
    )


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


# ------------------------------------------------------- error classification


class ErrorKind(enum.Enum):
    """What a failed transaction attempt means for retrying it."""

    CONFLICT = "conflict"
    """Serialization failure (40001), deadlock (40P01), SQLite busy/locked:
    nothing was applied; retry."""
    CONNECTION = "connection"
    """The connection could not be made or was lost before COMMIT: nothing
    was applied; retry."""
    AMBIGUOUS = "ambiguous"
    """The commit may or may not have been applied (40003, or the connection
    broke during COMMIT)."""
    FATAL = "fatal"
    """Anything else: retrying would fail the same way."""


CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})
"""Serialization failure (CockroachDB's "restart transaction") and deadlock."""
AMBIGUOUS_SQLSTATES = frozenset({"40003"})
"""statement_completion_unknown: CockroachDB's "result is ambiguous"."""
CONNECTION_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
"""admin/crash shutdown, cannot connect now, too many connections (and all of class 08)."""
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def sqlstate_of(error: BaseException) -> str | None:
    """The SQLSTATE behind ``error`` (a SQLAlchemy DBAPIError or a driver error), if any.

    psycopg 3 exposes it as ``sqlstate``, psycopg2 as ``pgcode``; this is the
    same detection sqlalchemy-cockroachdb's ``run_transaction`` relies on.
    """
    candidates = [error]
    orig = getattr(error, "orig", None)
    if orig is not None:
        candidates.insert(0, orig)
    for candidate in candidates:
        for attribute in ("sqlstate", "pgcode"):
            value = getattr(candidate, attribute, None)
            if isinstance(value, str) and value:
                return value
    return None


def classify_error(error: BaseException) -> ErrorKind:
    """Classify an error raised while running or committing a transaction.

    Pure: looks only at the error. (Whether a CONNECTION error becomes
    AMBIGUOUS depends on when it happened; :func:`run_in_transaction` decides
    that.)
    """
    sqlstate = sqlstate_of(error)
    if sqlstate is not None:
        if sqlstate in CONFLICT_SQLSTATES:
            return ErrorKind.CONFLICT
        if sqlstate in AMBIGUOUS_SQLSTATES:
            return ErrorKind.AMBIGUOUS
        if sqlstate.startswith("08") or sqlstate in CONNECTION_SQLSTATES:
            return ErrorKind.CONNECTION
        return ErrorKind.FATAL
    if isinstance(error, (sa_exc.DisconnectionError, sa_exc.TimeoutError)):
        return ErrorKind.CONNECTION
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return ErrorKind.CONNECTION
        orig = error.orig
        if isinstance(orig, sqlite3.Error):
            code = getattr(orig, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
                return ErrorKind.CONFLICT
            return ErrorKind.FATAL
        # psycopg reports "connection refused", "server closed the connection
        # unexpectedly" and the like as OperationalError without a SQLSTATE.
        if isinstance(error, sa_exc.OperationalError):
            return ErrorKind.CONNECTION
    return ErrorKind.FATAL


# ----------------------------------------------------------------- retrying


@dataclass(frozen=True)
class Backoff:
    """Bounded exponential backoff with full jitter.

    Before retry ``n`` (n >= 1) wait uniformly in ``[0, min(cap, base * 2**(n-1))]``
    seconds. Full jitter spreads contenders that conflicted at the same instant.
    """

    base: float = 0.01
    cap: float = 2.0

    def __post_init__(self) -> None:
        if self.base <= 0 or self.cap < self.base:
            raise StoreConfigError("Backoff needs base > 0 and cap >= base")

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry ``retry`` (1-based)."""
        if retry < 1:
            raise ValueError("retry counts from 1")
        # min() before the power would overflow for large retry counts.
        return min(self.cap, self.base * 2.0 ** min(retry - 1, 64))

    def delay(self, retry: int, rng: random.Random) -> float:
        """A wait before retry ``retry`` (1-based), drawn from ``rng``."""
        return rng.uniform(0.0, self.ceiling(retry))


DEFAULT_ATTEMPTS = 10
DEFAULT_BACKOFF = Backoff()
_default_rng = random.Random()


@dataclass(frozen=True)
class RetryEvent:
    """Passed to ``on_retry`` before each wait: attempt ``attempt`` failed."""

    attempt: int
    kind: ErrorKind
    sqlstate: str | None
    delay: float
    error: BaseException


class _Attempt:
    """One try of a transaction, remembering whether COMMIT was reached."""

    def __init__(self, engine: Engine, fn: Callable[[Connection], T]) -> None:
        self._engine = engine
        self._fn = fn
        self.committing = False

    def run(self) -> T:
        with self._engine.connect() as conn:
            transaction = conn.begin()
            try:
                result = self._fn(conn)
            except BaseException:
                try:
                    transaction.rollback()
                except Exception:  # the connection is gone; the pool discards it
                    log.debug("rollback after a failed attempt failed", exc_info=True)
                raise
            self.committing = True
            transaction.commit()
            return result


def _delay_or_raise(
    error: Exception,
    *,
    committing: bool,
    attempt: int,
    attempts: int,
    backoff: Backoff,
    idempotent: bool,
    rng: random.Random,
) -> tuple[ErrorKind, float]:
    """Decide what follows a failed attempt: a wait before the next, or a raise."""
    kind = classify_error(error)
    sqlstate = sqlstate_of(error)
    if kind is ErrorKind.CONNECTION and committing:
        kind = ErrorKind.AMBIGUOUS
    if kind is ErrorKind.FATAL:
        raise error
    if kind is ErrorKind.AMBIGUOUS and not idempotent:
        raise AmbiguousCommitError(
            "the connection failed while committing; the transaction may or may not have been applied",
            sqlstate=sqlstate,
        ) from error
    if attempt >= attempts:
        if kind is ErrorKind.CONFLICT:
            raise TransactionConflictError(
                f"transaction still conflicting after {attempts} attempts (SQLSTATE {sqlstate or 'n/a'})",
                attempts=attempts,
                sqlstate=sqlstate,
            ) from error
        raise StoreUnavailableError(
            f"store unreachable after {attempts} attempts: {error.__class__.__name__}",
            attempts=attempts,
            sqlstate=sqlstate,
        ) from error
    delay = backoff.delay(attempt, rng)
    log.debug("transaction attempt %d failed (%s, SQLSTATE %s); retrying in %.3fs", attempt, kind.value, sqlstate, delay)
    return kind, delay


def _check_attempts(attempts: int) -> None:
    if attempts < 1:
        raise StoreConfigError("attempts must be >= 1")


def run_in_transaction(
    engine: Engine,
    fn: Callable[[Connection], T],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    backoff: Backoff = DEFAULT_BACKOFF,
    idempotent: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
) -> T:
    """Run ``fn(conn)`` in one transaction and commit it, retrying transient failures.

    Contract for ``fn``: it may run several times, each time on a fresh
    transaction (at the engine's isolation level, SERIALIZABLE by default),
    and only the last run's writes are kept. So it must have no effects
    outside the database, must not commit or roll back itself, and must
    compute from what it reads (pass in ``now`` from the caller's clock,
    decided once, rather than reading the clock per attempt if the result
    must be stable).

    Retried, up to ``attempts`` tries in all with ``backoff`` (full jitter)
    between them: SQLSTATE 40001 and 40P01, SQLite busy/locked, and
    connection failures before COMMIT. A connection failure *during* COMMIT
    (or SQLSTATE 40003) is ambiguous: retried only when ``idempotent`` is
    True, otherwise :class:`AmbiguousCommitError` at once.

    Returns ``fn``'s result from the committed attempt. After the last try
    raises :class:`TransactionConflictError` or :class:`StoreUnavailableError`
    (the last error chained). Any other error, including every error of
    ``fn``'s own, is raised unchanged at once.

    ``sleep`` and ``rng`` are injectable for tests; ``on_retry`` is called
    before each wait (metrics, tests).
    """
    _check_attempts(attempts)
    rng = rng or _default_rng
    for attempt in range(1, attempts + 1):
        runner = _Attempt(engine, fn)
        try:
            return runner.run()
        except Exception as error:
            kind, delay = _delay_or_raise(
                error,
                committing=runner.committing,
                attempt=attempt,
                attempts=attempts,
                backoff=backoff,
                idempotent=idempotent,
                rng=rng,
            )
            if on_retry is not None:
                on_retry(RetryEvent(attempt, kind, sqlstate_of(error), delay, error))
        sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


async def run_in_transaction_async(
    engine: Engine,
    fn: Callable[[Connection], T],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    backoff: Backoff = DEFAULT_BACKOFF,
    idempotent: bool = False,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
    executor: Executor | None = None,
) -> T:
    """:func:`run_in_transaction` for asyncio code; same contract for ``fn``.

    Each attempt runs in ``executor`` (the loop's default thread pool when
    None); the waits between attempts are ``clock.sleep`` on the event loop,
    so no thread is held while backing off and a FakeClock drives them in
    tests.

    Cancelling the awaiting task does not stop an attempt already running in
    its thread: that attempt may still commit. Writes made as a partition
    owner are fenced by epoch for exactly this reason.
    """
    _check_attempts(attempts)
    clock = clock or SystemClock()
    rng = rng or _default_rng
    loop = asyncio.get_running_loop()
    for attempt in range(1, attempts + 1):
        runner = _Attempt(engine, fn)
        try:
            return await loop.run_in_executor(executor, runner.run)
        except Exception as error:
            kind, delay = _delay_or_raise(
                error,
                committing=runner.committing,
                attempt=attempt,
                attempts=attempts,
                backoff=backoff,
                idempotent=idempotent,
                rng=rng,
            )
            if on_retry is not None:
                on_retry(RetryEvent(attempt, kind, sqlstate_of(error), delay, error))
        await clock.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
