"""The reaper: executions stamped with a session that no longer exists are
requeued after the grace, live sessions' are not; on SQLite and PostgreSQL
with the in-process lease store and a fake clock."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.lease.keys import REAPER_KEY, SERVERS_PREFIX, session_name
from tickwheel_server.maintenance.reaper import Reaper
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import attempts, executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import ANY_ECHO, add_execution

GRACE = 10.0
TTL = 60


@pytest.fixture
def clock() -> FakeClock:
    """Time moves only when a test moves it (the sessions' renewals sleep, so
    an autojumping clock would run ahead while the store works)."""
    return FakeClock()


async def test_a_dead_sessions_executions_are_requeued_after_the_grace(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    for index in range(6):
        add_execution(migrated_engine, clock, f"e{index}")
    leases = MemoryLeaseStore(clock)
    alive = await leases.open_session(TTL)
    doomed = await leases.open_session(TTL)
    await leases.put(SERVERS_PREFIX + "a", "{}", session=alive)
    await leases.put(SERVERS_PREFIX + "b", "{}", session=doomed)
    store = ExecutionQueue(migrated_engine, clock)
    assert len(await store.handout.hand_out_ready(session_name(alive.id), clock.now(), ANY_ECHO, 3)) == 3
    assert len(await store.handout.hand_out_ready(session_name(doomed.id), clock.now(), ANY_ECHO, 3)) == 3
    requeued = []
    reaper = Reaper(store.requeues, leases, lambda: alive, clock, server_id="a", grace=GRACE, batch=2,
                    on_requeued=requeued.extend)
    assert await reaper.reap_once() == 0
    await doomed.close()  # server b is gone: its key with it
    assert await reaper.reap_once() == 0  # the grace starts now
    clock.advance(GRACE - 1)
    assert await reaper.reap_once() == 0
    clock.advance(1)
    assert await reaper.reap_once() == 3  # in batches of 2
    assert len(requeued) == 3
    with migrated_engine.connect() as conn:
        rows = conn.execute(sa.select(executions.c.status, executions.c.owner, executions.c.reap_count)).all()
        lost = conn.execute(sa.select(attempts.c.status, attempts.c.error)).all()
    assert sorted((r.status, r.owner) for r in rows) == sorted(
        [("running", session_name(alive.id))] * 3 + [("scheduled", None)] * 3
    )
    assert {r.reap_count for r in rows} == {0}  # a server's death does not count towards poison
    assert len(lost) == 3 and all(s == "lost" and "expired" in e for s, e in lost)
    await leases.close()


async def test_a_re_attached_execution_is_not_reaped(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    leases = MemoryLeaseStore(clock)
    survivor = await leases.open_session(TTL)
    await leases.put(SERVERS_PREFIX + "a", "{}", session=survivor)
    store = ExecutionQueue(migrated_engine, clock)
    [handed] = await store.handout.hand_out_ready("deadbeef", clock.now(), ANY_ECHO, 1)
    reaper = Reaper(store.requeues, leases, lambda: survivor, clock, server_id="a", grace=GRACE)
    await reaper.reap_once()
    clock.advance(GRACE / 2)
    await store.requeues.reattach(session_name(survivor.id), "w1", [("e1", handed.delivery)], tenants=("acme",))  # its worker came to a
    clock.advance(GRACE)
    assert await reaper.reap_once() == 0
    await leases.close()


async def test_one_reaper_per_cluster_and_another_takes_over(migrated_engine, clock) -> None:
    leases = MemoryLeaseStore(clock)
    first_session = await leases.open_session(TTL)
    second_session = await leases.open_session(TTL)
    store = ExecutionQueue(migrated_engine, clock)
    first = Reaper(store.requeues, leases, lambda: first_session, clock, server_id="a", grace=GRACE, interval=0.5)
    second = Reaper(store.requeues, leases, lambda: second_session, clock, server_id="b", grace=GRACE, interval=0.5)
    tasks = [asyncio.create_task(first.run()), asyncio.create_task(second.run())]
    try:
        for _ in range(100):
            await asyncio.sleep(0)
            if first.leading or second.leading:
                break
        await asyncio.sleep(0.05)
        assert [first.leading, second.leading].count(True) == 1
        leader, other = (first, second) if first.leading else (second, first)
        leader_session = first_session if leader is first else second_session
        assert (await leases.get(REAPER_KEY)).lease == leader_session.id
        await leader_session.close()
        for _ in range(200):
            await asyncio.sleep(0.01)
            if other.leading:
                break
        assert other.leading and not leader.leading
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await leases.close()
