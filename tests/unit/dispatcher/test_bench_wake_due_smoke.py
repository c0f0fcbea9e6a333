"""loadtest/bench_wake_due.py still runs and prints its JSON (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_bench_wake_due_smoke() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_wake_due.py"), "--jobs", "20", "--iterations", "3"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False, env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["jobs"] == 20 and report["takes_job_ids"] is True
    assert report["due_later_cpu_us_per_batch"] >= 0 and report["due_now_cpu_us_per_batch"] >= 0
