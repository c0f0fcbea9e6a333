"""The one backoff (``tickwheel.shared.backoff``) and the parameters each of its users waits with."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from tickwheel.options import RetryOptions
from tickwheel.shared.backoff import BackoffSleeper, ceiling, full_jitter, kept_running
from tickwheel.shared.clock import FakeClock
from tickwheel_server.dispatcher import ownership_view
from tickwheel_server.lease import etcd_transport
from tickwheel_server.store.transactions import DEFAULT_BACKOFF
from tickwheel_worker.config import WorkerConfig


@pytest.mark.parametrize(
    "case, step, initial, cap, expected",
    [
        ("the first wait", 0, 0.01, 0.05, 0.01),
        ("doubled once", 1, 0.01, 0.05, 0.02),
        ("doubled twice", 2, 0.01, 0.05, 0.04),
        ("capped", 3, 0.01, 0.05, 0.05),
        ("far past the cap, no overflow", 10_000, 0.01, 0.05, 0.05),
        ("a huge step, no overflow", 10**18, 3600.0, 86_400.0, 86_400.0),
        ("a cap below initial wins", 0, 2.0, 1.0, 1.0),
        ("a zero initial never waits", 5, 0.0, 1.0, 0.0),
    ],
)
def test_the_ceiling_doubles_from_initial_up_to_the_cap(case: str, step: int, initial: float, cap: float, expected: float) -> None:
    assert ceiling(step, initial=initial, cap=cap) == expected, case


@pytest.mark.parametrize("step, initial, cap", [(-1, 0.1, 1.0), (0, -0.1, 1.0), (0, 0.1, -1.0)])
def test_impossible_parameters_are_refused(step: int, initial: float, cap: float) -> None:
    with pytest.raises(ValueError):
        ceiling(step, initial=initial, cap=cap)
    with pytest.raises(ValueError):
        full_jitter(step, initial=initial, cap=cap, rng=random.Random(1))


def test_full_jitter_is_one_uniform_draw_over_the_whole_range() -> None:
    rng, twin = random.Random(7), random.Random(7)
    for step, top in [(0, 0.1), (1, 0.2), (3, 0.8), (10, 5.0), (1000, 5.0)]:
        delays = [full_jitter(step, initial=0.1, cap=5.0, rng=rng) for _ in range(300)]
        assert delays == [twin.uniform(0.0, top) for _ in range(300)]
        assert all(0.0 <= d <= top for d in delays)
        assert max(delays) > top * 0.9 and min(delays) < top * 0.1  # spread over the whole range


async def test_the_sleeper_waits_growing_draws_on_its_clock_and_starts_over_after_reset() -> None:
    clock = FakeClock(autojump=True)
    sleeper = BackoffSleeper(clock, initial=0.05, cap=0.3, rng=random.Random(3))
    twin = random.Random(3)
    waited = []
    for _ in range(5):
        before = clock.monotonic()
        await sleeper.sleep()
        waited.append(clock.monotonic() - before)
    sleeper.reset()
    before = clock.monotonic()
    await sleeper.sleep()
    waited.append(clock.monotonic() - before)
    expected = [twin.uniform(0.0, top) for top in (0.05, 0.1, 0.2, 0.3, 0.3, 0.05)]
    assert waited == pytest.approx(expected, abs=1e-9)


async def test_the_sleeper_waits_on_the_clock_not_in_real_time() -> None:
    clock = FakeClock()
    sleeper = BackoffSleeper(clock, initial=1.0, cap=1.0, rng=random.Random(5))
    expected = random.Random(5).uniform(0.0, 1.0)
    task = asyncio.ensure_future(sleeper.sleep())
    await asyncio.sleep(0)
    clock.advance(expected * 0.99)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(expected * 0.02)
    await asyncio.wait_for(task, timeout=5)


@pytest.mark.parametrize("initial, cap", [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_a_sleeper_with_impossible_parameters_is_refused(initial: float, cap: float) -> None:
    with pytest.raises(ValueError):
        BackoffSleeper(FakeClock(), initial=initial, cap=cap)


# --- each user's parameters (behaviour as before the one backoff) ----------------------------------


@pytest.mark.parametrize(
    "user, initial, cap, expected",
    [
        ("store 40001 retries", DEFAULT_BACKOFF.base, DEFAULT_BACKOFF.cap, (0.01, 2.0)),
        ("partition ownership", ownership_view.RETRY_INITIAL, ownership_view.RETRY_CAP, (0.05, 2.0)),
        ("etcd keep-alive and watch", etcd_transport.RETRY_INITIAL, etcd_transport.RETRY_CAP, (0.05, 1.0)),
        ("worker reconnect", WorkerConfig.reconnect_initial_backoff, WorkerConfig.reconnect_max_backoff, (0.2, 15.0)),
    ],
)
def test_each_user_keeps_its_base_and_cap(user: str, initial: float, cap: float, expected: tuple[float, float]) -> None:
    assert (initial, cap) == expected, user


def test_the_sdk_client_retry_n_waits_rand_times_the_ceiling_of_step_n_minus_1() -> None:
    retry = RetryOptions(max_attempts=10, initial_backoff=0.2, max_backoff=1.0)
    assert [retry.backoff(n, rand=lambda: 1.0) for n in range(1, 6)] == [
        ceiling(n - 1, initial=0.2, cap=1.0) for n in range(1, 6)
    ]


async def test_a_part_kept_running_is_started_again_after_each_failure_and_logged(caplog) -> None:
    """``kept_running`` (the wake-ups' and the revocations' loops): a part
    that raises is logged and started again after a backoff wait; one that
    returns ends it; a cancellation is not caught."""
    clock = FakeClock(autojump=True)
    calls = []

    async def part() -> None:
        calls.append(clock.monotonic())
        if len(calls) < 3:
            raise RuntimeError("boom")

    log = logging.getLogger("test.kept")
    with caplog.at_level(logging.ERROR, logger="test.kept"):
        await kept_running(part, clock, log, "loop", initial=0.5, cap=1.0)
    assert len(calls) == 3
    assert [r.getMessage() for r in caplog.records] == ["loop: part failed; starting it again"] * 2

    async def forever() -> None:
        await asyncio.Event().wait()

    task = asyncio.ensure_future(kept_running(forever, clock, log, "loop", initial=0.5, cap=1.0))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
