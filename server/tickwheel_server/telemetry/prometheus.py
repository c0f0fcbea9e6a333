"""The Prometheus text exposition format (0.0.4) of OpenTelemetry metric data.

A pure function of what the SDK collected: counters (monotonic sums) become
``counter`` families, gauges and non-monotonic sums ``gauge`` families, and
explicit-bucket histograms ``histogram`` families with cumulative
``_bucket{le=...}`` samples, ``_sum`` and ``_count``. Instruments are named
the Prometheus way where they are created (``tickwheel_..._total``,
``..._seconds``), so nothing is renamed here. Families and samples come out
sorted, so two scrapes of the same state are byte-identical.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from opentelemetry.sdk.metrics.export import Gauge, Histogram, Metric, MetricsData, Sum

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render(data: MetricsData | None) -> str:
    """All metrics of ``data`` in the text format (empty for no data)."""
    if data is None:
        return ""
    families: dict[str, Metric] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                families[metric.name] = metric
    return "".join(_family(families[name]) for name in sorted(families))


def _family(metric: Metric) -> str:
    data = metric.data
    lines = []
    if metric.description:
        lines.append(f"# HELP {metric.name} {_escape_help(metric.description)}")
    if isinstance(data, Histogram):
        lines.append(f"# TYPE {metric.name} histogram")
        for point in sorted(data.data_points, key=lambda p: _sort_key(p.attributes)):
            labels = dict(point.attributes or {})
            running = 0
            for bound, count in zip(point.explicit_bounds, point.bucket_counts):
                running += count
                lines.append(f"{metric.name}_bucket{_labels({**labels, 'le': _number(bound)})} {running}")
            lines.append(f"{metric.name}_bucket{_labels({**labels, 'le': '+Inf'})} {point.count}")
            lines.append(f"{metric.name}_sum{_labels(labels)} {_number(point.sum)}")
            lines.append(f"{metric.name}_count{_labels(labels)} {point.count}")
    elif isinstance(data, (Sum, Gauge)):
        kind = "counter" if isinstance(data, Sum) and data.is_monotonic else "gauge"
        lines.append(f"# TYPE {metric.name} {kind}")
        for point in sorted(data.data_points, key=lambda p: _sort_key(p.attributes)):
            lines.append(f"{metric.name}{_labels(point.attributes or {})} {_number(point.value)}")
    else:  # exponential histograms are never configured here
        return ""
    return "\n".join(lines) + "\n"


def _sort_key(attributes: Mapping[str, object] | None) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in (attributes or {}).items()))


def _labels(attributes: Mapping[str, object]) -> str:
    if not attributes:
        return ""
    inner = ",".join(f'{name}="{_escape_label(str(value))}"' for name, value in sorted(attributes.items()))
    return "{" + inner + "}"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def parse_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Samples of a text exposition as {(name, sorted labels): value}: the
    reading side, for tests and tools (no escapes inside label values other
    than the three the format defines)."""
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, brace, rest = head.partition("{")
        labels: list[tuple[str, str]] = []
        if brace:
            labels = list(_parse_labels(rest[:-1]))
        samples[(name, tuple(sorted(labels)))] = float(value)
    return samples


def _parse_labels(inner: str) -> Iterable[tuple[str, str]]:
    i = 0
    while i < len(inner):
        equals = inner.index("=", i)
        name = inner[i:equals]
        j = equals + 2  # past ="
        value = []
        while inner[j] != '"':
            if inner[j] == "\\":
                j += 1
                value.append({"n": "\n"}.get(inner[j], inner[j]))
            else:
                value.append(inner[j])
            j += 1
        yield name, "".join(value)
        i = j + 2 if j + 1 < len(inner) and inner[j + 1] == "," else j + 1
