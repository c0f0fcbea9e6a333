"""The end-to-end benchmark still runs against PostgreSQL, etcd and real server
and worker processes, and its replay of the store's statements still matches
the schema: smoke mode, JSON shape and every execution ended with its history
(no timing assertions). Without its peer (``--no-peer``): the test suite does
not need the bench extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]


def smoke(postgres_url: str, etcd_endpoint: str, *flags: str, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_e2e.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke", "--no-peer", *flags],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False, env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bench_e2e_smoke(postgres_url, etcd_endpoint):
    report = smoke(postgres_url, etcd_endpoint)
    assert report["servers"] == report["server"]["servers"] == 1
    assert report["server"]["claimed_by_server"] == {"bench-e2e": report["server"]["jobs"]}
    assert report["benchmark"] == "e2e" and report["smoke"] is True
    assert {"server", "replay", "peer", "ratio", "goal", "postgres", "machine"} <= set(report)

    server = report["server"]
    assert "sql" in server and "jit" in server  # None: the suite's PostgreSQL has no pg_stat_statements
    jobs = server["jobs"]
    assert server["ended"] == jobs
    assert server["statuses"] == {"succeeded": jobs}, "every execution ended, once"
    assert server["history_rows"] == server["succeeded_with_history"] == jobs, "history recorded for each"
    assert server["early"] == 0
    assert server["executions_per_s"] > 0 and server["from_commit"]["executions_per_s"] > 0
    # Lateness at the worker's start, from the due instant (before the commit) and from the commit.
    late = report["worker_start_lateness_s"]
    assert late == server["worker_start_lateness_s"]
    assert late["due_before_commit_s"] >= 0 and 0 <= late["p50"] <= late["p99"] <= late["max"]
    assert late["from_commit"]["max"] == pytest.approx(late["max"] - late["due_before_commit_s"], abs=0.002)
    assert server["from_commit"]["first_claim_s"] is not None
    # The CPU over the run's own window (commit to the last completion), the peer's none without it.
    assert report["cpu_cores_during_run"]["tickwheel"] > 0 and report["cpu_cores_during_run"]["pgqueuer_best"] is None
    idle = server["idle"]  # what the servers cost with nothing to do, before the jobs were stored
    assert idle["seconds"] > 0 and set(idle["cpu_cores"]) == set(server["cpu"])
    assert {"server", "workers", "postgres", "etcd"} <= set(server["cpu"])
    assert all("cpu_ms_per_execution" in figures for figures in server["cpu"].values())
    assert {"requests", "requests_per_execution", "requests_by_method"} <= set(server["etcd"])
    assert server["exit_codes"]["server"] == 0 and set(server["exit_codes"]["workers"]) == {0}

    replay = report["replay"]
    assert replay["jobs"] == replay["history_rows"] == jobs
    assert set(replay["phases_s"]) == {"claim_enqueue", "hand_out", "outcome_history"}
    assert replay["executions_per_s"] > 0 and report["ratio_to_replay"] > 0
    # No peer ran: nothing to compare with, and no verdict rather than a false one.
    assert report["peer"] is None and report["ratio"] is None and report["goal"]["met"] is None
    assert report["executions_per_s"] == {"tickwheel": server["executions_per_s"], "pgqueuer_best": None}
    assert report["cpu_ms_per_execution"]["tickwheel"]["total"] > 0


def test_bench_e2e_smoke_fleet_of_two(postgres_url, etcd_endpoint, tmp_path):
    """Two server processes: every execution ended once with its history,
    none early, and both servers claimed (their partitions) and handed out
    (to their workers: worker k on server k % 2). With ``--timeline`` and
    the trace hook: every execution in the timeline's three stages, and
    each server's trace holds its claims."""
    trace = tmp_path / "trace"
    env = {**os.environ, "TICKWHEEL_TRACE": str(trace),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "loadtest" / "tracehook"),
                                                       os.environ.get("PYTHONPATH")]))}
    report = smoke(postgres_url, etcd_endpoint, "--servers", "2", "--timeline", env=env)
    server = report["server"]
    jobs = server["jobs"]
    assert report["servers"] == server["servers"] == 2
    assert server["statuses"] == {"succeeded": jobs}, "every execution ended, once"
    assert server["history_rows"] == server["succeeded_with_history"] == jobs
    assert server["early"] == 0
    ids = ["bench-e2e-0", "bench-e2e-1"]
    for part in ("claimed_by_server", "executed_by_server"):
        counts = server[part]
        assert sorted(counts) == ids and sum(counts.values()) == jobs and all(n > 0 for n in counts.values()), counts
    assert sorted(server["cpu_by_server"]) == ids
    assert server["exit_codes"]["servers"] == [0, 0] and set(server["exit_codes"]["workers"]) == {0}
    timeline = server["timeline"]
    assert sum(timeline["claimed"]) == sum(timeline["started"]) == sum(timeline["finished"]) == jobs
    assert timeline["activity"]["samples"] > 0
    traces = sorted(tmp_path.glob("trace.*"))
    assert len(traces) == 2, "one trace a server process, none from the workers or the benchmark"
    for path in traces:
        kinds = {line.split("\t")[2] for line in path.read_text().splitlines() if line.startswith("tx\t")}
        assert any("claim_due" in kind for kind in kinds), kinds


HISTORY = 500


def test_bench_e2e_smoke_over_history(postgres_url, etcd_endpoint):
    """``--history``: ended executions of other jobs (some of the bench's
    own tenant, some succeeded with their attempt on the row, as the run's
    are) stored first and still there at the end, and every count the
    benchmark makes is of the run's executions only: with the history
    counted, the statuses, history rows, claims, executions by worker and
    timeline would each exceed the run's jobs."""
    report = smoke(postgres_url, etcd_endpoint, "--history", str(HISTORY), "--timeline")
    server = report["server"]
    jobs = server["jobs"]
    assert report["history"] == HISTORY
    history = server["history"]
    assert history["rows"] == history["left_after_run"] == HISTORY
    assert history["statuses"] == {"succeeded": HISTORY - 2 * (HISTORY // 100),
                                   "dead": HISTORY // 100, "canceled": HISTORY // 100}
    assert server["ended"] == jobs
    assert server["statuses"] == {"succeeded": jobs}, "the run's own executions, not the history"
    assert server["history_rows"] == server["succeeded_with_history"] == jobs
    assert server["early"] == 0 and server["start_lateness_s"]["max"] < 3600, "no history attempt in lateness"
    assert server["claimed_by_server"] == {"bench-e2e": jobs}
    assert server["executed_by_server"] == {"bench-e2e": jobs}
    timeline = server["timeline"]
    assert sum(timeline["claimed"]) == sum(timeline["started"]) == sum(timeline["finished"]) == jobs
    assert len(timeline["claimed"]) < 3600 * 10, "the timeline starts at the run's first claim, not the history's"
    assert server["executions_per_s"] > 0
    assert report["replay"]["history_rows"] == jobs


def test_bench_e2e_history_bounded(postgres_url, etcd_endpoint):
    """A negative or oversized ``--history`` is refused before anything runs."""
    for value in ("-1", "10000001"):
        done = subprocess.run(
            [sys.executable, str(ROOT / "loadtest" / "bench_e2e.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
             "--smoke", "--no-peer", "--history", value],
            capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
        )
        assert done.returncode == 2 and "--history between 0 and 10 000 000" in done.stderr, done.stderr
        assert done.stdout == ""
