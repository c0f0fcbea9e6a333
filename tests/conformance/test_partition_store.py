"""Partition fencing epochs on SQLite and PostgreSQL (SERIALIZABLE, as
CockroachDB runs): raises never lower an epoch, the in-transaction check
catches a deposed owner, and a raise racing a claim either waits for it or
makes it retry and refuse."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator, Mapping

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tickwheel_server.store.transactions import RetryEvent, run_in_transaction
from tickwheel_server.store.partitions import PartitionStore, check_epochs, raise_epochs_in

PARTITION = 3


@pytest.fixture
def store(migrated_engine, clock) -> PartitionStore:
    return PartitionStore(migrated_engine, clock)


@pytest.fixture
def probe(migrated_engine: Engine) -> Engine:
    """A table standing in for the dispatcher's writes (executions, jobs)."""
    with migrated_engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE claim_probe (partition INTEGER NOT NULL, epoch BIGINT NOT NULL)"))
    return migrated_engine


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
        yield executor


def claim(conn: Connection, owned: Mapping[int, int]) -> set[int]:
    """What the dispatcher's claim transaction does: check, then write only
    for the partitions still ours. Returns the stale ones."""
    stale = check_epochs(conn, owned)
    for partition, epoch in owned.items():
        if partition not in stale:
            conn.execute(sa.text("INSERT INTO claim_probe VALUES (:p, :e)"), {"p": partition, "e": epoch})
    return stale


def probe_rows(engine: Engine) -> list[tuple[int, int]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(sa.text("SELECT partition, epoch FROM claim_probe ORDER BY epoch"))]


# --------------------------------------------------------------------------- raising


async def test_raise_epoch_only_ever_raises(store: PartitionStore) -> None:
    assert await store.epochs([PARTITION]) == {}
    assert await store.max_epoch() == 0
    assert await store.raise_epoch(PARTITION, 10, "srv-a") is True
    assert await store.raise_epoch(PARTITION, 10, "srv-a") is True  # the same ownership again: idempotent
    assert await store.raise_epoch(PARTITION, 7, "srv-stale") is False  # a deposed owner cannot lower it
    [row] = await store.rows([PARTITION])
    assert (row.partition, row.epoch, row.owner) == (PARTITION, 10, "srv-a")
    assert await store.raise_epoch(PARTITION, 12, "srv-b") is True
    assert await store.epochs([PARTITION, 4]) == {PARTITION: 12}
    assert (await store.rows())[0].owner == "srv-b"
    assert await store.max_epoch() == 12


async def test_raise_epochs_in_one_transaction_reports_which_took(store: PartitionStore) -> None:
    await store.raise_epochs({1: 50, 2: 60}, "srv-b")
    took = await store.raise_epochs({0: 40, 1: 40, 2: 60, 3: 41}, "srv-a")
    assert took == {0, 2, 3}
    assert await store.epochs() == {0: 40, 1: 50, 2: 60, 3: 41}
    assert await store.raise_epochs({}, "srv-a") == set()
    with pytest.raises(ValueError):
        await store.raise_epochs({0: 0}, "srv-a")


# --------------------------------------------------------------------------- checking


async def test_check_epochs_finds_stale_and_missing_partitions(store: PartitionStore, migrated_engine: Engine) -> None:
    await store.raise_epochs({1: 10, 2: 20}, "srv-a")
    await store.raise_epoch(2, 25, "srv-b")  # srv-a was deposed from partition 2

    def check(owned: dict[int, int]) -> set[int]:
        return run_in_transaction(migrated_engine, lambda conn: check_epochs(conn, owned))

    assert check({1: 10, 2: 20}) == {2}
    assert check({2: 25}) == set()
    assert check({1: 9}) == {1}  # an epoch we hold must be the stored one, not merely lower
    assert check({7: 70}) == {7}  # never raised: not ours to write
    assert check({}) == set()


async def test_a_deposed_owner_writes_nothing(store: PartitionStore, probe: Engine) -> None:
    await store.raise_epoch(PARTITION, 10, "srv-a")
    assert run_in_transaction(probe, lambda conn: claim(conn, {PARTITION: 10})) == set()
    await store.raise_epoch(PARTITION, 11, "srv-b")
    # srv-a has not noticed yet and claims with the epoch it holds.
    assert run_in_transaction(probe, lambda conn: claim(conn, {PARTITION: 10})) == {PARTITION}
    assert run_in_transaction(probe, lambda conn: claim(conn, {PARTITION: 11})) == set()
    assert probe_rows(probe) == [(PARTITION, 10), (PARTITION, 11)]


# --------------------------------------------------------------------------- racing


def test_a_raise_waits_for_a_claim_that_has_checked(
    store: PartitionStore, probe: Engine, pool: concurrent.futures.ThreadPoolExecutor, clock
) -> None:
    """Claim first: the new owner's raise waits until the claim is over, so the
    claim's writes come before the new epoch in real time too."""
    run_in_transaction(probe, lambda conn: raise_epochs_in(conn, {PARTITION: 10}, "srv-a", 0))
    with probe.connect() as conn:
        transaction = conn.begin()
        assert claim(conn, {PARTITION: 10}) == set()  # checked (share lock held), write made, not committed
        raising = pool.submit(run_in_transaction, probe, lambda c: raise_epochs_in(c, {PARTITION: 11}, "srv-b", 0))
        with pytest.raises(concurrent.futures.TimeoutError):
            raising.result(timeout=0.3)  # shows that it does not finish while the claim is open
        transaction.commit()
    assert raising.result(timeout=10) == {PARTITION}
    assert probe_rows(probe) == [(PARTITION, 10)]
    assert run_in_transaction(probe, lambda conn: check_epochs(conn, {PARTITION: 10})) == {PARTITION}


def waiting_on_a_lock(engine: Engine, timeout: float = 30.0) -> None:
    """Until a PostgreSQL session of ``engine``'s database waits on a lock."""
    deadline = time.monotonic() + timeout
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    while True:
        with engine.connect() as conn:
            if conn.execute(query).scalar_one():
                return
        assert time.monotonic() < deadline, "nothing waited on a lock"
        time.sleep(0.01)


@pytest.mark.postgres
def test_a_claim_racing_an_uncommitted_raise_retries_and_refuses(
    postgres_url: str, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    """Raise first, not yet committed: the claim's check waits on the row, then
    fails with 40001 (its snapshot predates the raise), and its retry sees the
    new epoch and writes nothing."""
    from tickwheel_server.store import create_store_engine, migrate

    engine = create_store_engine(postgres_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE claim_probe (partition INTEGER NOT NULL, epoch BIGINT NOT NULL)"))
        run_in_transaction(engine, lambda conn: raise_epochs_in(conn, {PARTITION: 10}, "srv-a", 0))
        retries: list[RetryEvent] = []
        with engine.connect() as conn:
            transaction = conn.begin()
            conn.execute(sa.text("SELECT 1"))
            assert raise_epochs_in(conn, {PARTITION: 11}, "srv-b", 0) == {PARTITION}  # row updated, not committed
            claiming = pool.submit(
                run_in_transaction, engine, lambda c: claim(c, {PARTITION: 10}), on_retry=retries.append
            )
            # Blocked on the row lock (however slowly a loaded machine starts
            # its thread): committed earlier, the claim would not race the raise.
            waiting_on_a_lock(engine)
            assert not claiming.done()
            transaction.commit()
        assert claiming.result(timeout=10) == {PARTITION}
        assert [event.sqlstate for event in retries] == ["40001"]
        assert probe_rows(engine) == []
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_concurrent_raises_of_one_partition_keep_the_highest(
    postgres_url: str, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    from tickwheel_server.store import create_store_engine, migrate

    engine = create_store_engine(postgres_url)
    try:
        migrate(engine)
        epochs = list(range(100, 140))

        def raise_to(epoch: int) -> set[int]:
            return run_in_transaction(engine, lambda c: raise_epochs_in(c, {PARTITION: epoch}, f"s{epoch}", 0))

        results = list(pool.map(raise_to, epochs))
        assert {PARTITION} in results  # at least the highest took
        assert run_in_transaction(engine, lambda c: check_epochs(c, {PARTITION: max(epochs)})) == set()
    finally:
        engine.dispose()
