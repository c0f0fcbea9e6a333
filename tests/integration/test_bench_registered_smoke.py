"""bench_registered still runs: both servers answer every call (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def test_bench_registered_smoke():
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_registered.py"), "--smoke"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "registered" and report["smoke"] is True
    assert [len(report["us_a_call"][way]) for way in ("registered", "generic")] == [2, 2]
