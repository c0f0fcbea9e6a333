"""The port's stream and connection caps (``transport.py``) against the real
server: a raw HTTP/2 client that ignores the announced stream limit has the
stream past it reset before any servicer runs; a gRPC client's calls past
it wait for one to end; a connection past the cap is closed at once and
the port takes one again when another leaves."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tickwheel.v1 import scheduler_pb2, scheduler_pb2_grpc

from tests.support import http2
from tests.support.polling import eventually
from tests.support.server import running_server
from tickwheel.shared.clock import SystemClock
from tickwheel_server import transport
from tickwheel_server.waiting import WaitingForDependencies

WATCH = "/grpc.health.v1.Health/Watch"
"""Answers without a credential and stays open: each call holds its stream."""


async def test_a_client_ignoring_the_stream_limit_has_the_stream_past_it_reset(migrated_sqlite_url) -> None:
    cap = transport.MAX_STREAMS_PER_CONNECTION
    async with running_server(migrated_sqlite_url) as running:
        host, port = running.address.rsplit(":", 1)
        reader, writer = await http2.connect(host, int(port))
        streams = [2 * n + 1 for n in range(cap + 1)]
        writer.write(b"".join(http2.unary_request(s, running.address, WATCH) for s in streams))
        await writer.drain()
        announced: dict[int, int] = {}
        answered: set[int] = set()
        reset: set[int] = set()
        while answered | reset != set(streams):
            got = await asyncio.wait_for(http2.next_frame(reader), 30)
            assert got is not None, "the server closed the connection"
            if got.kind == http2.SETTINGS and got.stream == 0 and not got.flags:
                announced.update(http2.settings(got.payload))
            elif got.kind == http2.HEADERS:
                answered.add(got.stream)
            elif got.kind == http2.RST_STREAM:
                reset.add(got.stream)
        writer.close()
    assert announced.get(http2.SETTINGS_MAX_CONCURRENT_STREAMS) == cap
    assert (sorted(answered), sorted(reset)) == (streams[:cap], streams[cap:])


async def test_calls_past_the_stream_cap_wait_and_connections_past_the_cap_are_closed(
    migrated_sqlite_url, monkeypatch,
) -> None:
    monkeypatch.setattr(transport, "LIMITS", transport.limits(streams=4, connections=3))
    async with running_server(migrated_sqlite_url) as running, grpc.aio.insecure_channel(running.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        calls = [health.Watch(health_pb2.HealthCheckRequest()) for _ in range(5)]
        firsts = {asyncio.ensure_future(call.read()): call for call in calls}
        served: list[grpc.aio.Call] = []
        while len(served) < 4:
            done, _ = await asyncio.wait([f for f in firsts if firsts[f] not in served],
                                         timeout=30, return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            assert done, "fewer than four calls were served"
            served += [firsts[f] for f in done]
        assert len(served) == 4, "a fifth call was served while four held the connection's streams"
        [waiting] = [f for f, call in firsts.items() if call not in served]
        assert not waiting.done()
        served[0].cancel()
        assert (await asyncio.wait_for(waiting, 30)).status == health_pb2.HealthCheckResponse.SERVING

        # The channel holds one connection: two more are taken, the rest closed as they come.
        host, port = running.address.rsplit(":", 1)
        opened = [await http2.connect(host, int(port)) for _ in range(4)]
        firsts_seen = [await asyncio.wait_for(http2.next_frame(reader), 30) for reader, _ in opened]
        kept = [pair for pair, seen in zip(opened, firsts_seen) if seen is not None]
        assert len(kept) == 2 and all(seen.kind == http2.SETTINGS for seen in firsts_seen if seen is not None)
        for _, writer in kept:
            writer.close()

        async def taken() -> bool:
            reader, writer = await http2.connect(host, int(port))
            seen = await asyncio.wait_for(http2.next_frame(reader), 30)
            writer.close()
            return seen is not None

        await eventually(taken, "a connection is taken again once others left")
        for call in calls:
            call.cancel()


GET_JOB = "/tickwheel.v1.SchedulerService/GetJob"
CHECK = "/grpc.health.v1.Health/Check"


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


async def test_calls_whose_message_never_comes_are_bounded_per_caller_and_in_time(migrated_sqlite_url) -> None:
    """A raw HTTP/2 client sends only the HEADERS of 100 unary calls (a
    method that needs a credential and health's Check, which needs none):
    at most its address's bound wait for their message, the rest are
    answered RESOURCE_EXHAUSTED at once, and those waiting end when their
    time runs out. Before, gRPC held every one unanswered (no Tickwheel
    code ran before the message) for as long as the connection lived.
    Meanwhile a call from that address without a credential meets the
    bound; a tenant's, whose key verified here, counts under its key and
    is served."""
    async with running_server(migrated_sqlite_url) as running, grpc.aio.insecure_channel(running.address) as channel:
        key = await running.create_tenant("acme")
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        health = health_pb2_grpc.HealthStub(channel)

        async def get_job() -> grpc.StatusCode:
            try:
                await scheduler.GetJob(scheduler_pb2.GetJobRequest(id="nope"), metadata=bearer(key), timeout=30)
            except grpc.aio.AioRpcError as error:
                return error.code()
            return grpc.StatusCode.OK

        assert await get_job() == grpc.StatusCode.NOT_FOUND  # the key verified here
        awaited = running.server.awaited
        awaited.per_peer, awaited.seconds = 10, 3.0
        host, port = running.address.rsplit(":", 1)
        reader, writer = await http2.connect(host, int(port))
        streams = [2 * n + 1 for n in range(100)]
        for stream in streams:
            request = http2.unary_request(stream, running.address, CHECK if stream % 4 == 1 else GET_JOB)
            writer.write(request[: 9 + int.from_bytes(request[:3], "big")])  # its HEADERS alone
        await writer.drain()
        ended: set[int] = set()

        async def answered(count: int) -> None:
            while len(ended) < count:
                got = await asyncio.wait_for(http2.next_frame(reader), 30)
                assert got is not None, "the server closed the connection"
                if (got.kind == http2.HEADERS and got.flags & http2.END_STREAM) or got.kind == http2.RST_STREAM:
                    ended.add(got.stream)

        await answered(90)
        assert (awaited.refused, awaited.waiting()) == (90, 10), "the address's bound wait, the rest refused"
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await health.Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, "no credential: the address's bound"
        assert "calls waiting for their request message" in refused.value.details()
        assert await get_job() == grpc.StatusCode.NOT_FOUND, "a verified key counts under itself: served"
        await answered(100)
        writer.close()
        assert ended == set(streams) and awaited.timed_out == 10 and awaited.waiting() == 0


async def test_the_start_placeholder_answers_a_call_sent_as_headers_alone() -> None:
    """While a start waits (``waiting.py``), its placeholder refuses every
    call but health's UNAVAILABLE at the call's HEADERS; before, a call
    whose message never came was held unanswered (for as long as the
    start waited, an etcd outage's length)."""
    waiting = WaitingForDependencies(SystemClock(), lambda server: server.add_insecure_port("127.0.0.1:0"),
                                     ["tickwheel.v1.SchedulerService"])  # fmt: skip
    await waiting._serve_health()
    try:
        reader, writer = await http2.connect("127.0.0.1", waiting.port)
        request = http2.unary_request(1, f"127.0.0.1:{waiting.port}", GET_JOB)
        writer.write(request[: 9 + int.from_bytes(request[:3], "big")])  # its HEADERS alone
        await writer.drain()
        while True:
            got = await asyncio.wait_for(http2.next_frame(reader), 30)
            assert got is not None, "the placeholder closed the connection"
            if got.stream == 1 and (got.kind == http2.RST_STREAM or got.flags & http2.END_STREAM):
                break
        writer.close()
    finally:
        await waiting.close()
