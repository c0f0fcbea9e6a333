"""The rows-by-index benchmark still runs on a throwaway PostgreSQL of its
own: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_bench_create_rows_smoke() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_create_rows.py"), "--smoke"],
        capture_output=True, text=True, timeout=300, cwd=ROOT / "loadtest", check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "bench_create_rows" and report["smoke"] is True
    variants = {"as_is", "no_request_ids", "request_ids_only", "create_jobs", "distinct_names", "no_jobs_tenant",
                "no_jobs_tenant_name", "no_jobs_active_zone", "no_job_cursors_due", "no_request_ids_created", "create_jobs_split"}
    assert set(report["postgres_cpu_us_per_job"]) == variants
    assert set(report["python_cpu_us_per_job"]) == variants
    assert all(value >= 0 for value in report["postgres_cpu_us_per_job"].values())


def test_bench_create_rows_takes_a_group_size() -> None:
    """``--batch 12``: a CreateJob group's transaction, both ways."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_create_rows.py"), "--smoke", "--batch", "12",
         "--variants", "create_jobs,create_jobs_split"],
        capture_output=True, text=True, timeout=300, cwd=ROOT / "loadtest", check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["batch"] == 12
    assert set(report["postgres_cpu_us_per_job"]) == {"as_is", "create_jobs", "create_jobs_split"}
