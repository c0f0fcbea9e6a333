"""Benchmark: the Python worker's CPU per no-op execution.

    .venv/bin/python loadtest/bench_worker.py [--executions 10000] [--burst-slots 2500] [--steady-slots 64]
                                              [--batch 500] [--repeat 3] [--sync] [--smoke]

Prints one JSON object. The real :class:`tickwheel_worker.Worker` (this
process) holds a real gRPC Pull stream to a fake WorkerService running in a
child process (this script with ``--serve``), so the fake server's CPU is not
counted. The fake server welcomes the worker (heartbeat interval 5 s, the
server's default), then, on ``go``, hands out ``--executions`` no-op
assignments (the built-in ``echo`` handler, or a sync echo with ``--sync``)
as fast as the worker's credit allows, in messages of up to ``--batch``
(2 000 per claim shared by 4 workers in ``bench_burst``), each with a
deadline 5 minutes ahead as the server sets it, and acks every result message
at once. Two scenarios:

* ``burst`` - ``--burst-slots`` slots (one of ``bench_burst``'s four workers
  at 10 000 jobs has 2 500), so the worker holds thousands at once;
* ``steady`` - ``--steady-slots`` slots, so credit is the bottleneck and each
  freed slot is re-granted and refilled.

The worker's process sets the collector as ``tickwheel worker`` does
(``tickwheel.shared.heap.tune_collector``), so the figures are the CLI's.
Each run starts a new Worker, waits for its welcome, then measures the
process's CPU time (``time.process_time``: every thread, gRPC's included) and
the wall time from ``go`` until the fake server has every result and the
worker has forgotten every acked one. ``cpu_us_per_execution`` and
``executions_per_s`` are the median over ``--repeat`` runs.

``baseline`` holds figures measured with the code before the worker's
per-execution costs were cut (the old code path is gone, so they are
constants, not measured in this run); ``vs_baseline`` divides this run's CPU
per execution by them. The machine is shared and figures of one run vary by
a third: compare runs taken close together (at a similar ``load_average``).
To measure an older worker with this script, put its package first on the
path::

    mkdir -p /tmp/old && git archive 9d62fa3 workers/tickwheel_worker | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/workers .venv/bin/python loadtest/bench_worker.py --sync

``--smoke`` runs a few hundred executions so CI keeps the script working; its
figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tickwheel.v1 import worker_pb2, worker_pb2_grpc  # noqa: E402
from tickwheel.shared.heap import tune_collector  # noqa: E402
from tickwheel_worker import HandlerRegistry, JobContext, Worker, WorkerConfig, register_builtins  # noqa: E402

BASELINE = {
    "note": "the worker at commit 9d62fa3 (2026-12-03), before its per-execution costs were cut: this script's "
            "defaults with --sync, 3 runs alternating with the new code on this machine, median (range); "
            "not measured in this run",
    "burst": {"cpu_us_per_execution": 120, "cpu_us_range": [119, 139], "executions_per_s": 6632},
    "steady": {"cpu_us_per_execution": 101, "cpu_us_range": [94, 128], "executions_per_s": 7750},
    "burst_sync": {"cpu_us_per_execution": 307, "cpu_us_range": [299, 449], "executions_per_s": 2311},
}
HEARTBEAT_INTERVAL = timedelta(seconds=5)
DEADLINE = timedelta(minutes=5)
WAIT = 120.0


# -- the fake server (child process) ----------------------------------------------------------------------------


class BenchService(worker_pb2_grpc.WorkerServiceServicer):
    """Hands out ``count`` no-op assignments per ``go`` as credit allows; acks every result."""

    def __init__(self, batch: int, handler: str) -> None:
        self.batch = batch
        self.handler = handler
        self.go: asyncio.Queue[tuple[str, int]] = asyncio.Queue()

    def assignment(self, execution_id: str, now: datetime) -> worker_pb2.Assignment:
        assignment = worker_pb2.Assignment(
            execution_id=execution_id, job_id=execution_id.split(":", 1)[0], tenant="bench", attempt=1, delivery=1,
        )
        assignment.target.handler.name = self.handler
        assignment.nominal_at.FromDatetime(now)
        assignment.due_at.FromDatetime(now)
        assignment.deadline_at.FromDatetime(now + DEADLINE)
        return assignment

    async def Pull(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:  # noqa: N802
        hello = await context.read()
        welcome = worker_pb2.PullResponse(welcome=worker_pb2.ServerWelcome(server_id="bench", session_id="bench"))
        welcome.welcome.heartbeat_interval.FromTimedelta(HEARTBEAT_INTERVAL)
        welcome.welcome.heartbeat_timeout.FromTimedelta(HEARTBEAT_INTERVAL * 6)
        await context.write(welcome)
        run, count = await self.go.get()
        credit = hello.hello.slots
        sent = results = 0
        lock = asyncio.Lock()  # one writer at a time: grpc.aio allows a single pending write
        more = asyncio.Event()
        more.set()

        async def read() -> None:
            nonlocal credit, results
            while results < count:
                request = await context.read()
                if request is grpc.aio.EOF:
                    return
                kind = request.WhichOneof("message")
                if kind == "credit":
                    credit += request.credit.credits
                    more.set()
                elif kind == "result":
                    results += len(request.result.results)
                    acks = worker_pb2.PullResponse(ack=worker_pb2.ResultAcks(acks=[
                        worker_pb2.ResultAck(execution_id=r.execution_id, delivery=r.delivery, accepted=True)
                        for r in request.result.results
                    ]))
                    async with lock:
                        await context.write(acks)

        reader = asyncio.create_task(read())
        while sent < count and not reader.done():
            await asyncio.wait({reader, asyncio.ensure_future(more.wait())}, return_when=asyncio.FIRST_COMPLETED)
            more.clear()
            now = datetime.now(timezone.utc)
            while credit > 0 and sent < count:
                size = min(credit, self.batch, count - sent)
                message = worker_pb2.PullResponse(assignment=worker_pb2.Assignments(
                    assignments=[self.assignment(f"bench_{run}:{sent + i}", now) for i in range(size)]
                ))
                credit -= size
                sent += size
                async with lock:
                    await context.write(message)
        await reader
        print(f"done {results}", flush=True)
        # Keep the stream open until the worker stops and half-closes it.
        while await context.read() is not grpc.aio.EOF:
            pass


async def serve(batch: int, handler: str) -> None:
    service = BenchService(batch, handler)
    server = grpc.aio.server()
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"port {port}", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().split():
        if line[0] == "go":
            service.go.put_nowait((line[1], int(line[2])))
    await server.stop(grace=None)


# -- the worker (this process) ----------------------------------------------------------------------------------


def registry(sync: bool) -> HandlerRegistry:
    handlers = HandlerRegistry()
    register_builtins(handlers)

    def echo_sync(ctx: JobContext) -> bytes:
        return ctx.payload

    handlers.register("echo_sync", echo_sync)
    return handlers


async def one_run(server: asyncio.subprocess.Process, address: str, run: str, count: int, slots: int,
                  sync: bool) -> dict[str, float]:
    assert server.stdin is not None and server.stdout is not None
    worker = Worker(WorkerConfig(address=address, credential="bench", handlers=registry(sync), slots=slots,
                                 http=False, worker_id=f"bench-{run}"))
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.connected.wait(), WAIT)
    cpu, wall = time.process_time(), time.perf_counter()
    server.stdin.write(f"go {run} {count}\n".encode())
    line = (await asyncio.wait_for(server.stdout.readline(), WAIT)).decode().split()
    if line != ["done", str(count)]:
        raise SystemExit(f"the fake server said {line!r}")
    while worker.unacked():  # the last acks are on their way back
        await asyncio.sleep(0.001)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await worker.stop(grace=5)
    await task
    return {"cpu_us_per_execution": cpu / count * 1e6, "executions_per_s": count / wall}


async def scenario(name: str, args: argparse.Namespace, slots: int, sync: bool) -> dict[str, Any]:
    handler = "echo_sync" if sync else "echo"
    server = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", "--batch", str(args.batch), "--handler", handler,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        line = (await asyncio.wait_for(server.stdout.readline(), WAIT)).decode().split()
        address = f"127.0.0.1:{line[1]}"
        runs = [await one_run(server, address, f"{name}{i}", args.executions, slots, sync)
                for i in range(args.repeat)]
    finally:
        if server.stdin is not None:
            server.stdin.close()
        await server.wait()
    figures: dict[str, Any] = {
        "slots": slots,
        "handler": handler,
        "cpu_us_per_execution": round(statistics.median(r["cpu_us_per_execution"] for r in runs), 1),
        "executions_per_s": round(statistics.median(r["executions_per_s"] for r in runs)),
        "runs": [{key: round(value, 1) for key, value in r.items()} for r in runs],
    }
    before = BASELINE.get(name, {}).get("cpu_us_per_execution")
    if before and not args.smoke:
        figures["vs_baseline"] = round(figures["cpu_us_per_execution"] / before, 2)
    return figures


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    load = os.getloadavg()
    report: dict[str, Any] = {
        "benchmark": "worker",
        "smoke": args.smoke,
        "executions": args.executions,
        "batch": args.batch,
        "repeat": args.repeat,
        "python": sys.version.split()[0],
        "load_average_before": [round(x, 2) for x in load],
        "baseline": BASELINE,
    }
    report["burst"] = await scenario("burst", args, args.burst_slots, sync=False)
    report["steady"] = await scenario("steady", args, args.steady_slots, sync=False)
    if args.sync:
        report["burst_sync"] = await scenario("burst_sync", args, args.burst_slots, sync=True)
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=10_000)
    parser.add_argument("--burst-slots", type=int, default=2_500)
    parser.add_argument("--steady-slots", type=int, default=64)
    parser.add_argument("--batch", type=int, default=500, help="assignments per message at most")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sync", action="store_true", help="also run the burst with a sync (threaded) echo")
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--handler", default="echo", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.batch, args.handler))
        return
    if args.smoke:
        args.executions, args.burst_slots, args.steady_slots, args.repeat = 300, 100, 16, 1
    tune_collector()  # as `tickwheel worker` does; the fake server's process keeps CPython's defaults
    print(json.dumps(asyncio.run(bench(args)), indent=2))


if __name__ == "__main__":
    main()
