"""pytest plugin: one throwaway etcd for the whole test session.

Fixtures:

* ``etcd_endpoint`` -> ``"127.0.0.1:PORT"``, a healthy etcd.
* ``etcd_prefix`` -> ``"/t/<uuid>/"``, unique per test; tests keep their keys
  under it (deleted again at teardown) so they never see each other's.
* ``etcd_server`` -> :class:`EtcdServer` with ``.endpoint``, ``.stop()``,
  ``.start()``, ``.restart()`` for fault tests (same ports, same data dir, so
  etcd comes back with its data and leases). A test that leaves it stopped gets
  it restarted at teardown.

The server is started on free loopback ports (client and peer) with its data
in a temporary folder, tuned for short lease TTLs (heartbeat 50 ms, election
timeout 500 ms, so the minimum lease TTL is 1 s), and killed at session end.
``TICKWHEEL_TEST_ETCD=host:port`` reuses an existing etcd instead (then
``etcd_server`` skips, saying why: it cannot restart a server it does not own).
If no ``etcd`` binary is found (``TICKWHEEL_ETCD_BIN``, ``/usr/bin/etcd``, PATH),
every test that needs etcd fails with a message saying how to install it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


def _find_etcd() -> str | None:
    explicit = os.environ.get("TICKWHEEL_ETCD_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for candidate in ("/usr/bin/etcd", shutil.which("etcd")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (each socket is held open
    until all are picked, so the kernel cannot hand the same one twice)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class EtcdServer:
    """An etcd member owned by the test session: a single-node cluster, or
    (with ``name``, ports and ``initial_cluster`` given) a member of the
    cluster of :mod:`tests.support.etcd_cluster`."""

    def __init__(
        self,
        binary: str,
        workdir: Path,
        *,
        name: str = "tickwheel-test",
        ports: tuple[int, int] | None = None,
        initial_cluster: str | None = None,
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.name = name
        self.data_dir = workdir / "data"
        self.log_path = workdir / "etcd.log"
        self.client_port, self.peer_port = ports or free_ports(2)
        self.endpoint = f"127.0.0.1:{self.client_port}"
        self.peer_url = f"http://127.0.0.1:{self.peer_port}"
        self.initial_cluster = initial_cluster or f"{name}={self.peer_url}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _command(self) -> list[str]:
        client = f"http://127.0.0.1:{self.client_port}"
        peer = self.peer_url
        return [
            self.binary,
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial_cluster,
            "--initial-cluster-state", "new",
            "--heartbeat-interval", "50",
            "--election-timeout", "500",
            "--logger", "zap",
            "--log-level", "warn",
        ]  # fmt: skip

    def start(self) -> None:
        """Start etcd (no-op if running) and wait until it reports healthy."""
        if self.running:
            return
        self.launch()
        self.wait_healthy()

    def launch(self) -> None:
        """Start the etcd process without waiting for it (the members of a
        new cluster are healthy only once a quorum of them runs)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        self._log = open(self.log_path, "ab")
        self._process = subprocess.Popen(
            self._command(), stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def wait_healthy(self) -> None:
        """Wait until etcd reports healthy (a member: it has a leader)."""
        deadline = time.monotonic() + START_TIMEOUT
        url = f"http://{self.endpoint}/health"
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise RuntimeError(f"etcd exited during start-up (code {self._process and self._process.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    body = response.read().decode()
                if '"health":"true"' in body.replace(" ", ""):
                    return
                last = body
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.05)  # polling a child process we cannot await
        self.stop()
        raise RuntimeError(f"etcd at {self.endpoint} not healthy after {START_TIMEOUT}s ({last}):\n{self.log_tail()}")

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Stop etcd with ``sig`` (SIGKILL by default: a crash) and wait for it."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)
        if self._log is not None:
            self._log.close()
            self._log = None

    def freeze(self) -> None:
        """Stop etcd with SIGSTOP and wait until every thread of it has
        stopped. ``kill`` only queues SIGSTOP: the thread the kernel picks
        stops the others once it runs, and on a loaded machine the others
        may answer requests meanwhile (a revoke sent just after the
        signal was answered so). The stop is the one the kernel reports to
        its parent (``waitpid`` with ``WUNTRACED``)."""
        process = self._process
        assert process is not None and process.poll() is None, "etcd is not running"
        process.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + STOP_TIMEOUT
        while True:
            pid, status = os.waitpid(process.pid, os.WUNTRACED | os.WNOHANG)
            if pid and os.WIFSTOPPED(status):
                return
            if pid or time.monotonic() > deadline:
                raise RuntimeError(f"etcd did not stop on SIGSTOP (waitpid status {status})")
            time.sleep(0.005)  # polling a child process we cannot await

    def thaw(self) -> None:
        """Let etcd run again after :meth:`freeze`."""
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def restart(self, sig: int = signal.SIGKILL) -> None:
        """Stop (``sig``) and start again on the same ports and data dir."""
        self.stop(sig)
        self.start()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class _ExternalEtcd:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint


_started_service: EtcdServer | _ExternalEtcd | None = None


def _delete_prefix(endpoint: str, prefix: str) -> None:
    import grpc
    from pyetcd.etcdrpc import rpc_pb2, rpc_pb2_grpc

    from tickwheel_server.lease.types import prefix_range_end

    with grpc.insecure_channel(endpoint) as channel:
        rpc_pb2_grpc.KVStub(channel).DeleteRange(
            rpc_pb2.DeleteRangeRequest(key=prefix.encode(), range_end=prefix_range_end(prefix.encode())),
            timeout=5,
        )


@pytest.fixture(scope="session")
def _etcd_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer | _ExternalEtcd]:
    global _started_service
    external = os.environ.get("TICKWHEEL_TEST_ETCD")
    if external:
        _started_service = _ExternalEtcd(external.removeprefix("etcd://").removeprefix("http://"))
        yield _started_service
        _started_service = None
        return
    binary = _find_etcd()
    if binary is None:
        pytest.fail(
            "etcd is not installed: the etcd tests need an etcd binary (/usr/bin/etcd or `etcd` on PATH, "
            "or TICKWHEEL_ETCD_BIN). Install it with `apt-get install etcd-server`, or point "
            "TICKWHEEL_TEST_ETCD=host:port at a running etcd.",
            pytrace=False,
        )
    server = EtcdServer(binary, tmp_path_factory.mktemp("etcd"))
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(f"could not start the test etcd: {exc}", pytrace=False)
    _started_service = server
    try:
        yield server
    finally:
        _started_service = None
        server.stop(signal.SIGTERM)


@pytest.fixture
def etcd_server(_etcd_service: EtcdServer | _ExternalEtcd) -> Iterator[EtcdServer]:
    """The session's etcd process, for tests that stop or restart it."""
    if not isinstance(_etcd_service, EtcdServer):
        pytest.skip("TICKWHEEL_TEST_ETCD points at an etcd this session does not own; cannot restart it")
    _etcd_service.start()
    try:
        yield _etcd_service
    finally:
        _etcd_service.start()  # leave it running for the next test


@pytest.fixture
def etcd_endpoint(_etcd_service: EtcdServer | _ExternalEtcd) -> str:
    """``"127.0.0.1:PORT"`` of a running etcd."""
    if isinstance(_etcd_service, EtcdServer):
        _etcd_service.start()
    return _etcd_service.endpoint


@pytest.fixture
def etcd_prefix() -> Iterator[str]:
    """A key prefix unique to this test; its keys are deleted from the test
    etcd at teardown (if one was started)."""
    prefix = f"/t/{uuid.uuid4().hex}/"
    yield prefix
    service = _started_service  # also covers etcd requested later, via getfixturevalue
    if service is not None and (not isinstance(service, EtcdServer) or service.running):
        try:
            _delete_prefix(service.endpoint, prefix)
        except Exception:  # cleanup only; the server is throwaway
            pass
