"""Benchmark: what refusing a client that will not stop costs the server,
and its quiet neighbour. A real ``tickwheel server`` on a throwaway
PostgreSQL and etcd; ``--hostile`` client processes (Python ``grpc.aio``,
``--concurrency`` calls in flight each) call a refused call again as soon
as they are answered, ignoring RetryInfo, for ``--seconds``; tenant
``quiet`` meanwhile makes GetJob and CreateJob calls in turn, one at a time, one every
``--quiet-interval`` seconds (0.02) or as soon as the one before is
answered when that is later.

    .venv/bin/python loadtest/bench_refusal_flood.py [--modes alone,quota,badkey,garbage[,rotating]] [--seconds 6]
                                                      [--hostile 2] [--concurrency 32] [--rpc get|create|pull]
                                                      [--rounds 1] [--quiet-interval 0.02] [--profile DIR] [--pg URL] [--etcd HOST:PORT] [--smoke]

The hostile calls, by ``--modes``:

- ``alone``: none (the quiet tenant's baseline, and the server's idle CPU);
- ``quota``: tenant ``flood``'s valid API key, its rate 5 requests a
  second: all but a few a second are refused RESOURCE_EXHAUSTED (with
  RetryInfo) by the request-rate quota;
- ``badkey``: a well-formed API key no tenant holds (an unknown tenant's,
  or a revoked one): UNAUTHENTICATED, then RESOURCE_EXHAUSTED once the
  peer's failures are spent (``auth/failures.py``);
- ``garbage``: ``Bearer`` and a secret of no credential's shape;
- ``rotating`` (not run by default): a new well-formed unknown API key
  each call, so that no caller is ever refused twice under one key.

``--rpc`` picks the hostile call: ``get`` (GetJob of a job id),
``create`` (CreateJob of a whole job, so that decoding the request is part
of what a refusal may cost) or ``pull`` (a worker's Pull stream opened, a
hello written, its first answer read, the stream cancelled: ``badkey``,
``garbage`` and ``rotating`` then send worker credentials; ``quota`` does
not apply, a worker credential has no request rate).

Prints one JSON object; per mode: the hostile calls answered by status and
a second; the server process tree's CPU (``/proc``) in CPU-seconds a wall
second, and a hostile call net of the ``alone`` run's idle rate
(``cpu_ms_per_hostile_call``); the hostile clients' own CPU; the quiet
tenant's answers a second, their p50/p99/max latency (ms) and failures;
``/proc/loadavg`` before and after (the machine is shared). ``--rounds``
repeats the modes in order. Run it on a branch and on the code before it,
alternated, to compare. ``--smoke`` runs one short round so CI keeps the
script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc

import _harness as h

SERVER_ID = "refusal-bench"
FLOOD_RATE = 5
MODES = ("alone", "quota", "badkey", "garbage", "rotating")
DEFAULT_MODES = ("alone", "quota", "badkey", "garbage")
ROTATING = "rotating"
"""The hostile process's secret for ``rotating``: a new unknown key each call."""


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


def yearly(name: str) -> job_pb2.Job:
    """A job that fires once a year (nothing due while the bench runs)."""
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    job.schedule.cron.expression = "0 0 1 1 *"
    job.schedule.cron.time_zone = "UTC"
    job.labels["bench"] = "refusal-flood"
    job.payload = b'{"x": "' + b"y" * 512 + b'"}'
    return job


def unknown_key(prefix: str = "twk") -> str:
    """A well-formed API key (``tww``: worker credential) that no one holds."""
    ident = base64.urlsafe_b64encode(os.urandom(12)).rstrip(b"=").decode().replace("-", "x").replace("_", "y")
    return f"{prefix}_{ident}_{base64.urlsafe_b64encode(os.urandom(32)).rstrip(b'=').decode()}"


SEEN: dict[str, str] = {}
"""The first details of each status the hostile process met on a Pull stream."""
HELLO = worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="hostile", handlers=["echo"]))


async def pull_once(stub, metadata) -> str:
    """Open a Pull stream, say hello, read its first answer: the status it ended with (OK: welcomed)."""
    call = stub.Pull(metadata=metadata)
    try:
        await call.write(HELLO)
        await call.read()
        return "OK"
    except grpc.aio.AioRpcError as error:
        SEEN.setdefault(error.code().name, error.details()[:200])
        return error.code().name
    except Exception as error:  # written to a stream already ended: its status says why
        code = (await call.code()).name
        SEEN.setdefault(code, f"{type(error).__name__}: {error}; {await call.details()}"[:200])
        return code
    finally:
        call.cancel()


# ------------------------------------------------------------ hostile process


async def hostile(address: str, secret: str, rpc: str, concurrency: int, seconds: float, job_id: str) -> dict:
    """Call ``rpc`` with ``secret`` from ``concurrency`` tasks on one channel,
    each again as soon as it is answered, for ``seconds``; counts by status."""
    counts: dict[str, int] = {}
    metadata = bearer(secret)
    rotating = secret == ROTATING
    prefix = "tww" if rpc == "pull" else "twk"
    async with grpc.aio.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        workers = worker_pb2_grpc.WorkerServiceStub(channel)
        if rpc == "pull":
            call, request = None, None
        elif rpc == "get":
            call, request = stub.GetJob, scheduler_pb2.GetJobRequest(id=job_id)
        else:
            call, request = stub.CreateJob, scheduler_pb2.CreateJobRequest(job=yearly("hostile"), request_id="hostile")
        await channel.channel_ready()
        end = time.monotonic() + seconds

        async def one() -> None:
            while time.monotonic() < end:
                sent = bearer(unknown_key(prefix)) if rotating else metadata
                if call is None:
                    code = await pull_once(workers, sent)
                    counts[code] = counts.get(code, 0) + 1
                    continue
                try:
                    await call(request, metadata=sent)
                    code = "OK"
                except grpc.aio.AioRpcError as error:
                    code = error.code().name
                counts[code] = counts.get(code, 0) + 1

        await asyncio.gather(*(one() for _ in range(concurrency)))
    return counts


def hostile_main(argv: list[str]) -> int:
    address, secret, rpc, concurrency, seconds, job_id = argv
    counts = asyncio.run(hostile(address, secret, rpc, int(concurrency), float(seconds), job_id))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"counts": counts, "cpu_s": usage.ru_utime + usage.ru_stime, "details": SEEN}))
    return 0


# --------------------------------------------------------------- the quiet tenant


async def quiet(address: str, secret: str, job_id: str, seconds: float, interval: float) -> dict:
    """GetJob and CreateJob in turn, one at a time, one every ``interval``
    seconds (at once when the one before ended late), for ``seconds``."""
    latencies: list[float] = []
    failed: dict[str, int] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        end = time.monotonic() + seconds
        started = time.monotonic()
        n = 0
        while time.monotonic() < end:
            before = time.monotonic()
            await asyncio.sleep(max(0.0, started + n * interval - before))
            before = time.monotonic()
            try:
                if n % 2:
                    await stub.CreateJob(scheduler_pb2.CreateJobRequest(job=yearly(f"quiet-{n}"), request_id=f"quiet-{n}-{started}"), metadata=bearer(secret))
                else:
                    await stub.GetJob(scheduler_pb2.GetJobRequest(id=job_id), metadata=bearer(secret))
                latencies.append((time.monotonic() - before) * 1000)
            except grpc.aio.AioRpcError as error:
                failed[error.code().name] = failed.get(error.code().name, 0) + 1
            n += 1
        wall = time.monotonic() - started
    latencies.sort()
    return {
        "answers": len(latencies),
        "answers_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(h.percentile(latencies, 0.5), 2) if latencies else None,
        "p99_ms": round(h.percentile(latencies, 0.99), 2) if latencies else None,
        "max_ms": round(latencies[-1], 2) if latencies else None,
        "failed": failed,
    }


# ----------------------------------------------------------------------- setup


async def tenants(server: h.ServerProcess) -> dict[str, str]:
    """Tenants ``flood`` (rate :data:`FLOOD_RATE`) and ``quiet`` (no rate
    that matters) and one job of each; their API keys and job ids."""
    out: dict[str, str] = {}
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for name, rate in (("flood", FLOOD_RATE), ("quiet", 1_000_000)):
            tenant = admin_pb2.Tenant(name=name, quotas=admin_pb2.TenantQuotas(max_jobs=10_000_000, requests_per_second=rate))
            created = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=tenant), metadata=h.admin_metadata(server))
            out[name] = created.api_key.secret
            job = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=yearly(f"{name}-target"), request_id=f"{name}-target"),
                                            metadata=bearer(out[name]))
            out[f"{name}_job"] = job.job.id
    return out


def secret_of(mode: str, keys: dict[str, str], rpc: str) -> str:
    if mode == "quota":
        return keys["flood"]
    if mode == "badkey":
        return unknown_key("tww" if rpc == "pull" else "twk")
    if mode == "rotating":
        return ROTATING
    return "not-a-credential"


async def run_mode(mode: str, args: argparse.Namespace, server: h.ServerProcess, pid: int, keys: dict[str, str]) -> dict:
    load_before = h.load_average()
    procs = []
    if mode != "alone":
        secret = secret_of(mode, keys, args.rpc)
        for _ in range(args.hostile):
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "hostile", server.address, secret, args.rpc, str(args.concurrency),
                 str(args.seconds), keys["flood_job"]],
                stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent,
            ))  # fmt: skip
        await asyncio.sleep(1.0)  # the hostile clients connect and reach their pace
    cpu_before, wall_before = h.tree_cpu_s(pid), time.monotonic()
    with h.profiled({f"server-{mode}": pid}, Path(args.profile) if args.profile else None):
        quiet_figures = await quiet(server.address, keys["quiet"], keys["quiet_job"], args.seconds - 1.5 if procs else args.seconds,
                                     args.quiet_interval)
    cpu, wall = h.tree_cpu_s(pid) - cpu_before, time.monotonic() - wall_before
    counts: dict[str, int] = {}
    details: dict[str, str] = {}
    client_cpu = 0.0
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        figures = json.loads(out)
        client_cpu += figures["cpu_s"]
        details.update(figures["details"])
        for code, n in figures["counts"].items():
            counts[code] = counts.get(code, 0) + n
    hostile_calls = sum(counts.values())
    return {
        "hostile_calls": counts,
        **({"hostile_details": details} if details else {}),
        "hostile_calls_per_s": round(hostile_calls / args.seconds, 1),
        "server_cpu_s_per_s": round(cpu / wall, 3),
        "hostile_client_cpu_s": round(client_cpu, 2),
        "quiet": quiet_figures,
        "load_before": load_before,
        "load_after": h.load_average(),
        "_cpu_s": cpu,
        "_wall_s": wall,
    }


async def bench(args: argparse.Namespace, server: h.ServerProcess, pid: int) -> dict:
    keys = await tenants(server)
    rounds = []
    for _ in range(args.rounds):
        results = {}
        for mode in args.modes:
            results[mode] = await run_mode(mode, args, server, pid, keys)
        idle = results.get("alone")
        for mode, figures in results.items():
            calls = figures["hostile_calls_per_s"] * args.seconds
            if mode != "alone" and idle is not None and calls:
                # server CPU beyond what the quiet tenant's answers cost alone (and
                # the idle server's), over the hostile calls made while it was
                # measured (their rate times the measured wall)
                per_answer = idle["_cpu_s"] / max(1, idle["quiet"]["answers"])
                extra = figures["_cpu_s"] - per_answer * figures["quiet"]["answers"]
                figures["cpu_ms_per_hostile_call"] = round(1000 * extra / (figures["hostile_calls_per_s"] * figures["_wall_s"]), 3)
        for figures in results.values():
            figures.pop("_cpu_s"), figures.pop("_wall_s")
        rounds.append(results)
    return {"rounds": rounds}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "hostile":
        return hostile_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--hostile", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rpc", choices=("get", "create", "pull"), default="get")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--quiet-interval", type=float, default=0.02)
    parser.add_argument("--profile", help="py-spy the server into this folder, a file a mode")
    parser.add_argument("--pg")
    parser.add_argument("--etcd")
    parser.add_argument("--keep")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in args.modes):
        parser.error(f"--modes takes {', '.join(MODES)}")
    if args.rpc == "pull" and "quota" in args.modes:
        parser.error("--rpc pull: a worker credential has no request rate (no quota mode)")
    if args.smoke:
        args.seconds, args.hostile, args.concurrency, args.rounds = 2.0, 1, 4, 1
    return on_one_server(args, SERVER_ID, "refusal-flood-", bench)


def on_one_server(args: argparse.Namespace, server_id: str, prefix: str, run) -> int:
    """Run ``run(args, server, pid)`` against one server on a throwaway (or
    ``--pg``/``--etcd``) PostgreSQL and etcd; print its figures and the
    arguments as JSON."""
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(h.workdir(args.keep, prefix))
        url = stack.enter_context(h.postgres(args.pg))
        endpoint = stack.enter_context(h.etcd(args.etcd))
        h.reset_data(url)
        fleet = h.start_fleet(folder, url, endpoint, server_id, 1)
        stack.callback(fleet.stop)
        asyncio.run(h.wait_fleet(fleet, 0))
        out = asyncio.run(run(args, fleet.first, fleet.pids[0]))
    out["args"] = {k: v for k, v in vars(args).items() if k not in ("pg", "etcd", "keep")}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
