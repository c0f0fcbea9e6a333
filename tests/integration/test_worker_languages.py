"""One worker scenario, run against each SDK's example worker
(`sdk/<lang>/examples/worker/run`, serving `echo-<lang>`) on two real
`tickwheel server` processes over one real PostgreSQL and one real etcd.

Each language's worker is driven through the same story, in order:

1. a job runs and succeeds, its output (kept in history) the payload;
2. CancelExecution reaches the running handler (its `canceled` line) and the
   execution ends CANCELED;
3. the server the worker is connected to is SIGKILLed mid-execution: the
   worker reconnects to the other address of its list, re-attaches the
   execution there, and it succeeds on its first delivery;
4. a worker is SIGKILLed mid-execution: the execution is requeued with the
   same id and delivery 2, and another worker finishes it;
5. a worker frozen (SIGSTOP) past the heartbeat timeout loses its execution
   to another worker; when it resumes, its stale delivery is rejected and
   the execution ends once, on delivery 2;
6. SIGTERM drains: the in-flight execution finishes on its first delivery
   and the worker exits 0.

Every execution ends in exactly one terminal state, checked in the store.
The contract each example implements is in its own source (say,
`sdk/python/examples/worker/worker.py`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.v1 import execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support.server import REPO, ServerProcess, start_cluster_server, stop_process

from .test_dispatch_faults import cli, engine, eventually, now
from .test_processes import cli as dev_cli
from .test_processes import start_dev, wait_succeeded

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]
__all__ = ["engine"]  # the fixture, imported for the tests below

SESSION_TTL = 2
HEARTBEAT_TIMEOUT = 3.0
# How long a worker may take to start and connect; its build comes first (built, below).
START_TIMEOUT = 240.0
# A server's line for a worker's hello; every SDK's default worker id is `<host>-<pid>-<6 hex>`.
CONNECTED = re.compile(r"^(\S+ \S+) \S+ \S+: worker \S+-(\d+)-[0-9a-f]{6} connected \((.*)\)$")
LANGUAGES = ["python", "typescript", "go", "java"]
SHORT = {"python": "python", "typescript": "ts", "go": "go", "java": "java"}


class ExampleWorker:
    """One `run` process; its stdout's JSON events collected by a thread."""

    def __init__(self, stack: ExitStack, tmp_path: Path, language: str, addresses: list[str], credential: str,
                 name: str) -> None:
        self.name = name
        self.events: list[dict] = []
        self._changed = threading.Condition()
        log = (tmp_path / f"worker-{name}.log").open("a")
        stack.callback(log.close)
        env = {**os.environ, "TICKWHEEL_ADDRESS": ",".join(addresses), "TICKWHEEL_WORKER_CREDENTIAL": credential,
               "TICKWHEEL_SLOTS": "2", "NODE_OPTIONS": ""}
        self.process = subprocess.Popen(
            [str(REPO / "sdk" / language / "examples" / "worker" / "run")],
            stdout=subprocess.PIPE, stderr=log, cwd=tmp_path, env=env, text=True,
        )
        stack.callback(stop_process, self.process, 5)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)  # anything but JSON lines on stdout breaks the contract
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()

    def wait_event(self, event: str, execution_id: str, timeout: float = 30.0) -> dict | None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for seen in self.events:
                    if seen["event"] == event and seen["execution_id"] == execution_id:
                        return seen
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    return None
                self._changed.wait(min(left, 0.2))

    def connections(self, server: ServerProcess) -> list[tuple[str, str]]:
        """(when, what) of each time this worker connected to ``server``, as its log says. The SDKs'
        default worker id holds the pid of the process `run` execs, which is this one's."""
        return [(m[1], m[3]) for m in map(CONNECTED.match, server.log().splitlines())
                if m and int(m[2]) == self.process.pid]

    def connected_to(self, server: ServerProcess) -> bool:
        return bool(self.connections(server))

    def holder(self, servers: list[ServerProcess]) -> ServerProcess:
        """The server this worker connected to last (a worker given several addresses goes round them)."""
        return max((s for s in servers if self.connected_to(s)), key=lambda s: self.connections(s)[-1][0])

    def has(self, event: str, execution_id: str) -> bool:
        with self._changed:
            return any(e["event"] == event and e["execution_id"] == execution_id for e in self.events)


class Tenant:
    def __init__(self, server: ServerProcess, handler: str) -> None:
        admin = ("--address", server.address, "--admin-token", server.admin_token)
        self.api_key = cli("admin", "tenant", "create", "acme", *admin)
        # Handlers allowed by name: the credential serves the example's handler only.
        self.credential = cli("admin", "worker-credential", "create", "--tenant", "acme", "--handler", handler, *admin)
        self.handler = handler
        self.meta = (("authorization", f"Bearer {self.api_key}"),)
        self._count = 0

    def run_once(self, address: str, payload: dict, *, in_seconds: float = 0.5) -> str:
        """A one-off job of the example's handler; returns its execution's id once it exists."""
        self._count += 1
        job = job_pb2.Job(name=f"step-{self._count}", payload=json.dumps(payload).encode(),
                          target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=self.handler)))
        job.schedule.once_at.FromDatetime(now() + timedelta(seconds=in_seconds))
        job.retry_policy.max_attempts = 1
        with grpc.insecure_channel(address) as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            job_id = stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=job.name),
                                    metadata=self.meta, timeout=10).job.id
            found: list[str] = []

            def listed() -> bool:
                reply = stub.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job_id), metadata=self.meta,
                                            timeout=10)
                found[:] = [e.id for e in reply.executions]
                return bool(found)

            eventually(listed, 30, f"the execution of {job.name}")
        return found[0]

    def attempts(self, address: str, execution_id: str) -> list[execution_pb2.Attempt]:
        with grpc.insecure_channel(address) as channel:
            reply = scheduler_pb2_grpc.SchedulerServiceStub(channel).GetExecution(
                scheduler_pb2.GetExecutionRequest(id=execution_id), metadata=self.meta, timeout=10
            )
        return list(reply.execution.attempts)

    def history(self, address: str, execution_id: str) -> list[tuple[int, int, str]]:
        """(delivery, attempt, status) of each attempt, as GetExecution answers."""
        return [(a.delivery, a.attempt, ATTEMPT.get(a.status, str(a.status))) for a in self.attempts(address, execution_id)]

    def cancel(self, address: str, execution_id: str) -> None:
        with grpc.insecure_channel(address) as channel:
            scheduler_pb2_grpc.SchedulerServiceStub(channel).CancelExecution(
                scheduler_pb2.CancelExecutionRequest(id=execution_id), metadata=self.meta, timeout=10
            )


TERMINAL = ("succeeded", "dead", "canceled")
ATTEMPT = {execution_pb2.ATTEMPT_STATUS_SUCCEEDED: "succeeded", execution_pb2.ATTEMPT_STATUS_LOST: "lost",
           execution_pb2.ATTEMPT_STATUS_CANCELED: "canceled", execution_pb2.ATTEMPT_STATUS_FAILED: "failed"}


def execution(engine: sa.Engine, execution_id: str) -> sa.Row:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT * FROM executions WHERE id = :e"), {"e": execution_id}).one()


def ended(engine: sa.Engine, execution_id: str) -> Callable[[], bool]:
    return lambda: execution(engine, execution_id).status in TERMINAL


def started_on(workers: list[ExampleWorker], execution_id: str, timeout: float = 30.0) -> ExampleWorker:
    """The worker whose handler printed `started` for ``execution_id``."""
    eventually(lambda: any(w.has("started", execution_id) for w in workers), timeout, f"{execution_id} starts")
    return next(w for w in workers if w.has("started", execution_id))


_BUILT: set[str] = set()


@pytest.fixture
def built(language: str) -> None:
    """``language``'s example worker built (once a test process): `run` builds what changed (Maven,
    Go, tsc), then refuses to start without an address. A build failure says so here, with its
    output, and a build on first use (minutes under load) is not counted in a wait for a worker to
    connect."""
    if language in _BUILT:
        return
    env = {k: v for k, v in os.environ.items() if k not in ("TICKWHEEL_ADDRESS", "TICKWHEEL_WORKER_CREDENTIAL")}
    refused = subprocess.run([str(REPO / "sdk" / language / "examples" / "worker" / "run")], capture_output=True,
                             text=True, timeout=900, env={**env, "NODE_OPTIONS": ""})
    assert (refused.returncode, "TICKWHEEL_ADDRESS" in refused.stderr) == (2, True), refused.stderr
    _BUILT.add(language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_example_worker_survives_kills_freezes_cancels_and_drains(
    language: str, built: None, tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    handler = f"echo-{SHORT[language]}"
    with ExitStack() as stack:
        config = tmp_path / "server.toml"
        config.write_text(f"heartbeat_interval = 0.5\nheartbeat_timeout = {HEARTBEAT_TIMEOUT}\n")
        servers = [
            start_cluster_server(stack, tmp_path, postgres_url, etcd_endpoint, f"{name}-{os.getpid()}",
                                 "--partition-count", "8", "--config", str(config), session_ttl=SESSION_TTL)
            for name in ("first", "second")
        ]  # fmt: skip
        tenant = Tenant(servers[0], handler)
        one = ExampleWorker(stack, tmp_path, language, [s.address for s in servers], tenant.credential, "one")
        eventually(lambda: any(one.connected_to(s) for s in servers), START_TIMEOUT, f"the {language} worker connects")
        # Which server it is on is its SDK's choice: the Go, Java and TypeScript workers try the list in
        # turn (after a failed try, say no welcome within 10 s from a cold JVM under load, the next);
        # the Python example opens one gRPC channel over both, which takes whichever answers first.
        # `first` is the server it holds its stream to.
        first = one.holder(servers)
        second = next(s for s in servers if s is not first)

        # 1. A job runs and succeeds; its output is its payload.
        ran = tenant.run_once(first.address, {"hello": language})
        eventually(ended(engine, ran), 30, "the first job ends")
        assert execution(engine, ran).status == "succeeded"
        assert tenant.history(first.address, ran) == [(1, 1, "succeeded")]
        assert [a.output for a in tenant.attempts(first.address, ran)] == [json.dumps({"hello": language}).encode()]
        assert one.wait_event("finished", ran, 5)

        # 2. A cancel reaches the handler.
        canceled = tenant.run_once(first.address, {"sleep_ms": 120_000})
        assert one.wait_event("started", canceled), "the long job starts"
        tenant.cancel(first.address, canceled)
        assert one.wait_event("canceled", canceled, 15), "the handler sees the cancel"
        eventually(ended(engine, canceled), 15, "the canceled execution ends")
        assert execution(engine, canceled).status == "canceled"

        # 3. The worker's server dies mid-execution: re-attached on the other one, not requeued.
        carried = tenant.run_once(first.address, {"sleep_ms": 4_000})
        assert one.wait_event("started", carried), "the carried job starts"
        first.kill()
        eventually(lambda: any("1 executions re-attached" in said for _, said in one.connections(second)), 30,
                   "the worker re-attaches on the other server")
        eventually(ended(engine, carried), 30, "the carried execution ends")
        row = execution(engine, carried)
        assert (row.status, row.delivery, row.reap_count) == ("succeeded", 1, 0)

        # 4. A worker dies mid-execution: requeued with the same id, delivery 2.
        two = ExampleWorker(stack, tmp_path, language, [second.address], tenant.credential, "two")
        # Each worker by its own id: a count of hellos would take a reconnect of another for this one's.
        eventually(lambda: two.connected_to(second), START_TIMEOUT, "the second worker connects")
        requeued = tenant.run_once(second.address, {"sleep_ms": 2_000})
        doomed = started_on([one, two], requeued)
        survivor = two if doomed is one else one
        doomed.process.kill()
        doomed.process.wait(10)
        redelivered = survivor.wait_event("started", requeued, 30)
        assert redelivered is not None and (redelivered["delivery"], redelivered["attempt"]) == (2, 1)
        eventually(ended(engine, requeued), 30, "the requeued execution ends")
        assert tenant.history(second.address, requeued) == [(1, 1, "lost"), (2, 1, "succeeded")]

        # 5. A frozen worker's stale delivery is rejected.
        three = ExampleWorker(stack, tmp_path, language, [second.address], tenant.credential, "three")
        eventually(lambda: three.connected_to(second), START_TIMEOUT, "the third worker connects")
        stale = tenant.run_once(second.address, {"sleep_ms": 2_000})
        frozen = started_on([survivor, three], stale)
        thawed = three if frozen is survivor else survivor
        frozen.process.send_signal(signal.SIGSTOP)
        try:
            redelivered = thawed.wait_event("started", stale, HEARTBEAT_TIMEOUT + 20)
            assert redelivered is not None and redelivered["delivery"] == 2, ([e for e in frozen.events if e["execution_id"] == stale], [e for e in thawed.events if e["execution_id"] == stale], frozen.name, tenant.history(second.address, stale))
            eventually(ended(engine, stale), 30, "the execution ends on delivery 2")
        finally:
            frozen.process.send_signal(signal.SIGCONT)
        assert frozen.wait_event("finished", stale, 30), "the frozen handler resumes and returns"
        time.sleep(HEARTBEAT_TIMEOUT)  # its stale result (or heartbeat) reaches the server: nothing may change
        row = execution(engine, stale)
        assert (row.status, row.delivery) == ("succeeded", 2)
        assert tenant.history(second.address, stale) == [(1, 1, "lost"), (2, 1, "succeeded")]

        # 6. SIGTERM drains in-flight work.
        drained = tenant.run_once(second.address, {"sleep_ms": 3_000})
        draining = started_on([frozen, thawed], drained)
        other = thawed if draining is frozen else frozen
        draining.process.send_signal(signal.SIGTERM)
        assert draining.process.wait(40) == 0, "the drained worker exits 0"
        assert draining.has("finished", drained)
        eventually(ended(engine, drained), 15, "the drained execution ends")
        row = execution(engine, drained)
        assert (row.status, row.delivery) == ("succeeded", 1), "finished in flight, not requeued"
        other.process.send_signal(signal.SIGTERM)
        assert other.process.wait(40) == 0


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_example_worker_runs_a_job_beside_tickwheel_dev(language: str, built: None, tmp_path: Path) -> None:
    """What each SDK's README tells a newcomer: `tickwheel dev`, then
    `sdk/<lang>/examples/worker/run --dev .tickwheel` from the same folder
    (the dev worker credential serves any handler), then a job for it."""
    data = tmp_path / ".tickwheel"
    dev = start_dev(data)
    worker = subprocess.Popen([str(REPO / "sdk" / language / "examples" / "worker" / "run"), "--dev", ".tickwheel"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "NODE_OPTIONS": ""})
    try:
        at = (now() + timedelta(seconds=2)).isoformat()
        created = dev_cli("job", "create", "--dev", str(data), "--name", "hi", "--at", at,
                          "--handler", f"echo-{SHORT[language]}", "--payload", '{"hi": 1}', "--json")
        assert created.returncode == 0, created.stderr
        wait_succeeded(data, json.loads(created.stdout)["job"]["id"], f"the {language} example worker never ran the job",
                       timeout=START_TIMEOUT)
    finally:
        stop_process(worker, 40)
        dev.send_signal(signal.SIGTERM)
        dev.wait(30)
    out, errors = worker.communicate()
    assert worker.returncode == 0, errors
    assert [json.loads(line)["event"] for line in out.splitlines()] == ["started", "finished"]
