"""Flows 3 and 4 under faults (issue 5, "Tests"): real `tickwheel server`
and `tickwheel worker` processes on one real PostgreSQL and one real etcd.

1. A worker is SIGKILLed in the middle of an HTTP call: the execution is
   requeued with the same id and delivery + 1, runs on another worker, and
   the target sees one idempotency key twice and applies it once.
2. The server a worker is connected to is SIGKILLed while the worker runs a
   job: the worker reconnects to another server, which re-attaches the
   execution; it ends once, in one terminal state, without a requeue.
3. A handler that kills its worker every time is dead-lettered as poison
   after the cap (3 requeues), with every delivery's attempt recorded.
4. A job running for more than twenty heartbeat timeouts completes once,
   never requeued.
5. etcd restarts while long jobs run: the server opens a new session and
   re-stamps its running executions; none is reaped.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from contextlib import ExitStack
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, scheduler_pb2
from tickwheel.shared.ids import to_us

from tests.support.etcd import EtcdServer
from tests.support.attempts import ALL_ATTEMPTS
from tests.support.server import ServerProcess, start_cluster_server, start_worker_process

from .test_dispatch_faults import (
    cli, engine, eventually, now, scheduler, wait_worker_connected,
)

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]
__all__ = ["engine"]  # the fixture, imported for the tests below

SESSION_TTL = 2
HANDLERS = "tests.support.handlers:register"


def start_server(stack: ExitStack, tmp_path: Path, store: str, etcd: str, server_id: str, *,
                 heartbeat_interval: float = 0.5, heartbeat_timeout: float = 3.0) -> ServerProcess:
    config = tmp_path / f"{server_id}.toml"
    config.write_text(f"heartbeat_interval = {heartbeat_interval}\nheartbeat_timeout = {heartbeat_timeout}\n")
    return start_cluster_server(
        stack, tmp_path, store, etcd, server_id,
        "--partition-count", "8", "--config", str(config), "--allow-target-network", "127.0.0.0/8",
        session_ttl=SESSION_TTL,
    )


def start_worker(stack: ExitStack, tmp_path: Path, address: str, credential: str, worker_id: str, *,
                 http: bool = False, slots: int = 2) -> subprocess.Popen:
    targets = ["--allow-target-network", "127.0.0.0/8"] if http else ["--no-http"]
    return start_worker_process(stack, tmp_path, address, credential, worker_id,
                                "--handlers", HANDLERS, "--slots", str(slots), *targets)  # fmt: skip


def tenant_and_credential(server: ServerProcess) -> tuple[str, str]:
    admin = ("--address", server.address, "--admin-token", server.admin_token)
    api_key = cli("admin", "tenant", "create", "acme", *admin)
    credential = cli("admin", "worker-credential", "create", "--tenant", "acme", "--http", *admin)
    return api_key, credential


def create_job(address: str, api_key: str, name: str, target: job_pb2.Target, *, payload: bytes = b"",
               in_seconds: float = 1.0, retry: tuple[int, float, float] | None = None) -> str:
    job = job_pb2.Job(name=name, target=target, payload=payload)
    job.schedule.once_at.FromDatetime(now() + timedelta(seconds=in_seconds))
    if retry is not None:
        job.retry_policy.max_attempts = retry[0]
        job.retry_policy.initial_backoff.FromMilliseconds(int(retry[1] * 1000))
        job.retry_policy.max_backoff.FromMilliseconds(int(retry[2] * 1000))
    with scheduler(address) as stub:
        reply = stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=name),
                               metadata=(("authorization", f"Bearer {api_key}"),), timeout=10)
    return reply.job.id


def handler(name: str) -> job_pb2.Target:
    return job_pb2.Target(handler=job_pb2.HandlerTarget(name=name))


def execution_of(engine: sa.Engine, job_id: str) -> sa.Row:
    with engine.connect() as conn:
        [row] = conn.execute(sa.text("SELECT * FROM executions WHERE job_id = :j"), {"j": job_id}).all()
    return row


def attempts_of(engine: sa.Engine, execution_id: str) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(
            sa.text(f"SELECT * FROM {ALL_ATTEMPTS} AS a WHERE execution_id = :e ORDER BY delivery, attempt"), {"e": execution_id}
        ).all()


def ended(engine: sa.Engine, job_id: str, *statuses: str):
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT status FROM executions WHERE job_id = :j"), {"j": job_id}).first()
    return row is not None and row.status in statuses


def sent_by_now(engine: sa.Engine, job_id: str) -> bool:
    """Its execution is running and the instant it is sent at (its
    ``handed_out_at``, stamped by the start) has come."""
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT status, handed_out_at FROM executions WHERE job_id = :j"),
                           {"j": job_id}).first()
    return row is not None and row.status == "running" and row.handed_out_at <= to_us(now())


class RecordingTarget:
    """An HTTP target that records every call's idempotency headers and applies
    each key once. Calls of delivery 1 hang until released (the worker is
    killed meanwhile)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []
        self.applied: list[str] = []
        self.first_call = threading.Event()
        self.release = threading.Event()
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k: self.headers.get(k, "") for k in
                           ("Idempotency-Key", "Tickwheel-Attempt", "Tickwheel-Delivery", "Tickwheel-Scheduled-At")}
                target.calls.append(headers)
                key = headers["Idempotency-Key"]
                if key not in target.applied:
                    target.applied.append(key)
                if headers["Tickwheel-Delivery"] == "1":
                    target.first_call.set()
                    target.release.wait(30)
                try:
                    self.send_response(200)
                    self.end_headers()
                except OSError:
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------- 1. SIGKILL a worker


def test_a_worker_killed_mid_call_is_requeued_and_the_target_applies_the_key_once(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    target = RecordingTarget()
    with ExitStack() as stack:
        stack.callback(target.close)
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"wk-{os.getpid()}")
        api_key, credential = tenant_and_credential(server)
        doomed = start_worker(stack, tmp_path, server.address, credential, "doomed", http=True)
        wait_worker_connected(server, "doomed")
        job_id = create_job(server.address, api_key, "hook", job_pb2.Target(http=job_pb2.HttpTarget(url=target.url)))
        assert target.first_call.wait(20), "the first delivery never reached the target"
        start_worker(stack, tmp_path, server.address, credential, "survivor", http=True)
        wait_worker_connected(server, "survivor")
        doomed.kill()
        doomed.wait(10)
        eventually(lambda: ended(engine, job_id, "succeeded", "dead"), 30, "the execution ends")
        execution = execution_of(engine, job_id)
        history = attempts_of(engine, execution.id)
    assert (execution.status, execution.attempt, execution.delivery, execution.reap_count) == ("succeeded", 1, 2, 1)
    assert [(a.attempt, a.delivery, a.status, a.worker_id) for a in history] == [
        (1, 1, "lost", "doomed"), (1, 2, "succeeded", "survivor"),
    ]
    # Lost either way: the server saw the stream end (no re-attach within
    # the grace) or, on a loaded machine, the heartbeat timeout came first.
    assert "worker doomed disconnected and did not re-attach" in history[0].error or (
        "no heartbeat from worker doomed" in history[0].error
    ), history[0].error
    assert [(c["Idempotency-Key"], c["Tickwheel-Attempt"], c["Tickwheel-Delivery"]) for c in target.calls] == [
        (execution.id, "1", "1"), (execution.id, "1", "2"),
    ]
    assert target.applied == [execution.id]


# --------------------------------------------------------------------------- 2. SIGKILL the worker's server


def test_a_worker_whose_server_dies_re_attaches_elsewhere_and_nothing_runs_twice(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        first = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"first-{os.getpid()}")
        second = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"second-{os.getpid()}")
        api_key, credential = tenant_and_credential(first)
        # gRPC's pick_first over two addresses: the first while it answers, then the other.
        both = f"ipv4:{first.address},{second.address}"
        worker = start_worker(stack, tmp_path, both, credential, "roamer", slots=4)
        wait_worker_connected(first, "roamer")
        jobs = [create_job(first.address, api_key, f"long-{i}", handler("sleep"), payload=b'{"seconds": 6}')
                for i in range(3)]
        # A run started ahead is running in the store up to a second before
        # its instant and only sent at it: the worker holds it from then.
        eventually(lambda: all(sent_by_now(engine, j) for j in jobs), 20, "the jobs run")
        first.kill()
        eventually(lambda: "worker roamer connected" in second.log(), 20, "the worker reconnects to the other server")
        eventually(lambda: all(ended(engine, j, "succeeded", "dead", "canceled") for j in jobs), 40, "the jobs end")
        time.sleep(SESSION_TTL * 2 + 1)  # past the reaper's grace: nothing more happens
        rows = [execution_of(engine, j) for j in jobs]
        history = {row.id: attempts_of(engine, row.id) for row in rows}
        assert worker.poll() is None
    assert "3 executions re-attached" in second.log()
    for row in rows:
        assert (row.status, row.attempt, row.delivery, row.reap_count) == ("succeeded", 1, 1, 0)
        assert [(a.delivery, a.status, a.worker_id) for a in history[row.id]] == [(1, "succeeded", "roamer")]


# --------------------------------------------------------------------------- 3. poison


def test_a_handler_that_kills_its_worker_is_dead_lettered_as_poison_after_the_cap(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"poison-{os.getpid()}")
        api_key, credential = tenant_and_credential(server)
        job_id = create_job(server.address, api_key, "poison", handler("kill-worker"))
        lives = 0
        deadline = time.monotonic() + 60
        while not ended(engine, job_id, "dead", "succeeded") and time.monotonic() < deadline:
            lives += 1  # a supervisor restarting the worker each time it dies
            worker = start_worker(stack, tmp_path, server.address, credential, f"victim-{lives}")
            while worker.poll() is None and not ended(engine, job_id, "dead", "succeeded"):
                time.sleep(0.1)
        execution = execution_of(engine, job_id)
        history = attempts_of(engine, execution.id)
    assert execution.status == "dead" and execution.dead_reason.startswith("poison"), execution
    # The cap is 3: the fourth requeue dead-letters it (a fifth worker may have
    # been started while the fourth death waited out its grace; it got nothing).
    assert execution.reap_count == 4 and lives >= 4
    assert [(a.delivery, a.status, a.worker_id) for a in history] == [
        (n, "lost", f"victim-{n}") for n in range(1, 5)
    ]


# --------------------------------------------------------------------------- 4. long job


def test_a_job_longer_than_twenty_heartbeat_timeouts_completes_once(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"long-{os.getpid()}",
                              heartbeat_interval=0.1, heartbeat_timeout=0.5)
        api_key, credential = tenant_and_credential(server)
        start_worker(stack, tmp_path, server.address, credential, "steady")
        wait_worker_connected(server, "steady")
        job_id = create_job(server.address, api_key, "long", handler("sleep"), payload=b'{"seconds": 11}')
        eventually(lambda: ended(engine, job_id, "succeeded", "dead", "canceled"), 40, "the long job ends")
        execution = execution_of(engine, job_id)
        history = attempts_of(engine, execution.id)
    assert (execution.status, execution.delivery, execution.reap_count) == ("succeeded", 1, 0)
    [attempt] = history
    assert attempt.status == "succeeded" and attempt.finished_at - attempt.started_at >= 10_000_000


# --------------------------------------------------------------------------- 5. etcd restarts


def test_etcd_restarting_under_long_jobs_re_stamps_them_and_reaps_none(
    tmp_path: Path, postgres_url: str, etcd_server: EtcdServer, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        server = start_server(stack, tmp_path, postgres_url, etcd_server.endpoint, f"etcd-{os.getpid()}")
        api_key, credential = tenant_and_credential(server)
        start_worker(stack, tmp_path, server.address, credential, "patient", slots=4)
        wait_worker_connected(server, "patient")
        jobs = [create_job(server.address, api_key, f"long-{i}", handler("sleep"), payload=b'{"seconds": 12}')
                for i in range(3)]
        eventually(lambda: all(ended(engine, j, "running") for j in jobs), 20, "the jobs run")
        with engine.connect() as conn:
            before = set(conn.execute(sa.text("SELECT DISTINCT owner FROM executions WHERE status = 'running'")).scalars())
        etcd_server.stop()
        # etcd keeps leases across a restart and extends them: a session the
        # server has not yet given up when etcd returns survives, and nothing
        # is re-stamped. Restart it only once the server says the session is
        # lost, however late a loaded machine lets it notice.
        eventually(lambda: re.search(r"etcd session [0-9a-f]+ lost", server.log()), SESSION_TTL + 30,
                   "the server notices its session is lost")
        etcd_server.start()
        eventually(lambda: "re-stamped 3 running executions" in server.log(), 20, "the server re-stamps")
        with engine.connect() as conn:
            after = set(conn.execute(sa.text("SELECT DISTINCT owner FROM executions WHERE status = 'running'")).scalars())
        assert len(before) == len(after) == 1 and before != after
        eventually(lambda: all(ended(engine, j, "succeeded", "dead", "canceled") for j in jobs), 40, "the jobs end")
        rows = [execution_of(engine, j) for j in jobs]
        assert server.process.poll() is None
    for row in rows:
        assert (row.status, row.delivery, row.reap_count) == ("succeeded", 1, 0)
        assert [a.status for a in attempts_of(engine, row.id)] == ["succeeded"]
