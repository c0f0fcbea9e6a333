"""A wake ends the dispatcher's wait for its next tick: the claim runs at
once, still reading only what is due by the clock's now (never early), and
a flood of wakes brings at most one claim per wake gap."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.dispatcher.dispatcher import Dispatcher
from tickwheel_server.store.dispatch import ClaimedExecution, ClaimResult

TICK = 1.0
GAP = 0.02


class Store:
    """Rows due at given instants; a claim returns (once) those due by its
    ``now`` plus its look-ahead, as the store's claim reads them."""

    def __init__(self) -> None:
        self.claims: list[tuple[datetime, float]] = []
        self.rows: dict[str, int] = {}  # id -> due µs
        self.claimed: list[tuple[str, int, datetime]] = []

    async def claim_due(self, owned, now, *, lookahead, batch, **_options) -> ClaimResult:
        self.claims.append((now, lookahead.total_seconds()))
        limit = to_us(now + lookahead)
        due = sorted((at, key) for key, at in self.rows.items() if at <= limit)
        executions = []
        for at, key in due:
            del self.rows[key]
            self.claimed.append((key, at, now))
            executions.append(ClaimedExecution(key, 3, at))
        return ClaimResult(executions=executions)

    async def scheduled_in(self, partitions, until):
        return []

    async def review_quarantine(self, owned) -> list[str]:
        return []


class Ownership:
    generation = 1

    def owned(self) -> dict[int, int]:
        return {3: 7}

    async def wait_changed(self, after: int) -> int:
        await asyncio.Event().wait()  # ownership never changes here
        return self.generation


class Runner:
    def __init__(self) -> None:
        self.inserted: list[tuple[str, int]] = []

    def insert(self, key, due_us, _partition) -> None:
        self.inserted.append((key, due_us))

    def drop(self, _predicate) -> None:
        pass


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def started(lookahead: float = 0.0):
    clock, store, runner = FakeClock(), Store(), Runner()
    dispatcher = Dispatcher(
        store, Ownership(), runner, clock, tick=TICK, lookahead=timedelta(seconds=lookahead), wake_gap=GAP
    )
    task = asyncio.create_task(dispatcher.run())
    await settle()
    assert dispatcher.ticks == 1
    return clock, store, runner, dispatcher, task


async def stopped(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_without_a_wake_a_row_made_due_waits_for_the_next_tick() -> None:
    clock, store, _runner, dispatcher, task = await started()
    try:
        store.rows["job-1"] = to_us(clock.now())
        clock.advance(TICK / 2)
        await settle()
        assert dispatcher.ticks == 1 and "job-1" in store.rows
        clock.advance(TICK / 2)
        await settle()
        assert dispatcher.ticks == 2 and "job-1" not in store.rows
    finally:
        await stopped(task)


async def test_a_wake_claims_at_once_not_at_the_next_tick() -> None:
    clock, store, _runner, dispatcher, task = await started()
    try:
        clock.advance(0.3)  # past the wake gap since the first claim began
        await settle()
        store.rows["job-1"] = to_us(clock.now())
        dispatcher.wake()
        await settle()
        assert dispatcher.ticks == 2 and dispatcher.woken_ticks == 1
        assert [key for key, _at, _now in store.claimed] == ["job-1"]
    finally:
        await stopped(task)


async def test_a_wake_never_claims_a_row_before_its_due_instant() -> None:
    """Woken with a row due a little later (and no look-ahead): the woken
    claim reads by its own now and leaves the row; the row is claimed by the
    first claim whose now has reached it."""
    clock, store, _runner, dispatcher, task = await started()
    try:
        clock.advance(0.3)
        await settle()
        store.rows["later"] = to_us(clock.now()) + 400_000  # due in 0.4 s
        dispatcher.wake()
        await settle()
        assert dispatcher.woken_ticks == 1 and "later" in store.rows
        for _ in range(60):
            clock.advance(0.05)
            await settle()
        assert [key for key, _at, _now in store.claimed] == ["later"]
        for _key, due_us, now in store.claimed:
            assert to_us(now) >= due_us, "claimed before its due instant"
    finally:
        await stopped(task)


async def test_a_woken_claim_puts_a_row_due_before_the_next_tick_in_the_wheel_at_its_instant() -> None:
    """With the look-ahead, a woken claim takes a row due before the next
    tick into the timer wheel at its own due instant (the wheel hands it out
    then, not earlier)."""
    clock, store, runner, dispatcher, task = await started(lookahead=60.0)
    try:
        clock.advance(0.3)
        await settle()
        due = to_us(clock.now()) + 500_000
        store.rows["soon"] = due
        dispatcher.wake()
        await settle()
        assert runner.inserted == [("soon", due)]
    finally:
        await stopped(task)


async def test_a_flood_of_wakes_brings_at_most_one_claim_per_gap() -> None:
    clock, store, _runner, dispatcher, task = await started()
    try:
        steps, step = 200, 0.001  # 0.2 s of wakes, one every millisecond, 10 wakes each
        for _ in range(steps):
            for _ in range(10):
                dispatcher.wake()
            await settle()
            clock.advance(step)
        await settle()
        elapsed = steps * step
        woken_claims = dispatcher.ticks - 1
        assert woken_claims >= 2, "wakes do bring claims forward"
        assert woken_claims <= elapsed / GAP + 1, f"{woken_claims} claims in {elapsed} s: more than one per gap"
        assert len(store.claims) == dispatcher.ticks
    finally:
        await stopped(task)


async def test_a_wake_during_a_claim_brings_one_more_claim_after_it() -> None:
    """A row committed while a claim runs may be missed by it: a wake then
    must bring the next claim, not be swallowed by the claim in progress."""
    clock, store, _runner, dispatcher, task = await started()
    gate = asyncio.Event()
    original = store.claim_due

    async def slow_claim(owned, now, **options):
        await gate.wait()
        return await original(owned, now, **options)

    try:
        clock.advance(0.3)
        await settle()
        store.claim_due = slow_claim
        dispatcher.wake()
        await settle()
        assert dispatcher.ticks == 1  # the woken claim is running, held
        store.rows["mid-claim"] = to_us(clock.now())
        dispatcher.wake()  # the row's wake arrives while the claim runs
        store.claim_due = original
        gate.set()
        await settle()
        clock.advance(GAP)
        await settle()
        assert "mid-claim" not in store.rows and dispatcher.ticks == 3
    finally:
        await stopped(task)
