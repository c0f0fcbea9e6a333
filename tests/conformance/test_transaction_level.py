"""A transaction's own isolation level (``run_in_transaction(isolation=…)``,
what the row-locked transactions run at on PostgreSQL) on the engine's pool:
each attempt runs at that level, and the pooled connection goes back to the
engine's level whatever became of the attempt (committed, failed, retried,
lost); one that cannot take the engine's level back is discarded, never
handed out again (store/transactions.py)."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from tickwheel_server.store import create_store_engine
from tickwheel_server.store import driver, pipeline
from tickwheel_server.store.base import SqlStore
from tickwheel_server.store.begin_guard import BEGINS_ITSELF
from tickwheel_server.store.errors import StatementBeforeBeginError, StoreConfigError
from tickwheel_server.store.transactions import (
    ErrorKind, RetryEvent, _restore_level, isolation_level, run_in_transaction,
)  # fmt: skip
from tickwheel.shared.clock import FakeClock

postgres = pytest.mark.postgres

READ_COMMITTED = "read committed"
SERIALIZABLE = "serializable"


@pytest.fixture
def one(postgres_url: str) -> Engine:
    """An engine of one pooled connection: every transaction reuses it."""
    engine = create_store_engine(postgres_url, pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


def level(conn: Connection) -> str:
    return driver.rows(conn, "SHOW transaction_isolation", {})[0][0]


def backend(conn: Connection) -> int:
    return driver.rows(conn, "SELECT pg_backend_pid()", {})[0][0]


@postgres
def test_an_attempt_runs_at_its_level_and_the_connection_goes_back_to_the_engines(one: Engine) -> None:
    rc = isolation_level(one, "READ COMMITTED")
    first = run_in_transaction(one, lambda c: (level(c), backend(c)), isolation=rc)
    after = run_in_transaction(one, lambda c: (level(c), backend(c)))
    assert first[0] == READ_COMMITTED and after[0] == SERIALIZABLE
    assert first[1] == after[1], "the same pooled connection, back at the engine's level"


@postgres
def test_a_failed_attempt_gives_the_level_back_too(one: Engine) -> None:
    rc = isolation_level(one, "READ COMMITTED")

    def fails(conn: Connection) -> None:
        assert level(conn) == READ_COMMITTED
        raise RuntimeError("the caller's own error")

    def fails_in_sql(conn: Connection) -> None:
        driver.rows(conn, "SELECT 1 / 0", {})

    with pytest.raises(RuntimeError):
        run_in_transaction(one, fails, isolation=rc)
    assert run_in_transaction(one, level) == SERIALIZABLE
    with pytest.raises(sa_exc.DataError):
        run_in_transaction(one, fails_in_sql, isolation=rc)
    assert run_in_transaction(one, level) == SERIALIZABLE


FAIL_ONCE = {
    ErrorKind.CONFLICT: "DO $$ BEGIN RAISE EXCEPTION 'restart' USING ERRCODE = '40001'; END $$",
    ErrorKind.CONNECTION: "SELECT pg_terminate_backend(pg_backend_pid())",
}


@postgres
@pytest.mark.parametrize("kind", list(FAIL_ONCE))
def test_a_retried_attempt_runs_again_at_its_level(one: Engine, kind: ErrorKind) -> None:
    """A 40001 retried on the same connection, a lost one on a new one:
    either way the next attempt is at its level, and the pool's connection
    at the engine's after."""
    rc = isolation_level(one, "READ COMMITTED")
    seen: list[tuple[str, int]] = []
    events: list[RetryEvent] = []

    def fails_once(conn: Connection) -> str:
        seen.append((level(conn), backend(conn)))
        if len(seen) == 1:
            driver.rows(conn, FAIL_ONCE[kind], {})
        return seen[-1][0]

    assert run_in_transaction(one, fails_once, isolation=rc, sleep=lambda _: None, on_retry=events.append) == (
        READ_COMMITTED
    )
    assert [s[0] for s in seen] == [READ_COMMITTED, READ_COMMITTED] and [e.kind for e in events] == [kind]
    assert (seen[0][1] == seen[1][1]) is (kind is ErrorKind.CONFLICT), "a lost connection is replaced"
    assert run_in_transaction(one, lambda c: (level(c), backend(c))) == (SERIALIZABLE, seen[1][1])


@postgres
def test_a_connection_that_cannot_take_the_level_back_is_discarded(one: Engine) -> None:
    """Still in a failed transaction, psycopg refuses to change the level:
    the connection is invalidated, and the pool hands out a new one."""
    conn = one.connect()
    conn.begin()
    dbapi_connection = conn.connection.dbapi_connection
    before = backend(conn)
    with pytest.raises(sa_exc.DataError):
        driver.rows(conn, "SELECT 1 / 0", {})
    _restore_level(conn, dbapi_connection, isolation_level(one, "SERIALIZABLE"))
    assert conn.invalidated and dbapi_connection.closed
    conn.close()
    assert run_in_transaction(one, lambda c: (level(c), backend(c)))[1] != before


@postgres
def test_a_row_locked_store_transaction_runs_at_read_committed(one: Engine) -> None:
    store = SqlStore(one, FakeClock())

    async def both() -> tuple[str, str]:
        return await store._tx(level, row_locked=True), await store._tx(level)

    assert asyncio.run(both()) == (READ_COMMITTED, SERIALIZABLE)


@postgres
@pytest.mark.parametrize("name", ["CHAOS", "READ UNCOMMITTED; DROP TABLE jobs", ""])
def test_an_unknown_level_is_refused(one: Engine, name: str) -> None:
    with pytest.raises(StoreConfigError):
        isolation_level(one, name)


def test_sqlite_takes_no_level_of_its_own() -> None:
    engine = create_store_engine("sqlite://")
    try:
        with pytest.raises(StoreConfigError):
            isolation_level(engine, "SERIALIZABLE")
        assert isolation_level(engine, None) is None
        assert SqlStore(engine, FakeClock()).row_locked_level is None
    finally:
        engine.dispose()


@postgres
def test_a_connection_that_cannot_take_the_level_is_replaced_and_the_attempt_retried(one: Engine) -> None:
    """A pooled connection closed between its checkout and BEGIN: the level
    cannot be set, the connection is discarded, and the attempt runs again
    on a new one (a connection error, retried), never on the broken one."""
    closed: list[int] = []

    @event.listens_for(one, "checkout")
    def close_first(dbapi_connection, _record, _proxy) -> None:
        if not closed:
            closed.append(dbapi_connection.info.backend_pid)
            dbapi_connection.close()

    events: list[RetryEvent] = []
    result = run_in_transaction(
        one, lambda c: (level(c), backend(c)), isolation=isolation_level(one, "READ COMMITTED"),
        sleep=lambda _: None, on_retry=events.append,
    )  # fmt: skip
    assert result[0] == READ_COMMITTED and result[1] != closed[0]
    assert [e.kind for e in events] == [ErrorKind.CONNECTION]


# ------------------------------------------------ a transaction that begins itself (store/pipeline.py)


def _scratch(conn: Connection) -> None:
    conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS begun (n INTEGER)")


@postgres
@pytest.mark.parametrize("isolation", [None, "READ COMMITTED"])
def test_a_transaction_that_begins_itself_sends_its_begin_with_its_first_statements(one: Engine, isolation) -> None:
    """Its level is the attempt's, its writes are one transaction (a
    failure after them leaves none), and the pooled connection goes back
    out of autocommit, the same connection, at the engine's level."""
    run_in_transaction(one, _scratch)
    level_ = isolation_level(one, isolation)

    def fn(conn: Connection):
        dbapi_connection = conn.connection.dbapi_connection
        assert dbapi_connection.autocommit and dbapi_connection.info.transaction_status.name == "IDLE"
        [[(seen,)], inserted] = pipeline.send(
            conn, [("SHOW transaction_isolation", {}), ("INSERT INTO begun VALUES (1)", {})]
        )
        assert dbapi_connection.info.transaction_status.name == "INTRANS", "the BEGIN went first"
        conn.exec_driver_sql("INSERT INTO begun VALUES (2)")  # after it, through SQLAlchemy: the same transaction
        return seen, inserted, backend(conn)

    def failing(conn: Connection):
        fn(conn)
        raise ValueError("after the writes")

    seen, inserted, pid = run_in_transaction(one, fn, isolation=level_, begins_itself=True)
    assert seen == (isolation or SERIALIZABLE).lower() and inserted == 1
    with pytest.raises(ValueError):
        run_in_transaction(one, failing, isolation=level_, begins_itself=True)
    counted = run_in_transaction(one, lambda c: (driver.rows(c, "SELECT count(*) FROM begun", {})[0][0], backend(c),
                                                 c.connection.dbapi_connection.autocommit, level(c)))
    assert counted == (2, pid, False, SERIALIZABLE), "only the committed attempt's rows; the connection as it came"


@postgres
def test_a_commit_sent_with_the_writes_commits_them_once(one: Engine) -> None:
    run_in_transaction(one, _scratch)

    def fn(conn: Connection):
        pipeline.send(conn, [("INSERT INTO begun VALUES (7)", {})], commit=True)
        return conn.connection.dbapi_connection.info.transaction_status.name

    assert run_in_transaction(one, fn, begins_itself=True) == "IDLE", "committed in the trip; the runner's is a no-op"
    assert run_in_transaction(one, lambda c: driver.rows(c, "SELECT count(*) FROM begun WHERE n = 7", {})[0][0]) == 1


def _rows_of_begun(one: Engine) -> int:
    return run_in_transaction(one, lambda c: driver.rows(c, "SELECT count(*) FROM begun", {})[0][0])


@postgres
@pytest.mark.parametrize("how", ["sqlalchemy", "driver", "core"])
def test_a_statement_before_the_begin_is_refused_not_committed_on_its_own(one: Engine, how: str) -> None:
    """The guard: in a transaction that begins itself, a statement sent
    before the first pipeline.send would run in autocommit and commit on its
    own. It is refused before it reaches the server, the transaction is not
    retried, and the connection goes back as it came."""
    run_in_transaction(one, _scratch)
    calls = []

    def early(conn: Connection):
        calls.append(1)
        if how == "sqlalchemy":
            conn.exec_driver_sql("INSERT INTO begun VALUES (1)")
        elif how == "driver":
            driver.rowcount(conn, "INSERT INTO begun VALUES (1)", {})
        else:
            conn.execute(sa.text("INSERT INTO begun VALUES (1)"))
        pipeline.send(conn, [("INSERT INTO begun VALUES (2)", {})])

    with pytest.raises(StatementBeforeBeginError):
        run_in_transaction(one, early, begins_itself=True)
    assert calls == [1], "fatal: not retried"
    assert _rows_of_begun(one) == 0, "nothing written, not even the early statement"
    assert run_in_transaction(one, lambda c: (c.connection.dbapi_connection.autocommit, level(c))) == (
        False, SERIALIZABLE
    )


@postgres
def test_a_statement_after_the_commit_sent_with_the_writes_is_refused(one: Engine) -> None:
    run_in_transaction(one, _scratch)

    def late(conn: Connection):
        pipeline.send(conn, [("INSERT INTO begun VALUES (1)", {})], commit=True)
        conn.exec_driver_sql("INSERT INTO begun VALUES (2)")  # the transaction is over: this would autocommit

    with pytest.raises(StatementBeforeBeginError):
        run_in_transaction(one, late, begins_itself=True)
    assert _rows_of_begun(one) == 1, "the committed trip's row only"


@postgres
def test_the_guard_leaves_other_transactions_and_autocommit_connections_alone(one: Engine) -> None:
    run_in_transaction(one, _scratch)

    def fine(conn: Connection):
        pipeline.send(conn, [("INSERT INTO begun VALUES (1)", {})])
        conn.exec_driver_sql("INSERT INTO begun VALUES (2)")
        driver.rowcount(conn, "INSERT INTO begun VALUES (3)", {})

    run_in_transaction(one, fine, begins_itself=True)  # the engine now has the guard
    run_in_transaction(one, lambda c: c.exec_driver_sql("INSERT INTO begun VALUES (4)"))
    with one.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("INSERT INTO begun VALUES (5)")  # autocommit asked for, not a transaction's
        assert BEGINS_ITSELF not in conn.info
    assert _rows_of_begun(one) == 5


@postgres
def test_a_connection_that_cannot_leave_autocommit_is_discarded(one: Engine) -> None:
    conn = one.connect()
    dbapi_connection = conn.connection.dbapi_connection
    dbapi_connection.autocommit = True
    dbapi_connection.execute("BEGIN")
    with pytest.raises(Exception):
        dbapi_connection.execute("SELECT 1 / 0")
    _restore_level(conn, dbapi_connection, None, False)
    assert conn.invalidated and dbapi_connection.closed
    conn.close()
