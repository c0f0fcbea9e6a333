"""The refusal-flood benchmark still runs against a real server process on
a throwaway PostgreSQL and etcd: smoke mode, JSON shape, every hostile call
answered with a refusal or (the flood tenant's few allowed) OK, and the
quiet tenant never refused (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def test_bench_refusal_flood_smoke() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_refusal_flood.py"), "--smoke"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    [run] = json.loads(done.stdout)["rounds"]
    assert set(run) == {"alone", "quota", "badkey", "garbage"}
    allowed = {"OK", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED"}
    for mode, figures in run.items():
        assert set(figures["hostile_calls"]) <= allowed, (mode, figures["hostile_calls"])
        assert figures["quiet"]["answers"] >= 1 and figures["quiet"]["failed"] == {}, (mode, figures["quiet"])
        assert {"server_cpu_s_per_s", "load_before", "load_after"} <= set(figures)
    assert "OK" not in run["badkey"]["hostile_calls"] and "OK" not in run["garbage"]["hostile_calls"]
