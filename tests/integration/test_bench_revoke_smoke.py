"""The revocation benchmark still runs against PostgreSQL, etcd and two
real server processes: JSON shape (standard JSON, no NaN), every probed key
refused by the other server, and at least one etcd put per revocation
(the word to the others; no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]


def test_bench_revoke_smoke(postgres_url, etcd_endpoint, tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_revoke.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke", "--logs", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert report["refusal"]["n"] == report["probed"] == 2
    assert report["refusal"]["p50_ms"] >= 0 and report["refusal"]["max_ms"] >= report["refusal"]["p50_ms"]
    assert report["cost"]["etcd_puts_per_revocation"] >= 1, "each revocation is told to the others"
    assert all(c >= 0 for c in report["cost"]["server_cpu_ms_per_revocation"] + report["idle"]["server_cpu_cores"])
