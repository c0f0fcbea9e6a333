"""The result-text benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def smoke(script: str) -> dict:
    """``loadtest/SCRIPT --smoke``'s report, once it exited 0."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / script), "--smoke"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False, env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bench_result_text_smoke():
    report = smoke("bench_result_text.py")
    assert report["benchmark"] == "result_text" and report["smoke"] is True
    for figures in (report["ns_per_result"], report["ns_per_held_result_at_write"]):
        assert set(figures) == {"none", "line", "lines", "hostile_4k"}
        assert all(value >= 0 for value in figures.values())
