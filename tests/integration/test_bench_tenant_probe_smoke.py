"""The tenant-probe benchmark still runs against PostgreSQL: smoke mode, JSON
shape, and the quiet tenant's run found beside the flood (no timing
assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_bench_tenant_probe_smoke(postgres_url):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_tenant_probe.py"), "--pg", postgres_url, "--smoke"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "tenant_probe" and report["smoke"] is True
    assert set(report["tenants"]) == {"1", "70"}
    for figures in report["tenants"].values():
        for scenario in ("idle", "parked"):
            for kind in ("arm", "round"):
                measured = figures[scenario][kind]
                assert measured["passes"] == 3 and measured["wall_ms_per_pass"] >= 0
                assert measured["python_cpu_ms_per_pass"] >= 0
                # None where the PostgreSQL given has no pg_stat_statements loaded (the tests' has not).
                assert measured["statements_per_pass"] is None or measured["statements_per_pass"] >= 1
        flood = figures["flood"]
        assert flood["quiet_armed_after"]["passes"] >= 1, "the quiet tenant's run was armed"
        assert flood["quiet_handed_out_after"]["passes"] >= 1, "the quiet tenant's run was handed out"
