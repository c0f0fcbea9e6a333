"""Benchmark: one UpdateCalendar's transaction on PostgreSQL, by how many
jobs name the calendar (each with one created run it decides again).

    .venv/bin/python loadtest/bench_calendar_update.py [--jobs 1000 10000] [--postgres URL]

Prints one JSON object: per job count, the transaction's statements (sent
by the engine, its retries included), rows it rewrote (runs moved), wall
and process CPU seconds (``CalendarStore.update_with_runs``: the store's
thread, in process). Every job is a weekly Saturday job naming ``uk``
(rule ``next``) with its created run moved to Tuesday by Easter Monday;
the change adds Tuesday as a holiday, so every run moves again, to
Wednesday: the most a change can rewrite per run. A throwaway PostgreSQL
without ``--postgres``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from datetime import timedelta


from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import execution_id, to_us
from tickwheel.v1 import calendar_pb2, job_pb2
from tickwheel_server.api.calendars import definition_of, normalise_calendar
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.calendars import CalendarStore
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

import _harness as h
from tests.conformance.test_calendar_claims import SATURDAY, TUESDAY, uk_calendar, weekly_job
from tests.support.jobrows import insert_jobs
from tests.support.plans import captured


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(url: str, count: int) -> dict:
    engine = create_store_engine(url)
    clock = FakeClock(SATURDAY - timedelta(days=2))
    try:
        migrate(engine)
        with engine.begin() as conn:
            conn.exec_driver_sql("TRUNCATE executions, job_cursors, jobs, calendars, request_ids, tenants CASCADE")
        await TenantStore(engine, clock).create(Tenant(name="acme", max_jobs=max(count, 1)))
        store = CalendarStore(engine, clock)
        stored, _ = await store.create("acme", "uk", definition_of(uk_calendar()), "cal-1")
        spec = weekly_job(job_pb2.CALENDAR_RULE_NEXT).SerializeToString()
        now_us = to_us(clock.now())
        ids = [f"job_{i:08d}" for i in range(count)]
        with engine.begin() as conn:
            for start in range(0, count, 5000):
                part = ids[start:start + 5000]
                insert_jobs(conn, [dict(
                    id=ident, tenant="acme", partition=0, name="weekly", state="active", spec=spec,
                    time_zone="Europe/London", next_run_at=to_us(SATURDAY + timedelta(days=7)), next_due_at=None,
                    run_count=1, tzdata_version="x", pause_reason="", paused_at=None, version=1, created_at=now_us,
                    updated_at=now_us, calendar="uk") for ident in part])  # fmt: skip
                conn.execute(executions.insert(), [dict(
                    id=execution_id(ident, SATURDAY), job_id=ident, tenant="acme", partition=0, origin="scheduled",
                    nominal_at=to_us(SATURDAY), due_at=to_us(TUESDAY), ready_at=to_us(TUESDAY), attempt=1, delivery=0,
                    status="scheduled", handler="echo", missed_count=1, reap_count=0, payload=b"", error="",
                    dead_reason="", created_at=now_us) for ident in part])  # fmt: skip
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
        changed = normalise_calendar(calendar_pb2.Calendar(
            name="uk", time_zone="Europe/London", holidays=["2027-03-26", "2027-03-29", "2027-03-30"]))
        with captured(engine) as sent:
            began, cpu = time.perf_counter(), _cpu()
            _, report = await store.update_with_runs("acme", "uk", stored.version, definition_of(changed))
            wall, cpu = time.perf_counter() - began, _cpu() - cpu
        return {"jobs": count, "changed": report.changed_count, "statements": len(sent),
                "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
    finally:
        engine.dispose()


async def run(args: argparse.Namespace) -> dict:
    with h.postgres(args.postgres) as url:
        return {"load": h.load_average(),
                "runs": [await measure(url, count) for count in args.jobs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--postgres", default=None)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=1))


if __name__ == "__main__":
    main()
