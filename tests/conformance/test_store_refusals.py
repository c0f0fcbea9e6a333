"""A real PostgreSQL refusing for the moment: read-only sessions (25006), a
statement timeout (57014), a lock not granted in time (55P03), a role out of
connections (53300). Each is retried with backoff and ends, past the
attempts, in :class:`StoreUnavailableError` naming what the store does
(never a bare driver error, which the API would answer INTERNAL), with
nothing written; an error answering COMMIT is not ambiguous; a transaction
that provokes 55P03 itself and handles it (``handled``) gets it at once.
A lock not granted ends the retries after two attempts while a table is
held, after six when only another transaction's row was; the engine's own
``lock_timeout`` and ``idle_in_transaction_session_timeout`` bind every
session it opens (an operator's URL option wins), and a transaction whose
session that limit ended before its COMMIT is retried, not in doubt.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

import grpc
import psycopg
import pytest
from sqlalchemy import event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine, make_url

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.api.status import status_for
from tickwheel_server.store import (
    Backoff,
    ErrorKind,
    StoreUnavailableError,
    create_store_engine,
    migrate,
    run_in_transaction,
)
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.transactions import LOCK_TIMEOUT_ATTEMPTS, ROW_LOCK_ATTEMPTS

pytestmark = pytest.mark.postgres

QUICK = Backoff(base=0.001, cap=0.002)


def no_sleep(_seconds: float) -> None:
    pass


@pytest.fixture
def make_engine() -> Iterator[Callable[..., Engine]]:
    engines: list[Engine] = []

    def make(url: str, **options: object) -> Engine:
        engine = create_store_engine(url, **options)  # type: ignore[arg-type]
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.dispose()


def with_options(url: str, options: str) -> str:
    return make_url(url).update_query_dict({"options": options}).render_as_string(hide_password=False)


def make_counter(engine: Engine) -> None:
    run_in_transaction(engine, lambda c: c.execute(text(
        "CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO counter VALUES (1, 0)"
    )))  # fmt: skip


def increment(conn: Connection) -> None:
    conn.execute(text("UPDATE counter SET n = n + 1 WHERE id = 1"))


def read_counter(engine: Engine) -> int:
    return run_in_transaction(engine, lambda c: c.execute(text("SELECT n FROM counter WHERE id = 1")).scalar_one())


def test_read_only_sessions_refuse_writes_with_store_unavailable_and_nothing_written(
    postgres_url: str, make_engine
) -> None:
    make_counter(make_engine(postgres_url))
    read_only = make_engine(with_options(postgres_url, "-c default_transaction_read_only=on"))
    calls, events = [], []

    def write(conn: Connection) -> None:
        calls.append(1)
        increment(conn)

    with pytest.raises(StoreUnavailableError) as caught:
        run_in_transaction(read_only, write, attempts=4, backoff=QUICK, sleep=no_sleep, on_retry=events.append)
    assert len(calls) == 4 and caught.value.sqlstate == "25006"
    assert "refusing writes (read-only)" in str(caught.value)
    assert [(e.kind, e.sqlstate) for e in events] == [(ErrorKind.REFUSED, "25006")] * 3
    assert read_counter(read_only) == 0  # reads still answer; nothing was written
    code, status = status_for(caught.value)
    assert code is grpc.StatusCode.UNAVAILABLE
    assert status.message == "the store is unavailable (refusing writes (read-only)); nothing was written; retry later"


def test_a_session_that_refused_a_write_as_read_only_is_not_retried_on(postgres_url: str, make_engine) -> None:
    """A pooled session begun read-only stays so after the setting is reset
    (or the standby it reached is gone): the attempt that got 25006 drops it,
    and the next connects anew and writes."""
    admin = make_engine(postgres_url)
    make_counter(admin)
    database = make_url(postgres_url).database
    run_in_transaction(admin, lambda c: c.exec_driver_sql(
        f'ALTER DATABASE "{database}" SET default_transaction_read_only = on'))
    engine = make_engine(postgres_url, pool_size=1, max_overflow=0)
    assert read_counter(engine) == 0  # the pool's one session, read-only
    run_in_transaction(admin, lambda c: c.exec_driver_sql(f'ALTER DATABASE "{database}" RESET default_transaction_read_only'))
    events = []
    run_in_transaction(engine, increment, backoff=QUICK, sleep=no_sleep, on_retry=events.append)
    assert [(e.kind, e.sqlstate) for e in events] == [(ErrorKind.REFUSED, "25006")]
    assert read_counter(admin) == 1


def test_a_statement_timeout_is_retried_and_ends_in_store_unavailable(postgres_url: str, make_engine) -> None:
    make_counter(make_engine(postgres_url))
    hurried = make_engine(with_options(postgres_url, "-c statement_timeout=50"))
    calls = []

    def slow_then_quick(conn: Connection) -> None:
        calls.append(1)
        if len(calls) == 1:
            conn.execute(text("SELECT pg_sleep(0.5)"))
        increment(conn)

    run_in_transaction(hurried, slow_then_quick, backoff=QUICK, sleep=no_sleep)
    assert len(calls) == 2 and read_counter(hurried) == 1

    def always_slow(conn: Connection) -> None:
        increment(conn)
        conn.execute(text("SELECT pg_sleep(0.5)"))

    with pytest.raises(StoreUnavailableError) as caught:
        run_in_transaction(hurried, always_slow, attempts=2, backoff=QUICK, sleep=no_sleep)
    assert caught.value.sqlstate == "57014" and read_counter(hurried) == 1


@contextmanager
def table_locked(engine: Engine, table: str) -> Iterator[threading.Event]:
    """An operator's session holding ``table`` in ACCESS EXCLUSIVE mode until the block ends."""
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with engine.connect() as conn, conn.begin():
            conn.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            locked.set()
            release.wait(60)

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(10), "the operator's session did not get its lock"
        yield release
    finally:
        release.set()
        holder.join(10)


def test_a_table_locked_past_the_lock_timeout_is_retried_once_then_handled_by_who_asks(
    postgres_url: str, make_engine
) -> None:
    make_counter(make_engine(postgres_url))
    waiting = make_engine(with_options(postgres_url, "-c lock_timeout=50"))
    calls = []

    def write(conn: Connection) -> None:
        calls.append(1)
        increment(conn)

    with table_locked(make_engine(postgres_url), "counter") as release:
        # Ten attempts allowed, two made: a second lock not granted is an outage, not contention.
        with pytest.raises(StoreUnavailableError) as caught:
            run_in_transaction(waiting, write, attempts=10, backoff=QUICK, sleep=no_sleep)
        assert caught.value.sqlstate == "55P03" and len(calls) == LOCK_TIMEOUT_ATTEMPTS == 2
        assert caught.value.attempts == 2
        assert "refusing locks (lock timeout) after 2 attempts" in str(caught.value)
        with pytest.raises(sa_exc.DBAPIError) as handled:  # who set its own lock_timeout: at once, unchanged
            run_in_transaction(waiting, write, handled=frozenset({"55P03"}), sleep=no_sleep)
        assert handled.value.orig.sqlstate == "55P03" and len(calls) == 3
        release.set()
    run_in_transaction(waiting, write, backoff=QUICK, sleep=no_sleep)  # released: it goes through
    assert read_counter(waiting) == 1


@contextmanager
def row_locked(engine: Engine) -> Iterator[Callable[[], None]]:
    """Another transaction holding the counter's row (``FOR UPDATE``, as the
    server's own claims and result batches hold theirs); the callable
    yielded ends it (committed) and returns once it has."""
    locked, release = threading.Event(), threading.Event()

    def hold_row() -> None:
        with engine.connect() as conn, conn.begin():
            conn.execute(text("SELECT n FROM counter WHERE id = 1 FOR UPDATE"))
            locked.set()
            release.wait(60)

    holder = threading.Thread(target=hold_row)

    def free() -> None:
        release.set()
        holder.join(10)
        assert not holder.is_alive(), "the other transaction did not end"

    holder.start()
    try:
        assert locked.wait(10), "the other transaction did not get the row"
        yield free
    finally:
        free()


def test_a_row_held_past_two_lock_timeouts_by_another_transaction_is_waited_for(
    postgres_url: str, make_engine
) -> None:
    """The server's own contention is not an outage: a row another
    transaction holds through two lock timeouts (a slow claim batch under a
    loaded database) is tried again, up to ROW_LOCK_ATTEMPTS, and the write
    goes through once the row is free; held for good, the store is
    unavailable after those attempts, not two (and not ten)."""
    make_counter(make_engine(postgres_url))
    waiting = make_engine(with_options(postgres_url, "-c lock_timeout=50"))
    holder = make_engine(postgres_url)
    calls, events = [], []

    with row_locked(holder) as free:
        def write(conn: Connection) -> None:
            calls.append(1)
            if len(calls) == LOCK_TIMEOUT_ATTEMPTS + 2:  # two attempts past the old budget: the holder commits
                free()
            increment(conn)

        run_in_transaction(waiting, write, backoff=QUICK, sleep=no_sleep, on_retry=events.append)
    assert len(calls) == LOCK_TIMEOUT_ATTEMPTS + 2
    assert [(e.kind, e.sqlstate) for e in events] == [(ErrorKind.REFUSED, "55P03")] * (LOCK_TIMEOUT_ATTEMPTS + 1)
    assert read_counter(waiting) == 1

    calls.clear()
    with row_locked(holder):
        with pytest.raises(StoreUnavailableError) as caught:
            run_in_transaction(waiting, lambda conn: (calls.append(1), increment(conn)), backoff=QUICK, sleep=no_sleep)
    assert caught.value.sqlstate == "55P03" and len(calls) == ROW_LOCK_ATTEMPTS == caught.value.attempts
    assert read_counter(waiting) == 1


def test_a_table_lock_awaited_is_an_outage_as_one_held(postgres_url: str, make_engine) -> None:
    """An operator's LOCK TABLE still queued (behind a long reader) stops
    the store's statements as one granted does, so a wait behind it is an
    outage after two attempts, not row contention tried six times."""
    make_counter(admin := make_engine(postgres_url))
    waiting = make_engine(with_options(postgres_url, "-c lock_timeout=50"))
    reading, queued, done = threading.Event(), threading.Event(), threading.Event()

    def long_reader() -> None:
        with admin.connect() as conn, conn.begin():
            conn.execute(text("SELECT n FROM counter"))
            reading.set()
            done.wait(60)

    def operator() -> None:
        with admin.connect() as conn, conn.begin():
            queued.set()
            conn.execute(text("LOCK TABLE counter IN ACCESS EXCLUSIVE MODE"))

    threads = [threading.Thread(target=long_reader), threading.Thread(target=operator)]
    threads[0].start()
    try:
        assert reading.wait(10)
        threads[1].start()
        assert queued.wait(10)
        deadline = time.monotonic() + 30
        while not run_in_transaction(admin, lambda c: c.execute(text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND mode = 'AccessExclusiveLock' "
            "AND NOT granted")).scalar_one()):
            assert time.monotonic() < deadline, "the operator's LOCK TABLE never queued"
            time.sleep(0.01)  # polling another session's state; nothing to await
        calls = []
        with pytest.raises(StoreUnavailableError) as caught:
            run_in_transaction(waiting, lambda conn: (calls.append(1), increment(conn)), backoff=QUICK,
                               sleep=no_sleep)
        assert caught.value.sqlstate == "55P03" and len(calls) == LOCK_TIMEOUT_ATTEMPTS
    finally:
        done.set()
        for thread in threads:
            thread.join(10)
    assert read_counter(waiting) == 0


def test_the_engines_lock_limits_bind_its_sessions_and_an_operators_option_wins(
    postgres_url: str, make_engine
) -> None:
    show = lambda c: (c.exec_driver_sql("SHOW lock_timeout").scalar(),  # noqa: E731
                      c.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar(),
                      c.exec_driver_sql("SHOW jit").scalar())
    assert run_in_transaction(make_engine(postgres_url), show) == ("0", "0", "off")  # the database's own
    limited = make_engine(postgres_url, lock_timeout=0.25, idle_in_transaction_timeout=30)
    assert run_in_transaction(limited, show) == ("250ms", "30s", "off")
    # What the operator wrote in the URL wins; the other limit is still set.
    theirs = make_engine(with_options(postgres_url, "-c lock_timeout=7s"), lock_timeout=0.25,
                         idle_in_transaction_timeout=30)
    assert run_in_transaction(theirs, show) == ("7s", "30s", "off")
    # 0 leaves a limit to the database.
    assert run_in_transaction(make_engine(postgres_url, lock_timeout=0, idle_in_transaction_timeout=0), show) == (
        "0", "0", "off")


def test_the_engines_lock_timeout_makes_a_locked_table_an_outage_and_writes_nothing(
    postgres_url: str, make_engine
) -> None:
    """A table an operator locked: with the engine's own ``lock_timeout``
    (none set for the role or in the URL) the transaction ends in
    StoreUnavailableError after two waits, not when the lock goes; nothing
    written; after the lock it goes through once."""
    make_counter(make_engine(postgres_url))
    limited = make_engine(postgres_url, lock_timeout=0.05)
    calls = []

    def write(conn: Connection) -> None:
        calls.append(1)
        increment(conn)

    with table_locked(make_engine(postgres_url), "counter"):
        with pytest.raises(StoreUnavailableError) as caught:
            run_in_transaction(limited, write, backoff=QUICK, sleep=no_sleep)
        assert caught.value.sqlstate == "55P03" and len(calls) == 2
        assert "refusing locks (lock timeout)" in str(caught.value)
        assert status_for(caught.value)[0] is grpc.StatusCode.UNAVAILABLE
    assert read_counter(limited) == 0  # nothing the refused attempts wrote
    run_in_transaction(limited, write, backoff=QUICK, sleep=no_sleep)
    assert read_counter(limited) == 1


def test_a_session_left_idle_in_a_transaction_is_ended_and_its_locks_go(postgres_url: str, make_engine) -> None:
    """A server stalled halfway through a transaction (a thread starved, a
    process stopped) holds its locks no longer than the engine's
    ``idle_in_transaction_timeout``: the database ends the session."""
    make_counter(make_engine(postgres_url))
    stalled = make_engine(postgres_url, idle_in_transaction_timeout=0.2)
    watcher = make_engine(postgres_url)
    with stalled.connect() as conn:
        conn.begin()
        conn.execute(text("LOCK TABLE counter IN ACCESS EXCLUSIVE MODE"))
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        deadline = time.monotonic() + 30
        while True:  # polling another session's state: the database ends it, nothing here signals
            with watcher.connect() as probe:
                alive = probe.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"),
                                      {"pid": pid}).scalar()
            if not alive:
                break
            assert time.monotonic() < deadline, "the idle session was not ended"
            time.sleep(0.05)
        with pytest.raises(sa_exc.DBAPIError):  # the transaction is gone with its session
            conn.execute(text("SELECT 1"))
    run_in_transaction(watcher, increment, backoff=QUICK, sleep=no_sleep)  # the lock went with it
    assert read_counter(watcher) == 1


def ended(watcher: Engine, pid: int) -> None:
    """Wait (at most 30 s) until the database has ended session ``pid``."""
    deadline = time.monotonic() + 30
    while True:  # polling another session's state: the database ends it, nothing here signals
        with watcher.connect() as probe:
            if not probe.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}).scalar():
                return
        assert time.monotonic() < deadline, "the idle session was not ended"
        time.sleep(0.05)


@pytest.mark.parametrize(("woken_at", "retried_as"), [
    ("its COMMIT", (ErrorKind.CONNECTION, None)),  # never sent: the session's end is already on the socket
    ("its next statement", (ErrorKind.REFUSED, "25P03")),  # answered by the ended session's error
])
def test_a_transaction_whose_session_ended_idle_is_retried_not_ambiguous(
    postgres_url: str, make_engine, woken_at: str, retried_as: tuple
) -> None:
    """A server frozen in the middle of a transaction (SIGSTOP, a VM stall)
    wakes with its session ended by the idle limit, and nothing of the
    transaction applied: it is retried, even when not idempotent, neither
    reported as a commit in doubt nor as a fatal error, and commits once."""
    make_counter(make_engine(postgres_url))
    frozen = make_engine(postgres_url, idle_in_transaction_timeout=0.2)
    watcher = make_engine(postgres_url)
    calls, events = [], []

    def write(conn: Connection) -> None:
        calls.append(1)
        increment(conn)
        if len(calls) == 1:  # frozen until its session is gone
            ended(watcher, conn.exec_driver_sql("SELECT pg_backend_pid()").scalar())
            if woken_at == "its next statement":
                increment(conn)

    run_in_transaction(frozen, write, backoff=QUICK, sleep=no_sleep, on_retry=events.append)
    assert [(e.kind, e.sqlstate) for e in events] == [retried_as] and len(calls) == 2
    assert read_counter(watcher) == 1


def test_a_refusal_answering_commit_is_retried_not_ambiguous(postgres_url: str, make_engine) -> None:
    """An error the server answered at COMMIT (here 25006 from a deferred
    trigger that runs in it, as a hot standby's refusal would read) rolled
    the transaction back: unlike a connection lost during COMMIT, it is
    retried even when the transaction is not idempotent."""
    engine = make_engine(postgres_url)
    make_counter(engine)
    run_in_transaction(engine, lambda c: c.exec_driver_sql(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF current_setting('tw.refuse', true) = 'on' THEN "
        "RAISE EXCEPTION 'cannot execute UPDATE in a read-only transaction' USING ERRCODE = '25006'; END IF; "
        "RETURN NULL; END $$; "
        "CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER UPDATE ON counter DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION refuse()"
    ))  # fmt: skip
    calls, events, committing = [], [], []

    @event.listens_for(engine, "commit")
    def _committing(conn: Connection) -> None:
        committing.append(len(calls))

    def write(conn: Connection) -> None:
        calls.append(1)
        if len(calls) == 1:
            conn.exec_driver_sql("SET LOCAL tw.refuse = on")
        increment(conn)  # its trigger runs in COMMIT

    run_in_transaction(engine, write, backoff=QUICK, sleep=no_sleep, on_retry=events.append)
    assert [(e.kind, e.sqlstate) for e in events] == [(ErrorKind.REFUSED, "25006")]
    assert committing == [1, 2] and read_counter(engine) == 1


def test_a_role_out_of_connections_is_store_unavailable_not_ambiguous(
    postgres_url: str, make_engine
) -> None:
    admin = make_engine(postgres_url)
    make_counter(admin)
    role = f"tw_limited_{uuid.uuid4().hex[:12]}"
    url = make_url(postgres_url)
    run_in_transaction(admin, lambda c: c.exec_driver_sql(
        f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 1; GRANT SELECT, UPDATE ON counter TO "{role}"'
    ))  # fmt: skip
    try:
        limited = url.set(username=role, password=None).render_as_string(hide_password=False)
        with psycopg.connect(limited.replace("postgresql+psycopg", "postgresql")):  # the role's one slot, taken
            engine = make_engine(limited, connect_timeout=2)
            with pytest.raises(StoreUnavailableError) as caught:
                run_in_transaction(engine, increment, attempts=2, backoff=QUICK, sleep=no_sleep)
            assert "too many connections" in str(caught.value.__cause__)
        run_in_transaction(engine, increment, backoff=QUICK, sleep=no_sleep)  # the slot is back
        assert read_counter(admin) == 1
        engine.dispose()
    finally:
        run_in_transaction(admin, lambda c: c.exec_driver_sql(
            f'REVOKE ALL ON counter FROM "{role}"; DROP ROLE "{role}"'
        ))  # fmt: skip



async def test_retentions_own_lock_timeout_is_not_retried_as_an_outage(postgres_url: str, make_engine) -> None:
    """Retention sets its own ``lock_timeout`` around partition DDL and
    answers False when the lock is not granted (tried next pass): that 55P03
    is ``handled``, one attempt, not ten as an outage's."""
    engine = make_engine(postgres_url)
    migrate(engine)
    store = RetentionStore(engine, FakeClock(datetime(2024, 3, 1, 6, tzinfo=timezone.utc), autojump=True))
    day = to_us(datetime(2024, 3, 2, tzinfo=timezone.utc))
    assert await store.create_partition(day)
    operator = make_engine(postgres_url)
    with operator.connect() as conn, conn.begin():
        conn.execute(text("LOCK TABLE attempts IN ACCESS EXCLUSIVE MODE"))
        assert await store.detach_partition(day, lock_timeout=0.05) is False
    assert store.retries["55P03"] == 0
    assert await store.detach_partition(day, lock_timeout=0.05) is True
