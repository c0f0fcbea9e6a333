"""A seeded chaos run: every fault at once over a small real cluster, then an
exact audit of every occurrence (issue 18, "a seeded chaos run").

The single-fault tests (test_dispatch_faults.py, test_armed_faults.py,
test_fault_outages.py, test_fault_freeze.py, test_worker_faults.py,
test_etcd_restart.py) each inject one fault into a quiet cluster. This one
mixes them, as production does:

- the cluster: three `tickwheel server` processes (on fixed ports, so that a
  restarted one is found again) on the test's PostgreSQL and etcd, three
  `tickwheel worker` processes each holding a credential for two of three
  tenants (so every tenant is served by two workers, and a worker may run
  for a tenant that is not the execution's);
- the jobs: recurring cron jobs in several IANA zones (cron's resolution is a
  minute, so the window is stretched to hold a minute boundary; some name the
  zone's current local hour, one an hour the zone is not in, which must never
  fire), one with the overlap policy QUEUE_ONE, one-off jobs due throughout
  the run calling targets that answer at once, after 0.3 s, after 1.5 s, fail
  their first attempt, or always fail, and pairs of one-offs due at the same
  instant under one concurrency key of limit 1;
- the faults, from a seed (printed; ``TICKWHEEL_CHAOS_SEED=N`` replays its
  plan): SIGKILL of a server and its restart, SIGKILL of a worker and its
  restart, SIGSTOP of a server past its session TTL and SIGCONT, a
  PostgreSQL restart and an etcd restart (killed), each at least once, a few
  more drawn at random, overlapping sometimes (at most two servers and two
  workers down at once).

After a quiet tail the audit computes what should have happened without the
server's schedule engine (croniter and zoneinfo for the cron jobs, the
requested instant for one-offs) and checks, per occurrence, that it has
exactly one execution under its idempotency key, in the terminal state its
target implies (succeeded on attempt 1, on attempt 2 after a failing first
attempt, dead after two failed attempts), never handed out or started before
its due instant (the store's instants), with every attempt run by a worker
holding a credential for its tenant (the reaper's ``lost`` rows name no
worker: a hand-out does not write its worker to the store); that no execution exists that is no
expected occurrence, nothing was skipped, the target saw each key it
should and no other, the engine's own expectation agrees with the
independent one, and the pairs under one concurrency key never ran at once
(when neither was requeued). It fails with one line per broken occurrence.
"""

from __future__ import annotations

import heapq
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from zoneinfo import ZoneInfo

import grpc
import pytest
from croniter import croniter
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support import audit
from tests.support.etcd import EtcdServer
from tests.support.faults import (
    HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, LOOPBACK, PARTITIONS, SESSION_TTL, count, eventually, migrated_store, now,
)
from tests.support.postgres import PostgresServer
from tests.support.server import ServerProcess, start_cluster_server, start_worker_process
from tickwheel.shared.ids import execution_id, from_us, to_us

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

SEED_VARIABLE = "TICKWHEEL_CHAOS_SEED"
TENANTS = ("acme", "globex", "initech")
WORKERS = {"w-acme-globex": ("acme", "globex"), "w-globex-initech": ("globex", "initech"),
           "w-initech-acme": ("initech", "acme")}  # fmt: skip
SERVERS = ("s0", "s1", "s2")
MIN_RUN = 40.0
"""Seconds from the first fault's earliest instant to the end of the window, at least."""
MUTEX_KEY = "chaos-mutex"
JITTER_WINDOW = 5


# --------------------------------------------------------------------------- the target


@dataclass
class Call:
    key: str
    attempt: int
    delivery: int
    began: float
    ended: float = 0.0
    status: int = 0


class ChaosTarget:
    """An HTTP target on loopback recording every call (key, attempt,
    delivery, when it began and ended, what it answered), answering by path:
    ``/ok`` at once; ``/brief`` after 0.3 s; ``/hold`` after 1.5 s;
    ``/flaky`` 500 on attempt 1, 200 after; ``/fail`` 500 always."""

    def __init__(self) -> None:
        self.deliveries = audit.Deliveries()
        self.calls: list[Call] = []
        self._closing = threading.Event()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                call = Call(self.headers.get("Idempotency-Key", ""), int(self.headers.get("Tickwheel-Attempt", 0)),
                            int(self.headers.get("Tickwheel-Delivery", 0)), time.time())  # fmt: skip
                target.deliveries.saw(call.key, call.attempt, call.delivery)
                target.calls.append(call)
                status = 200
                if self.path == "/hold":
                    target._closing.wait(1.5)
                elif self.path == "/brief":
                    target._closing.wait(0.3)
                elif self.path == "/flaky" and call.attempt <= 1:
                    status = 500
                elif self.path == "/fail":
                    status = 500
                call.ended, call.status = time.time(), status
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the worker went away meanwhile

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()


OUTCOME = {"/ok": ("succeeded", 1), "/brief": ("succeeded", 1), "/hold": ("succeeded", 1),
           "/flaky": ("succeeded", 2), "/fail": ("dead", 2)}  # fmt: skip
"""The terminal state and final attempt number each target path implies."""


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Fault:
    kind: str  # kill_server, freeze_server, kill_worker, restart_postgres, restart_etcd
    subject: str  # a server or worker id, "postgres" or "etcd"
    at: float  # seconds after the run's start
    lasts: float  # seconds until the restart (or SIGCONT)

    def __str__(self) -> str:
        return f"{self.at:5.1f}s +{self.lasts:.1f}s {self.kind} {self.subject}"


KINDS = ("kill_server", "freeze_server", "kill_worker", "restart_postgres", "restart_etcd")
DURATION = {
    "kill_server": (0.5, 4.0),
    "freeze_server": (SESSION_TTL + 1.0, SESSION_TTL + 3.0),  # past the session TTL
    "kill_worker": (0.5, 3.0),
    "restart_postgres": (0.5, 3.0),
    "restart_etcd": (0.5, SESSION_TTL + 2.0),  # sometimes within the TTL, sometimes past it
}


def fault_plan(rng: random.Random, span: float) -> list[Fault]:
    """Each kind of fault once and one to three more, at instants in
    ``[1, span)``; one subject is never hit twice at once, at most two
    servers and two workers are down (or frozen) at once."""
    kinds = list(KINDS) + [rng.choice(KINDS) for _ in range(rng.randint(1, 3))]
    rng.shuffle(kinds)
    plan: list[Fault] = []

    def busy(fault: Fault, others: list[Fault]) -> list[Fault]:
        return [o for o in others if o.at < fault.at + fault.lasts + 0.5 and fault.at < o.at + o.lasts + 0.5]

    for kind in kinds:
        for _ in range(100):
            low, high = DURATION[kind]
            lasts = round(rng.uniform(low, high), 1)
            at = round(rng.uniform(1.0, span - lasts), 1)
            if kind in ("kill_server", "freeze_server"):
                subject = rng.choice(SERVERS)
            elif kind == "kill_worker":
                subject = rng.choice(sorted(WORKERS))
            else:
                subject = kind.removeprefix("restart_")
            fault = Fault(kind, subject, at, lasts)
            overlapping = busy(fault, plan)
            if any(o.subject == subject for o in overlapping):
                continue
            if subject in SERVERS and sum(o.subject in SERVERS for o in overlapping) >= 2:
                continue
            if subject in WORKERS and sum(o.subject in WORKERS for o in overlapping) >= 2:
                continue
            plan.append(fault)
            break
    return sorted(plan, key=lambda f: f.at)


# --------------------------------------------------------------------------- the jobs


@dataclass
class PlannedJob:
    tenant: str
    name: str
    path: str
    schedule: str  # "once" or "cron"
    once_at: datetime | None = None
    expression: str = ""
    zone: str = "UTC"
    jitter: int = 0  # seconds of jitter window; 0 means exact
    overlap: int = job_pb2.OVERLAP_POLICY_SKIP
    mutex: bool = False
    bounded: bool = True  # ends at the window's end (a job that would never fire there is refused)
    job_id: str = ""

    def proto(self, url: str, end_at: datetime) -> job_pb2.Job:
        job = job_pb2.Job(name=self.name, target=job_pb2.Target(http=job_pb2.HttpTarget(url=url + self.path)),
                          overlap_policy=self.overlap)  # fmt: skip
        if self.schedule == "once":
            job.schedule.once_at.FromDatetime(self.once_at)
        else:
            job.schedule.cron.expression = self.expression
            job.schedule.cron.time_zone = self.zone
            if self.bounded:
                job.end_at.FromDatetime(end_at)
            if self.jitter:
                job.jitter.window.FromSeconds(self.jitter)
            else:
                job.jitter.exact = True
        job.retry_policy.max_attempts = 2 if self.path == "/fail" else 5
        job.retry_policy.initial_backoff.FromMilliseconds(100)
        job.retry_policy.max_backoff.FromMilliseconds(300)
        if self.mutex:
            job.concurrency_keys.add(key=MUTEX_KEY, limit=1)
        return job


def local_hour(zone: str, at: datetime, shift: int = 0) -> int:
    return (at.astimezone(ZoneInfo(zone)).hour + shift) % 24


def job_plan(rng: random.Random, start: datetime, until: datetime) -> list[PlannedJob]:
    """The recurring jobs (their hour fields from the zones' local hour at
    the window's middle) and one-offs due across ``[start + 1 s, until - 2 s)``."""
    middle = start + (until - start) / 2
    jobs = [
        PlannedJob("acme", "every-minute-london", "/brief", "cron", expression="* * * * *", zone="Europe/London",
                   jitter=JITTER_WINDOW),
        PlannedJob("acme", "queue-one", "/hold", "cron", expression="* * * * *", overlap=job_pb2.OVERLAP_POLICY_QUEUE_ONE),
        PlannedJob("globex", "this-hour-new-york", "/ok", "cron",
                   expression=f"* {local_hour('America/New_York', middle)} * * *", zone="America/New_York"),
        PlannedJob("globex", "this-hour-kathmandu-flaky", "/flaky", "cron",
                   expression=f"* {local_hour('Asia/Kathmandu', middle)} * * *", zone="Asia/Kathmandu"),
        PlannedJob("initech", "this-hour-lord-howe", "/ok", "cron",
                   expression=f"* {local_hour('Australia/Lord_Howe', middle)} * * *", zone="Australia/Lord_Howe",
                   jitter=JITTER_WINDOW),
        PlannedJob("initech", "other-hour-kolkata", "/ok", "cron",
                   expression=f"* {local_hour('Asia/Kolkata', middle, 12)} * * *", zone="Asia/Kolkata", bounded=False),
    ]  # fmt: skip
    span_ms = int((until - start).total_seconds() * 1000) - 3000
    paths = ["/ok"] * 8 + ["/brief"] * 4 + ["/hold"] * 4 + ["/flaky"] * 3 + ["/fail"]
    for tenant in TENANTS:
        chosen = ["/flaky", "/fail"] + [rng.choice(paths) for _ in range(12)]
        for index, path in enumerate(chosen):
            at = start + timedelta(milliseconds=1000 + rng.randrange(span_ms))
            jobs.append(PlannedJob(tenant, f"once-{index}{path.replace('/', '-')}", path, "once", once_at=at))
    for index in range(2):  # two pairs under one concurrency key, each pair due at one instant
        at = start + timedelta(milliseconds=1000 + rng.randrange(span_ms))
        for side in "ab":
            jobs.append(PlannedJob("acme", f"mutex-{index}{side}", "/hold", "once", once_at=at, mutex=True))
    return jobs


def expected_nominals(job: PlannedJob, created: datetime, until: datetime) -> list[datetime]:
    """The job's nominal instants in the window, computed without the
    server's engine: the requested instant, or croniter in the job's zone
    from its creation (exclusive) up to ``until`` (its ``end_at``, exclusive)."""
    if job.schedule == "once":
        return [job.once_at]
    found = []
    it = croniter(job.expression, created.astimezone(ZoneInfo(job.zone)))
    while (fire := it.get_next(datetime).astimezone(timezone.utc)) < until:
        found.append(fire)
    return found


# --------------------------------------------------------------------------- the cluster


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """The servers (each on a fixed port) and workers of the run, started,
    killed, frozen and restarted by id; everything is stopped (and resumed,
    if frozen) when ``stack`` closes."""

    def __init__(self, stack: ExitStack, tmp_path: Path, store: str, etcd: str) -> None:
        self.stack, self.tmp_path, self.store, self.etcd = stack, tmp_path, store, etcd
        self.ports = {sid: free_port() for sid in SERVERS}
        self.servers: dict[str, ServerProcess] = {}
        self.frozen: set[str] = set()
        self.workers: dict[str, subprocess.Popen] = {}
        self.credentials: dict[str, str] = {}
        self.config = tmp_path / "chaos.toml"
        self.config.write_text(f"heartbeat_interval = {HEARTBEAT_INTERVAL}\nheartbeat_timeout = {HEARTBEAT_TIMEOUT}\n")
        stack.callback(self._resume_frozen)

    def _resume_frozen(self) -> None:
        for sid in list(self.frozen):
            self.servers[sid].process.send_signal(signal.SIGCONT)

    def start_server(self, sid: str) -> None:
        self.servers[sid] = start_cluster_server(
            self.stack, self.tmp_path, self.store, self.etcd, f"{sid}-{os.getpid()}",
            "--partition-count", str(PARTITIONS), "--config", str(self.config), "--allow-target-network", LOOPBACK,
            "--listen", f"127.0.0.1:{self.ports[sid]}", session_ttl=SESSION_TTL,
        )  # fmt: skip

    def kill_server(self, sid: str) -> None:
        self.servers[sid].kill()

    def freeze(self, sid: str) -> None:
        self.servers[sid].process.send_signal(signal.SIGSTOP)
        self.frozen.add(sid)

    def thaw(self, sid: str) -> None:
        self.servers[sid].process.send_signal(signal.SIGCONT)
        self.frozen.discard(sid)

    def start_worker(self, wid: str) -> None:
        index = sorted(WORKERS).index(wid)
        order = SERVERS[index:] + SERVERS[:index]  # each worker prefers another server
        address = "ipv4:" + ",".join(f"127.0.0.1:{self.ports[sid]}" for sid in order)
        self.workers[wid] = start_worker_process(self.stack, self.tmp_path, address, self.credentials[wid], wid,
                                                 "--slots", "4", "--allow-target-network", LOOPBACK)  # fmt: skip

    def kill_worker(self, wid: str) -> None:
        self.workers[wid].kill()
        self.workers[wid].wait(10)

    def logs(self) -> str:
        return "".join(server.log() for server in self.servers.values())

    def admin(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        server = self.servers[SERVERS[0]]
        return server.address, (("authorization", f"Bearer {server.admin_token}"),)


def make_tenants(cluster: Cluster) -> dict[str, str]:
    """The tenants (their API keys) and each worker's credential for its two tenants."""
    address, meta = cluster.admin()
    keys = {}
    with grpc.insecure_channel(address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        for name in TENANTS:
            keys[name] = admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=name)),
                                            metadata=meta, timeout=10).api_key.secret  # fmt: skip
        for wid, tenants in WORKERS.items():
            cluster.credentials[wid] = admin.IssueWorkerCredential(
                admin_pb2.IssueWorkerCredentialRequest(tenants=list(tenants), http=True), metadata=meta, timeout=10
            ).credential.secret
    return keys


def create(cluster: Cluster, keys: dict[str, str], jobs: list[PlannedJob], url: str, until: datetime,
           rng: random.Random) -> None:
    """Create every job, each through a server drawn from the seed; sets ``job_id``."""
    stubs = {}
    with ExitStack() as channels:
        for sid, server in cluster.servers.items():
            stubs[sid] = scheduler_pb2_grpc.SchedulerServiceStub(channels.enter_context(grpc.insecure_channel(server.address)))
        for index, job in enumerate(jobs):
            stub = stubs[rng.choice(SERVERS)]
            reply = stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job.proto(url, until), request_id=f"chaos-{index}"),
                                   metadata=(("authorization", f"Bearer {keys[job.tenant]}"),), timeout=10)  # fmt: skip
            job.job_id = reply.job.id


# --------------------------------------------------------------------------- running the faults


def run_faults(cluster: Cluster, plan: list[Fault], start: float, postgres: PostgresServer, etcd: EtcdServer,
               log: list[str]) -> None:
    """Apply ``plan`` in time from ``start`` (monotonic): each fault and,
    ``lasts`` seconds later, its end. A server restart due while PostgreSQL
    or etcd is down waits until they are back (a server starting on a dead
    store is another test). Appends what it did, when, to ``log``."""
    actions: list[tuple[float, int, str, str]] = []
    for number, fault in enumerate(plan):
        heapq.heappush(actions, (start + fault.at, number * 2, fault.kind, fault.subject))
        heapq.heappush(actions, (start + fault.at + fault.lasts, number * 2 + 1, "end_" + fault.kind, fault.subject))
    down: set[str] = set()
    do: dict[str, Callable[[str], None]] = {
        "kill_server": cluster.kill_server, "end_kill_server": cluster.start_server,
        "freeze_server": cluster.freeze, "end_freeze_server": cluster.thaw,
        "kill_worker": cluster.kill_worker, "end_kill_worker": cluster.start_worker,
        "restart_postgres": lambda _: postgres.stop(mode="fast"), "end_restart_postgres": lambda _: postgres.start(),
        "restart_etcd": lambda _: etcd.stop(signal.SIGKILL), "end_restart_etcd": lambda _: etcd.start(),
    }  # fmt: skip
    while actions:
        when, order, action, subject = heapq.heappop(actions)
        if action == "end_kill_server" and down & {"postgres", "etcd"}:
            heapq.heappush(actions, (when + 0.2, order, action, subject))
            continue
        delay = when - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # the plan's clock: the faults are the test's own actions
        do[action](subject)
        if action in ("restart_postgres", "restart_etcd"):
            down.add(subject)
        elif action in ("end_restart_postgres", "end_restart_etcd"):
            down.discard(subject)
        log.append(f"{time.monotonic() - start:5.1f}s {action} {subject}")


# --------------------------------------------------------------------------- the audit


def chaos_problems(jobs: list[PlannedJob], snapshot: audit.Snapshot, until: datetime, target: ChaosTarget) -> list[str]:
    """Every broken rule of the run, one line per occurrence or job (the module docstring)."""
    by_id = {job.job_id: job for job in jobs}
    expected: list[audit.Occurrence] = []
    found: list[str] = []
    engine_view = {(o.job_id, o.nominal_at): o for o in audit.expected_occurrences(snapshot.jobs, until)}
    executions = {row.id: row for row in snapshot.executions}
    for job in jobs:
        for nominal in expected_nominals(job, audit.created_at(job.job_id), until):
            ours = engine_view.pop((job.job_id, to_us(nominal)), None)
            key = execution_id(job.job_id, nominal)
            if ours is None:
                found.append(f"{key} ({job.tenant}/{job.name}): expected by croniter, not by the schedule engine")
                due = to_us(nominal)
            elif job.jitter:
                due = ours.due_at  # jitter is a hash of the job id: the engine's, bounded here
                if not to_us(nominal) <= due < to_us(nominal + timedelta(seconds=job.jitter)):
                    found.append(f"{key} ({job.tenant}/{job.name}): due {from_us(due)} outside its jitter window")
            else:
                due = to_us(nominal)
            expected.append(audit.Occurrence(job.job_id, job.tenant, to_us(nominal), due))
    for (job_id, nominal), _ in sorted(engine_view.items()):
        found.append(f"{execution_id(job_id, from_us(nominal))}: expected by the schedule engine, not by croniter")

    found += audit.problems(expected, snapshot, deliveries=target.deliveries)
    attempts_of = defaultdict(list)
    for attempt in snapshot.attempts:
        attempts_of[attempt.execution_id].append(attempt)
    for occurrence in expected:
        job, key = by_id[occurrence.job_id], occurrence.key
        row = executions.get(key)
        if row is None:
            continue  # audit.problems named it
        status, attempt = OUTCOME[job.path]
        if (row.status, row.attempt) != (status, attempt):
            found.append(f"{key} ({job.tenant}/{job.name} {job.path}): {row.status} at attempt {row.attempt} "
                         f"(delivery {row.delivery}, requeued {row.reap_count}, {row.dead_reason!r}), "
                         f"expected {status} at attempt {attempt}")  # fmt: skip
        tried = sorted({a.attempt for a in attempts_of[key]})
        if tried != list(range(1, attempt + 1)):
            found.append(f"{key} ({job.tenant}/{job.name}): attempts {tried} recorded, expected 1..{attempt}")
        for run in attempts_of[key]:
            if run.status == "lost" and not run.worker_id:
                continue  # requeued by the reaper: a hand-out does not write its worker, so the store knows none
            if row.tenant not in WORKERS.get(run.worker_id, ()):
                found.append(f"{key} ({row.tenant}): attempt {run.attempt} delivery {run.delivery} run by "
                             f"{run.worker_id!r}, which holds no credential for {row.tenant}")  # fmt: skip
    for skip in snapshot.skips:
        if skip.job_id in by_id and not (by_id[skip.job_id].overlap == job_pb2.OVERLAP_POLICY_QUEUE_ONE
                                         and skip.reason.lower() == "overlap"):
            found.append(f"{skip.job_id} ({by_id[skip.job_id].name}): skipped {skip.count} ({skip.reason!r})")

    pairs: dict[datetime, list[str]] = defaultdict(list)
    for job in jobs:
        if job.mutex:
            pairs[job.once_at].append(execution_id(job.job_id, job.once_at))
    for keys in pairs.values():
        rows = [executions.get(k) for k in keys]
        if any(r is None or r.delivery != 1 or r.reap_count for r in rows):
            continue  # a requeued one may legitimately still run on the worker that lost it
        spans = [[(c.began, c.ended) for c in target.calls if c.key == k and c.status == 200] for k in keys]
        for a in spans[0]:
            for b in spans[1]:
                if a[0] < b[1] and b[0] < a[1]:
                    found.append(f"{keys[0]} and {keys[1]} ran at once under {MUTEX_KEY!r} (limit 1): {a} {b}")
    return found


# --------------------------------------------------------------------------- the test


def test_a_seeded_mix_of_faults_loses_doubles_and_hastens_nothing(
    tmp_path: Path, postgres_url: str, postgres_server: PostgresServer, etcd_server: EtcdServer
) -> None:
    seed = int(os.environ.get(SEED_VARIABLE) or random.SystemRandom().randrange(1_000_000))
    print(f"chaos seed {seed} (replay with {SEED_VARIABLE}={seed})")
    rng = random.Random(seed)
    target = ChaosTarget()
    done: list[str] = []
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        cluster = Cluster(stack, tmp_path, postgres_url, etcd_server.endpoint)
        for sid in SERVERS:
            cluster.start_server(sid)
        keys = make_tenants(cluster)
        for wid in sorted(WORKERS):
            cluster.start_worker(wid)
        for wid in WORKERS:
            eventually(lambda: f"worker {wid} connected" in cluster.logs(), 20, f"worker {wid} connects")
        eventually(lambda: count(engine, "SELECT count(DISTINCT owner) FROM partitions") == len(SERVERS), 20,
                   "every server owns partitions")

        # The window: from the first fault's earliest instant to `until`,
        # at least MIN_RUN seconds and holding a minute boundary (cron's
        # resolution) at least 8 s before its end, so that the recurring
        # jobs fire (jitter included) inside it.
        start = now() + timedelta(seconds=4)  # room to create the jobs first
        boundary = (start + timedelta(seconds=2)).replace(second=0, microsecond=0) + timedelta(minutes=1)
        until = max(start + timedelta(seconds=MIN_RUN), boundary + timedelta(seconds=8)).replace(microsecond=0)
        span = (until - start).total_seconds() - 3.0
        plan = fault_plan(rng, span)
        jobs = job_plan(rng, start, until)
        summary = f"seed {seed}; window {start:%H:%M:%S.%f} .. {until:%H:%M:%S}; plan:\n    " + "\n    ".join(map(str, plan))
        print(summary)
        create(cluster, keys, jobs, target.base, until, rng)
        started = time.monotonic() + (start - now()).total_seconds()

        try:
            run_faults(cluster, plan, started, postgres_server, etcd_server, done)
        except Exception as exc:
            raise AssertionError(f"chaos run, {summary}\napplied:\n    " + "\n    ".join(done)
                                 + f"\nthe next fault failed: {exc!r}") from exc
        engine.dispose()  # its pooled connections may have died with PostgreSQL
        # The quiet tail: every occurrence terminal (or the timeout), then the audit.
        deadline = time.monotonic() + 45
        left = ["(not read yet)"]
        while time.monotonic() < deadline:
            try:
                snapshot = audit.load(engine, TENANTS)
            except Exception:  # the pool may still hold a connection from before the restart
                engine.dispose()
                time.sleep(0.2)  # polling the store for other processes' work
                continue
            left = audit.unsettled(audit.expected_occurrences(snapshot.jobs, until), snapshot)
            if not left and now() >= until + timedelta(seconds=1):
                break
            time.sleep(0.3)  # polling the store for other processes' work
        snapshot = audit.load(engine, TENANTS)
        found = chaos_problems(jobs, snapshot, until, target)
        dead = [sid for sid, server in cluster.servers.items() if server.process.poll() is not None]
        if dead:
            found.append(f"servers {dead} exited on their own")
        names = {job.job_id: f"{job.tenant}/{job.name}" for job in jobs}
        ours = [row for row in snapshot.executions if row.job_id in names]
        first = {}
        for attempt in snapshot.attempts:
            first[attempt.execution_id] = min(attempt.started_at, first.get(attempt.execution_id, attempt.started_at))
        late = sorted((first[row.id] - row.due_at) / 1e6 for row in ours if row.id in first)
        print(f"chaos seed {seed}: {len(ours)} executions, {len(snapshot.attempts)} attempts, "
              f"{sum(row.delivery > 1 for row in ours)} requeued, first hand-out late by at most "
              f"{late[-1] if late else 0:.1f} s (median {late[len(late) // 2] if late else 0:.2f} s); applied:\n    "
              + "\n    ".join(done))  # fmt: skip
        assert not found, (
            f"chaos run, {summary}\napplied:\n    " + "\n    ".join(done) + f"\n{len(found)} problem(s):\n  "
            + "\n  ".join(sorted(set(found)))
        )
        cron = [job for job in jobs if job.schedule == "cron" and "other-hour" not in job.name]
        assert any(row.job_id in {job.job_id for job in cron} for row in snapshot.executions), (
            "no recurring job fired in the window: the run tested no cron occurrence"
        )
