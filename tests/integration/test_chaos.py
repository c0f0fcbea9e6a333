"""A seeded chaos run: every fault at once over a small real cluster, then an
exact audit of every occurrence (hardening, session 18).

The single-fault tests (test_dispatch_faults.py, test_armed_faults.py,
test_fault_outages.py, test_fault_freeze.py, test_worker_faults.py,
test_etcd_restart.py) each inject one fault into a quiet cluster. This one
mixes them, as production does:

- the cluster: three `tickwheel server` processes (on fixed ports, so that a
  restarted one is found again) on the test's PostgreSQL and etcd, three
  `tickwheel worker` processes each holding a credential for two of three
  tenants (so every tenant is served by two workers, and each worker could
  be handed another tenant's execution if the hand-out ignored tenants);
- the jobs: recurring cron jobs in several IANA zones (cron's resolution is a
  minute, so the window is stretched to hold a minute boundary; some name the
  zone's current local hour, one an hour the zone is not in, which must never
  fire), one with the overlap policy QUEUE_ONE triggered (TriggerJob) while
  its run at the boundary holds its target, one-off jobs due throughout
  the run calling targets that answer at once, after 0.3 s, after 1.5 s, fail
  their first attempt, or always fail, and pairs of one-offs due at the same
  instant under one concurrency key of limit 1;
- the faults, from a seed (printed; ``TICKWHEEL_CHAOS_SEED=N`` replays its
  plan): SIGKILL of a server and its restart, SIGKILL of a worker and its
  restart, SIGSTOP of a server past its session TTL and SIGCONT, a
  PostgreSQL restart and an etcd restart (killed), each at least once, a few
  more drawn at random (``TICKWHEEL_CHAOS_EXTRA_FAULTS=N``: N more, for a
  harsher run by hand), overlapping sometimes (at most two servers and two
  workers down at once).

After a quiet tail the audit computes what should have happened without the
server's schedule engine (croniter and zoneinfo for the cron jobs, the
requested instant for one-offs) and checks, per occurrence, that it has
exactly one execution under its idempotency key, in the terminal state its
target implies (succeeded on attempt 1, on attempt 2 after a failing first
attempt, dead after two failed attempts), never handed out or started before
its due instant (the store's instants), with every attempt run by a worker
holding a credential for its tenant (the reaper's ``lost`` rows name no
worker: a hand-out does not write its worker to the store); that no
execution exists that is no expected occurrence, nothing was skipped, the
target saw each key it should and no other, the engine's own expectation
agrees with the independent one, and neither the pairs under one
concurrency key nor the trigger and its job's run ran at once (when neither
was requeued). It fails with one line per broken occurrence.
"""

from __future__ import annotations

import heapq
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import grpc
import pytest
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support import audit
from tests.support.chaos import (
    CRON_ROOM, SERVERS, TENANTS, WORKERS, Fault, PlannedJob, chaos_problems, chaos_target, fault_plan, job_plan, window_end,
)
from tests.support.etcd import EtcdServer
from tests.support.faults import (
    HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, LOOPBACK, PARTITIONS, SESSION_TTL, count, eventually, migrated_store, now,
)
from tests.support.postgres import PostgresServer, free_port
from tests.support.server import ServerProcess, start_cluster_server, start_worker_process
from tickwheel.shared.ids import execution_id

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

SEED_VARIABLE = "TICKWHEEL_CHAOS_SEED"
FAULTS_VARIABLE = "TICKWHEEL_CHAOS_EXTRA_FAULTS"
"""Faults beyond one of each kind (one to three, from the seed, unless set): a harsher run by hand."""
MIN_RUN = 40.0
"""Seconds from the first fault's earliest instant to the end of the window, at least."""


# --------------------------------------------------------------------------- the cluster


class Cluster:
    """The servers (each on a fixed port) and workers of the run, started,
    killed, frozen and restarted by id; everything is stopped (and resumed,
    if frozen) when ``stack`` closes."""

    def __init__(self, stack: ExitStack, tmp_path: Path, store: str, etcd: str) -> None:
        self.stack, self.tmp_path, self.store, self.etcd = stack, tmp_path, store, etcd
        self.ports = {sid: free_port() for sid in SERVERS}
        self.servers: dict[str, ServerProcess] = {}
        self.started: list[ServerProcess] = []  # every server process, the restarted ones too
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
        self.started.append(self.servers[sid])

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

    def errors(self, most: int = 30) -> list[str]:
        """The last ``most`` lines of every server's and worker's log that say ERROR or Traceback."""
        paths = [server.log_path for server in self.started] + sorted(self.tmp_path.glob("worker-*.log"))
        lines = [f"{path.name}: {line}" for path in paths
                 for line in path.read_text(errors="replace").splitlines() if "ERROR" in line or "Traceback" in line]
        return lines[-most:]

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


def trigger(cluster: Cluster, api_key: str, job_id: str, request_id: str, patience: float = 30.0) -> str:
    """TriggerJob through the first server that answers (not a frozen or
    dead one), the same request id on every try, so that it runs once
    however many tries reached a server; returns the execution id."""
    meta = (("authorization", f"Bearer {api_key}"),)
    deadline = time.monotonic() + patience
    while True:
        for sid, server in list(cluster.servers.items()):
            if sid in cluster.frozen or server.process.poll() is not None:
                continue
            try:
                with grpc.insecure_channel(server.address) as channel:
                    reply = scheduler_pb2_grpc.SchedulerServiceStub(channel).TriggerJob(
                        scheduler_pb2.TriggerJobRequest(id=job_id, request_id=request_id), metadata=meta, timeout=3
                    )
                return reply.execution.id
            except grpc.RpcError as exc:
                last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"TriggerJob {job_id} not answered within {patience:.0f} s: {last!r}")
        time.sleep(0.2)  # every server was down or refused: try again as the faults end


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


# --------------------------------------------------------------------------- the test


def test_a_seeded_mix_of_faults_loses_doubles_and_hastens_nothing(
    tmp_path: Path, postgres_url: str, postgres_server: PostgresServer, etcd_server: EtcdServer
) -> None:
    seed = int(os.environ.get(SEED_VARIABLE) or random.SystemRandom().randrange(1_000_000))
    print(f"chaos seed {seed} (replay with {SEED_VARIABLE}={seed})")
    rng = random.Random(seed)
    target = chaos_target()
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

        # The window: from the first fault's earliest instant to `until`.
        start = now() + timedelta(seconds=4)  # room to create the jobs first
        until = window_end(start, MIN_RUN)
        span = (until - start).total_seconds() - 3.0
        plan = fault_plan(rng, span, int(os.environ[FAULTS_VARIABLE]) if os.environ.get(FAULTS_VARIABLE) else None)
        jobs = job_plan(rng, start, until)
        summary = f"seed {seed}; window {start:%H:%M:%S.%f} .. {until:%H:%M:%S}; plan:\n    " + "\n    ".join(map(str, plan))
        print(summary)
        create(cluster, keys, jobs, target.base, until, rng)
        started = time.monotonic() + (start - now()).total_seconds()

        # The queue-one job's run at the last minute boundary holds its
        # target 1.5 s; a trigger made 0.3 s after the boundary (in a thread
        # of its own: a fault's restart may hold the plan's clock up) queues
        # behind it.
        queue_one = next(job for job in jobs if job.overlap == job_pb2.OVERLAP_POLICY_QUEUE_ONE)
        anchor = (until - CRON_ROOM).replace(second=0, microsecond=0)
        triggers: dict[str, str] = {}
        failed: list[BaseException] = []

        def trigger_queue_one() -> None:
            time.sleep(max(0.0, started + (anchor - start).total_seconds() + 0.3 - time.monotonic()))  # its instant
            try:
                triggers[trigger(cluster, keys[queue_one.tenant], queue_one.job_id, f"chaos-{seed}")] = queue_one.job_id
                done.append(f"{time.monotonic() - started:5.1f}s triggered {queue_one.name}")
            except BaseException as exc:  # reported with the audit
                failed.append(exc)

        triggering = threading.Thread(target=trigger_queue_one, daemon=True)
        triggering.start()
        try:
            run_faults(cluster, plan, started, postgres_server, etcd_server, done)
            triggering.join(60)
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
            left += [row.id for row in snapshot.executions if row.id in triggers and row.status not in audit.TERMINAL]
            if not left and now() >= until + timedelta(seconds=1):
                break
            time.sleep(0.3)  # polling the store for other processes' work
        snapshot = audit.load(engine, TENANTS)
        found = chaos_problems(jobs, snapshot, until, target.deliveries, target.calls, triggers)
        if len(triggers) != 1:
            found.append(f"the trigger of {queue_one.job_id} was not made: {failed}")
        dead = [sid for sid, server in cluster.servers.items() if server.process.poll() is not None]
        if dead:
            found.append(f"servers {dead} exited on their own")
        names = {job.job_id: f"{job.tenant}/{job.name}" for job in jobs}
        ours = [row for row in snapshot.executions if row.job_id in names]
        first = {}
        for attempt in snapshot.attempts:
            first[attempt.execution_id] = min(attempt.started_at, first.get(attempt.execution_id, attempt.started_at))
        late = sorted((first[row.id] - row.due_at) / 1e6 for row in ours if row.id in first)
        spans = {k: [(round(c.began - target.calls[0].began, 2), round(c.ended - target.calls[0].began, 2))
                     for c in target.calls if c.key == k] for k in [*triggers, execution_id(queue_one.job_id, anchor)]}
        print(f"queue-one's run at {anchor:%H:%M:%S} and the trigger made 0.3 s later, their calls: {spans}")
        print(f"chaos seed {seed}: {len(ours)} executions, {len(snapshot.attempts)} attempts, "
              f"{sum(row.delivery > 1 for row in ours)} requeued, first hand-out late by at most "
              f"{late[-1] if late else 0:.1f} s (median {late[len(late) // 2] if late else 0:.2f} s); applied:\n    "
              + "\n    ".join(done) + "\nerrors logged (the last 30):\n    " + "\n    ".join(cluster.errors()))  # fmt: skip
        assert not found, (
            f"chaos run, {summary}\napplied:\n    " + "\n    ".join(done) + f"\n{len(found)} problem(s):\n  "
            + "\n  ".join(sorted(set(found))) + "\nerrors logged:\n  " + "\n  ".join(cluster.errors())
        )
        cron = [job for job in jobs if job.schedule == "cron" and "other-hour" not in job.name]
        assert any(row.job_id in {job.job_id for job in cron} for row in snapshot.executions), (
            "no recurring job fired in the window: the run tested no cron occurrence"
        )
