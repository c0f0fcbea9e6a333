"""The wake-up benchmark still runs against PostgreSQL, etcd, two real
server processes and their workers: JSON shape (standard JSON, no NaN),
both servers owning half the partitions, and every write's execution
started by a worker (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

ENTRIES = ("create", "create_past", "update", "trigger", "batch")


def test_bench_wakeup_smoke(postgres_url, etcd_endpoint, tmp_path):
    rounds, batch = 10, 5
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_wakeup.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--rounds", str(rounds), "--batch", str(batch), "--pause", "0.05", "--logs", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert report["partitions_owned"] == {"s1": 128, "s2": 128}
    assert set(report["wait"]) == set(ENTRIES)
    started = {entry: sum(side["n"] for side in report["wait"][entry].values()) for entry in ENTRIES}
    # Every round's create, past create, update and trigger, and every tenth
    # round's batch, ran once on a worker.
    assert started == {"create": rounds, "create_past": rounds, "update": rounds, "trigger": rounds,
                       "batch": batch * (rounds // 10)}, started
    for entry in ENTRIES:
        for side in report["wait"][entry].values():
            assert side["n"] == 0 or side["p50_ms"] >= 0
    assert report["etcd_puts"] >= 0 and report["cpu_ms_per_request"] >= 0


def test_bench_wakeup_storm_smoke(postgres_url, etcd_endpoint, tmp_path):
    """``--storm``: the triggers counted, each started by a worker, the
    hand-out claims read from ``pg_stat_statements`` (none where it is not
    loaded), standard JSON."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_wakeup.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--storm", "1", "--storm-lanes", "2", "--logs", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert report["triggers"] > 0 and report["lanes"] == 2
    assert sum(side["n"] for side in report["wait"]["trigger"].values()) == report["triggers"]
    assert report["handout_claims"] is None or report["handout_claims"] >= 0
    assert report["cpu_ms_per_trigger"] >= 0
