"""One server's metrics: OpenTelemetry SDK instruments on a MeterProvider of
its own, read on scrape and exposed by ``prometheus_client`` (:mod:`.prometheus`).

Each server owns its provider and reader (an ``InMemoryMetricReader``,
collected when ``/metrics`` is asked), so several servers in one process
(the tests) never share a series, and nothing is exported unless scraped
or, with ``--metrics-export otlp``, pushed: a ``PeriodicExportingMetricReader``
beside the scrape's reader sends the same series, the lateness histogram
included, to an OTLP collector every ``OTEL_METRIC_EXPORT_INTERVAL``
milliseconds (default 60 000), and :meth:`Metrics.keep_fresh` refreshes the
store gauges at that pace instead of a scrape.
Components record events through the few methods below; what is already in
memory (wheel size, partitions owned, workers, session renewals) is read by
observable callbacks at collection time; the only store reads
(:mod:`.gauges`) are refreshed before a scrape, at most every few seconds.

Per-tenant labels (:class:`TenantLabels`): only the top N tenants by volume
(executions handed out by this server) get their own ``tenant`` label; every
other tenant is counted as ``other``, so 100 k tenants make N + 1 series per
instrument, not 100 k. Full per-tenant figures are AdminService's
(ClusterStatus, history).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import threading
import time
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality, Histogram, HistogramDataPoint, InMemoryMetricReader, Metric, MetricExporter,
    MetricExportResult, MetricsData, PeriodicExportingMetricReader, ResourceMetrics, ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from ..store.history import SKIP_REASONS
from .outages import OutageLog
from .prometheus import exposition

log = logging.getLogger(__name__)

OTHER = "other"
"""The ``tenant`` label of every tenant outside the top N."""

LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Seconds: fine below a second (the wheel's promise is milliseconds), coarse up to the misfire threshold."""
CLAIM_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)

REQUEUE_CAUSES = ("worker", "session", "orphan")
"""Why a delivery is taken back (``tickwheel_requeues_total{cause}``): its worker went silent or away, the
handing-out server's session expired (the reaper), or no worker here holds it (the safety net)."""
OUTCOMES = {1: "succeeded", 2: "failed_retryable", 3: "failed_permanent", 4: "timed_out", 5: "canceled"}
"""``tickwheel.v1.ResultOutcome`` → the ``outcome`` label."""

Reading = float | Iterable[tuple[Mapping[str, str], float]]
"""What an observable reads: one value, or (labels, value) pairs."""


def top_tenants(volumes: Mapping[str, int], n: int) -> frozenset[str]:
    """The ``n`` tenants with the largest volume (ties by name)."""
    return frozenset(name for _, name in heapq.nsmallest(n, ((-count, name) for name, count in volumes.items())))


class TenantLabels:
    """Which tenants are labelled by name. While fewer than ``n`` tenants are
    labelled, a new tenant joins them; after that, every ``refresh_every``
    counted executions the labelled set becomes the top ``n`` by volume so
    far. A tenant that drops out keeps its old series (cumulative counters
    cannot be taken back) and is counted as ``other`` from then on, so the
    series grow only with the tenants that were ever in the top."""

    def __init__(self, n: int, *, refresh_every: int = 10_000) -> None:
        if n < 0:
            raise ValueError("n must be >= 0")
        self.n = n
        self._refresh_every = refresh_every
        self._volumes: dict[str, int] = {}
        self._labelled: set[str] = set()
        self._since_refresh = 0

    def count(self, tenant: str, amount: int = 1) -> str:
        """Count ``amount`` executions of ``tenant``; returns its label."""
        self._volumes[tenant] = self._volumes.get(tenant, 0) + amount
        self._since_refresh += amount
        if self._since_refresh >= self._refresh_every:
            self._since_refresh = 0
            self._labelled = set(top_tenants(self._volumes, self.n))
        return self.label(tenant)

    def label(self, tenant: str) -> str:
        """``tenant`` if it is labelled by name, else ``other``."""
        if tenant in self._labelled:
            return tenant
        if len(self._labelled) < self.n:
            self._labelled.add(tenant)
            return tenant
        return OTHER


class BatchHistogram:
    """An explicit-bucket histogram fed a batch at a time, for the one
    measurement taken per execution on the hand-out path (start lateness).

    The SDK's ``Histogram.record`` does per value what a batch needs once
    (attribute hashing, a lock, exemplar filtering); at the 100 k
    executions/s peak that would be spent while a burst is being dealt.
    Here a batch of values is sorted and costs a ``bisect`` per bound, and the figures become
    an SDK ``Metric`` at collection, rendered like every other histogram
    (same bucket semantics: ``(bounds[i-1], bounds[i]]``, cumulative)."""

    def __init__(self, name: str, description: str, bounds: Iterable[float]) -> None:
        self.name = name
        self.description = description
        self.bounds = tuple(bounds)
        self._points: dict[str, list] = {}
        """label → [bucket counts, sum, count, min, max]"""
        self._start_ns = time.time_ns()
        self._lock = threading.Lock()
        """Held per batch and per collection: an OTLP push collects in the reader's thread."""

    def record_many(self, label: str, values: Iterable[float], *, floor: float | None = None) -> None:
        """Record ``values`` under ``label``; ``floor``: a value below it counts as it."""
        batch = values if isinstance(values, list) else list(values)
        ordered = sorted(batch)
        if floor is not None and ordered and ordered[0] < floor:
            total = sum(value if value > floor else floor for value in batch)  # rare: none is early
            below = bisect_left(ordered, floor)
            ordered[:below] = [floor] * below
        else:
            total = sum(batch)  # in the order given, as one by one: the same sum to the last bit
        with self._lock:
            self._record_sorted(label, ordered, total)

    def _record_sorted(self, label: str, ordered: list[float], total: float) -> None:
        """``ordered`` (ascending; their sum ``total``) counted per bucket by
        one ``bisect`` a bound, not one a value: the batch's loop runs in C
        (``sorted``, ``sum``), and the bounds are few."""
        if not ordered:
            return
        point = self._points.get(label)
        if point is None:
            point = self._points[label] = [[0] * (len(self.bounds) + 1), 0.0, 0, float("inf"), float("-inf")]
        counts = point[0]
        below = 0  # values at most the previous bound
        for index, bound in enumerate(self.bounds):
            upto = bisect_right(ordered, bound, below)
            counts[index] += upto - below
            below = upto
        counts[-1] += len(ordered) - below
        point[1] += total
        point[2] += len(ordered)
        point[3] = min(point[3], ordered[0])
        point[4] = max(point[4], ordered[-1])

    def metric(self, attribute: str) -> Metric | None:
        """The figures so far as an SDK metric (cumulative), one point per label."""
        with self._lock:
            if not self._points:
                return None
            now = time.time_ns()
            points = [
                HistogramDataPoint(
                    attributes={attribute: label}, start_time_unix_nano=self._start_ns, time_unix_nano=now,
                    count=count, sum=total, bucket_counts=list(counts), explicit_bounds=self.bounds, min=low, max=high,
                )
                for label, (counts, total, count, low, high) in self._points.items()
            ]
        return Metric(self.name, self.description, "s", Histogram(points, AggregationTemporality.CUMULATIVE))


class Metrics:
    """The instruments of one server. Methods are called from the event
    loop; each costs a dictionary lookup and an SDK update, nothing else."""

    def __init__(self, *, top_tenants: int = 20, exporter: MetricExporter | None = None) -> None:
        """``exporter``: where to push the metrics besides ``/metrics`` (an OTLP exporter), or None."""
        self._lateness = BatchHistogram(
            "tickwheel_start_lateness_seconds",
            "Seconds from an execution's due (or retry-ready) instant to its hand-out to a worker",
            LATENESS_BUCKETS,
        )
        self._reader = InMemoryMetricReader()
        readers = [self._reader]
        self.push_interval: float | None = None
        """Seconds between pushes to ``exporter``; None when nothing is pushed."""
        if exporter is not None:
            self.push_interval = float(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL") or 60_000) / 1000
            readers.append(PeriodicExportingMetricReader(_WithLateness(exporter, self._lateness)))
        self._provider = MeterProvider(
            metric_readers=readers, exemplar_filter=AlwaysOffExemplarFilter(), shutdown_on_exit=False
        )
        self._meter = self._provider.get_meter("tickwheel_server")
        self.tenants = TenantLabels(top_tenants)
        self.outages = OutageLog(log, "metrics", time, then="the last values stay")
        """Failed refreshes of the store's gauges: a scrape a line would flood the log in an outage."""
        meter = self._meter
        self._executions = meter.create_counter(
            "tickwheel_executions_total", description="Attempt results accepted, by the outcome the worker reported"
        )
        self._retries = meter.create_counter(
            "tickwheel_retries_total", description="Failed attempts that scheduled another attempt"
        )
        self._requeues = meter.create_counter(
            "tickwheel_requeues_total",
            description="Deliveries taken back from a worker: cause worker (heartbeats stopped, stream gone) "
            "or session (the handing-out server's etcd session expired; the reaper's)",
        )
        self._claim_size = meter.create_histogram(
            "tickwheel_claim_batch_size",
            description="Executions per non-empty claim: stage dispatch (occurrences created) or handout (to workers)",
            explicit_bucket_boundaries_advisory=BATCH_SIZE_BUCKETS,
        )
        self._claim_seconds = meter.create_histogram(
            "tickwheel_claim_duration_seconds",
            description="Seconds per non-empty claim transaction, retries included, by stage",
            explicit_bucket_boundaries_advisory=CLAIM_SECONDS_BUCKETS,
        )
        self._session_losses = meter.create_counter(
            "tickwheel_session_losses_total", description="etcd sessions this server lost and replaced"
        )
        self._skipped = meter.create_counter(
            "tickwheel_skipped_occurrences_total",
            description="Occurrences recorded as skipped in committed skip ranges, by reason "
            "(misfire, overlap, job_paused, tenant_paused, calendar, backlog)",
        )
        self._refreshers: list[Callable[[], Awaitable[None]]] = []
        # Counters whose label values are known ahead are exported from the
        # start at 0: a rule over ``increase(...)`` sees the first event, and
        # a dashboard shows 0 rather than "no data" (docs/operations.md).
        self._session_losses.add(0)
        for cause in REQUEUE_CAUSES:
            self._requeues.add(0, {"cause": cause})
        for reason in SKIP_REASONS:
            self._skipped.add(0, {"reason": reason})

    # -- events ------------------------------------------------------------------------------------

    def handed_out(self, lateness_by_tenant: Mapping[str, list[float]]) -> None:
        """A batch of hand-outs: each tenant's start lateness values (seconds; negative counts as 0)."""
        for tenant, values in lateness_by_tenant.items():
            label = self.tenants.count(tenant, len(values))
            self._lateness.record_many(label, values, floor=0.0)

    def results(self, counts: Mapping[tuple[str, int, bool], int]) -> None:
        """A batch of accepted results, counted per (tenant, outcome,
        retried): one addition per label set, not per result (each costs
        microseconds in the SDK, which a batch of thousands would feel)."""
        executions: Counter[tuple[str, str]] = Counter()
        retries: Counter[str] = Counter()
        for (tenant, outcome, retried), count in counts.items():
            label = self.tenants.label(tenant)
            executions[(label, OUTCOMES.get(outcome, "unspecified"))] += count
            if retried:
                retries[label] += count
        for (label, outcome), count in executions.items():
            self._executions.add(count, {"tenant": label, "outcome": outcome})
        for label, count in retries.items():
            self._retries.add(count, {"tenant": label})

    def requeued(self, cause: str, count: int) -> None:
        if count:
            self._requeues.add(count, {"cause": cause})

    def claimed(self, stage: str, size: int, seconds: float) -> None:
        attributes = {"stage": stage}
        self._claim_size.record(size, attributes)
        self._claim_seconds.record(seconds, attributes)

    def skipped(self, occurrences: Mapping[str, int]) -> None:
        """Occurrences a committed transaction recorded as skipped, by
        reason. A reason outside :data:`SKIP_REASONS` is dropped: the label
        takes only those values."""
        for reason, count in occurrences.items():
            if count > 0 and reason in SKIP_REASONS:
                self._skipped.add(count, {"reason": reason})

    def session_lost(self) -> None:
        self._session_losses.add(1)

    # -- state read at collection ------------------------------------------------------------------

    def observe(self, name: str, description: str, read: Callable[[], Reading], *, counter: bool = False) -> None:
        """A gauge (or, with ``counter``, a cumulative counter) whose value
        ``read`` returns from memory when collected. ``read`` must not block."""

        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            value = read()
            if isinstance(value, (int, float)):
                return [Observation(value)]
            return [Observation(v, dict(labels)) for labels, v in value]

        if counter:
            self._meter.create_observable_counter(name, callbacks=[callback], description=description)
        else:
            self._meter.create_observable_gauge(name, callbacks=[callback], description=description)

    def before_scrape(self, refresh: Callable[[], Awaitable[None]]) -> None:
        """Run ``refresh`` (bounded, cached by its owner) before each collection."""
        self._refreshers.append(refresh)

    async def refresh(self) -> None:
        """Read the store's gauges again (each bounded and cached by its owner)."""
        failed = False
        for refresh in self._refreshers:
            try:
                await refresh()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the last values stay; the scrape still answers
                failed = True
                self.outages.failed("refreshing a store gauge", error, retryable=True)
        if not failed:
            self.outages.ok()

    async def scrape(self) -> str:
        """Every metric in the Prometheus text format (0.0.4)."""
        return (await self.exposition())[0].decode()

    async def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """Every metric as (body, content type), in the format a scraper's ``Accept`` header asks for."""
        await self.refresh()
        return exposition(_with_lateness(self._reader.get_metrics_data(), self._lateness), accept)

    async def keep_fresh(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        """While metrics are pushed, refresh the store's gauges before each
        push, as a scrape would (``sleep``: the clock's). Returns at once when
        nothing is pushed; runs until cancelled otherwise."""
        if self.push_interval is None:
            return
        while True:
            await self.refresh()
            await sleep(self.push_interval)

    def close(self) -> None:
        self._provider.shutdown()


def _with_lateness(data: MetricsData | None, lateness: BatchHistogram) -> MetricsData | None:
    """``data`` with the lateness histogram, which lives outside the SDK, added."""
    metric = lateness.metric("tenant")
    if metric is None:
        return data
    scope = ScopeMetrics(InstrumentationScope("tickwheel_server"), [metric], "")
    extra = ResourceMetrics(Resource.get_empty(), [scope], "")
    return MetricsData([*(data.resource_metrics if data is not None else []), extra])


class _WithLateness(MetricExporter):
    """An exporter that adds the lateness histogram to what it passes on."""

    def __init__(self, inner: MetricExporter, lateness: BatchHistogram) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality, preferred_aggregation=inner._preferred_aggregation
        )
        self._inner = inner
        self._lateness = lateness

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        data = _with_lateness(metrics_data, self._lateness)
        return self._inner.export(data, timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._inner.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis, **kwargs)
