"""Server reflection under both names grpcurl and other clients ask for.

grpcio-reflection serves ``grpc.reflection.v1alpha`` only. ``grpc.reflection.v1``
is the same protocol with the same messages under another package, so this
module registers the v1 file descriptor (the v1alpha one with its package
renamed) and serves the same servicer under the v1 service name. Its
streams are bounded per peer and in all (:mod:`.openstreams`).
"""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass
from grpc_reflection.v1alpha import reflection, reflection_pb2

from .openstreams import OpenStreams

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _v1_message_classes() -> tuple[type, type]:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_V1_FILE)
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto()
        reflection_pb2.DESCRIPTOR.CopyToProto(proto)
        proto.name = _V1_FILE
        proto.package = "grpc.reflection.v1"
        proto.ClearField("options")
        for message in proto.message_type:
            for field in message.field:
                if field.type_name:
                    field.type_name = field.type_name.replace(".grpc.reflection.v1alpha.", ".grpc.reflection.v1.")
        for service in proto.service:
            for method in service.method:
                method.input_type = method.input_type.replace("v1alpha", "v1")
                method.output_type = method.output_type.replace("v1alpha", "v1")
        pool.Add(proto)
    request = GetMessageClass(pool.FindMessageTypeByName("grpc.reflection.v1.ServerReflectionRequest"))
    response = GetMessageClass(pool.FindMessageTypeByName("grpc.reflection.v1.ServerReflectionResponse"))
    return request, response


def enable(server: grpc.aio.Server, service_names: list[str], streams: OpenStreams | None = None) -> list[str]:
    """Serve reflection v1alpha and v1 for ``service_names`` (plus themselves),
    each stream counted in ``streams`` while it is open (:mod:`.openstreams`:
    reflection answers without a credential).

    Returns every service name now reflected.
    """
    v1_request, v1_response = _v1_message_classes()
    names = [*service_names, reflection.SERVICE_NAME, V1_SERVICE]
    servicer = reflection.aio.ReflectionServicer(names)
    streams = streams if streams is not None else OpenStreams()

    async def v1alpha_info(request_iterator, context):
        async with streams.holding(context):
            async for response in servicer.ServerReflectionInfo(request_iterator, context):
                yield response

    async def v1_info(request_iterator, context):
        async def as_v1alpha():
            async for request in request_iterator:
                yield reflection_pb2.ServerReflectionRequest.FromString(request.SerializeToString())

        async with streams.holding(context):
            async for response in servicer.ServerReflectionInfo(as_v1alpha(), context):
                yield v1_response.FromString(response.SerializeToString())

    for service, info, request_class in (
        (reflection.SERVICE_NAME, v1alpha_info, reflection_pb2.ServerReflectionRequest), (V1_SERVICE, v1_info, v1_request),
    ):  # fmt: skip
        handler = grpc.method_handlers_generic_handler(
            service,
            {
                "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                    info,
                    request_deserializer=request_class.FromString,
                    response_serializer=lambda message: message.SerializeToString(),
                )
            },
        )
        server.add_generic_rpc_handlers((handler,))
    return names
