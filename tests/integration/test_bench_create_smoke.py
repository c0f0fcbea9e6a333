"""The create and paging benchmarks still run against PostgreSQL, etcd and
a real server process: smoke mode, JSON shape, every job of every phase
stored once and the goals reported beside the figures (no timing
assertions). The pgqueuer peer is left out: it is a benchmark-only
dependency."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]


def smoke(postgres_url: str, etcd_endpoint: str, *flags: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_create.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke", "--no-pgqueuer", *flags],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bench_create_smoke(postgres_url, etcd_endpoint):
    report = smoke(postgres_url, etcd_endpoint)
    assert report["servers"] == 1
    assert report["benchmark"] == "create" and report["smoke"] is True
    assert report["pgqueuer"] == {"skipped": "--no-pgqueuer"}
    server = report["server"]
    for phase in ("create_1", "create_16", "create_16_go"):
        assert server[phase]["calls"] == 40 and server[phase]["failures"] == 0, server[phase]
        # None here: the suite's PostgreSQL has no pg_stat_statements
        assert "sql" in server[phase] and "jit" in server[phase]
        # By kind of thread: the loop and the Python threads (the store's) at least.
        assert {"event_loop", "python_threads"} <= set(server[phase]["server_threads"]), server[phase]
    # The Go clients' CPU is the Go process's, not this one's.
    assert server["create_16_go"]["clients"] == 4 and server["create_16_go"]["cpu"]["callers"]["cpu_s"] >= 0
    for name in ("grpc_floor", "grpc_floor_go"):
        floor = server[name]
        assert floor["calls"] == 40 and floor["clients"] == 4 and floor["failures"] == 0, floor
        # Forty calls may cost the floor less than one clock tick of /proc's
        # accounting, so only the reading's presence and sign are checked.
        assert floor["cpu"]["server"]["cpu_s"] >= 0 and floor["cpu"]["callers"]["cpu_s"] >= 0, floor
        assert "event_loop" in floor["server_threads"], floor
    assert report["create_16_over_floor"] > 0 and report["create_16_go_over_floor"] > 0
    for phase, jobs in (("batch", 2000), ("load", 3000)):
        assert server[phase]["created"] == jobs and server[phase]["failures"] == 0, server[phase]
        assert server[phase]["calls"] == jobs // 1000
    assert server["jobs_stored"] == 3 * 40 + 2000 + 3000
    for walk in ("list_jobs", "search_jobs"):
        assert server["paging"][walk]["jobs"] == server["jobs_stored"]
        assert {"first_ms", "middle_ms", "last_ms", "last_over_first", "first_pages_ms", "median_ms", "last_page_ms",
                "max_over_median", "statements_per_page", "statements_per_page_by_kind", "jit"} <= set(server["paging"][walk])
    assert set(report["goal"]) == {"create_16_jobs_per_s", "create_16_go_jobs_per_s", "create_16_failures",
                                   "batch_jobs_per_s", "load_1m_s", "paging_last_over_first"}
    assert all("met" in goal and "value" in goal for goal in report["goal"].values())
    assert server["exit_code"] == 0


def test_bench_create_smoke_fleet_of_two(postgres_url, etcd_endpoint):
    """Two server processes: every job stored once, the partitions split
    between them, and both answered calls of the phases with several
    clients (client k to server k % 2), as did both gRPC floors."""
    report = smoke(postgres_url, etcd_endpoint, "--servers", "2")
    server = report["server"]
    assert report["servers"] == 2
    ids = ["bench-create-0", "bench-create-1"]
    assert sorted(server["ready"]) == ids
    assert sum(s["partitions_owned"] for s in server["ready"].values()) == 256
    assert all(s["partitions_owned"] == 128 for s in server["ready"].values()), server["ready"]
    for phase, jobs in (("create_1", 40), ("create_16", 40), ("create_16_go", 40), ("batch", 2000), ("load", 3000)):
        figures = server[phase]
        assert figures["failures"] == 0, figures
        assert sorted(figures["ok_by_server"]) == ids and sum(figures["ok_by_server"].values()) == jobs, figures
        assert sorted(figures["cpu_by_server"]) == ids, figures
        assert "server_threads" not in figures  # by thread: one server only
    for phase in ("create_16", "create_16_go", "load"):  # several clients: both servers answered
        assert all(n > 0 for n in server[phase]["ok_by_server"].values()), server[phase]
    assert server["create_1"]["ok_by_server"]["bench-create-1"] == 0, "one client calls the first server"
    for name in ("grpc_floor", "grpc_floor_go"):
        floor = server[name]
        assert floor["servers"] == 2 and floor["failures"] == 0 and all(n > 0 for n in floor["ok_by_server"]), floor
        assert sum(floor["ok_by_server"]) == 40
    assert server["jobs_stored"] == 3 * 40 + 2000 + 3000, "every job stored once"
    assert server["paging"]["list_jobs"]["jobs"] == server["jobs_stored"]
    assert server["exit_codes"] == [0, 0]


def test_bench_paging_smoke(postgres_url, etcd_endpoint):
    """``bench_paging.py``: every job of both tenants paged once by each
    walk, each page's figures reported, the one-job tenant's one page, and
    each tenant's first page of paused jobs (none)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_paging.py"), "--pg", postgres_url, "--etcd", etcd_endpoint,
         "--smoke", "--state", "paused"], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "paging" and report["smoke"] is True
    server = report["server"]
    assert server["load"]["created"] == 3000 and server["load"]["failures"] == 0, server["load"]
    assert server["jobs_stored"] == 3001
    assert server["list_small"]["jobs"] == [1] and server["list_small"]["calls"] == 100
    filtered = server["list_filtered"]
    assert filtered["state"] == "paused"
    for name in ("small", "bench"):
        assert filtered[name]["jobs"] == [0] and filtered[name]["calls"] == 10, filtered
        assert {"latency_ms", "cpu_ms_per_call", "read"} <= set(filtered[name]), filtered
    assert server["paging"]["list_jobs"]["jobs"] == 3000 and server["paging"]["search_jobs"]["jobs"] == 3001
    for walk in server["paging"].values():
        assert len(walk["first_pages_ms"]) == min(10, walk["pages"]), walk
        assert {"median_ms", "last_page_ms", "last_over_first", "max_over_median", "latency_ms"} <= set(walk)
    assert server["exit_code"] == 0
