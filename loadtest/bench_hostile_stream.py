"""Benchmark: what one hostile worker's hello naming many handlers costs
everyone else's runs on its server (red team, session 21).

    .venv/bin/python loadtest/bench_hostile_stream.py [--handlers 0,400000] [--jobs 300] [--smoke]

Prints one JSON line per ``--handlers`` count, as each ends. Per count, a fresh in-process
server on SQLite (``tests/support/server.running_server``); a victim
tenant's worker (one handler, 50 slots); then, unless the count is 0, a
hostile tenant's stream saying hello with that many handler names (as many
as one 4 MiB message holds, at 400 000) and heartbeating. The victim then
creates ``--jobs`` one-off jobs due together 10 s later and the figures are
taken from their due instant until its worker has run them all (or
``--wait`` seconds passed: ``ran`` says how many ran, the wall time is then
null): wall time and this process's CPU (server, victim worker and the idle hostile client). Whether
the server took the hostile hello is printed (``hostile_accepted``): since
this session it refuses more than 1 000 names. ``--smoke`` runs tiny counts
so CI keeps the script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.server import running_server  # noqa: E402
from tests.support.workers import running_worker  # noqa: E402
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc  # noqa: E402
from tickwheel_worker import HandlerRegistry  # noqa: E402


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


async def hostile_stream(channel, credential: str, handlers: int, stop: asyncio.Event) -> tuple[bool, list]:
    """Hello with ``handlers`` names, then heartbeats until ``stop``: (welcomed, the tasks keeping it up)."""
    call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
    names = [f"h{n:07d}" for n in range(handlers)]
    await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="greedy", handlers=names, slots=1)))
    try:
        first = await asyncio.wait_for(call.read(), 30)
    except grpc.aio.AioRpcError:
        return False, []
    if first is grpc.aio.EOF or first.WhichOneof("message") != "welcome":
        return False, []

    async def beat() -> None:
        while not stop.is_set():
            await call.write(worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat()))
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except TimeoutError:
                pass

    async def drain() -> None:
        while await call.read() is not grpc.aio.EOF:
            pass

    return True, [asyncio.create_task(beat()), asyncio.create_task(drain())]


async def one(handlers: int, jobs: int, wait: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{os.path.join(tmp, 'bench.db')}"
        async with running_server(store) as server:
            await server.create_tenant("acme")
            globex = await server.create_tenant("globex")
            hostile = await server.issue_worker_credential(["acme"])
            victim = await server.issue_worker_credential(["globex"])
            ran = 0
            done = asyncio.Event()
            registry = HandlerRegistry()

            @registry.handler("quick")
            async def quick(ctx) -> str:
                nonlocal ran
                ran += 1
                if ran == jobs:
                    done.set()
                return "ok"

            stop = asyncio.Event()
            async with (
                grpc.aio.insecure_channel(server.address) as channel,
                grpc.aio.insecure_channel(server.address, options=[("grpc.max_send_message_length", 8 << 20)])
                as hostile_channel,
                running_worker(server.address, victim, registry, worker_id="victim", http=False, slots=50),
            ):
                accepted, tasks = await hostile_stream(hostile_channel, hostile, handlers, stop) if handlers else (False, [])
                scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
                due = datetime.now(timezone.utc) + timedelta(seconds=10)
                for n in range(jobs):
                    job = job_pb2.Job(name=f"v{n}", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="quick")))
                    job.schedule.once_at.FromDatetime(due)
                    await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"v{n}"),
                                              metadata=bearer(globex))
                created_in_time = datetime.now(timezone.utc) < due and ran == 0
                await asyncio.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()))
                wall0, cpu0 = time.perf_counter(), time.process_time()
                try:
                    await asyncio.wait_for(done.wait(), wait)
                except TimeoutError:
                    pass
                wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                stop.set()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "hostile_handlers": handlers,
        "hostile_accepted": accepted,
        "jobs": jobs,
        "created_before_due": created_in_time,
        "ran": ran,
        "wall_s_from_due_to_last_run": round(wall, 3) if ran == jobs else None,
        "process_cpu_s": round(cpu, 3),
        "cpu_ms_per_job": round(cpu * 1000 / jobs, 3),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--handlers", default="0,400000")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--wait", type=float, default=120.0, help="seconds from the due instant before giving up")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.handlers.split(",")]
    jobs = args.jobs
    if args.smoke:
        counts, jobs = [0, 2000], 5
    for n in counts:
        run = await one(n, jobs, args.wait)
        print(json.dumps({"bench": "hostile_stream", "loadavg": Path("/proc/loadavg").read_text().split()[:3], **run}),
              flush=True)


if __name__ == "__main__":
    asyncio.run(main())
