"""The manual-run micro-benchmark still runs against PostgreSQL: JSON shape
(standard JSON, no NaN), every trigger created and every run started by
the round (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres]


def test_bench_trigger_smoke(postgres_url):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_trigger.py"), "--pg", postgres_url, "--calls", "12",
         "--jobs", "3", "--concurrency", "4", "--repeat", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert report["trigger"]["rows"] == 12 and report["round"]["rows"] == 12
    for part in ("trigger", "round"):
        assert all(report[part][key] >= 0 for key in ("wall_ms", "python_cpu_ms", "postgres_cpu_ms"))
