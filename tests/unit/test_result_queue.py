"""The gateway's result queue (gateway/results.py), on a fake clock: one
writer, batches across workers, starts first during a backlog (bounded), a
flood does not hold results back, backpressure, and a failed write is
retried, never dropped."""

from __future__ import annotations

import asyncio

import pytest

from tickwheel_server.clock import FakeClock
from tickwheel_server.gateway.results import ResultQueue


class Recorder:
    def __init__(self, fail: int = 0) -> None:
        self.batches: list[list[tuple[str, int]]] = []
        self.fail = fail

    async def __call__(self, items):
        if self.fail:
            self.fail -= 1
            raise RuntimeError("store unavailable")
        self.batches.append(list(items))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
async def running():
    tasks = []

    def start(queue: ResultQueue) -> None:
        tasks.append(asyncio.create_task(queue.run()))

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_results_of_several_workers_go_in_one_batch_in_order(running) -> None:
    clock, recorder = FakeClock(), Recorder()
    queue = ResultQueue(recorder, clock, batch=10, max_pending=20)
    await queue.submit("w1", [1, 2])
    await queue.submit("w2", [3])
    running(queue)
    await settle()
    assert recorder.batches == [[("w1", 1), ("w1", 2), ("w2", 3)]]
    assert queue.pending == 0 and queue.written == 3 and queue.transactions == 1


async def test_a_batch_is_at_most_batch_results(running) -> None:
    clock, recorder = FakeClock(), Recorder()
    queue = ResultQueue(recorder, clock, batch=2, max_pending=10)
    await queue.submit("w1", [1, 2, 3, 4, 5])
    running(queue)
    await settle()
    assert [len(b) for b in recorder.batches] == [2, 2, 1]


async def test_during_a_backlog_results_wait_for_the_hand_out_at_most_defer(running) -> None:
    clock, recorder = FakeClock(), Recorder()
    queue = ResultQueue(recorder, clock, batch=10, max_pending=20, defer=1.0)
    running(queue)
    queue.backlog(True)
    await queue.submit("w1", [1])
    await settle()
    clock.advance(0.5)
    await queue.submit("w2", [2])
    await settle()
    assert recorder.batches == []  # the hand-out has the store
    clock.advance(0.5)  # the oldest has waited defer
    await settle()
    assert recorder.batches == [[("w1", 1), ("w2", 2)]]


async def test_the_end_of_the_backlog_releases_the_results_at_once(running) -> None:
    clock, recorder = FakeClock(), Recorder()
    queue = ResultQueue(recorder, clock, batch=10, max_pending=20, defer=5.0)
    running(queue)
    queue.backlog(True)
    await queue.submit("w1", [1])
    await settle()
    assert recorder.batches == []
    queue.backlog(False)
    await settle()
    assert recorder.batches == [[("w1", 1)]]


async def test_a_flood_does_not_hold_results_back(running) -> None:
    clock, recorder = FakeClock(), Recorder()
    queue = ResultQueue(recorder, clock, batch=4, max_pending=8, defer=60.0)
    running(queue)
    queue.backlog(True)
    await queue.submit("w1", [1, 2, 3])
    await settle()
    assert recorder.batches == []
    await queue.submit("w1", [4])  # half full: written as it comes
    await settle()
    assert recorder.batches == [[("w1", 1), ("w1", 2), ("w1", 3), ("w1", 4)]]


async def test_a_full_queue_makes_the_worker_wait(running) -> None:
    clock, recorder = FakeClock(), Recorder()
    queue = ResultQueue(recorder, clock, batch=2, max_pending=2)
    await queue.submit("w1", [1, 2])
    blocked = asyncio.create_task(queue.submit("w2", [3]))
    await settle()
    assert not blocked.done()
    running(queue)
    await settle()
    assert blocked.done()
    await settle()
    assert [item for batch in recorder.batches for item in batch] == [("w1", 1), ("w1", 2), ("w2", 3)]


async def test_a_failed_write_is_retried_and_nothing_is_dropped(running) -> None:
    clock, recorder = FakeClock(), Recorder(fail=2)
    queue = ResultQueue(recorder, clock, batch=10, max_pending=20, retry_delay=1.0)
    await queue.submit("w1", [1, 2])
    running(queue)
    await settle()
    assert recorder.batches == [] and queue.pending == 2
    clock.advance(1.0)
    await settle()
    clock.advance(1.0)
    await settle()
    assert recorder.batches == [[("w1", 1), ("w1", 2)]] and queue.pending == 0


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        ResultQueue(Recorder(), FakeClock(), batch=10, max_pending=5)
