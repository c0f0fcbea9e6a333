"""The schedule-work benchmark still runs against a real server process on
the embedded stores: smoke mode, JSON shape, every flood call answered with
one of the statuses the calls may get (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


@pytest.mark.parametrize("rpc", ["backfill", "diff", "resume"])
def test_bench_schedule_work_smoke(rpc: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_schedule_work.py"), "--smoke", "--pace", "--rpc", rpc],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rpc"] == rpc and report["pace"] is True
    assert set(report["flood_calls"]) <= {"OK", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"}, report["flood_calls"]
    assert sum(report["flood_calls"].values()) >= 1 and report["quiet_get_job"]["calls"] >= 1
    assert {"server_cpu_s", "server_cpu_s_per_wall_s", "load"} <= set(report)
    if rpc == "resume":
        assert report["resume"]["jobs"] >= 1 and report["resume"]["span_fires"] >= report["resume"]["jobs"]
