"""The peer-hold benchmark still runs against a real server process on a
throwaway PostgreSQL and etcd: smoke mode, JSON shape, every Watch it
opens either held or refused as the per-peer bound says, and the quiet
tenant never refused (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def test_bench_peer_hold_smoke() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_peer_hold.py"), "--smoke"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["opened"] == 32 and out["refused"] == {"RESOURCE_EXHAUSTED": 8}, out
    assert out["held_at_end"] == out["opened"]
    assert out["quiet"]["answers"] >= 1 and out["quiet"]["failed"] == {}, out["quiet"]
    assert {"rss_mib", "fds"} <= set(out["server_held"]) and {"load_before", "load_after"} <= set(out)
