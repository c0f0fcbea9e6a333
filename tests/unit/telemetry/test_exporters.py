"""Where telemetry goes (``tickwheel_worker.exporters``): the settings of
``--trace-export``, ``--metrics-export``, ``--otlp-endpoint`` and
``--otlp-protocol``, the standard ``OTEL_EXPORTER_OTLP_*`` variables beneath
them, and the refusals naming the flag."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from tickwheel_server.config import ConfigError, ServerConfig
from tickwheel_worker.exporters import (
    Otlp,
    check_metrics_export,
    check_trace_export,
    metric_exporter,
    span_exporter,
    tracer_provider,
)


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        ("", {}, "http/protobuf"),  # the specification's default
        ("", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc"),
        ("", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
         "http/protobuf"),  # fmt: skip
        ("grpc", {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, "grpc"),  # the flag wins
    ],
)
def test_the_protocol_comes_from_the_flag_then_the_signal_then_the_general_variable(flag, environ, expected):
    assert Otlp(protocol=flag).protocol_for("traces", environ) == expected


def test_a_protocol_the_exporters_do_not_speak_is_refused():
    with pytest.raises(ValueError, match="http/json"):
        Otlp(protocol="http/json")
    with pytest.raises(ValueError, match="from the environment"):
        Otlp().protocol_for("metrics", {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json"})
    with pytest.raises(ValueError, match="not an http"):
        Otlp(endpoint="collector:4317")


def test_the_endpoint_flag_is_a_base_url_like_the_variable():
    otlp = Otlp(endpoint="http://collector:4318/")
    assert otlp.exporter_arguments("traces", "http/protobuf") == {"endpoint": "http://collector:4318/v1/traces"}
    assert otlp.exporter_arguments("metrics", "http/protobuf") == {"endpoint": "http://collector:4318/v1/metrics"}
    assert Otlp(endpoint="http://collector:4317").exporter_arguments("traces", "grpc") == {
        "endpoint": "http://collector:4317"
    }
    assert Otlp().exporter_arguments("traces", "grpc") == {}  # left to OTEL_EXPORTER_OTLP_*


def test_each_setting_builds_its_exporter(monkeypatch, tmp_path):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", raising=False)
    assert isinstance(span_exporter("console"), ConsoleSpanExporter)
    assert isinstance(span_exporter("otlp"), HttpSpans)
    assert isinstance(span_exporter("otlp", Otlp("http://127.0.0.1:4317", "grpc")), GrpcSpans)
    assert isinstance(metric_exporter("otlp"), HttpMetrics)
    assert isinstance(metric_exporter("otlp", Otlp(protocol="grpc")), GrpcMetrics)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert isinstance(span_exporter("otlp"), GrpcSpans)
    assert tracer_provider("none", "x") is None
    jsonl = tmp_path / "spans.jsonl"
    provider = tracer_provider(f"jsonl:{jsonl}", "tickwheel-test")
    with provider.get_tracer("t").start_as_current_span("one"):
        pass
    provider.shutdown()
    assert '"name":"one"' in jsonl.read_text()


@pytest.mark.parametrize("setting", ["zipkin", "jsonl:", "jsonl", "otlp:grpc", ""])
def test_an_unknown_trace_export_is_refused(setting):
    with pytest.raises(ValueError, match="is not one of"):
        check_trace_export(setting)


@pytest.mark.parametrize("setting", ["prometheus", "console", ""])
def test_an_unknown_metrics_export_is_refused(setting):
    with pytest.raises(ValueError, match="is not one of"):
        check_metrics_export(setting)


def test_the_server_config_names_the_flag_it_refuses():
    base = {"store": "sqlite://", "etcd": "memory", "admin_token": "x" * 16}
    with pytest.raises(ConfigError, match="--metrics-export"):
        ServerConfig(**base, metrics_export="statsd")
    with pytest.raises(ConfigError, match="--otlp-protocol"):
        ServerConfig(**base, otlp_protocol="udp")
    with pytest.raises(ConfigError, match="--otlp-endpoint"):
        ServerConfig(**base, otlp_endpoint="ftp://collector")
    assert ServerConfig(**base, trace_export="otlp", metrics_export="otlp").otlp == Otlp()
