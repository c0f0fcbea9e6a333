"""pytest plugin: a throwaway three-member etcd cluster per test.

Fixture ``etcd_cluster`` -> :class:`EtcdCluster`: three
:class:`~tests.support.etcd.EtcdServer` members (static ``--initial-cluster``
on free loopback ports, data in the test's temporary folder, which
scripts/test.sh puts on /dev/shm; the single member's tuning: heartbeat
50 ms, election timeout 500 ms), with helpers to kill (SIGKILL), freeze
(SIGSTOP) and thaw, restart a member, and find the leader
(``etcdctl endpoint status -w json``). Every member is killed at teardown.

If no ``etcd`` binary is found the test fails saying how to install it (as
the single member's fixture does).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.etcd import START_TIMEOUT, EtcdServer, _find_etcd, free_ports

MEMBERS = 3


class EtcdCluster:
    """Three etcd members on loopback; ``members[i].endpoint`` is ``host:port``."""

    def __init__(self, binary: str, workdir: Path, size: int = MEMBERS) -> None:
        ports = free_ports(2 * size)
        names = [f"m{index}" for index in range(size)]
        initial = ",".join(f"{name}=http://127.0.0.1:{ports[2 * i + 1]}" for i, name in enumerate(names))
        self.members = [
            EtcdServer(binary, workdir / name, name=name, ports=(ports[2 * i], ports[2 * i + 1]), initial_cluster=initial)
            for i, name in enumerate(names)
        ]
        self.etcdctl = shutil.which("etcdctl", path=str(Path(binary).parent)) or shutil.which("etcdctl")

    @property
    def endpoints(self) -> list[str]:
        return [member.endpoint for member in self.members]

    def spec(self, order: Sequence[int] | None = None) -> str:
        """The ``--etcd`` value naming the members in ``order`` (all, in order, by default)."""
        return ",".join(self.members[i].endpoint for i in (order if order is not None else range(len(self.members))))

    def start(self) -> None:
        """Start every member that is not running and wait until all are healthy."""
        stopped = [member for member in self.members if not member.running]
        for member in stopped:
            member.workdir.mkdir(parents=True, exist_ok=True)
            member.launch()
        for member in stopped:
            member.wait_healthy()

    def kill(self, index: int) -> None:
        """SIGKILL member ``index`` (a crash)."""
        self.members[index].stop(signal.SIGKILL)

    def freeze(self, index: int) -> None:
        """SIGSTOP member ``index`` (alive, silent); :meth:`thaw` resumes it."""
        self.members[index].freeze()

    def thaw(self, index: int) -> None:
        self.members[index].thaw()

    def restart(self, index: int, sig: int = signal.SIGTERM) -> None:
        """Stop member ``index`` with ``sig`` and start it again on its ports
        and data (a rolling upgrade's step); waits until it is healthy."""
        self.members[index].restart(sig)

    def status(self) -> list[dict]:
        """``etcdctl endpoint status -w json`` of the running members."""
        running = [member.endpoint for member in self.members if member.running]
        if self.etcdctl is None:
            raise RuntimeError("etcdctl is not installed (it comes with etcd: apt-get install etcd-client)")
        done = subprocess.run(
            [self.etcdctl, "--endpoints", ",".join(running), "--command-timeout=2s", "endpoint", "status", "-w", "json"],
            capture_output=True, text=True, timeout=10, env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        if not done.stdout.strip():
            raise RuntimeError(f"etcdctl endpoint status: {done.stderr.strip()}")
        return json.loads(done.stdout)

    def leader(self, timeout: float = START_TIMEOUT) -> int:
        """The index of the member the running members agree leads the cluster
        (waits until they agree on one)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            try:
                statuses = self.status()
                by_id = {entry["Status"]["header"]["member_id"]: entry["Endpoint"] for entry in statuses}
                leaders = {entry["Status"]["leader"] for entry in statuses}
                if len(statuses) == sum(m.running for m in self.members) and len(leaders) == 1:
                    [leader] = leaders
                    if leader in by_id:
                        return self.endpoints.index(by_id[leader].removeprefix("http://"))
                last = f"{len(statuses)} answered, leaders {sorted(leaders)}"
            except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the etcd members agree on no leader within {timeout}s ({last})")
            time.sleep(0.1)  # polling other processes

    def close(self) -> None:
        for member in self.members:
            if member.running:
                member.thaw()
                member.stop(signal.SIGKILL)


@pytest.fixture
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """A new three-member etcd cluster, all members healthy."""
    binary = _find_etcd()
    if binary is None:
        pytest.fail(
            "etcd is not installed: the etcd cluster tests need an etcd binary (/usr/bin/etcd or `etcd` on PATH, "
            "or TICKWHEEL_ETCD_BIN). Install it with `apt-get install etcd-server etcd-client`.",
            pytrace=False,
        )
    cluster = EtcdCluster(binary, tmp_path_factory.mktemp("etcd-cluster"))
    try:
        cluster.start()
        cluster.leader()
        yield cluster
    finally:
        cluster.close()
