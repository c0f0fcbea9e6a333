"""Where telemetry goes: the ``--trace-export`` and ``--metrics-export``
settings of servers and workers, turned into OpenTelemetry exporters.

Traces: ``none``, ``console`` (the SDK's, to stdout), ``jsonl:PATH`` (one
JSON span per line appended to PATH: no collector needed, ship the file) or
``otlp``. Metrics: ``none`` or ``otlp`` (a server also serves ``/metrics``
whatever this says).

``otlp`` uses the OpenTelemetry exporters (``opentelemetry-exporter-otlp``)
configured the standard way: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the
per-signal ``..._TRACES_ENDPOINT`` / ``..._METRICS_ENDPOINT``),
``OTEL_EXPORTER_OTLP_HEADERS`` (where a collector's API key belongs: never a
flag), ``..._CERTIFICATE``, ``..._TIMEOUT``, ``..._COMPRESSION``, read by the
exporters themselves. :class:`Otlp` holds what the command line may set
instead: the endpoint and the protocol (``grpc`` or ``http/protobuf``; by
the specification's default ``http/protobuf``, else
``OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL``). The SDK and the
exporters are imported only when a setting asks for them.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TRACE_EXPORT_HELP = (
    "none (default), console, jsonl:PATH (one JSON span per line appended to PATH) or otlp "
    "(OTEL_EXPORTER_OTLP_* variables, --otlp-endpoint, --otlp-protocol)"
)
METRICS_EXPORT_HELP = "none (default) or otlp (OTEL_EXPORTER_OTLP_* variables, --otlp-endpoint, --otlp-protocol)"
PROTOCOLS = ("grpc", "http/protobuf")
_SIGNAL_PATHS = {"traces": "v1/traces", "metrics": "v1/metrics"}


def check_trace_export(setting: str) -> None:
    """ValueError unless ``setting`` names a span exporter."""
    if setting in ("none", "console", "otlp"):
        return
    kind, _, path = setting.partition(":")
    if kind != "jsonl" or not path:
        raise ValueError(f"{setting!r} is not one of: {TRACE_EXPORT_HELP}")


def check_metrics_export(setting: str) -> None:
    """ValueError unless ``setting`` names a metric exporter."""
    if setting not in ("none", "otlp"):
        raise ValueError(f"{setting!r} is not one of: {METRICS_EXPORT_HELP}")


@dataclass(frozen=True)
class Otlp:
    """What the command line sets for OTLP; empty leaves it to the ``OTEL_EXPORTER_OTLP_*`` variables."""

    endpoint: str = ""
    """Base URL of the collector (``http://host:4317`` for gRPC, ``http://host:4318`` for HTTP)."""
    protocol: str = ""
    """``grpc`` or ``http/protobuf``."""

    def __post_init__(self) -> None:
        if self.protocol and self.protocol not in PROTOCOLS:
            raise ValueError(f"OTLP protocol {self.protocol!r} is not one of: {', '.join(PROTOCOLS)}")
        if self.endpoint and not self.endpoint.startswith(("http://", "https://")):
            raise ValueError(f"OTLP endpoint {self.endpoint!r} is not an http:// or https:// URL")

    def protocol_for(self, signal: str, environ: Mapping[str, str] = os.environ) -> str:
        """The protocol of ``signal`` (``traces`` or ``metrics``): the flag,
        then the signal's variable, then the general one, then ``http/protobuf``."""
        protocol = (
            self.protocol
            or environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL", "")
            or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
            or "http/protobuf"
        )
        if protocol not in PROTOCOLS:
            raise ValueError(f"OTLP protocol {protocol!r} (from the environment) is not one of: {', '.join(PROTOCOLS)}")
        return protocol

    def exporter_arguments(self, signal: str, protocol: str) -> dict[str, Any]:
        """The endpoint argument of ``signal``'s exporter, when the flag sets
        one: as is for gRPC, with the signal's path for HTTP (as the
        specification does with ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
        if not self.endpoint:
            return {}
        if protocol == "grpc":
            return {"endpoint": self.endpoint}
        return {"endpoint": f"{self.endpoint.rstrip('/')}/{_SIGNAL_PATHS[signal]}"}


def _needs_sdk() -> None:
    """ValueError saying what to install when the OpenTelemetry SDK is missing
    (the ``tickwheel`` distribution alone has only the API)."""
    try:
        import opentelemetry.sdk  # noqa: F401
    except ImportError:
        raise ValueError(
            "exporting telemetry needs the OpenTelemetry SDK and exporters: pip install 'tickwheel[otlp]'"
        ) from None


def span_exporter(setting: str, otlp: Otlp = Otlp()):
    """The span exporter ``setting`` names (not ``none``)."""
    check_trace_export(setting)
    _needs_sdk()
    if setting == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if setting == "otlp":
        protocol = otlp.protocol_for("traces")
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        return OTLPSpanExporter(**otlp.exporter_arguments("traces", protocol))
    return _json_lines_exporter(setting.partition(":")[2])


def metric_exporter(setting: str, otlp: Otlp = Otlp()):
    """The metric exporter ``setting`` names (``otlp``), cumulative like ``/metrics``."""
    check_metrics_export(setting)
    _needs_sdk()
    protocol = otlp.protocol_for("metrics")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    return OTLPMetricExporter(**otlp.exporter_arguments("metrics", protocol))


def tracer_provider(setting: str, service: str, otlp: Otlp = Otlp()):
    """A provider batching spans to ``setting``'s exporter, or None for ``none``.
    Never the global provider: each server and worker has its own."""
    check_trace_export(setting)
    if setting == "none":
        return None
    _needs_sdk()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(span_exporter(setting, otlp)))
    return provider


def _json_lines_exporter(path: str):
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonLinesSpanExporter(SpanExporter):
        """Appends each finished span to a file as one JSON object per line."""

        def __init__(self) -> None:
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by shutdown
            self._lock = threading.Lock()

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            lines = "".join(
                json.dumps(json.loads(span.to_json(indent=None)), separators=(",", ":")) + "\n" for span in spans
            )
            with self._lock:
                if self._file.closed:
                    return SpanExportResult.FAILURE
                self._file.write(lines)
                self._file.flush()
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            with self._lock:
                self._file.close()

    return JsonLinesSpanExporter()
