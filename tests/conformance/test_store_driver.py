"""store/driver.py on real PostgreSQL: the create's statements on psycopg's
cursor run in the caller's transaction, and their errors surface as
SQLAlchemy's did (so a 40001 or a lost connection is retried and a unique
violation is what :func:`.requests.record_jobs` catches), not as psycopg's own."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import IsolationLevel
from psycopg.pq import TransactionStatus
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine, make_url

from tickwheel_server.store import create_store_engine
from tickwheel_server.store import driver
from tickwheel_server.store.errors import AmbiguousCommitError
from tickwheel_server.store.transactions import (
    ErrorKind, RetryEvent, classify_error, isolation_level, run_in_transaction,
)  # fmt: skip

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(postgres_url: str) -> Engine:
    engine = create_store_engine(postgres_url)
    run_in_transaction(engine, lambda c: c.execute(text("CREATE TABLE IF NOT EXISTS d (k TEXT PRIMARY KEY, n INT)")))
    yield engine
    engine.dispose()


def stored(engine: Engine) -> list[tuple]:
    return run_in_transaction(engine, lambda c: driver.rows(c, "SELECT k, n FROM d ORDER BY k", {}))


def retried(engine: Engine, fn) -> tuple[object, list[RetryEvent]]:
    events: list[RetryEvent] = []
    result = run_in_transaction(engine, fn, sleep=lambda _: None, on_retry=events.append)
    return result, events


def test_rows_and_rowcount_in_the_callers_transaction(pg: Engine) -> None:
    insert = "INSERT INTO d (k, n) SELECT k, 1 FROM unnest(CAST(%(ks)s AS TEXT[])) AS k"
    assert run_in_transaction(pg, lambda c: driver.rowcount(c, insert, dict(ks="{a,b}"))) == 2

    def then_fail(conn: Connection) -> None:
        driver.rowcount(conn, insert, dict(ks="{c}"))
        assert driver.rows(conn, "SELECT count(*) FROM d", {}) == [(3,)]  # seen within the transaction
        raise RuntimeError("the caller's own error")

    with pytest.raises(RuntimeError):
        run_in_transaction(pg, then_fail)
    assert stored(pg) == [("a", 1), ("b", 1)], "the rolled-back transaction's insert is gone"


def test_parameters_are_bound_not_spliced(pg: Engine) -> None:
    hostile = "x'); DELETE FROM d; --"
    run_in_transaction(pg, lambda c: driver.rowcount(c, "INSERT INTO d (k, n) VALUES (%(k)s, 2)", dict(k=hostile)))
    assert stored(pg) == [(hostile, 2)]


def test_a_serialization_failure_is_wrapped_and_retried(pg: Engine) -> None:
    tries: list[int] = []

    def fn(conn: Connection) -> list[tuple]:
        tries.append(1)
        if len(tries) == 1:
            driver.rowcount(conn, "DO $$ BEGIN RAISE EXCEPTION 'restart' USING ERRCODE = '40001'; END $$", {})
        return driver.rows(conn, "SELECT 7", {})

    result, events = retried(pg, fn)
    assert result == [(7,)] and len(tries) == 2
    assert [(e.kind, e.sqlstate) for e in events] == [(ErrorKind.CONFLICT, "40001")]
    assert isinstance(events[0].error, sa_exc.DBAPIError), "SQLAlchemy's error, as exec_driver_sql raised"


def test_a_unique_violation_is_sqlalchemys_integrity_error_and_not_retried(pg: Engine) -> None:
    insert = "INSERT INTO d (k, n) VALUES (%(k)s, 1)"
    run_in_transaction(pg, lambda c: driver.rowcount(c, insert, dict(k="a")))
    tries: list[int] = []

    def again(conn: Connection) -> None:
        tries.append(1)
        driver.rowcount(conn, insert, dict(k="a"))

    with pytest.raises(sa_exc.IntegrityError) as caught:
        run_in_transaction(pg, again, sleep=lambda _: None)
    assert caught.value.orig.sqlstate == "23505" and classify_error(caught.value) is ErrorKind.FATAL
    assert len(tries) == 1


def test_a_unique_violation_in_a_savepoint_leaves_the_transaction_usable(pg: Engine) -> None:
    insert = "INSERT INTO d (k, n) VALUES (%(k)s, 1)"
    run_in_transaction(pg, lambda c: driver.rowcount(c, insert, dict(k="a")))

    def fn(conn: Connection) -> None:
        savepoint = conn.begin_nested()
        try:
            driver.rowcount(conn, "INSERT INTO d (k, n) VALUES ('b', 1), ('a', 1)", {})
        except sa_exc.IntegrityError:
            savepoint.rollback()
        driver.rowcount(conn, insert, dict(k="c"))

    run_in_transaction(pg, fn)
    assert stored(pg) == [("a", 1), ("c", 1)]


def test_a_lost_connection_is_invalidated_and_retried_on_another(pg: Engine) -> None:
    pids: list[int] = []

    def fn(conn: Connection) -> int:
        ((pid,),) = driver.rows(conn, "SELECT pg_backend_pid()", {})
        pids.append(pid)
        if len(pids) == 1:
            driver.rows(conn, "SELECT pg_terminate_backend(pg_backend_pid())", {})
        return pid

    pid, events = retried(pg, fn)
    assert [e.kind for e in events] == [ErrorKind.CONNECTION]
    assert isinstance(events[0].error, sa_exc.OperationalError)
    assert pid == pids[1] != pids[0], "the retry ran on a new connection"


def test_a_pooled_connection_keeps_one_cursor_and_replaces_it_after_an_error(pg: Engine) -> None:
    """The statements of every transaction on a pooled connection share one
    cursor; one that raised is closed and the next statement gets a new one,
    in the same transaction (after a savepoint) or the next."""
    cursors: list[object] = []

    def used(conn: Connection) -> list[tuple]:
        result = driver.rows(conn, "SELECT pg_backend_pid()", {})
        cursors.append(conn.connection.info[driver._CURSOR])
        return result

    first, second = run_in_transaction(pg, used), run_in_transaction(pg, used)
    assert first == second and cursors[0] is cursors[1], "one connection, one cursor"

    def fails_then_goes_on(conn: Connection) -> list[tuple]:
        savepoint = conn.begin_nested()
        try:
            driver.rows(conn, "SELECT 1 / 0", {})
        except sa_exc.DataError:
            savepoint.rollback()
        assert driver._CURSOR not in conn.connection.info, "the failed cursor is forgotten"
        return used(conn)

    assert run_in_transaction(pg, fails_then_goes_on) == first
    assert cursors[0].closed and cursors[-1] is not cursors[0] and not cursors[-1].closed


def test_a_lost_connection_takes_its_cursor_with_it(pg: Engine) -> None:
    cursors: list[object] = []

    def lost_once(conn: Connection) -> int:
        ((pid,),) = driver.rows(conn, "SELECT pg_backend_pid()", {})
        cursors.append(conn.connection.info[driver._CURSOR])
        if len(cursors) == 1:
            driver.rows(conn, "SELECT pg_terminate_backend(pg_backend_pid())", {})
        return pid

    retried(pg, lost_once)
    assert len(cursors) == 2 and cursors[0] is not cursors[1]
    assert cursors[1].connection is not cursors[0].connection, "the new connection's own cursor"


# ------------------------------------------------- how an attempt ends
#
# An attempt's statements go through the driver (a CreateJob group's),
# through SQLAlchemy, or both, in one transaction. Whatever became of it
# (committed, rolled back, failed at COMMIT, lost), the pooled connection
# goes back idle, at the engine's level, with nothing of it left.


@pytest.fixture
def one(postgres_url: str) -> Engine:
    """An engine of one pooled connection: every transaction reuses it."""
    engine = create_store_engine(postgres_url, pool_size=1, max_overflow=0)
    run_in_transaction(engine, lambda c: c.execute(text("CREATE TABLE IF NOT EXISTS d (k TEXT PRIMARY KEY, n INT)")))
    yield engine
    engine.dispose()


def backend(conn: Connection) -> int:
    return driver.rows(conn, "SELECT pg_backend_pid()", {})[0][0]


def idle_at_the_engines_level(engine: Engine) -> bool:
    """Whether the pooled connection is back idle, at SERIALIZABLE, no
    transaction left open on it."""
    pooled = engine.raw_connection()
    try:
        dbapi_connection = pooled.dbapi_connection
        return (dbapi_connection.info.transaction_status == TransactionStatus.IDLE
                and dbapi_connection.isolation_level == IsolationLevel.SERIALIZABLE)  # fmt: skip
    finally:
        pooled.close()


INSERT = "INSERT INTO d (k, n) VALUES (%(k)s, %(n)s)"


def test_driver_sql_and_sqlalchemys_in_one_transaction_commit_and_roll_back_together(one: Engine) -> None:
    def both(conn: Connection, fail: bool) -> None:
        driver.rowcount(conn, INSERT, dict(k="a" if not fail else "x", n=1))
        conn.execute(text("INSERT INTO d (k, n) VALUES (:k, 2)"), dict(k="b" if not fail else "y"))
        driver.rowcount(conn, INSERT, dict(k="c" if not fail else "z", n=3))
        if fail:
            raise RuntimeError("the caller's own error, after both kinds of statement")

    run_in_transaction(one, lambda c: both(c, False))
    with pytest.raises(RuntimeError):
        run_in_transaction(one, lambda c: both(c, True))
    assert stored(one) == [("a", 1), ("b", 2), ("c", 3)] and idle_at_the_engines_level(one)


def test_an_error_at_commit_is_sqlalchemys_and_leaves_nothing(one: Engine) -> None:
    """A deferred unique constraint fails the COMMIT itself: raised as
    SQLAlchemy's IntegrityError (not psycopg's), not retried, nothing of the
    transaction kept, and the same connection serves the next one."""
    run_in_transaction(one, lambda c: c.execute(text(
        "CREATE TABLE u (k TEXT, CONSTRAINT u_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)")))  # fmt: skip
    tries: list[int] = []

    def twice(conn: Connection) -> int:
        tries.append(1)
        driver.rowcount(conn, INSERT, dict(k="kept?", n=1))
        driver.rowcount(conn, "INSERT INTO u (k) VALUES ('same'), ('same')", {})
        return backend(conn)

    with pytest.raises(sa_exc.IntegrityError) as caught:
        run_in_transaction(one, twice, sleep=lambda _: None, isolation=isolation_level(one, "READ COMMITTED"))
    assert caught.value.orig.sqlstate == "23505" and len(tries) == 1
    assert stored(one) == [] and idle_at_the_engines_level(one)
    assert run_in_transaction(one, lambda c: driver.rows(c, "SELECT count(*) FROM u", {})) == [(0,)]


def test_a_serialization_failure_at_commit_is_retried(one: Engine) -> None:
    """A 40001 raised by the COMMIT (a deferred trigger, once) is a conflict,
    not an ambiguous commit: nothing was applied, the attempt runs again."""
    run_in_transaction(one, lambda c: c.execute(text(
        "CREATE SEQUENCE once; "
        "CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF nextval('once') = 1 THEN RAISE EXCEPTION 'restart' USING ERRCODE = '40001'; END IF; RETURN NULL; END $$; "
        "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON d DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION fail_once()")))  # fmt: skip
    result, events = retried(one, lambda c: driver.rowcount(c, INSERT, dict(k="a", n=1)))
    assert result == 1 and [(e.kind, e.sqlstate) for e in events] == [(ErrorKind.CONFLICT, "40001")]
    assert isinstance(events[0].error, sa_exc.DBAPIError)
    assert stored(one) == [("a", 1)] and idle_at_the_engines_level(one)


def test_a_connection_lost_at_commit_is_ambiguous_and_replaced(one: Engine) -> None:
    """The server gone while it runs the COMMIT (here a deferred trigger
    ends its own session, twice): the commit's outcome is unknown
    (AmbiguousCommitError unless idempotent, then retried), the connection
    is discarded, and the next transaction runs on a new one."""
    run_in_transaction(one, lambda c: c.execute(text(
        "CREATE SEQUENCE lost; "
        "CREATE FUNCTION lose_twice() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF nextval('lost') <= 2 THEN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); END IF; "
        "RETURN NULL; END $$; "
        "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON d DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION lose_twice()")))  # fmt: skip
    pids: list[int] = []

    def lost_at_commit(conn: Connection) -> None:
        pids.append(backend(conn))
        driver.rowcount(conn, INSERT, dict(k=f"k{len(pids)}", n=1))

    with pytest.raises(AmbiguousCommitError):
        run_in_transaction(one, lost_at_commit, sleep=lambda _: None)
    assert stored(one) == [] and run_in_transaction(one, backend) != pids[0], "a new connection"
    pids.clear()
    events: list[RetryEvent] = []
    run_in_transaction(one, lost_at_commit, sleep=lambda _: None, on_retry=events.append, idempotent=True)
    assert [e.kind for e in events] == [ErrorKind.AMBIGUOUS] and len(pids) == 2 and pids[1] != pids[0]
    assert stored(one) == [("k2", 1)] and idle_at_the_engines_level(one)


def test_a_session_ended_before_commit_is_retried_not_ambiguous(one: Engine, postgres_url: str) -> None:
    """The server gone between the last statement and COMMIT (its session
    terminated; the end is on the socket before the COMMIT would be sent):
    nothing was applied, so the COMMIT is not sent, and the transaction is
    retried on a new connection as after any lost connection, even when
    not idempotent (``engine.refuse_ended_session``)."""
    pids: list[int] = []

    def lost_before_commit(conn: Connection) -> None:
        pids.append(backend(conn))
        driver.rowcount(conn, INSERT, dict(k=f"k{len(pids)}", n=1))
        if len(pids) == 1:
            with psycopg.connect(make_url(postgres_url).set(drivername="postgresql").render_as_string(False),
                                 autocommit=True) as other:  # fmt: skip
                other.execute("SELECT pg_terminate_backend(%s, 10000)", (pids[0],))

    events: list[RetryEvent] = []
    run_in_transaction(one, lost_before_commit, sleep=lambda _: None, on_retry=events.append)
    assert [e.kind for e in events] == [ErrorKind.CONNECTION] and len(pids) == 2 and pids[1] != pids[0]
    assert stored(one) == [("k2", 1)] and idle_at_the_engines_level(one)
