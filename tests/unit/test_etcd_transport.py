"""How the etcd transport classifies gRPC statuses and moves between endpoints."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.lease.etcd_transport import Endpoints, translate, within
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
