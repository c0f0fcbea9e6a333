"""The timer-wheel benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FIGURES = {"inserts_per_s", "cancels_per_s", "pops_per_s", "bytes_per_timer", "gc_tracked_per_timer"}


def test_bench_wheel_smoke():
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_wheel.py"), "--smoke"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "wheel" and report["smoke"] is True
    assert {"timers", "cancelled", "geometry", "wheel", "heapq", "wheel_vs_heapq", "random_order"} <= set(report)
    for figures in (report, report["random_order"]):
        for name in ("wheel", "heapq"):
            assert FIGURES <= set(figures[name])
            rates = ("inserts_per_s", "cancels_per_s", "pops_per_s", "bytes_per_timer")
            assert all(figures[name][key] > 0 for key in rates)
        assert set(figures["wheel_vs_heapq"]) == {"inserts", "cancels", "pops", "bytes"}
