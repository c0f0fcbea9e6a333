"""Benchmark: creating jobs through the API. CreateJob from one client and
from many, BatchCreateJobs, the time to load N jobs, and paging over them,
beside pgqueuer's batch enqueue on the same PostgreSQL in the same run.

    .venv/bin/python loadtest/bench_create.py [--jobs 1000000] [--calls 2000] [--clients 16]
                                              [--batch-jobs 100000] [--load-clients 4] [--servers 1]
                                              [--pg URL] [--etcd HOST:PORT] [--logs DIR] [--profile DIR]
                                              [--loop asyncio|uvloop] [--no-pgqueuer] [--smoke]

Prints one JSON object. Without ``--pg``/``--etcd`` a throwaway PostgreSQL
and etcd are started (``tests/support``) and deleted afterwards.
``--servers`` ``tickwheel server`` processes (default 1; the first
``--migrate``s; no workers; the partitions split among them before anything
is measured) serve one tenant whose quotas let everything through. With
several, they are a fleet behind a client-side balancer: client (or
caller) k calls server k % N, so ``create_1`` and ``batch``, one caller
each, reach the first server only; each phase's ``ok_by_server`` counts
the jobs each server answered, ``cpu`` sums the servers' CPU and
``cpu_by_server`` gives each one's; every job is a handler job with a cron
schedule that is not due during the run (``0 3 1 1 *`` UTC), so nothing but
creating is measured.

- ``create_1``: ``--calls`` CreateJob calls one after the other from one
  SDK client (``AsyncClient``, its default retries). ``create_16``: as many
  calls from ``--clients`` clients at once, each its own channel. Each
  reports jobs/s, latency, failures by status code (what the SDK raised
  after its retries) and the retries it made.
- ``batch``: ``--batch-jobs`` jobs through BatchCreateJobs, 1 000 per call,
  one call after the other. ``load``: ``--jobs`` jobs the same way from
  ``--load-clients`` callers at once: the time to load them. The requests
  are serialised before the clock starts (the client's cost kept out of the
  server's figure); a call answering UNAVAILABLE is resent as is (same
  request ids) up to 5 times. Failures: calls by status code, and items by
  the code of their ``error``.
- ``paging``: every page of ListJobs (the tenant's) and of the admin's
  SearchJobs at 1 000 jobs a page over everything loaded: the first ten
  pages' latency (``first_pages_ms``), the median, p99, max and last page,
  the first, middle and last windows (each the median of a twentieth of
  the pages, 3 to 25), ``last_over_first`` (of the windows) and
  ``max_over_median``: flat paging keeps both near 1; ``cpu``: the
  server's and PostgreSQL's CPU over each walk, and per page;
  ``statements_per_page`` (and by first keyword) and ``jit`` (as in each
  phase, per page).
- ``cpu`` in each phase: CPU seconds of the server process and of
  PostgreSQL (``/proc``), and of ``callers`` (this process: the clients'
  threads, sending and reading the answers), and milliseconds per job.
  ``server_threads`` in the create phases and the floors (one server
  only): the server's CPU a call by kind of thread, with the kernel's
  share (``_harness.thread_cpu``): ``event_loop``, ``python_threads``
  (the store's transactions and gRPC's poller) and gRPC's native threads
  by name; what a call costs beyond the floor shows there by thread.
- ``sql`` in each phase: what reached PostgreSQL (``pg_stat_statements``):
  statements and rows written per job, by table, the costliest shapes;
  ``errors_logged``: the ERROR lines PostgreSQL logged (serialization
  failures the store retried show there); ``lock_waits`` its lock waits
  (as ``bench_burst.py``'s). ``jit`` beside it: what
  PostgreSQL spent compiling statements with JIT (``_harness.Statements.jit``).
- ``grpc_floor``: the ``create_16`` clients against the gRPC floor
  (``peers.py``): a bare ``grpc.aio`` SchedulerService answering CreateJob
  with the request's job, in a process of its own. Its jobs/s and CPU per
  call bound what any Python gRPC server reaches on this machine with these
  clients; ``create_16_over_floor`` sets Tickwheel's figure beside it.
  With ``--servers`` N, N floor processes, client k to floor k % N (the
  same number of interpreters as the servers have), their CPU together.
- ``create_16_go`` and ``grpc_floor_go``: the same calls from ``--clients``
  Go SDK clients (``loadtest/createload``, built with the ``go`` that
  ``scripts/install.sh`` provides), against the server and against the
  floor. A Python client spends about as much CPU a call as the floor's
  server, on the same two cores as the server and PostgreSQL; a Go client
  spends less, so these phases show more of what the server itself
  reaches. ``callers`` CPU is then the Go process's. Skipped, saying why,
  when there is no ``go``.
- ``pgqueuer``: pgqueuer's ``Queries.enqueue`` of ``--jobs`` jobs (1 000
  per call, one connection) into its own database on the same PostgreSQL,
  with its ``sql`` and ``cpu`` figures (``client``: this process, where
  pgqueuer runs). pgqueuer is the ``bench`` extra
  (``scripts/install.sh --bench``); without it, or with ``--no-pgqueuer``,
  this part says why it was skipped.

``--loop uvloop`` runs the ``tickwheel server`` processes on uvloop
(``_harness.server_loop``; no dependency of ours: it must be importable),
the floor and every other process on asyncio, so the floor stays the same
yardstick in an A/B of the two; ``loop`` in the report says which ran.
``--profile DIR`` samples the server with py-spy during each create phase
(``DIR/create_1.txt``, ``DIR/create_16.txt``, ``DIR/batch.txt``,
``DIR/load.txt``, collapsed stacks). Without py-spy, the servers run with
``loadtest/cpusample`` first on ``PYTHONPATH`` and ``TICKWHEEL_CPUSAMPLE=PREFIX``
time each BatchCreateJobs call's steps inside the server (validation,
the store's transaction and its statements, the answer), written per
phase to ``PREFIX.<pid>.<phase>``.
``goal`` sets the issue's goals beside the figures, each with ``met``.
``--smoke`` runs tiny sizes so CI keeps the script working; its figures mean
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import psycopg

import _harness as h
import peers
from tickwheel import AsyncClient, TickwheelError
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

GOAL = {
    "create_16_jobs_per_s": 2_000,
    "create_16_failures": 0,
    "batch_jobs_per_s": 20_000,
    "load_1m_s": 120,
    "paging_last_over_first": 2.0,
}
CRON = "0 3 1 1 *"
BATCH = 1000
PAGE_SIZE = 1000
RESENDS = 5
SERVER_ID = "bench-create"
HERE = Path(__file__).resolve().parent
ROOT = h.ROOT


def bench_job(name: str) -> job_pb2.Job:
    return job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=CRON, time_zone="UTC")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=h.HANDLER)),
        payload=b'{"bench": true}',
    )


def latency_ms(values: list[float]) -> dict:
    ordered = sorted(values)
    if not ordered:
        return {}
    return {name: round(h.percentile(ordered, q) * 1000, 2)
            for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))} | {"max": round(ordered[-1] * 1000, 2)}


# ------------------------------------------------------------------ the server


async def create_tenant(server: h.ServerProcess, max_jobs: int) -> str:
    """The bench tenant with room for every job and no request-rate limit
    that matters; returns its API key."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        tenant = admin_pb2.Tenant(name=h.TENANT, quotas=admin_pb2.TenantQuotas(
            max_jobs=max_jobs, requests_per_second=1_000_000))
        created = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=tenant),
                                           metadata=h.admin_metadata(server))
    return created.api_key.secret


class Phase:
    """The SQL, logged errors and CPU (of the processes in ``meter``) of one
    phase, from its start; with ``threads_of`` (a server's pid), that
    server's CPU by kind of thread too (:func:`_harness.thread_cpu`)."""

    def __init__(self, url: str, meter: h.Meter | None = None, threads_of: int | None = None) -> None:
        self.threads_of = threads_of
        self.threads_before = h.thread_cpu(threads_of) if threads_of is not None else None
        self.statements = h.Statements(url)
        self.statements.reset()
        self.errors = h.PostgresErrors()
        self.locks = h.LockWaits()
        self.load_before = h.load_average()
        self.meter = meter
        self.cpu_before = meter.read() if meter is not None else None
        self.callers_before = time.process_time()

    def report(self, jobs: int) -> dict:
        sql = self.statements.report(jobs)
        jit = self.statements.jit(jobs)
        if sql is not None:
            sql["errors_logged"] = self.errors.counts()
            sql["lock_waits"] = self.locks.counts()
        cpu = by_server = None
        if self.meter is not None and self.cpu_before is not None:
            costs = h.Meter.difference(self.cpu_before, self.meter.read(), jobs)
            cpu, by_server = costs["cpu"], costs["cpu_by_server"]
            callers = time.process_time() - self.callers_before
            cpu["callers"] = {"cpu_s": round(callers, 2), "cpu_ms_per_execution": round(callers * 1000 / max(jobs, 1), 4)}
        # per job, not per execution: the harness's key names mean "per unit of work"
        figures = json.loads(json.dumps({"sql": sql, "jit": jit, "cpu": cpu, "cpu_by_server": by_server})
                             .replace("per_execution", "per_job"))
        if self.threads_of is not None and self.threads_before is not None:
            figures["server_threads"] = h.thread_cpu_between(self.threads_before, h.thread_cpu(self.threads_of), jobs)
        return figures | {"load_average_before": self.load_before, "load_average_after": h.load_average()}


async def run_create(addresses: list[str], api_key: str, calls: int, clients: int, tag: str) -> dict:
    """``calls`` CreateJob calls from ``clients`` SDK clients at once, client
    k to ``addresses[k % len(addresses)]``."""
    failures: Counter[str] = Counter()
    ok_by_address: Counter[str] = Counter()
    retries = 0
    latencies: list[float] = []
    next_call = 0

    async def counted_sleep(seconds: float) -> None:
        nonlocal retries
        retries += 1
        await asyncio.sleep(seconds)

    async def client_loop(address: str) -> None:
        nonlocal next_call
        async with AsyncClient(address, api_key, sleep=counted_sleep) as client:
            while next_call < calls:
                i, next_call = next_call, next_call + 1
                began = time.perf_counter()
                try:
                    await client.create_job(bench_job(f"{tag}-{i:07d}"), request_id=f"{tag}-{i}")
                except TickwheelError as error:
                    failures[error.code_name] += 1
                else:
                    ok_by_address[address] += 1
                latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(client_loop(addresses[k % len(addresses)]) for k in range(clients)))
    seconds = time.perf_counter() - began
    ok = calls - sum(failures.values())
    return {
        "calls": calls, "clients": clients, "seconds": round(seconds, 2), "jobs_per_s": round(ok / seconds),
        "failures": sum(failures.values()), "failures_by_code": dict(failures), "retries": retries,
        "latency_ms": latency_ms(latencies), "ok_by_address": dict(ok_by_address),
    }


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def serialized_batches(jobs: int, tag: str) -> list[bytes]:
    """BatchCreateJobsRequest bytes of ``jobs`` items, 1 000 a call, each
    with request id ``<tag>-<n>``: one job serialised once and the items
    assembled from it (``CreateJobRequest``: field 1 the job, field 2 the
    request id), checked against the generated code on the first call."""
    job = bench_job(f"{tag}").SerializeToString()
    job_field = b"\x0a" + _varint(len(job)) + job
    out = []
    for start in range(0, jobs, BATCH):
        parts = []
        for i in range(start, min(start + BATCH, jobs)):
            rid = f"{tag}-{i}".encode()
            item = job_field + b"\x12" + _varint(len(rid)) + rid
            parts.append(b"\x0a" + _varint(len(item)) + item)
        out.append(b"".join(parts))
    parsed = scheduler_pb2.BatchCreateJobsRequest.FromString(out[0])
    assert parsed.items[0].request_id == f"{tag}-0" and parsed.items[0].job.name == tag
    return out


async def run_batches(addresses: list[str], api_key: str, batches: list[bytes], clients: int) -> dict:
    """Sends every request, ``clients`` at once, caller k to
    ``addresses[k % len(addresses)]``; UNAVAILABLE resent as is."""
    metadata = (("authorization", f"Bearer {api_key}"),)
    calls: Counter[str] = Counter()
    items: Counter[str] = Counter()
    ok_by_address: Counter[str] = Counter()
    resends = 0
    latencies: list[float] = []
    next_batch = 0

    async def caller(address: str) -> None:
        nonlocal next_batch, resends
        async with grpc.aio.insecure_channel(address) as channel:
            send = channel.unary_unary(
                "/tickwheel.v1.SchedulerService/BatchCreateJobs",
                request_serializer=lambda raw: raw,
                response_deserializer=scheduler_pb2.BatchCreateJobsResponse.FromString,
            )
            while next_batch < len(batches):
                i, next_batch = next_batch, next_batch + 1
                for attempt in range(RESENDS + 1):
                    began = time.perf_counter()
                    try:
                        response = await send(batches[i], metadata=metadata, timeout=120)
                    except grpc.aio.AioRpcError as error:
                        if error.code() == grpc.StatusCode.UNAVAILABLE and attempt < RESENDS:
                            resends += 1
                            await asyncio.sleep(0.2 * 2**attempt)
                            continue
                        calls[error.code().name] += 1
                        break
                    latencies.append(time.perf_counter() - began)
                    calls["OK"] += 1
                    items["created"] += response.created_count
                    items["existing"] += response.existing_count
                    ok_by_address[address] += response.created_count + response.existing_count
                    # Each result read only when some failed: the counts say how many
                    # (the caller's loop over 1 000 results is on a lone caller's path).
                    for result in response.results if response.failed_count else ():
                        if result.WhichOneof("result") == "error":
                            items[grpc.StatusCode(_code(result.error.code)).name] += 1
                    break

    began = time.perf_counter()
    await asyncio.gather(*(caller(addresses[k % len(addresses)]) for k in range(clients)))
    seconds = time.perf_counter() - began
    jobs_ok = items["created"] + items["existing"]
    item_failures = {k: v for k, v in items.items() if k not in ("created", "existing")}
    call_failures = {k: v for k, v in calls.items() if k != "OK"}
    return {
        "calls": sum(calls.values()), "clients": clients, "seconds": round(seconds, 2),
        "jobs_per_s": round(jobs_ok / seconds) if seconds else 0, "created": items["created"],
        "existing": items["existing"], "failures": sum(item_failures.values()) + BATCH * sum(call_failures.values()),
        "call_failures_by_code": call_failures, "item_failures_by_code": item_failures, "resends": resends,
        "call_latency_ms": latency_ms(latencies), "ok_by_address": dict(ok_by_address),
    }


def _code(value: int) -> tuple:
    return next((c.value for c in grpc.StatusCode if c.value[0] == value), grpc.StatusCode.UNKNOWN.value)


async def walk(fetch, pages_seen: list[float]) -> int:
    """Every page through ``fetch(token)``, each page's latency appended; returns the jobs seen."""
    token, jobs = "", 0
    while True:
        began = time.perf_counter()
        page = await fetch(token)
        pages_seen.append(time.perf_counter() - began)
        jobs += len(page.jobs)
        token = page.next_page_token
        if not token:
            return jobs


def page_figures(latencies: list[float], jobs: int, page_size: int = PAGE_SIZE) -> dict:
    """Every page's latency summed up: the first ten pages one by one
    (``first_pages_ms``: a user waits for the first), the median, p99, max
    and last page; and first, middle and last windows, each the median of a
    twentieth of the pages (3 to 25) so that one page slowed by the shared
    machine does not decide flatness (``last_over_first``, the goal's
    figure). ``max_over_median``: the slowest page over the median one."""
    width = max(3, min(25, len(latencies) // 20))

    def around(start: int) -> float:
        start = max(0, min(start, len(latencies) - width))
        return statistics.median(latencies[start : start + width])

    first, middle, last = around(0), around((len(latencies) - width) // 2), around(len(latencies) - width)
    median = statistics.median(latencies)
    return {
        "pages": len(latencies), "jobs": jobs, "page_size": page_size, "window_pages": width,
        "first_pages_ms": [round(value * 1000, 2) for value in latencies[:10]],
        "median_ms": round(median * 1000, 2), "last_page_ms": round(latencies[-1] * 1000, 2),
        "first_ms": round(first * 1000, 2), "middle_ms": round(middle * 1000, 2), "last_ms": round(last * 1000, 2),
        "last_over_first": round(last / first, 2) if first else None,
        "last_page_over_first_page": round(latencies[-1] / latencies[0], 2) if latencies[0] else None,
        "max_over_median": round(max(latencies) / median, 2) if median else None,
        "latency_ms": latency_ms(latencies), "seconds": round(sum(latencies), 2),
    }


async def run_paging(server: h.ServerProcess, api_key: str, page_size: int = PAGE_SIZE,
                     meter: h.Meter | None = None, url: str | None = None) -> dict:
    """Both walks, each with its page figures and, given ``meter``, the CPU
    of its processes over the walk (``cpu``: seconds and ms per page) and,
    given ``url``, what PostgreSQL compiled with JIT for it (``jit``:
    :meth:`_harness.Statements.jit`, per page) and its statements per page."""
    statements = h.Statements(url) if url is not None else None
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        tenant_md = (("authorization", f"Bearer {api_key}"),)
        walks = {
            "list_jobs": lambda token: scheduler.ListJobs(
                scheduler_pb2.ListJobsRequest(page_size=page_size, page_token=token), metadata=tenant_md, timeout=60),
            "search_jobs": lambda token: admin.SearchJobs(
                admin_pb2.SearchJobsRequest(page_size=page_size, page_token=token),
                metadata=h.admin_metadata(server), timeout=60),
        }
        out = {}
        for name, fetch in walks.items():
            latencies: list[float] = []
            before = meter.read() if meter is not None else None
            if statements is not None:
                statements.reset()
            jobs = await walk(fetch, latencies)
            out[name] = page_figures(latencies, jobs, page_size)
            if statements is not None:
                sql = statements.report(len(latencies), top=4)
                out[name]["statements_per_page"] = sql and sql["statements_per_execution"]
                out[name]["statements_per_page_by_kind"] = sql and {
                    kind: round(calls / max(len(latencies), 1), 3) for kind, calls in sql["by_kind"].items()}
                out[name]["jit"] = statements.jit(len(latencies))
            if meter is not None:
                cpu = h.Meter.difference(before, meter.read(), len(latencies))["cpu"]
                out[name]["cpu"] = {
                    role: {"cpu_s": figures["cpu_s"], "cpu_ms_per_page": figures["cpu_ms_per_execution"]}
                    for role, figures in cpu.items()}
    return out


def by_server(out: dict, fleet: h.Fleet) -> dict:
    """``out`` with its ``ok_by_address`` turned into ``ok_by_server``: what
    each server answered (0 for one that answered nothing)."""
    counts = out.pop("ok_by_address", {})
    return out | {"ok_by_server": {member: counts.get(address, 0)
                                   for member, address in zip(fleet.server_ids, fleet.addresses)}}


def run_server(args: argparse.Namespace, url: str, etcd_endpoint: str, folder: Path) -> dict:
    total = 3 * args.calls + args.batch_jobs + args.jobs
    profile = Path(args.profile) if args.profile else None
    fleet = h.start_fleet(folder, url, etcd_endpoint, SERVER_ID, args.servers)
    try:
        api_key = asyncio.run(create_tenant(fleet.first, max_jobs=total + 1000))
        out: dict[str, Any] = {"ready": asyncio.run(h.wait_fleet(fleet, 0))}
        meter = h.Meter({"server": fleet.pids, **({"postgres": [pg]} if (pg := h.postmaster_pid(url)) else {})},
                        members=fleet.members())
        meter.settle()  # the later servers' start and the partitions' split done
        addresses = fleet.addresses

        def sampled(phase: str) -> dict[str, int]:
            return {phase + name.removeprefix("server"): pid for name, pid in fleet.profiled().items()}

        one = fleet.pids[0] if len(fleet.pids) == 1 else None  # by thread: one server only
        phase = Phase(url, meter, one)
        with h.profiled(sampled("create_1"), profile):
            out["create_1"] = asyncio.run(run_create(addresses, api_key, args.calls, 1, "one"))
        out["create_1"] = by_server(out["create_1"], fleet) | phase.report(args.calls)

        phase = Phase(url, meter, one)
        with h.profiled(sampled("create_16"), profile):
            out["create_16"] = asyncio.run(run_create(addresses, api_key, args.calls, args.clients, "many"))
        out["create_16"] = by_server(out["create_16"], fleet) | phase.report(args.calls)

        go_load = build_go_load(folder)
        if go_load is None:
            out["create_16_go"] = {"skipped": GO_MISSING}
        else:
            phase = Phase(url, meter, one)
            with h.profiled(sampled("create_16_go"), profile):
                out["create_16_go"] = run_go_create(go_load, addresses, api_key, args.calls, args.clients, "go")
            callers = out["create_16_go"].pop("cpu_s")
            out["create_16_go"] = by_server(out["create_16_go"], fleet) | phase.report(args.calls)
            out["create_16_go"]["cpu"]["callers"] = {
                "cpu_s": round(callers, 2), "cpu_ms_per_job": round(callers * 1000 / args.calls, 4)}

        out["grpc_floor"], out["grpc_floor_go"] = run_grpc_floor(args, folder, go_load)

        batches = serialized_batches(args.batch_jobs, "batch")
        phase = Phase(url, meter)
        with h.profiled(sampled("batch"), profile):
            out["batch"] = asyncio.run(run_batches(addresses, api_key, batches, 1))
        out["batch"] = by_server(out["batch"], fleet) | phase.report(args.batch_jobs)
        del batches

        batches = serialized_batches(args.jobs, "load")
        phase = Phase(url, meter)
        with h.profiled(sampled("load"), profile):
            out["load"] = asyncio.run(run_batches(addresses, api_key, batches, args.load_clients))
        out["load"] = by_server(out["load"], fleet) | phase.report(args.jobs)
        out["load"]["jobs"] = args.jobs
        del batches

        with h.observe(url) as pg:
            out["jobs_stored"] = pg.execute(f"{h.OWN_QUERY} SELECT count(*) FROM jobs").fetchone()[0]
        out["paging"] = asyncio.run(run_paging(fleet.first, api_key, meter=meter, url=url))
        exits = fleet.terminate(30)
        out["exit_code"], out["exit_codes"] = exits[0], exits
        return out
    finally:
        fleet.stop()


def run_grpc_floor(args: argparse.Namespace, folder: Path, go_load: Path | None) -> tuple[dict, dict]:
    """The ``create_16`` clients against the gRPC floor (``--servers``
    floor processes, client k to floor k % N, as against the servers), with
    their CPU together; then the Go clients (``go_load``) likewise, or why
    they were skipped."""
    floors: list[peers.GrpcFloor] = []
    try:
        for _ in range(args.servers):
            floors.append(peers.start_grpc_floor(folder))
        addresses = [floor.address for floor in floors]

        def measured(run) -> dict:
            one = floors[0].process.pid if len(floors) == 1 else None
            threads = h.thread_cpu(one) if one is not None else None
            table = h.processes()
            before = sum(h.tree_cpu_s(floor.process.pid, table) for floor in floors)
            callers = time.process_time()
            out = run()
            if one is not None and threads is not None:
                out["server_threads"] = h.thread_cpu_between(threads, h.thread_cpu(one), args.calls)
            table = h.processes()
            server_s = sum(h.tree_cpu_s(floor.process.pid, table) for floor in floors) - before
            callers = out.pop("cpu_s", None) if "cpu_s" in out else time.process_time() - callers
            counts = out.pop("ok_by_address", {})
            per_call = {"server": server_s, "callers": callers}
            return out | {"servers": len(floors), "ok_by_server": [counts.get(a, 0) for a in addresses],
                          "cpu": {role: {"cpu_s": round(s, 2), "cpu_ms_per_job": round(s * 1000 / args.calls, 4)}
                                  for role, s in per_call.items()}}

        python = measured(lambda: asyncio.run(run_create(addresses, "unused", args.calls, args.clients, "floor")))
        go = (measured(lambda: run_go_create(go_load, addresses, "unused", args.calls, args.clients, "floor-go"))
              if go_load is not None else {"skipped": GO_MISSING})
    finally:
        for floor in floors:
            floor.stop()
    return python, go


# ------------------------------------------------------------------ Go clients

GO_MISSING = "no go command: bash scripts/install.sh provides one"


def go_command() -> str | None:
    """The go command ``scripts/install.sh`` provides (as it finds it), or None."""
    tools = ROOT / "sdk" / "go" / ".tools" / "go"
    for candidate in (str(tools), shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def build_go_load(folder: Path) -> Path | None:
    """``loadtest/createload`` built into ``folder``; None without a go command."""
    go = go_command()
    if go is None:
        return None
    binary = folder / "createload"
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=HERE / "createload", check=True,
                   stdout=subprocess.DEVNULL, stderr=(folder / "createload-build.log").open("w"))
    return binary


def run_go_create(binary: Path, addresses: list[str], api_key: str, calls: int, clients: int, tag: str) -> dict:
    """``calls`` CreateJob calls from ``clients`` Go SDK clients at once,
    client k to ``addresses[k % len(addresses)]`` (its JSON, with ``cpu_s``
    the Go process's CPU)."""
    done = subprocess.run([str(binary), "-address", ",".join(addresses), "-api-key", api_key, "-calls", str(calls),
                           "-clients", str(clients), "-tag", tag], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"createload exited {done.returncode}: {done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    out["seconds"] = round(out["seconds"], 2)
    out["jobs_per_s"] = round(out["jobs_per_s"])
    return out


# ------------------------------------------------------------------ pgqueuer


def pgqueuer_url(url: str) -> str:
    """A new database ``bench_pgqueuer`` on the server of ``url``."""
    with h.observe(url) as pg:
        pg.execute("DROP DATABASE IF EXISTS bench_pgqueuer")
        pg.execute("CREATE DATABASE bench_pgqueuer")
    return h.make_url(url).set(database="bench_pgqueuer").render_as_string(hide_password=False)


async def run_pgqueuer(url: str, jobs: int) -> dict:
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    conn = await psycopg.AsyncConnection.connect(h.conninfo(url), autocommit=True)
    try:
        queries = Queries(PsycopgDriver(conn))
        await queries.install()
        with h.observe(url) as pg:
            pg.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        pg = h.postmaster_pid(url)
        meter = h.Meter({"client": [os.getpid()], **({"postgres": [pg]} if pg else {})})
        phase = Phase(url, meter)
        payload = b'{"bench": true}'
        began = time.perf_counter()
        for start in range(0, jobs, BATCH):
            n = min(BATCH, jobs - start)
            await queries.enqueue(["bench"] * n, [payload] * n, [0] * n)
        seconds = time.perf_counter() - began
        with h.observe(url) as pg:
            stored = pg.execute(f"{h.OWN_QUERY} SELECT count(*) FROM pgqueuer").fetchone()[0]
        return {"jobs": jobs, "stored": stored, "seconds": round(seconds, 2), "jobs_per_s": round(jobs / seconds),
                "batch": BATCH, "connections": 1} | phase.report(jobs)
    finally:
        await conn.close()


def peer(args: argparse.Namespace, url: str) -> dict:
    if args.no_pgqueuer:
        return {"skipped": "--no-pgqueuer"}
    try:
        import pgqueuer  # noqa: F401
    except ImportError:
        return {"skipped": "pgqueuer is not installed: scripts/install.sh --bench"}
    from importlib.metadata import version

    return {"version": version("pgqueuer")} | asyncio.run(run_pgqueuer(pgqueuer_url(url), args.jobs))


# ------------------------------------------------------------------ main


def goals(server: dict) -> dict:
    c16, batch, load = server["create_16"], server["batch"], server["load"]
    paging = server["paging"]
    projected = round(1_000_000 / load["jobs_per_s"], 1) if load["jobs_per_s"] else None
    flat = max(p["last_over_first"] or 0 for p in paging.values())
    go = server["create_16_go"]
    return {
        "create_16_jobs_per_s": {"goal": GOAL["create_16_jobs_per_s"], "value": c16["jobs_per_s"],
                                 "met": c16["jobs_per_s"] >= GOAL["create_16_jobs_per_s"]},
        "create_16_go_jobs_per_s": {"goal": GOAL["create_16_jobs_per_s"], "value": go.get("jobs_per_s"),
                                    "failures": go.get("failures"),
                                    "met": "jobs_per_s" in go and go["jobs_per_s"] >= GOAL["create_16_jobs_per_s"]
                                    and go["failures"] == 0},
        "create_16_failures": {"goal": GOAL["create_16_failures"], "value": c16["failures"],
                               "met": c16["failures"] == 0},
        "batch_jobs_per_s": {"goal": GOAL["batch_jobs_per_s"], "value": batch["jobs_per_s"],
                             "met": batch["jobs_per_s"] >= GOAL["batch_jobs_per_s"]},
        "load_1m_s": {"goal": GOAL["load_1m_s"], "value": projected, "measured_jobs": load["jobs"],
                      "measured_s": load["seconds"], "failures": load["failures"],
                      "met": projected is not None and projected < GOAL["load_1m_s"] and load["failures"] == 0,
                      "note": "1 000 000 / the load phase's jobs/s (measured, not projected, when --jobs is 1 000 000)"},
        "paging_last_over_first": {"goal": GOAL["paging_last_over_first"], "value": flat,
                                   "met": flat <= GOAL["paging_last_over_first"]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs loaded through BatchCreateJobs (default 1 000 000)")
    parser.add_argument("--calls", type=int, default=2000, help="CreateJob calls in each of create_1 and create_16")
    parser.add_argument("--clients", type=int, default=16, help="concurrent CreateJob clients (default 16)")
    parser.add_argument("--batch-jobs", type=int, default=100_000, help="jobs in the one-caller batch phase")
    parser.add_argument("--load-clients", type=int, default=4, help="concurrent BatchCreateJobs callers of the load")
    parser.add_argument("--servers", type=int, default=1,
                        help="tickwheel server processes (default 1); client k calls server k %% N")
    parser.add_argument("--pg", help="a PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--etcd", help="etcd HOST:PORT; default: a throwaway etcd")
    parser.add_argument("--pg-set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the throwaway PostgreSQL (repeatable), for experiments")
    parser.add_argument("--logs", metavar="DIR", help="keep the server's log in DIR")
    parser.add_argument("--profile", metavar="DIR", help="sample the server with py-spy into DIR")
    parser.add_argument("--loop", choices=h.LOOPS, default="asyncio",
                        help="the servers' event loop (uvloop must be importable: it is no dependency of ours)")
    parser.add_argument("--no-pgqueuer", action="store_true", help="skip the pgqueuer peer")
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.calls, args.clients, args.batch_jobs, args.load_clients = 3000, 40, 4, 2000, 2
    if min(args.jobs, args.calls, args.clients, args.batch_jobs, args.load_clients) < 1:
        parser.error("--jobs, --calls, --clients, --batch-jobs and --load-clients must be positive")
    if not 1 <= args.servers <= 16:
        parser.error("--servers must be 1 to 16")
    try:
        pg_settings = h.parse_settings(args.pg_set)
    except ValueError as error:
        parser.error(str(error))
    began = time.perf_counter()
    with h.postgres(args.pg, pg_settings) as url, h.etcd(args.etcd) as etcd_endpoint, \
            h.workdir(args.logs, "tickwheel-bench-create-") as folder, h.server_loop(args.loop):
        h.reset_data(url)
        server = run_server(args, url, etcd_endpoint, folder)
        pgqueuer = peer(args, url)
        settings = h.server_settings(url)
    report = {
        "benchmark": "create",
        "smoke": args.smoke,
        "servers": args.servers,
        "loop": args.loop,
        "server": server,
        "pgqueuer": pgqueuer,
        "batch_over_pgqueuer": round(server["batch"]["jobs_per_s"] / pgqueuer["jobs_per_s"], 3)
        if "jobs_per_s" in pgqueuer else None,
        "create_16_over_floor": round(server["create_16"]["jobs_per_s"] / server["grpc_floor"]["jobs_per_s"], 3)
        if server["grpc_floor"]["jobs_per_s"] else None,
        "create_16_go_over_floor": round(server["create_16_go"]["jobs_per_s"] / server["grpc_floor_go"]["jobs_per_s"], 3)
        if server["grpc_floor_go"].get("jobs_per_s") and "jobs_per_s" in server["create_16_go"] else None,
        "goal": goals(server),
        "postgres": {**settings, "throwaway": not args.pg, "set": pg_settings},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "total_s": round(time.perf_counter() - began, 1),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
