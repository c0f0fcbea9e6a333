"""The wheel's asyncio driver on a FakeClock: it sleeps until the next
non-empty slot, an earlier insert wakes it, an empty wheel does not spin, and
it never hands out early. No real sleeps: the clock moves only when told."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.wheel import Timer, TimerWheel, WheelRunner

START = datetime(2027, 1, 1, tzinfo=timezone.utc)
T0 = to_us(START)
S = 1_000_000
MS = 1_000


@dataclass
class Rig:
    clock: FakeClock
    runner: WheelRunner
    batches: list[tuple[int, list[Timer]]] = field(default_factory=list)  # (now at delivery, batch)

    @property
    def delivered(self) -> list[object]:
        return [key for _, batch in self.batches for key, _, _ in batch]

    async def settled(self) -> None:
        """Let the runner reach its next park (or stay parked): loop turns only."""
        for _ in range(30):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.settled()


async def _rig(max_sleep: float) -> AsyncIterator[Rig]:
    clock = FakeClock(START)
    rig: Rig

    async def on_due(batch: list[Timer]) -> None:
        now = to_us(clock.now())
        assert all(due <= now for _, due, _ in batch), "handed out early"
        rig.batches.append((now, batch))

    rig = Rig(clock, WheelRunner(TimerWheel(T0), clock, on_due, max_sleep=max_sleep))
    task = asyncio.create_task(rig.runner.run())
    await asyncio.wait_for(rig.runner.wait_parked(1), 1)
    try:
        yield rig
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    async for value in _rig(max_sleep=3600.0):  # no cap: wake-ups are only the slots
        yield value


@pytest.fixture
async def capped() -> AsyncIterator[Rig]:
    async for value in _rig(max_sleep=1.0):  # the production default
        yield value


async def test_it_sleeps_until_the_next_slot_and_no_earlier(rig):
    runner = rig.runner
    rig.runner.insert("a", T0 + 5 * S)
    await asyncio.wait_for(runner.wait_parked(2), 1)  # woken by the insert into an empty wheel, re-planned
    assert runner.sleeping_until_us == T0 + 5 * S
    wakeups = runner.wakeups
    await rig.advance(4.99)
    assert runner.wakeups == wakeups and rig.delivered == []
    await rig.advance(0.01)
    assert rig.delivered == ["a"] and runner.wakeups == wakeups + 1
    assert rig.batches[0][0] == T0 + 5 * S


async def test_a_due_instant_between_ticks_is_rounded_up_never_down(rig):
    rig.runner.insert("a", T0 + 1_005_000)  # 1.005 s: its 10 ms slot ends at 1.010 s
    await asyncio.wait_for(rig.runner.wait_parked(2), 1)
    assert rig.runner.sleeping_until_us == T0 + 1_010_000
    await rig.advance(1.005)
    assert rig.delivered == []
    await rig.advance(0.005)
    assert rig.delivered == ["a"]


async def test_an_earlier_insert_wakes_it(rig):
    runner = rig.runner
    runner.insert("late", T0 + 30 * S)
    await asyncio.wait_for(runner.wait_parked(2), 1)
    assert runner.sleeping_until_us == T0 + 30 * S
    nudges = runner.nudges
    runner.insert("later", T0 + 45 * S)  # later than the plan: no wake-up
    await rig.settled()
    assert runner.nudges == nudges and runner.sleeping_until_us == T0 + 30 * S
    runner.insert("early", T0 + 2 * S)
    await asyncio.wait_for(runner.wait_parked(runner.parks + 1), 1)
    assert runner.nudges == nudges + 1 and runner.sleeping_until_us == T0 + 2 * S
    await rig.advance(2)
    assert rig.delivered == ["early"]
    await rig.advance(28)
    assert rig.delivered == ["early", "late"]
    await rig.advance(15)
    assert rig.delivered == ["early", "late", "later"]


async def test_an_empty_wheel_does_not_spin(capped):
    runner = capped.runner
    parks = runner.parks
    await capped.settled()
    await capped.settled()
    assert runner.parks == parks  # no time passed: no wake-up at all
    for _ in range(80):  # ten seconds in 125 ms steps
        await capped.advance(0.125)
    assert runner.wakeups == 10  # once a second, the idle bound
    assert runner.sleeping_until_us is None  # parked on the empty wheel: any insert wakes it
    runner.insert("a", T0 + 60 * S)
    await asyncio.wait_for(runner.wait_parked(runner.parks + 1), 1)
    assert runner.nudges == 1 and runner.sleeping_until_us == T0 + 11 * S  # capped at 1 s


async def test_a_far_timer_costs_one_wake_up_per_second_at_most(capped):
    runner = capped.runner
    runner.insert("a", T0 + 30 * S)
    await asyncio.wait_for(runner.wait_parked(2), 1)
    for _ in range(240):
        await capped.advance(0.125)
    assert capped.delivered == ["a"]
    assert runner.wakeups <= 32


async def test_a_burst_is_delivered_in_due_order_by_slot(rig):
    runner = rig.runner
    runner.rebuild([(f"e{i}", T0 + 1 * S + i * MS, i) for i in range(30)][::-1])
    await asyncio.wait_for(runner.wait_parked(2), 1)
    await rig.advance(1.02)
    assert rig.delivered == [f"e{i}" for i in range(21)]  # due by 1.020 s
    assert [len(batch) for _, batch in rig.batches] == [21]  # one pop, one batch
    await rig.advance(0.01)
    assert rig.delivered == [f"e{i}" for i in range(30)]


async def test_cancel_drop_and_rebuild_through_the_runner(rig):
    runner = rig.runner
    for i in range(6):
        runner.insert(i, T0 + (i + 1) * S, {"partition": i % 2})
    assert runner.cancel(0) is True and runner.cancel(0) is False
    assert runner.drop(lambda key, due, payload: payload["partition"] == 1) == 3
    await rig.advance(6)
    assert rig.delivered == [2, 4]
    parks = runner.parks
    runner.rebuild([("x", T0 + 7 * S, None)])
    await asyncio.wait_for(runner.wait_parked(parks + 1), 1)
    assert runner.sleeping_until_us == T0 + 7 * S
    await rig.advance(1)
    assert rig.delivered == [2, 4, "x"]


async def test_a_failing_callback_is_logged_and_the_loop_goes_on(caplog):
    clock = FakeClock(START)
    delivered = []

    async def on_due(batch):
        if batch[0][0] == "bad":
            raise RuntimeError("gateway down")
        delivered.extend(key for key, _, _ in batch)

    runner = WheelRunner(TimerWheel(T0), clock, on_due, max_sleep=3600)
    runner.insert("bad", T0 + S)
    runner.insert("good", T0 + 2 * S)
    task = asyncio.create_task(runner.run())
    await asyncio.wait_for(runner.wait_parked(1), 1)
    with caplog.at_level(logging.ERROR, logger="tickwheel_server.wheel.runner"):
        clock.advance(1)
        await asyncio.wait_for(runner.wait_parked(2), 1)
    assert runner.errors == 1 and "on_due failed for 1 timers" in caplog.text
    clock.advance(1)
    await asyncio.wait_for(runner.wait_parked(3), 1)
    assert delivered == ["good"] and runner.delivered == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_max_sleep_must_be_positive():
    with pytest.raises(ValueError):
        WheelRunner(TimerWheel(T0), FakeClock(START), lambda batch: None, max_sleep=0)
