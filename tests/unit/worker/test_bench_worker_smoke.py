"""The worker benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_bench_worker_smoke() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_worker.py"), "--smoke", "--sync"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "worker" and report["smoke"] is True
    for scenario in ("burst", "steady", "burst_sync"):
        figures = report[scenario]
        assert figures["cpu_us_per_execution"] > 0 and figures["executions_per_s"] > 0
        assert len(figures["runs"]) == report["repeat"] == 1
        assert report["baseline"][scenario]["cpu_us_per_execution"] > 0
