"""The tenant-probe benchmark still runs against PostgreSQL: smoke mode, JSON
shape, and the quiet tenant's run found beside the flood and the backlog (no
timing assertions); and the smoke modes of the scheduled-index and the
running-index benchmarks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _report(script: str, *args: str) -> dict:
    """What ``loadtest/<script>`` printed in smoke mode (it must succeed)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / script), *args, "--smoke"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bench_tenant_probe_smoke(postgres_url):
    report = _report("bench_tenant_probe.py", "--pg", postgres_url)
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
        for scenario in ("flood", "backlog"):
            found = figures[scenario]
            assert found["quiet_armed_after"]["passes"] >= 1, "the quiet tenant's run was armed"
            assert found["quiet_handed_out_after"]["passes"] >= 1, "the quiet tenant's run was handed out"
        for kind in ("arm", "round"):
            assert figures["backlog"][kind]["passes"] == 3


def test_bench_scheduled_index_smoke():
    """The index-cost benchmark (it starts its own PostgreSQL: it migrates
    fresh databases to two versions): smoke mode and JSON shape."""
    report = _report("bench_scheduled_index.py")
    assert report["benchmark"] == "scheduled_index" and report["smoke"] is True
    assert [run["schema"] for run in report["runs"]] == ["before (0028)", "after (0030)"]
    assert list(report["runs"][0]["index_bytes_per_row"]) == ["executions_scheduled"]
    assert list(report["runs"][1]["index_bytes_per_row"]) == ["executions_scheduled_tenant"]
    assert all(run["wal_bytes_per_row"] > 0 for run in report["runs"])


def test_bench_running_paths_smoke():
    """The running indexes' benchmark (its own PostgreSQL: it drops and
    creates indexes): each index set's indexes, the readers' answers the
    same on both (the store's own statements on the migrated set), and a
    running row's insert and end one WAL record fewer with one index for
    two (migration 0040)."""
    report = _report("bench_running_paths.py")
    assert report["benchmark"] == "running_paths" and report["smoke"] is True
    runs = {run["index_set"]: run for run in report["runs"]}
    assert list(runs) == ["before", "migrated"]
    running = {name: {index for index in run["index_bytes_grown_per_execution"] if index != "executions_pkey"}
               for name, run in runs.items()}
    assert running == {
        "before": {"executions_owner", "executions_running_worker", "executions_busy"},
        "migrated": {"executions_running", "executions_busy"},
    }
    for reader in runs["before"]["reads"]:
        assert len({run["reads"][reader]["rows"] for run in runs.values()}) == 1, reader  # the same answer
        assert runs["before"]["reads"][reader]["rows"] > 0, reader
    before, migrated = runs["before"]["writes_per_execution"], runs["migrated"]["writes_per_execution"]
    assert before["wal_records"] - migrated["wal_records"] >= 0.9, (before, migrated)
