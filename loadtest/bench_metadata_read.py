"""Benchmark: how many times the edge reads a unary call's bearer secret
from its metadata, and what one read costs, in process, without a store.

A grpc.aio server registers a SchedulerService whose CreateJob answers at
once through ``api.decoding.guard`` as ``app.py`` registers it (refusal
windows, one ``AwaitedRequests`` trusting what they trust); ``--calls``
CreateJob calls with a tenant's bearer secret go through it one at a time.
Counted: calls of ``auth.tokens.bearer_secret`` (under whichever name the
tree's ``decoding`` and ``awaited`` call it) a call, before any servicer
code. Timed: one ``bearer_secret(context.invocation_metadata())`` on the
call's real context, CPU ns (``time.thread_time_ns``, the mean of
``--reads`` reads, the best of the calls that timed it).

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_metadata_read.py [--calls 200] [--reads 20000] [--smoke]

Prints one JSON object. Run it with another tree's ``PYTHONPATH`` to
compare trees; ``--smoke`` runs tiny sizes so CI keeps it alive.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

import grpc
from tickwheel.v1 import scheduler_pb2, scheduler_pb2_grpc

from tickwheel.shared.clock import SystemClock
from tickwheel_server.api import awaited as awaited_module
from tickwheel_server.api import decoding
from tickwheel_server.auth import tokens, windows as windows_module
from tickwheel_server.auth.windows import RefusalWindows

SECRET = "twk_benchkey0000000_" + "s" * 43


async def run(calls: int, reads: int) -> dict:
    counted = {"reads": 0}
    original = tokens.bearer_secret

    def counting(metadata):
        counted["reads"] += 1
        return original(metadata)

    for module in (tokens, decoding, awaited_module, windows_module):  # whichever name a tree calls it by
        if getattr(module, "bearer_secret", None) is original:
            module.bearer_secret = counting
    timed: list[float] = []

    class Servicer(scheduler_pb2_grpc.SchedulerServiceServicer):
        async def CreateJob(self, request, context):  # noqa: N802 (the gRPC method's name)
            if len(timed) < 3:
                started = time.thread_time_ns()
                for _ in range(reads):
                    original(context.invocation_metadata())
                timed.append((time.thread_time_ns() - started) / reads)
            return scheduler_pb2.CreateJobResponse(job=request.job, created=True)

    windows = RefusalWindows(SystemClock())
    awaited = awaited_module.AwaitedRequests()
    awaited.trusted = windows.trusted
    server = grpc.aio.server()
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(
        Servicer(), decoding.guard(server, windows=windows, requests=awaited)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            request = scheduler_pb2.CreateJobRequest(request_id="r")
            metadata = (("authorization", f"Bearer {SECRET}"),)
            await stub.CreateJob(request, metadata=metadata)  # warm-up: the channel's first call
            counted["reads"] = 0
            for _ in range(calls):
                await stub.CreateJob(request, metadata=metadata)
    finally:
        await server.stop(None)
        for module in (tokens, decoding, awaited_module, windows_module):
            if getattr(module, "bearer_secret", None) is counting:
                module.bearer_secret = original
    return {"reads_a_call": counted["reads"] / calls, "ns_a_read": round(min(timed), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.reads = 3, 10
    figures = asyncio.run(run(args.calls, args.reads))
    print(json.dumps({"benchmark": "metadata_read", "smoke": args.smoke, "calls": args.calls,
                      "load": round(os.getloadavg()[0], 2), **figures}, indent=2))


if __name__ == "__main__":
    main()
