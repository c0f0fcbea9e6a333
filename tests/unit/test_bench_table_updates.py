"""``bench_e2e.py`` prints, per table every execution rewrites, its updates,
how many were HOT, and its heap and index growth per execution, from two
readings of ``pg_stat_user_tables`` (``loadtest/_harness.updates_between``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from _harness import indexes_between, updates_between  # noqa: E402


def test_the_differences_are_per_execution() -> None:
    # (updated, of them HOT, heap bytes, index bytes) per table
    before = {"executions": (10, 4, 8_192, 16_384), "jobs": (0, 0, 81_920, 40_960)}
    after = {"executions": (2_010, 4, 761_856, 1_040_384), "jobs": (1_000, 250, 139_264, 81_920)}
    assert updates_between(before, after, 1_000) == {
        "executions": {"updates_per_execution": 2.0, "hot_updates_per_execution": 0.0,
                       "heap_bytes_per_execution": 753.7, "index_bytes_per_execution": 1024.0},
        "jobs": {"updates_per_execution": 1.0, "hot_updates_per_execution": 0.25,
                 "heap_bytes_per_execution": 57.3, "index_bytes_per_execution": 41.0},
    }


def test_a_table_first_seen_after_the_run_counts_from_nothing() -> None:
    after = {"executions": (3, 1, 8_192, 0)}
    assert updates_between({}, after, 0) == {
        "executions": {"updates_per_execution": 3.0, "hot_updates_per_execution": 1.0,
                       "heap_bytes_per_execution": 8192.0, "index_bytes_per_execution": 0.0},
    }


def test_an_index_grown_or_read_is_listed_per_execution_and_an_untouched_one_is_not() -> None:
    # (bytes, scans) per index of pg_stat_user_indexes
    before = {"executions_pkey": (81_920, 3), "executions_owner": (16_384, 0), "executions_dead": (8_192, 0)}
    after = {"executions_pkey": (901_120, 1_003), "executions_owner": (16_384, 10), "executions_dead": (8_192, 0),
             "job_cursors_pkey": (8_192, 0)}
    assert indexes_between(before, after, 1_000) == {
        "executions_owner": {"bytes_per_execution": 0.0, "scans_per_execution": 0.01},
        "executions_pkey": {"bytes_per_execution": 819.2, "scans_per_execution": 1.0},
        "job_cursors_pkey": {"bytes_per_execution": 8.2, "scans_per_execution": 0.0},
    }
