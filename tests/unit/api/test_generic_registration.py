"""The port's services are served through generic handlers only, never as
grpc.aio registered methods (transport.GenericOnly: each registered method
is a pending request grpc.aio's serving loop waits on for every call), and
a call is answered the same through them."""

from __future__ import annotations

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tickwheel.v1 import admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2_grpc

from tickwheel_server import transport
from tickwheel_server.api import decoding


class _Recording:
    """A server that records what is registered on it."""

    def __init__(self) -> None:
        self.generic: list = []
        self.registered: dict[str, dict] = {}

    def add_generic_rpc_handlers(self, handlers) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        self.registered[service] = handlers


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def _served(server: _Recording, method: str) -> grpc.RpcMethodHandler | None:
    found = [h.service(_Details(method)) for h in server.generic]
    return next((handler for handler in found if handler is not None), None)


def test_guarded_services_register_no_method_and_serve_every_one_generically() -> None:
    server = _Recording()
    for add, servicer in (
        (scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server, scheduler_pb2_grpc.SchedulerServiceServicer()),
        (worker_pb2_grpc.add_WorkerServiceServicer_to_server, worker_pb2_grpc.WorkerServiceServicer()),
        (admin_pb2_grpc.add_AdminServiceServicer_to_server, admin_pb2_grpc.AdminServiceServicer()),
    ):
        add(servicer, decoding.guard(server))
    assert server.registered == {}
    assert len(server.generic) == 3
    for method in ("/tickwheel.v1.SchedulerService/CreateJob", "/tickwheel.v1.WorkerService/Pull",
                   "/tickwheel.v1.AdminService/CreateTenant"):
        handler = _served(server, method)
        assert handler is not None, method
    # A guarded unary method decodes in its handler, not as gRPC's deserializer.
    assert _served(server, "/tickwheel.v1.SchedulerService/CreateJob").request_deserializer is None


def test_health_through_generic_only_registers_no_method() -> None:
    server = _Recording()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), transport.GenericOnly(server))
    assert server.registered == {}
    assert _served(server, "/grpc.health.v1.Health/Check") is not None


async def test_calls_are_answered_through_the_generic_handlers() -> None:
    """A real grpc.aio server: CreateJob reaches the servicer (decoded by
    the guard), a request that is no message is refused INVALID_ARGUMENT,
    health answers, and an unknown method is UNIMPLEMENTED."""
    seen: list[str] = []

    class Scheduler(scheduler_pb2_grpc.SchedulerServiceServicer):
        async def CreateJob(self, request, context):  # noqa: N802 (the gRPC method's name)
            seen.append(request.request_id)
            return scheduler_pb2.CreateJobResponse(job=request.job, created=True)

    server = grpc.aio.server(options=transport.LIMITS)
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(Scheduler(), decoding.guard(server))
    checks = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checks, transport.GenericOnly(server))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            answer = await stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job_pb2.Job(name="a"), request_id="r1"))
            assert answer.created and answer.job.name == "a" and seen == ["r1"]
            raw = channel.unary_unary("/tickwheel.v1.SchedulerService/CreateJob")
            try:
                await raw(b"\xff\xff")
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
            else:
                raise AssertionError("bytes that are no message were answered")
            assert seen == ["r1"]
            status = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
            assert status.status == health_pb2.HealthCheckResponse.SERVING
            unknown = channel.unary_unary("/tickwheel.v1.SchedulerService/NoSuchMethod")
            try:
                await unknown(b"")
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.UNIMPLEMENTED
            else:
                raise AssertionError("an unknown method was answered")
    finally:
        await server.stop(None)
