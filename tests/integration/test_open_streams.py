"""The streams that answer without a credential (health's Watch,
reflection v1alpha and v1), held open by one peer, through the real server
on the embedded stores and on PostgreSQL + etcd: a peer holds at most 32
at once, the next refused RESOURCE_EXHAUSTED as it opens while the ones
open keep being served and health's Check still answers; one closed, the
next is taken; a Watch of a service name past 256 characters is
INVALID_ARGUMENT naming ``service``. (On main there was no bound: one
peer without a credential held as many as the port takes, each Watch
keeping its megabyte name in memory; ``loadtest/bench_peer_hold.py``.)"""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

MAX_PER_PEER = 32
"""``api/openstreams.MAX_PER_PEER``, as documented (not imported: this test ran on the code before it)."""

V1_INFO = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"


async def first(call):
    """The call's first answer, or the status that ended it."""
    try:
        return await asyncio.wait_for(call.read(), 30)
    except grpc.aio.AioRpcError as error:
        return error


async def watch(channel, service: str = ""):
    call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=service))
    return call, await first(call)


async def reflect(channel):
    call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo()
    await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    return call, await first(call)


async def test_one_peer_holds_a_bounded_number_of_streams_without_a_credential(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        held = []
        for n in range(MAX_PER_PEER):
            call, answer = await (watch(channel) if n % 2 else reflect(channel))
            assert not isinstance(answer, grpc.aio.AioRpcError), (n, answer)
            held.append(call)
        for opening in (watch(channel), reflect(channel)):
            call, answer = await opening
            assert isinstance(answer, grpc.aio.AioRpcError), "one past the peer's bound is refused"
            assert answer.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, answer
            assert f"at most {MAX_PER_PEER}" in answer.details(), answer.details()
        v1 = channel.stream_stream(V1_INFO)()
        await v1.write(reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString())
        refused = await first(v1)
        assert isinstance(refused, grpc.aio.AioRpcError) and refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

        check = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
        assert check.status == health_pb2.HealthCheckResponse.SERVING, "Check is not held and still answers"
        assert not any(call.done() for call in held), "the streams open are not ended"
        await held[0].write(reflection_pb2.ServerReflectionRequest(list_services=""))
        assert (await first(held[0])).list_services_response.service, "and are still served"

        held.pop(1).cancel()  # a Watch closed: its slot is taken again once the server has seen it end
        for _ in range(200):
            call, answer = await watch(channel)
            if not isinstance(answer, grpc.aio.AioRpcError):
                break
            await asyncio.sleep(0.05)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING, answer
        held.append(call)
        for call in held:
            call.cancel()

        _, long_name = await watch(channel, "s" * 100_000)
        assert isinstance(long_name, grpc.aio.AioRpcError)
        assert long_name.code() == grpc.StatusCode.INVALID_ARGUMENT and "service" in long_name.details()
