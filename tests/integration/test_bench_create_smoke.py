"""The create benchmark still runs against PostgreSQL, etcd and a real server
process: smoke mode, JSON shape, every job of every phase stored once and
the goals reported beside the figures (no timing assertions). The pgqueuer
peer is left out: it is a benchmark-only dependency."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]


def test_bench_create_smoke(postgres_url, etcd_endpoint):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_create.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke", "--no-pgqueuer"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "create" and report["smoke"] is True
    assert report["pgqueuer"] == {"skipped": "--no-pgqueuer"}
    server = report["server"]
    for phase in ("create_1", "create_16", "create_16_go"):
        assert server[phase]["calls"] == 40 and server[phase]["failures"] == 0, server[phase]
        assert "sql" in server[phase]  # None here: the suite's PostgreSQL has no pg_stat_statements
    # The Go clients' CPU is the Go process's, not this one's.
    assert server["create_16_go"]["clients"] == 4 and server["create_16_go"]["cpu"]["callers"]["cpu_s"] >= 0
    for name in ("grpc_floor", "grpc_floor_go"):
        floor = server[name]
        assert floor["calls"] == 40 and floor["clients"] == 4 and floor["failures"] == 0, floor
        # Forty calls may cost the floor less than one clock tick of /proc's
        # accounting, so only the reading's presence and sign are checked.
        assert floor["cpu"]["server"]["cpu_s"] >= 0 and floor["cpu"]["callers"]["cpu_s"] >= 0, floor
    assert report["create_16_over_floor"] > 0 and report["create_16_go_over_floor"] > 0
    for phase, jobs in (("batch", 2000), ("load", 3000)):
        assert server[phase]["created"] == jobs and server[phase]["failures"] == 0, server[phase]
        assert server[phase]["calls"] == jobs // 1000
    assert server["jobs_stored"] == 3 * 40 + 2000 + 3000
    for walk in ("list_jobs", "search_jobs"):
        assert server["paging"][walk]["jobs"] == server["jobs_stored"]
        assert {"first_ms", "middle_ms", "last_ms", "last_over_first"} <= set(server["paging"][walk])
    assert set(report["goal"]) == {"create_16_jobs_per_s", "create_16_go_jobs_per_s", "create_16_failures",
                                   "batch_jobs_per_s", "load_1m_s", "paging_last_over_first"}
    assert all("met" in goal and "value" in goal for goal in report["goal"].values())
    assert server["exit_code"] == 0
