"""The lateness histogram: buckets with inclusive upper bounds, nearest-rank percentiles."""

from __future__ import annotations

import math

import pytest

from tickwheel_server.web.lateness import BOUNDS, Bucket, histogram, percentile


def counts(values, bounds=BOUNDS) -> dict[float | None, int]:
    return {bucket.le: bucket.count for bucket in histogram(values, bounds).buckets if bucket.count}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], {}),
        ([0.0], {0.001: 1}),
        ([0.001], {0.001: 1}),  # a bound is inclusive
        ([0.0010001], {0.0025: 1}),
        ([0.004, 0.005, 0.0051], {0.005: 2, 0.01: 1}),
        ([60.0, 60.5, 3600.0], {60.0: 1, None: 2}),  # above the last bound: the +Inf bucket
        ([0.3, 0.3, 0.3], {0.5: 3}),
    ],
)
def test_values_fall_into_the_bucket_of_their_least_upper_bound(values, expected) -> None:
    assert counts(values) == expected


def test_every_bucket_is_reported_even_when_empty() -> None:
    result = histogram([0.02])
    assert [b.le for b in result.buckets] == [*BOUNDS, None]
    assert sum(b.count for b in result.buckets) == result.count == 1
    assert result.to_json()["buckets"][-1] == {"le": None, "count": 0}


def test_percentiles_are_nearest_rank_over_the_observations() -> None:
    values = [0.001 * n for n in range(1, 101)]  # 1 ms … 100 ms
    result = histogram(list(reversed(values)))
    assert (result.p50, result.p95, result.p99, result.max) == (values[49], values[94], values[98], values[99])
    assert percentile([5.0], 0.99) == 5.0
    assert percentile([], 0.5) is None
    empty = histogram([])
    assert (empty.count, empty.p50, empty.max) == (0, None, None)


@pytest.mark.parametrize("bad", [-0.001, math.inf, math.nan])
def test_lateness_is_never_negative_or_infinite(bad) -> None:
    with pytest.raises(ValueError):
        histogram([0.1, bad])


def test_bounds_must_ascend() -> None:
    with pytest.raises(ValueError):
        histogram([1.0], bounds=(1.0, 1.0))
    assert histogram([2.0], bounds=(1.0, 3.0)).buckets == (Bucket(1.0, 0), Bucket(3.0, 1), Bucket(None, 0))
