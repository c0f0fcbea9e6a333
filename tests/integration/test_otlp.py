"""Traces and metrics over OTLP, to a real receiver, from real processes.

The test starts an OTLP receiver (the OTLP protobuf services over gRPC, or
``POST /v1/traces`` and ``/v1/metrics`` over HTTP), a `tickwheel server`
configured by flags and a `tickwheel worker` configured only by the standard
``OTEL_EXPORTER_OTLP_*`` variables. A TriggerJob carrying the caller's
``traceparent`` becomes one trace that the receiver decodes: the API call, the
hand-out, the worker's call to an HTTP target, each the child of the one
before; the target received the last span's traceparent. The server also
pushes its metrics, the lateness histogram included.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tests.integration.test_tracing import Target
from tests.support.polling import eventually
from tests.support.server import TICKWHEEL, start_server_process, start_worker_process, stop_process

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
WAIT = 30.0


class Receiver:
    """An OTLP receiver: every export request it was sent, decoded."""

    def __init__(self) -> None:
        self.traces: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metrics: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self._lock = threading.Lock()

    def took(self, request) -> None:
        with self._lock:
            (self.traces if isinstance(request, trace_service_pb2.ExportTraceServiceRequest) else self.metrics).append(
                request
            )

    def spans(self) -> list[tuple[str, Any]]:
        """(service.name, span) of every span received."""
        with self._lock:
            requests = list(self.traces)
        found = []
        for request in requests:
            for resource_spans in request.resource_spans:
                service = next(
                    (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
                )
                for scope in resource_spans.scope_spans:
                    found.extend((service, span) for span in scope.spans)
        return found

    def metric_names(self) -> dict[str, Any]:
        """The last received metric of each name."""
        with self._lock:
            requests = list(self.metrics)
        return {
            metric.name: metric
            for request in requests for resource in request.resource_metrics
            for scope in resource.scope_metrics for metric in scope.metrics
        }  # fmt: skip


@contextlib.contextmanager
def grpc_receiver():
    receiver = Receiver()

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            receiver.took(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request, context):
            receiver.took(request)
            return metrics_service_pb2.ExportMetricsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield receiver, f"http://127.0.0.1:{port}"
    finally:
        server.stop(None)


@contextlib.contextmanager
def http_receiver():
    receiver = Receiver()
    kinds = {
        "/v1/traces": (trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse),
        "/v1/metrics": (
            metrics_service_pb2.ExportMetricsServiceRequest, metrics_service_pb2.ExportMetricsServiceResponse,
        ),
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            kind = kinds.get(self.path)
            if kind is None or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            receiver.took(kind[0].FromString(body))
            reply = kind[1]().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield receiver, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _one(spans: list, name: str):
    matching = [span for span in spans if span.name == name]
    assert len(matching) == 1, (name, [span.name for span in spans])
    return matching[0]


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
async def test_one_trace_and_the_metrics_reach_an_otlp_receiver(protocol: str, tmp_path: Path) -> None:
    receivers = {"grpc": grpc_receiver, "http/protobuf": http_receiver}
    with receivers[protocol]() as (receiver, endpoint), contextlib.ExitStack() as stack:
        target = Target()
        stack.callback(target.close)
        # Quick batches, so that the test does not wait for the defaults' 5 s and 60 s.
        quick = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "300"}
        server = start_server_process(
            tmp_path, "--store", f"sqlite:///{tmp_path / 'store.db'}", "--etcd", "memory", "--migrate",
            "--allow-target-network", "127.0.0.0/8", "--trace-export", "otlp", "--metrics-export", "otlp",
            "--otlp-endpoint", endpoint, "--otlp-protocol", protocol,
            env={**quick, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "bogus"},
        )  # fmt: skip  (the flags win over the variables)
        stack.callback(stop_process, server.process)
        async with grpc.aio.insecure_channel(server.address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            admin_md = (("authorization", f"Bearer {server.admin_token}"),)
            tenant = await admin.CreateTenant(
                admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="acme")), metadata=admin_md
            )
            credential = await admin.IssueWorkerCredential(
                admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"], http=True), metadata=admin_md
            )
            # The worker has no OTLP flag: the standard variables configure it.
            worker = start_worker_process(
                stack, tmp_path, server.address, credential.credential.secret, "traced-worker",
                "--allow-target-network", "127.0.0.0/8", "--trace-export", "otlp",
                env={**quick, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol},
            )
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            job = job_pb2.Job(name="traced", target=job_pb2.Target(http=job_pb2.HttpTarget(url=target.url)))
            job.schedule.cron.expression = "0 0 1 1 *"
            api_key = tenant.api_key.secret
            created = await scheduler.CreateJob(
                scheduler_pb2.CreateJobRequest(job=job, request_id=secrets.token_hex(4)), metadata=bearer(api_key)
            )
            await scheduler.TriggerJob(
                scheduler_pb2.TriggerJobRequest(id=created.job.id, request_id="now"),
                metadata=(*bearer(api_key), ("traceparent", f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")),
            )
            assert await asyncio.to_thread(target.received.wait, WAIT), "the target was called"

            def whole_trace():
                spans = receiver.spans()
                names = {span.name for _, span in spans}
                wanted = {"/tickwheel.v1.SchedulerService/TriggerJob", "hand-out", "POST target"}
                return spans if wanted <= names else None

            spans = await eventually(whole_trace, "the API call, hand-out and target call spans", timeout=WAIT)
            metrics = await eventually(
                lambda: (lambda m: m if {"tickwheel_executions_total", "tickwheel_start_lateness_seconds"} <= set(m)
                         else None)(receiver.metric_names()),
                "the pushed metrics", timeout=WAIT,
            )  # fmt: skip
        assert worker.poll() is None, "the worker still runs"

    services = {span.name: service for service, span in spans}
    traced = [span for _, span in spans if span.trace_id == bytes.fromhex(CALLER_TRACE)]
    api = _one(traced, "/tickwheel.v1.SchedulerService/TriggerJob")
    hand_out = _one(traced, "hand-out")
    call = _one(traced, "POST target")
    assert services["hand-out"] == "tickwheel-server" and services["POST target"] == "tickwheel-worker"
    assert api.parent_span_id == bytes.fromhex(CALLER_SPAN)
    assert hand_out.parent_span_id == api.span_id
    assert call.parent_span_id == hand_out.span_id
    [received] = target.traceparents
    assert received == f"00-{CALLER_TRACE}-{call.span_id.hex()}-01"

    succeeded = [
        point.as_int for point in metrics["tickwheel_executions_total"].sum.data_points
        if {(a.key, a.value.string_value) for a in point.attributes} >= {("outcome", "succeeded"), ("tenant", "acme")}
    ]  # fmt: skip
    assert succeeded == [1]
    [lateness] = metrics["tickwheel_start_lateness_seconds"].histogram.data_points
    assert lateness.count >= 1 and sum(lateness.bucket_counts) == lateness.count
    assert "tickwheel_alerts_open" in metrics


def test_the_worker_refuses_a_bad_otlp_setting_naming_the_flag(tmp_path: Path) -> None:
    refused = subprocess.run(
        [TICKWHEEL, "worker", "--address", "127.0.0.1:9", "--trace-export", "otlp", "--otlp-endpoint", "ftp://x"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "TICKWHEEL_WORKER_CREDENTIAL": "twc_x"},
    )
    assert refused.returncode == 2 and "--otlp-endpoint" in refused.stderr and "ftp://x" in refused.stderr
