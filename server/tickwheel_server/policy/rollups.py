"""Daily rollups of attempts, decided: the lateness sketch, what one batch of
attempts adds to each (job, UTC day), and the naming and planning of the day
partitions of ``attempts`` (pure: no SQL, no clock read).

Lateness percentiles are read from a :class:`LatenessSketch`: logarithmic
buckets with a relative accuracy of 1 % (DDSketch's mapping), stored with
the rollup so that batches of one day merge exactly, which percentiles
themselves cannot. The store that writes them is
:mod:`tickwheel_server.store.retention`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone

from tickwheel.shared.ids import from_us, to_us

FAILED_ATTEMPTS = ("failed", "timed_out", "lost")
"""Attempt statuses counted as failures (a canceled attempt is not one)."""
DAY_US = 86_400_000_000
PARTITION_PREFIX = "attempts_p"
"""Day partitions of ``attempts`` are named ``attempts_pYYYYMMDD`` (UTC), as migration 0013 named them."""


class LatenessSketch:
    """A mergeable histogram of non-negative durations in microseconds.

    Bucket ``i >= 1`` holds values in ``(γ^(i-1), γ^i]`` with
    ``γ = (1 + α) / (1 - α)``, α = 0.01; bucket 0 holds values below 1 µs
    (lateness 0). A quantile is answered with its bucket's representative
    ``2γ^i / (γ + 1)``, within 1 % of a value in that bucket. Merging adds
    counts, so it is exact whatever order batches arrive in. Sparse: a day's
    lateness spread over 1 ms..1 h fills about 800 buckets at most.
    """

    ALPHA = 0.01
    GAMMA = (1 + ALPHA) / (1 - ALPHA)
    _LOG_GAMMA = math.log(GAMMA)

    def __init__(self, counts: Mapping[int, int] | None = None) -> None:
        self.counts: dict[int, int] = {int(k): int(v) for k, v in (counts or {}).items() if v}

    @classmethod
    def bucket(cls, micros: int) -> int:
        if micros < 1:
            return 0
        return max(1, math.ceil(math.log(micros) / cls._LOG_GAMMA))

    @classmethod
    def value(cls, bucket: int) -> int:
        """The representative of ``bucket`` in microseconds."""
        if bucket <= 0:
            return 0
        return round(2 * cls.GAMMA**bucket / (cls.GAMMA + 1))

    def add(self, micros: int, count: int = 1) -> None:
        index = self.bucket(micros)
        self.counts[index] = self.counts.get(index, 0) + count

    def merge(self, other: "LatenessSketch") -> None:
        for index, count in other.counts.items():
            self.counts[index] = self.counts.get(index, 0) + count

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def quantile(self, q: float) -> int:
        """The ``q``-quantile (0 <= q <= 1) in microseconds, lower rank
        (``q · (n - 1)``, as DDSketch); 0 when empty."""
        if not 0 <= q <= 1:
            raise ValueError(f"q must be within [0, 1], got {q}")
        total = self.total
        if total == 0:
            return 0
        rank = q * (total - 1)
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen > rank:
                return self.value(index)
        return self.value(max(self.counts))  # pragma: no cover - seen reaches total > rank

    def to_json(self) -> str:
        return json.dumps({str(k): v for k, v in sorted(self.counts.items())}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "LatenessSketch":
        return cls({int(k): v for k, v in json.loads(text or "{}").items()})


def day_of(micros: int) -> int:
    """The first instant (µs) of the UTC day holding ``micros``."""
    return micros - micros % DAY_US


@dataclass
class DayFigures:
    """What one (job, day) adds to its rollup."""

    tenant: str
    runs: int = 0
    failures: int = 0
    sketch: LatenessSketch = field(default_factory=LatenessSketch)


def summarise_attempts(rows: Iterable, tenant_of: Mapping[str, tuple[str, str]]) -> dict[tuple[str, int], DayFigures]:
    """Group attempt rows (``execution_id``, ``status``, ``started_at``,
    ``lateness_us``) by (job, UTC day of ``started_at``); ``tenant_of`` maps
    each execution id to its (job id, tenant)."""
    figures: dict[tuple[str, int], DayFigures] = {}
    for row in rows:
        job_id, tenant = tenant_of[row.execution_id]
        key = (job_id, day_of(row.started_at))
        day = figures.get(key)
        if day is None:
            day = figures[key] = DayFigures(tenant)
        day.runs += 1
        if row.status in FAILED_ATTEMPTS:
            day.failures += 1
        day.sketch.add(max(0, row.lateness_us))
    return figures


def partition_name(day_us: int) -> str:
    """The name of the partition of the UTC day starting at ``day_us``."""
    return PARTITION_PREFIX + from_us(day_us).strftime("%Y%m%d")


def partition_day(name: str) -> int | None:
    """The first instant (µs) of the day a partition named ``name`` holds;
    None when ``name`` is not a day partition's."""
    digits = name.removeprefix(PARTITION_PREFIX)
    if name == digits or len(digits) != 8 or not digits.isdigit():
        return None
    try:
        return to_us(datetime.strptime(digits, "%Y%m%d").replace(tzinfo=timezone.utc))
    except ValueError:
        return None


@dataclass(frozen=True)
class AttemptPartitions:
    """The day partitions of ``attempts`` as the catalog shows them."""

    attached: tuple[int, ...]
    """First instants (µs) of the days with an attached partition, ascending."""
    detached: tuple[str, ...]
    """Day tables detached by retention and not yet rolled up and dropped."""


def plan_partitions(
    layout: AttemptPartitions, now_us: int, cutoff_us: int, ahead_days: int
) -> tuple[list[int], list[int]]:
    """(days to give a partition, days whose partition to take out): today
    and the ``ahead_days`` after it where missing; every attached day that
    ends at or before ``cutoff_us``. A day that has not wholly passed the
    cutoff is kept: its older rows go with their executions, or with the
    whole day at a later pass."""
    today = day_of(now_us)
    attached = set(layout.attached)
    create = [day for day in (today + n * DAY_US for n in range(ahead_days + 1)) if day not in attached]
    detach = [day for day in layout.attached if day + DAY_US <= cutoff_us]
    return create, detach

