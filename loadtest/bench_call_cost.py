"""Benchmark: where a 16-client CreateJob call's server CPU goes above the
gRPC floor, by building the real call path up from the floor a step at a
time and measuring the server's CPU a call at each step.

    .venv/bin/python loadtest/bench_call_cost.py [--calls 4000] [--clients 16] [--rounds 2]
                                                 [--steps floor,...] [--client go|python] [--full]
                                                 [--loop asyncio|uvloop] [--grpc-option NAME=VALUE] [--store-ms MS]
                                                 [--sync-threads N] [--smoke]

Prints one JSON object. Each step is a server process of its own (this
file run as ``serve STEP``), serving SchedulerService on a loopback port;
``--clients`` clients (the Go SDK's ``loadtest/createload`` by default,
``--client python`` for ``bench_create.py``'s Python clients) make
``--calls`` CreateJob calls at once after a warm-up of 200; the step's
figures: calls/s, the server process's CPU a call (``ms``) and by thread
(``_harness.thread_cpu``: the loop, the Python threads, gRPC's). Steps,
each adding one piece to the one before:

- ``floor``: ``peers.py``'s floor: a bare servicer answering the request's job.
- ``response``: answers a ``CreateJobResponse`` (the job, ``created``).
- ``options``: the server's ``grpc.aio.server`` options (``app.py``).
- ``guard``: registered through ``api.decoding.guard`` as ``app.py``
  registers it (decoding that never raises, unknown fields dropped, NUL
  refused, the start's check, the authenticator's refusal windows, the
  request read under an ``AwaitedRequests`` trusting the secrets it trusts).
- ``rpc``: the handler wrapped by ``api.status.rpc`` (errors to statuses).
- ``auth``: ``Authenticator.tenant`` with a request-rate limiter, its
  tenant store a fake (the key cached after the first call, as a hot
  client's is).
- ``request``: the request id checked, the call's ``_Pending`` built.
- ``coalescer``: ``CreateCoalescer.create`` with a write that answers each
  call's job at once on the loop.
- ``hop``: the same write through one executor thread (the store's hop).
- ``servicer``: the real ``SchedulerServicer.CreateJob`` (validation, the
  serialized answers), its job store a fake whose ``create_batch`` hops to
  an executor thread and answers every job created.
- ``full`` (with ``--full``): the real ``tickwheel server`` on a throwaway
  PostgreSQL and etcd (``bench_create.py``'s), its jobs stored.

Beside the ladder, other floors (name them in ``--steps``): ``generic``
(the floor with its methods served by the generic handler only, none
registered), ``registered`` (the floor with every service of the port
registered as ``tickwheel server`` registered them before they were
served by generic handlers only: SchedulerService, AdminService,
WorkerService and health, about 50 methods), ``sync`` (the floor's servicer on gRPC's thread-pool server,
``--sync-threads`` threads) and ``synchop`` (the same, each call handed to
an event loop in another thread and back); see :data:`FLOORS`.

``--rounds`` repeats the ladder, steps in order, so neighbouring steps are
measured side by side; the medians are given with every round's figure.
``calls_a_write``: the calls over the writes the step's coalescer started
(the coalescer's steps): with a write that takes no time each call is
written nearly alone, so ``--store-ms`` holds the fake store's thread
that long a write (a sleep: wall time, no CPU) and the groups form as
they do on PostgreSQL. ``--loop uvloop`` runs the steps' servers and
the real server (``full``, through ``_harness.server_loop``) on uvloop
(no dependency of ours: it must be importable, e.g. from a ``pip install
--target`` directory on ``PYTHONPATH``); ``--grpc-option``
adds a ``grpc.aio.server`` option to every step's server. ``--smoke``
runs tiny sizes so CI keeps the script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _harness as h

HERE = Path(__file__).resolve().parent
STEPS = ("floor", "response", "options", "guard", "rpc", "auth", "request", "coalescer", "hop", "servicer")
FLOORS = ("sync", "synchop", "generic", "registered")
"""Floors of another server, beside the ladder (not steps of it): ``sync``
is the floor's servicer on gRPC's thread-pool server (``grpc.server``,
``--sync-threads`` threads), ``synchop`` the same whose handler hands each
call to an event loop in another thread and waits for its answer (what a
thread-pool front to the asyncio server's coalescer and store would pay
at least). ``generic``: the floor on ``grpc.aio`` with its methods
registered only as a generic handler (not as registered methods, whose
pending requests grpc.aio's main loop waits on together, one each, every
call); ``registered`` the floor with the port's services (SchedulerService,
AdminService, WorkerService, health: about 50 methods) registered the
generated way, as registered methods too."""
SYNC_THREADS = "TICKWHEEL_BENCH_SYNC_THREADS"
WARMUP = 200
EXTRA_OPTIONS = "TICKWHEEL_BENCH_GRPC_OPTIONS"
"""The environment variable the ``serve`` processes read ``--grpc-option`` from (a JSON list of pairs)."""
LOOP = "TICKWHEEL_BENCH_LOOP"
STORE_MS = "TICKWHEEL_BENCH_STORE_MS"
API_KEY = "twk_benchkey0_" + "s" * 32
"""A secret of the API key's shape (``tokens.parse_secret`` reads its id); the fake store accepts it."""


# ------------------------------------------------------------------ the servers


def _servicer(step: str):
    """The SchedulerService servicer of ``step``, and the server options."""
    from tickwheel.shared.clock import SystemClock
    from tickwheel.v1 import scheduler_pb2, scheduler_pb2_grpc
    from tickwheel_server.api import validate
    from tickwheel_server.api.scheduler import SchedulerServicer, _Pending
    from tickwheel_server.api.status import rpc
    from tickwheel_server.auth.authenticator import Authenticator
    from tickwheel_server.auth.ratelimit import RequestRateLimiter
    from tickwheel_server.coalescer import CreateCoalescer
    from tickwheel_server.store.jobcreate import CREATED
    from tickwheel_server.store.tenants import Tenant

    rank = STEPS.index(step)
    clock = SystemClock()
    executor = ThreadPoolExecutor(1, thread_name_prefix="store")
    store_s = float(os.environ.get(STORE_MS, "0")) / 1000

    def store_work() -> None:
        if store_s:
            time.sleep(store_s)  # the store's wall time, not its CPU: callers queue behind it as they do

    class Tenants:
        async def verify_key_until(self, secret):
            return (Tenant("bench", requests_per_second=1_000_000), None) if secret == API_KEY else None

    class Workers:
        async def verify(self, secret):
            return None

    auth = Authenticator(Tenants(), Workers(), "admin-token", clock,
                         rate_limiter=RequestRateLimiter(clock))

    if step == "servicer":

        import sqlalchemy as sa

        class Jobs:
            engine = sa.create_engine("postgresql+psycopg://bench@127.0.0.1:1/unused")  # never connected

            def __init__(self) -> None:
                self.clock = clock

            async def create_batch(self, batch, check=None):
                await asyncio.get_running_loop().run_in_executor(executor, store_work)
                return [CREATED] * len(batch), clock.now()

        servicer = SchedulerServicer(auth, Jobs(), clock)
        servicer.coalescer = servicer.creates
        return servicer

    def answer(job):
        return scheduler_pb2.CreateJobResponse(job=job, created=True)

    async def write(tenant, items):
        if rank >= STEPS.index("hop"):
            await asyncio.get_running_loop().run_in_executor(executor, store_work)
        return [answer(pending.job) for pending, _ in items]

    coalescer = CreateCoalescer(write)

    class Ladder(scheduler_pb2_grpc.SchedulerServiceServicer):
        async def CreateJob(self, request, context):  # noqa: N802 (the gRPC method's name)
            if rank == 0:
                return request.job
            if rank < STEPS.index("auth"):
                return answer(request.job)
            tenant = await auth.tenant(context)
            if rank < STEPS.index("request"):
                return answer(request.job)
            request_id = validate.check_request_id(request.request_id)
            pending = _Pending(tenant.name, request.job, clock.now())
            if rank < STEPS.index("coalescer"):
                return answer(pending.job)
            return await coalescer.create(pending, request_id)

    if rank >= STEPS.index("rpc"):
        Ladder.CreateJob = rpc(Ladder.CreateJob)
    ladder = Ladder()
    ladder.coalescer = coalescer
    ladder._auth = auth  # its windows are the guard's, as SchedulerServicer's are
    return ladder


def serve_sync(step: str) -> None:
    """Serve floor variant ``step`` (:data:`FLOORS`) on gRPC's thread-pool
    server; print ``ready PORT`` and serve until killed."""
    import threading

    import grpc

    from tickwheel.v1 import scheduler_pb2_grpc

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="loop", daemon=True).start()

    async def answer(job):
        return job

    class Echo(scheduler_pb2_grpc.SchedulerServiceServicer):
        def CreateJob(self, request, context):  # noqa: N802 (the gRPC method's name)
            if step == "sync":
                return request.job
            return asyncio.run_coroutine_threadsafe(answer(request.job), loop).result()

    options = json.loads(os.environ.get(EXTRA_OPTIONS, "[]"))
    server = grpc.server(ThreadPoolExecutor(int(os.environ.get(SYNC_THREADS, "16"))), options=options or None)
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"ready {port}", flush=True)
    server.wait_for_termination()


async def serve_generic(registered: bool) -> None:
    """The floor's servicer on ``grpc.aio``, registered as a generic handler
    only, or (``registered``) with the port's other services, each the
    generated way (as registered methods too)."""
    import grpc.aio
    from grpc_health.v1 import health, health_pb2_grpc

    from tickwheel.v1 import admin_pb2_grpc, scheduler_pb2_grpc, worker_pb2_grpc

    class Echo(scheduler_pb2_grpc.SchedulerServiceServicer):
        async def CreateJob(self, request, context):  # noqa: N802 (the gRPC method's name)
            return request.job

    class GenericOnly:
        def __init__(self, server) -> None:
            self.server = server

        def add_generic_rpc_handlers(self, handlers) -> None:
            self.server.add_generic_rpc_handlers(handlers)

        def add_registered_method_handlers(self, service, handlers) -> None:
            """Not registered: the generic handler serves them."""

    server = grpc.aio.server()
    if registered:
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(Echo(), server)
        admin_pb2_grpc.add_AdminServiceServicer_to_server(admin_pb2_grpc.AdminServiceServicer(), server)
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(worker_pb2_grpc.WorkerServiceServicer(), server)
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    else:
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(Echo(), GenericOnly(server))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"ready {port}", flush=True)
    await server.wait_for_termination()


async def serve(step: str) -> None:
    """Serve ``step``'s SchedulerService on a free loopback port; print
    ``ready PORT`` and serve until killed."""
    import grpc.aio

    from tickwheel.v1 import scheduler_pb2_grpc
    from tickwheel_server.api import decoding
    from tickwheel_server.api.awaited import AwaitedRequests

    if step in ("generic", "registered"):
        await serve_generic(registered=step == "registered")
        return
    rank = STEPS.index(step)
    options = [("grpc.so_reuseport", 0), ("grpc.keepalive_time_ms", 30_000)] if rank >= STEPS.index("options") else []
    options += json.loads(os.environ.get(EXTRA_OPTIONS, "[]"))
    server = grpc.aio.server(options=options or None)
    servicer = _servicer(step)
    if rank >= STEPS.index("guard"):  # as app.py registers it: the authenticator's windows, one awaited set
        awaited = AwaitedRequests()
        awaited.trusted = servicer._auth.windows.trusted
        registration = decoding.guard(server, windows=servicer._auth.windows, requests=awaited)
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(
        servicer, registration if rank >= STEPS.index("guard") else server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    # SIGUSR1: print the writes the coalescer started so far (calls a write).
    asyncio.get_running_loop().add_signal_handler(
        signal.SIGUSR1, lambda: print(f"writes {servicer.coalescer.writes}", flush=True))
    print(f"ready {port}", flush=True)
    await server.wait_for_termination()


def start(step: str, folder: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    env = os.environ | {EXTRA_OPTIONS: json.dumps([option.split("=", 1) for option in args.grpc_option])}
    if args.loop == "uvloop":
        env[LOOP] = "uvloop"
    env[SYNC_THREADS] = str(args.sync_threads)
    env[STORE_MS] = str(args.store_ms)
    process = subprocess.Popen([sys.executable, __file__, "serve", step], stdout=subprocess.PIPE, env=env,
                               stderr=(folder / f"{step}.log").open("a"), stdin=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    if not line.startswith("ready "):
        process.kill()
        raise RuntimeError(f"step {step} did not start:\n{(folder / f'{step}.log').read_text()[-3000:]}")
    return process, f"127.0.0.1:{int(line.split()[1])}"


# ------------------------------------------------------------------ the clients


def calls_of(args: argparse.Namespace, go_load: Path | None, address: str, api_key: str, calls: int, tag: str) -> dict:
    import bench_create

    if args.client == "go":
        return bench_create.run_go_create(go_load, [address], api_key, calls, args.clients, tag)
    return asyncio.run(bench_create.run_create([address], api_key, calls, args.clients, tag))


def writes_of(process: subprocess.Popen | None) -> int | None:
    """The writes the step's coalescer started so far (None for the real server)."""
    if process is None:
        return None
    process.send_signal(signal.SIGUSR1)
    return int(process.stdout.readline().split()[1])


def measure(args: argparse.Namespace, go_load: Path | None, pid: int, address: str, api_key: str, tag: str,
            process: subprocess.Popen | None = None) -> dict:
    """Warm up, then ``--calls`` calls: calls/s, failures, the server's CPU
    a call, by thread, and calls a write (the steps through the coalescer)."""
    calls_of(args, go_load, address, api_key, min(WARMUP, args.calls), f"{tag}-warm")
    threads = h.thread_cpu(pid)
    writes = writes_of(process)
    before = h.tree_cpu_s(pid)
    out = calls_of(args, go_load, address, api_key, args.calls, tag)
    cpu = h.tree_cpu_s(pid) - before
    by_thread = h.thread_cpu_between(threads, h.thread_cpu(pid), args.calls)
    writes = None if writes is None else writes_of(process) - writes
    return {"calls_per_s": out["jobs_per_s"], "failures": out["failures"],
            "ms": round(cpu * 1000 / args.calls, 4), "threads": by_thread,
            "p50_ms": out.get("latency_ms", {}).get("p50"),
            "calls_a_write": round(args.calls / writes, 2) if writes else None}


def ladder_round(args, go_load, folder: Path, n: int, full: dict | None) -> dict:
    out = {}
    for step in args.steps:
        process, address = start(step, folder, args)
        try:
            counted = None if step in FLOORS else process  # no coalescer there to count writes
            out[step] = measure(args, go_load, process.pid, address, API_KEY, f"{step}-{n}", counted) | {
                "load": h.load_average()[0]}
        finally:
            process.kill()
            process.wait(10)
    if full is not None:
        out["full"] = measure(args, go_load, full["pid"], full["address"], full["api_key"], f"full-{n}") | {
            "load": h.load_average()[0]}
    return out


@contextlib.contextmanager
def real_server(args: argparse.Namespace, folder: Path):
    """The real server on a throwaway PostgreSQL and etcd, or None without ``--full``."""
    if not args.full:
        yield None
        return
    import bench_create

    with h.postgres(None) as url, h.etcd(None) as etcd_endpoint:
        h.reset_data(url)
        with h.server_loop(args.loop):
            fleet = h.start_fleet(folder, url, etcd_endpoint, bench_create.SERVER_ID, 1)
        try:
            api_key = asyncio.run(bench_create.create_tenant(fleet.first, max_jobs=10_000_000))
            asyncio.run(h.wait_fleet(fleet, 0))
            yield {"pid": fleet.pids[0], "address": fleet.addresses[0], "api_key": api_key}
        finally:
            fleet.stop()


def median_of(values: list[float | None]) -> float | None:
    """The median of the values given (None for none)."""
    given = [value for value in values if value is not None]
    return round(statistics.median(given), 2) if given else None


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["serve"]:
        if sys.argv[2] in ("sync", "synchop"):
            serve_sync(sys.argv[2])
        elif os.environ.get(LOOP) == "uvloop":
            import uvloop

            uvloop.run(serve(sys.argv[2]))
        else:
            asyncio.run(serve(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--client", choices=("go", "python"), default="go")
    parser.add_argument("--grpc-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an extra grpc.aio.server option for every step's server (repeatable; a string value)")
    parser.add_argument("--loop", choices=h.LOOPS, default="asyncio",
                        help="the servers' event loop (uvloop must be importable: it is no dependency of ours)")
    parser.add_argument("--store-ms", type=float, default=0.0,
                        help="the fake store's write holds its thread this long (a sleep), as a real write's wall "
                             "time does, so the coalescer's groups form as they do on PostgreSQL")
    parser.add_argument("--sync-threads", type=int, default=16,
                        help="the thread-pool server's threads (the floors sync and synchop)")
    parser.add_argument("--full", action="store_true", help="also the real server on PostgreSQL")
    parser.add_argument("--logs", metavar="DIR", help="keep the servers' logs in DIR")
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.calls, args.clients, args.rounds = 40, 4, 1
    args.steps = [s for s in args.steps.split(",") if s]
    if unknown := set(args.steps) - set(STEPS) - set(FLOORS):
        parser.error(f"unknown steps: {sorted(unknown)}")
    import bench_create

    began = time.perf_counter()
    with h.workdir(args.logs, "tickwheel-bench-call-cost-") as folder:
        go_load = bench_create.build_go_load(folder) if args.client == "go" else None
        if args.client == "go" and go_load is None:
            raise SystemExit(bench_create.GO_MISSING)
        with real_server(args, folder) as full:
            rounds = [ladder_round(args, go_load, folder, n, full) for n in range(args.rounds)]
    steps = list(rounds[0])
    medians = {step: {"ms": round(statistics.median(r[step]["ms"] for r in rounds), 4),
                      "calls_per_s": round(statistics.median(r[step]["calls_per_s"] for r in rounds)),
                      "calls_a_write": median_of([r[step].get("calls_a_write") for r in rounds])}
               for step in steps}
    previous = None
    for step in steps:
        medians[step]["ms_over_previous"] = None if previous is None else round(
            medians[step]["ms"] - medians[previous]["ms"], 4)
        previous = step
    json.dump({"benchmark": "call_cost", "smoke": args.smoke, "client": args.client, "store_ms": args.store_ms,
               "loop": args.loop, "grpc_options": args.grpc_option, "clients": args.clients, "calls": args.calls,
               "medians": medians, "rounds": rounds, "machine": {"cpus": os.cpu_count()},
               "total_s": round(time.perf_counter() - began, 1)}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
