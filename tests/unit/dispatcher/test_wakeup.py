"""The writer's side of wake-ups (:mod:`tickwheel_server.dispatcher.wakeup`)
on the in-process lease store and a FakeClock: who is woken, how the puts
are merged, and that a hostile stream of due-now writes stays bounded."""

from __future__ import annotations

import asyncio
import random

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import partition_of, to_us
from tickwheel_server.dispatcher.wakeup import Wakeup
from tickwheel_server.lease import keys
from tickwheel_server.lease.memory import MemoryLeaseStore

ROOT = "/w/"
SPACING = 0.02
WINDOW = 2 * SPACING
"""Three servers here: puts to one server are merged over the spacing times the two others."""
PARTITIONS = 256


def _jobs_by_partition() -> dict[int, str]:
    found: dict[int, str] = {}
    index = 0
    while len(found) < PARTITIONS:
        found.setdefault(partition_of(f"job-{index}", PARTITIONS), f"job-{index}")
        index += 1
    return found


JOB_IN = _jobs_by_partition()
"""A job id of each partition."""


class Holders:
    """Partitions dealt round robin over ``servers``; this server is ``me``."""

    partition_count = PARTITIONS

    def __init__(self, me: str, servers: list[str]) -> None:
        self.server_id = me
        self.servers = servers
        self.holders = {p: servers[p % len(servers)] for p in range(PARTITIONS)}

    def holder(self, partition: int) -> str | None:
        return self.holders.get(partition)

    def wake_key(self, server_id: str) -> str:
        return keys.wake_key(server_id, ROOT)

    def members(self) -> list[str]:
        return self.servers


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


@pytest.fixture
async def world():
    clock = FakeClock()
    leases = MemoryLeaseStore(clock)
    session = await leases.open_session(60)
    seen: list[str] = []
    values: list[bytes] = []
    watch = leases.watch(keys.wakes_prefix(ROOT), prefix=True)
    await watch.start()

    async def collect() -> None:
        async for event in watch:
            seen.append(event.key.removeprefix(keys.wakes_prefix(ROOT)))
            values.append(event.value)

    collector = asyncio.create_task(collect())
    local: list[int] = []
    wakeup = Wakeup(
        leases, Holders("a", ["a", "b", "c"]), clock, local=lambda: local.append(1),
        ready=lambda: local.append(2), session=lambda: session, within=2.0, spacing=SPACING,
    )
    wakeup.values = values
    sender = asyncio.create_task(wakeup._send_forever())
    try:
        yield clock, wakeup, seen, local
    finally:
        for task in (sender, collector):
            task.cancel()
        await asyncio.gather(sender, collector, return_exceptions=True)
        await watch.aclose()
        await leases.close()


async def test_a_due_now_job_wakes_its_holder_once(world) -> None:
    clock, wakeup, seen, local = world
    now = to_us(clock.now())
    wakeup.due([(JOB_IN[1], now)])  # partition 1: server b
    await settle()
    assert seen == ["b"] and local == []
    wakeup.due([(JOB_IN[0], now - 5_000_000)])  # partition 0 (this server), due 5 s ago
    await settle()
    assert seen == ["b"] and local == [1], "this server's own partition is woken in process, no put"


async def test_nothing_is_woken_for_a_job_due_later_or_never_or_unheld(world) -> None:
    clock, wakeup, seen, local = world
    now = to_us(clock.now())
    wakeup._ownership.holders.pop(2)
    wakeup.due([(JOB_IN[1], now + 3_000_000), (JOB_IN[4], None), (JOB_IN[2], now), (JOB_IN[0], now + 60_000_000)])
    await settle()
    assert seen == [] and local == [] and wakeup.puts == 0


async def test_a_batch_over_every_partition_is_one_put_per_other_server(world) -> None:
    clock, wakeup, seen, local = world
    now = to_us(clock.now())
    wakeup.due([(JOB_IN[p % PARTITIONS], now) for p in range(1000)])
    await settle()
    assert sorted(seen) == ["b", "c"] and local == [1] and wakeup.puts == 2


async def test_wakes_within_a_window_are_merged_into_one_put_at_its_end(world) -> None:
    clock, wakeup, seen, _local = world
    wakeup.due([(JOB_IN[1], to_us(clock.now()))])
    await settle()
    assert seen == ["b"]
    for _ in range(5):
        wakeup.due([(JOB_IN[1], to_us(clock.now()))])
        await settle()
    assert seen == ["b"], "within the window: held"
    clock.advance(WINDOW)
    await settle()
    assert seen == ["b", "b"], "the held wakes go out as one put at the window's end"
    clock.advance(WINDOW)
    await settle()
    assert seen == ["b", "b"], "nothing more pending: nothing sent"


async def test_a_hostile_stream_of_due_now_writes_stays_bounded(world) -> None:
    """A tenant writing due-now jobs as fast as it can, for one second of
    store time: the puts are at most one per other server per window, and
    what is pending never holds more than the servers."""
    clock, wakeup, seen, local = world
    rng = random.Random(7)
    elapsed, step = 1.0, 0.001
    mine = 0
    for _ in range(int(elapsed / step)):
        for _ in range(20):
            partition = rng.randrange(PARTITIONS)
            mine += partition % 3 == 0
            wakeup.due([(JOB_IN[partition], to_us(clock.now()))])
        assert len(wakeup._pending) <= 2 and len(wakeup._sent_at) <= 2
        await settle()
        clock.advance(step)
    await settle()
    bound = 2 * (elapsed / WINDOW + 1)
    assert wakeup.puts == len(seen) <= bound, f"{wakeup.puts} puts in {elapsed} s"
    assert seen.count("b") <= elapsed / WINDOW + 1, "what one server receives from one writer"
    assert wakeup.puts >= 2 * elapsed / WINDOW / 2, "the wakes still go out, merged"
    assert len(local) == mine, "the local wake is an event set: the dispatcher's wake gap bounds its claims"


async def test_no_put_without_a_live_session() -> None:
    clock = FakeClock()
    leases = MemoryLeaseStore(clock)
    session = await leases.open_session(60)
    wakeup = Wakeup(
        leases, Holders("a", ["a", "b"]), clock, local=lambda: None, session=lambda: session, within=2.0, spacing=SPACING
    )
    sender = asyncio.create_task(wakeup._send_forever())
    try:
        await session.close()
        wakeup.due([(JOB_IN[1], to_us(clock.now()))])
        await settle()
        assert await leases.get(keys.wake_key("b", ROOT)) is None and wakeup.puts == 1
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        await leases.close()


async def test_only_the_due_now_jobs_are_hashed(world, monkeypatch) -> None:
    """A batch of jobs mostly due later: their partitions are not computed,
    only those of the jobs due within the wake's reach."""
    from tickwheel_server.dispatcher import wakeup as module

    clock, wakeup, seen, _local = world
    hashed: list[str] = []

    def counting(job_id: str, count: int) -> int:
        hashed.append(job_id)
        return partition_of(job_id, count)

    monkeypatch.setattr(module, "partition_of", counting)
    now = to_us(clock.now())
    later = [(JOB_IN[p], now + 60_000_000) for p in range(PARTITIONS)]
    wakeup.due([*later, (JOB_IN[1], now), (JOB_IN[3], None)])
    await settle()
    assert hashed == [JOB_IN[1]] and seen == ["b"]


async def test_a_trigger_wakes_the_holders_hand_out_not_its_claim(world) -> None:
    """``ready``: executions are ready now (a trigger, a backfill): the
    holder's hand-out round is woken, in process or by the put's value, and
    not its claim (it would find nothing, and borrow the round's credit);
    a claim's wake merged into the same put asks for both."""
    clock, wakeup, seen, local = world
    now = to_us(clock.now())
    wakeup.due([(JOB_IN[0], now)], ready=True)  # this server's partition
    await settle()
    assert local == [2] and seen == []
    wakeup.due([(JOB_IN[1], now)])
    await settle()
    assert seen == ["b"] and not wakeup.values[-1].endswith(b" ready"), "a claim wake does not ask for a round"
    wakeup.due([(JOB_IN[1], now)], ready=True)
    wakeup.due([(JOB_IN[1], now)])  # merged: still asks for the round
    clock.advance(WINDOW)
    await settle()
    assert seen == ["b", "b"] and wakeup.values[-1] == b"a claim ready"
    clock.advance(WINDOW)
    wakeup.due([(JOB_IN[1], now)], ready=True)
    await settle()
    assert seen == ["b", "b", "b"] and wakeup.values[-1] == b"a ready"


async def test_the_holder_follows_a_ready_wake_with_a_hand_out_round() -> None:
    clock = FakeClock()
    leases = MemoryLeaseStore(clock)
    session = await leases.open_session(60)
    woken: list[str] = []
    holder = Wakeup(leases, Holders("b", ["a", "b"]), clock, local=lambda: woken.append("claim"),
                    ready=lambda: woken.append("round"), session=lambda: session, within=2.0, spacing=SPACING)
    follower = asyncio.create_task(holder.follow())
    try:
        await holder.following.wait()
        await leases.put(keys.wake_key("b", ROOT), "a", session=session)
        await settle()
        assert woken == ["claim"]
        await leases.put(keys.wake_key("b", ROOT), "a ready", session=session)
        await settle()
        assert woken == ["claim", "round"]
        await leases.put(keys.wake_key("b", ROOT), "a claim ready", session=session)
        await settle()
        assert woken == ["claim", "round", "claim", "round"]
    finally:
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
        await leases.close()


def test_bad_settings_are_refused() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError):
        Wakeup(MemoryLeaseStore(clock), Holders("a", ["a"]), clock, local=lambda: None, session=lambda: None, within=0)


def test_the_merging_window_grows_with_the_fleet_up_to_its_cap() -> None:
    """Each server receives about one wake per spacing from all the others
    together, so the window one writer keeps per target grows with them."""
    clock = FakeClock()
    leases = MemoryLeaseStore(clock)
    windows = []
    for count in (1, 2, 3, 11, 40):
        servers = [f"s{i}" for i in range(count)]
        wakeup = Wakeup(leases, Holders("s0", servers), clock, local=lambda: None, session=lambda: None,
                        within=2.0, spacing=SPACING, max_window=0.5)
        windows.append(wakeup.window())
    assert windows == [SPACING, SPACING, 2 * SPACING, 10 * SPACING, 0.5]
