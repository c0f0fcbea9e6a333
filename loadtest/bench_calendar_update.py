"""Benchmark: one UpdateCalendar's store work on PostgreSQL, by how many
jobs name the calendar (each with one created run it decides again).

    .venv/bin/python loadtest/bench_calendar_update.py [--jobs 1000 10000] [--postgres URL]

Prints one JSON object: per job count, the statements sent (by the engine,
retries included), runs changed, wall and process CPU seconds of the whole
call (``CalendarStore.update_with_runs``: the store's thread, in process),
and its transactions: how many, and the longest's statements, wall seconds
and executions rows written (the one transaction before the walk was
paged; the definition's and a page's each after). Every job is a weekly Saturday job naming ``uk``
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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import event


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


@contextmanager
def transactions(engine) -> Iterator[list[dict]]:
    """Each transaction ``engine`` commits or rolls back while the block
    runs: its statements, wall seconds (first statement to its end) and
    executions rows written."""
    done: list[dict] = []
    open_: dict[int, dict] = {}

    def executed(conn, cursor, statement, parameters, context, executemany) -> None:
        tx = open_.setdefault(id(conn), {"statements": 0, "wall_s": time.perf_counter(), "rows_written": 0})
        tx["statements"] += 1
        if statement.lstrip().upper().startswith("UPDATE EXECUTIONS") and cursor.rowcount > 0:
            tx["rows_written"] += cursor.rowcount

    def ended(conn) -> None:
        tx = open_.pop(id(conn), None)
        if tx is not None:
            done.append({**tx, "wall_s": time.perf_counter() - tx["wall_s"]})

    listeners = [("after_cursor_execute", executed), ("commit", ended), ("rollback", ended)]
    for name, fn in listeners:
        event.listen(engine, name, fn)
    try:
        yield done
    finally:
        for name, fn in listeners:
            event.remove(engine, name, fn)


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
        with captured(engine) as sent, transactions(engine) as done:
            began, cpu = time.perf_counter(), _cpu()
            _, report = await store.update_with_runs("acme", "uk", stored.version, definition_of(changed))
            wall, cpu = time.perf_counter() - began, _cpu() - cpu
        longest = max(done, key=lambda tx: tx["wall_s"])
        return {"jobs": count, "changed": report.changed_count, "statements": len(sent),
                "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "transactions": len(done),
                "longest_tx": {**longest, "wall_s": round(longest["wall_s"], 3)},
                "most_rows_in_a_tx": max(tx["rows_written"] for tx in done)}
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
