"""Timers: callbacks at instants of a FakeClock's time, all fired by one task."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import AsyncIterator

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_worker.timers import SWEEP_MIN, Timers

from tests.unit.worker.worker_fakes import WAIT


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def timers(clock: FakeClock) -> AsyncIterator[Timers]:
    timers = Timers(clock)
    task = asyncio.create_task(timers.run())
    yield timers
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _let_run() -> None:
    """Give the timers' task its turn (a FakeClock wakes it through a future)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def _until(fired: list[str], count: int) -> None:
    while len(fired) < count:
        await asyncio.sleep(0)


async def test_timers_fire_in_order_of_instant_once_the_clock_reaches_them(clock: FakeClock, timers: Timers) -> None:
    fired: list[str] = []
    timers.call_later(5, fired.append, "b")
    timers.call_later(1, fired.append, "a")
    timers.call_later(5, fired.append, "c")  # same instant as b: in the order set
    assert len(timers) == 3
    await _let_run()
    clock.advance(0.9)
    await _let_run()
    assert fired == []

    clock.advance(0.1)
    await asyncio.wait_for(_until(fired, 1), WAIT)
    assert fired == ["a"]
    clock.advance(4)
    await asyncio.wait_for(_until(fired, 3), WAIT)
    assert fired == ["a", "b", "c"] and len(timers) == 0


async def test_a_timer_earlier_than_the_one_awaited_wakes_the_task(clock: FakeClock, timers: Timers) -> None:
    fired: list[str] = []
    timers.call_later(60, fired.append, "late")
    await _let_run()  # the task now sleeps until 60 s
    timers.call_at(clock.monotonic() + 1, fired.append, "early")
    await _let_run()
    clock.advance(1)
    await asyncio.wait_for(_until(fired, 1), WAIT)
    assert fired == ["early"]


async def test_a_cancelled_timer_does_not_fire_and_lets_go_of_its_arguments(clock: FakeClock, timers: Timers) -> None:
    class Held:
        pass

    fired: list[object] = []
    held = Held()
    gone = weakref.ref(held)
    dropped = timers.call_later(1, fired.append, held)
    kept = timers.call_later(2, fired.append, "kept")
    del held
    dropped.cancel()
    dropped.cancel()  # no effect the second time
    gc.collect()
    assert gone() is None and len(timers) == 1

    clock.advance(2)
    await asyncio.wait_for(_until(fired, 1), WAIT)  # type: ignore[arg-type]
    assert fired == ["kept"]
    kept.cancel()  # fired already: no effect
    assert len(timers) == 0


async def test_cancelled_timers_are_swept_so_the_heap_stays_within_twice_what_is_live(timers: Timers) -> None:
    live = [timers.call_later(300, lambda: None) for _ in range(10)]
    for _ in range(20):
        for timer in [timers.call_later(300, lambda: None) for _ in range(SWEEP_MIN)]:
            timer.cancel()
        assert len(timers._heap) <= max(2 * len(live), len(live) + SWEEP_MIN)
    assert len(timers) == len(live)


async def test_a_failing_callback_is_logged_and_the_others_still_fire(
    clock: FakeClock, timers: Timers, caplog: pytest.LogCaptureFixture
) -> None:
    fired: list[str] = []

    def boom() -> None:
        raise RuntimeError("bug in a callback")

    timers.call_later(1, boom)
    timers.call_later(1, fired.append, "after")
    with caplog.at_level(logging.ERROR, logger="tickwheel_worker.timers"):
        clock.advance(1)
        await asyncio.wait_for(_until(fired, 1), WAIT)
    assert fired == ["after"]
    assert "bug in a callback" in caplog.text
