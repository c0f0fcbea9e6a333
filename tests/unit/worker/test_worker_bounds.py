"""A worker bounded against a hostile server: what the server sends at will
(assignments beyond the credit it never acks, a heartbeat interval of a
millisecond or of a year, a welcome and a drain in a loop) grows no
structure without end, sets no tight loop going and floods no log; the
results of real attempts are never dropped.

Nothing sleeps on wall time: the worker's clock is a fake one the test moves.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.heartbeats import MAX_HEARTBEAT_INTERVAL, MIN_HEARTBEAT_INTERVAL
from tickwheel.v1 import worker_pb2
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig
from tickwheel_worker import runtime
from tickwheel_worker.runtime import MAX_REFUSED

from tests.unit.worker.test_worker_outages import LOGGER, JumpingClock, lines, registry, stopped, until
from tests.unit.worker.worker_fakes import LOOPBACK, WAIT, FakeWorkerService, make_assignment


class PeakDict(dict):
    """A dict that remembers the most entries it ever held."""

    peak = 0

    def __setitem__(self, key, value) -> None:  # type: ignore[no-untyped-def]
        super().__setitem__(key, value)
        self.peak = max(self.peak, len(self))


def blocking() -> tuple[HandlerRegistry, asyncio.Event]:
    """The built-in handlers and ``block``, which returns ``blocked <execution id>`` once the event is set."""
    handlers = registry()
    release = asyncio.Event()

    @handlers.handler("block")
    async def block(ctx) -> bytes:
        await release.wait()
        return b"blocked " + ctx.execution_id.encode()

    return handlers, release


async def hold_all(stream, *more: worker_pb2.Assignment) -> None:
    """Four ``block`` assignments (``2 * slots``, a server ignoring the credit), then ``more``:
    refused, every one."""
    held = [make_assignment(f"held{i}:e", handler="block", deadline_in=1e8) for i in range(4)]
    await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=[*held, *more])))


def worker_on(service: FakeWorkerService, clock: FakeClock, heartbeat_interval: float = 100.0, **overrides) -> Worker:
    service.heartbeat_interval = heartbeat_interval
    service.auto_heartbeat = False
    settings = dict(
        address=service.address, credential="worker-secret", handlers=registry(), address_policy=LOOPBACK,
        reconnect_initial_backoff=0.2, reconnect_max_backoff=15.0, welcome_timeout=600.0, slots=2,
    )
    settings.update(overrides)
    return Worker(WorkerConfig(**settings), clock=clock)


async def test_refusals_a_server_never_acks_stay_bounded_and_real_results_are_kept(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    """100 000 assignments beyond the credit, none acked: each stream ends
    once more than MAX_REFUSED refusals wait for their ack, the refusals are
    forgotten, and the unacknowledged results of real attempts, and the
    attempts still running, go on to the next stream and are sent there."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    fake_server.auto_ack = False
    clock = JumpingClock()
    handlers, release = blocking()
    worker = worker_on(fake_server, clock, handlers=handlers)
    unacked = worker._unacked = PeakDict()  # the structure a server that never acks would grow
    running = asyncio.create_task(worker.run())
    real = {f"real{i}:e" for i in range(2)} | {f"held{i}:e" for i in range(4)}
    try:
        first = await fake_server.stream(0)
        await first.assign(*[make_assignment(f"real{i}:e", payload=b"kept") for i in range(2)])
        await first.wait_for(lambda s: s.result_for("real0:e") and s.result_for("real1:e"))
        await hold_all(first)  # what comes next is refused
        await until(lambda: len(worker.in_flight()) == 4)

        sent = 0
        index = 0
        while sent < 100_000:
            stream = await fake_server.stream(index)
            beyond = [make_assignment(f"over{sent + i}:e") for i in range(MAX_REFUSED + 1)]
            await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=beyond)))
            sent += len(beyond)
            index += 1
            # The worker ends the stream (a protocol error) and opens the next one.
            await asyncio.wait_for(until(lambda: worker.sessions == index + 1), WAIT)
            assert len(unacked) <= MAX_REFUSED + len(real)

        last = await fake_server.stream(index)
        assert {e.execution_id for e in last.hello.in_flight} == real, "refusals forgotten, real work kept"
        assert sorted(key[0] for key in worker.unacked()) == ["real0:e", "real1:e"]
        assert len(worker.in_flight()) == 4
        for i in range(2):
            assert (await last.wait_result(f"real{i}:e")).output == b"kept"
        release.set()
        for i in range(4):
            assert (await last.wait_result(f"held{i}:e")).output == f"blocked held{i}:e".encode()
        fake_server.auto_ack = True
        await last.ack(*[last.result_for(key) for key in sorted(real)])
        await asyncio.wait_for(until(lambda: not worker.unacked()), WAIT)
    finally:
        await stopped(worker, running)
    assert unacked.peak <= MAX_REFUSED + len(real), unacked.peak
    breach = f"protocol error: more than {MAX_REFUSED} assignments beyond the credit unacknowledged"
    ended = [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.DEBUG
             and r.getMessage().startswith(f"stream to {fake_server.address}: ") and breach in r.getMessage()]
    assert len(ended) == index, "each batch ended its stream (a line a failure: WARNING or DEBUG)"
    warnings = lines(caplog, logging.WARNING)
    assert warnings[0].endswith(f"{breach}; reconnecting"), warnings[0]
    assert len(warnings) < 20, warnings


async def test_refusals_a_server_acks_never_end_the_stream(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    """The bound counts refusals waiting for their ack, not refusals: a
    server that ignores the credit but acks keeps its stream."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = JumpingClock()
    handlers, release = blocking()
    worker = worker_on(fake_server, clock, handlers=handlers)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        await hold_all(stream)
        for batch in range(3):
            beyond = [make_assignment(f"over{batch}-{i}:e") for i in range(MAX_REFUSED // 2)]
            await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=beyond)))
            await stream.wait_for(lambda s: all(s.result_for(a.execution_id) for a in beyond))
            await asyncio.wait_for(until(lambda: not worker.unacked()), WAIT)  # the fake acked them
        assert len(fake_server.streams) == 1 and worker.connected.is_set()
        release.set()
    finally:
        await stopped(worker, running)
    assert not lines(caplog, logging.WARNING)


async def test_a_heartbeat_interval_of_a_millisecond_is_raised_to_the_floor_with_one_warning(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    """At the server's 1 ms the worker would heartbeat a thousand times a
    second; it waits the floor. A result the worker writes after the clock
    moved past 1 ms but short of the floor has no heartbeat before it (the
    stream keeps the worker's order)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = FakeClock()
    worker = worker_on(fake_server, clock, heartbeat_interval=0.001, server_silence_intervals=1000)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        await asyncio.wait_for(worker.connected.wait(), WAIT)
        clock.advance(MIN_HEARTBEAT_INTERVAL * 0.9)
        await stream.assign(make_assignment("e:1", payload=b"x"))
        await stream.wait_result("e:1")
        assert stream.heartbeats == []
        clock.advance(MIN_HEARTBEAT_INTERVAL * 0.2)
        await stream.wait_for(lambda s: len(s.heartbeats) == 1)
    finally:
        await stopped(worker, running)
    warnings = lines(caplog, logging.WARNING)
    assert warnings == [f"server fake-server announced a heartbeat interval of 0.001s; using "
                        f"{MIN_HEARTBEAT_INTERVAL:g}s"], warnings


async def test_a_heartbeat_interval_of_a_year_is_lowered_to_the_ceiling(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    """Heartbeats a year apart would let the server reap every execution and
    the worker never notice the server died: the ceiling holds for both."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = FakeClock()
    year = timedelta(days=365).total_seconds()
    worker = worker_on(fake_server, clock, heartbeat_interval=year, server_silence_intervals=3)
    running = asyncio.create_task(worker.run())
    try:
        first = await fake_server.stream(0)
        await asyncio.wait_for(worker.connected.wait(), WAIT)
        clock.advance(MAX_HEARTBEAT_INTERVAL)
        await first.wait_for(lambda s: len(s.heartbeats) == 1)
        clock.advance(2 * MAX_HEARTBEAT_INTERVAL)  # the server said nothing for three intervals
        await asyncio.wait_for(first.ended.wait(), WAIT)
    finally:
        await stopped(worker, running)
    warnings = lines(caplog, logging.WARNING)
    assert warnings[0] == (f"server fake-server announced a heartbeat interval of {year:g}s; using "
                           f"{MAX_HEARTBEAT_INTERVAL:g}s"), warnings


async def test_a_heartbeat_interval_out_of_bounds_in_a_loop_is_a_line_a_minute(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = JumpingClock()
    worker = worker_on(fake_server, clock, heartbeat_interval=1e6)
    running = asyncio.create_task(worker.run())
    try:
        for index in range(30):
            await (await fake_server.stream(index)).close()
        waited = clock.monotonic() - 1000.0
    finally:
        await stopped(worker, running)
    said = [m for m in lines(caplog, logging.WARNING) if "announced a heartbeat interval" in m]
    assert 1 <= len(said) <= 1 + waited // 60, (waited, said)
    assert len(said) < 30


class JumpingBelow(FakeClock):
    """Waits shorter than :data:`SHORT` (the reconnect backoff after a stream
    that worked) pass at once; longer ones (the heartbeat interval, a clean
    close's wait for the server to end the stream) wait for :meth:`advance`."""

    SHORT = 0.5

    async def sleep(self, seconds: float) -> None:
        if 0 < seconds < self.SHORT:
            self.advance(seconds)
            await asyncio.sleep(0)
            return
        await super().sleep(seconds)


async def test_a_server_welcoming_and_draining_in_a_loop_is_a_line_a_kind_a_minute(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    """Each stream lasts its heartbeat interval (it worked: no outage, the
    reconnect is quick), then the server drains it: "drains", "drained" and
    "closed" would be three INFO lines a stream."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = JumpingBelow()
    worker = worker_on(fake_server, clock, heartbeat_interval=10.0)
    running = asyncio.create_task(worker.run())
    streams = 40
    try:
        for index in range(streams):
            stream = await fake_server.stream(index)
            await asyncio.wait_for(until(lambda: worker.sessions == index + 1), WAIT)
            clock.advance(10.0)
            await stream.drain(deadline_in=30.0, reason="restarting\n" + "x" * 100_000)
            await asyncio.wait_for(stream.ended.wait(), WAIT)
        await fake_server.stream(streams)
        waited = clock.monotonic() - 1000.0
    finally:
        await stopped(worker, running)
    info = lines(caplog, logging.INFO)
    debug = lines(caplog, logging.DEBUG)
    allowed = 1 + waited // 60
    for kind in ("server fake-server drains: restarting", "drained: every attempt decided and acknowledged",
                 f"stream to {fake_server.address} closed; reconnecting"):
        said = [m for m in info if m.startswith(kind)]
        assert 1 <= len(said) <= allowed, (kind, waited, said)
        # One a stream (the last stream's close, when the worker stops, is one more).
        assert len(said) + len([m for m in debug if m.startswith(kind)]) in (streams, streams + 1), kind
    others = [m for m in info if " connected to server " not in m]  # the connected line: the server it is on
    assert len(others) < streams, others
    assert all("xxx" not in m for m in info + debug)
    assert not lines(caplog, logging.WARNING)


async def test_a_cancel_of_many_entries_costs_one_pass_and_cancels_each_attempt_once(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    """200 000 entries (delivery 0: every delivery of the id), most naming
    nothing, against 1 000 attempts held: a scan an entry would be 2e8
    steps; the attempts named are canceled, the others run on."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = FakeClock()
    handlers, release = blocking()
    worker = worker_on(fake_server, clock, handlers=handlers, slots=1000, cancel_grace=0)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        await stream.assign(*[make_assignment(f"job{i}:e", handler="block", deadline_in=1e8) for i in range(1000)])
        await asyncio.wait_for(until(lambda: len(worker.in_flight()) == 1000), WAIT)
        entries = [worker_pb2.InFlightExecution(execution_id=f"none{i}:e") for i in range(200_000)]
        entries += [worker_pb2.InFlightExecution(execution_id=f"job{i}:e") for i in range(0, 1000, 10)] * 3
        await stream.send(worker_pb2.PullResponse(cancel=worker_pb2.CancelExecutions(
            executions=entries, reason="stop\n" + "r" * 1_000_000)))
        canceled = [f"job{i}:e" for i in range(0, 1000, 10)]
        for execution_id in canceled:
            result = await stream.wait_result(execution_id)
            assert result.outcome == worker_pb2.RESULT_OUTCOME_CANCELED
            assert len(result.error) < 2000
        assert len(worker.in_flight()) == 900
        release.set()
        await stream.wait_result("job1:e")
        assert len([r for r in stream.results if r.execution_id == "job0:e"]) == 1
    finally:
        await stopped(worker, running)


async def test_rejected_acks_are_a_line_a_minute_and_only_for_results_held(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    fake_server.auto_ack = False
    clock = FakeClock()
    worker = worker_on(fake_server, clock, slots=300)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        await stream.assign(*[make_assignment(f"job{i}:e", payload=b"x") for i in range(300)])
        await stream.wait_for(lambda s: len(s.results) >= 300)
        nobody = [worker_pb2.ExecutionResult(execution_id=f"nobody{i}:e", delivery=1) for i in range(1000)]
        await stream.ack(*nobody, accepted=False)
        await stream.ack(*stream.results, accepted=False)
        await asyncio.wait_for(until(lambda: not worker.unacked()), WAIT)
    finally:
        await stopped(worker, running)
    said = [r.getMessage() for r in caplog.records if "rejected the result" in r.getMessage()]
    assert len(said) == 300, "a line for each result held, none for ids the worker never reported"
    assert len([m for m in lines(caplog, logging.WARNING) if "rejected the result" in m]) == 1


async def test_a_refusal_of_an_id_of_megabytes_is_a_protocol_error(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = JumpingClock()
    handlers, release = blocking()
    worker = worker_on(fake_server, clock, handlers=handlers)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        await hold_all(stream, make_assignment("x" * 2_000_000))
        await asyncio.wait_for(until(lambda: worker.sessions == 2), WAIT)
        assert all(len(key[0]) < 100 for key in worker.unacked())
        release.set()
    finally:
        await stopped(worker, running)
    assert any("protocol error: an assignment with an execution id of 2000000 characters" in m
               for m in lines(caplog, logging.WARNING))


async def test_results_a_server_never_acks_stop_at_a_hellos_worth_then_are_refused(
    fake_server: FakeWorkerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that never acks keeps sending assignments within twice the
    slots, each of which finishes at once: the credit stops once attempts and
    unacknowledged results fill a hello (MAX_IN_FLIGHT, lowered here), and an
    assignment arriving past that is refused, so the results of real attempts
    stop growing; every one of them is still listed by the next hello."""
    monkeypatch.setattr(runtime, "MAX_IN_FLIGHT", 60)
    fake_server.auto_ack = False
    worker = worker_on(fake_server, JumpingClock(), slots=4)
    unacked = worker._unacked = PeakDict()
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        for round in range(60 // 6):  # rounds of 6 quick attempts: within 2 * slots, past the credit
            batch = [make_assignment(f"e{round}-{i}:e") for i in range(6)]
            await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=batch)))
            await stream.wait_for(lambda s, batch=batch: all(s.result_for(a.execution_id) for a in batch))
            await asyncio.wait_for(until(lambda: not worker.in_flight()), WAIT)
        assert len(worker.unacked()) == 60
        assert stream.credit_total <= 60, "no credit past what a hello lists"
        await stream.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(
            assignments=[make_assignment("more:e")])))
        refused = await stream.wait_result("more:e")
        assert refused.outcome == worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE
        assert "over capacity" in refused.error
        assert len(worker.unacked()) == 61 and not worker.in_flight()
        await stream.close()
        again = await fake_server.stream(1)
        assert len(again.hello.in_flight) == 60, "the hello lists what it can, the real results"
    finally:
        await stopped(worker, running)
    assert unacked.peak == 61, unacked.peak
