"""The idle-CPU benchmark still runs: smoke mode against the test PostgreSQL
and etcd, with real server and worker processes; JSON shape only (no timing
assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]


def test_bench_idle_smoke(postgres_url, etcd_endpoint):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_idle.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke"],
        capture_output=True, text=True, timeout=180, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "idle" and report["smoke"] is True
    assert {"baseline", "after_burst", "ratio", "under_goal", "server", "goal_cpu_fraction"} <= set(report)

    assert report["baseline"]["jobs"] == 0
    after = report["after_burst"]
    assert after["jobs"] > after["burst"] > 0
    assert "drained_s_after_burst_at" in after, "the burst was claimed, handed out and completed"
    for scenario in (report["baseline"], after):
        assert len(scenario["windows"]) == 1
        window = scenario["windows"][0]
        assert {"server", "worker", "postgres", "seconds", "load_average", "tables"} <= set(window)
        assert window["server"] >= 0 and window["worker"] >= 0
        # The test PostgreSQL runs on this machine: its processes are found and measured.
        assert window["postgres"] is not None and window["postgres"] >= 0
        assert {"backends", "autovacuum", "background", "exited"} <= set(window["postgres_by_kind"])
        assert {"jobs", "executions"} <= set(window["tables"])
        assert {"server", "postgres"} <= set(scenario["summary"])
    assert report["server"]["storage_parameters"]["jobs"], "migration 0007's autovacuum settings are applied"
