"""Benchmark: what one peer without a credential can make the server hold
with streams it keeps open. A real ``tickwheel server`` on a throwaway
PostgreSQL and etcd; one hostile client process opens ``--connections``
gRPC connections (one channel each), ``--streams`` calls on each of
the kind ``--kind``, reads each call's first answer and keeps them all
open for ``--hold`` seconds; tenant ``quiet`` meanwhile makes GetJob calls
on a connection of its own, one at a time.

    .venv/bin/python loadtest/bench_peer_hold.py [--kind watch|reflection|idle|headers] [--connections 4] [--streams 100]
                                                 [--name-bytes 1048576] [--hold 6] [--smoke]

Kinds (both answer without a credential, by design: a load balancer's
health check and grpcurl carry none):

- ``watch``: ``grpc.health.v1.Health/Watch`` of a service name of
  ``--name-bytes`` bytes (0: the server's own, ``""``);
- ``reflection``: ``ServerReflectionInfo`` streams, each having asked one
  ``list_services`` (``--name-bytes`` of host name in it);
- ``idle``: connections and no call (``--streams`` unused): what an open
  connection costs, and whether the quiet tenant still gets one;
- ``headers``: a raw HTTP/2 client sends only the HEADERS of ``--streams``
  GetJob calls on each connection (no message: gRPC held such a call
  before any Tickwheel code ran, until ``api/awaited.py``); ``refused`` counts the streams the server
  ended within a second, ``held_at_end`` those not ended of the
  connections still open.

Prints one JSON object: the calls the hostile process holds open after
``--hold`` (and the statuses of the others), the server's resident memory
(``VmRSS``) and open file descriptors before and while held, and the quiet
tenant's answers, p50/p99 and failures meanwhile; ``/proc/loadavg`` before
and after. Run it on a branch and on the code before it to compare.
``--smoke`` runs a small one so CI keeps the script working.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc

import _harness as h
from bench_refusal_flood import on_one_server, yearly

SERVER_ID = "peer-hold-bench"


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


def memory(pid: int) -> dict:
    """The server's resident memory (MiB) and open descriptors."""
    rss = 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = -1
    return {"rss_mib": round(rss / 1024, 1), "fds": fds}


# ------------------------------------------------------------ hostile process


async def hold(address: str, kind: str, connections: int, streams: int, name_bytes: int, seconds: float) -> dict:
    """Open the calls, read each one's first answer, keep them for ``seconds``."""
    channels = [
        grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1), ("grpc.channel_id", n),
                                                    ("grpc.max_send_message_length", 8 << 20)])
        for n in range(connections)
    ]  # fmt: skip
    calls: list = []
    statuses: dict[str, int] = {}
    name = "s" * name_bytes

    async def one(channel) -> None:
        if kind == "watch":
            call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=name))
        else:
            call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo()
            await call.write(reflection_pb2.ServerReflectionRequest(host=name, list_services=""))
        try:
            await asyncio.wait_for(call.read(), 60)
            calls.append(call)
        except grpc.aio.AioRpcError as error:
            statuses[error.code().name] = statuses.get(error.code().name, 0) + 1
        except Exception as error:  # noqa: BLE001 - a stream that never answered
            statuses[type(error).__name__] = statuses.get(type(error).__name__, 0) + 1
            call.cancel()

    if kind == "headers":
        return await hold_headers(address, connections, streams, seconds)
    for channel in channels:
        if kind == "idle":
            try:
                await asyncio.wait_for(channel.channel_ready(), 60)
                calls.append(channel)
            except asyncio.TimeoutError:
                statuses["not connected"] = statuses.get("not connected", 0) + 1
            continue
        await asyncio.gather(*(one(channel) for _ in range(streams)))
    print(json.dumps({"opened": len(calls), "refused": statuses}), flush=True)
    await asyncio.sleep(seconds)
    if kind == "idle":
        alive = sum(1 for channel in calls if channel.get_state() == grpc.ChannelConnectivity.READY)
    else:
        alive = sum(1 for call in calls if not call.done())
        for call in calls:
            call.cancel()
    for channel in channels:
        await channel.close()
    return {"held_at_end": alive}


async def hold_headers(address: str, connections: int, streams: int, seconds: float) -> dict:
    """A raw HTTP/2 client: on each connection, ``streams`` GetJob calls of
    which only the HEADERS frame is sent (no message, the stream never
    ended), held for ``seconds`` (the server's pings go unanswered: a few
    seconds is within its keepalive)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support import http2  # the raw client the transport tests use

    host, _, port = address.rpartition(":")
    writers = []
    ended: list[set[int]] = []

    async def watch(reader, done: set[int]) -> None:
        """Note each stream the server ends (its trailers, or a reset)."""
        while (got := await http2.next_frame(reader)) is not None:
            if (got.kind == http2.HEADERS and got.flags & http2.END_STREAM) or got.kind == http2.RST_STREAM:
                done.add(got.stream)

    watchers = []
    for _ in range(connections):
        reader, writer = await http2.connect(host, int(port))
        for n in range(streams):
            request = http2.unary_request(2 * n + 1, address, "/tickwheel.v1.SchedulerService/GetJob")
            writer.write(request[: 9 + int.from_bytes(request[:3], "big")])  # its HEADERS frame alone
        await writer.drain()
        writers.append(writer)
        ended.append(set())
        watchers.append(asyncio.ensure_future(watch(reader, ended[-1])))
    await asyncio.sleep(1.0)
    answered_at_once = sum(len(done) for done in ended)
    print(json.dumps({"opened": connections * streams, "refused": {"answered within 1 s": answered_at_once}}),
          flush=True)  # fmt: skip
    await asyncio.sleep(max(0.0, seconds - 1.0))
    alive = sum(streams - len(done) for writer, done in zip(writers, ended) if not writer.is_closing())
    for writer in writers:
        writer.close()
    for watcher in watchers:
        watcher.cancel()
    return {"held_at_end": alive}


def hostile_main(argv: list[str]) -> int:
    address, kind, connections, streams, name_bytes, seconds = argv
    out = asyncio.run(hold(address, kind, int(connections), int(streams), int(name_bytes), float(seconds)))
    print(json.dumps(out), flush=True)
    return 0


# --------------------------------------------------------------- the quiet tenant


async def quiet(address: str, secret: str, job_id: str, seconds: float) -> dict:
    latencies: list[float] = []
    failed: dict[str, int] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            before = time.monotonic()
            try:
                await stub.GetJob(scheduler_pb2.GetJobRequest(id=job_id), metadata=bearer(secret), timeout=10)
                latencies.append((time.monotonic() - before) * 1000)
            except grpc.aio.AioRpcError as error:
                failed[error.code().name] = failed.get(error.code().name, 0) + 1
            await asyncio.sleep(0.02)
    latencies.sort()
    return {
        "answers": len(latencies),
        "p50_ms": round(h.percentile(latencies, 0.5), 2) if latencies else None,
        "p99_ms": round(h.percentile(latencies, 0.99), 2) if latencies else None,
        "failed": failed,
    }


async def tenant(server: h.ServerProcess) -> tuple[str, str]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        created = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="quiet")),
                                           metadata=h.admin_metadata(server))  # fmt: skip
        secret = created.api_key.secret
        job = await scheduler_pb2_grpc.SchedulerServiceStub(channel).CreateJob(
            scheduler_pb2.CreateJobRequest(job=yearly("quiet-target"), request_id="quiet-target"), metadata=bearer(secret))
    return secret, job.job.id


async def bench(args: argparse.Namespace, server: h.ServerProcess, pid: int) -> dict:
    secret, job_id = await tenant(server)
    load_before = h.load_average()
    before = memory(pid)
    proc = subprocess.Popen(
        [sys.executable, __file__, "hostile", server.address, args.kind, str(args.connections), str(args.streams),
         str(args.name_bytes), str(args.hold)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent,
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    opened = json.loads(await loop.run_in_executor(None, proc.stdout.readline))
    held = memory(pid)
    quiet_figures = await quiet(server.address, secret, job_id, max(1.0, args.hold - 2))
    held_late = memory(pid)
    end = json.loads(await loop.run_in_executor(None, proc.stdout.readline))
    proc.wait(30)
    await asyncio.sleep(1.0)
    return {
        "opened": opened["opened"],
        "refused": opened["refused"],
        "held_at_end": end["held_at_end"],
        "server_before": before,
        "server_held": held,
        "server_held_late": held_late,
        "server_after": memory(pid),
        "quiet": quiet_figures,
        "load_before": load_before,
        "load_after": h.load_average(),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "hostile":
        return hostile_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("watch", "reflection", "idle", "headers"), default="watch")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--name-bytes", type=int, default=1 << 20)
    parser.add_argument("--hold", type=float, default=6.0)
    parser.add_argument("--pg")
    parser.add_argument("--etcd")
    parser.add_argument("--keep")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.connections, args.streams, args.name_bytes, args.hold = 2, 20, 16, 3.0
    return on_one_server(args, SERVER_ID, "peer-hold-", bench)

if __name__ == "__main__":
    sys.exit(main())
