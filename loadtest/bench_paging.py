"""Benchmark: paging through ListJobs and SearchJobs over a store just
loaded, page by page, on the real server (issue 21: flat page latency,
the first pages included).

    .venv/bin/python loadtest/bench_paging.py [--jobs 300000] [--page-size 1000] [--analyze]
                                              [--state paused] [--name-prefix P] [--filtered-calls 100]
                                              [--pg URL] [--etcd HOST:PORT] [--logs DIR] [--smoke]

Prints one JSON object. Without ``--pg``/``--etcd`` a throwaway PostgreSQL
and etcd are started (``tests/support``) and deleted afterwards; like the
test suite's, its autovacuum is off, so the tables are paged exactly as
the load left them: never analysed (a store between a bulk load and
autovacuum's analyse of it, or whose statistics predate a tenant's
growth).

One ``tickwheel server`` (``--migrate``, no workers). The ``bench``
tenant's ``--jobs`` jobs are created through BatchCreateJobs (1 000 a
call, 4 callers: ``bench_create.py``'s load), and one job of a second
tenant, ``small``, beside them. Then, in this order, each over a channel:

- ``list_jobs``: every page of ``bench``'s ListJobs, ``--page-size`` a page;
- ``search_jobs``: every page of the admin's SearchJobs (both tenants);
- ``list_small``: ``small``'s one page, asked for 100 times (a pooled
  connection's first executions of a text are custom plans; once
  ``bench``'s pages have run on it, PostgreSQL may keep its generic plan
  for the text, planned for no tenant in particular): latency, and what
  PostgreSQL read for them (``read``: ``pg_stat_statements``' calls, rows
  and shared buffers of the page's statement; null without the
  extension). A tenant's page reads its own rows, not its neighbour's.
- ``list_filtered`` (with ``--state`` or ``--name-prefix``): the first
  page of ListJobs with those filters, ``--filtered-calls`` times for
  ``bench`` and then for ``small`` (after ``bench``'s, a connection's
  custom plans of the text are priced high, so PostgreSQL may keep the
  generic plan for ``small``'s), each with what PostgreSQL read. Every
  job loaded is active and named ``load`` (``small``'s ``small``), so ``--state paused`` (or
  ``completed``, or a prefix no name has) finds none: ``bench``'s page
  reads what the filter's path must read to say so (its paused jobs on
  ``jobs_tenant_paused``, its every job for another state), ``small``'s
  its one job, and neither a row of the other.

Each paging figure (``bench_create.page_figures``) gives the first ten
pages' latency, the median, p99, max and last, and flatness as
``last_over_first`` (last page over first) and ``max_over_median``, and
the server's and PostgreSQL's CPU per page (``cpu``), the statements
per page and what PostgreSQL compiled with JIT for the walk (``jit``).
``--analyze`` runs ``ANALYZE`` on ``jobs`` and ``job_cursors`` before
paging (what autovacuum would do later), to tell a plan the statistics
choose from one they do not. ``--smoke`` runs tiny sizes for CI; its
figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import time

import grpc
import grpc.aio

import _harness as h
import bench_create as bc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

SERVER_ID = "bench-paging"
SMALL = "small"
LOAD_CLIENTS = 4
SMALL_CALLS = 100
STATES = {"": 0, "active": job_pb2.JOB_STATE_ACTIVE, "paused": job_pb2.JOB_STATE_PAUSED,
          "completed": job_pb2.JOB_STATE_COMPLETED}
"""``--state``'s values and the proto's."""


async def create_tenants(server: h.ServerProcess, jobs: int) -> tuple[str, str]:
    """The ``bench`` tenant (room for ``jobs``) and ``small``; their API keys."""
    keys = []
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        for name, max_jobs in ((h.TENANT, jobs + 1000), (SMALL, 10)):
            tenant = admin_pb2.Tenant(name=name, quotas=admin_pb2.TenantQuotas(
                max_jobs=max_jobs, requests_per_second=1_000_000))
            created = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=tenant),
                                               metadata=h.admin_metadata(server))
            keys.append(created.api_key.secret)
    return keys[0], keys[1]


async def create_small(server: h.ServerProcess, api_key: str) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=bc.bench_job("small"), request_id="small-0"),
                                  metadata=(("authorization", f"Bearer {api_key}"),), timeout=30)


async def page_small(server: h.ServerProcess, api_key: str, page_size: int) -> dict:
    """``small``'s one page, :data:`SMALL_CALLS` times over one channel:
    enough for each of the server's pooled connections to prepare the
    statement and settle on a generic plan."""
    latencies, jobs = [], set()
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for _ in range(SMALL_CALLS):
            began = time.perf_counter()
            page = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=page_size),
                                            metadata=(("authorization", f"Bearer {api_key}"),), timeout=60)
            latencies.append(time.perf_counter() - began)
            jobs.add(len(page.jobs))
    return {"calls": SMALL_CALLS, "jobs": sorted(jobs), "first_ms": round(latencies[0] * 1000, 2),
            "latency_ms": bc.latency_ms(latencies)}


async def page_filtered(server: h.ServerProcess, api_key: str, args: argparse.Namespace, meter: h.Meter) -> dict:
    """The first page of ListJobs filtered by ``--state`` and
    ``--name-prefix``, ``--filtered-calls`` times over one channel: its
    latency and the server's and PostgreSQL's CPU per call."""
    request = scheduler_pb2.ListJobsRequest(page_size=args.page_size, name_prefix=args.name_prefix,
                                            state=STATES[args.state])
    latencies, jobs = [], set()
    before = meter.read()
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for _ in range(args.filtered_calls):
            began = time.perf_counter()
            page = await scheduler.ListJobs(request, metadata=(("authorization", f"Bearer {api_key}"),), timeout=300)
            latencies.append(time.perf_counter() - began)
            jobs.add(len(page.jobs))
    cpu = h.Meter.difference(before, meter.read(), len(latencies))["cpu"]
    return {"calls": args.filtered_calls, "jobs": sorted(jobs), "first_ms": round(latencies[0] * 1000, 2),
            "latency_ms": bc.latency_ms(latencies),
            "cpu_ms_per_call": {role: figures["cpu_ms_per_execution"] for role, figures in cpu.items()}}


def page_reads(statements: h.Statements) -> dict | None:
    """The shared buffers (hit + read) and rows of the job page statements
    since ``statements`` was reset (None without ``pg_stat_statements``)."""
    if not statements.available:
        return None
    with h.observe(statements.url) as pg:
        rows = pg.execute(
            f"{h.OWN_QUERY} SELECT calls, rows, shared_blks_hit + shared_blks_read FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND query LIKE '%FROM jobs%JOIN%job_cursors%' AND query LIKE '%ORDER BY jobs.%LIMIT%'").fetchall()
    return {"calls": sum(r[0] for r in rows), "rows": sum(r[1] for r in rows), "buffers": sum(r[2] for r in rows)}


def run(args: argparse.Namespace, url: str, etcd_endpoint: str, folder) -> dict:
    fleet = h.start_fleet(folder, url, etcd_endpoint, SERVER_ID, 1)
    try:
        server = fleet.first
        api_key, small_key = asyncio.run(create_tenants(server, args.jobs))
        out: dict = {"ready": asyncio.run(h.wait_fleet(fleet, 0))}
        batches = bc.serialized_batches(args.jobs, "load")
        load = asyncio.run(bc.run_batches(fleet.addresses, api_key, batches, LOAD_CLIENTS))
        out["load"] = {key: load[key] for key in ("seconds", "jobs_per_s", "created", "failures")}
        del batches
        asyncio.run(create_small(server, small_key))
        with h.observe(url) as pg:
            if args.analyze:
                pg.execute("ANALYZE jobs")
                pg.execute("ANALYZE job_cursors")
            out["jobs_stored"] = pg.execute(f"{h.OWN_QUERY} SELECT count(*) FROM jobs").fetchone()[0]
        out["load_average"] = h.load_average()
        meter = h.Meter({"server": fleet.pids, **({"postgres": [pg]} if (pg := h.postmaster_pid(url)) else {})})
        out["paging"] = asyncio.run(bc.run_paging(server, api_key, args.page_size, meter, url))
        statements = h.Statements(url)
        statements.reset()
        out["list_small"] = asyncio.run(page_small(server, small_key, args.page_size))
        out["list_small"]["read"] = page_reads(statements)
        if args.state or args.name_prefix:
            out["list_filtered"] = {"state": args.state, "name_prefix": args.name_prefix}
            for name, key in ((h.TENANT, api_key), (SMALL, small_key)):
                statements.reset()
                out["list_filtered"][name] = asyncio.run(page_filtered(server, key, args, meter))
                out["list_filtered"][name]["read"] = page_reads(statements)
        out["exit_code"] = fleet.terminate(30)[0]
        return out
    finally:
        fleet.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300_000, help="the bench tenant's jobs (default 300 000)")
    parser.add_argument("--page-size", type=int, default=bc.PAGE_SIZE, help="jobs a page (default 1 000)")
    parser.add_argument("--analyze", action="store_true", help="ANALYZE jobs and job_cursors before paging")
    parser.add_argument("--state", default="", choices=sorted(STATES), help="list_filtered's state filter")
    parser.add_argument("--name-prefix", default="", help="list_filtered's name prefix filter")
    parser.add_argument("--filtered-calls", type=int, default=SMALL_CALLS,
                        help=f"list_filtered's calls for each tenant (default {SMALL_CALLS})")
    parser.add_argument("--pg", help="a PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--etcd", help="etcd HOST:PORT; default: a throwaway etcd")
    parser.add_argument("--logs", metavar="DIR", help="keep the server's log in DIR")
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.page_size, args.filtered_calls = 3000, 500, min(args.filtered_calls, 10)
    if args.jobs < 1 or not 1 <= args.page_size <= 1000 or args.filtered_calls < 1:
        parser.error("--jobs and --filtered-calls must be positive and --page-size 1 to 1000")
    began = time.perf_counter()
    with h.postgres(args.pg) as url, h.etcd(args.etcd) as etcd_endpoint, \
            h.workdir(args.logs, "tickwheel-bench-paging-") as folder:
        h.reset_data(url)
        out = run(args, url, etcd_endpoint, folder)
        settings = h.server_settings(url)
    report = {
        "benchmark": "paging", "smoke": args.smoke, "analyzed": args.analyze, "server": out,
        "postgres": {**settings, "throwaway": not args.pg},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "total_s": round(time.perf_counter() - began, 1),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
