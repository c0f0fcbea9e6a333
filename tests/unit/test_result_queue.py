"""The gateway's result queue (gateway/results.py), on a fake clock: one
writer, batches across workers, starts first during a backlog (bounded), a
flood does not hold results back, backpressure, a write the store could
not make is retried, never dropped, and one that can never be made is
split until only the result that fails is refused."""

from __future__ import annotations

import asyncio

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.gateway import results as results_module
from tickwheel_server.store.errors import StoreUnavailableError


class Recorder:
    """Records batches; the first ``fail`` calls find the store unavailable;
    any batch holding one of ``poison`` fails for a reason retrying cannot fix."""

    def __init__(self, fail: int = 0, poison: tuple[int, ...] = ()) -> None:
        self.batches: list[list[tuple[str, int]]] = []
        self.calls = 0
        self.fail = fail
        self.poison = poison
        self.refused: list[tuple[tuple[str, int], str]] = []

    async def __call__(self, items):
        self.calls += 1
        if self.fail:
            self.fail -= 1
            raise StoreUnavailableError("store unavailable", attempts=3)
        if any(result in self.poison for _, result in items):
            raise ValueError("A string literal cannot contain NUL (0x00) characters.")
        self.batches.append(list(items))

    async def refuse(self, item, error) -> None:
        self.refused.append((item, type(error).__name__))


def ResultQueue(recorder: Recorder, clock, **options):  # noqa: N802 - the class, with the recorder's refusals
    return results_module.ResultQueue(recorder, clock, refuse=recorder.refuse, **options)


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


async def test_a_result_that_can_never_be_written_is_refused_alone(running) -> None:
    clock, recorder = FakeClock(), Recorder(poison=(5,))
    queue = ResultQueue(recorder, clock, batch=8, max_pending=20, retry_delay=1.0)
    await queue.submit("w1", [1, 2, 3, 4])
    await queue.submit("w2", [5, 6, 7, 8, 9])
    running(queue)
    await settle()
    recorded = sorted(result for batch in recorder.batches for _, result in batch)
    assert recorded == [1, 2, 3, 4, 6, 7, 8, 9]  # everyone else's, at once, nothing retried
    assert recorder.refused == [(("w2", 5), "ValueError")]
    assert queue.pending == 0 and queue.refused == 1 and queue.written == 8
    assert recorder.calls <= 2 * 4 + 1  # split in halves: a few transactions, not one per result


async def test_an_outage_while_splitting_keeps_the_rest_for_the_retry(running) -> None:
    clock, recorder = FakeClock(), Recorder(poison=(1,))
    queue = ResultQueue(recorder, clock, batch=4, max_pending=20, retry_delay=1.0)
    await queue.submit("w1", [1, 2, 3, 4])
    original = recorder.__call__

    async def then_down(items):  # the store goes away after the first split
        if recorder.calls == 2:
            recorder.fail = 1
        await original(items)

    queue._apply = then_down
    running(queue)
    await settle()
    assert recorder.refused == [] and queue.pending == 4
    clock.advance(1.0)
    await settle()
    assert recorder.refused == [(("w1", 1), "ValueError")]
    assert sorted(r for batch in recorder.batches for _, r in batch) == [2, 3, 4] and queue.pending == 0


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        ResultQueue(Recorder(), FakeClock(), batch=10, max_pending=5)
