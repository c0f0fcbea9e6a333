"""The port's stream and connection caps (``transport.py``) against the real
server: a raw HTTP/2 client that ignores the announced stream limit has the
stream past it reset before any servicer runs; a gRPC client's calls past
it wait for one to end; a connection past the cap is closed at once and
the port takes one again when another leaves."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support import http2
from tests.support.polling import eventually
from tests.support.server import running_server
from tickwheel_server import transport

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
