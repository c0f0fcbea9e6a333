"""Retention on SQLite and PostgreSQL with a fake clock: what is pruned and
what is kept, the daily rollups of the attempts pruned (exact counts,
percentiles within the sketch's 1 %, the same whatever the batch size),
bounded batches, concurrent runners that count nothing twice, and one runner
per cluster."""

from __future__ import annotations

import asyncio
import math
import random
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.alerts.catalogue import NewAlert, dead_letter_alert, poison_alert
from tickwheel_server.lease.keys import RETENTION_KEY
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.maintenance.retention import Retention, RetentionConfig
from tickwheel_server.policy.rollups import DAY_US, LatenessSketch, day_of
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.errors import TransactionConflictError
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.tables import attempt_rollups, attempts, executions, skips

START = datetime(2024, 3, 1, tzinfo=timezone.utc)
WINDOW = timedelta(days=30)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START, autojump=True)


def add(
    engine, ident: str, *, job: str = "job_a", tenant: str = "acme", nominal: datetime, status: str = "succeeded",
    finished: datetime | None = None, tries: list[tuple[str, int]] = (), started: datetime | None = None,
) -> None:
    """An execution and its attempt rows: ``tries`` is (status, lateness µs) per attempt."""
    nominal_us = to_us(nominal)
    started_us = to_us(started or nominal)
    with engine.begin() as conn:
        conn.execute(executions.insert().values(
            id=ident, job_id=job, tenant=tenant, partition=0, origin="scheduled", nominal_at=nominal_us,
            due_at=nominal_us, ready_at=nominal_us, attempt=max(1, len(tries)), delivery=max(1, len(tries)),
            status=status, owner=None, worker_id=None, handler="echo", missed_count=1, reap_count=0, payload=b"p",
            error="", dead_reason="", created_at=nominal_us,
            finished_at=None if finished is None else to_us(finished),
        ))  # fmt: skip
        for number, (outcome, lateness) in enumerate(tries, start=1):
            conn.execute(attempts.insert().values(
                execution_id=ident, attempt=number, delivery=number, status=outcome, started_at=started_us + number,
                finished_at=started_us + number + 1, lateness_us=lateness, worker_id="w1", error="",
            ))  # fmt: skip


def ids(engine, table=executions) -> set[str]:
    column = table.c.id if table is not attempts else table.c.execution_id
    with engine.connect() as conn:
        return set(conn.execute(sa.select(column)).scalars())


def rollup_rows(engine) -> dict[tuple[str, int], sa.Row]:
    with engine.connect() as conn:
        return {(row.job_id, row.day): row for row in conn.execute(sa.select(attempt_rollups))}


def exact_quantile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


# --------------------------------------------------------------------------- pruning executions


async def test_only_executions_that_ended_before_the_cutoff_go_with_their_attempts(migrated_engine, clock) -> None:
    old = START - WINDOW - timedelta(days=2)
    cutoff = START - WINDOW
    add(migrated_engine, "old-ok", nominal=old, finished=old, tries=[("succeeded", 10)])
    add(migrated_engine, "old-dead", nominal=old, status="dead", finished=old, tries=[("failed", 5)] * 3)
    add(migrated_engine, "old-canceled", nominal=old, status="canceled", finished=old)
    add(migrated_engine, "old-running", nominal=old, status="running", tries=[])
    add(migrated_engine, "old-scheduled", nominal=old, status="scheduled")
    # Nominally old, but backfilled and finished inside the window: kept.
    add(migrated_engine, "old-recent-end", nominal=old, finished=START - timedelta(days=1),
        started=START - timedelta(days=1), tries=[("succeeded", 0)])
    # Ended before the cutoff but nominally inside the window (never happens
    # in practice; the nominal instant is what backfills deduplicate on).
    add(migrated_engine, "recent", nominal=cutoff + timedelta(seconds=1), finished=old, tries=[("succeeded", 1)])
    store = RetentionStore(migrated_engine, clock)

    batch = await store.prune_executions(cutoff, limit=100)

    # The walk reads ended executions only (executions_ended_tenant): four are nominally old.
    assert (batch.examined, batch.executions, batch.attempts, batch.next_key) == (4, 3, 4, None)
    assert ids(migrated_engine) == {"old-running", "old-scheduled", "old-recent-end", "recent"}
    assert ids(migrated_engine, attempts) == {"old-recent-end", "recent"}
    again = await store.prune_executions(cutoff, limit=100)
    assert (again.examined, again.executions) == (1, 0)


async def test_a_pruned_dead_letter_takes_its_open_alert_with_it(migrated_engine, clock) -> None:
    old = START - WINDOW - timedelta(days=1)
    for ident in ("dead-1", "poisoned", "dead-kept"):
        add(migrated_engine, ident, nominal=old if ident != "dead-kept" else START, status="dead",
            finished=old if ident != "dead-kept" else START, tries=[("failed", 0)])  # fmt: skip
    alerts = AlertStore(migrated_engine, clock)
    await alerts.raise_alert(dead_letter_alert(execution_id="dead-1", job_id="job_a", tenant="acme", reason="gave up"))
    await alerts.raise_alert(poison_alert(execution_id="poisoned", job_id="job_a", tenant="acme", reason="killed"))
    kept = await alerts.raise_alert(
        dead_letter_alert(execution_id="dead-kept", job_id="job_a", tenant="acme", reason="gave up")
    )
    batch = await RetentionStore(migrated_engine, clock, alerts).prune_executions(START - WINDOW)
    assert (batch.executions, batch.resolved) == (2, 2)
    assert [a.id for a in (await alerts.list()).alerts] == [kept.id]


async def test_attempts_roll_up_per_job_and_day_whatever_the_batch_size(migrated_engine, clock) -> None:
    rng = random.Random(3)
    day1 = START - WINDOW - timedelta(days=5)
    day2 = day1 + timedelta(days=1)
    expected: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for index in range(60):
        job = f"job_{index % 3}"
        day = day1 if index % 2 else day2
        at = day + timedelta(hours=index % 20)
        tries = [("failed" if rng.random() < 0.3 else "succeeded", rng.randrange(0, 5_000_000))
                 for _ in range(rng.randint(1, 3))]  # fmt: skip
        if index % 5 == 0:
            tries.append(("timed_out", rng.randrange(0, 10_000)) if index % 7 == 0 else ("lost", 0))
        add(migrated_engine, f"e{index:02d}", job=job, nominal=at, finished=at + timedelta(minutes=1), tries=tries)
        expected.setdefault((job, day_of(to_us(at))), []).extend(tries)
    store = RetentionStore(migrated_engine, clock)

    after, batches = None, 0
    while True:  # 7 executions a batch: every (job, day) is merged from several batches
        batch = await store.prune_executions(START - WINDOW, after=after, limit=7)
        batches += 1
        after = batch.next_key
        if after is None:
            break
    assert batches == 9 and ids(migrated_engine) == set() and ids(migrated_engine, attempts) == set()

    rows = rollup_rows(migrated_engine)
    assert set(rows) == set(expected)
    for key, tries in expected.items():
        row = rows[key]
        whole = LatenessSketch()
        for _, lateness in tries:
            whole.add(lateness)
        assert row.tenant == "acme"
        assert row.runs == len(tries)
        assert row.failures == sum(1 for status, _ in tries if status in ("failed", "timed_out", "lost"))
        assert LatenessSketch.from_json(row.lateness_sketch).counts == whole.counts
        latenesses = [lateness for _, lateness in tries]
        for q, column in ((0.5, row.lateness_p50_us), (0.9, row.lateness_p90_us), (0.99, row.lateness_p99_us)):
            assert column == whole.quantile(q)
            exact = exact_quantile(latenesses, q)
            assert abs(column - exact) <= max(1, 0.01 * exact)
    [newest, oldest] = await store.rollups("job_0")
    assert (newest.day, oldest.day) == (day2, day1)
    assert newest.runs == rows[("job_0", to_us(day2))].runs
    assert newest.lateness_p99 == timedelta(microseconds=rows[("job_0", to_us(day2))].lateness_p99_us)
    assert await store.rollups("job_0", since=day2) == [newest]


async def test_a_walk_goes_tenant_by_tenant_and_prunes_each_old_execution_once(migrated_engine, clock) -> None:
    """No index holds every tenant's ended executions (migration 0037): the
    walk reads each tenant's on ``executions_ended_tenant`` in turn,
    batches spanning tenants, a tenant with nothing old costing a probe; a
    batch visits at most ``limit`` tenants and says where to go on."""
    old = START - WINDOW - timedelta(days=1)
    tenants = ["t0", "t1 'quoted'", "t2", "t3", "t4", "t5"]
    for number, tenant in enumerate(tenants):
        count = 0 if tenant == "t2" else number + 1  # t2 only recent history
        for index in range(count):
            add(migrated_engine, f"{tenant}:old{index}", tenant=tenant, nominal=old + timedelta(seconds=index),
                finished=old + timedelta(seconds=index + 1), tries=[("failed", 1)])
        add(migrated_engine, f"{tenant}:recent", tenant=tenant, nominal=START, finished=START)
    add(migrated_engine, "t9:running", tenant="t9", nominal=old, status="running")
    store = RetentionStore(migrated_engine, clock)
    after, examined, keys = None, [], []
    while True:
        batch = await store.prune_executions(START - WINDOW, after=after, limit=2)
        assert batch.examined <= 2
        examined.append(batch.examined)
        keys.append(batch.next_key)
        after = batch.next_key
        if after is None:
            break
    expected_old = sum(0 if tenant == "t2" else number + 1 for number, tenant in enumerate(tenants))
    assert sum(examined) == expected_old  # each old execution read once, whichever batch
    assert ids(migrated_engine) == {f"{tenant}:recent" for tenant in tenants} | {"t9:running"}
    assert ids(migrated_engine, attempts) == set()
    assert [key[0] for key in keys[:-1]] == sorted(key[0] for key in keys[:-1])  # tenants in name order
    # A batch stops after `limit` tenants' ranges even when they had nothing to prune.
    for tenant in tenants:
        add(migrated_engine, f"{tenant}:old", tenant=tenant, nominal=START, finished=START)
    empty = await store.prune_executions(START - WINDOW, limit=2)
    assert (empty.examined, empty.next_key) == (0, (tenants[2], None, None))
    assert ids(migrated_engine) >= {f"{tenant}:old" for tenant in tenants}


async def test_a_walk_is_bounded_and_continues_past_what_ended_too_recently(migrated_engine, clock) -> None:
    old = START - WINDOW - timedelta(days=1)
    for index in range(5):
        add(migrated_engine, f"run{index}", nominal=old + timedelta(seconds=index), status="running")
    for index in range(3):
        add(migrated_engine, f"late{index}", nominal=old + timedelta(seconds=5 + index), finished=START,
            started=START, tries=[("succeeded", 0)])  # fmt: skip
    for index in range(5):
        add(migrated_engine, f"ok{index}", nominal=old + timedelta(seconds=10 + index), finished=old + timedelta(seconds=20))
    store = RetentionStore(migrated_engine, clock)
    first = await store.prune_executions(START - WINDOW, limit=4)
    # Running executions are not walked; those that ended inside the window are passed over.
    assert (first.examined, first.executions) == (4, 1)
    assert first.next_key[1:] == (to_us(old + timedelta(seconds=10)), "ok0")
    second = await store.prune_executions(START - WINDOW, after=first.next_key, limit=4)
    assert (second.examined, second.executions) == (4, 4)
    third = await store.prune_executions(START - WINDOW, after=second.next_key, limit=4)
    assert (third.examined, third.executions, third.next_key) == (0, 0, None)
    assert ids(migrated_engine) == {f"run{i}" for i in range(5)} | {f"late{i}" for i in range(3)}
    with pytest.raises(ValueError):
        await store.prune_executions(START, limit=0)


async def test_concurrent_runners_count_each_attempt_once(migrated_engine, clock) -> None:
    """Three runners at once over the same rows (what a leadership handover
    can briefly cause): they conflict, and a pass that keeps conflicting
    fails as a whole (TransactionConflictError, retried at the next
    interval), but no attempt is ever counted twice or lost."""
    old = START - WINDOW - timedelta(days=1)
    for index in range(40):
        add(migrated_engine, f"e{index:02d}", job=f"job_{index % 2}", nominal=old + timedelta(seconds=index),
            finished=old + timedelta(minutes=1), tries=[("succeeded", index), ("failed", 2 * index)])
    config = RetentionConfig(batch=3, pause=0)
    leases = MemoryLeaseStore(clock)
    alerts = AlertStore(migrated_engine, clock)
    runners = [
        Retention(RetentionStore(migrated_engine, clock), alerts, leases, lambda: None, clock, server_id=f"s{i}",
                  config=config)
        for i in range(3)
    ]  # fmt: skip
    outcomes = await asyncio.gather(*(runner.run_pass() for runner in runners), return_exceptions=True)
    for outcome in outcomes:
        assert not isinstance(outcome, Exception) or isinstance(outcome, TransactionConflictError), outcome
    await runners[0].run_pass()  # whatever the others left (a failed pass's committed batches stay done)
    assert ids(migrated_engine) == set() and ids(migrated_engine, attempts) == set()
    rows = rollup_rows(migrated_engine)
    assert sorted((key[0], row.runs, row.failures) for key, row in rows.items()) == [
        ("job_0", 40, 20), ("job_1", 40, 20)
    ]
    await leases.close()


# --------------------------------------------------------------------------- skips, rollups, alerts


async def test_skip_ranges_and_rollups_are_pruned_in_bounded_batches(migrated_engine, clock) -> None:
    cutoff = START - WINDOW
    with migrated_engine.begin() as conn:
        for index in range(5):
            to_at = to_us(cutoff - timedelta(hours=index + 1))
            conn.execute(skips.insert().values(
                id=f"old{index}", job_id="job_a", tenant="acme", from_at=to_at - 60_000_000, to_at=to_at,
                continues_at=None, count=2, reason="misfire", created_at=to_at))  # fmt: skip
        conn.execute(skips.insert().values(
            id="straddles", job_id="job_a", tenant="acme", from_at=to_us(cutoff) - 1, to_at=to_us(cutoff),
            continues_at=None, count=2, reason="overlap", created_at=0))  # fmt: skip
        for day in range(5):
            conn.execute(attempt_rollups.insert().values(
                job_id="job_a", day=day_of(to_us(START)) - (day + 399) * DAY_US, tenant="acme", runs=1, failures=0,
                lateness_p50_us=0, lateness_p90_us=0, lateness_p99_us=0, lateness_sketch="{}", updated_at=0))  # fmt: skip
    store = RetentionStore(migrated_engine, clock)
    assert [await store.prune_skips(cutoff, limit=2) for _ in range(4)] == [2, 2, 1, 0]
    assert ids(migrated_engine, skips) == {"straddles"}
    horizon = START - timedelta(days=400)
    assert [await store.prune_rollups(horizon, limit=2) for _ in range(3)] == [2, 1, 0]
    assert sorted(day for _, day in rollup_rows(migrated_engine)) == [day_of(to_us(START)) - d * DAY_US for d in (400, 399)]


async def test_a_pass_prunes_everything_past_the_window_as_the_clock_moves(migrated_engine) -> None:
    clock = FakeClock(START - timedelta(days=35))  # moves only when told; pauses between batches are zero
    for index in range(5):
        at = START - timedelta(days=10 * index + 1)
        add(migrated_engine, f"e{index}", nominal=at, finished=at + timedelta(seconds=1), tries=[("succeeded", 1000)])
    with migrated_engine.begin() as conn:
        conn.execute(skips.insert().values(
            id="s1", job_id="job_a", tenant="acme", from_at=to_us(START - timedelta(days=45)),
            to_at=to_us(START - timedelta(days=40)), continues_at=None, count=5, reason="job_paused", created_at=0))
    alerts = AlertStore(migrated_engine, clock)
    await alerts.raise_alert(NewAlert("k:old", "clock_skew", "warning", "old", server_id="s1"))
    await alerts.resolve("k:old")
    still_open = await alerts.raise_alert(NewAlert("k:open", "clock_skew", "warning", "still open", server_id="s2"))
    clock.set(START)
    leases = MemoryLeaseStore(clock)
    runner = Retention(RetentionStore(migrated_engine, clock), alerts, leases, lambda: None, clock, server_id="s1",
                       config=RetentionConfig(batch=2, pause=0))  # fmt: skip

    first = await runner.run_pass()
    # 31 and 41 days old: pruned; 1, 11, 21 days: kept.
    assert (first.executions, first.attempts, first.skips, first.alerts) == (2, 2, 1, 1)
    assert first.cutoff == START - WINDOW
    assert ids(migrated_engine) == {"e0", "e1", "e2"}
    assert [a.id for a in (await alerts.list(include_resolved=True, limit=10)).alerts] == [still_open.id]
    second = await runner.run_pass()
    assert (second.executions, second.skips, second.alerts) == (0, 0, 0)
    clock.advance(timedelta(days=10).total_seconds())
    third = await runner.run_pass()
    assert third.executions == 1 and ids(migrated_engine) == {"e0", "e1"}
    assert runner.passes == 3 and runner.last_pass == third
    assert sum(row.runs for row in rollup_rows(migrated_engine).values()) == 3
    await leases.close()


async def test_one_runner_per_cluster_and_another_takes_over(migrated_engine) -> None:
    clock = FakeClock(START)
    leases = MemoryLeaseStore(clock)
    sessions = [await leases.open_session(60), await leases.open_session(60)]
    alerts = AlertStore(migrated_engine, clock)
    config = RetentionConfig(interval=3600, pause=0)
    runners = [
        Retention(RetentionStore(migrated_engine, clock), alerts, leases, lambda s=s: s, clock, server_id=f"s{i}",
                  config=config)
        for i, s in enumerate(sessions)
    ]  # fmt: skip
    tasks = [asyncio.create_task(runner.run()) for runner in runners]
    try:
        async def until(condition) -> None:
            while not condition():
                await asyncio.sleep(0.01)

        await asyncio.wait_for(until(lambda: any(r.passes for r in runners)), 20)
        assert [r.leading for r in runners].count(True) == 1
        leader = 0 if runners[0].leading else 1
        assert (await leases.get(RETENTION_KEY)).lease == sessions[leader].id
        await sessions[leader].close()
        other = runners[1 - leader]
        await asyncio.wait_for(until(lambda: other.leading and other.passes == 1), 20)
        assert not runners[leader].leading
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await leases.close()


def test_settings_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="retention"):
        RetentionConfig(retention=timedelta(minutes=5))
    with pytest.raises(ValueError, match="rollup_retention"):
        RetentionConfig(retention=timedelta(days=30), rollup_retention=timedelta(days=7))
    with pytest.raises(ValueError, match="batch"):
        RetentionConfig(batch=0)


@pytest.mark.postgres
async def test_the_walk_is_an_index_range_scan_on_postgresql(postgres_url) -> None:
    """The statement a real batch sends (captured), explained with its own
    parameters over 20 000 executions, a tenth of them past the window, many
    sharing one nominal instant: a range scan of one tenant's part of
    executions_ended_tenant that starts at the cursor (a row comparison in
    the index condition) and stops at the LIMIT, with no Sort."""
    from sqlalchemy import event

    from tickwheel_server.store import create_store_engine, migrate

    engine = create_store_engine(postgres_url)
    try:
        migrate(engine)
        midnight = to_us(START - WINDOW - timedelta(days=1))
        rows = []
        for index in range(20_000):
            nominal = midnight if index < 2000 else to_us(START - timedelta(seconds=index))
            rows.append(dict(
                id=f"job_{index % 500:03d}:{index:05d}", job_id=f"job_{index % 500:03d}",
                tenant="t0" if index < 2000 else f"t{index % 20}",  # the group at one instant: one tenant's
                partition=0, origin="scheduled", nominal_at=nominal, due_at=nominal, ready_at=nominal, attempt=1,
                delivery=1, status="succeeded", owner=None, worker_id="w1", handler="echo", missed_count=1,
                reap_count=0, payload=b"p", error="", dead_reason="", created_at=nominal, finished_at=nominal + 1,
            ))  # fmt: skip
        with engine.begin() as conn:
            conn.execute(executions.insert(), rows)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE executions")
        captured: list[tuple[str, dict]] = []

        def capture(conn, cursor, statement, parameters, context, executemany) -> None:
            if statement.lstrip().startswith("SELECT") and "FROM executions" in statement:
                captured.append((statement, dict(parameters)))

        event.listen(engine, "before_cursor_execute", capture)
        try:
            batch = await RetentionStore(engine, FakeClock(START, autojump=True)).prune_executions(
                START - WINDOW, after=("t0", midnight, "job_000:00500"), limit=100
            )
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        assert batch.executions == 100
        [(statement, parameters)] = [c for c in captured if "ROW(" in c[0] or "(executions.nominal_at, executions.id) >" in c[0]]
        with engine.connect() as conn:
            plan = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters).scalar()[0]["Plan"]
            conn.rollback()
        nodes, stack = [], [plan]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.get("Plans", []))
        scans = [n for n in nodes if n.get("Relation Name") == "executions"]
        assert [n.get("Index Name") for n in scans] == ["executions_ended_tenant"], nodes
        assert not any(n["Node Type"] == "Sort" for n in nodes), nodes
        assert "ROW(nominal_at, id) >" in scans[0]["Index Cond"], scans[0]
        assert scans[0]["Actual Rows"] + scans[0].get("Rows Removed by Filter", 0) <= 100, scans[0]
    finally:
        engine.dispose()
