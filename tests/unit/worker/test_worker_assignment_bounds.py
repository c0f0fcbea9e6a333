"""Every field of an assignment the worker keeps is bounded: a hostile or
broken server sending an id of megabytes, a payload of the whole receive
limit, or a handler name or an HTTP target past the contract ends the
stream as a protocol error, and nothing of its message is taken (not even
the assignments in bounds beside it). An assignment at every bound is
taken and runs. Timestamps are fixed-size: one out of range is taken, a
deadline out of range never comes (as in the TypeScript worker).

Nothing sleeps on wall time: the worker's clock jumps over its reconnect backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from tickwheel.v1 import job_pb2, worker_pb2
from tickwheel_worker.bounds import (
    MAX_HANDLER_CHARS,
    MAX_HEADERS,
    MAX_HEADERS_CHARS,
    MAX_ID_CHARS,
    MAX_METHOD_CHARS,
    MAX_PAYLOAD_BYTES,
    MAX_URL_CHARS,
    assignment_breach,
)

from tests.unit.worker.test_worker_bounds import blocking, worker_on
from tests.unit.worker.test_worker_outages import LOGGER, JumpingClock, lines, stopped, until
from tests.unit.worker.worker_fakes import WAIT, FakeWorkerService, make_assignment

Change = Callable[[worker_pb2.Assignment], None]


def _set(field: str, value: object) -> Change:
    return lambda a: setattr(a, field, value)


def _handler(name: str) -> Change:
    return lambda a: setattr(a.target.handler, "name", name)


def _http(url: str = "http://127.0.0.1:1/", method: str = "", headers: dict[str, str] | None = None) -> Change:
    return lambda a: a.target.http.CopyFrom(job_pb2.HttpTarget(url=url, method=method, headers=headers or {}))


def _seconds(field: str, seconds: int, nanos: int = 0) -> Change:
    def change(a: worker_pb2.Assignment) -> None:
        getattr(a, field).seconds = seconds
        getattr(a, field).nanos = nanos

    return change


BEYOND: list[tuple[str, Change, str]] = [
    ("id of megabytes", _set("execution_id", "x" * 2_000_000), "an execution id of 2000000 characters"),
    ("empty id", _set("execution_id", ""), "an execution id of 0 characters"),
    ("id", _set("execution_id", "x" * (MAX_ID_CHARS + 1)), f"an execution id of {MAX_ID_CHARS + 1} characters"),
    ("job id", _set("job_id", "j" * (MAX_ID_CHARS + 1)), f"a job id of {MAX_ID_CHARS + 1} characters"),
    ("tenant", _set("tenant", "t" * 100_000), "a tenant of 100000 characters"),
    ("traceparent", _set("traceparent", "0" * (MAX_ID_CHARS + 1)), f"a traceparent of {MAX_ID_CHARS + 1} characters"),
    ("payload", _set("payload", b"p" * (MAX_PAYLOAD_BYTES + 1)), f"a payload of {MAX_PAYLOAD_BYTES + 1} bytes"),
    ("handler", _handler("h" * (MAX_HANDLER_CHARS + 1)), f"a handler name of {MAX_HANDLER_CHARS + 1} characters"),
    ("url", _http(url="http://a/" + "u" * MAX_URL_CHARS), f"an HTTP URL of {MAX_URL_CHARS + 9} characters"),
    ("method", _http(method="M" * (MAX_METHOD_CHARS + 1)), f"an HTTP method of {MAX_METHOD_CHARS + 1} characters"),
    ("headers", _http(headers={f"h{i}": "v" for i in range(MAX_HEADERS + 1)}), f"{MAX_HEADERS + 1} HTTP headers"),
    ("header bytes", _http(headers={"a": "v" * MAX_HEADERS_CHARS}), f"HTTP headers of {MAX_HEADERS_CHARS + 1} characters"),
]


@pytest.mark.parametrize(("case", "change", "said"), BEYOND, ids=[case for case, _, _ in BEYOND])
async def test_an_assignment_past_a_bound_ends_the_stream_and_nothing_of_its_message_is_taken(
    fake_server: FakeWorkerService, caplog: pytest.LogCaptureFixture, case: str, change: Change, said: str
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = JumpingClock()
    worker = worker_on(fake_server, clock)
    running = asyncio.create_task(worker.run())
    try:
        first = await fake_server.stream(0)
        bad = make_assignment("bad:e", payload=b"x")
        change(bad)
        assert assignment_breach(bad) is not None, case
        await first.assign(make_assignment("good:e", payload=b"x"), bad)
        second = await fake_server.stream(1)
        await asyncio.wait_for(until(lambda: worker.sessions == 2), WAIT)
        assert list(second.hello.in_flight) == [], "nothing of the message was taken"
        assert not first.results and not worker.unacked() and not worker.in_flight()
        await second.assign(make_assignment("after:e", payload=b"y"))
        assert (await second.wait_result("after:e")).output == b"y", "the next stream serves"
    finally:
        await stopped(worker, running)
    warnings = lines(caplog, logging.WARNING)
    assert any("protocol error: an assignment" in m and said in m for m in warnings), warnings
    assert all(len(m) < 1000 for m in warnings)


def _at_every_bound(a: worker_pb2.Assignment) -> None:
    a.execution_id = "e" * MAX_ID_CHARS
    a.job_id = "j" * MAX_ID_CHARS
    a.tenant = "t" * MAX_ID_CHARS
    a.traceparent = ""  # a traceparent of MAX_ID_CHARS is not one the tracer parses; its length is tested below
    a.payload = b"p" * MAX_PAYLOAD_BYTES
    a.target.handler.name = "echo"


async def test_an_assignment_at_every_bound_is_taken_and_runs(fake_server: FakeWorkerService) -> None:
    clock = JumpingClock()
    worker = worker_on(fake_server, clock)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        at_bound = make_assignment("e:1")
        _at_every_bound(at_bound)
        assert assignment_breach(at_bound) is None
        await stream.assign(at_bound)
        result = await stream.wait_result("e" * MAX_ID_CHARS)
        assert result.outcome == worker_pb2.RESULT_OUTCOME_SUCCEEDED
        assert worker.sessions == 1
    finally:
        await stopped(worker, running)


def test_each_bound_is_inclusive() -> None:
    """The pure check, field by field, at the bound and one past it."""
    at: list[Change] = [
        _set("traceparent", "0" * MAX_ID_CHARS),
        _handler("h" * MAX_HANDLER_CHARS),
        _http(url="http://a/" + "u" * (MAX_URL_CHARS - 9), method="M" * MAX_METHOD_CHARS,
              headers={f"h{i:02}": "v" for i in range(MAX_HEADERS)}),
        _http(headers={"a": "v" * (MAX_HEADERS_CHARS - 1)}),
    ]
    for change in at:
        a = make_assignment("e:1")
        change(a)
        assert assignment_breach(a) is None
    for _, change, said in BEYOND:
        a = make_assignment("e:1")
        change(a)
        assert said in (assignment_breach(a) or ""), said


async def test_timestamps_out_of_range_are_taken_and_a_deadline_out_of_range_never_comes(
    fake_server: FakeWorkerService,
) -> None:
    clock = JumpingClock()
    handlers, release = blocking()
    worker = worker_on(fake_server, clock, handlers=handlers, server_silence_intervals=1_000_000)
    running = asyncio.create_task(worker.run())
    try:
        stream = await fake_server.stream(0)
        never = make_assignment("never:e", handler="block")
        _seconds("deadline_at", 2**62)(never)
        _seconds("nominal_at", -(2**62), -1)(never)
        past = make_assignment("past:e", handler="block")
        _seconds("deadline_at", -(2**62))(past)
        await stream.assign(never, past)
        past_result = await stream.wait_result("past:e")
        assert past_result.outcome == worker_pb2.RESULT_OUTCOME_TIMED_OUT
        assert past_result.error.endswith("at its deadline 0001-01-01T00:00:00+00:00"), past_result.error
        clock.advance(365 * 86400.0)
        await asyncio.sleep(0.01)
        assert stream.result_for("never:e") is None
        release.set()
        assert (await stream.wait_result("never:e")).outcome == worker_pb2.RESULT_OUTCOME_SUCCEEDED
        assert worker.sessions == 1
    finally:
        await stopped(worker, running)
