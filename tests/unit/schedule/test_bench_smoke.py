"""The next-fire benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_bench_next_fire_smoke():
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_next_fire.py"), "--smoke"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "next_fire" and report["smoke"] is True
    assert set(report["tickwheel"]) >= {"cold_per_s", "warm_per_s", "compile_each_per_s"}
    assert set(report["croniter"]) >= {"fresh_per_s", "reused_per_s"}
    assert all(isinstance(v, int) and v > 0 for v in report["tickwheel"].values())
    assert {"speedup_warm_vs_croniter_fresh", "agreement_without_h", "tzdata", "computations", "mix"} <= set(report)
