"""The hello benchmark (it starts its own PostgreSQL) still runs: smoke
mode, JSON shape, and each worker's hello marking its share of the rows
dealt to it under a dead session (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_bench_hello_smoke():
    done = subprocess.run([sys.executable, str(ROOT / "loadtest" / "bench_hello.py"), "--smoke"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "hello" and report["smoke"] is True
    [run] = report["runs"]
    assert run["marked"] == run["running"] == 50  # every row its worker's hello did not list
    for kind in ("marking", "nothing_to_mark"):
        assert run[kind]["hellos"] == 5 and run[kind]["wall_ms_per_hello"]["p50"] >= 0
