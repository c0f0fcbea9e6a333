"""What the read of executions costs with status filters, on PostgreSQL:
SearchExecutions (all tenants, one tenant) and one job's ListExecutions,
filtered by ``scheduled``, ``running`` or nothing, over a store holding
``--scheduled`` not-started executions, ``--running`` running ones (sent)
and ``--ahead`` started ahead of their send instant (running,
``handed_out_at`` in the future). Since a run started ahead reads as
``scheduled`` until sent, a ``scheduled`` filter also reads the running
group (docs/architecture.md, "Never seen early"): this prints, per read,
the median wall time and the client process's CPU per read, as JSON.

    python loadtest/bench_history_reads.py [--postgres URL] [--reads 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import datetime, timezone

from _harness import postgres

from tickwheel.shared.clock import SystemClock
from tickwheel.shared.ids import to_us
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.operations import OperationsStore
from tickwheel_server.store.tables import executions
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tenants import Tenant, TenantStore

TENANTS = 10


def fill(engine, scheduled: int, running: int, ahead: int) -> None:
    now = to_us(datetime.now(timezone.utc))
    rows, index = [], 0
    with engine.begin() as conn:
        insert_jobs(conn, [dict(
            id=f"job_{n}", tenant=f"t{n % TENANTS}", partition=0, name="j", state="active", spec=b"", time_zone="UTC",
            next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x", pause_reason="", paused_at=None,
            version=1, created_at=0, updated_at=0) for n in range(100)])  # fmt: skip
        for status, count, handed in (("scheduled", scheduled, None), ("running", running, now - 60_000_000),
                                      ("running", ahead, now + 3_600_000_000)):
            for _ in range(count):
                job = index % 100
                nominal = now - index * 1000
                rows.append(dict(
                    id=f"e{index:08d}", job_id=f"job_{job}", tenant=f"t{job % TENANTS}", partition=0, origin="scheduled",
                    nominal_at=nominal, due_at=nominal, ready_at=nominal, attempt=1,
                    delivery=0 if status == "scheduled" else 1, status=status,
                    owner=None if status == "scheduled" else "s1", worker_id=None, handler="echo", missed_count=1,
                    reap_count=0, payload=b"p", error="", dead_reason="", created_at=nominal, finished_at=None,
                    handed_out_at=handed,
                ))  # fmt: skip
                index += 1
                if len(rows) == 5000:
                    conn.execute(executions.insert(), rows)
                    rows = []
        if rows:
            conn.execute(executions.insert(), rows)
    with engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE executions")


async def measure(read, reads: int) -> dict:
    await read()  # warm
    walls = []
    cpu0 = time.process_time()
    for _ in range(reads):
        t0 = time.perf_counter()
        await read()
        walls.append(time.perf_counter() - t0)
    cpu = time.process_time() - cpu0
    return {"p50_ms": round(statistics.median(walls) * 1000, 2), "cpu_ms_per_read": round(cpu / reads * 1000, 2)}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", default="")
    parser.add_argument("--scheduled", type=int, default=100_000)
    parser.add_argument("--running", type=int, default=5_000)
    parser.add_argument("--ahead", type=int, default=2_000)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    with postgres(args.postgres or None) as url:
        engine = create_store_engine(url)
        migrate(engine)
        clock = SystemClock()
        for n in range(TENANTS):
            await TenantStore(engine, clock).create(Tenant(name=f"t{n}"))
        fill(engine, args.scheduled, args.running, args.ahead)
        search, history = OperationsStore(engine, clock), HistoryStore(engine, clock)
        results = {}
        for label, statuses in (("all", ()), ("scheduled", ("scheduled",)), ("running", ("running",))):
            results[f"search_{label}"] = await measure(lambda s=statuses: search.search_executions(statuses=s),
                                                       args.reads)
            results[f"search_tenant_{label}"] = await measure(
                lambda s=statuses: search.search_executions(tenant="t3", statuses=s), args.reads)
            results[f"list_job_{label}"] = await measure(
                lambda s=statuses: history.list_executions("t3", "job_3", statuses=s), args.reads)
        engine.dispose()
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(json.dumps({"bench": "history_reads", "scheduled": args.scheduled, "running": args.running,
                      "ahead": args.ahead, "reads": args.reads, "loadavg": load, "results": results}, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
