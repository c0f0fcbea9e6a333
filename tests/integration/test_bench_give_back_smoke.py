"""The give-back micro-benchmark still runs against PostgreSQL: JSON shape
(standard JSON, no NaN), every row given back or reaped and half the round started
(no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres]


def test_bench_give_back_smoke(postgres_url):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_give_back.py"), "--pg", postgres_url, "--rows", "20",
         "--repeat", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert report["give_back"]["rows"] == 20 and report["round"]["rows"] == 10 and report["reap"]["rows"] == 20
    for part in ("give_back", "round", "reap"):
        assert all(report[part][key] >= 0 for key in ("wall_ms", "python_cpu_ms", "postgres_cpu_ms"))
