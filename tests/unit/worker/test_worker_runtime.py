"""The Worker against a scripted WorkerService on a real grpc.aio server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import datetime, timezone

import grpc
import pytest

from tickwheel.v1 import worker_pb2
from tickwheel_worker import (
    HandlerRegistry,
    JobContext,
    PermanentError,
    WorkerFatalError,
    register_builtins,
)
from tickwheel_worker.http_target import OUTPUT_MAX_BYTES
from tickwheel_worker.runtime import RESULT_MESSAGE_BYTES

from tests.unit.worker.worker_fakes import (
    WAIT,
    FakeStream,
    FakeWorkerService,
    JumpingClock,
    StartWorker,
    make_assignment,
)

OUTCOME = worker_pb2.ResultOutcome


def builtins() -> HandlerRegistry:
    registry = HandlerRegistry()
    register_builtins(registry)
    return registry


async def test_hello_is_first_and_names_handlers_slots_and_credential(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    registry = builtins()
    registry.register("billing.charge", lambda ctx: None)
    worker = await start_worker(registry, slots=3, worker_id="w-1")

    stream = await fake_server.stream(0)
    await asyncio.wait_for(worker.connected.wait(), WAIT)

    assert stream.received[0].WhichOneof("message") == "hello"
    hello = stream.hello
    assert hello.worker_id == "w-1"
    assert list(hello.handlers) == ["billing.charge", "echo"]
    assert hello.slots == 3
    assert hello.http is True
    assert hello.version
    assert list(hello.in_flight) == []
    assert stream.metadata["authorization"] == "Bearer worker-secret"
    assert worker.server_id == "fake-server"


async def test_echo_succeeds_with_the_payload_as_output_and_is_forgotten_after_ack(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    worker = await start_worker(builtins())
    stream = await fake_server.stream(0)

    await stream.assign(make_assignment("job_1:2027-03-28T02:30:00Z", payload=b"hello", attempt=2, delivery=3))
    result = await stream.wait_result("job_1:2027-03-28T02:30:00Z")

    assert result.outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED
    assert result.output == b"hello"
    assert (result.attempt, result.delivery) == (2, 3)
    assert result.HasField("started_at") and result.HasField("finished_at")
    assert result.finished_at.ToDatetime() >= result.started_at.ToDatetime()
    # The fake server acks automatically; the worker then forgets it.
    await stream.wait_for(lambda s: not worker.unacked() and not worker.in_flight())


async def test_handler_sees_the_assignment_in_its_context(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    seen: list[JobContext] = []
    registry = HandlerRegistry()

    @registry.handler("inspect")
    def inspect(ctx: JobContext) -> str:  # sync: runs in a thread
        seen.append(ctx)
        return "ok"

    await start_worker(registry)
    stream = await fake_server.stream(0)
    assignment = make_assignment("job_2:x", handler="inspect", payload=b"p", attempt=4, delivery=2,
                                 traceparent="00-abc-def-01")
    await stream.assign(assignment)
    result = await stream.wait_result("job_2:x")

    assert result.outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED and result.output == b"ok"
    (ctx,) = seen
    assert ctx.execution_id == ctx.idempotency_key == "job_2:x"
    assert (ctx.job_id, ctx.tenant, ctx.attempt, ctx.delivery) == ("job_2", "acme", 4, 2)
    assert ctx.payload == b"p" and ctx.handler == "inspect" and ctx.traceparent == "00-abc-def-01"
    assert ctx.nominal_at == datetime(2027, 3, 28, 2, 30, tzinfo=timezone.utc)
    assert ctx.deadline_at is not None and ctx.due_at > ctx.nominal_at


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
async def test_exception_is_retryable_and_permanent_error_is_permanent(
    fake_server: FakeWorkerService, start_worker: StartWorker, is_async: bool
) -> None:
    registry = HandlerRegistry()
    if is_async:
        async def boom(ctx: JobContext) -> None:
            raise ValueError("card declined")

        async def fatal(ctx: JobContext) -> None:
            raise PermanentError("no such customer")
    else:
        def boom(ctx: JobContext) -> None:
            raise ValueError("card declined")

        def fatal(ctx: JobContext) -> None:
            raise PermanentError("no such customer")
    registry.register("boom", boom)
    registry.register("fatal", fatal)
    await start_worker(registry)
    stream = await fake_server.stream(0)

    await stream.assign(make_assignment("e:boom", handler="boom"), make_assignment("e:fatal", handler="fatal"))

    retryable = await stream.wait_result("e:boom")
    assert retryable.outcome == OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE
    assert retryable.error == "ValueError: card declined"
    permanent = await stream.wait_result("e:fatal")
    assert permanent.outcome == OUTCOME.RESULT_OUTCOME_FAILED_PERMANENT
    assert permanent.error == "no such customer"


async def test_unknown_handler_fails_permanently_naming_it(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    await start_worker(builtins())
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:unknown", handler="billing.refund"))

    result = await stream.wait_result("e:unknown")
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_PERMANENT
    assert "billing.refund" in result.error and "echo" in result.error


async def test_result_messages_stay_under_their_byte_budget(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    """A burst of large outputs is split by size, not only by count: no message passes
    RESULT_MESSAGE_BYTES (the server reads up to 4 MiB), and every result goes once."""
    count, output = 120, b"o" * OUTPUT_MAX_BYTES  # 1.9 MiB of outputs
    await start_worker(builtins(), slots=count)
    stream = await fake_server.stream(0)
    await stream.assign(*[make_assignment(f"e:{i}", payload=output) for i in range(count)])

    await stream.wait_for(lambda s: len(s.results) == count)
    messages = stream.of("result")
    assert len(messages) >= 2
    assert all(message.ByteSize() <= RESULT_MESSAGE_BYTES for message in messages)
    assert sorted(r.execution_id for r in stream.results) == sorted(f"e:{i}" for i in range(count))
    assert all(r.output == output for r in stream.results)


async def test_credit_never_exceeds_slots(fake_server: FakeWorkerService, start_worker: StartWorker) -> None:
    slots, total = 2, 7
    running = peak = 0
    started: asyncio.Queue[str] = asyncio.Queue()
    release: asyncio.Queue[None] = asyncio.Queue()
    registry = HandlerRegistry()

    @registry.handler("hold")
    async def hold(ctx: JobContext) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        started.put_nowait(ctx.execution_id)
        try:
            await release.get()
        finally:
            running -= 1

    await start_worker(registry, slots=slots)
    stream = await fake_server.stream(0)
    sent = 0
    while True:  # hand out work exactly as fast as credit allows, freeing one slot at a time
        available = stream.credit_total - stream.assigned
        assert 0 <= available <= slots - running, (available, running)
        batch = min(available, total - sent)
        if batch:
            await stream.assign(*[make_assignment(f"e:{sent + i}", handler="hold") for i in range(batch)])
            sent += batch
            for _ in range(batch):
                await asyncio.wait_for(started.get(), WAIT)
        if sent == total:
            break
        assert (running, stream.credit_total - stream.assigned) == (slots, 0)
        before = stream.credit_total
        release.put_nowait(None)
        await stream.wait_for(lambda s: s.credit_total > before)
    for _ in range(slots):
        release.put_nowait(None)
    await stream.wait_for(lambda s: len(s.results) == total)

    assert peak == slots
    assert stream.credit_violations == []
    await stream.wait_for(lambda s: s.credit_total == total + slots)  # every slot free again
    assert all(r.outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED for r in stream.results)


async def test_cancel_sets_ctx_canceled_and_reports_canceled(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    started = asyncio.Event()
    observed: list[str] = []
    registry = HandlerRegistry()

    @registry.handler("wait")
    async def wait(ctx: JobContext) -> None:
        started.set()
        await ctx.canceled.wait()
        observed.append(ctx.cancel_reason)

    await start_worker(registry)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:cancel", handler="wait"))
    await asyncio.wait_for(started.wait(), WAIT)
    await stream.cancel("e:cancel", reason="replaced by a newer occurrence")

    result = await stream.wait_result("e:cancel")
    assert result.outcome == OUTCOME.RESULT_OUTCOME_CANCELED
    assert "replaced by a newer occurrence" in result.error
    assert observed == ["canceled: replaced by a newer occurrence"]


async def test_cancel_stops_a_handler_that_ignores_it_after_the_grace(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("stubborn")
    async def stubborn(ctx: JobContext) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    await start_worker(registry, cancel_grace=0.05)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:stubborn", handler="stubborn"))
    await asyncio.wait_for(started.wait(), WAIT)
    await stream.cancel("e:stubborn")

    assert (await stream.wait_result("e:stubborn")).outcome == OUTCOME.RESULT_OUTCOME_CANCELED
    await asyncio.wait_for(cancelled.wait(), WAIT)


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
async def test_attempt_past_its_deadline_is_timed_out(
    fake_server: FakeWorkerService, start_worker: StartWorker, is_async: bool
) -> None:
    thread_done = threading.Event()
    registry = HandlerRegistry()
    if is_async:
        @registry.handler("slow")
        async def slow(ctx: JobContext) -> None:
            await asyncio.sleep(30)
    else:
        @registry.handler("slow")
        def slow_sync(ctx: JobContext) -> None:
            ctx.wait_canceled_sync(30)  # a well-behaved sync handler polls or waits
            thread_done.set()

    worker = await start_worker(registry, slots=1)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:slow", handler="slow", deadline_in=0.2))

    result = await stream.wait_result("e:slow")
    assert result.outcome == OUTCOME.RESULT_OUTCOME_TIMED_OUT
    assert "deadline" in result.error
    # The slot comes back once the handler has really stopped: credit is re-granted.
    await stream.wait_for(lambda s: s.credit_total == 2 and not worker.in_flight())
    if not is_async:
        assert thread_done.is_set()


async def test_heartbeats_list_every_in_flight_execution_with_progress(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    fake_server.heartbeat_interval = 0.05
    release = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("long")
    async def long(ctx: JobContext) -> None:
        await ctx.heartbeat(progress=f"working on {ctx.execution_id}")
        await release.wait()

    await start_worker(registry, slots=3)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:a", handler="long"), make_assignment("e:b", handler="long", delivery=2))

    def listed(s) -> set[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
        if not s.heartbeats:
            return set()
        return {(e.execution_id, e.delivery, e.progress) for e in s.heartbeats[-1].executions}

    expected = {("e:a", 1, "working on e:a"), ("e:b", 2, "working on e:b")}
    assert await stream.wait_for(lambda s: listed(s) == expected)
    release.set()
    await stream.wait_for(lambda s: len(s.results) == 2)
    await stream.wait_for(lambda s: s.heartbeats[-1].executions == [] and len(s.heartbeats) > 3)


async def test_reconnect_reports_in_flight_and_resends_unacked_results(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    fake_server.auto_ack = False
    release = asyncio.Event()
    registry = builtins()

    @registry.handler("long")
    async def long(ctx: JobContext) -> bytes:
        await release.wait()
        return b"finished"

    worker = await start_worker(registry, slots=2)
    first = await fake_server.stream(0)
    await first.assign(make_assignment("e:long", handler="long", delivery=1),
                       make_assignment("e:quick", payload=b"q", delivery=4))
    await first.wait_result("e:quick")  # sent, never acked
    assert worker.unacked() == [("e:quick", 4)]

    await first.close()  # the server goes away
    second = await fake_server.stream(1)

    # Both, so that the new stream holds them: a server takes a result only from the stream holding its delivery.
    assert [(e.execution_id, e.delivery) for e in second.hello.in_flight] == [("e:long", 1), ("e:quick", 4)]
    resent = await second.wait_result("e:quick")
    assert resent.outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED and resent.output == b"q"

    await second.ack(resent)
    release.set()
    finished = await second.wait_result("e:long")
    assert finished.output == b"finished" and finished.delivery == 1
    await second.ack(finished)
    await second.wait_for(lambda s: not worker.unacked() and not worker.in_flight())
    assert worker.sessions == 2


async def test_a_silent_server_is_presumed_dead_and_the_worker_reconnects(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    """On the worker's clock, which moves only when the test moves it: the
    stream lasts through silence short of the limit (the worker's own
    heartbeats go out meanwhile), and the limit itself ends it."""
    clock = JumpingClock()  # the reconnect's backoff passes at once; the heartbeat interval waits for the test
    fake_server.heartbeat_interval = 100.0
    fake_server.auto_heartbeat = False  # the server says nothing after its welcome
    worker = await start_worker(builtins(), clock=clock, server_silence_intervals=3, welcome_timeout=600.0)
    first = await fake_server.stream(0)
    await asyncio.wait_for(worker.connected.wait(), WAIT)

    for beats in (1, 2):  # two heartbeat intervals in silence: the worker's own heartbeats go out
        clock.advance(100.0)
        await first.wait_for(lambda s: len(s.heartbeats) >= beats)
    clock.advance(99.0)  # most of a third: the silence watch is not due yet
    assert worker.connected.is_set() and not first.ended.is_set() and len(fake_server.streams) == 1

    clock.advance(1.0)  # three intervals: presumed dead
    second = await fake_server.stream(1)
    assert second.hello.worker_id == first.hello.worker_id
    await asyncio.wait_for(first.ended.wait(), WAIT)  # the worker gave up on it (its cancel reached the server)
    await asyncio.wait_for(_until(lambda: worker.sessions == 2), WAIT)  # and was welcomed on the second


async def test_server_heartbeats_keep_the_stream_up(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    """On the worker's clock: a server heartbeat each interval keeps the
    stream up through twice the silence limit."""
    clock = JumpingClock()
    fake_server.heartbeat_interval = 100.0
    fake_server.auto_heartbeat = False  # the test sends the server's heartbeats
    worker = await start_worker(builtins(), clock=clock, server_silence_intervals=4, welcome_timeout=600.0)
    stream = await fake_server.stream(0)
    await asyncio.wait_for(worker.connected.wait(), WAIT)
    for beats in range(1, 9):  # eight intervals: twice the silence limit
        heartbeat = worker_pb2.PullResponse(heartbeat=worker_pb2.ServerHeartbeat())
        heartbeat.heartbeat.sent_at.GetCurrentTime()
        await stream.send(heartbeat)
        # Read by the worker before its clock moves on: the server's write may lag the worker's heartbeats.
        await asyncio.wait_for(_until(lambda: worker._session is not None
                                      and worker._session.last_seen == clock.monotonic()), WAIT)
        clock.advance(100.0)
        await stream.wait_for(lambda s: len(s.heartbeats) >= beats)  # the worker's, for this interval
    assert worker.connected.is_set() and not stream.ended.is_set() and len(fake_server.streams) == 1


async def test_drain_stops_credit_finishes_in_flight_then_reconnects(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    release = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("long")
    async def long(ctx: JobContext) -> str:
        await release.wait()
        return "done"

    worker = await start_worker(registry, slots=2)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:1", handler="long"))
    await stream.drain(deadline_in=5)
    await asyncio.wait_for(_until(lambda: worker.draining), WAIT)
    release.set()
    assert (await stream.wait_result("e:1")).outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED

    await asyncio.wait_for(stream.ended.wait(), WAIT)
    assert stream.ended_by_half_close  # a clean close, not a cancelled RPC
    assert stream.credit_total == 2  # the slot freed during the drain was not re-granted
    second = await fake_server.stream(1)
    assert list(second.hello.in_flight) == []
    await second.wait_for(lambda s: s.received)
    assert worker.unacked() == []


async def test_drain_deadline_moves_running_work_to_the_next_stream(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    release = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("long")
    async def long(ctx: JobContext) -> None:
        await release.wait()

    await start_worker(registry)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:long", handler="long"))
    await stream.drain(deadline_in=0.1)
    second = await fake_server.stream(1)
    assert [e.execution_id for e in second.hello.in_flight] == ["e:long"]
    release.set()
    await second.wait_result("e:long")


async def test_welcome_rejected_stops_the_execution_without_a_result(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    stopped = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("long")
    async def long(ctx: JobContext) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    original = fake_server.welcome

    def reject_all(stream):  # type: ignore[no-untyped-def]
        message = original(stream)
        message.welcome.rejected.extend(stream.hello.in_flight)
        del message.welcome.reattached[:]
        return message

    worker = await start_worker(registry)
    first = await fake_server.stream(0)
    await first.assign(make_assignment("e:gone", handler="long"))
    await first.wait_for(lambda s: s.heartbeats and s.heartbeats[-1].executions)
    fake_server.welcome = reject_all  # type: ignore[method-assign]
    await first.close()
    second = await fake_server.stream(1)
    assert [e.execution_id for e in second.hello.in_flight] == ["e:gone"]
    await asyncio.wait_for(stopped.wait(), WAIT)
    await second.wait_for(lambda s: len(s.heartbeats) >= 2)
    assert second.results == [] and worker.in_flight() == []


async def test_stop_lets_in_flight_work_finish_and_be_acked(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    release = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("long")
    async def long(ctx: JobContext) -> str:
        await release.wait()
        return "done"

    worker = await start_worker(registry)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:1", handler="long"))
    await stream.wait_for(lambda s: s.heartbeats)
    stopping = asyncio.create_task(worker.stop(grace=5))
    release.set()
    await asyncio.wait_for(stopping, WAIT)

    assert stream.result_for("e:1").outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED
    assert worker.unacked() == [] and not worker.connected.is_set()
    await asyncio.wait_for(stream.ended.wait(), WAIT)
    assert stream.ended_by_half_close
    assert len(fake_server.streams) == 1


async def test_no_welcome_means_reconnect_and_stop_does_not_wait_for_one(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    fake_server.withhold_welcome = True
    worker = await start_worker(builtins(), welcome_timeout=0.1)
    await fake_server.stream(1)  # gave up on the first after welcome_timeout
    assert worker.sessions == 0 and not worker.connected.is_set()
    await asyncio.wait_for(worker.stop(grace=30), 1.0)


async def test_a_refused_credential_ends_run_with_a_fatal_error(fake_server: FakeWorkerService) -> None:
    from tickwheel_worker import Worker, WorkerConfig

    fake_server.reject_status = grpc.StatusCode.UNAUTHENTICATED
    worker = Worker(WorkerConfig(address=fake_server.address, credential="bad", handlers=builtins()))
    with pytest.raises(WorkerFatalError, match="UNAUTHENTICATED"):
        await asyncio.wait_for(worker.run(), WAIT)


async def _until(predicate: Callable[[], bool]) -> None:
    """Worker-side state the fake server cannot see; callers bound it with wait_for."""
    while not predicate():
        await asyncio.sleep(0.005)


async def test_a_heartbeat_lists_every_execution_in_flight(
    fake_server: FakeWorkerService, start_worker: StartWorker
) -> None:
    fake_server.heartbeat_interval = 0.05
    release = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("long")
    async def long(ctx: JobContext) -> None:
        await release.wait()

    count = 40
    await start_worker(registry, slots=count)
    stream = await fake_server.stream(0)
    await stream.assign(*[make_assignment(f"e:{i}", handler="long", delivery=i % 3 + 1) for i in range(count)])
    expected = {(f"e:{i}", i % 3 + 1) for i in range(count)}

    def listed(s: FakeStream) -> set[tuple[str, int]]:
        return {(e.execution_id, e.delivery) for e in s.heartbeats[-1].executions} if s.heartbeats else set()

    assert await stream.wait_for(lambda s: listed(s) == expected)
    release.set()
    await stream.wait_for(lambda s: len(s.results) == count)
    await stream.wait_for(lambda s: listed(s) == set() and s.heartbeats[-1].executions == [])


async def test_stop_does_not_wait_forever_for_a_handler_that_swallows_its_cancellation(
    fake_server: FakeWorkerService, start_worker: StartWorker, caplog: pytest.LogCaptureFixture
) -> None:
    started = asyncio.Event()
    swallowed = asyncio.Event()
    release = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("stubborn")
    async def stubborn(ctx: JobContext) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.set()
        await release.wait()

    worker = await start_worker(registry)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:stubborn", handler="stubborn"))
    await asyncio.wait_for(started.wait(), WAIT)
    await asyncio.wait_for(worker.stop(grace=0), WAIT)

    assert swallowed.is_set() and "1 handlers ignored their cancellation" in caplog.text
    assert stream.result_for("e:stubborn") is None
    release.set()
