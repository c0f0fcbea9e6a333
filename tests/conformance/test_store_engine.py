"""The store's engine layer and migrations runner, on SQLite and a real PostgreSQL.

PostgreSQL runs at SERIALIZABLE (CockroachDB's isolation), so the conflicts
here are real SQLSTATE 40001s from the server, not simulations; the tests
that inject errors say so.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine, make_url

from tickwheel.shared.clock import FakeClock
from tickwheel_server.store import (
    AmbiguousCommitError,
    Backoff,
    ErrorKind,
    Migration,
    MigrationError,
    RetryEvent,
    StoreConfigError,
    StoreUnavailableError,
    TransactionConflictError,
    attempts_running,
    capabilities,
    classify_error,
    create_store_engine,
    current_version,
    load_migrations,
    migrate,
    parse_store_url,
    run_in_transaction,
    run_in_transaction_async,
    settle,
)
from tickwheel_server.store.sessionoptions import JIT_OFF, postgres_options
from tickwheel_server.store.migrate import applied_migrations, split_sql

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def no_sleep(_seconds: float) -> None:
    pass


@pytest.fixture
def make_engine() -> Iterator[Callable[..., Engine]]:
    """Build engines that are disposed after the test (no connection outlives it)."""
    engines: list[Engine] = []

    def make(url: str, **options: object) -> Engine:
        engine = create_store_engine(url, **options)  # type: ignore[arg-type]
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.dispose()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def engine(store_url: str, make_engine) -> Engine:
    return make_engine(store_url)


@pytest.fixture
def pg_engine(postgres_url: str, make_engine) -> Engine:
    return make_engine(postgres_url)


def make_counter(engine: Engine) -> None:
    def create(conn: Connection) -> None:
        conn.execute(text("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"))
        conn.execute(text("INSERT INTO counter (id, n) VALUES (1, 0)"))

    run_in_transaction(engine, create)


def read_counter(engine: Engine) -> int:
    return run_in_transaction(engine, lambda c: c.execute(text("SELECT n FROM counter WHERE id = 1")).scalar_one())


def increment(conn: Connection) -> int:
    n = conn.execute(text("SELECT n FROM counter WHERE id = 1")).scalar_one()
    conn.execute(text("UPDATE counter SET n = :n WHERE id = 1"), {"n": n + 1})
    return n + 1


def serialization_failure() -> sa_exc.OperationalError:
    """What psycopg + SQLAlchemy raise for SQLSTATE 40001 (CockroachDB: "restart transaction")."""
    return sa_exc.OperationalError(
        "UPDATE …", {}, psycopg.errors.SerializationFailure("restart transaction: TransactionRetryWithProtoRefreshError")
    )


# --------------------------------------------------------------- URLs, engines


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite://", "sqlite://"),
        ("sqlite:///rel/store.db", "sqlite:///rel/store.db"),
        ("sqlite+pysqlite:////abs/store.db", "sqlite:////abs/store.db"),
        ("postgresql://u:pw@h:5432/db", "postgresql+psycopg://u:***@h:5432/db"),
        ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("cockroachdb://root@h:26257/db?sslmode=disable", "cockroachdb+psycopg://root@h:26257/db?sslmode=disable"),
    ],
)
def test_store_urls_are_normalised(url: str, expected: str) -> None:
    assert parse_store_url(url).render_as_string(hide_password=True) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@h/db", "unsupported engine 'mysql'"),
        ("postgresql+psycopg2://u:secret@h/db", "psycopg 3"),
        ("postgresql+asyncpg://u@h/db", "psycopg 3"),
        ("not a url", "not a URL"),
    ],
)
def test_bad_store_urls_are_refused_without_the_password(url: str, message: str) -> None:
    with pytest.raises(StoreConfigError, match=message) as caught:
        create_store_engine(url)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "isolation"),
    [("sqlite://", "READ COMMITTED"), ("cockroachdb://h/db", "REPEATABLE READ"), ("postgresql://h/db", "CHAOS")],
)
def test_unsupported_isolation_is_refused_when_built(url: str, isolation: str) -> None:
    with pytest.raises(StoreConfigError, match="isolation"):
        create_store_engine(url, isolation=isolation)


@pytest.mark.postgres
def test_postgres_runs_serializable_by_default(postgres_url: str, make_engine) -> None:
    show = lambda c: c.exec_driver_sql("SHOW transaction_isolation").scalar()  # noqa: E731
    assert run_in_transaction(make_engine(postgres_url), show) == "serializable"
    assert run_in_transaction(make_engine(postgres_url, isolation="read committed"), show) == "read committed"


@pytest.mark.parametrize(
    ("given", "environ", "sent"),
    [
        (None, {}, "-c jit=off"),
        ("-c statement_timeout=5s", {}, "-c statement_timeout=5s -c jit=off"),
        # An operator's own jit setting wins, however libpq lets it be written.
        ("-c jit=on", {}, "-c jit=on"),
        ("-cjit=on -c work_mem=8MB", {}, "-cjit=on -c work_mem=8MB"),
        ("--jit=on", {}, "--jit=on"),
        ("-c JIT = on", {}, "-c JIT = on"),
        # jit_above_cost is another setting: JIT still goes off.
        ("-c jit_above_cost=10", {}, "-c jit_above_cost=10 -c jit=off"),
        # PGOPTIONS, which libpq reads only when no options are given, is kept.
        (None, {"PGOPTIONS": "-c search_path=tw"}, "-c search_path=tw -c jit=off"),
        (None, {"PGOPTIONS": "-c jit=on"}, "-c jit=on"),
        ("-c work_mem=8MB", {"PGOPTIONS": "-c jit=on"}, "-c work_mem=8MB -c jit=off"),
    ],
)
def test_postgres_sessions_start_with_jit_off_unless_the_options_set_it(given, environ, sent) -> None:
    url = make_url("postgresql+psycopg://h/db")
    if given is not None:
        url = url.update_query_dict({"options": given})
    assert postgres_options(url, environ) == sent


def _connect_params(url: str, **options: object) -> dict:
    """What the engine of ``url`` hands the driver to connect (no server needed)."""
    engine = create_store_engine(url, **options)  # type: ignore[arg-type]
    seen: dict = {}

    @event.listens_for(engine, "do_connect")
    def _capture(_dialect, _record, _cargs, cparams):
        seen.update(cparams)
        raise RuntimeError("captured")

    try:
        with pytest.raises(RuntimeError, match="captured"):
            engine.connect()
    finally:
        engine.dispose()
    return seen


def test_only_postgresql_sessions_are_sent_the_jit_option(monkeypatch) -> None:
    monkeypatch.delenv("PGOPTIONS", raising=False)
    assert _connect_params("postgresql://h/db")["options"] == JIT_OFF
    assert _connect_params("postgresql://h/db?options=-c%20jit%3Don")["options"] == "-c jit=on"
    # CockroachDB has no jit setting (an unknown option fails the connection):
    # its sessions are sent no options at all, nor an operator's changed.
    assert "options" not in _connect_params("cockroachdb://h/db")
    assert _connect_params("cockroachdb://h/db?options=-c%20x%3Dy")["options"] == "-c x=y"


def test_the_lock_limits_asked_are_sent_to_postgresql_and_cockroachdb_unless_the_url_sets_them(monkeypatch) -> None:
    monkeypatch.delenv("PGOPTIONS", raising=False)
    limits = {"lock_timeout": 1.5, "idle_in_transaction_timeout": 60}
    assert _connect_params("postgresql://h/db", **limits)["options"] == (
        f"{JIT_OFF} -c lock_timeout=1500ms -c idle_in_transaction_session_timeout=60000ms")
    # CockroachDB has both settings (not jit): sent only when asked.
    assert _connect_params("cockroachdb://h/db", **limits)["options"] == (
        "-c lock_timeout=1500ms -c idle_in_transaction_session_timeout=60000ms")
    assert "options" not in _connect_params("cockroachdb://h/db", lock_timeout=0, idle_in_transaction_timeout=None)
    # The operator's own setting wins, however written; the other limit still goes.
    assert _connect_params("postgresql://h/db?options=--lock_timeout%3D9s", **limits)["options"] == (
        f"--lock_timeout=9s {JIT_OFF} -c idle_in_transaction_session_timeout=60000ms")
    # The idle limit is a ceiling: the operator's longer one (or 0, no limit; or unreadable) is
    # replaced, however written, a shorter one kept; libpq's escaped space read as PostgreSQL does.
    for given in ("-c%20idle_in_transaction_session_timeout%3D1h", "--IDLE_IN_TRANSACTION_SESSION_TIMEOUT%3D600s",
                  "-cidle_in_transaction_session_timeout%3D0", "-c%20idle_in_transaction_session_timeout%3D2%5C%20min",
                  "-c%20idle_in_transaction_session_timeout%3Dlong"):
        assert _connect_params(f"postgresql://h/db?options={given}%20-c%20jit%3Don", **limits)["options"] == (
            "-c idle_in_transaction_session_timeout=60000ms -c jit=on -c lock_timeout=1500ms"), given
    for kept in ("-c idle_in_transaction_session_timeout=59s", "--idle_in_transaction_session_timeout=500",
                 "-c idle_in_transaction_session_timeout=1min"):
        monkeypatch.setenv("PGOPTIONS", kept)  # read when the URL has no options, as libpq would
        assert _connect_params("cockroachdb://h/db", **limits)["options"] == f"{kept} -c lock_timeout=1500ms", kept
    monkeypatch.delenv("PGOPTIONS")
    # Under a millisecond is one: never 0, which would mean no limit at all.
    assert _connect_params("postgresql://h/db", lock_timeout=0.0001)["options"] == f"{JIT_OFF} -c lock_timeout=1ms"
    with pytest.raises(StoreConfigError, match="lock_timeout must be > 0"):
        create_store_engine("postgresql://h/db", lock_timeout=-1)


@pytest.mark.postgres
def test_postgres_sessions_run_with_jit_off_and_an_operators_option_wins(postgres_url: str, make_engine) -> None:
    show = lambda c: (c.exec_driver_sql("SHOW jit").scalar(),  # noqa: E731
                      c.exec_driver_sql("SHOW statement_timeout").scalar())
    assert run_in_transaction(make_engine(postgres_url), show) == ("off", "0")
    url = make_url(postgres_url)
    assert run_in_transaction(make_engine(url.update_query_dict({"options": "-c jit=on"})), show) == ("on", "0")
    # Other options of the operator's are kept, JIT still off beside them.
    other = make_engine(url.update_query_dict({"options": "-c statement_timeout=7s"}))
    assert run_in_transaction(other, show) == ("off", "7s")


def test_sqlite_file_engine_settings(tmp_path, make_engine) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}", sqlite_busy_timeout=2.5)
    pragmas = run_in_transaction(
        engine,
        lambda c: [c.exec_driver_sql(f"PRAGMA {p}").scalar() for p in ("journal_mode", "foreign_keys", "busy_timeout")],
    )
    assert pragmas == ["wal", 1, 2500]


def test_sqlite_memory_engine_is_one_database_used_by_one_transaction_at_a_time(make_engine) -> None:
    engine = make_engine("sqlite://")
    make_counter(engine)
    engine.dispose()  # the database outlives a pool reset: it lives as long as the engine
    threads = [
        threading.Thread(target=lambda: [run_in_transaction(engine, increment) for _ in range(25)]) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read_counter(engine) == 100
    with pytest.raises(sa_exc.OperationalError):  # another engine is another database
        read_counter(make_engine("sqlite://"))


def test_capabilities_follow_the_dialect(tmp_path, make_engine) -> None:
    sqlite_caps = capabilities(make_engine(f"sqlite:///{tmp_path / 'store.db'}"))
    assert (sqlite_caps.is_sqlite, sqlite_caps.row_locks, sqlite_caps.skip_locked) == (True, False, False)
    assert sqlite_caps.returning == (sqlite3.sqlite_version_info >= (3, 35))
    assert not sqlite_caps.declarative_partitioning
    # CockroachDB's capabilities come from its dialect alone; nothing connects.
    crdb = capabilities(make_engine("cockroachdb://root@127.0.0.1:1/db"))
    assert (crdb.is_cockroach, crdb.is_postgres, crdb.skip_locked) == (True, False, True)
    assert not crdb.declarative_partitioning and not crdb.advisory_locks and not crdb.transactional_ddl


@pytest.mark.postgres
def test_postgres_capabilities(pg_engine: Engine) -> None:
    run_in_transaction(pg_engine, lambda c: c.exec_driver_sql("SELECT 1"))  # learn the server version
    caps = capabilities(pg_engine)
    assert caps.is_postgres and not caps.is_cockroach and not caps.is_sqlite
    assert caps.skip_locked and caps.row_locks and caps.returning and caps.on_conflict
    assert caps.declarative_partitioning and caps.advisory_locks and caps.transactional_ddl


# ------------------------------------------------------ classification, backoff


class _Psycopg2Style(Exception):
    def __init__(self, pgcode: str) -> None:
        super().__init__(pgcode)
        self.pgcode = pgcode


def _sqlite_error(code: int) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database is locked")
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (serialization_failure(), ErrorKind.CONFLICT),
        (sa_exc.OperationalError("s", {}, psycopg.errors.DeadlockDetected("deadlock")), ErrorKind.CONFLICT),
        (sa_exc.OperationalError("s", {}, _Psycopg2Style("40001")), ErrorKind.CONFLICT),
        (psycopg.errors.SerializationFailure("bare driver error"), ErrorKind.CONFLICT),
        (sa_exc.OperationalError("s", {}, _sqlite_error(5)), ErrorKind.CONFLICT),  # SQLITE_BUSY
        (sa_exc.OperationalError("s", {}, _sqlite_error(5 | (2 << 8))), ErrorKind.CONFLICT),  # BUSY_SNAPSHOT
        (sa_exc.OperationalError("s", {}, _Psycopg2Style("40003")), ErrorKind.AMBIGUOUS),
        (sa_exc.OperationalError("s", {}, psycopg.errors.AdminShutdown("terminating")), ErrorKind.CONNECTION),
        (sa_exc.OperationalError("s", {}, _Psycopg2Style("08006")), ErrorKind.CONNECTION),
        (sa_exc.OperationalError("s", {}, psycopg.OperationalError("connection refused")), ErrorKind.CONNECTION),
        (sa_exc.OperationalError("s", {}, Exception(), connection_invalidated=True), ErrorKind.CONNECTION),
        (sa_exc.TimeoutError("QueuePool limit reached"), ErrorKind.CONNECTION),
        (sa_exc.IntegrityError("s", {}, psycopg.errors.UniqueViolation("dup")), ErrorKind.FATAL),
        (sa_exc.ProgrammingError("s", {}, psycopg.errors.SyntaxError("syntax")), ErrorKind.FATAL),
        (sa_exc.OperationalError("s", {}, psycopg.errors.QueryCanceled("statement timeout")), ErrorKind.REFUSED),
        (sa_exc.InternalError("s", {}, psycopg.errors.ReadOnlySqlTransaction("read-only")), ErrorKind.REFUSED),
        (sa_exc.OperationalError("s", {}, psycopg.errors.LockNotAvailable("lock timeout")), ErrorKind.REFUSED),
        (sa_exc.OperationalError("s", {}, psycopg.errors.TooManyConnections("too many")), ErrorKind.CONNECTION),
        (sa_exc.OperationalError("s", {}, sqlite3.OperationalError("no such table: x")), ErrorKind.FATAL),
        (ValueError("a bug in fn"), ErrorKind.FATAL),
    ],
)
def test_errors_are_classified(error: BaseException, kind: ErrorKind) -> None:
    assert classify_error(error) is kind


def test_bad_backoff_parameters_are_a_config_error() -> None:
    for base, cap in [(0.5, 0.1), (0.0, 1.0), (-0.1, 1.0)]:
        with pytest.raises(StoreConfigError):
            Backoff(base=base, cap=cap)


# ------------------------------------------------------------------- retries


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_commits_and_returns_the_result(engine: Engine) -> None:
    make_counter(engine)
    assert run_in_transaction(engine, increment) == 1
    assert read_counter(engine) == 1


def test_a_fatal_error_rolls_back_and_is_raised_at_once(engine: Engine) -> None:
    make_counter(engine)
    calls = []

    def broken(conn: Connection) -> None:
        calls.append(1)
        increment(conn)
        raise ValueError("a bug in fn")

    with pytest.raises(ValueError, match="a bug in fn"):
        run_in_transaction(engine, broken, sleep=no_sleep)
    assert len(calls) == 1 and read_counter(engine) == 0

    def duplicate(conn: Connection) -> None:
        calls.append(1)
        conn.execute(text("INSERT INTO counter (id, n) VALUES (1, 5)"))

    with pytest.raises(sa_exc.IntegrityError):
        run_in_transaction(engine, duplicate, sleep=no_sleep)
    assert len(calls) == 2


def test_an_injected_40001_is_retried_after_a_backoff(engine: Engine) -> None:
    make_counter(engine)
    calls, slept, events = [], [], []

    def flaky(conn: Connection) -> int:
        calls.append(1)
        result = increment(conn)  # written, then rolled back by the failure
        if len(calls) == 1:
            raise serialization_failure()
        return result

    backoff = Backoff(base=0.25, cap=1.0)
    assert run_in_transaction(engine, flaky, backoff=backoff, sleep=slept.append, on_retry=events.append) == 1
    assert len(calls) == 2 and read_counter(engine) == 1
    assert len(slept) == 1 and 0.0 <= slept[0] <= 0.25
    [retry] = events
    assert (retry.attempt, retry.kind, retry.sqlstate, retry.delay) == (1, ErrorKind.CONFLICT, "40001", slept[0])


def test_retries_are_bounded_and_end_in_a_classified_error(engine: Engine) -> None:
    calls, slept = [], []

    def always_conflicts(conn: Connection) -> None:
        calls.append(1)
        raise serialization_failure()

    backoff = Backoff(base=0.01, cap=0.03)
    with pytest.raises(TransactionConflictError) as caught:
        run_in_transaction(engine, always_conflicts, attempts=5, backoff=backoff, sleep=slept.append, rng=random.Random(4))
    assert len(calls) == 5 and caught.value.attempts == 5 and caught.value.sqlstate == "40001"
    assert isinstance(caught.value.__cause__, sa_exc.OperationalError)
    # Retry n waits full jitter under min(cap, base * 2**(n-1)): one draw each from the rng.
    twin = random.Random(4)
    assert slept == [twin.uniform(0.0, top) for top in (0.01, 0.02, 0.03, 0.03)]
    with pytest.raises(StoreConfigError):
        run_in_transaction(engine, always_conflicts, attempts=0)


@pytest.mark.postgres
def test_a_real_serialization_conflict_on_postgres_is_retried(postgres_url: str, make_engine) -> None:
    """Two overlapping SERIALIZABLE transactions update one row: ours gets 40001 and wins on retry."""
    engine, other = make_engine(postgres_url), make_engine(postgres_url)
    make_counter(engine)
    calls, events = [], []

    def increment_with_interference(conn: Connection) -> int:
        calls.append(1)
        n = conn.execute(text("SELECT n FROM counter WHERE id = 1")).scalar_one()
        if len(calls) == 1:  # a concurrent transaction commits after our snapshot was taken
            run_in_transaction(other, increment)
        conn.execute(text("UPDATE counter SET n = :n WHERE id = 1"), {"n": n + 1})
        return n + 1

    assert run_in_transaction(engine, increment_with_interference, sleep=no_sleep, on_retry=events.append) == 2
    assert len(calls) == 2 and read_counter(engine) == 2
    assert [(e.kind, e.sqlstate) for e in events] == [(ErrorKind.CONFLICT, "40001")]


@pytest.mark.postgres
def test_a_real_deadlock_on_postgres_is_retried(postgres_url: str, make_engine) -> None:
    """Two threads lock two rows in opposite orders: the victim gets 40P01 and succeeds on retry."""
    engine = make_engine(postgres_url)

    def create(conn: Connection) -> None:
        conn.execute(text("CREATE TABLE pair (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"))
        conn.execute(text("INSERT INTO pair (id, n) VALUES (1, 0), (2, 0)"))

    run_in_transaction(engine, create)
    both_hold_one = threading.Barrier(2, timeout=10)
    events: list[RetryEvent] = []
    errors: list[BaseException] = []

    def worker(first: int, second: int) -> None:
        calls = []

        def bump_both(conn: Connection) -> None:
            calls.append(1)
            conn.execute(text("UPDATE pair SET n = n + 1 WHERE id = :id"), {"id": first})
            if len(calls) == 1:
                both_hold_one.wait()
            conn.execute(text("UPDATE pair SET n = n + 1 WHERE id = :id"), {"id": second})

        try:
            run_in_transaction(engine, bump_both, sleep=no_sleep, on_retry=events.append)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=order) for order in ((1, 2), (2, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    # The victim's retry may also queue behind the survivor and then get
    # 40001, or (seen once, under load) be caught in a deadlock again:
    # each is retried, and both transactions end having counted.
    assert [e.sqlstate for e in events].count("40P01") >= 1
    assert {(e.kind, e.sqlstate) for e in events} <= {(ErrorKind.CONFLICT, "40P01"), (ErrorKind.CONFLICT, "40001")}
    rows = run_in_transaction(engine, lambda c: c.execute(text("SELECT n FROM pair ORDER BY id")).scalars().all())
    assert rows == [2, 2]


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_concurrent_increments_are_never_lost(engine: Engine) -> None:
    make_counter(engine)
    start = threading.Barrier(4, timeout=10)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            start.wait()
            for _ in range(10):
                run_in_transaction(engine, increment, attempts=50, backoff=Backoff(base=0.001, cap=0.05))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and read_counter(engine) == 40


def test_a_busy_sqlite_database_is_retried(tmp_path, make_engine) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url, sqlite_busy_timeout=0.05)
    make_counter(engine)
    holder = make_engine(url).connect()
    holder.begin()  # BEGIN IMMEDIATE: holds the write lock
    events: list[RetryEvent] = []

    def release_after_first_failure(_delay: float) -> None:
        holder.rollback()
        holder.close()

    assert run_in_transaction(engine, increment, sleep=release_after_first_failure, on_retry=events.append) == 1
    assert [e.kind for e in events] == [ErrorKind.CONFLICT]


@pytest.mark.postgres
def test_a_connection_lost_mid_transaction_is_retried(postgres_url: str, make_engine) -> None:
    engine, admin = make_engine(postgres_url), make_engine(postgres_url)
    make_counter(engine)
    calls, events = [], []

    def doomed_once(conn: Connection) -> int:
        calls.append(1)
        result = increment(conn)
        if len(calls) == 1:
            terminate_backend(admin, conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
        conn.exec_driver_sql("SELECT 1")
        return result

    assert run_in_transaction(engine, doomed_once, sleep=no_sleep, on_retry=events.append) == 1
    assert [e.kind for e in events] == [ErrorKind.CONNECTION] and read_counter(engine) == 1


def terminate_backend(admin: Engine, pid: int) -> None:
    """Kill one server session and wait until it is gone."""
    run_in_transaction(admin, lambda c: c.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = run_in_transaction(
            admin, lambda c: c.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid})
        ).scalar_one()
        if not alive:
            return
        time.sleep(0.01)  # the server reaps the session on its own schedule
    raise AssertionError(f"backend {pid} still alive")


@pytest.mark.postgres
@pytest.mark.parametrize("idempotent", [False, True])
def test_a_connection_lost_during_commit_is_ambiguous(postgres_url: str, make_engine, idempotent: bool) -> None:
    engine, admin = make_engine(postgres_url), make_engine(postgres_url)
    make_counter(engine)
    calls = []
    kill_next_commit = [True]

    @event.listens_for(engine, "commit")
    def _kill_before_commit(conn: Connection) -> None:
        if kill_next_commit.pop() if kill_next_commit else False:
            terminate_backend(admin, conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())

    def write(conn: Connection) -> int:
        calls.append(1)
        return increment(conn)

    if idempotent:
        assert run_in_transaction(engine, write, idempotent=True, sleep=no_sleep) == 1
        assert len(calls) == 2
    else:
        with pytest.raises(AmbiguousCommitError):
            run_in_transaction(engine, write, sleep=no_sleep)
        assert len(calls) == 1


@pytest.mark.postgres
def test_a_stopped_server_ends_in_store_unavailable_and_a_restart_is_survived(
    postgres_server, postgres_url: str, make_engine
) -> None:
    engine = make_engine(postgres_url, connect_timeout=2)
    make_counter(engine)  # the pool now holds a connection the restart will break
    postgres_server.restart()
    assert run_in_transaction(engine, increment, sleep=no_sleep) == 1  # replaced at checkout

    postgres_server.stop()
    calls = []
    with pytest.raises(StoreUnavailableError) as caught:
        run_in_transaction(engine, lambda c: calls.append(1), attempts=3, sleep=no_sleep)
    assert caught.value.attempts == 3 and calls == []

    # The server comes back during the backoff: the transaction goes through.
    assert run_in_transaction(engine, increment, sleep=lambda _: postgres_server.start()) == 2


@pytest.mark.postgres
def test_a_pooled_connection_is_checked_out_without_a_round_trip(pg_engine: Engine) -> None:
    make_counter(pg_engine)
    pings = []
    pg_engine.dialect.do_ping = lambda dbapi_connection: pings.append(1) or True  # what pool_pre_ping would call
    for _ in range(3):
        run_in_transaction(pg_engine, increment)
    assert read_counter(pg_engine) == 3 and pings == []


@pytest.mark.postgres
def test_a_pooled_connection_the_server_closed_is_replaced_at_checkout(postgres_url: str, make_engine) -> None:
    engine, admin = make_engine(postgres_url), make_engine(postgres_url)
    make_counter(engine)
    with engine.connect() as first, engine.connect() as second:  # two pooled connections, both about to die
        pids = [conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() for conn in (first, second)]
        first.rollback()
        second.rollback()
    for pid in pids:
        terminate_backend(admin, pid)
    events = []
    assert run_in_transaction(engine, increment, sleep=no_sleep, on_retry=events.append) == 1
    assert run_in_transaction(engine, increment, sleep=no_sleep, on_retry=events.append) == 2
    assert events == [], "no transaction ran on a closed connection: each was replaced before use"
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() not in pids


async def test_the_async_wrapper_retries_on_the_injected_clock(tmp_path, make_engine) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    make_counter(engine)
    clock = FakeClock()
    retried = asyncio.Event()
    threads = []

    def flaky(conn: Connection) -> int:
        threads.append(threading.get_ident())
        result = increment(conn)
        if len(threads) == 1:
            raise serialization_failure()
        return result

    task = asyncio.create_task(
        run_in_transaction_async(
            engine, flaky, clock=clock, backoff=Backoff(base=5.0, cap=5.0), on_retry=lambda e: retried.set()
        )
    )
    await asyncio.wait_for(retried.wait(), timeout=10)
    assert not task.done()  # backing off on the fake clock, which has not moved
    clock.advance(5.0)
    assert await asyncio.wait_for(task, timeout=10) == 1
    assert threading.get_ident() not in threads and read_counter(engine) == 1



@pytest.mark.parametrize("on", ["engine", "options"])
async def test_settle_waits_for_an_attempt_whose_task_was_cancelled(engine: Engine, on: str) -> None:
    """Cancelling the awaiting task leaves its attempt running in its thread,
    holding a connection; settle() returns only once it has ended, so a
    stopping server disposes of the engine after it. An attempt on one of
    the engine's ``execution_options`` copies (the row-locked transactions'
    READ COMMITTED engine shares its pool) counts as the engine's."""
    make_counter(engine)
    runs_on = engine if on == "engine" else engine.execution_options(logging_token="row-locked")
    entered, release = threading.Event(), threading.Event()

    def held(conn: Connection) -> int:
        entered.set()
        release.wait(10)
        return increment(conn)

    task = asyncio.create_task(run_in_transaction_async(runs_on, held))
    assert await asyncio.to_thread(entered.wait, 10)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and attempts_running(engine) == 1, "the attempt still runs in its thread"
    assert await settle(engine, timeout=0.05) is False
    waiting = asyncio.create_task(settle(engine, timeout=10))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    release.set()
    assert await asyncio.wait_for(waiting, timeout=10) is True
    assert attempts_running(engine) == 0 and read_counter(engine) == 1, "it committed, then settle() returned"


# ---------------------------------------------------------------- migrations


def test_migrate_applies_every_migration_once_and_is_idempotent(engine: Engine) -> None:
    shipped = load_migrations()
    assert [m.version for m in shipped][:1] == [1] and shipped[0].name == "bootstrap"
    assert current_version(engine) == 0

    clock = FakeClock(datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc))
    first = migrate(engine, clock=clock)
    assert [(m.version, m.name) for m in first] == [(m.version, m.name) for m in shipped]
    assert migrate(engine, clock=clock) == []
    assert current_version(engine) == shipped[-1].version
    assert applied_migrations(engine) == first
    assert {m.applied_at for m in first} == {clock.now()}

    def cluster_row(conn: Connection) -> int:
        conn.execute(text("INSERT INTO cluster (id, cluster_id, created_at) VALUES (1, 'c1', 0)"))
        return conn.execute(text("SELECT partition_count FROM cluster")).scalar_one()

    assert run_in_transaction(engine, cluster_row) == 256
    with pytest.raises(sa_exc.IntegrityError):  # one row only
        run_in_transaction(engine, lambda c: c.execute(text("INSERT INTO cluster VALUES (2, 'c2', 256, 0)")))


@pytest.fixture(params=[*BACKENDS, pytest.param("cockroachdb", marks=pytest.mark.postgres)])
def migrating(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str]:
    """A fresh store's URL and the dialect to name its engines: CockroachDB's
    branch on PostgreSQL (a statement a transaction, under a lease:
    test_migrate_cockroach_path.py), or the engine's own ("")."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}", ""
    return request.getfixturevalue("postgres_url"), "cockroachdb" if request.param == "cockroachdb" else ""


def test_concurrent_migrations_apply_each_migration_exactly_once(migrating: tuple[str, str], make_engine) -> None:
    """Three servers migrate one fresh database at the same instant."""
    url, dialect = migrating
    engines = [make_engine(url) for _ in range(3)]
    for engine in engines:
        engine.dialect.name = dialect or engine.dialect.name
    start = threading.Barrier(len(engines), timeout=10)
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def server(index: int) -> None:
        try:
            start.wait()
            results[index] = migrate(engines[index], holder=f"server-{index}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=server, args=(i,)) for i in range(len(engines))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    applied = sorted(m.version for result in results.values() for m in result)
    assert applied == [m.version for m in load_migrations()]
    assert [m.version for m in applied_migrations(engines[0])] == applied


@pytest.mark.postgres
def test_a_migrator_waits_for_the_one_holding_the_lock(postgres_url: str, make_engine) -> None:
    """Force the overlap: the second migrator is blocked on the lock row while the first applies
    version 1, then finds it applied (after a 40001 retry) and applies only what is left."""
    first_engine, second_engine, observer = (make_engine(postgres_url) for _ in range(3))
    overlap_two_migrators(first_engine, second_engine, lambda: wait_for_lock_waiter(observer))


def overlap_two_migrators(first_engine: Engine, second_engine: Engine, hold: Callable[[], None]) -> None:
    """The first migrator applies version 1 and, inside it, ``hold()``s until
    the second is kept waiting; then version 1 has run once, in the first,
    and the two applied 1 and 2 between them."""
    inside = threading.Event()
    runs: list[str] = []

    def slow_table(conn: Connection, caps) -> None:
        runs.append(threading.current_thread().name)
        inside.set()
        hold()
        conn.execute(text("CREATE TABLE IF NOT EXISTS slow (id INTEGER PRIMARY KEY)"))

    def second_table(conn: Connection, caps) -> None:
        conn.execute(text("CREATE TABLE IF NOT EXISTS second (id INTEGER PRIMARY KEY)"))

    migrations = [Migration(1, "slow", slow_table), Migration(2, "second", second_table)]
    results: dict[str, list] = {}

    def run(name: str, engine: Engine) -> None:
        results[name] = [m.version for m in migrate(engine, migrations=migrations, holder=name)]

    first = threading.Thread(target=run, args=("first", first_engine), name="first")
    first.start()
    assert inside.wait(timeout=10)
    run("second", second_engine)
    first.join(timeout=30)
    assert runs == ["first"]  # version 1 ran once, in the first migrator
    assert sorted(results["first"] + results["second"]) == [1, 2]
    assert 1 in results["first"] and 1 not in results["second"]
    assert current_version(second_engine) == 2


@pytest.mark.postgres
def test_an_upgrade_waits_for_a_backfill_batch_reading_what_it_drops(postgres_url: str, make_engine) -> None:
    """Migration 0032's race: one migrator is inside a backfill batch that
    reads a column (checked present) while another applies the upgrade that
    drops it. The upgrade waits for the batch, and the batch's migrator then
    finds the migration recorded instead of failing on the missing column."""
    first_engine, second_engine, observer = (make_engine(postgres_url) for _ in range(3))
    inside, release = threading.Event(), threading.Event()

    def source(conn: Connection, caps) -> None:
        conn.execute(text("CREATE TABLE src (id TEXT PRIMARY KEY, moved INTEGER)"))
        conn.execute(text("INSERT INTO src VALUES ('a', 1), ('b', 2)"))

    def prepare(conn: Connection, caps) -> None:
        conn.execute(text("CREATE TABLE IF NOT EXISTS dst (id TEXT PRIMARY KEY, moved INTEGER)"))

    def backfill(conn: Connection, caps, after: str) -> str | None:
        if threading.current_thread().name == "first" and not inside.is_set():
            inside.set()
            assert release.wait(timeout=20)
        conn.execute(text("INSERT INTO dst SELECT id, moved FROM src WHERE id > :after ON CONFLICT DO NOTHING"),
                     dict(after=after))  # fmt: skip
        return None

    def upgrade(conn: Connection, caps) -> None:
        conn.execute(text("ALTER TABLE src DROP COLUMN IF EXISTS moved"))

    migrations = [Migration(1, "source", source), Migration(2, "move", upgrade, prepare=prepare, backfill=backfill)]
    migrate(first_engine, migrations=migrations[:1])
    errors: list[BaseException] = []

    def run(engine: Engine) -> None:
        try:
            migrate(engine, migrations=migrations, holder=threading.current_thread().name)
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=run, args=(first_engine,), name="first")
    second = threading.Thread(target=run, args=(second_engine,), name="second")
    first.start()
    assert inside.wait(timeout=10)
    second.start()
    try:
        wait_for_lock_waiter(observer)  # the upgrade waits for the batch under way
        assert second.is_alive()
    finally:
        release.set()
        first.join(timeout=30)
        second.join(timeout=30)
    assert not errors
    assert current_version(observer) == 2
    rows = run_in_transaction(observer, lambda c: c.execute(text("SELECT id, moved FROM dst ORDER BY id")).all())
    assert [tuple(row) for row in rows] == [("a", 1), ("b", 2)]


def wait_for_lock_waiter(observer: Engine) -> None:
    """Return once some session is waiting for a row lock (the second migrator)."""
    deadline = time.monotonic() + 10
    query = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")
    while time.monotonic() < deadline:
        if run_in_transaction(observer, lambda c: c.execute(query).scalar_one()):
            return
        time.sleep(0.01)  # polling the server's view of another session; nothing to await
    raise AssertionError("the second migrator never waited for the lock")


def test_a_failing_migration_keeps_earlier_ones_and_records_nothing_for_itself(engine: Engine) -> None:
    def ok(conn: Connection, caps) -> None:
        conn.execute(text("CREATE TABLE first_table (id INTEGER PRIMARY KEY)"))

    def broken(conn: Connection, caps) -> None:
        conn.execute(text("CREATE TABLE half_done (id INTEGER PRIMARY KEY)"))
        conn.execute(text("SELECT no_such_column FROM first_table"))

    migrations = [Migration(1, "ok", ok), Migration(2, "broken", broken)]
    with pytest.raises(MigrationError, match="0002_broken") as caught:
        migrate(engine, migrations=migrations)
    assert [m.version for m in caught.value.applied] == [1]
    assert current_version(engine) == 1
    assert not sa.inspect(engine).has_table("half_done")  # transactional DDL rolled back with it


def test_migrate_stops_at_the_target(engine: Engine) -> None:
    def create(name: str):
        return lambda conn, caps: conn.execute(text(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY)"))

    migrations = [Migration(v, f"t{v}", create(f"t{v}")) for v in (1, 2, 3)]
    assert [m.version for m in migrate(engine, migrations=migrations, target=2)] == [1, 2]
    assert [m.version for m in migrate(engine, migrations=migrations)] == [3]


def test_duplicate_versions_are_refused(engine: Engine) -> None:
    noop = lambda conn, caps: None  # noqa: E731
    with pytest.raises(MigrationError, match="defined twice"):
        migrate(engine, migrations=[Migration(1, "a", noop), Migration(1, "b", noop)])


def test_migrations_load_from_python_and_sql_files(
    tmp_path, monkeypatch, migrating: tuple[str, str], make_engine
) -> None:
    url, dialect = migrating
    engine = make_engine(url)
    engine.dialect.name = dialect or engine.dialect.name
    package = tmp_path / "tw_sample_migrations"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "0001_notes.sql").write_text(
        "-- a table; and a row with a semicolon and a % in it\n"
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);\n"
        "/* the row */ INSERT INTO notes (id, body) VALUES (1, 'it''s 100%; done');\n"
    )
    (package / "0002_more.py").write_text(
        "from sqlalchemy import text\n"
        "def upgrade(conn, caps):\n"
        "    kind = 'sqlite' if caps.is_sqlite else 'server'\n"
        "    conn.execute(text('INSERT INTO notes (id, body) VALUES (2, :b)'), {'b': kind})\n"
    )
    (package / "README.md").write_text("not a migration")
    monkeypatch.syspath_prepend(str(tmp_path))
    migrations = load_migrations("tw_sample_migrations")
    assert [(m.version, m.name) for m in migrations] == [(1, "notes"), (2, "more")]
    migrate(engine, migrations=migrations)
    bodies = run_in_transaction(engine, lambda c: c.execute(text("SELECT body FROM notes ORDER BY id")).scalars().all())
    assert bodies == ["it's 100%; done", "sqlite" if capabilities(engine).is_sqlite else "server"]

    (package / "3_misnamed.py").write_text("def upgrade(conn, caps): pass\n")
    with pytest.raises(MigrationError, match="3_misnamed.py"):
        load_migrations("tw_sample_migrations")
    sys.modules.pop("tw_sample_migrations", None)


def test_split_sql() -> None:
    assert split_sql("SELECT 1; SELECT ';' -- x;\n; SELECT \"a;b\" /* ; */") == [
        "SELECT 1",
        "SELECT ';'",
        'SELECT "a;b"',
    ]
    with pytest.raises(MigrationError, match="dollar"):
        split_sql("CREATE FUNCTION f() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql")
