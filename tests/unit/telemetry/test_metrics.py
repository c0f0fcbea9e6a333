"""Tenant label folding and the Prometheus text rendering, on a real
OpenTelemetry SDK provider (no server)."""

from __future__ import annotations

import random

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tickwheel_server.store.history import SKIP_REASONS
from tickwheel_server.telemetry.metrics import LATENESS_BUCKETS, OTHER, Metrics, TenantLabels, top_tenants
from tickwheel_server.telemetry.prometheus import parse_samples, render


def test_top_tenants_by_volume_ties_by_name() -> None:
    volumes = {"a": 5, "b": 9, "c": 5, "d": 1}
    assert top_tenants(volumes, 2) == {"b", "a"}
    assert top_tenants(volumes, 0) == frozenset()
    assert top_tenants(volumes, 10) == {"a", "b", "c", "d"}


def test_labels_fold_tenants_past_the_top_n_into_other() -> None:
    labels = TenantLabels(2, refresh_every=10)
    assert [labels.count("a"), labels.count("b"), labels.count("c")] == ["a", "b", OTHER]
    for _ in range(6):  # c becomes the busiest; the refresh at 10 counted makes it labelled
        labels.count("c")
    assert labels.count("c") == "c"
    # c (8) and a (1, before b by name) are the top two now; b is folded.
    assert labels.label("c") == "c" and labels.label("a") == "a" and labels.label("b") == OTHER


def test_a_hundred_thousand_tenants_make_n_plus_one_series() -> None:
    metrics = Metrics(top_tenants=20)
    try:
        for start in range(0, 100_000, 1000):
            metrics.handed_out({f"tenant-{i}": [0.01] for i in range(start, start + 1000)})
        samples = parse_samples(_render(metrics))
        tenants = {dict(labels)["tenant"] for name, labels in samples if name == "tickwheel_start_lateness_seconds_count"}
        assert len(tenants) == 21 and OTHER in tenants
        total = sum(v for (name, _), v in samples.items() if name == "tickwheel_start_lateness_seconds_count")
        assert total == 100_000
    finally:
        metrics.close()


def _render(metrics: Metrics) -> str:
    import asyncio

    return asyncio.run(metrics.scrape())


def test_rendering_of_a_histogram_a_counter_and_gauges() -> None:
    metrics = Metrics(top_tenants=5)
    try:
        metrics.handed_out({"acme": [0.003, 0.2]})
        metrics.handed_out({"acme": [120.0]})
        metrics.results({("acme", 1, False): 1, ("acme", 2, True): 1})
        metrics.claimed("handout", 3, 0.004)
        metrics.observe("tickwheel_wheel_size", "Due instants", lambda: 7)
        metrics.observe("tickwheel_queue_depth", "Ready", lambda: [({"tenant": 'we"ird\\'}, 4.0)])
        text = _render(metrics)
    finally:
        metrics.close()
    assert "# TYPE tickwheel_start_lateness_seconds histogram\n" in text
    assert "# TYPE tickwheel_executions_total counter\n" in text
    assert "# TYPE tickwheel_wheel_size gauge\n" in text
    assert "# HELP tickwheel_wheel_size Due instants\n" in text
    assert 'tickwheel_queue_depth{tenant="we\\"ird\\\\"} 4.0' in text
    samples = parse_samples(text)
    acme = (("tenant", "acme"),)
    buckets = [samples[("tickwheel_start_lateness_seconds_bucket", tuple(sorted({"tenant": "acme", "le": le}.items())))]
               for le in [*(_le(b) for b in LATENESS_BUCKETS), "+Inf"]]
    assert buckets == sorted(buckets)  # cumulative
    assert buckets[0] == 1 and buckets[-2] == 2 and buckets[-1] == 3  # 120 s lies past the last bound
    assert samples[("tickwheel_start_lateness_seconds_count", acme)] == 3
    assert samples[("tickwheel_start_lateness_seconds_sum", acme)] == pytest.approx(120.203)
    assert samples[("tickwheel_executions_total", (("outcome", "succeeded"), ("tenant", "acme")))] == 1
    assert samples[("tickwheel_executions_total", (("outcome", "failed_retryable"), ("tenant", "acme")))] == 1
    assert samples[("tickwheel_retries_total", acme)] == 1
    assert samples[("tickwheel_claim_batch_size_count", (("stage", "handout"),))] == 1
    assert samples[("tickwheel_wheel_size", ())] == 7
    assert samples[("tickwheel_queue_depth", (("tenant", 'we"ird\\'),))] == 4


def _le(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(bound)


def test_two_servers_in_one_process_keep_their_own_series() -> None:
    first, second = Metrics(), Metrics()
    try:
        first.results({("acme", 1, False): 1})
        assert "tickwheel_executions_total{" in _render(first)
        assert "tickwheel_executions_total{" not in _render(second)
    finally:
        first.close()
        second.close()


def lateness_both_ways(batches: list[list[float]]) -> tuple[dict, dict]:
    """The start lateness samples of ``batches`` handed out one batch at a
    time (:meth:`Metrics.handed_out`), and of the SDK's histogram fed the
    same values one by one (a negative as 0): (got, expected)."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        sdk = provider.get_meter("t").create_histogram(
            "tickwheel_start_lateness_seconds", explicit_bucket_boundaries_advisory=LATENESS_BUCKETS,
            description="Seconds from an execution's due (or retry-ready) instant to its hand-out to a worker",
        )
        for batch in batches:
            for value in batch:
                sdk.record(max(0.0, value), {"tenant": "acme"})
        expected = parse_samples(render(reader.get_metrics_data()))
    finally:
        provider.shutdown()
    metrics = Metrics()
    try:
        for batch in batches:
            metrics.handed_out({"acme": batch})
        got = parse_samples(_render(metrics))
    finally:
        metrics.close()
    assert got[("tickwheel_start_lateness_seconds_count", (("tenant", "acme"),))] == sum(map(len, batches))
    return {key: value for key, value in got.items() if key[0].startswith("tickwheel_start_lateness_seconds")}, expected


def test_the_batch_histogram_renders_what_the_sdk_histogram_would() -> None:
    """Same values, same text: values on a bound fall in that bound's bucket,
    past the last bound in +Inf, and a negative lateness counts as 0."""
    values = [-0.5, 0.0, 0.005, 0.0051, 0.25, 1.0, 1.5, 60.0, 61.0, *[0.1] * 7]
    lateness, expected = lateness_both_ways([values[:4], values[4:]])
    assert lateness == expected


def test_batches_of_any_size_render_what_the_sdk_histogram_would() -> None:
    """The batch histogram counts a sorted batch by one bisect a bound: over
    batches empty, of one value and of thousands, values on every bound,
    negatives, past the last bound, its buckets, sum and count are the
    SDK's for the same values recorded one by one."""
    rng = random.Random(25)
    batches = [[], [0.0], [-3.0], list(LATENESS_BUCKETS), [b + 1e-9 for b in LATENESS_BUCKETS]]
    batches += [[rng.choice([-1.0, *LATENESS_BUCKETS]) if rng.random() < 0.3 else rng.uniform(-2.0, 200.0)
                 for _ in range(rng.choice([1, 7, 500, 2_000]))] for _ in range(12)]
    lateness, expected = lateness_both_ways(batches)
    sum_key = ("tickwheel_start_lateness_seconds_sum", (("tenant", "acme"),))
    # Added a batch at a time, not a value at a time (as before): equal to the last bits.
    assert lateness.pop(sum_key) == pytest.approx(expected.pop(sum_key), rel=1e-12)
    assert lateness == expected


def test_the_exposition_follows_the_scrapers_accept_header() -> None:
    # prometheus_client negotiates: the text format 0.0.4 by default,
    # OpenMetrics (ending in "# EOF", counters as families without _total)
    # when the scraper asks for it; the same samples either way.
    import asyncio

    metrics = Metrics(top_tenants=5)
    try:
        metrics.results({("acme", 1, False): 2})
        metrics.handed_out({"acme": [0.2]})
        text, text_type = asyncio.run(metrics.exposition(""))
        open_metrics, open_type = asyncio.run(
            metrics.exposition("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
        )
    finally:
        metrics.close()
    assert text_type == "text/plain; version=0.0.4; charset=utf-8"
    assert open_type.startswith("application/openmetrics-text; version=1.0.0")
    assert open_metrics.decode().endswith("# EOF\n") and "# TYPE tickwheel_executions counter" in open_metrics.decode()
    assert 'tickwheel_executions_total{outcome="succeeded",tenant="acme"} 2.0' in open_metrics.decode()
    assert 'tickwheel_executions_total{outcome="succeeded",tenant="acme"} 2.0' in text.decode()
    assert 'tickwheel_start_lateness_seconds_bucket{le="0.25",tenant="acme"} 1.0' in text.decode()


@pytest.mark.parametrize(
    "accept",
    ["text/plain;version=abc", "application/openmetrics-text;version=x", "a" * 20_000, "\x00;;,,=", "*/*"],
)
def test_an_accept_header_that_cannot_be_read_gets_the_text_format(accept: str) -> None:
    # prometheus_client raises TypeError on a version it cannot parse: the
    # scrape answers the default format instead of failing.
    import asyncio

    metrics = Metrics(top_tenants=5)
    try:
        metrics.results({("acme", 1, False): 1})
        body, content_type = asyncio.run(metrics.exposition(accept))
    finally:
        metrics.close()
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert b'tickwheel_executions_total{outcome="succeeded",tenant="acme"} 1.0' in body


def test_skipped_occurrences_are_counted_by_reason_from_zero_and_only_by_reason() -> None:
    metrics = Metrics(top_tenants=5)
    try:
        before = parse_samples(_render(metrics))
        metrics.skipped({"misfire": 8, "backlog": 1})
        metrics.skipped({"misfire": 2, "acme's own words": 5, "overlap": 0})
        after = parse_samples(_render(metrics))
    finally:
        metrics.close()
    name = "tickwheel_skipped_occurrences_total"
    assert {labels for (metric, labels) in before if metric == name} == {(("reason", r),) for r in SKIP_REASONS}
    assert all(before[(name, (("reason", r),))] == 0 for r in SKIP_REASONS), "exported at 0 from the start"
    assert after[(name, (("reason", "misfire"),))] == 10
    assert after[(name, (("reason", "backlog"),))] == 1
    assert {labels for (metric, labels) in after if metric == name} == {(("reason", r),) for r in SKIP_REASONS}, (
        "a reason outside the enum makes no series"
    )
