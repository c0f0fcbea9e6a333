"""The running indexes' benchmark still runs against PostgreSQL: smoke mode,
JSON shape, and what holds whatever the figures (no timing assertions):
each index set's indexes are the ones it names, the readers find the same
rows on every set, and a running row costs an index entry fewer without
``executions_owner``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_bench_running_paths_smoke():
    """It starts its own PostgreSQL (it drops and creates indexes)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_running_paths.py"), "--smoke"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "running_paths" and report["smoke"] is True
    runs = {run["index_set"]: run for run in report["runs"]}
    assert list(runs) == ["main", "no_owner", "merged"]
    running = {name: {index for index in run["index_bytes_grown_per_execution"] if index != "executions_pkey"}
               for name, run in runs.items()}
    assert running == {
        "main": {"executions_owner", "executions_running_worker", "executions_busy"},
        "no_owner": {"executions_running_worker", "executions_busy"},
        "merged": {"executions_running", "executions_busy"},
    }
    for reader in runs["main"]["reads"]:
        assert len({run["reads"][reader]["rows"] for run in runs.values()}) == 1, reader  # the same answer
        assert runs["main"]["reads"][reader]["rows"] > 0, reader
    # The claim's insert and the outcome's update of a running row: one WAL record fewer an execution.
    main, no_owner = runs["main"]["writes_per_execution"], runs["no_owner"]["writes_per_execution"]
    assert main["wal_records"] - no_owner["wal_records"] >= 0.9, (main, no_owner)
