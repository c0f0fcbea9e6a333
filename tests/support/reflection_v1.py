"""A minimal grpc.reflection.v1 client (grpcurl 1.8 speaks only v1alpha)."""

from __future__ import annotations

import grpc

from tickwheel_server.api.reflection import _v1_message_classes


async def list_services_v1(address: str) -> list[str]:
    request_class, response_class = _v1_message_classes()
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_class.FromString,
        )
        stream = call(iter([request_class(list_services="")]))
        async for response in stream:
            return [service.name for service in response.list_services_response.service]
    raise AssertionError("no reflection response")



