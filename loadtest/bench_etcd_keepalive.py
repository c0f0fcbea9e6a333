"""What keeping etcd sessions alive costs (issue: the etcd cut a server rides
out): ``--sessions`` sessions of ``--ttl`` seconds on one lease store (as that
many servers would hold one each) renew for ``--seconds`` on a throwaway
single-node etcd (or ``--etcd HOST:PORT``); prints one JSON object with the
renewals per second, this process's CPU per second and per renewal, and
etcd's CPU per renewal (throwaway etcd only).

    PYTHONPATH=.:server:workers:sdk/python .venv/bin/python loadtest/bench_etcd_keepalive.py --sessions 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import etcd  # noqa: E402

from tickwheel.shared.clock import SystemClock  # noqa: E402
from tickwheel_server.lease import open_lease_store  # noqa: E402


def cpu_of(pid: int | None) -> float:
    """Seconds of CPU (user + system) of process ``pid`` so far; 0 if unknown."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def etcd_pid(endpoint: str) -> int | None:
    """The pid of the etcd listening on ``endpoint``'s port, if it is ours to read."""
    port = endpoint.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline and cmdline[0].endswith(b"etcd") and any(port.encode() in arg for arg in cmdline):
                return int(entry.name)
    return None


async def measure(endpoint: str, sessions: int, ttl: int, seconds: float) -> dict[str, object]:
    store = open_lease_store(endpoint, SystemClock())
    try:
        held = [await store.open_session(ttl) for _ in range(sessions)]
        await asyncio.sleep(1)
        pid = etcd_pid(endpoint)
        renewals, cpu, etcd_cpu, started = sum(s.renewals for s in held), time.process_time(), cpu_of(pid), time.monotonic()
        await asyncio.sleep(seconds)
        wall = time.monotonic() - started
        renewals = sum(s.renewals for s in held) - renewals
        cpu, etcd_cpu = time.process_time() - cpu, cpu_of(pid) - etcd_cpu
        assert not any(s.lost.is_set() for s in held), "a session was lost"
    finally:
        await store.close()
    return {
        "sessions": sessions, "ttl": ttl, "seconds": round(wall, 1),
        "renewals_per_s": round(renewals / wall, 2),
        "client_cpu_ms_per_s": round(1000 * cpu / wall, 2),
        "client_cpu_us_per_renewal": round(1e6 * cpu / max(renewals, 1), 1),
        "etcd_cpu_us_per_renewal": round(1e6 * etcd_cpu / max(renewals, 1), 1) if pid else None,
        "loadavg": Path("/proc/loadavg").read_text().split()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--ttl", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--etcd", default=None, help="HOST:PORT of a running etcd (default: a throwaway one)")
    args = parser.parse_args()
    with etcd(args.etcd) as endpoint:
        print(json.dumps(asyncio.run(measure(endpoint, args.sessions, args.ttl, args.seconds))))


if __name__ == "__main__":
    main()
