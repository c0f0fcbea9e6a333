"""The rollup rules at fixed instants: the lateness sketch (its buckets are
a stored format), UTC days, what a batch of attempts adds to each (job,
day), and the day partitions' names and plan."""

from __future__ import annotations

import math
import random
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from tickwheel.shared.ids import from_us, to_us
from tickwheel_server.policy.rollups import (
    DAY_US, AttemptPartitions, LatenessSketch, day_of, partition_day, partition_name, plan_partitions,
    summarise_attempts,
)  # fmt: skip

DAY0 = to_us(datetime(2024, 3, 1, tzinfo=timezone.utc))


# --------------------------------------------------------------------------- the sketch


def exact_quantile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


@pytest.mark.parametrize("seed", range(5))
def test_sketch_quantiles_are_within_one_percent_and_merging_is_exact(seed: int) -> None:
    rng = random.Random(seed)
    values = [int(rng.lognormvariate(12, 2.5)) for _ in range(5000)] + [0] * 50
    whole = LatenessSketch()
    for value in values:
        whole.add(value)
    parts = [LatenessSketch() for _ in range(7)]
    for index, value in enumerate(values):
        parts[index % 7].add(value)
    merged = LatenessSketch.from_json(parts[0].to_json())
    for part in parts[1:]:
        merged.merge(LatenessSketch.from_json(part.to_json()))
    assert merged.counts == whole.counts and merged.total == len(values)
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        exact = exact_quantile(values, q)
        estimate = whole.quantile(q)
        assert abs(estimate - exact) <= max(1, 0.01 * exact), (q, exact, estimate)


@pytest.mark.parametrize(
    ("micros", "bucket"),
    [(0, 0), (-5, 0), (1, 1), (2, 35), (1_000, 346), (1_000_000, 691), (86_400_000_000, 1260)],
)
def test_sketch_buckets_are_fixed(micros: int, bucket: int) -> None:
    """The mapping is part of the stored format: rollups written by one
    release are merged by the next."""
    assert LatenessSketch.bucket(micros) == bucket
    if micros > 0:
        value = LatenessSketch.value(bucket)
        assert abs(value - micros) <= max(1, 0.01 * micros)


def test_an_empty_sketch_answers_zero_and_bad_quantiles_are_refused() -> None:
    assert LatenessSketch().quantile(0.99) == 0
    with pytest.raises(ValueError):
        LatenessSketch().quantile(1.5)


def test_days_are_utc_days() -> None:
    at = to_us(datetime(2024, 3, 1, 23, 59, 59, tzinfo=timezone.utc))
    assert from_us(day_of(at)) == datetime(2024, 3, 1, tzinfo=timezone.utc)
    assert day_of(at + 1_000_000) == day_of(at) + DAY_US


# --------------------------------------------------------------------------- what a batch adds


def attempt(execution: str, status: str, started_at: int, lateness_us: int) -> SimpleNamespace:
    return SimpleNamespace(execution_id=execution, status=status, started_at=started_at, lateness_us=lateness_us)


OWNERS = {"a:1": ("job_a", "acme"), "a:2": ("job_a", "acme"), "b:1": ("job_b", "globex")}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # nothing: nothing to add
        ([], {}),
        # one job, one day: every status counts as a run, failed / timed out / lost as failures, canceled not
        ([attempt("a:1", "succeeded", DAY0 + 5, 1_000), attempt("a:1", "failed", DAY0 + 9, 2_000),
          attempt("a:2", "timed_out", DAY0 + 7, 0), attempt("a:2", "lost", DAY0 + 8, 0),
          attempt("a:2", "canceled", DAY0 + 6, 0)],
         {("job_a", DAY0): ("acme", 5, 3, 5)}),
        # the day is the UTC day of the start, not of the execution: one execution over midnight is two days
        ([attempt("a:1", "failed", DAY0 + DAY_US - 1, 10), attempt("a:1", "succeeded", DAY0 + DAY_US, 10)],
         {("job_a", DAY0): ("acme", 1, 1, 1), ("job_a", DAY0 + DAY_US): ("acme", 1, 0, 1)}),
        # two jobs of two tenants on one day stay apart; a negative lateness counts as 0
        ([attempt("a:1", "succeeded", DAY0, -50), attempt("b:1", "succeeded", DAY0 + 1, 30)],
         {("job_a", DAY0): ("acme", 1, 0, 1), ("job_b", DAY0): ("globex", 1, 0, 1)}),
    ],
)
def test_a_batch_adds_runs_failures_and_lateness_per_job_and_utc_day(rows, expected) -> None:
    figures = summarise_attempts(rows, OWNERS)
    got = {key: (day.tenant, day.runs, day.failures, day.sketch.total) for key, day in figures.items()}
    assert got == expected
    for key, day in figures.items():
        wanted = LatenessSketch()
        for row in rows:
            if (OWNERS[row.execution_id][0], day_of(row.started_at)) == key:
                wanted.add(max(0, row.lateness_us))
        assert day.sketch.counts == wanted.counts, key


def test_a_negative_lateness_lands_in_the_zero_bucket() -> None:
    [day] = summarise_attempts([attempt("a:1", "succeeded", DAY0, -50)], OWNERS).values()
    assert day.sketch.counts == {0: 1}


# --------------------------------------------------------------------------- the day partitions


@pytest.mark.parametrize(
    ("attached", "now", "cutoff", "create", "detach"),
    [
        # nothing yet: today and the next 2 days; nothing old
        ((), DAY0 + 5, DAY0 - 30 * DAY_US, [DAY0, DAY0 + DAY_US, DAY0 + 2 * DAY_US], []),
        # today and tomorrow there: only the day after; the day ending at the cutoff goes, the one across it stays
        ((DAY0 - 31 * DAY_US, DAY0 - 30 * DAY_US, DAY0, DAY0 + DAY_US), DAY0 + 5, DAY0 - 30 * DAY_US + 1,
         [DAY0 + 2 * DAY_US], [DAY0 - 31 * DAY_US]),
        # a cutoff at midnight takes the day that ends there
        ((DAY0 - DAY_US, DAY0, DAY0 + DAY_US, DAY0 + 2 * DAY_US), DAY0 + 10 * DAY_US, DAY0,
         [DAY0 + 10 * DAY_US, DAY0 + 11 * DAY_US, DAY0 + 12 * DAY_US], [DAY0 - DAY_US]),
    ],
)
def test_partition_plan(attached, now, cutoff, create, detach) -> None:
    layout = AttemptPartitions(attached=attached, detached=())
    assert plan_partitions(layout, now, cutoff, ahead_days=2) == (create, detach)


@pytest.mark.parametrize(
    ("name", "day"),
    [
        ("attempts_p20240301", DAY0),
        ("attempts_p20240302", DAY0 + DAY_US),
        ("attempts_default", None),  # not a day's
        ("attempts_p20241399", None),  # no 13th month
        ("attempts_p2024030", None),  # seven digits
        ("attempts_p2024O301", None),  # a letter O
        ("other_p20240301", None),  # another table's prefix
    ],
)
def test_partition_names_are_utc_days(name: str, day: int | None) -> None:
    assert partition_day(name) == day
    if day is not None:
        assert partition_name(day) == name
