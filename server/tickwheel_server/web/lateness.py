"""A job's start lateness as a histogram: pure, for the console's chart.

Lateness is an attempt's hand-out instant minus its due instant (or its
retry's ready instant), as the attempts table records it; never negative.
Buckets have inclusive upper bounds, as Prometheus histograms do, from a
millisecond (the timer wheel's resolution is 10 ms) to a minute (the default
misfire threshold), and one more for anything later.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds in seconds, inclusive; a last bucket holds everything above 60 s."""


@dataclass(frozen=True)
class Bucket:
    le: float | None
    """Inclusive upper bound in seconds; None for the last bucket (above every bound)."""
    count: int


@dataclass(frozen=True)
class Histogram:
    buckets: tuple[Bucket, ...]
    count: int
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None
    """Seconds; None when there are no observations."""

    def to_json(self) -> dict:
        return {
            "count": self.count,
            "buckets": [{"le": b.le, "count": b.count} for b in self.buckets],
            "p50": self.p50,
            "p95": self.p95,
            "p99": self.p99,
            "max": self.max,
        }


def percentile(ordered: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of ascending ``ordered``: the smallest value
    with at least ``fraction`` of the values at or below it."""
    if not ordered:
        return None
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def histogram(lateness: Sequence[float], bounds: Sequence[float] = BOUNDS) -> Histogram:
    """Count ``lateness`` (seconds) into ``bounds`` (ascending, inclusive
    upper bounds) plus one bucket above the last. ValueError for a
    negative or non-finite value: lateness is never either."""
    if any(b2 <= b1 for b1, b2 in zip(bounds, bounds[1:])):
        raise ValueError("bounds must be strictly ascending")
    counts = [0] * (len(bounds) + 1)
    for value in lateness:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"lateness must be finite and >= 0, got {value!r}")
        counts[bisect.bisect_left(bounds, value)] += 1
    ordered = sorted(lateness)
    buckets = tuple(Bucket(le, n) for le, n in zip([*bounds, None], counts))
    return Histogram(
        buckets=buckets,
        count=len(ordered),
        p50=percentile(ordered, 0.50),
        p95=percentile(ordered, 0.95),
        p99=percentile(ordered, 0.99),
        max=ordered[-1] if ordered else None,
    )
