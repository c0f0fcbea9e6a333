"""A worker through an outage of its server logs it as the server logs its
own (``tickwheel.shared.outages.OutageLog``): one WARNING when it begins,
naming the address, the status and its details (never the credential),
then after a minute and gaps doubling up to 15 minutes, one INFO with the
duration at the next welcome; every failed reconnect in between is DEBUG.
A server refusing, answering garbage or throttling in a loop does not
flood the log, a refused credential is an ERROR, and a result held through
the outage is sent on the next stream.

The worker's clock jumps over every wait shorter than a minute (its
reconnect backoff, at most 15 s): hundreds of reconnects take a fraction
of a second, and nothing sleeps on wall time.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

import grpc
import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel.v1 import worker_pb2
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig, WorkerFatalError, register_builtins
from tickwheel_worker.runtime import SAID_CHARS

from tests.unit.worker.worker_fakes import LOOPBACK, WAIT, FakeWorkerService, JumpingClock, make_assignment

LOGGER = "tickwheel_worker.runtime"
SECRET = "twk_worker-secret-0123456789"


def registry() -> HandlerRegistry:
    handlers = HandlerRegistry()
    register_builtins(handlers)
    return handlers


def worker_on(service: FakeWorkerService, clock: FakeClock, handlers: HandlerRegistry | None = None) -> Worker:
    # The fake welcomes with a heartbeat interval of 100 s: past JUMP_BELOW,
    # so a welcomed stream's heartbeats and silence watch wait for the test.
    # A seeded jitter: the backoff, and so the clock's course, is the same each run.
    service.heartbeat_interval = 100.0
    service.auto_heartbeat = False
    return Worker(WorkerConfig(
        address=service.address, credential=SECRET, handlers=handlers or registry(), address_policy=LOOPBACK,
        reconnect_initial_backoff=0.2, reconnect_max_backoff=15.0, welcome_timeout=600.0, slots=2,
    ), clock=clock, rng=random.Random(21))  # fmt: skip


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


async def until(predicate: Callable[[], bool]) -> None:
    """What the fake server and the worker do meanwhile; bounded by the caller's timeout."""
    while not predicate():
        await asyncio.sleep(0.002)


async def stopped(worker: Worker, running: asyncio.Task[None]) -> None:
    await asyncio.wait_for(worker.stop(grace=0), WAIT)
    await asyncio.wait_for(running, WAIT)


@pytest.mark.parametrize(("code", "details"), [
    (grpc.StatusCode.UNAVAILABLE, "starting: waiting for etcd at 127.0.0.1:2379"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many failed authentications; retry later"),
    (grpc.StatusCode.INTERNAL, "\x1b[31mgarbage\r\nsecond line " + SECRET + " " + "x" * 2000),
])
async def test_hundreds_of_refused_reconnects_are_a_few_lines_then_one_recovery(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture, code: grpc.StatusCode, details: str
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    fake_server.reject_status = code
    fake_server.reject_details = details
    clock = JumpingClock()
    worker = worker_on(fake_server, clock)
    began = clock.monotonic()
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(until(lambda: fake_server.refusals >= 300), 4 * WAIT)
        assert not running.done() and not worker.connected.is_set()
        down_for = clock.monotonic() - began
        assert down_for > 1800, "the backoff reached its cap: half an hour of the worker's clock at least"

        fake_server.reject_status = None
        await asyncio.wait_for(worker.connected.wait(), WAIT)
        assert not [m for m in lines(caplog, logging.INFO) if "recovered after" in m], "a welcome is not enough"
        clock.advance(100.0)  # the stream lasted a heartbeat interval: the outage is over
        await asyncio.wait_for(until(lambda: any("recovered after" in m for m in lines(caplog, logging.INFO))),
                               WAIT)
    finally:
        await stopped(worker, running)

    warnings = lines(caplog, logging.WARNING)
    first = f"stream to {fake_server.address}: connecting failed, server unavailable: {code.name}: "
    assert warnings[0].startswith(first), warnings[0]
    assert warnings[0].endswith("; reconnecting")
    # After a minute, then gaps of 2, 4, 8 and 15 minutes.
    expected = 1 + sum(1 for at in (60, 180, 420, 900) if at <= down_for) + int(max(0.0, down_for - 900) // 900)
    assert 3 <= len(warnings) <= expected + 1, (down_for, warnings)
    assert all(w.startswith(f"stream to {fake_server.address}: still failing for ") for w in warnings[1:])
    assert len(lines(caplog, logging.DEBUG)) >= 300 - len(warnings)
    recovered = [m for m in lines(caplog, logging.INFO) if "recovered after" in m]
    assert len(recovered) == 1 and f"({fake_server.refusals} failures)" in recovered[0], recovered
    assert not lines(caplog, logging.ERROR)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert SECRET not in text and "\x1b" not in text and "second line" not in text
    assert all(len(w) < SAID_CHARS + 300 for w in warnings)


@pytest.mark.parametrize("seconds", [2**62, 315_576_000_001], ids=["unconvertible", "past-protobuf-range"])
async def test_a_garbage_welcome_in_a_loop_is_one_warning_not_a_traceback_a_try(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture, seconds: int
) -> None:
    """A welcome whose heartbeat interval is out of protobuf's Duration range
    (or beyond what it can convert): a protocol error, an outage of the server
    like any other, backed off (as in the other workers)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = JumpingClock()
    worker = worker_on(fake_server, clock)
    welcome = fake_server.welcome

    def garbage(stream):
        message = welcome(stream)
        message.welcome.heartbeat_interval.seconds = seconds
        return message

    fake_server.welcome = garbage
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(until(lambda: len(fake_server.streams) >= 100), 4 * WAIT)
        assert worker.sessions == 0
    finally:
        await stopped(worker, running)
    warnings = lines(caplog, logging.WARNING)
    assert warnings[0].endswith("protocol error: the welcome's heartbeat_interval is out of range; reconnecting")
    assert len(warnings) <= 6, warnings
    assert not lines(caplog, logging.ERROR)
    assert not any(r.exc_info for r in caplog.records if r.name == LOGGER)


async def test_a_welcome_then_a_close_in_a_loop_backs_off(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that welcomes and at once ends the stream: each stream ended
    within its heartbeat interval, so the reconnects back off as refused
    ones do, and it is one outage, logged as one, not lines a stream."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = JumpingClock()
    worker = worker_on(fake_server, clock)
    running = asyncio.create_task(worker.run())
    try:
        for index in range(40):
            stream = await fake_server.stream(index)
            await stream.close()
        waited = clock.monotonic() - 1000.0
    finally:
        await stopped(worker, running)
    # 40 streams quick again after each welcome would take a few seconds of
    # the clock; backed off, the later waits are up to 15 s each.
    assert waited > 60, waited
    warnings = lines(caplog, logging.WARNING)
    assert warnings[0].endswith("the stream failed, server unavailable: the server closed the stream; reconnecting")
    assert all("still failing" in m for m in warnings[1:])
    assert len(warnings) <= 1 + sum(1 for at in (60, 180, 420, 900) if at <= waited) + int(waited // 900), warnings
    assert not [m for m in lines(caplog, logging.INFO) if "recovered" in m], "no stream lasted: no recovery"
    connected = [m for m in lines(caplog, logging.INFO) if " connected to server " in m]
    assert len(connected) <= 1 + waited / 60, connected


async def test_a_result_held_through_an_outage_is_sent_on_the_next_stream(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    fake_server.auto_ack = False
    clock = JumpingClock()
    worker = worker_on(fake_server, clock)
    running = asyncio.create_task(worker.run())
    try:
        first = await fake_server.stream(0)
        await first.assign(make_assignment("job1:e1", payload=b"kept"))
        sent = await first.wait_result("job1:e1")
        assert sent.output == b"kept" and worker.unacked() == [("job1:e1", 1)]

        fake_server.reject_status = grpc.StatusCode.UNAVAILABLE
        await first.close()
        await asyncio.wait_for(until(lambda: fake_server.refusals >= 100), 4 * WAIT)
        assert worker.unacked() == [("job1:e1", 1)]

        fake_server.reject_status = None
        fake_server.auto_ack = True
        second = await fake_server.stream(1)
        assert [e.execution_id for e in second.hello.in_flight] == ["job1:e1"]
        again = await second.wait_result("job1:e1")
        assert again.output == b"kept"
        await asyncio.wait_for(until(lambda: not worker.unacked()), WAIT)
    finally:
        await stopped(worker, running)
    warnings = lines(caplog, logging.WARNING)
    assert warnings[0] == (f"stream to {fake_server.address}: the stream failed, server unavailable: "
                           "the server closed the stream; reconnecting")


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED])
async def test_a_refused_credential_is_one_error_line_and_a_fatal_error(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture, code: grpc.StatusCode
) -> None:
    """Not a quiet retry: the operator sees it, at ERROR, and the worker stops."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    fake_server.reject_status = code
    fake_server.reject_details = f"credential {SECRET} revoked"
    worker = worker_on(fake_server, JumpingClock())
    with pytest.raises(WorkerFatalError, match=code.name) as fatal:
        await asyncio.wait_for(worker.run(), WAIT)
    assert fake_server.refusals == 1
    errors = lines(caplog, logging.ERROR)
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"{fake_server.address} refused the worker {worker.config.worker_id}: {code.name}:")
    assert "credential *** revoked; stopping (" in errors[0]
    assert SECRET not in str(fatal.value) and SECRET not in caplog.text


async def test_a_drain_deadline_out_of_range_is_a_protocol_error_not_a_defect(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = JumpingClock()
    worker = worker_on(fake_server, clock)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        drain = worker_pb2.PullResponse(drain=worker_pb2.ServerDrain(reason="garbage"))
        drain.drain.deadline_at.seconds = 2**62
        await stream.send(drain)
        await fake_server.stream(1)
    finally:
        await stopped(worker, running)
    assert any(m.endswith("protocol error: the drain's deadline_at is out of range; reconnecting")
               for m in lines(caplog, logging.WARNING))
    assert not lines(caplog, logging.ERROR)


async def test_a_server_repeating_what_the_protocol_forbids_is_a_line_a_minute(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    """Second welcomes, duplicate assignments and assignments beyond the
    credit, hundreds of each on one stream: each kind is one line (ERROR for
    the credit), the rest DEBUG and counted in the kind's next line; what
    beyond the credit is refused is still answered, each one."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = JumpingClock()
    handlers = registry()
    release = asyncio.Event()

    @handlers.handler("block")
    async def block(ctx) -> bytes:
        await release.wait()
        return b""

    worker = worker_on(fake_server, clock, handlers)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        # Deadlines far beyond the fake clock's start (2027), so nothing times out.
        held = [make_assignment(f"job{i}:e", handler="block", deadline_in=1e8) for i in range(4)]  # 2 * slots
        await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=held)))
        for _ in range(300):
            await stream.send(fake_server.welcome(stream))
        await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=held * 75)))
        beyond = [make_assignment(f"over{i}:e") for i in range(300)]
        await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=beyond)))
        await stream.wait_for(lambda s: all(s.result_for(f"over{i}:e") for i in range(300)))
        assert worker.connected.is_set() and len(worker.in_flight()) == 4

        clock.advance(61.0)  # a minute on: the next of each kind is a line again, with the count
        await stream.send(fake_server.welcome(stream))
        await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=held[:1])))
        await asyncio.wait_for(until(lambda: len(lines(caplog, logging.WARNING)) >= 4), WAIT)
        release.set()
    finally:
        await stopped(worker, running)
    warnings = lines(caplog, logging.WARNING)
    assert [w.split(" (")[0] for w in warnings if "welcome" in w] == ["ignoring a second welcome from server fake-server"] * 2
    assert warnings[-2:] in (
        ["ignoring a second welcome from server fake-server (299 more since the last such line, at DEBUG)",
         "duplicate assignment (delivery 1) ignored (299 more since the last such line, at DEBUG)"],
        ["duplicate assignment (delivery 1) ignored (299 more since the last such line, at DEBUG)",
         "ignoring a second welcome from server fake-server (299 more since the last such line, at DEBUG)"],
    ), warnings
    assert len(warnings) == 4, warnings
    errors = lines(caplog, logging.ERROR)
    assert errors == ["assignment (delivery 1) beyond this worker's credit; refused"], errors
