"""The lock-mix benchmark still runs against PostgreSQL, etcd and real
server and worker processes: smoke mode, JSON shape, every job's one
occurrence in exactly one terminal state (its execution ended, or a skip
range) and every call answered. No timing assertion: the run waits up to
its bound (240 s after the due second in smoke mode, eight heartbeat
timeouts) for every job to settle, and ``settled_after_due_s`` is a figure."""

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
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "lockmix" and report["smoke"] is True
    skipped = sum(report["skipped"].values())  # a pause that spanned the due instant before the claim: by design
    shown = json.dumps(report, indent=1)
    assert report["unended"] == [] and report["twice"] == [], f"each job's run in one terminal state: {shown}"
    assert report["ended"] + skipped == report["jobs"] and report["dropped"] == skipped, shown
    assert report["settled_after_due_s"] is not None, shown
    calls = report["calls"]
    assert {"PauseJob OK", "ResumeJob OK", "GetJob OK"} <= set(calls)
    assert report["unavailable"] == sum(n for call, n in calls.items() if call.endswith(" UNAVAILABLE"))
    assert set(report["refusing_locks"]) == {"answers", "server_log_lines"}
    assert report["lock_waits"] is None  # the suite's PostgreSQL is not the benchmark's: no log to read
    assert report["sampled"]["samples"] >= 1
    assert report["server_exit"] == [0]
    assert len(report["load_average_before"]) == 3
