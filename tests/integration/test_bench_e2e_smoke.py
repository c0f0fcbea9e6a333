"""The end-to-end benchmark still runs against PostgreSQL, etcd and real server
and worker processes, and its replay of the store's statements still matches
the schema: smoke mode, JSON shape and every execution ended with its history
(no timing assertions). Without its peer (``--no-peer``): the test suite does
not need the bench extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]


def test_bench_e2e_smoke(postgres_url, etcd_endpoint):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_e2e.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke", "--no-peer"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "e2e" and report["smoke"] is True
    assert {"server", "replay", "peer", "ratio", "goal", "postgres", "machine"} <= set(report)

    server = report["server"]
    jobs = server["jobs"]
    assert server["ended"] == jobs
    assert server["statuses"] == {"succeeded": jobs}, "every execution ended, once"
    assert server["history_rows"] == server["succeeded_with_history"] == jobs, "history recorded for each"
    assert server["early"] == 0
    assert server["executions_per_s"] > 0 and server["from_commit"]["executions_per_s"] > 0
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
