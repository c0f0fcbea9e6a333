"""Running real Tickwheel servers for tests: in-process (same event loop) or
as a `tickwheel server` child process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from tickwheel_server.app import TickwheelServer
from tickwheel_server.config import ServerConfig

REPO = Path(__file__).resolve().parents[2]
TICKWHEEL = str(Path(sys.executable).with_name("tickwheel"))


@dataclass
class Running:
    server: TickwheelServer
    address: str
    admin_token: str

    def admin_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.admin_token}"),)

    async def create_tenant(self, name: str) -> str:
        """Create a tenant through AdminService; returns its API key."""
        async with grpc.aio.insecure_channel(self.address) as channel:
            reply = await admin_pb2_grpc.AdminServiceStub(channel).CreateTenant(
                admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=name)), metadata=self.admin_metadata()
            )
        return reply.api_key.secret

    async def issue_worker_credential(self, tenants: Sequence[str], handlers: Sequence[str] = (), http: bool = False) -> str:
        """Issue a worker credential through AdminService for ``tenants``,
        allowing the named handlers (and HTTP targets when ``http``); returns its secret."""
        async with grpc.aio.insecure_channel(self.address) as channel:
            reply = await admin_pb2_grpc.AdminServiceStub(channel).IssueWorkerCredential(
                admin_pb2.IssueWorkerCredentialRequest(tenants=tenants, handlers=handlers, http=http),
                metadata=self.admin_metadata(),
            )
        return reply.credential.secret


SESSION_TTL = 10
"""The etcd session TTL (seconds) of an in-process server unless a test sets
``session_ttl``: the production default. Such a server shares its process
(the GIL, often the event loop) with the test driving it, and on a loaded
machine, beside other pytest-xdist workers, it may not run for a second or
two; a short TTL then expires the session of a test that is not about it. A
test of what the TTL decides (the reaper's grace, a re-attach's grace, a
takeover) passes ``session_ttl`` itself."""


@contextlib.asynccontextmanager
async def running_server(store: str, etcd: str = "memory", **overrides) -> AsyncIterator[Running]:
    token = "twa_" + secrets.token_urlsafe(24)  # never starts with "-" (a command-line argument)
    config = ServerConfig(
        store=store, etcd=etcd, admin_token=token, listen="127.0.0.1:0", migrate=True,
        shutdown_grace=1.0, **{"session_ttl": SESSION_TTL, **overrides},
    )
    server = TickwheelServer(config)
    await server.start()
    try:
        yield Running(server, server.address, token)
    finally:
        await server.stop(0.5)


async def on_each_backend(servers: Mapping[str, Running], case: Callable[[Running], Awaitable[None]]) -> None:
    """Run ``case(server)`` on each of ``servers`` (by backend name: the
    integration tests' ``servers_on_each_backend`` fixture) at once, in this
    loop: a case that waits real minutes (cron is minute-grained) waits them
    once for every backend, not once for each. Every case runs to its end;
    fails with the failure of each that failed, noted with its backend."""
    outcomes = await asyncio.gather(*(case(server) for server in servers.values()), return_exceptions=True)
    failures = []
    for backend, outcome in zip(servers, outcomes):
        if isinstance(outcome, BaseException):
            outcome.add_note(f"on the {backend} backend")
            failures.append(outcome)
    if failures:
        raise BaseExceptionGroup(f"failed on {len(failures)} of {len(servers)} backends", failures)


@dataclass
class ServerProcess:
    process: subprocess.Popen
    address: str
    admin_token: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text()

    def terminate(self, timeout: float = 20.0) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def start_server_process(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
                         timeout: float = 120.0) -> ServerProcess:
    """Start `tickwheel server ARGS --listen 127.0.0.1:0` and wait until its log says it serves.

    A thread copies the child's output to a log file and signals the moment
    the "serving on HOST:PORT" line appears (or the child exits, at once).
    ``timeout`` is only a backstop for a server that neither serves nor
    exits: generous, because a first start migrates a new store from
    nothing, which on a loaded 2-core machine (the suite beside its
    toolchain builds) took more than 30 s.
    """
    token = "twa_" + secrets.token_urlsafe(24)  # never starts with "-" (a command-line argument)
    log_path = tmp_path / f"server-{len(list(tmp_path.glob('server-*.log')))}.log"
    child_env = {**os.environ, "TICKWHEEL_ADMIN_TOKEN": token, **(env or {})}
    process = subprocess.Popen(
        [TICKWHEEL, "server", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_env, cwd=tmp_path, text=True,
    )
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        with log_path.open("w") as log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                match = re.search(r"serving on (\S+:\d+)", line)
                if match and not found:
                    found.append(match.group(1))
                    ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(timeout) or not found:
        process.kill()
        process.wait(10)
        raise AssertionError(f"tickwheel server did not start (exit {process.returncode}):\n{log_path.read_text()}")
    return ServerProcess(process, found[0], token, log_path)


def stop_process(process: subprocess.Popen, timeout: float = 20.0) -> int | None:
    """SIGTERM, then SIGKILL if it does not exit in time; a no-op if it already exited."""
    if process.poll() is not None:
        return process.returncode
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
        return None


def start_cluster_server(stack: contextlib.ExitStack, tmp_path: Path, store: str, etcd: str, server_id: str,
                         *args: str, session_ttl: int = 2) -> ServerProcess:
    """`tickwheel server` as ``server_id`` of a cluster on ``store`` and
    ``etcd``, with a short session TTL so that a killed member is noticed
    within a test; ``args`` are added. Stopped when ``stack`` closes."""
    server = start_server_process(
        tmp_path, "--store", store, "--etcd", etcd, "--server-id", server_id, "--session-ttl", str(session_ttl), *args,
    )
    stack.callback(stop_process, server.process)
    return server


def start_worker_process(stack: contextlib.ExitStack, tmp_path: Path, address: str, credential: str, worker_id: str,
                         *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`tickwheel worker` as ``worker_id`` on the server at ``address`` (a
    2 s stop grace; ``args`` are added; ``env`` added to its environment), its
    output appended to ``worker-ID.log`` in ``tmp_path``. The repository is on
    its PYTHONPATH, so ``--handlers`` may name a module of the tests. Stopped
    when ``stack`` closes."""
    log = (tmp_path / f"worker-{worker_id}.log").open("a")
    stack.callback(log.close)
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "TICKWHEEL_WORKER_CREDENTIAL": credential}  # the environment, as a deployment should: ps shows flags
    process = subprocess.Popen(
        [TICKWHEEL, "worker", "--address", address, "--worker-id", worker_id, "--grace", "2", *args],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env,
    )
    stack.callback(stop_process, process)
    return process
