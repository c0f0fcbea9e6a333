"""OpenTelemetry metric data exposed the Prometheus way, by ``prometheus_client``.

What the SDK collected becomes ``prometheus_client`` metric families:
counters (monotonic sums) ``counter``, gauges and non-monotonic sums
``gauge``, explicit-bucket histograms ``histogram`` with cumulative
``_bucket{le=...}`` samples, ``_sum`` and ``_count``. Instruments are named
the Prometheus way where they are created (``tickwheel_..._total``,
``..._seconds``), so nothing is renamed. The library writes the exposition
(escaping, numbers) and negotiates its format with the scraper's ``Accept``
header: the text format (0.0.4 unless a newer one is asked for) or
OpenMetrics. Each exposition registers one collector on a registry of its
own, never the library's process-global one, so several servers in one
process (the tests) each show only their own series. Families and samples
come out sorted, so two scrapes of the same state are byte-identical.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from opentelemetry.sdk.metrics.export import Gauge, Histogram, MetricsData, Sum
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry


def exposition(data: MetricsData | None, accept: str = "") -> tuple[bytes, str]:
    """(body, content type) of ``data`` in the format ``accept`` asks for;
    the text format 0.0.4 when ``accept`` asks for none or cannot be read."""
    try:
        encode, content_type = choose_encoder(accept)
    except (TypeError, ValueError):  # e.g. "text/plain;version=abc": the library compares str with int
        encode, content_type = choose_encoder("")
    return encode(_registry(data)), content_type


def render(data: MetricsData | None) -> str:
    """``data`` in the text format 0.0.4."""
    return exposition(data)[0].decode()


def families(data: MetricsData | None) -> list[Metric]:
    """``data`` as ``prometheus_client`` metric families, sorted by name."""
    if data is None:
        return []
    found = {
        metric.name: metric
        for resource in data.resource_metrics for scope in resource.scope_metrics for metric in scope.metrics
    }  # fmt: skip
    return [family for name in sorted(found) for family in _family(found[name])]


def parse_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Samples of a text exposition as {(name, sorted labels): value}: the
    reading side, for tests and tools (``prometheus_client``'s parser)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text) for sample in family.samples
    }  # fmt: skip


class _Collected(Collector):
    def __init__(self, data: MetricsData | None) -> None:
        self._data = data

    def collect(self) -> Iterator[Metric]:
        return iter(families(self._data))


def _registry(data: MetricsData | None) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collected(data))
    return registry


def _family(metric) -> Iterable[Metric]:
    data = metric.data
    if isinstance(data, Histogram):
        family = Metric(metric.name, metric.description, "histogram")
        for point in sorted(data.data_points, key=lambda p: _sort_key(p.attributes)):
            labels = {str(k): str(v) for k, v in (point.attributes or {}).items()}
            running = 0
            for bound, count in zip(point.explicit_bounds, point.bucket_counts):
                running += count
                family.add_sample(f"{metric.name}_bucket", {**labels, "le": _bound(bound)}, running)
            family.add_sample(f"{metric.name}_bucket", {**labels, "le": "+Inf"}, point.count)
            family.add_sample(f"{metric.name}_sum", labels, point.sum)
            family.add_sample(f"{metric.name}_count", labels, point.count)
        yield family
    elif isinstance(data, (Sum, Gauge)):
        counter = isinstance(data, Sum) and data.is_monotonic
        # prometheus_client names a counter's family without the suffix and writes its samples with it.
        name = metric.name.removesuffix("_total") if counter else metric.name
        family = Metric(name, metric.description, "counter" if counter else "gauge")
        for point in sorted(data.data_points, key=lambda p: _sort_key(p.attributes)):
            labels = {str(k): str(v) for k, v in (point.attributes or {}).items()}
            family.add_sample(f"{name}_total" if counter else name, labels, point.value)
        yield family
    # exponential histograms are never configured here


def _sort_key(attributes: Mapping[str, object] | None) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in (attributes or {}).items()))


def _bound(value: float) -> str:
    """A bucket bound as ``le`` has always shown it here: ``1``, ``0.005``."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))
