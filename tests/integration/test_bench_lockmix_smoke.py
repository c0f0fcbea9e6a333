"""The lock-mix benchmark still runs against PostgreSQL, etcd and real
server and worker processes: smoke mode, JSON shape, every execution
ended and every call answered (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]


def test_bench_lockmix_smoke(postgres_url, etcd_endpoint):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_lockmix.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "lockmix" and report["smoke"] is True
    assert report["ended"] == report["jobs"] and report["dropped"] == 0 and report["unended"] == [], (
        f"every job ran once, its pauses resumed: {json.dumps(report, indent=1)}")
    calls = report["calls"]
    assert {"PauseJob OK", "ResumeJob OK", "GetJob OK"} <= set(calls)
    assert report["unavailable"] == sum(n for call, n in calls.items() if call.endswith(" UNAVAILABLE"))
    assert set(report["refusing_locks"]) == {"answers", "server_log_lines"}
    assert report["lock_waits"] is None  # the suite's PostgreSQL is not the benchmark's: no log to read
    assert report["sampled"]["samples"] >= 1
    assert report["server_exit"] == [0]
    assert len(report["load_average_before"]) == 3
