"""The hostile-stream benchmark still runs: smoke mode, JSON lines, every
victim job run, the hostile hello of more handlers than the bound refused,
and the idle streams of one credential opened and measured (no timing
assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def test_bench_hostile_stream_smoke():
    done = subprocess.run([sys.executable, str(ROOT / "loadtest" / "bench_hostile_stream.py"), "--smoke"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT / "loadtest", check=False)
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(run["hostile_handlers"], run["hostile_streams"]) for run in runs] == [(0, 0), (2000, 0), (0, 20)]
    assert all(run["bench"] == "hostile_stream" and run["ran"] == run["jobs"] == 5 for run in runs)
    assert [run["hostile_accepted"] for run in runs] == [False, False, False]
    assert runs[2]["streams_welcomed"] == 20 and runs[2]["streams_refused"] == 0
    assert runs[2]["tasks_per_stream"] is not None
