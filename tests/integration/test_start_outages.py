"""A server started while PostgreSQL or etcd is down waits for it
(tickwheel_server/waiting.py), and a store restart under a running server
logs no traceback for the outage (telemetry/outages.py).

Real `tickwheel server` and `tickwheel worker` processes, one real
PostgreSQL and one real etcd, which the tests stop and start:

- started with the dependency down, the server binds its port, answers
  health NOT_SERVING (and refuses other calls with UNAVAILABLE naming what
  it waits for), logs one line a retry naming the dependency, its address
  and the error, and no traceback;
- once the dependency is back it serves on that same port without anyone
  touching it, and a job created after runs once, never early (the audit).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import threading
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from tests.support import audit
from tests.support.etcd import EtcdServer
from tests.support.faults import (
    HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, LOOPBACK, PARTITIONS, SESSION_TTL, RecordingTarget, count, create_jobs,
    eventually, migrated_store, now, settle, spaced, start_server, start_worker, tenant, wait_connected,
)
from tests.support.postgres import PostgresServer
from tests.support.server import TICKWHEEL, ServerProcess, start_server_process, stop_process

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVING = health_pb2.HealthCheckResponse.SERVING


class WaitingStart:
    """`tickwheel server` started in a thread (its start returns only once it
    serves); the log is read while it waits."""

    def __init__(self, stack: ExitStack, tmp_path: Path, store: str, etcd: str, server_id: str) -> None:
        config = tmp_path / f"{server_id}.toml"
        config.write_text(f"heartbeat_interval = {HEARTBEAT_INTERVAL}\nheartbeat_timeout = {HEARTBEAT_TIMEOUT}\n")
        self.log_path = tmp_path / f"server-{len(list(tmp_path.glob('server-*.log')))}.log"
        self._started: list[ServerProcess] = []
        self._failed: list[BaseException] = []
        self._stack = stack
        args = ["--store", store, "--etcd", etcd, "--server-id", server_id, "--session-ttl", str(SESSION_TTL),
                "--partition-count", str(PARTITIONS), "--config", str(config), "--allow-target-network", LOOPBACK]

        def run() -> None:
            try:
                self._started.append(start_server_process(tmp_path, *args, timeout=180))
            except BaseException as error:  # reported by `served`
                self._failed.append(error)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def waiting_port(self, what: str) -> int:
        """The port of the placeholder, once the log says the start waits for ``what``."""
        line = eventually(
            lambda: re.search(rf"waiting for {what} at .*health NOT_SERVING on port (\d+)", self.log()), 60,
            f"the server says it waits for {what}",
        )
        return int(line.group(1))

    def served(self) -> ServerProcess:
        self._thread.join(180)
        assert not self._failed, self._failed[0]
        assert self._started, "the start did not end:\n" + self.log()
        server = self._started[0]
        self._stack.callback(stop_process, server.process)
        return server


def health(address: str, service: str = "") -> int:
    with grpc.insecure_channel(address) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def assert_waits_serving_nothing(address: str, what: str) -> None:
    assert health(address) == NOT_SERVING
    assert health(address, "tickwheel.v1.SchedulerService") == NOT_SERVING
    assert health(address, "tickwheel.v1.WorkerService") == NOT_SERVING
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as refused:
        admin_pb2_grpc.AdminServiceStub(channel).ClusterStatus(admin_pb2.ClusterStatusRequest(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert refused.value.details().startswith(f"starting: waiting for {what} at ")


def run_one_job(stack: ExitStack, tmp_path: Path, server: ServerProcess, engine, target: RecordingTarget) -> None:
    """A job created now, due in 2 s: run once, not early (the audit)."""
    acme = tenant(server, "acme")
    start_worker(stack, tmp_path, server.address, acme.credential, "acme-w")
    wait_connected(server, "acme-w")
    due = now() + timedelta(seconds=2)
    create_jobs(server.address, acme, target.url("/ok"), spaced(due, 1, 0), "acme")
    left = settle(engine, ["acme"], due + timedelta(seconds=0.5), timeout=30)
    audit.assert_clean(engine, ["acme"], due + timedelta(seconds=0.5), deliveries=target.deliveries)
    assert not left
    assert len(target.calls) == 1
    assert target.calls[0].began >= due.timestamp()


def serves_where_it_waited_and_runs_one_job(
    stack: ExitStack, tmp_path: Path, start: WaitingStart, port: int, engine, target: RecordingTarget
) -> ServerProcess:
    """The start that waited serves on the port its health said NOT_SERVING
    on, SERVING now; a job created then runs once, not early; no traceback."""
    server = start.served()
    assert server.address == f"127.0.0.1:{port}"  # where health said NOT_SERVING
    assert health(server.address) == SERVING
    run_one_job(stack, tmp_path, server, engine, target)
    assert "Traceback" not in server.log()
    return server


def test_a_server_started_while_postgres_is_down_waits_then_serves(
    tmp_path: Path, postgres_url: str, postgres_server: PostgresServer, etcd_endpoint: str
) -> None:
    target = RecordingTarget()
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        postgres_server.stop(mode="fast")
        engine.dispose()
        start = WaitingStart(stack, tmp_path, postgres_url, etcd_endpoint, f"pgstart-{os.getpid()}")
        port = start.waiting_port("the store")
        assert_waits_serving_nothing(f"127.0.0.1:{port}", "the store")
        eventually(lambda: start.log().count("waiting for the store") >= 2, 60, "a second try, its own line")
        postgres_server.start()

        server = serves_where_it_waited_and_runs_one_job(stack, tmp_path, start, port, engine, target)
        log = server.log()
        assert "waiting for the store at postgresql+psycopg://" in log
        assert re.search(r"the store at \S+ answers after \d+ failed tries", log)


def test_a_server_started_while_etcd_is_down_waits_then_serves(
    tmp_path: Path, postgres_url: str, etcd_server: EtcdServer
) -> None:
    target = RecordingTarget()
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        etcd_server.stop(signal.SIGKILL)
        start = WaitingStart(stack, tmp_path, postgres_url, etcd_server.endpoint, f"etcdstart-{os.getpid()}")
        port = start.waiting_port("etcd")
        assert_waits_serving_nothing(f"127.0.0.1:{port}", "etcd")
        assert f"waiting for etcd at {etcd_server.endpoint} (try 1): LeaseStoreUnavailable:" in start.log()
        etcd_server.start()

        serves_where_it_waited_and_runs_one_job(stack, tmp_path, start, port, engine, target)


def test_a_server_stopped_while_it_waits_exits_cleanly(tmp_path: Path, etcd_server: EtcdServer) -> None:
    etcd_server.stop(signal.SIGKILL)
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [TICKWHEEL, "server", "--listen", "127.0.0.1:0", "--store", f"sqlite:///{tmp_path / 'store.db'}",
             "--migrate", "--etcd", etcd_server.endpoint],
            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, "TICKWHEEL_ADMIN_TOKEN": "twa_" + secrets.token_urlsafe(24)},
        )
    try:
        eventually(lambda: "waiting for etcd at" in log_path.read_text(), 60, "the server waits for etcd")
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
    finally:
        stop_process(process)
    text = log_path.read_text()
    assert "stopping before the start completed" in text
    assert "Traceback" not in text and "serving on" not in text


OUTAGE_LINE = r"WARNING \S+: (\w[\w ]*?): .* failed, store unavailable: "


def outage_lines(log: str) -> set[str]:
    """The components that logged the beginning of a store outage."""
    return set(re.findall(OUTAGE_LINE, log))


def test_a_postgres_restart_under_a_running_server_logs_no_traceback(
    tmp_path: Path, postgres_url: str, postgres_server: PostgresServer, etcd_endpoint: str
) -> None:
    target = RecordingTarget()
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"pgrestart-{os.getpid()}")
        acme = tenant(server, "acme")
        start_worker(stack, tmp_path, server.address, acme.credential, "acme-w")
        wait_connected(server, "acme-w")
        first = now() + timedelta(seconds=1)
        create_jobs(server.address, acme, target.url("/ok"), spaced(first, 10, 0.3), "acme")
        until = first + timedelta(seconds=3)
        eventually(lambda: count(engine, "SELECT count(*) FROM executions WHERE status = 'succeeded'") >= 2, 15,
                   "the jobs are under way")
        postgres_server.stop(mode="fast")
        # Down until the claim loop and the liveness loop have both met it
        # (each retries every second or so), so more than one component logs it.
        eventually(lambda: {"dispatcher", "liveness"} <= outage_lines(server.log()), 30,
                   "the dispatcher and the liveness loop meet the outage")
        postgres_server.start()
        engine.dispose()
        left = settle(engine, ["acme"], until, timeout=30)
        eventually(lambda: all(f"{name}: recovered after" in server.log() for name in outage_lines(server.log())), 30,
                   "each component that logged the outage logs its end")
        audit.assert_clean(engine, ["acme"], until, deliveries=target.deliveries)
        assert not left
        log = server.log()
        assert server.process.poll() is None
        assert "Traceback" not in log, log
        warnings = re.findall(OUTAGE_LINE, log)
        assert len(warnings) == len(set(warnings)), warnings  # one line per component
