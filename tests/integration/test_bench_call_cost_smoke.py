"""The call-cost ladder still runs: every step's server answers every call
(the coalescer's steps through the coalescer), and the real server's step
stores through PostgreSQL and etcd (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def test_bench_call_cost_smoke():
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_call_cost.py"), "--smoke", "--client", "python"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "call_cost" and report["smoke"] is True
    (ladder,) = report["rounds"]
    assert list(ladder) == ["floor", "response", "options", "guard", "rpc", "auth", "request", "coalescer", "hop",
                            "servicer"]
    for step, figures in ladder.items():
        assert figures["failures"] == 0, (step, figures)
        assert figures["ms"] >= 0 and "event_loop" in figures["threads"], (step, figures)
    for step in ("coalescer", "hop", "servicer"):
        assert ladder[step]["calls_a_write"] >= 1, (step, ladder[step])
    assert ladder["floor"]["calls_a_write"] is None  # no coalescer on its path


def test_bench_call_cost_floors_smoke():
    """The floors beside the ladder answer every call, none through a coalescer."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_call_cost.py"), "--smoke", "--client", "python",
         "--steps", "generic,registered,sync,synchop", "--sync-threads", "4"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    (floors,) = json.loads(done.stdout)["rounds"]
    assert list(floors) == ["generic", "registered", "sync", "synchop"]
    for step, figures in floors.items():
        assert figures["failures"] == 0 and figures["calls_a_write"] is None, (step, figures)
