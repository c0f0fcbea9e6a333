"""Benchmark: what one tenant's schedule work costs a server, and its
neighbour. A real ``tickwheel server`` process on the embedded stores (SQLite,
in-memory leases); tenant ``flood`` (the default rate, 100 requests a second)
sends calls that each make the server compute many schedule fires, as fast
as ``--concurrency`` clients can, for ``--seconds``; tenant ``quiet`` meanwhile
calls GetJob one call at a time.

    .venv/bin/python loadtest/bench_schedule_work.py [--rpc backfill|preview|diff|resume|calendar|holidays]
                                                     [--seconds 5]
                                                     [--concurrency 8] [--pace] [--keep DIR] [--smoke]
                                                     [--jobs 1000] [--batch 20] [--paused-days 7]

The calls (on one every-minute job of ``flood``):

- ``backfill``: BackfillJob over the last 30 days: more than the 10 000
  occurrences one call may take, so each call the server computes is refused
  INVALID_ARGUMENT ``to_at`` after counting 10 001 fires;
- ``preview``: PreviewSchedule of 1000 fires;
- ``diff``: UpdateJob ``validate_only`` with a 7-day ``diff_window`` (the
  runs of both sides: 2 x 10 080 fires).
- ``resume``: BatchResumeJobs of ``--batch`` jobs at a time, from ``--jobs``
  every-minute jobs of ``flood`` paused ``--paused-days`` ago (paused
  through the API, their cursors then set back in the SQLite store): each
  job's resume counts its paused span, 10 080 fires for 7 days, set by how
  long it was paused, not by the request. The clients share the pool of
  paused jobs; an item refused (RESOURCE_EXHAUSTED, alone or with its
  call) goes back to the pool, after its retry delay with ``--pace``, as
  ``tickwheel job resume --file`` sends it again. The flood ends at
  ``--seconds`` or when every job is resumed. ``resume`` in the answer
  gives the jobs resumed and the span fires they counted (their
  ``skipped.count``), and the items refused.
- ``calendar``: UpdateCalendar of one calendar that ``--jobs``
  every-minute jobs of ``flood`` name (rule ``next``), a holiday added and
  taken away in turn: each change decides again every one of those jobs'
  cursors and created runs, work set by how many jobs name the calendar,
  not by the request. The clients share the calendar: one that finds its
  version stale (FAILED_PRECONDITION) reads it again. ``calendar`` in the answer gives
  the changes made, the jobs they walked (``job_count``) and the runs they
  changed.
- ``holidays``: GetJob (its one next run) of a one-off job of ``flood``
  due next Tuesday on a Monday-only calendar (rule ``next``) whose next
  9 000 Mondays are holidays: deciding that one run looks for the first
  business day, 170 years ahead. One request, one fire; the work is set by
  the calendar the tenant stored.

Without ``--pace`` a flood client calls again as soon as it is answered,
refused or not (so the server's CPU includes what refusing costs); with
it, a client refused RESOURCE_EXHAUSTED waits the answer's retry delay
(RetryInfo; 0.1 s without one) first, as a client that heeds it would.

Prints one JSON object: the calls by status; the server process's CPU
(``/proc``, its process tree) over the flood, in CPU-seconds a wall second
and a call (all of them, and per call that did the work, i.e. was not
refused RESOURCE_EXHAUSTED on the way in); the quiet tenant's GetJob
latencies (p50, p99, max, ms) and calls; ``/proc/loadavg`` before and after
(the machine is shared). Run it on a branch and on the code before it to
compare. ``--smoke`` runs one second at concurrency 2 so CI keeps the
script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, calendar_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

import _harness as h
from tests.support.server import start_server_process, stop_process


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


def retry_delay(error: grpc.aio.AioRpcError) -> float:
    """The RetryInfo delay of ``error`` in seconds, 0.1 without one."""
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return info.retry_delay.ToTimedelta().total_seconds()
    return 0.1


def every_minute(name: str) -> job_pb2.Job:
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    job.schedule.cron.expression = "* * * * *"
    job.schedule.cron.time_zone = "UTC"
    return job


def request(rpc: str, job: job_pb2.Job):
    """(method name, request) of one flood call."""
    now = datetime.now(timezone.utc)
    if rpc == "backfill":
        start, end = timestamp_pb2.Timestamp(), timestamp_pb2.Timestamp()
        start.FromDatetime(now - timedelta(days=30))
        end.FromDatetime(now)
        return "BackfillJob", scheduler_pb2.BackfillJobRequest(id=job.id, from_at=start, to_at=end)
    if rpc == "preview":
        return "PreviewSchedule", scheduler_pb2.PreviewScheduleRequest(job_id=job.id, count=1000)
    return "UpdateJob", scheduler_pb2.UpdateJobRequest(
        job=job_pb2.Job(id=job.id, version=job.version, name="renamed"),
        update_mask=field_mask_pb2.FieldMask(paths=["name"]), validate_only=True,
        diff_window=duration_pb2.Duration(seconds=7 * 86400),
    )


EVERY_DAY = [1, 2, 3, 4, 5, 6, 7]


def calendar_change(version: int) -> calendar_pb2.UpdateCalendarRequest:
    """A change of calendar ``desk`` at ``version``: a holiday a year ahead on every other version."""
    holidays = [f"{datetime.now(timezone.utc).year + 1}-01-02"] if version % 2 else []
    return calendar_pb2.UpdateCalendarRequest(calendar=calendar_pb2.Calendar(
        name="desk", version=version, time_zone="UTC", business_days=EVERY_DAY, holidays=holidays))


async def calendar_jobs(scheduler, key: str, args: argparse.Namespace) -> int:
    """Calendar ``desk`` and ``--jobs`` every-minute jobs naming it; its version."""
    made = await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
        calendar=calendar_pb2.Calendar(name="desk", time_zone="UTC", business_days=EVERY_DAY), request_id="desk",
    ), metadata=bearer(key))  # fmt: skip
    for start in range(0, args.jobs, 1000):
        jobs = [every_minute(f"desk-{n}") for n in range(start, min(args.jobs, start + 1000))]
        for job in jobs:
            job.calendar.name, job.calendar.rule = "desk", job_pb2.CALENDAR_RULE_NEXT
        await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=[
            scheduler_pb2.CreateJobRequest(job=job, request_id=job.name) for job in jobs
        ]), metadata=bearer(key))  # fmt: skip
    return made.calendar.version


async def calendar_flood(scheduler, key: str, state: dict[str, int], args: argparse.Namespace, until: float,
                         codes: dict[str, int]) -> None:
    """One client: UpdateCalendar of ``desk`` until ``until``; a stale version read again."""
    while time.monotonic() < until:
        try:
            reply = await scheduler.UpdateCalendar(calendar_change(state["version"]), metadata=bearer(key))
        except grpc.aio.AioRpcError as error:
            codes[error.code().name] = codes.get(error.code().name, 0) + 1
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION:  # a stale version: read it again
                with contextlib.suppress(grpc.aio.AioRpcError):
                    found = await scheduler.GetCalendar(calendar_pb2.GetCalendarRequest(name="desk"),
                                                        metadata=bearer(key))  # fmt: skip
                    state["version"] = max(state["version"], found.calendar.version)
            elif args.pace and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                await asyncio.sleep(retry_delay(error))
            continue
        codes["OK"] = codes.get("OK", 0) + 1
        state["version"] = max(state["version"], reply.calendar.version)
        state["changes"] += 1
        state["jobs_walked"] += reply.job_count
        state["runs_changed"] += reply.changed_run_count


async def holiday_job(scheduler, key: str) -> job_pb2.Job:
    """Calendar ``closed`` (Mondays only, the next 9 000 of them holidays)
    and a one-off job next Tuesday at 09:00 UTC naming it (rule ``next``)."""
    today = datetime.now(timezone.utc).date()
    tuesday = today + timedelta(days=(1 - today.weekday()) % 7 or 7)
    mondays = [(tuesday + timedelta(days=6, weeks=n)).isoformat() for n in range(9000)]
    await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
        calendar=calendar_pb2.Calendar(name="closed", time_zone="UTC", business_days=[1], holidays=mondays),
        request_id="closed",
    ), metadata=bearer(key))  # fmt: skip
    job = job_pb2.Job(name="closed", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
                      calendar=job_pb2.JobCalendar(name="closed", rule=job_pb2.CALENDAR_RULE_NEXT))
    job.schedule.once_at.FromDatetime(datetime.combine(tuesday, datetime.min.time(), timezone.utc) + timedelta(hours=9))
    return (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="closed"),
                                      metadata=bearer(key))).job  # fmt: skip


def set_back(store: Path, tenant: str, days: float) -> int:
    """Move ``tenant``'s paused jobs' cursors ``days`` back (to a whole
    minute, an occurrence of an every-minute job), as if paused then; how many."""
    at = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(days=days)
    at_us = int(at.timestamp()) * 1_000_000
    with contextlib.closing(sqlite3.connect(store, timeout=60)) as conn, conn:
        return conn.execute(
            "UPDATE job_cursors SET next_run_at = ?, next_due_at = ?, next_nominal_at = NULL "
            "WHERE tenant = ? AND state = 'paused'", (at_us, at_us, tenant),
        ).rowcount


async def paused_pool(scheduler, key: str, args: argparse.Namespace, store: Path) -> list[str]:
    """``--jobs`` jobs of the tenant of ``key``, paused ``--paused-days`` ago: their ids."""
    ids: list[str] = []
    for start in range(0, args.jobs, 1000):
        created = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=[
            scheduler_pb2.CreateJobRequest(job=every_minute(f"paused-{n}"), request_id=f"paused-{n}")
            for n in range(start, min(args.jobs, start + 1000))
        ]), metadata=bearer(key))  # fmt: skip
        batch = [result.job.job.id for result in created.results]
        await scheduler.BatchPauseJobs(scheduler_pb2.BatchPauseJobsRequest(
            items=[scheduler_pb2.PauseJobRequest(id=job_id) for job_id in batch]
        ), metadata=bearer(key))  # fmt: skip
        ids.extend(batch)
    moved = set_back(store, "flood", args.paused_days)
    if moved != args.jobs:
        raise SystemExit(f"set back {moved} paused jobs, not {args.jobs}")
    return ids


async def resume_flood(scheduler, key: str, pool: list[str], args: argparse.Namespace, until: float,
                       codes: dict[str, int], resumed: dict[str, int]) -> None:
    """One client: BatchResumeJobs of ``--batch`` ids from ``pool`` until
    ``until`` or the pool is empty; refused items go back to it."""

    async def back(ids: list[str], wait: float) -> None:
        if args.pace and wait > 0:
            await asyncio.sleep(wait)
        pool.extend(ids)

    while time.monotonic() < until:
        if not pool:
            await asyncio.sleep(0.01)
            if not pool and resumed["in_flight"] == 0:
                return
            continue
        ids = [pool.pop() for _ in range(min(args.batch, len(pool)))]
        resumed["in_flight"] += 1
        try:
            await resume_some(scheduler, key, ids, codes, resumed, back)
        finally:
            resumed["in_flight"] -= 1


async def resume_some(scheduler, key: str, ids: list[str], codes: dict[str, int], resumed: dict[str, int],
                      back) -> None:
    """One BatchResumeJobs of ``ids``: what it resumed counted, what it refused given ``back``."""
    try:
        reply = await scheduler.BatchResumeJobs(scheduler_pb2.BatchResumeJobsRequest(
            items=[scheduler_pb2.ResumeJobRequest(id=job_id) for job_id in ids]
        ), metadata=bearer(key))  # fmt: skip
    except grpc.aio.AioRpcError as error:
        codes[error.code().name] = codes.get(error.code().name, 0) + 1
        await back(ids, retry_delay(error) if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else 0.0)
        return
    codes["OK"] = codes.get("OK", 0) + 1
    refused, waits = [], [0.0]
    for job_id, result in zip(ids, reply.results):
        if result.WhichOneof("result") == "job":
            resumed["jobs"] += 1
            resumed["span_fires"] += result.job.skipped.count
        else:
            refused.append(job_id)
            waits.extend(item_delay(result.error))
    resumed["items_refused"] += len(refused)
    if refused:
        await back(refused, max(waits))


def item_delay(status) -> list[float]:
    """The RetryInfo delay of a batch item's error, if it has one."""
    delays = []
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            delays.append(info.retry_delay.ToTimedelta().total_seconds())
    return delays


async def run(args: argparse.Namespace, folder: Path) -> dict:
    server = start_server_process(folder, "--store", f"sqlite:///{folder}/store.db", "--etcd", "memory", "--migrate")
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            keys = {}
            for name in ("flood", "quiet"):
                reply = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=name)),
                                                 metadata=h.admin_metadata(server))  # fmt: skip
                keys[name] = reply.api_key.secret
            flood_job = (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=every_minute("flood"), request_id="flood"),
                                                   metadata=bearer(keys["flood"]))).job  # fmt: skip
            quiet_job = (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=every_minute("quiet"), request_id="quiet"),
                                                   metadata=bearer(keys["quiet"]))).job  # fmt: skip
            pool = await paused_pool(scheduler, keys["flood"], args, folder / "store.db") if args.rpc == "resume" else []
            resumed = {"jobs": 0, "span_fires": 0, "items_refused": 0, "in_flight": 0}
            changed = {"changes": 0, "jobs_walked": 0, "runs_changed": 0}
            if args.rpc == "calendar":
                changed["version"] = await calendar_jobs(scheduler, keys["flood"], args)
            elif args.rpc == "holidays":
                method = "GetJob"
                flood_request = scheduler_pb2.GetJobRequest(id=(await holiday_job(scheduler, keys["flood"])).id)
                call = getattr(scheduler, method)
            elif args.rpc != "resume":
                method, flood_request = request(args.rpc, flood_job)
                call = getattr(scheduler, method)
            codes: dict[str, int] = {}
            latencies: list[float] = []
            await asyncio.sleep(1.0)  # the setup's requests paid back
            until = time.monotonic() + args.seconds

            async def flood() -> None:
                while time.monotonic() < until:
                    try:
                        await call(flood_request, metadata=bearer(keys["flood"]))
                        code = "OK"
                    except grpc.aio.AioRpcError as error:
                        code = error.code().name
                        if args.pace and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                            await asyncio.sleep(retry_delay(error))
                    codes[code] = codes.get(code, 0) + 1

            async def quiet() -> None:
                get = scheduler_pb2.GetJobRequest(id=quiet_job.id)
                while time.monotonic() < until:
                    started = time.monotonic()
                    await scheduler.GetJob(get, metadata=bearer(keys["quiet"]))
                    latencies.append((time.monotonic() - started) * 1000)
                    await asyncio.sleep(0.05)

            load_before = h.load_average()
            cpu_before, wall_before = h.tree_cpu_s(server.process.pid), time.monotonic()
            if args.rpc == "resume":
                floods = [resume_flood(scheduler, keys["flood"], pool, args, until, codes, resumed)
                          for _ in range(args.concurrency)]  # fmt: skip
            elif args.rpc == "calendar":
                floods = [calendar_flood(scheduler, keys["flood"], changed, args, until, codes)
                          for _ in range(args.concurrency)]  # fmt: skip
            else:
                floods = [flood() for _ in range(args.concurrency)]
            await asyncio.gather(quiet(), *floods)
            cpu = h.tree_cpu_s(server.process.pid) - cpu_before
            wall = time.monotonic() - wall_before
    finally:
        stop_process(server.process)
    calls = sum(codes.values())
    worked = calls - codes.get("RESOURCE_EXHAUSTED", 0)
    latencies.sort()
    return {
        "rpc": args.rpc, "seconds": round(wall, 2), "concurrency": args.concurrency, "pace": args.pace,
        "flood_calls": codes,
        "server_cpu_s": round(cpu, 3), "server_cpu_s_per_wall_s": round(cpu / wall, 3),
        "server_cpu_ms_per_call": round(cpu * 1000 / max(1, calls), 2),
        "server_cpu_ms_per_call_that_worked": round(cpu * 1000 / max(1, worked), 2),
        "quiet_get_job": {
            "calls": len(latencies),
            "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
            "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else None,
            "max_ms": round(latencies[-1], 1) if latencies else None,
        },
        "load": {"before": load_before, "after": h.load_average()},
        **({"resume": {k: v for k, v in resumed.items() if k != "in_flight"}} if args.rpc == "resume" else {}),
        **({"calendar": {k: v for k, v in changed.items() if k != "version"}} if args.rpc == "calendar" else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rpc", choices=("backfill", "preview", "diff", "resume", "calendar", "holidays"), default="backfill")
    parser.add_argument("--jobs", type=int, default=1000,
                        help="resume: paused jobs in the pool; calendar: jobs naming the calendar")
    parser.add_argument("--batch", type=int, default=20, help="resume: jobs a BatchResumeJobs call resumes")
    parser.add_argument("--paused-days", type=float, default=7.0, help="resume: how long ago they were paused")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--pace", action="store_true", help="wait a refusal's retry delay before calling again")
    parser.add_argument("--keep", help="keep the server's folder here")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.concurrency, args.jobs = 1.0, 2, min(args.jobs, 20)
    with h.workdir(args.keep, "bench-schedule-work-") as folder:
        print(json.dumps(asyncio.run(run(args, folder)), indent=2))


if __name__ == "__main__":
    sys.exit(main())
