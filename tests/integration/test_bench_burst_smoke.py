"""The burst benchmark still runs against PostgreSQL, etcd and real server and
worker processes: smoke mode, JSON shape and every execution ended (no timing
assertions). Without its peers (``--no-peer``): the test suite does not need
the bench extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LATENESS = {"min", "p50", "p90", "p99", "max"}

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]


def smoke(postgres_url: str, etcd_endpoint: str, *flags: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_burst.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke", "--no-peer", *flags],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bench_burst_smoke(postgres_url, etcd_endpoint):
    report = smoke(postgres_url, etcd_endpoint)
    assert report["servers"] == 1
    assert report["benchmark"] == "burst" and report["smoke"] is True
    assert {"runs", "required", "goal", "goal_vs_pgqueuer", "postgres", "machine"} <= set(report)
    assert "baseline" not in report, "no figures from another run"
    [run] = report["runs"]
    assert "sql" in run and "jit" in run  # None: the suite's PostgreSQL has no pg_stat_statements
    size = run["size"]
    assert run["jobs"] == run["executions"] == run["started"] == size
    assert run["statuses"] == {"succeeded": size}, "every execution ended, once"
    assert run["ended_within_timeout"] is True
    assert run["early"] == 0 and run["dropped"] == 0 and run["redelivered"] == 0
    assert run["claimed_ahead"] == size, "claimed within the look-ahead, before the due second"
    assert set(run["lateness_s"]) == LATENESS and run["lateness_s"]["min"] >= 0
    assert sum(run["started_per_worker"].values()) == size
    assert run["hand_out_batches"]["count"] >= 1
    assert {"server", "workers", "postgres", "etcd"} <= set(run["cpu"])
    assert {"requests", "requests_per_execution", "requests_by_method"} <= set(run["etcd"])
    assert run["exit_codes"]["server"] == 0 and set(run["exit_codes"]["workers"]) == {0}
    assert len(run["load_average_before"]) == 3
    assert run["measured_from"] == "due - 1 s"
    headline = run["p99_at_worker_start_s"]
    assert headline["tickwheel"] == run["worker_start_lateness_s"]["p99"]
    assert headline["tickwheel_hand_out"] == run["lateness_s"]["p99"]
    assert run["peers"] is None and headline["pgqueuer_best"] is None and headline["apscheduler"] is None
    assert run["ratio_to_pgqueuer"] is None and report["goal_vs_pgqueuer"]["met"] is None


def test_bench_burst_smoke_fleet_of_two(postgres_url, etcd_endpoint):
    """Two server processes: every job started once, none early or dropped,
    and both servers claimed (their partitions) and handed out (to their
    workers: worker k on server k % 2)."""
    report = smoke(postgres_url, etcd_endpoint, "--servers", "2")
    [run] = report["runs"]
    size = run["size"]
    assert report["servers"] == run["servers"] == 2
    assert run["statuses"] == {"succeeded": size}, "every execution ended, once"
    assert run["early"] == 0 and run["dropped"] == 0 and run["redelivered"] == 0
    ids = [f"bench-burst-{size}-0", f"bench-burst-{size}-1"]
    for part in ("claimed_by_server", "handed_out_by_server"):
        counts = run[part]
        assert sorted(counts) == ids and sum(counts.values()) == size and all(n > 0 for n in counts.values()), counts
    assert sorted(run["cpu_by_server"]) == ids
    assert run["exit_codes"]["servers"] == [0, 0] and set(run["exit_codes"]["workers"]) == {0}


def test_bench_burst_smoke_over_history(postgres_url, etcd_endpoint):
    """``--history``: ended executions of other jobs (more of them than the
    burst's jobs) stored first and still there at the end; the poll waits
    for the run's own executions and every figure is of the run's jobs:
    with the history counted, the claims would exceed the run's size."""
    history = 500
    report = smoke(postgres_url, etcd_endpoint, "--history", str(history))
    [run] = report["runs"]
    size = run["size"]
    assert report["history"] == history
    assert run["history"]["rows"] == run["history"]["left_after_run"] == history
    assert run["jobs"] == run["executions"] == run["started"] == size
    assert run["statuses"] == {"succeeded": size}, "the poll waited for the run's own executions"
    assert run["early"] == 0 and run["dropped"] == 0 and run["redelivered"] == 0
    assert run["claimed_by_server"] == {f"bench-burst-{size}": size}
    assert sum(run["handed_out_by_server"].values()) == size


def test_bench_burst_smoke_from_the_store(etcd_endpoint):
    """``--from-store``: the window opens at the jobs' commit, so the claim
    (each one-off's execution inserted, its cursor completed) is in the
    rows written, beside the start and the result. Without the flag the
    window opens a second before the instant, after the claim: no cursor
    row. A throwaway PostgreSQL (not the suite's), which has
    pg_stat_statements loaded, so the rows are counted."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_burst.py"), "--etcd", etcd_endpoint, "--smoke", "--no-peer",
         "--from-store"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    [run] = json.loads(done.stdout)["runs"]
    size = run["size"]
    assert run["measured_from"] == "store"
    assert run["statuses"] == {"succeeded": size} and run["early"] == 0 and run["claimed_ahead"] == size
    written = run["sql"]["rows_written_by_table"]
    assert written["job_cursors"]["rows"] == size, written
    assert written["executions"]["rows"] >= 3 * size, "the claim's insert, the start and the result"
