"""One trace from the API call to the target call.

A server and a worker in one event loop share one in-memory span exporter.
A TriggerJob call (with the caller's own ``traceparent``), the hand-out and
the worker's call to a local HTTP target are spans of the caller's trace,
each the child of the one before, and the target received the traceparent
of the worker's span. A scheduled occurrence starts its own trace with a
``dispatch`` span. With tracing off nothing is stored on the execution.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import pytest
import sqlalchemy as sa
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace import StatusCode as OtelStatusCode
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tickwheel_server.app import TickwheelServer
from tickwheel_server.config import ServerConfig
from tickwheel_server.store.tables import executions
from tickwheel.shared.targets import LOOPBACK_NETWORKS, TargetPolicy
from tickwheel_server.telemetry.tracing import Tracing
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig

BACKENDS = ["embedded", pytest.param("postgres+etcd", marks=[pytest.mark.postgres, pytest.mark.etcd])]
WAIT = 20.0
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"


class Target:
    """A local HTTP target that records the ``traceparent`` of each request."""

    def __init__(self) -> None:
        self.traceparents: list[str] = []
        self.received = threading.Event()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target.traceparents.append(self.headers.get("traceparent", ""))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                target.received.set()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[Target]:
    served = Target()
    yield served
    served.close()


def _store(backend: str, request, tmp_path) -> tuple[str, str]:
    if backend == "embedded":
        return f"sqlite:///{tmp_path / 'store.db'}", "memory"
    return request.getfixturevalue("postgres_url"), request.getfixturevalue("etcd_endpoint")


class Stack:
    """A traced server and a traced worker in this event loop, one exporter for both."""

    def __init__(self, store: str, etcd: str, *, traced: bool = True) -> None:
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.provider = provider if traced else None
        self.token = "twa_" + secrets.token_urlsafe(24)
        config = ServerConfig(
            store=store, etcd=etcd, admin_token=self.token, listen="127.0.0.1:0", migrate=True,
            shutdown_grace=1.0, allow_target_networks=LOOPBACK_NETWORKS,
        )
        self.server = TickwheelServer(config, tracing=Tracing(self.provider))

    async def __aenter__(self) -> "Stack":
        await self.server.start()
        self.channel = grpc.aio.insecure_channel(self.server.address)
        self.scheduler = scheduler_pb2_grpc.SchedulerServiceStub(self.channel)
        admin = admin_pb2_grpc.AdminServiceStub(self.channel)
        admin_md = (("authorization", f"Bearer {self.token}"),)
        tenant = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="acme")),
                                          metadata=admin_md)
        self.api_key = tenant.api_key.secret
        credential = await admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"], http=True), metadata=admin_md
        )
        self.worker = Worker(WorkerConfig(
            address=self.server.address, credential=credential.credential.secret, handlers=HandlerRegistry(),
            address_policy=TargetPolicy.allowing(LOOPBACK_NETWORKS),
            tracer=self.provider.get_tracer("test-worker") if self.provider else None,
        ))  # fmt: skip
        self.worker_task = asyncio.create_task(self.worker.run())
        await asyncio.wait_for(self.worker.connected.wait(), WAIT)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.worker.stop(1.0)
        await asyncio.gather(self.worker_task, return_exceptions=True)
        await self.channel.close()
        await self.server.stop(0.5)

    async def create_job(self, url: str, once_at: datetime | None = None) -> str:
        job = job_pb2.Job(name="traced", target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))
        if once_at is None:
            job.schedule.cron.expression = "0 0 1 1 *"
        else:
            job.schedule.once_at.FromDatetime(once_at)
        reply = await self.scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=job, request_id=secrets.token_hex(4)), metadata=bearer(self.api_key)
        )
        return reply.job.id

    async def finished_spans(self, name_prefix: str) -> list:
        """Spans so far, once one whose name starts with ``name_prefix`` has ended (the worker's ends
        when its outcome is decided, just after the target answered)."""
        deadline = asyncio.get_running_loop().time() + WAIT
        while not any(s.name.startswith(name_prefix) for s in self.spans.get_finished_spans()):
            assert asyncio.get_running_loop().time() < deadline, [s.name for s in self.spans.get_finished_spans()]
            await asyncio.sleep(0.05)
        return list(self.spans.get_finished_spans())


def _one(spans: list, name: str):
    [span] = [s for s in spans if s.name == name]
    return span


@pytest.mark.parametrize("backend", BACKENDS)
async def test_one_trace_from_trigger_to_the_target_call(backend, request, tmp_path, target) -> None:
    store, etcd = _store(backend, request, tmp_path)
    async with Stack(store, etcd) as stack:
        job_id = await stack.create_job(target.url)
        caller_span = "b7ad6b7169203331"
        await stack.scheduler.TriggerJob(
            scheduler_pb2.TriggerJobRequest(id=job_id, request_id="now"),
            metadata=(*bearer(stack.api_key), ("traceparent", f"00-{CALLER_TRACE}-{caller_span}-01")),
        )
        assert await asyncio.to_thread(target.received.wait, WAIT)
        spans = await stack.finished_spans("POST ")

    api = _one(spans, "/tickwheel.v1.SchedulerService/TriggerJob")
    hand_out = _one(spans, "hand-out")
    call = _one(spans, "POST target")
    trace_id = int(CALLER_TRACE, 16)
    assert {api.context.trace_id, hand_out.context.trace_id, call.context.trace_id} == {trace_id}
    assert api.kind == SpanKind.SERVER and api.parent.span_id == int(caller_span, 16)
    assert hand_out.parent.span_id == api.context.span_id
    assert call.kind == SpanKind.CLIENT and call.parent.span_id == hand_out.context.span_id
    assert hand_out.attributes["tickwheel.execution_id"] == f"{job_id}:trigger:now"
    assert call.attributes["tickwheel.outcome"] == "RESULT_OUTCOME_SUCCEEDED"
    [received] = target.traceparents
    version, received_trace, received_parent, flags = received.split("-")
    assert (version, flags) == ("00", "01")
    assert int(received_trace, 16) == trace_id and int(received_parent, 16) == call.context.span_id


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_scheduled_occurrence_starts_its_own_trace_with_a_dispatch_span(
    backend, request, tmp_path, target
) -> None:
    store, etcd = _store(backend, request, tmp_path)
    async with Stack(store, etcd) as stack:
        job_id = await stack.create_job(target.url, datetime.now(timezone.utc) + timedelta(milliseconds=300))
        assert await asyncio.to_thread(target.received.wait, WAIT)
        spans = await stack.finished_spans("POST ")

    create = _one(spans, "/tickwheel.v1.SchedulerService/CreateJob")
    dispatch = _one(spans, "dispatch")
    hand_out = _one(spans, "hand-out")
    call = _one(spans, "POST target")
    assert dispatch.parent is None and dispatch.context.trace_id != create.context.trace_id
    assert dispatch.attributes["tickwheel.job_id"] == job_id
    assert hand_out.parent.span_id == dispatch.context.span_id
    assert call.parent.span_id == hand_out.context.span_id
    assert {hand_out.context.trace_id, call.context.trace_id} == {dispatch.context.trace_id}
    assert int(target.traceparents[0].split("-")[1], 16) == dispatch.context.trace_id


async def test_untraced_executions_store_and_send_no_trace_context(tmp_path, target) -> None:
    async with Stack(f"sqlite:///{tmp_path / 'store.db'}", "memory", traced=False) as stack:
        job_id = await stack.create_job(target.url)
        await stack.scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job_id, request_id="plain"),
                                         metadata=bearer(stack.api_key))
        assert await asyncio.to_thread(target.received.wait, WAIT)
        with stack.server.engine.connect() as conn:
            stored = conn.execute(sa.select(executions.c.trace_context).where(executions.c.job_id == job_id)).scalar()
    assert stored is None and target.traceparents == [""]
    assert stack.spans.get_finished_spans() == ()


async def test_a_failed_call_is_an_error_span_and_streams_get_none(tmp_path) -> None:
    # The API spans are opentelemetry-instrumentation-grpc's: a refused call
    # records its status code, and by the semantic conventions a client's
    # mistake (NOT_FOUND) leaves the server span's status unset (only the
    # server's faults, INTERNAL, UNAVAILABLE and the like, are errors); the
    # Pull stream, which lasts as long as the worker, is left out.
    async with Stack(f"sqlite:///{tmp_path / 'store.db'}", "memory") as stack:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stack.scheduler.GetJob(scheduler_pb2.GetJobRequest(id="job_missing"), metadata=bearer(stack.api_key))
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        spans = await stack.finished_spans("/tickwheel.v1.SchedulerService/GetJob")
    get = _one(spans, "/tickwheel.v1.SchedulerService/GetJob")
    assert get.kind == SpanKind.SERVER and get.status.status_code == OtelStatusCode.UNSET
    assert get.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    names = {span.name for span in stack.spans.get_finished_spans()}
    assert "/tickwheel.v1.AdminService/CreateTenant" in names
    assert not [name for name in names if name.endswith(("/Pull", "/WatchAlerts"))], names
