"""Attempts partitioned by UTC day on PostgreSQL (migration 0013) and their
upkeep by retention: the migration keeps every row, rows land in their
day's partition, a repeated attempt row of one delivery still conflicts, a
pass makes the coming days' partitions and rolls up and drops the days past
the window (each attempt counted once, also across an interrupted walk),
and old rows of the default partition are pruned. On SQLite nothing of this
exists and the table is as before."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from importlib import import_module

import pytest
import sqlalchemy as sa

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.store import capabilities, create_store_engine, migrate
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.maintenance.retention import Retention, RetentionConfig
from tickwheel_server.policy.rollups import DAY_US, partition_name
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.tables import attempt_rollups, attempts, executions

START = datetime(2024, 3, 1, 6, tzinfo=timezone.utc)
DAY0 = to_us(datetime(2024, 3, 1, tzinfo=timezone.utc))
WINDOW = timedelta(days=30)


def add(engine, ident: str, *, job: str = "job_a", status: str = "running", finished: int | None = None,
        tries: list[tuple[str, int, int]] = ()) -> None:
    """An execution (``<job>:<ident>``) and its attempts: (status, started µs, lateness µs) each."""
    nominal = tries[0][1] if tries else DAY0
    with engine.begin() as conn:
        conn.execute(executions.insert().values(
            id=f"{job}:{ident}", job_id=job, tenant="acme", partition=0, origin="scheduled", nominal_at=nominal,
            due_at=nominal, ready_at=nominal, attempt=max(1, len(tries)), delivery=max(1, len(tries)), status=status,
            owner=None, worker_id=None, handler="echo", missed_count=1, reap_count=0, payload=b"p", error="",
            dead_reason="", created_at=nominal, finished_at=finished,
        ))  # fmt: skip
        for number, (outcome, started, lateness) in enumerate(tries, start=1):
            conn.execute(attempts.insert().values(
                execution_id=f"{job}:{ident}", attempt=number, delivery=number, status=outcome, started_at=started,
                finished_at=started + 1, lateness_us=lateness, worker_id="w1", error="",
            ))  # fmt: skip


def where_rows_are(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text(
            "SELECT tableoid::regclass::text, count(*) FROM attempts GROUP BY 1"
        )).all())


def tables(engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.text(
            "SELECT relname FROM pg_class WHERE relname LIKE 'attempts%' AND relkind IN ('r', 'p')"
        )).scalars())


def retention(engine, clock, **config) -> Retention:
    return Retention(
        RetentionStore(engine, clock), AlertStore(engine, clock), MemoryLeaseStore(clock), lambda: None, clock,
        server_id="s1", config=RetentionConfig(pause=0, **config),
    )


def postgres_only(engine) -> None:
    if not capabilities(engine).declarative_partitioning:
        pytest.skip("attempts are partitioned on PostgreSQL only")


# --------------------------------------------------------------------------- the migration


def test_attempts_are_partitioned_by_day_on_postgres_only(migrated_engine) -> None:
    inspector = sa.inspect(migrated_engine)
    key = inspector.get_pk_constraint("attempts")["constrained_columns"]
    if not capabilities(migrated_engine).declarative_partitioning:
        assert key == ["execution_id", "attempt", "delivery"]
        assert "attempt_partition_walks" not in inspector.get_table_names()
        return
    assert key == ["execution_id", "attempt", "delivery", "started_at"]
    with migrated_engine.connect() as conn:
        strategy, column = conn.execute(sa.text(
            "SELECT p.partstrat, a.attname FROM pg_partitioned_table p "
            "JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0] "
            "WHERE p.partrelid = 'attempts'::regclass"
        )).one()
        children = set(conn.execute(sa.text(
            "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'attempts'::regclass"
        )).scalars())
        today = conn.execute(sa.text("SELECT CAST(extract(epoch FROM now()) * 1000000 AS BIGINT)")).scalar_one()
    assert (strategy, column) == ("r", "started_at")
    today -= today % DAY_US
    assert {"attempts_default", *(partition_name(today + n * DAY_US) for n in range(-1, 4))} <= children


def test_the_migration_keeps_every_existing_row(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        migrate(engine, target=12)
        rows = [
            dict(execution_id=f"job_{n % 3}:{n}", attempt=1 + n % 2, delivery=1 + n % 4, status="succeeded",
                 started_at=DAY0 + n * (DAY_US // 3), finished_at=DAY0 + n * (DAY_US // 3) + 5, lateness_us=n,
                 worker_id="w", error=f"e{n}", waited_us=n * 2)
            for n in range(20)
        ]  # fmt: skip
        with engine.begin() as conn:
            conn.execute(attempts.insert(), rows)
        migrate(engine)
        with engine.connect() as conn:
            query = sa.select(*(attempts.c[name] for name in rows[0])).order_by(attempts.c.started_at)
            kept = [dict(row._mapping) for row in conn.execute(query)]
        assert kept == rows
        if capabilities(engine).declarative_partitioning:
            spread = where_rows_are(engine)
            assert "attempts_default" not in spread
            assert spread == {partition_name(DAY0 + d * DAY_US): 3 for d in range(6)} | {
                partition_name(DAY0 + 6 * DAY_US): 2
            }
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_url")


# --------------------------------------------------------------------------- rows and keys


async def test_rows_land_in_their_day_and_a_repeated_attempt_still_conflicts(migrated_engine) -> None:
    clock = FakeClock(START, autojump=True)
    first = await retention(migrated_engine, clock).run_pass()
    add(migrated_engine, "e1", tries=[("failed", DAY0 + 5, 1), ("failed", DAY0 + DAY_US + 5, 2),
                                      ("succeeded", DAY0 + 2 * DAY_US + 5, 3)])  # fmt: skip
    repeat = dict(execution_id="job_a:e1", attempt=2, delivery=2, status="succeeded", started_at=DAY0 + DAY_US + 5,
                  finished_at=DAY0 + DAY_US + 9, lateness_us=2, worker_id="w2", error="")  # fmt: skip
    with pytest.raises(sa.exc.IntegrityError), migrated_engine.begin() as conn:
        conn.execute(attempts.insert().values(**repeat))
    if not capabilities(migrated_engine).declarative_partitioning:
        assert first.partitions_created == 0
        return
    assert first.partitions_created == 4  # today and the next 3 days
    assert where_rows_are(migrated_engine) == {partition_name(DAY0 + d * DAY_US): 1 for d in range(3)}
    assert (await retention(migrated_engine, clock).run_pass()).partitions_created == 0


# --------------------------------------------------------------------------- retention


async def test_a_pass_rolls_up_and_drops_the_days_past_the_window(migrated_engine) -> None:
    postgres_only(migrated_engine)
    clock = FakeClock(START, autojump=True)
    await retention(migrated_engine, clock).run_pass()  # today's and the next days' partitions
    # Day 0: a running execution's old attempts, and an ended execution's.
    # Day 1: attempts of the same execution that stay. Before day 0: no partition, so the default one.
    add(migrated_engine, "e1", tries=[("failed", DAY0 + 10, 100), ("lost", DAY0 + 20, 200),
                                      ("failed", DAY0 + DAY_US + 30, 300)])  # fmt: skip
    add(migrated_engine, "e2", job="job_b", status="succeeded", finished=DAY0 + 50,
        tries=[("failed", DAY0 + 30, 10), ("succeeded", DAY0 + 40, 20)])
    for n in range(5):
        add(migrated_engine, f"e3{n}", tries=[("succeeded", DAY0 + 1000 + n, 5)])
    add(migrated_engine, "e4", job="job_c", tries=[("failed", DAY0 - 3 * DAY_US, 7)])

    clock.set(START + WINDOW + timedelta(hours=20))  # the cutoff is inside day 1 (06:00 + 20 h on day 0 + 30)
    result = await retention(migrated_engine, clock, batch=2).run_pass()

    names = tables(migrated_engine)
    assert partition_name(DAY0) not in names
    assert partition_name(DAY0 + DAY_US) in names
    new_today = to_us(clock.now()) - to_us(clock.now()) % DAY_US
    assert {partition_name(new_today + n * DAY_US) for n in range(4)} <= names
    assert result.partitions_dropped == 1 and result.partitions_created == 4
    assert result.attempts == 2 + 2 + 5 + 1  # day 0's rows and the default partition's old one, once each
    assert result.executions == 1  # e2 ended before the cutoff; its attempts had gone with day 0
    with migrated_engine.connect() as conn:
        left = conn.execute(sa.select(attempts.c.execution_id, attempts.c.attempt)).all()
        walks = conn.execute(sa.text("SELECT count(*) FROM attempt_partition_walks")).scalar_one()
        rollups = {(row.job_id, row.day): row for row in conn.execute(sa.select(attempt_rollups))}
        kept = set(conn.execute(sa.select(executions.c.id)).scalars())
    assert left == [("job_a:e1", 3)]
    assert walks == 0
    assert "job_a:e1" in kept and "job_b:e2" not in kept
    assert (rollups[("job_a", DAY0)].runs, rollups[("job_a", DAY0)].failures) == (7, 2)
    assert (rollups[("job_b", DAY0)].runs, rollups[("job_b", DAY0)].failures) == (2, 1)
    assert rollups[("job_b", DAY0)].tenant == "acme"
    assert rollups[("job_c", DAY0 - 3 * DAY_US)].runs == 1


async def test_an_interrupted_rollup_walk_is_finished_by_the_next_pass_counting_each_row_once(
    migrated_engine,
) -> None:
    postgres_only(migrated_engine)
    clock = FakeClock(START, autojump=True)
    await retention(migrated_engine, clock).run_pass()
    for n in range(9):
        outcome = "failed" if n % 3 == 0 else "succeeded"
        add(migrated_engine, f"e{n}", job=f"job_{n % 2}", tries=[(outcome, DAY0 + n, n)])
    clock.set(START + WINDOW + timedelta(days=1))
    batches = iter(range(100))
    stopped = await retention(migrated_engine, clock, batch=2).run_pass(stop_when=lambda: next(batches) >= 1)
    assert stopped.partitions_dropped == 0 and stopped.attempts == 4  # two batches, then the leadership went
    assert partition_name(DAY0) in tables(migrated_engine)  # detached, walk half done
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT rows FROM attempt_partition_walks")).scalar_one() == 4
    finished = await retention(migrated_engine, clock, batch=2).run_pass()
    assert finished.partitions_dropped == 1 and finished.attempts == 5
    assert partition_name(DAY0) not in tables(migrated_engine)
    with migrated_engine.connect() as conn:
        runs = dict(conn.execute(sa.select(attempt_rollups.c.job_id, attempt_rollups.c.runs)).all())
        failures = conn.execute(sa.select(sa.func.sum(attempt_rollups.c.failures))).scalar_one()
    assert runs == {"job_0": 5, "job_1": 4}
    assert failures == 3


async def test_a_day_holding_rows_in_the_default_partition_gets_no_partition_until_they_go(migrated_engine) -> None:
    postgres_only(migrated_engine)
    clock = FakeClock(START, autojump=True)
    tomorrow = DAY0 + DAY_US
    add(migrated_engine, "e1", tries=[("succeeded", tomorrow + 5, 1)])  # before any partition for that day
    result = await retention(migrated_engine, clock).run_pass()
    assert result.partitions_created == 3  # today, and the days after tomorrow
    assert partition_name(tomorrow) not in tables(migrated_engine)
    assert where_rows_are(migrated_engine) == {"attempts_default": 1}
