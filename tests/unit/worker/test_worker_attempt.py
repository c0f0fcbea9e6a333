"""One Attempt on a FakeClock: its handler runs in the attempt's own task, and
the deadline and the cancel grace are Timers entries, not tasks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tickwheel.v1 import worker_pb2
from tickwheel.shared.clock import FakeClock
from tickwheel_worker import HandlerRegistry, JobContext
from tickwheel_worker.attempt import Attempt, AttemptSettings, context_from_assignment
from tickwheel_worker.slots import Slots
from tickwheel_worker.timers import Timers

from tests.unit.worker.worker_fakes import WAIT, make_assignment

OUTCOME = worker_pb2.ResultOutcome


class Harness:
    """Attempts on one FakeClock, sharing one Timers and ``slots`` Slots."""

    def __init__(self, clock: FakeClock, timers: Timers, slots: int = 1) -> None:
        self.clock = clock
        self.timers = timers
        self.slots = Slots(slots)
        self.registry = HandlerRegistry()
        self.reported: list[worker_pb2.ExecutionResult] = []
        self.finished: list[Attempt] = []

    def attempt(self, name: str, handler: str, deadline_in: float = 60, cancel_grace: float = 0.0) -> Attempt:
        assignment = make_assignment(name, handler=handler)
        assignment.deadline_at.FromDatetime(self.clock.now() + timedelta(seconds=deadline_in))
        settings = AttemptSettings(
            registry=self.registry, clock=self.clock, timers=self.timers, slots=self.slots,
            report=lambda key, result: self.reported.append(result), finished=self.finished.append,
            http_enabled=False, address_policy=lambda h, a: True, cancel_grace=cancel_grace, user_agent="test",
        )
        return Attempt(assignment, settings)

    def run(self, attempt: Attempt) -> asyncio.Task[None]:
        return attempt.start()

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await _let_run()


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    clock = FakeClock()
    timers = Timers(clock)
    ticking = asyncio.create_task(timers.run())
    yield Harness(clock, timers)
    ticking.cancel()
    await asyncio.gather(ticking, return_exceptions=True)


async def _let_run() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _until(predicate: Callable[[], Any]) -> None:
    while not predicate():
        await asyncio.sleep(0)


async def test_the_deadline_cancels_an_async_handler_running_in_the_attempts_task(harness: Harness) -> None:
    seen: list[str] = []

    @harness.registry.handler("wait")
    async def wait(ctx: JobContext) -> None:
        seen.append("started")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(f"cancelled: {ctx.cancel_reason}")
            raise

    attempt = harness.attempt("e:1", "wait", deadline_in=30)
    task = harness.run(attempt)
    await _let_run()
    assert seen == ["started"] and len(harness.timers) == 1  # the deadline, as a timer
    await harness.advance(29)
    assert harness.reported == []

    await harness.advance(1)
    await asyncio.wait_for(task, WAIT)
    (result,) = harness.reported
    assert result.outcome == OUTCOME.RESULT_OUTCOME_TIMED_OUT and "deadline" in result.error
    assert seen == ["started", "cancelled: deadline passed"] and attempt.context.canceled.is_set()
    # The attempt's own cancel is taken back: run() returned, it was not cancelled.
    assert not task.cancelled() and task.cancelling() == 0
    assert not harness.slots.locked() and len(harness.timers) == 0 and harness.finished == [attempt]


async def test_a_handler_ignoring_the_deadline_is_timed_out_at_once_but_keeps_its_slot(harness: Harness) -> None:
    release = asyncio.Event()

    @harness.registry.handler("stubborn")
    async def stubborn(ctx: JobContext) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # swallowed: it goes on
        return "late"

    task = harness.run(harness.attempt("e:1", "stubborn", deadline_in=5))
    await _let_run()
    await harness.advance(5)
    await asyncio.wait_for(_until(lambda: harness.reported), WAIT)
    assert harness.reported[0].outcome == OUTCOME.RESULT_OUTCOME_TIMED_OUT
    assert harness.slots.locked() and not task.done()

    release.set()
    await asyncio.wait_for(task, WAIT)
    assert len(harness.reported) == 1 and not harness.slots.locked()
    assert task.cancelling() == 0


@pytest.mark.parametrize("returns_in_grace", [True, False], ids=["returns", "ignores"])
async def test_cancel_gives_the_grace_then_reports_canceled(harness: Harness, returns_in_grace: bool) -> None:
    cancelled = asyncio.Event()

    @harness.registry.handler("wait")
    async def wait(ctx: JobContext) -> None:
        if returns_in_grace:
            await ctx.canceled.wait()
            return
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    attempt = harness.attempt("e:1", "wait", cancel_grace=2)
    task = harness.run(attempt)
    await _let_run()
    attempt.cancel("replaced")
    await _let_run()
    if returns_in_grace:
        await asyncio.wait_for(task, WAIT)  # before the grace: no time passed
        assert harness.clock.monotonic() == 1000.0
    else:
        await harness.advance(1.9)
        assert harness.reported == [] and not task.done()
        await harness.advance(0.1)
        await asyncio.wait_for(task, WAIT)
        assert cancelled.is_set()
    (result,) = harness.reported
    assert result.outcome == OUTCOME.RESULT_OUTCOME_CANCELED and result.error == "canceled: replaced"
    assert attempt.context.cancel_reason == "canceled: replaced"
    assert len(harness.timers) == 0 and not harness.slots.locked()


async def test_reject_during_a_cancels_grace_stops_at_once_without_a_result(harness: Harness) -> None:
    stopped = asyncio.Event()

    @harness.registry.handler("wait")
    async def wait(ctx: JobContext) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    attempt = harness.attempt("e:1", "wait", cancel_grace=30)
    task = harness.run(attempt)
    await _let_run()
    attempt.cancel("replaced")
    attempt.reject("given to another worker")
    await asyncio.wait_for(task, WAIT)
    assert stopped.is_set() and attempt.decided and harness.reported == []


@pytest.mark.parametrize("stop", ["cancel", "deadline"])
async def test_an_attempt_waiting_for_a_slot_stops_waiting(harness: Harness, stop: str) -> None:
    assert harness.slots.take()  # the only slot is taken
    harness.registry.register("echo", lambda ctx: ctx.payload)
    attempt = harness.attempt("e:1", "echo", deadline_in=10)
    task = harness.run(attempt)
    await _let_run()
    assert not task.done()
    if stop == "cancel":
        attempt.cancel("replaced")
    else:
        await harness.advance(10)
    await asyncio.wait_for(task, WAIT)

    (result,) = harness.reported
    if stop == "cancel":
        assert result.outcome == OUTCOME.RESULT_OUTCOME_CANCELED
        assert result.error == "canceled before it started: replaced"
    else:
        assert result.outcome == OUTCOME.RESULT_OUTCOME_TIMED_OUT
        assert result.error == "deadline passed before a slot was free"
    assert not result.HasField("started_at")
    harness.slots.release()
    assert not harness.slots.locked()  # the abandoned wait does not hold on to the slot
    assert len(harness.timers) == 0


async def test_a_handler_raising_cancelled_error_itself_is_a_retryable_failure(harness: Harness) -> None:
    @harness.registry.handler("odd")
    async def odd(ctx: JobContext) -> None:
        raise asyncio.CancelledError()

    task = harness.run(harness.attempt("e:1", "odd"))
    await asyncio.wait_for(task, WAIT)
    (result,) = harness.reported
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE
    assert result.error == "the handler was cancelled"


async def test_the_worker_stopping_cancels_the_handler_and_reports_nothing(harness: Harness) -> None:
    seen: list[str] = []

    @harness.registry.handler("wait")
    async def wait(ctx: JobContext) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(ctx.cancel_reason or "cancelled")
            raise

    attempt = harness.attempt("e:1", "wait")
    task = harness.run(attempt)
    await _let_run()
    task.cancel()  # as Worker._abandon_all does
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)
    assert seen == ["cancelled"] and harness.reported == []
    assert attempt.context.cancel_reason == "worker stopped"
    assert not harness.slots.locked() and len(harness.timers) == 0 and harness.finished == [attempt]


def test_the_context_converts_the_assignments_instants_when_read() -> None:
    assignment = make_assignment("job_9:x", payload=b"p", attempt=3, delivery=2, traceparent="00-a-b-01")
    ctx = context_from_assignment(assignment)
    assert "nominal_at" not in vars(ctx)  # not converted yet
    assert ctx.nominal_at == datetime(2027, 3, 28, 2, 30, tzinfo=timezone.utc)
    assert ctx.due_at == ctx.nominal_at + timedelta(seconds=7)
    assert ctx.deadline_at == assignment.deadline_at.ToDatetime(tzinfo=timezone.utc)
    assert (ctx.execution_id, ctx.job_id, ctx.tenant, ctx.attempt, ctx.delivery) == ("job_9:x", "job_9", "acme", 3, 2)
    assert (ctx.payload, ctx.handler, ctx.traceparent, ctx.missed_count) == (b"p", "echo", "00-a-b-01", 0)
    assignment.ClearField("deadline_at")
    assert context_from_assignment(assignment).deadline_at is None


async def test_cancel_reaches_a_context_whose_event_and_flag_are_made_before_or_after_it() -> None:
    before, after = context_from_assignment(make_assignment("e:1")), context_from_assignment(make_assignment("e:2"))
    waiting = before.canceled  # made before the signal
    blocked: asyncio.Future[bool] = asyncio.get_running_loop().run_in_executor(None, before.wait_canceled_sync, WAIT)
    await asyncio.wait_for(_until(lambda: before._cancel_flag is not None), WAIT)  # the thread waits on the flag
    before._signal_cancel("deadline passed")
    after._signal_cancel("deadline passed")

    assert waiting.is_set() and await asyncio.wait_for(blocked, WAIT)
    assert after.canceled.is_set() and after.cancel_requested and after.wait_canceled_sync(0)
    fresh = context_from_assignment(make_assignment("e:3"))
    assert not fresh.cancel_requested and not fresh.wait_canceled_sync(0) and not fresh.canceled.is_set()


async def test_a_bug_inside_the_worker_still_ends_in_a_retryable_result(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(name: str) -> None:
        raise RuntimeError("registry broke")

    monkeypatch.setattr(harness.registry, "get", broken)
    attempt = harness.attempt("e:1", "echo")
    await asyncio.wait_for(harness.run(attempt), WAIT)
    (result,) = harness.reported
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE
    assert result.error == "worker error: RuntimeError: registry broke"
    assert harness.finished == [attempt] and not harness.slots.locked() and len(harness.timers) == 0


async def test_the_deadline_is_timed_only_once_an_async_handler_suspends(harness: Harness) -> None:
    """The handler's first step runs in the attempt's task before any timer is set; one that
    returns there never costs a timer, one that awaits has its deadline timed before it waits."""
    seen: list[tuple[str, int, bool]] = []

    def step(name: str) -> None:
        seen.append((name, len(harness.timers), asyncio.current_task() is attempt.task))

    @harness.registry.handler("returns")
    async def returns(ctx: JobContext) -> str:
        step("first step")
        return "done"

    @harness.registry.handler("awaits")
    async def awaits(ctx: JobContext) -> str:
        step("first step")
        await asyncio.sleep(0)
        step("resumed")
        return "done"

    attempt = harness.attempt("e:1", "returns")
    await asyncio.wait_for(harness.run(attempt), WAIT)
    assert seen == [("first step", 0, True)]

    seen.clear()
    attempt = harness.attempt("e:2", "awaits")
    await asyncio.wait_for(harness.run(attempt), WAIT)
    assert seen == [("first step", 0, True), ("resumed", 1, True)]
    assert [r.output for r in harness.reported] == [b"done", b"done"] and len(harness.timers) == 0
