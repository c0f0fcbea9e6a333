"""The create parameters benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_create_params_smoke():
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_create_params.py"), "--smoke", "--sizes", "3,70"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False, env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "create_params" and report["smoke"] is True
    assert set(report["by_size"]) == {"3", "70"}
    assert all(part["calls_per_job"] > 0 and part["cpu_us_per_job"] >= 0 for part in report["by_size"].values())
