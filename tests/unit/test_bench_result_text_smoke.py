"""The result-text benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_result_text_smoke():
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_result_text.py"), "--smoke"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False, env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "result_text" and report["smoke"] is True
    assert set(report["ns_per_result"]) == {"none", "line", "lines", "hostile_4k"}
    assert all(value >= 0 for value in report["ns_per_result"].values())
