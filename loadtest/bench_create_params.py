"""Benchmark: the Python a create's statement parameters cost a job, built
and dumped as psycopg sends them, without a database.

For a CreateJob group (``--sizes``' small ones: 14 is what 16 clients make)
and a BatchCreateJobs call (1 000), the tree's own
``jobcreate._job_parameters`` and ``requests.record_jobs_parameters`` (the
columns of a group's one statement, :data:`jobcreate._RECORD_AND_INSERT_JOBS`),
then psycopg's conversion and dump of them on one transformer (as a
cursor's, reused call after call). Jobs shaped as ``bench_create.py``'s.

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_create_params.py [--sizes 14,1000]
        [--repeat 9] [--smoke]

Prints one JSON object, per size: ``calls_per_job`` (Python function
calls, builtins included, counted by cProfile over one pass: a count, the
same on a busy machine) and ``cpu_us_per_job`` (``time.thread_time``, the
best of ``--repeat`` passes). Run it with another tree's ``PYTHONPATH`` to
compare trees.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from datetime import datetime, timezone

from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

import _harness as h
from bench_create import bench_job
from tickwheel.shared.ids import new_job_ids
from tickwheel_server.store import jobcreate, requests
from tickwheel_server.store.jobrecords import NewJobs

SPEC = bench_job("batch").SerializeToString()
JOBS_A_PASS = 20_000
"""Jobs each timed pass creates parameters for (calls of the size)."""


def measure(size: int, repeat: int) -> dict:
    now_us = int(time.time() * 1_000_000)
    batch = NewJobs("bench")
    for n, job_id in enumerate(new_job_ids(datetime.now(timezone.utc), size)):
        batch.add(job_id, f"r-{n:08d}", "batch", SPEC, "UTC", now_us + 10**12, now_us + 10**12 + n, "2025b", 15, ())
    transformer = Transformer()
    calls = max(1, JOBS_A_PASS // size)

    def one() -> None:
        parameters, _ = jobcreate._job_parameters(batch, None, 0, 256, now_us)
        triples = sorted(zip(batch.request_ids, batch.ids, batch.payload_sizes))
        parameters |= requests.record_jobs_parameters("bench", triples, now_us)
        query = PostgresQuery(transformer)
        query.convert(jobcreate._RECORD_AND_INSERT_JOBS, parameters)
        query.dump(parameters)

    one()  # the transformer's dumpers chosen once, as a cursor's
    profile = cProfile.Profile()
    profile.runcall(one)
    counted = pstats.Stats(profile).total_calls
    best = float("inf")
    for _ in range(repeat):
        began = time.thread_time()
        for _ in range(calls):
            one()
        best = min(best, time.thread_time() - began)
    return {"calls_per_job": round(counted / size, 2), "cpu_us_per_job": round(best * 1e6 / (calls * size), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="14,1000", help="jobs a call, comma-separated")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeat = 1
    sizes = [int(size) for size in args.sizes.split(",")]
    if min(sizes) < 1 or args.repeat < 1:
        parser.error("--sizes and --repeat must be positive")
    load = [h.load_average()]
    by_size = {str(size): measure(size, args.repeat) for size in sizes}
    load.append(h.load_average())
    print(json.dumps({"benchmark": "create_params", "smoke": args.smoke, "repeat": args.repeat, "by_size": by_size,
                      "load_average": load}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
