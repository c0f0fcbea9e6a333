"""Benchmark: what one tenant's schedule work costs a server, and its
neighbour. A real ``tickwheel server`` process on the embedded stores (SQLite,
in-memory leases); tenant ``flood`` (the default rate, 100 requests a second)
sends calls that each make the server compute many schedule fires, as fast
as ``--concurrency`` clients can, for ``--seconds``; tenant ``quiet`` meanwhile
calls GetJob one call at a time.

    .venv/bin/python loadtest/bench_schedule_work.py [--rpc backfill|preview|diff] [--seconds 5]
                                                     [--concurrency 8] [--pace] [--keep DIR] [--smoke]

The calls (on one every-minute job of ``flood``):

- ``backfill``: BackfillJob over the last 30 days: more than the 10 000
  occurrences one call may take, so each call the server computes is refused
  INVALID_ARGUMENT ``to_at`` after counting 10 001 fires;
- ``preview``: PreviewSchedule of 1000 fires;
- ``diff``: UpdateJob ``validate_only`` with a 7-day ``diff_window`` (the
  runs of both sides: 2 x 10 080 fires).

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
import json
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

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
            method, flood_request = request(args.rpc, flood_job)
            call = getattr(scheduler, method)
            codes: dict[str, int] = {}
            latencies: list[float] = []
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
            await asyncio.gather(quiet(), *(flood() for _ in range(args.concurrency)))
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
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rpc", choices=("backfill", "preview", "diff"), default="backfill")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--pace", action="store_true", help="wait a refusal's retry delay before calling again")
    parser.add_argument("--keep", help="keep the server's folder here")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.concurrency = 1.0, 2
    with h.workdir(args.keep, "bench-schedule-work-") as folder:
        print(json.dumps(asyncio.run(run(args, folder)), indent=2))


if __name__ == "__main__":
    sys.exit(main())
