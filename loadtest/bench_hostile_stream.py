"""Benchmark: what one hostile worker's hello naming many handlers, or its
many idle streams, cost everyone else's runs on its server (red team,
sessions 21 and 22).

    .venv/bin/python loadtest/bench_hostile_stream.py [--handlers 0,400000] [--jobs 300] [--smoke]
    .venv/bin/python loadtest/bench_hostile_stream.py --streams 0,1000,2000 [--jobs 100]

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
session 21 it refuses more than 1 000 names. ``--smoke`` runs tiny counts
so CI keeps the script working; its figures mean nothing.

``--streams``: instead of the hello, one hostile credential opens that many
Pull streams (one handler, one slot each), from a client process of its
own (one connection per ``transport.MAX_STREAMS_PER_CONNECTION`` streams:
past it a connection's calls wait) so that this process's CPU is the server's and the victim worker's,
each heartbeating every 2 s (``--stream-beat``) and reading what it is
sent. Printed per count: the streams welcomed and refused (since session
22 a server takes at most ``max_streams_per_credential`` of one
credential), what the welcomed ones cost the server idle (its RSS and its
asyncio tasks, compared with before they opened; its CPU a second over
``--idle`` seconds), the CPU of one hand-out round with nothing due
(``hand_out_round``, the mean of 20), then the victim's runs as above.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
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
from tickwheel_server import transport  # noqa: E402
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


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def idle_streams(address: str, credential: str, count: int, beat: float) -> None:
    """The client process: open ``count`` streams of ``credential``, print
    how many were welcomed and refused, then heartbeat them until stdin closes."""
    welcomed = refused = 0
    refusal = ""
    calls = []
    per_connection = transport.MAX_STREAMS_PER_CONNECTION  # calls past it would wait on their connection
    async with contextlib.AsyncExitStack() as channels:
        stubs = [  # a channel of its own each (its own subchannel pool: its own connection)
            worker_pb2_grpc.WorkerServiceStub(await channels.enter_async_context(
                grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])))
            for _ in range(-(-count // per_connection))
        ]  # fmt: skip

        async def open_one(n: int) -> None:
            nonlocal welcomed, refused, refusal
            call = stubs[n // per_connection].Pull(metadata=bearer(credential))
            await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
                worker_id=f"idle{n}", handlers=["idle"], slots=1)))
            try:
                first = await asyncio.wait_for(call.read(), 60)
            except (grpc.aio.AioRpcError, TimeoutError) as error:
                refused += 1
                refusal = refusal or (error.details() if isinstance(error, grpc.aio.AioRpcError) else "timeout")
                return
            if first is grpc.aio.EOF or first.WhichOneof("message") != "welcome":
                refused += 1
                return
            welcomed += 1
            calls.append(call)

        for start in range(0, count, 100):  # a hundred hellos at a time, as a reconnect wave would
            await asyncio.gather(*(open_one(n) for n in range(start, min(count, start + 100))))

        async def keep(call) -> None:
            async def drain() -> None:
                while await call.read() is not grpc.aio.EOF:
                    pass
            reader = asyncio.create_task(drain())
            try:
                while not reader.done():
                    await call.write(worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat()))
                    await asyncio.sleep(beat)
            except grpc.aio.AioRpcError:
                pass
            finally:
                reader.cancel()

        keepers = [asyncio.create_task(keep(call)) for call in calls]
        print(json.dumps({"welcomed": welcomed, "refused": refused, "refusal": refusal[:300]}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes it
        for task in keepers:
            task.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)


async def round_cpu(server, rounds: int = 20) -> float:
    """Mean process CPU of one hand-out round run now (nothing is due)."""
    gateway = server.server.gateway
    cpu0 = time.process_time()
    for _ in range(rounds):
        await gateway.rounds.hand_out_round()
    return (time.process_time() - cpu0) / rounds


async def open_idle(server, credential: str, streams: int, beat: float, idle: float):
    """Start the client process of ``streams`` idle streams and measure what they cost the server idle."""
    gc.collect()
    await asyncio.sleep(1.0)
    before = {"rss": rss_bytes(), "tasks": len(asyncio.all_tasks()), "round": await round_cpu(server)}
    client = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", server.address, credential, str(streams), str(beat),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )
    assert client.stdout is not None
    opened = json.loads(await client.stdout.readline())
    gc.collect()
    await asyncio.sleep(1.0)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.sleep(idle)
    idle_cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    after = {"rss": rss_bytes(), "tasks": len(asyncio.all_tasks()), "round": await round_cpu(server)}
    welcomed = opened["welcomed"]
    figures = {
        "streams_welcomed": welcomed,
        "streams_refused": opened["refused"],
        "refusal": opened["refusal"],
        "server_rss_mb_before": round(before["rss"] / 2**20, 1),
        "server_rss_mb_with_streams": round(after["rss"] / 2**20, 1),
        "rss_kb_per_stream": round((after["rss"] - before["rss"]) / 1024 / welcomed, 1) if welcomed else None,
        "tasks_per_stream": round((after["tasks"] - before["tasks"]) / welcomed, 2) if welcomed else None,
        "idle_cpu_s_per_s": round(idle_cpu, 4),
        "round_cpu_ms_before": round(before["round"] * 1000, 3),
        "round_cpu_ms_with_streams": round(after["round"] * 1000, 3),
    }
    return client, figures


async def one(handlers: int, jobs: int, wait: float, streams: int = 0, beat: float = 2.0,
              idle: float = 10.0) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{os.path.join(tmp, 'bench.db')}"
        async with running_server(store) as server:
            await server.create_tenant("acme")
            globex = await server.create_tenant("globex")
            hostile = await server.issue_worker_credential(["acme"])
            client, idle_figures = (await open_idle(server, hostile, streams, beat, idle)) if streams else (None, {})
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
                if client is not None:
                    assert client.stdin is not None
                    client.stdin.close()
                    await client.wait()
    return {
        "hostile_handlers": handlers,
        "hostile_streams": streams,
        **idle_figures,
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
    parser.add_argument("--streams", default="", help="idle streams of one credential (a list), instead of --handlers")
    parser.add_argument("--stream-beat", type=float, default=2.0, help="seconds between an idle stream's heartbeats")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds the idle streams' CPU is measured over")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    jobs = args.jobs
    runs = [(0, int(n)) for n in args.streams.split(",")] if args.streams else \
        [(int(n), 0) for n in args.handlers.split(",")]
    if args.smoke:
        runs, jobs = [(0, 0), (2000, 0), (0, 20)], 5
    for handlers, streams in runs:
        run = await one(handlers, jobs, args.wait, streams, args.stream_beat, 1.0 if args.smoke else args.idle)
        print(json.dumps({"bench": "hostile_stream", "loadavg": Path("/proc/loadavg").read_text().split()[:3], **run}),
              flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client"]:
        address, credential, count, beat = sys.argv[2:6]
        asyncio.run(idle_streams(address, credential, int(count), float(beat)))
    else:
        asyncio.run(main())
