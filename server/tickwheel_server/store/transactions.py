"""Transactions retried through what SQL engines make transient: SQLSTATE
40001 and its kin, SQLite busy, lost connections, and a server refusing
for the moment (read-only, a statement or lock timeout).

:func:`classify_error` (:mod:`.classify`, imported from here too) says
what a failed attempt means (retry, ambiguous, fatal);
:func:`run_in_transaction` and :func:`run_in_transaction_async` run a
transaction function again on a fresh transaction until it commits, with
:class:`Backoff` (full jitter) between attempts. Every store method writes
through them (:class:`~tickwheel_server.store.base.SqlStore`), so CockroachDB's
everyday "restart transaction" never reaches a caller.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

from psycopg import IsolationLevel
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import Pool

from tickwheel.shared.backoff import full_jitter
from tickwheel.shared.clock import Clock, SystemClock

from .begin_guard import BEGINS_ITSELF, guard
from .classify import LOCK_NOT_AVAILABLE, READ_ONLY, ErrorKind, classify_error, sqlstate_of, unavailable_reason
from .engine import refuse_ended_session
from .errors import (
    AmbiguousCommitError,
    StoreConfigError,
    StoreUnavailableError,
    TransactionConflictError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


# ----------------------------------------------------------------- retrying


@dataclass(frozen=True)
class Backoff:
    """The parameters of the wait between tries of a transaction.

    Before retry ``n`` (n >= 1) wait
    ``tickwheel.shared.backoff.full_jitter(n - 1, initial=base, cap=cap)``:
    uniform in ``[0, min(cap, base * 2**(n-1))]`` seconds. Full jitter spreads
    contenders that conflicted at the same instant.
    """

    base: float = 0.01
    cap: float = 2.0

    def __post_init__(self) -> None:
        if self.base <= 0 or self.cap < self.base:
            raise StoreConfigError("Backoff needs base > 0 and cap >= base")


DEFAULT_ATTEMPTS = 10
LOCK_TIMEOUT_ATTEMPTS = 2
"""Attempts a transaction makes at most when a lock is not granted in time
(55P03) and a table is held (:func:`table_held`: an operator's ``LOCK
TABLE``, a migration's DDL), or the engine cannot say (CockroachDB): a wait
past the session's ``lock_timeout`` is tried once more, and a second one is
an outage: the caller is told the store is unavailable after about twice
the lock timeout, rather than after ten of them or at its client's
deadline."""
ROW_LOCK_ATTEMPTS = 6
"""Attempts at most (and no more than the transaction's ``attempts``) when
every lock not granted in time was a row's or a transaction advisory
lock's, on PostgreSQL, with no table held: the server's own transactions
wait on each other's row locks in normal operation (a claim batch's cursor
locks under a job change, a result batch's execution locks under a
requeue, alert counters, key and quota rows), and on a loaded database one
of them holds its rows past one ``lock_timeout`` (docs/architecture.md,
"Who waits on whose row locks"; loadtest/RESULTS.md). About six lock
timeouts (6 s by default) bound a call held by a row that never frees (an
operator's open transaction), well inside a client's 30 s deadline."""
TABLE_HELD_SQL = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'relation'"
    " AND mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND pid <> pg_backend_pid())"
)
"""Whether another session holds or awaits a table lock that stops the
store's reads or writes (ACCESS EXCLUSIVE: ``LOCK TABLE``, most DDL;
EXCLUSIVE, SHARE ROW EXCLUSIVE and SHARE: explicit locks, ``CREATE
INDEX``, triggers) on a table of this database. One awaited counts too: the
server's statements queue behind it. Read only after a lock was not granted
twice, so its cost (PostgreSQL reads its whole lock table) is the outage
path's."""
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


_in_flight: weakref.WeakKeyDictionary[Pool, int] = weakref.WeakKeyDictionary()
"""Transaction attempts running per connection pool, in any thread: an
engine's ``execution_options`` copies (the row-locked transactions' READ
COMMITTED engine, :class:`.base.SqlStore`) share its pool, so their
attempts count as the engine's."""
_in_flight_lock = threading.Lock()


def attempts_running(engine: Engine) -> int:
    """How many transaction attempts are running on ``engine`` now, in any
    thread, including those whose awaiting task was cancelled."""
    with _in_flight_lock:
        return _in_flight.get(engine.pool, 0)


async def settle(engine: Engine, timeout: float, poll: float = 0.01) -> bool:
    """Wait, at most ``timeout`` seconds of real time, until no transaction
    attempt runs on ``engine`` (see :func:`attempts_running`): what a caller
    does before ``engine.dispose()``, so that no attempt a cancelled task left
    in its thread still holds a connection. True when none is left. Real
    time, not the injected clock: it waits for threads, which no fake clock
    drives."""
    deadline = time.monotonic() + timeout
    while attempts_running(engine):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(poll)
    return True


class _Attempt:
    """One try of a transaction, remembering whether COMMIT was reached and,
    when ``ask_held`` and a lock was not granted, whether a table was held
    then (:func:`table_held`, on the attempt's connection once its
    transaction was rolled back and its level given back)."""

    def __init__(
        self, engine: Engine, fn: Callable[[Connection], T], level: IsolationLevel | None = None,
        begins_itself: bool = False, ask_held: bool = False,
    ) -> None:
        self._engine = engine
        self._fn = fn
        self._level = level
        self._begins_itself = begins_itself and engine.dialect.driver == "psycopg"
        if self._begins_itself:
            guard(engine)
        self.committing = False
        self._ask_held = ask_held
        self.table_held = True

    def run(self) -> T:
        pool = self._engine.pool
        with _in_flight_lock:
            _in_flight[pool] = _in_flight.get(pool, 0) + 1
        try:
            return self._run()
        finally:
            with _in_flight_lock:
                _in_flight[pool] -= 1

    def _run(self) -> T:
        with self._engine.connect() as conn:
            try:
                return self._run_on(conn)
            except Exception as error:
                if self._ask_held and sqlstate_of(error) == LOCK_NOT_AVAILABLE and not conn.invalidated:
                    self.table_held = table_held(conn)
                raise

    def _run_on(self, conn: Connection) -> T:
        if self._level is None and not self._begins_itself:
            return self._transaction(conn)
        dbapi_connection = conn.connection.dbapi_connection
        kept_level = dbapi_connection.isolation_level
        kept_autocommit = dbapi_connection.autocommit if self._begins_itself else None
        try:
            if self._level is not None:
                dbapi_connection.isolation_level = self._level
            if self._begins_itself:  # the first statements' round trip sends the BEGIN (:mod:`.pipeline`)
                dbapi_connection.autocommit = True
                conn.info[BEGINS_ITSELF] = True  # until then no statement may run (_refuse_before_begin)
        except Exception as error:  # closed, or not idle: no transaction can run on it
            conn.invalidate()
            raise sa_exc.DisconnectionError("a pooled connection could not take the transaction's level") from error
        try:
            return self._transaction(conn)
        finally:
            if self._begins_itself and not conn.invalidated:
                conn.info.pop(BEGINS_ITSELF, None)
            _restore_level(conn, dbapi_connection, kept_level, kept_autocommit)

    def _transaction(self, conn: Connection) -> T:
        transaction = conn.begin()
        try:
            result = self._fn(conn)
            refuse_ended_session(conn)  # ended while idle (a frozen server, woken): retried, not in doubt
        except BaseException as error:
            try:
                transaction.rollback()
            except Exception:  # the connection is gone; the pool discards it
                log.debug("rollback after a failed attempt failed", exc_info=True)
            _drop_if_read_only(conn, error)
            raise
        self.committing = True
        try:
            transaction.commit()
        except BaseException as error:
            _drop_if_read_only(conn, error)
            raise
        return result


def _drop_if_read_only(conn: Connection, error: BaseException) -> None:
    """A session that refused a write as read-only (25006) stays so: one to a
    standby, or one begun under ``default_transaction_read_only``, whatever
    becomes of the server after a failover or the setting's reset. Discarded,
    so that the next attempt connects anew rather than retrying on it."""
    if sqlstate_of(error) == READ_ONLY and not conn.invalidated:
        conn.invalidate()


def _restore_level(
    conn: Connection, dbapi_connection: Any, level: IsolationLevel | None, autocommit: bool | None = None
) -> None:
    """Give the pooled connection its engine's level and (unless None) its
    ``autocommit`` setting back, once its transaction has ended; one that
    cannot take them (lost, or still in a failed transaction) is
    invalidated, so the pool never hands out a connection at another level
    than the engine's, nor one left in autocommit by a transaction that
    ``begins_itself``."""
    if conn.invalidated:
        return
    try:
        if autocommit is not None:
            dbapi_connection.autocommit = autocommit
        dbapi_connection.isolation_level = level
    except Exception:
        log.debug("a connection kept its transaction's isolation level; discarded", exc_info=True)
        conn.invalidate()


def isolation_level(engine: Engine, level: str | None) -> IsolationLevel | None:
    """``level`` (``"READ COMMITTED"``, …) as what :func:`run_in_transaction`
    takes for ``isolation``; None for None. Only psycopg's connections
    (PostgreSQL, CockroachDB) take a level per transaction:
    :class:`StoreConfigError` for another driver or an unknown level."""
    if level is None:
        return None
    if engine.dialect.driver != "psycopg":
        raise StoreConfigError(f"a transaction's own isolation level needs psycopg, not {engine.dialect.driver}")
    try:
        return IsolationLevel[level.upper().replace(" ", "_")]
    except KeyError:
        raise StoreConfigError(f"unknown isolation level {level!r}") from None


def _delay_or_raise(
    error: Exception,
    *,
    committing: bool,
    attempt: int,
    attempts: int,
    backoff: Backoff,
    idempotent: bool,
    rng: random.Random,
    handled: frozenset[str] = frozenset(),
    held: bool = True,
) -> tuple[ErrorKind, float]:
    """Decide what follows a failed attempt: a wait before the next, or a
    raise. ``held``: whether a table was held when the attempt's lock was not
    granted (:func:`table_held`; asked from :data:`LOCK_TIMEOUT_ATTEMPTS` on)."""
    kind = classify_error(error)
    sqlstate = sqlstate_of(error)
    if kind is ErrorKind.CONNECTION and committing:
        kind = ErrorKind.AMBIGUOUS
    if kind is ErrorKind.FATAL or sqlstate in handled:
        raise error
    if kind is ErrorKind.AMBIGUOUS and not idempotent:
        raise AmbiguousCommitError(
            "the connection failed while committing; the transaction may or may not have been applied",
            sqlstate=sqlstate,
        ) from error
    if attempt >= attempts or (
        sqlstate == LOCK_NOT_AVAILABLE and attempt >= (LOCK_TIMEOUT_ATTEMPTS if held else ROW_LOCK_ATTEMPTS)
    ):
        if kind is ErrorKind.CONFLICT:
            raise TransactionConflictError(
                f"transaction still conflicting after {attempts} attempts (SQLSTATE {sqlstate or 'n/a'})",
                attempts=attempts,
                sqlstate=sqlstate,
            ) from error
        raise StoreUnavailableError(
            f"store {unavailable_reason(sqlstate)} after {attempt} attempts: {error.__class__.__name__}",
            attempts=attempt,
            sqlstate=sqlstate,
        ) from error
    delay = full_jitter(attempt - 1, initial=backoff.base, cap=backoff.cap, rng=rng)
    log.debug("transaction attempt %d failed (%s, SQLSTATE %s); retrying in %.3fs", attempt, kind.value, sqlstate, delay)
    return kind, delay


def table_held(conn: Connection) -> bool:
    """Whether a table of the store is held against its statements
    (:data:`TABLE_HELD_SQL`), asked on ``conn`` (no transaction open; none
    left open). True when the engine is not PostgreSQL (CockroachDB has no
    ``pg_locks`` to tell) or the question fails: a lock not granted is then
    taken for an outage, as before the question was asked."""
    if conn.dialect.name != "postgresql":
        return True
    try:
        held = bool(conn.exec_driver_sql(TABLE_HELD_SQL).scalar())
        conn.rollback()
        return held
    except Exception:
        log.debug("could not read which tables are held; a lock not granted is an outage", exc_info=True)
        return True


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
    isolation: IsolationLevel | None = None,
    begins_itself: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
    handled: frozenset[str] = frozenset(),
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
    between them: SQLSTATE 40001 and 40P01, SQLite busy/locked, connection
    failures before COMMIT, and the server's refusals of the moment (25006
    read-only, 57014 statement cancelled, 55P03 lock not granted; at COMMIT
    too: the server answered, nothing was applied), ending in
    :class:`StoreUnavailableError` saying which; a lock not granted ends
    them after :data:`LOCK_TIMEOUT_ATTEMPTS` attempts while a table is held
    (or on CockroachDB), after :data:`ROW_LOCK_ATTEMPTS` (at most
    ``attempts``) when no table was (:func:`table_held`, asked on the
    failed attempt's connection from its second attempt on). A SQLSTATE in ``handled``
    (one the transaction provokes and its caller handles: 55P03 of its own
    ``lock_timeout``) is raised unchanged at once. A connection failure *during* COMMIT
    (or SQLSTATE 40003) is ambiguous: retried only when ``idempotent`` is
    True, otherwise :class:`AmbiguousCommitError` at once.

    Returns ``fn``'s result from the committed attempt. After the last try
    raises :class:`TransactionConflictError` or :class:`StoreUnavailableError`
    (the last error chained). Any other error, including every error of
    ``fn``'s own, is raised unchanged at once.

    ``isolation`` (from :func:`isolation_level`; psycopg only) runs each
    attempt at that level rather than the engine's: set on the checked-out
    DBAPI connection before the transaction begins and given back after it
    ends (:func:`_restore_level`). It is what an engine's
    ``execution_options(isolation_level=…)`` copy does, without SQLAlchemy's
    work around every checkout and checkin (the level set and reset through
    its connection characteristics and events; loadtest/RESULTS.md, "A
    CreateJob group's transaction in the store").

    ``begins_itself`` (psycopg only; ignored elsewhere): ``fn`` sends the
    BEGIN itself, in the round trip of its first statements
    (:func:`.pipeline.send`), rather than psycopg in one of its own; the
    connection is in autocommit until then, so every statement of ``fn``
    must come after that first send. A statement before it (through
    SQLAlchemy or :mod:`.driver`) is refused with
    :class:`StatementBeforeBeginError`, nothing sent, not retried: a
    ``before_cursor_execute`` listener on the engine (added by its first
    such transaction) reads the connection's ``autocommit`` and, only when
    set, whether this attempt holds it and no transaction is open.

    ``sleep`` and ``rng`` are injectable for tests; ``on_retry`` is called
    before each wait (metrics, tests).
    """
    _check_attempts(attempts)
    rng = rng or _default_rng
    for attempt in range(1, attempts + 1):
        runner = _Attempt(engine, fn, isolation, begins_itself, ask_held=attempt >= LOCK_TIMEOUT_ATTEMPTS)
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
                handled=handled,
                held=runner.table_held,
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
    isolation: IsolationLevel | None = None,
    begins_itself: bool = False,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
    executor: Executor | None = None,
    handled: frozenset[str] = frozenset(),
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
        runner = _Attempt(engine, fn, isolation, begins_itself, ask_held=attempt >= LOCK_TIMEOUT_ATTEMPTS)
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
                handled=handled,
                held=runner.table_held,
            )
            if on_retry is not None:
                on_retry(RetryEvent(attempt, kind, sqlstate_of(error), delay, error))
        await clock.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
