"""How the etcd transport classifies gRPC statuses and moves between endpoints."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import grpc.aio
import pytest

from tickwheel.shared.clock import FakeClock
from pyetcd.etcdrpc import rpc_pb2

from tickwheel_server.lease.etcd_transport import (
    REQUIRE_LEADER, RETRYABLE_CODES, Endpoints, StreamEnded, Transport, is_deadline, moves_on, read, translate, within,
)
from tickwheel_server.lease.types import LeaseStoreFatal, LeaseStoreUnavailable, SessionLost


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


@pytest.mark.parametrize(
    ("code", "details", "expected"),
    [
        (grpc.StatusCode.NOT_FOUND, "etcdserver: requested lease not found", SessionLost),
        (grpc.StatusCode.NOT_FOUND, "something else", LeaseStoreFatal),
        (grpc.StatusCode.UNAVAILABLE, "connection refused", LeaseStoreUnavailable),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "", LeaseStoreUnavailable),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many requests", LeaseStoreUnavailable),
        (grpc.StatusCode.ABORTED, "", LeaseStoreUnavailable),
        (grpc.StatusCode.INTERNAL, "", LeaseStoreUnavailable),
        (grpc.StatusCode.UNKNOWN, "", LeaseStoreUnavailable),
        (grpc.StatusCode.CANCELLED, "", LeaseStoreUnavailable),
        (grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key is not provided", LeaseStoreFatal),
        (grpc.StatusCode.PERMISSION_DENIED, "", LeaseStoreFatal),
        (grpc.StatusCode.UNIMPLEMENTED, "", LeaseStoreFatal),
    ],
)
def test_translate_table(code: grpc.StatusCode, details: str, expected: type) -> None:
    error = translate(rpc_error(code, details), "put")
    assert type(error) is expected
    assert str(error) == f"etcd put: {code.name}: {details}"
    assert error.retryable == (expected is LeaseStoreUnavailable)


@pytest.mark.parametrize(
    ("code", "details", "deadline", "moves"),
    [
        (grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader", False, True),
        (grpc.StatusCode.UNAVAILABLE, "connection refused", False, True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True, True),
        (grpc.StatusCode.UNKNOWN, "context deadline exceeded", True, True),
        (grpc.StatusCode.UNKNOWN, "something broke", False, False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "etcdserver: too many requests", False, False),
        (grpc.StatusCode.NOT_FOUND, "etcdserver: requested lease not found", False, False),
    ],
)
def test_what_moves_to_the_next_endpoint(code: grpc.StatusCode, details: str, deadline: bool, moves: bool) -> None:
    error = rpc_error(code, details)
    assert is_deadline(error) is deadline
    assert moves_on(error) is moves


class Scripted:
    """Stand-in stubs: each endpoint answers from its script of results (an
    exception is raised); ``calls`` records (endpoint, timeout, metadata)."""

    def __init__(self, scripts: dict[str, list[Any]]) -> None:
        self.scripts = scripts
        self.calls: list[tuple[str, float, Any]] = []

    def pick(self, stubs: Any) -> Any:
        async def unary(request: Any, *, timeout: float, metadata: Any) -> Any:
            self.calls.append((stubs.endpoint, timeout, metadata))
            result = self.scripts[stubs.endpoint].pop(0)
            if isinstance(result, BaseException):
                raise result
            return result

        return unary


async def test_a_call_shares_its_timeout_and_moves_past_a_stalled_or_leaderless_member() -> None:
    transport = Transport(["a:1", "b:2", "c:3"], FakeClock(), request_timeout=6.0)
    script = Scripted({
        "a:1": [rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")],
        "b:2": [rpc_error(grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader")],
        "c:3": ["answer", "again"],
    })  # fmt: skip
    try:
        assert await transport.call(script.pick, object(), "get") == "answer"
        assert [(endpoint, timeout) for endpoint, timeout, _ in script.calls] == [("a:1", 2.0), ("b:2", 2.0), ("c:3", 2.0)]
        assert all(metadata == REQUIRE_LEADER for _, _, metadata in script.calls)
        assert await transport.call(script.pick, object(), "get") == "again"  # straight to the one that answered
        assert [endpoint for endpoint, _, _ in script.calls][3:] == ["c:3"]
    finally:
        await transport.close()


async def test_a_call_no_endpoint_answers_raises_unavailable_after_one_try_each() -> None:
    transport = Transport(["a:1", "b:2"], FakeClock(), request_timeout=5.0)
    script = Scripted({
        "a:1": [rpc_error(grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader")],
        "b:2": [rpc_error(grpc.StatusCode.UNKNOWN, "context deadline exceeded")],
    })  # fmt: skip
    try:
        with pytest.raises(LeaseStoreUnavailable, match="no endpoint answered"):
            await transport.call(script.pick, object(), "put")
        assert [endpoint for endpoint, _, _ in script.calls] == ["a:1", "b:2"]
    finally:
        await transport.close()


async def test_a_request_error_does_not_move() -> None:
    transport = Transport(["a:1", "b:2"], FakeClock(), request_timeout=5.0)
    script = Scripted({"a:1": [rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key is not provided")]})
    try:
        with pytest.raises(LeaseStoreFatal):
            await transport.call(script.pick, object(), "put")
        assert transport.endpoints.in_use == "a:1"
    finally:
        await transport.close()


def test_an_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "tickwheel_server.lease.etcd_transport")
    endpoints = Endpoints(["a:1", "b:2", "c:3"])
    for failed in ["a:1", "b:2", "c:3", "a:1"]:  # every member down: round the list
        endpoints.failover(failed, "UNAVAILABLE")
    endpoints.answered("b:2")
    endpoints.answered("b:2")
    endpoints.failover("b:2", "UNAVAILABLE")
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == [logging.INFO, logging.DEBUG, logging.DEBUG, logging.DEBUG, logging.INFO,
                                             logging.INFO]  # fmt: skip
    assert lines[0][1] == "etcd endpoint a:1 failed (UNAVAILABLE); switching to b:2"
    assert lines[4][1] == "etcd endpoint b:2 answers; using it"


def test_failover_moves_once_per_failure_of_the_endpoint_in_use() -> None:
    endpoints = Endpoints(["a:1", "b:2", "c:3"])
    assert endpoints.endpoints == ["a:1", "b:2", "c:3"]
    moves = []
    for failed in ["a:1", "a:1", "b:2", "c:3"]:
        endpoints.failover(failed)  # the second "a:1" comes from a call that began before the move
        moves.append(endpoints.in_use)
    assert moves == ["b:2", "b:2", "c:3", "a:1"]
    single = Endpoints(["a:1"])
    single.failover("a:1")
    assert single.in_use == "a:1"
    with pytest.raises(ValueError):
        Endpoints([])


async def test_within_gives_the_result_or_times_out_on_the_clock() -> None:
    clock = FakeClock(autojump=True)
    assert await within(clock, 1.0, asyncio.sleep(0, result="done")) == "done"
    never = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await within(clock, 1.0, never)
    assert never.cancelled()


async def test_redial_replaces_a_silent_channel_once_and_closes_the_old_one() -> None:
    """After a deadline the shared channel is replaced (a stale report of
    the same failure changes nothing); the old one is closed after its grace,
    and a watch stream still reading on it ends (to be opened again on the
    new one) instead of raising CancelledError into its owner."""
    endpoints = Endpoints(["127.0.0.1:9", "127.0.0.1:10"])
    endpoints.redial("127.0.0.1:10", 0)  # no channel there yet: nothing to do
    old = endpoints.current()
    stream = old.watch.Watch()
    reading = asyncio.ensure_future(read(stream, lambda: False))
    await asyncio.sleep(0)  # the read starts
    endpoints.redial(old.endpoint, 0, stubs=old)
    new = endpoints.current()
    assert new is not old and new.endpoint == old.endpoint and endpoints.in_use == old.endpoint
    endpoints.redial(old.endpoint, 0, stubs=old)  # the same failure seen again by another caller
    assert endpoints.current() is new
    # ended by a status its owner retries, or (read not yet started) StreamEnded
    with pytest.raises((StreamEnded, grpc.aio.AioRpcError)) as ended:
        await asyncio.wait_for(reading, 10)
    if isinstance(ended.value, grpc.aio.AioRpcError):
        assert ended.value.code() in RETRYABLE_CODES
    with pytest.raises(Exception, match="(?i)closed"):
        await old.kv.Range(rpc_pb2.RangeRequest(key=b"k"), timeout=1)
    await endpoints.close()
