"""Benchmark: what a day of claims leaves of jobs no worker takes.

    .venv/bin/python loadtest/bench_backlog.py [--pg URL | --sqlite] [--jobs N] [--hours H] [--smoke]

Prints one JSON object. ``--jobs`` minutely jobs (``* * * * *`` in UTC,
exact jitter, a handler no worker serves), created as the API stores them
(``normalise_job``, ``JobStore.create``), are claimed by the real
``DispatchStore.claim_due`` (256 partitions, all owned, look-ahead 60 s)
every 30 s of a fake clock for ``--hours`` hours; nothing hands anything
out. Then, per job: ``not_started_per_job`` (its executions ``scheduled``
or ``waiting``: the rows the store keeps for it), ``skip_ranges_per_job``
and ``skipped_per_job`` (by reason), and ``occurrences_per_job`` (what the
schedule had in the span). ``claim_ms`` is the median wall time of one
claim. Without ``--pg`` a throwaway PostgreSQL is started (as the test
suite's); ``--sqlite`` uses an embedded store in a temporary file.
``--smoke``: 2 jobs, 1 hour.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtest import _harness  # noqa: E402
from tickwheel.shared.clock import FakeClock  # noqa: E402
from tickwheel.shared.ids import new_job_id  # noqa: E402
from tickwheel.v1 import job_pb2  # noqa: E402
from tickwheel_server.api.validate import normalise_job  # noqa: E402
from tickwheel_server.store import create_store_engine  # noqa: E402
from tickwheel_server.store.dispatch import DispatchStore  # noqa: E402
from tickwheel_server.store.jobrecords import NewJob  # noqa: E402
from tickwheel_server.store.jobs import JobStore  # noqa: E402
from tickwheel_server.store.migrate import migrate  # noqa: E402
from tickwheel_server.store.partitions import PartitionStore  # noqa: E402
from tickwheel_server.store.tables import executions, skips  # noqa: E402
from tickwheel_server.store.tenants import Tenant, TenantStore  # noqa: E402

START = datetime(2027, 1, 1, tzinfo=timezone.utc)
PARTITIONS = 256
OWNED = {p: 1 for p in range(PARTITIONS)}
STEP = timedelta(seconds=30)


def spec() -> job_pb2.Job:
    job = job_pb2.Job(
        name="nobody-takes-me",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="* * * * *", time_zone="UTC")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="no-worker-serves-this")),
    )
    job.jitter.exact = True
    return normalise_job(job, START)


async def simulate(url: str, jobs: int, hours: float) -> dict:
    engine = create_store_engine(url)
    migrate(engine)
    clock = FakeClock(START)
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    await PartitionStore(engine, clock).raise_epochs(OWNED, "bench")
    store = JobStore(engine, clock, partition_count=PARTITIONS)
    job = spec()
    first = START + timedelta(minutes=1)
    for _ in range(jobs):
        ident = new_job_id(clock.now())
        await store.create(
            NewJob(id=ident, tenant="acme", name=job.name, spec=job.SerializeToString(), time_zone="UTC",
                   next_run_at=first, next_due_at=first, tzdata_version="2026a", payload_size=0),
            f"req-{ident}",
        )  # fmt: skip
    dispatch = DispatchStore(engine, clock)
    end = START + timedelta(hours=hours)
    timings = []
    while clock.now() < end:
        clock.advance(STEP.total_seconds())
        while True:
            began = time.perf_counter()
            result = await dispatch.claim_due(OWNED, clock.now(), lookahead=timedelta(seconds=60))
            timings.append(time.perf_counter() - began)
            if not result.full:
                break
    with engine.connect() as conn:
        not_started = conn.execute(
            sa.select(sa.func.count()).select_from(executions).where(executions.c.status.in_(("scheduled", "waiting")))
        ).scalar()
        by_reason = {
            reason: (int(ranges), int(total))
            for reason, ranges, total in conn.execute(
                sa.select(skips.c.reason, sa.func.count(), sa.func.sum(skips.c.count)).group_by(skips.c.reason)
            )
        }
    engine.dispose()
    occurrences = int((end + timedelta(seconds=60) - first) / timedelta(minutes=1)) + 1
    return dict(
        jobs=jobs,
        hours=hours,
        claims=len(timings),
        claim_ms=round(statistics.median(timings) * 1000, 2),
        occurrences_per_job=occurrences,
        not_started_per_job=not_started / jobs,
        skip_ranges_per_job={reason: ranges / jobs for reason, (ranges, _) in by_reason.items()},
        skipped_per_job={reason: total / jobs for reason, (_, total) in by_reason.items()},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", help="an empty PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--sqlite", action="store_true", help="an embedded SQLite store in a temporary file")
    parser.add_argument("--jobs", type=int, default=10, help="minutely jobs no worker takes (default 10)")
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours of claims (default 24)")
    parser.add_argument("--smoke", action="store_true", help="2 jobs, 1 hour")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.hours = 2, 1.0
    load = _harness.load_average()
    if args.sqlite:
        with tempfile.TemporaryDirectory() as folder:
            figures = asyncio.run(simulate(f"sqlite:///{folder}/bench.db", args.jobs, args.hours))
        store = "sqlite"
    else:
        with _harness.postgres(args.pg) as url:
            figures = asyncio.run(simulate(url, args.jobs, args.hours))
        store = "postgres"
    print(json.dumps(dict(store=store, load_before=load, load_after=_harness.load_average(), **figures), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
