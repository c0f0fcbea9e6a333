"""Benchmark: what grpc.aio's registered methods cost every call, paired in
one process (transport.GenericOnly; docs/architecture.md, "Job writes at
scale", the port's per-call cost).

    .venv/bin/python loadtest/bench_registered.py [--calls 2000] [--rounds 8] [--clients 16]

Prints one JSON object. Two ``grpc.aio`` servers on one event loop serve
the port's services (SchedulerService answering CreateJob with the
request's job, AdminService, WorkerService, health: 50 methods): one the
generated way (each method registered too), one through
``transport.GenericOnly`` (generic handlers only). ``--clients`` clients
in the same process make ``--calls`` CreateJob calls against one, then the
other, the order swapped every round; the figure is the process's CPU time
a call (server and clients together: the clients' share is the same on
both), each round's and their medians, and the median of the rounds'
paired differences. CPU time in one process, the two alternated, so the
machine's load moves both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

import grpc.aio
from grpc_health.v1 import health, health_pb2_grpc
from tickwheel.v1 import admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2_grpc

from tickwheel_server import transport

WARMUP = 500


class Echo(scheduler_pb2_grpc.SchedulerServiceServicer):
    async def CreateJob(self, request, context):  # noqa: N802 (the gRPC method's name)
        return request.job


async def serve(registered: bool) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    target = server if registered else transport.GenericOnly(server)
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(Echo(), target)
    admin_pb2_grpc.add_AdminServiceServicer_to_server(admin_pb2_grpc.AdminServiceServicer(), target)
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(worker_pb2_grpc.WorkerServiceServicer(), target)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), target)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


async def run(args: argparse.Namespace) -> dict:
    ways = ("registered", "generic")
    servers = {way: await serve(way == "registered") for way in ways}
    channels = {way: [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(args.clients)]
                for way, (_, port) in servers.items()}
    request = scheduler_pb2.CreateJobRequest(job=job_pb2.Job(name="bench-registered"), request_id="r")

    async def calls(way: str, count: int) -> None:
        left = [count]

        async def client(channel) -> None:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            while left[0] > 0:
                left[0] -= 1
                await stub.CreateJob(request)

        await asyncio.gather(*(client(channel) for channel in channels[way]))

    for way in ways:
        await calls(way, WARMUP)
    us: dict[str, list[float]] = {way: [] for way in ways}
    for n in range(args.rounds):
        for way in ways if n % 2 == 0 else ways[::-1]:
            began = time.process_time()
            await calls(way, args.calls)
            us[way].append((time.process_time() - began) * 1e6 / args.calls)
    for way in ways:
        for channel in channels[way]:
            await channel.close()
        await servers[way][0].stop(None)
    return {
        "us_a_call": {way: [round(x, 1) for x in values] for way, values in us.items()},
        "median_us_a_call": {way: round(statistics.median(values), 1) for way, values in us.items()},
        "registered_minus_generic_us": round(statistics.median(a - b for a, b in zip(us["registered"], us["generic"])), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.calls, args.rounds, args.clients = 20, 2, 2
    began = time.perf_counter()
    out = asyncio.run(run(args))
    json.dump({"benchmark": "registered", "smoke": args.smoke, "calls": args.calls, "rounds": args.rounds,
               "clients": args.clients, **out, "total_s": round(time.perf_counter() - began, 1)}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
