"""Traces from the API call to the target call, joined by W3C ``traceparent``.

The path of one execution, each step a span of the same trace:

- the API call (:func:`server_interceptor`, a server span per unary RPC,
  child of the caller's ``traceparent`` metadata when it sends one): a
  trigger or a backfill stores the call's traceparent on the executions it
  creates (``executions.trace_context``);
- or, for a scheduled occurrence, a ``dispatch`` span started by the
  dispatcher's claim for that occurrence alone: every occurrence of a cron
  job is its own trace, never one trace that grows forever;
- the ``hand-out`` (the gateway, on whichever server hands it out), a child
  of the stored traceparent; its own traceparent goes to the worker in
  ``Assignment.traceparent``;
- the worker's client span around the target call, whose traceparent the
  HTTP target receives (a worker without tracing forwards the hand-out's).

Off by default (``--trace-export none``): no provider, no tracer, and each
place that would make a span checks :attr:`Tracing.enabled` first, so an
execution costs no span object. Where spans go (``console``, ``jsonl:PATH``,
``otlp``) is :mod:`tickwheel_worker.exporters`', shared with the worker. A
server builds its own provider (never the global one), so tests can run
servers with their own in-memory exporters side by side.
"""

from __future__ import annotations

from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, SpanKind
from opentelemetry.instrumentation.grpc import aio_server_interceptor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from tickwheel.v1 import admin_pb2, scheduler_pb2, worker_pb2

from tickwheel_worker.exporters import Otlp, tracer_provider

_PROPAGATOR = TraceContextTextMapPropagator()


def traceparent_of(span: Span) -> str:
    """The W3C traceparent of ``span`` (empty for an invalid span)."""
    context = span.get_span_context()
    if not context.is_valid:
        return ""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def current_traceparent() -> str:
    """The traceparent of the span current in this task; empty when none is."""
    return traceparent_of(trace.get_current_span())


def context_of(traceparent: str) -> Context | None:
    """A parent context from a traceparent; None for an empty or malformed one."""
    if not traceparent:
        return None
    context = _PROPAGATOR.extract({"traceparent": traceparent})
    return context if trace.get_current_span(context).get_span_context().is_valid else None


class Tracing:
    """A process part's tracer, or none (tracing off)."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self.provider = provider
        self.tracer: trace.Tracer | None = provider.get_tracer("tickwheel") if provider is not None else None

    @property
    def enabled(self) -> bool:
        return self.tracer is not None

    @classmethod
    def from_setting(cls, setting: str, *, service: str = "tickwheel-server", otlp: Otlp = Otlp()) -> "Tracing":
        """The tracing ``--trace-export`` asks for (ValueError for a setting that names none)."""
        return cls(tracer_provider(setting, service, otlp))

    def dispatch_span(self, execution_id: str, job_id: str, tenant: str, nominal_at_us: int) -> str:
        """Start and end the root span of a new scheduled occurrence; its traceparent."""
        assert self.tracer is not None
        span = self.tracer.start_span(
            "dispatch", context=Context(), kind=SpanKind.INTERNAL,
            attributes={"tickwheel.execution_id": execution_id, "tickwheel.job_id": job_id,
                        "tickwheel.tenant": tenant, "tickwheel.nominal_at_us": nominal_at_us},
        )  # fmt: skip
        span.end()
        return traceparent_of(span)

    def hand_out_span(self, parent: str, attributes: dict[str, Any], start_ns: int) -> Span:
        """The hand-out of one delivery, child of the execution's stored traceparent."""
        assert self.tracer is not None
        return self.tracer.start_span(
            "hand-out", context=context_of(parent), kind=SpanKind.PRODUCER, attributes=attributes, start_time=start_ns
        )

    def close(self) -> None:
        """Export what is buffered and stop."""
        if self.provider is not None:
            self.provider.shutdown()


def server_interceptor(tracing: Tracing) -> grpc.aio.ServerInterceptor:
    """A server span around every unary call of the contract's services,
    made current while the handler runs, child of the ``traceparent``
    metadata the caller sent, if any: ``opentelemetry-instrumentation-grpc``'s
    interceptor on this server's provider. Streaming calls (the Pull stream,
    WatchAlerts) are left out: one span for a stream that lasts hours would
    say nothing; their executions are traced by the hand-out's spans."""
    assert tracing.provider is not None
    return aio_server_interceptor(tracer_provider=tracing.provider, filter_=_unary)


def _streaming_methods() -> frozenset[str]:
    methods = set()
    for module in (admin_pb2, scheduler_pb2, worker_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            methods.update(
                f"/{service.full_name}/{method.name}"
                for method in service.methods
                if method.client_streaming or method.server_streaming
            )
    return frozenset(methods)


_STREAMING = _streaming_methods()


def _unary(details: grpc.HandlerCallDetails) -> bool:
    return details.method not in _STREAMING
