"""A scripted WorkerService for driving a real Worker over a real grpc.aio server.

The fake server answers each hello with a welcome (``heartbeat_interval``
configurable), can send heartbeats on its own, acks results when asked to,
and records everything the worker sends per stream. Tests script the rest
(assignments, cancel, drain, closing the stream) and wait for what the worker
sends with :meth:`FakeStream.wait_for`, never with blind sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import grpc
import grpc.aio

from tickwheel.shared.clock import FakeClock
from tickwheel.v1 import job_pb2, worker_pb2, worker_pb2_grpc
from tickwheel.shared.targets import LOOPBACK_NETWORKS, TargetPolicy
from tickwheel_worker import Worker

T = TypeVar("T")
WAIT = 30.0
"""The backstop of every wait in the worker's tests: each waits on a
condition and returns as soon as it holds, so this bounds only a test that
would hang. Generous: on a loaded 2-core machine (a suite beside two busy
loops, load 30) a hundred streams of a thousand refusals each took longer
than 5 s a stream."""
LOOPBACK = TargetPolicy.allowing(LOOPBACK_NETWORKS)
"""The address policy of the tests' workers: their HTTP targets listen on 127.0.0.1."""
_CLOSE = object()
JUMP_BELOW = 60.0
"""Waits shorter than this pass at once on a :class:`JumpingClock`; longer
ones (the welcome timeout, heartbeats at the intervals the tests announce)
wait for the test."""


class JumpingClock(FakeClock):
    """A fake clock on which every wait shorter than :data:`JUMP_BELOW` is
    over at once (the clock moves by it); longer ones wait for :meth:`advance`."""

    async def sleep(self, seconds: float) -> None:
        if 0 < seconds < JUMP_BELOW:
            self.advance(seconds)
            await asyncio.sleep(0)
            return
        await super().sleep(seconds)


class FakeStream:
    """One Pull stream as the server sees it."""

    def __init__(self, service: FakeWorkerService, context: grpc.aio.ServicerContext) -> None:
        self.service = service
        self.metadata = {m.key: m.value for m in context.invocation_metadata()}
        self.received: list[worker_pb2.PullRequest] = []
        self.assigned = 0
        self.outbox: asyncio.Queue[Any] = asyncio.Queue(maxsize=1000)
        self.changed = asyncio.Condition()
        self.ended = asyncio.Event()
        """The RPC is over (either side ended it)."""
        self.client_done_writing = asyncio.Event()
        self.ended_by_half_close = False
        """The worker half-closed and the server then ended the stream (not a cancel)."""
        self.credit_violations: list[str] = []

    # -- what the worker sent --------------------------------------------

    def of(self, kind: str) -> list[Any]:
        return [getattr(r, kind) for r in self.received if r.WhichOneof("message") == kind]

    @property
    def hello(self) -> worker_pb2.WorkerHello:
        return self.received[0].hello

    @property
    def credits(self) -> list[int]:
        return [c.credits for c in self.of("credit")]

    @property
    def credit_total(self) -> int:
        """The credit granted on this stream: hello.slots plus every credit message."""
        return (self.hello.slots if self.received else 0) + sum(self.credits)

    @property
    def heartbeats(self) -> list[worker_pb2.WorkerHeartbeat]:
        return self.of("heartbeat")

    @property
    def results(self) -> list[worker_pb2.ExecutionResult]:
        return [r for batch in self.of("result") for r in batch.results]

    def result_for(self, execution_id: str) -> worker_pb2.ExecutionResult | None:
        found = [r for r in self.results if r.execution_id == execution_id]
        return found[-1] if found else None

    async def wait_for(self, predicate: Callable[[FakeStream], T], timeout: float = WAIT) -> T:
        """Wait until ``predicate(self)`` is truthy and return its value."""
        async with self.changed:
            value: Any = None

            def check() -> bool:
                nonlocal value
                value = predicate(self)
                return bool(value)

            await asyncio.wait_for(self.changed.wait_for(check), timeout)
            return value

    async def wait_result(self, execution_id: str, timeout: float = WAIT) -> worker_pb2.ExecutionResult:
        return await self.wait_for(lambda s: s.result_for(execution_id), timeout)

    async def _record(self, request: worker_pb2.PullRequest) -> None:
        async with self.changed:
            self.received.append(request)
            self.changed.notify_all()

    # -- scripting the server side --------------------------------------

    async def send(self, message: worker_pb2.PullResponse) -> None:
        await self.outbox.put(message)

    async def assign(self, *assignments: worker_pb2.Assignment) -> None:
        """Send assignments; records a violation when they exceed the credit granted."""
        if self.assigned + len(assignments) > self.credit_total:
            raise AssertionError(
                f"test bug: assigning {len(assignments)} with {self.credit_total - self.assigned} credit"
            )
        self.assigned += len(assignments)
        await self.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=assignments)))

    async def cancel(self, execution_id: str, delivery: int = 1, reason: str = "canceled by request") -> None:
        await self.send(worker_pb2.PullResponse(cancel=worker_pb2.CancelExecutions(
            executions=[worker_pb2.InFlightExecution(execution_id=execution_id, delivery=delivery)], reason=reason,
        )))

    async def ack(self, *results: worker_pb2.ExecutionResult, accepted: bool = True) -> None:
        await self.send(worker_pb2.PullResponse(ack=worker_pb2.ResultAcks(acks=[
            worker_pb2.ResultAck(execution_id=r.execution_id, delivery=r.delivery, accepted=accepted)
            for r in results
        ])))

    async def drain(self, deadline_in: float, reason: str = "server shutting down") -> None:
        message = worker_pb2.PullResponse(drain=worker_pb2.ServerDrain(reason=reason))
        message.drain.deadline_at.FromDatetime(datetime.now(timezone.utc) + timedelta(seconds=deadline_in))
        await self.send(message)

    async def close(self) -> None:
        """End the RPC from the server side (status OK), as a server that goes away."""
        await self.outbox.put(_CLOSE)
        await asyncio.wait_for(self.ended.wait(), WAIT)


class FakeWorkerService(worker_pb2_grpc.WorkerServiceServicer):
    """Records streams; welcome, heartbeats and acks are automatic unless turned off."""

    def __init__(self) -> None:
        self.address = ""
        self.heartbeat_interval = 0.1
        self.auto_heartbeat = True
        self.auto_ack = True
        self.server_id = "fake-server"
        self.reject_status: grpc.StatusCode | None = None
        self.reject_details = "refused by the fake server"
        self.refusals = 0
        """Streams refused with ``reject_status`` so far."""
        self.withhold_welcome = False
        self.streams: list[FakeStream] = []
        self._new_stream = asyncio.Condition()

    async def stream(self, index: int, timeout: float = WAIT) -> FakeStream:
        """The ``index``-th stream (0-based), once its hello arrived."""
        async with self._new_stream:
            await asyncio.wait_for(self._new_stream.wait_for(lambda: len(self.streams) > index), timeout)
        stream = self.streams[index]
        await stream.wait_for(lambda s: s.received, timeout)
        return stream

    def welcome(self, stream: FakeStream) -> worker_pb2.PullResponse:
        message = worker_pb2.PullResponse(welcome=worker_pb2.ServerWelcome(
            server_id=self.server_id,
            session_id="session-1",
            reattached=list(stream.hello.in_flight),
        ))
        message.welcome.heartbeat_interval.FromTimedelta(timedelta(seconds=self.heartbeat_interval))
        message.welcome.heartbeat_timeout.FromTimedelta(timedelta(seconds=self.heartbeat_interval * 5))
        return message

    async def Pull(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:  # noqa: N802
        stream = FakeStream(self, context)
        # The hello is read before a refusal: a stream ended before the
        # worker's write of its hello completed can reach the worker as
        # "INTERNAL: Internal error from Core", not the status sent (a gRPC
        # asyncio client defect, grpc/grpc#36066), depending on which the
        # worker's event loop sees first: timing, not the worker's code.
        first = await asyncio.wait_for(context.read(), WAIT)
        if self.reject_status is not None:
            self.refusals += 1
            await context.abort(self.reject_status, self.reject_details)
        assert first is not grpc.aio.EOF and first.WhichOneof("message") == "hello", first
        await stream._record(first)
        async with self._new_stream:
            self.streams.append(stream)
            self._new_stream.notify_all()
        reader = asyncio.create_task(self._read(stream, context))
        beats: asyncio.Task[None] | None = None
        try:
            if not self.withhold_welcome:
                await context.write(self.welcome(stream))
            if self.auto_heartbeat:
                beats = asyncio.create_task(self._beat(stream))
            while True:
                message = await stream.outbox.get()
                if message is _CLOSE:
                    stream.ended_by_half_close = stream.client_done_writing.is_set()
                    return
                await context.write(message)
        finally:
            reader.cancel()
            if beats is not None:
                beats.cancel()
            await asyncio.gather(reader, *([beats] if beats else []), return_exceptions=True)
            stream.ended.set()

    async def _read(self, stream: FakeStream, context: grpc.aio.ServicerContext) -> None:
        while True:
            request = await context.read()
            if request is grpc.aio.EOF:  # the worker half-closed: end the stream, as a server does
                stream.client_done_writing.set()
                await stream.outbox.put(_CLOSE)
                return
            await stream._record(request)
            kind = request.WhichOneof("message")
            if kind == "credit" and stream.credit_total - stream.assigned > stream.hello.slots:
                stream.credit_violations.append(f"credit {stream.credit_total - stream.assigned} > slots")
            if kind == "result" and self.auto_ack:
                await stream.ack(*request.result.results)

    async def _beat(self, stream: FakeStream) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            message = worker_pb2.PullResponse(heartbeat=worker_pb2.ServerHeartbeat())
            message.heartbeat.sent_at.GetCurrentTime()
            await stream.send(message)


def make_assignment(
    execution_id: str,
    *,
    handler: str | None = "echo",
    http: job_pb2.HttpTarget | None = None,
    payload: bytes = b"",
    attempt: int = 1,
    delivery: int = 1,
    deadline_in: float = 30.0,
    traceparent: str = "",
    nominal_at: datetime = datetime(2027, 3, 28, 2, 30, tzinfo=timezone.utc),
) -> worker_pb2.Assignment:
    assignment = worker_pb2.Assignment(
        execution_id=execution_id,
        job_id=execution_id.split(":", 1)[0],
        tenant="acme",
        attempt=attempt,
        delivery=delivery,
        payload=payload,
        traceparent=traceparent,
    )
    if http is not None:
        assignment.target.http.CopyFrom(http)
    elif handler is not None:
        assignment.target.handler.name = handler
    assignment.nominal_at.FromDatetime(nominal_at)
    assignment.due_at.FromDatetime(nominal_at + timedelta(seconds=7))
    assignment.deadline_at.FromDatetime(datetime.now(timezone.utc) + timedelta(seconds=deadline_in))
    return assignment


StartWorker = Callable[..., Awaitable[Worker]]
"""The ``start_worker`` fixture: ``await start_worker(registry, **config overrides)``."""
