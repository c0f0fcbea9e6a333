"""The batch validation benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_batch_validate_smoke():
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_batch_validate.py"), "--smoke"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False, env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "batch_validate" and report["smoke"] is True
    assert set(report["us_per_job"]) == {"validate", "never_fires", "answer", "in_full", "replay"}
    assert all(value >= 0 for value in report["us_per_job"].values())
    assert report["never_fires_masks"] == 20 * 14  # February's 2 lengths x 7 first weekdays, each of 20 jobs
