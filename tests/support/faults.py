"""What the fault-injection tests share: a recording HTTP target, real
`tickwheel server` and `tickwheel worker` processes with short timeouts,
tenants and one-off jobs made through the API, and waiting for a window to
settle before its audit (tests/support/audit.py).

Timeouts are short so that each fault plays out in seconds: session TTL 2 s
(the reaper's grace is one TTL), worker heartbeats every 0.5 s, a silent
delivery requeued after 3 s.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

import grpc
import sqlalchemy as sa
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support import audit
from tests.support.server import ServerProcess, start_cluster_server, start_worker_process
from tickwheel_server.store import create_store_engine, migrate

SESSION_TTL = 2
HEARTBEAT_INTERVAL = 0.5
HEARTBEAT_TIMEOUT = 3.0
PARTITIONS = 8
LOOPBACK = "127.0.0.0/8"
NUL_BODY = b"upstream exploded\x00\x00 after \x00 NUL bytes"

T = TypeVar("T")


def now() -> datetime:
    return datetime.now(timezone.utc)


def eventually(check: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll ``check`` (a condition on state outside this process) until it is
    truthy and return it; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:.1f} s: {what} (last: {value!r})")
        time.sleep(interval)  # polling another process's state: there is no event to await


# --------------------------------------------------------------------------- the target


@dataclass
class Call:
    """One call a :class:`RecordingTarget` received: its key, attempt and
    delivery, when it began and ended (``time.time()``) and what it answered."""

    key: str
    attempt: int
    delivery: int
    began: float
    ended: float = 0.0
    status: int = 0


class RecordingTarget:
    """A real HTTP target on loopback that records the ``Idempotency-Key``,
    attempt and delivery of every call as it arrives (``deliveries``, for the
    audit; ``calls`` also when each began and ended and what it answered),
    then answers by path:

    - ``/ok``: 200 at once;
    - ``/hold``: 200 after ``hold`` seconds (a call in progress across a fault);
    - ``/brief``: 200 after 0.3 s (a worker's slots stay busy);
    - ``/nul``: 500 with NUL bytes in the body, which the worker copies into
      the attempt's error;
    - ``/flaky``: 500 on attempt 1, 200 after (a retried job);
    - ``/fail``: 500 always (a job that ends dead);
    - ``/holdfail``: 500 after ``hold`` seconds (a run that fails after a
      change made while it ran).
    """

    def __init__(self, hold: float = 2.0) -> None:
        self.deliveries = audit.Deliveries()
        self.calls: list[Call] = []
        self.hold = hold
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
                status, body = 200, b"ok"
                if self.path in ("/hold", "/holdfail"):
                    target._closing.wait(target.hold)
                    status = 500 if self.path == "/holdfail" else status
                elif self.path == "/brief":
                    target._closing.wait(0.3)
                elif self.path == "/nul":
                    status, body = 500, NUL_BODY
                elif self.path == "/fail" or self.path == "/flaky" and call.attempt <= 1:
                    status = 500
                call.ended, call.status = time.time(), status
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the worker went away meanwhile

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, path: str) -> str:
        return self.base + path

    def close(self) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------- processes


def start_server(stack: ExitStack, tmp_path: Path, store: str, etcd: str, server_id: str) -> ServerProcess:
    """`tickwheel server` with the short timeouts above, HTTP targets on loopback allowed."""
    config = tmp_path / f"{server_id}.toml"
    config.write_text(f"heartbeat_interval = {HEARTBEAT_INTERVAL}\nheartbeat_timeout = {HEARTBEAT_TIMEOUT}\n")
    return start_cluster_server(
        stack, tmp_path, store, etcd, server_id,
        "--partition-count", str(PARTITIONS), "--config", str(config), "--allow-target-network", LOOPBACK,
        session_ttl=SESSION_TTL,
    )  # fmt: skip


def start_worker(stack: ExitStack, tmp_path: Path, address: str, credential: str, worker_id: str,
                 slots: int = 8) -> subprocess.Popen:
    """`tickwheel worker` running HTTP targets on loopback."""
    return start_worker_process(stack, tmp_path, address, credential, worker_id,
                                "--slots", str(slots), "--allow-target-network", LOOPBACK)  # fmt: skip


def wait_connected(server: ServerProcess, worker_id: str, timeout: float = 20.0) -> None:
    eventually(lambda: f"worker {worker_id} connected" in server.log(), timeout, f"worker {worker_id} connects")


@dataclass
class Tenant:
    name: str
    api_key: str
    credential: str


BURST_RATE = 5000
"""The request rate (``requests_per_second``) of :func:`tenant`'s tenants.
A fault test creates its jobs in one burst of calls to one server, and a
server allows a tenant its rate divided by the live servers it last read
from presence every few seconds: with the default 100/s, a burst of 66 calls to
one of two servers was refused (RESOURCE_EXHAUSTED) when that server had
read the second one before the burst, which a loaded machine made likely."""


def tenant(server: ServerProcess, name: str) -> Tenant:
    """A tenant with room for a burst of calls (:data:`BURST_RATE`) and a
    worker credential for it (HTTP targets), through AdminService."""
    meta = (("authorization", f"Bearer {server.admin_token}"),)
    quotas = admin_pb2.TenantQuotas(requests_per_second=BURST_RATE)
    with grpc.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        key = admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=name, quotas=quotas)),
                                 metadata=meta, timeout=10).api_key.secret
        credential = admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=[name], http=True), metadata=meta, timeout=10
        ).credential.secret
    return Tenant(name, key, credential)


def create_jobs(address: str, owner: Tenant, url: str, instants: Sequence[datetime], tag: str, *,
                retries: int = 3) -> list[str]:
    """One one-off job per instant calling ``url``; up to ``retries`` attempts
    with 0.1–0.3 s backoffs. Returns the job ids."""
    meta = (("authorization", f"Bearer {owner.api_key}"),)
    ids = []
    with grpc.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for index, at in enumerate(instants):
            job = job_pb2.Job(name=f"{tag}-{index}", target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))
            job.schedule.once_at.FromDatetime(at)
            job.retry_policy.max_attempts = retries
            job.retry_policy.initial_backoff.FromMilliseconds(100)
            job.retry_policy.max_backoff.FromMilliseconds(300)
            reply = stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"{tag}-{index}"),
                                   metadata=meta, timeout=10)
            ids.append(reply.job.id)
    return ids


def spaced(first: datetime, count: int, step: float) -> list[datetime]:
    return [first + timedelta(seconds=step * i) for i in range(count)]


# --------------------------------------------------------------------------- the store


@contextlib.contextmanager
def migrated_store(url: str) -> Iterator[sa.Engine]:
    """The test's database, migrated, for observing the store."""
    engine = create_store_engine(url)
    try:
        migrate(engine)
        yield engine
    finally:
        engine.dispose()


def count(engine: sa.Engine, sql: str, **params: object) -> int:
    """``SELECT count(*) …``, tolerating a store that is down (answers -1)."""
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(sql), params).scalar_one())
    except sa.exc.OperationalError:
        return -1


def settle(engine: sa.Engine, tenants: Sequence[str], until: datetime, timeout: float) -> list[str]:
    """Wait until every occurrence of ``tenants``' jobs nominally before
    ``until`` has a terminal state or a skip, or ``timeout`` seconds past the
    latest due instant among them (:func:`audit.settle_by`: a cron run's
    jitter may put it up to a minute after its nominal instant); returns
    those still unsettled, so that the audit which follows names them rather
    than a bare timeout."""
    started = now()
    while True:
        snapshot = audit.load(engine, tenants)
        expected = audit.expected_occurrences(snapshot.jobs, until)
        left = audit.unsettled(expected, snapshot)
        if (not left and now() >= until) or now() >= audit.settle_by(expected, started, timeout):
            return left
        time.sleep(0.2)  # polling the store for other processes' work
