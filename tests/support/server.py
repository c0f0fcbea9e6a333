"""Running real Tickwheel servers for tests: in-process (same event loop) or
as a `tickwheel server` child process."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
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


@contextlib.asynccontextmanager
async def running_server(store: str, etcd: str = "memory", **overrides) -> AsyncIterator[Running]:
    token = "twa_" + secrets.token_urlsafe(24)  # never starts with "-" (a command-line argument)
    config = ServerConfig(
        store=store, etcd=etcd, admin_token=token, listen="127.0.0.1:0", migrate=True, session_ttl=2,
        shutdown_grace=1.0, **overrides,
    )
    server = TickwheelServer(config)
    await server.start()
    try:
        yield Running(server, server.address, token)
    finally:
        await server.stop(0.5)


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


def start_server_process(tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30.0) -> ServerProcess:
    """Start `tickwheel server ARGS --listen 127.0.0.1:0` and wait until its log says it serves.

    A thread copies the child's output to a log file and signals the moment
    the "serving on HOST:PORT" line appears (or the child exits).
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
