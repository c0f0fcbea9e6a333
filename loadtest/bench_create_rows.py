"""Benchmark: PostgreSQL's CPU a created job, by what the create writes.

Writes BatchCreateJobs calls of 1 000 jobs (``--batch``) the way the store does (the
tree's own ``requests.record_jobs`` and ``jobcreate._insert_jobs``: the
request ids' insert in its savepoint, and the jobs' with their cursors; the
quota's update left out) on a throwaway PostgreSQL, migrated,
``--calls`` times a variant, each call in its own transaction at READ
COMMITTED, and reads the backend's CPU (``/proc/<pid>/stat``) and this
thread's (``time.thread_time``: the store's Python and psycopg) around
them. Variants: ``as_is``; each index those rows go into dropped in turn
(``no_<index>``): what that index costs a job; ``distinct_names`` (each
job its own name: ``bench_create.py``'s jobs of a phase share one, so
``jobs_tenant_name`` holds runs of equal keys); ``no_request_ids`` (the
jobs' statement alone), ``request_ids_only``, and ``create_jobs`` (the
whole transaction body, the quota slot's take included: its round trips
show in ``wall_us_per_job``), and ``create_jobs_split``: the same with a
group's one statement split in two as on CockroachDB (the request ids',
then the quota and the jobs': the statements before "a CreateJob group in
one statement", loadtest/RESULTS.md). Each variant in a fresh
database from the migrated one; rounds alternate the variants' order
(``--rounds``) and the best round counts. The backend's CPU is read in
clock ticks (10 ms): 60 calls resolve about 0.2 µs a job.

    .venv/bin/python loadtest/bench_create_rows.py [--calls 40] [--rounds 3] [--variants as_is,…] [--batch 1000]
                                                   [--smoke]

Run it with another tree's ``PYTHONPATH`` to compare trees: the
statements, their parameters and their Python are that tree's.

Prints one JSON object: PostgreSQL's CPU microseconds a job by variant,
the difference to ``as_is``, and the Python's microseconds a job.
"""

from __future__ import annotations

import argparse
import dataclasses
import asyncio
import json
import os
import time

from datetime import datetime, timezone

import psycopg
from sqlalchemy.engine import make_url

import _harness as h
from bench_create import bench_job
from tickwheel.shared.clock import SystemClock
from tickwheel.shared.ids import new_job_ids
from tickwheel_server.store import create_store_engine, jobcreate, migrate, requests
from tickwheel_server.store.engine import capabilities
from tickwheel_server.store.jobrecords import NewJobs
from tickwheel_server.store.tenants import Tenant, TenantStore

BATCH = 1000
TENANT = "bench"
INDEXES = ("jobs_tenant", "jobs_tenant_name", "jobs_active_zone", "job_cursors_due", "request_ids_created")
SPEC = bench_job("batch").SerializeToString()
"""bench_create.py's job, as stored (its size is what matters here)."""


def backend_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_variant(url: str, variant: str, calls: int, start: int, size: int = BATCH) -> tuple[float, float, float]:
    """(PostgreSQL's CPU, this thread's CPU, the wall) microseconds a job
    over ``calls`` calls of ``variant`` (``size`` jobs each), each through the tree's own
    ``requests.record_jobs`` and ``jobcreate._insert_jobs``, or for
    ``create_jobs`` the whole transaction body (the quota's slot 0
    included, dealt when dry)."""
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")
            for index in INDEXES:
                if variant == f"no_{index}":
                    conn.exec_driver_sql(f"DROP INDEX {index}")
            conn.exec_driver_sql("CHECKPOINT")
            conn.commit()
            caps = capabilities(conn)
            split = dataclasses.replace(caps, is_postgres=False)  # create_jobs_split: as on CockroachDB
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            conn.commit()
            now_us = int(time.time() * 1_000_000)
            cpu = python = wall = 0.0
            for call in range(calls):
                n = start + call * size
                batch = NewJobs(TENANT)
                for job_id in new_job_ids(datetime.now(timezone.utc), size):
                    n += 1
                    batch.add(job_id, f"r-{n}", f"job-{n}" if variant == "distinct_names" else "batch", SPEC, "UTC",
                              now_us + 10**12, now_us + 10**12 + n % 1000, "2025b", 15, ())  # fmt: skip
                before, thread, began = backend_cpu_s(pid), time.thread_time(), time.perf_counter()
                with conn.begin():
                    if variant in ("create_jobs", "create_jobs_split"):
                        outcomes = jobcreate.create_jobs(conn, caps if variant == "create_jobs" else split, batch,
                                                         slot=0, partition_count=256, now_us=now_us)  # fmt: skip
                        assert outcomes == [jobcreate.CREATED] * size
                    else:
                        if variant != "no_request_ids":
                            requests.record_jobs(conn, TENANT, batch.request_ids, batch.ids, batch.payload_sizes,
                                                 now_us)  # fmt: skip
                        if variant != "request_ids_only":
                            jobcreate._insert_jobs(conn, caps, batch, None, 0, 256, now_us)
                wall += time.perf_counter() - began
                cpu += backend_cpu_s(pid) - before
                python += time.thread_time() - thread
            jobs = calls * size
            return cpu * 1_000_000 / jobs, python * 1_000_000 / jobs, wall * 1_000_000 / jobs
    finally:
        engine.dispose()


def conninfo(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="", help="comma-separated variants (default: every one)")
    parser.add_argument("--batch", type=int, default=BATCH,
                        help="jobs a call (default 1 000; 12: a CreateJob group of bench_create's 16 clients)")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.calls, args.rounds = 2, 1
    variants = ["as_is", *(f"no_{index}" for index in INDEXES), "distinct_names", "no_request_ids",
                "request_ids_only", "create_jobs", "create_jobs_split"]  # fmt: skip
    if args.variants:
        variants = [v for v in variants if v in args.variants.split(",")]
        if "as_is" not in variants:
            variants.insert(0, "as_is")
    best: dict[str, float] = {}
    best_python: dict[str, float] = {}
    best_wall: dict[str, float] = {}
    load = [h.load_average()]
    with h.postgres(None) as url:
        engine = create_store_engine(url)
        migrate(engine)
        asyncio.run(TenantStore(engine, SystemClock()).create(Tenant(name=TENANT, max_jobs=100_000_000)))
        engine.dispose()
        template = make_url(url).database
        fresh = 0
        with psycopg.connect(conninfo(url, "postgres"), autocommit=True) as admin:
            for round_ in range(args.rounds):
                for variant in variants if round_ % 2 == 0 else list(reversed(variants)):
                    fresh += 1
                    name = f"rows_{fresh}"
                    admin.execute(f'CREATE DATABASE {name} TEMPLATE "{template}"')
                    value, python, wall = run_variant(make_url(url).set(database=name).render_as_string(hide_password=False),
                                                variant, args.calls,
                                                round_ * 10**7, args.batch)  # fmt: skip
                    admin.execute(f"DROP DATABASE {name}")
                    best[variant] = min(best.get(variant, value), value)
                    best_python[variant] = min(best_python.get(variant, python), python)
                    best_wall[variant] = min(best_wall.get(variant, wall), wall)
        load.append(h.load_average())
    base = best["as_is"]
    print(json.dumps({
        "benchmark": "bench_create_rows", "smoke": args.smoke, "calls": args.calls, "batch": args.batch, "rounds": args.rounds,
        "postgres_cpu_us_per_job": {k: round(v, 2) for k, v in best.items()},
        "minus_as_is": {k: round(v - base, 2) for k, v in best.items() if k != "as_is"},
        "python_cpu_us_per_job": {k: round(v, 2) for k, v in best_python.items()},
        "wall_us_per_job": {k: round(v, 2) for k, v in best_wall.items()},
        "load_average": load,
    }, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
