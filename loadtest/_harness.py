"""What the end-to-end benchmarks share: a throwaway PostgreSQL and etcd, real
``tickwheel server`` and ``tickwheel worker`` processes, and the accounting
around them (CPU per process tree from ``/proc``, etcd's request counters from
its ``/metrics``, the load average).

Nothing here is a stand-in: the server and the workers are the installed
``tickwheel`` program, started as child processes on loopback, talking to a
real PostgreSQL and a real etcd. PostgreSQL and etcd are the test suite's
(``tests/support``): PostgreSQL ``initdb``'d in RAM with fsync off, SERIALIZABLE
by default; etcd on free ports with its data in a temporary folder. Either can
be replaced by a running one (``--pg URL``, ``--etcd HOST:PORT``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import grpc
import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import etcd as etcdsupport  # noqa: E402
from tests.support import postgres as pgsupport  # noqa: E402
from tests.support.server import TICKWHEEL, ServerProcess, start_server_process  # noqa: E402
from tickwheel_server.api.validate import normalise_job, zone_of  # noqa: E402
from tickwheel.shared.ids import new_job_id, partition_of, to_us  # noqa: E402
from tickwheel_server.jobspec import schedule_of  # noqa: E402
from tickwheel_server.lease.keys import wake_key  # noqa: E402
from tickwheel_server.schedule import tzdata_version  # noqa: E402
from tickwheel_server.schedule import validate as validate_schedule  # noqa: E402

PARTITIONS = 256
TENANT = "bench"
HANDLER = "echo"
BUILTINS = "tickwheel_worker.handlers:register_builtins"
READY_TIMEOUT = 60.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
OWN_QUERY = "/* tickwheel-bench */"
"""Prefix of the benchmark's own queries, left out of ``Statements``."""
DATA_TABLES = ("attempts", "executions", "skips", "request_ids", "jobs", "job_cursors", "tzdata_versions")
ATTEMPTS = (
    "(SELECT execution_id, attempt, delivery, status, started_at, finished_at, worker_id, worker_started_at "
    "FROM attempts UNION ALL SELECT id, attempt, delivery, 'succeeded', attempt_started_at, finished_at, "
    "attempt_worker_id, attempt_worker_started_at FROM executions WHERE attempt_started_at IS NOT NULL)"
)
"""Every recorded attempt, as a subquery: the rows of ``attempts`` and the
attempts plain successes keep on their execution rows (migration 0025)."""


def load_average() -> list[float]:
    """``/proc/loadavg``'s three figures: the machine is shared, so every figure carries them."""
    return [round(x, 2) for x in os.getloadavg()]


def conninfo(url: str) -> str:
    """A libpq conninfo for a SQLAlchemy URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def observe(url: str, *, autocommit: bool = True) -> psycopg.Connection:
    """A connection for the benchmark's own work beside a running server, at
    READ COMMITTED. The store's default is SERIALIZABLE, and a serializable
    transaction takes part in the server's read/write conflicts (it could make
    the server's transactions fail, and fail itself); a READ COMMITTED one
    never does."""
    return psycopg.connect(conninfo(url), autocommit=autocommit,
                           options="-c default_transaction_isolation=read\\ committed")


def ended_and_jobs(pg: psycopg.Connection, since_us: int = 0) -> tuple[int, int]:
    """(executions ended, jobs) right now, on a poll's one connection (a
    new one per poll would cost PostgreSQL a backend's start each time,
    counted as the server's CPU). Executions of instants from ``since_us``
    on: each tenant's range of the ended rows' ``(tenant, nominal_at, id)``
    index past :func:`insert_history`'s (:data:`ENDED_SINCE`), whose cost
    does not grow with it."""
    return pg.execute(
        f"{OWN_QUERY} SELECT (SELECT count(*) FROM executions WHERE {ENDED_SINCE}), (SELECT count(*) FROM jobs)",
        (since_us,),
    ).fetchone()


ENDED_SINCE = (
    "tenant IN (SELECT name FROM tenants) AND status IN ('succeeded', 'dead', 'canceled') AND nominal_at >= %s"
)
"""Ended executions of instants from a parameter on, read tenant by tenant
(``executions_ended_tenant``: there is no index of every tenant's since
migration 0037, and a tenant named is a range of it on every schema)."""


def store_url(url: str) -> str:
    """``url`` with the driver the server uses (``postgresql+psycopg``)."""
    return make_url(url).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


# ------------------------------------------------------------------ services

_pg_log: Path | None = None
"""The throwaway PostgreSQL's log while :func:`postgres` runs one."""


@contextlib.contextmanager
def postgres(url: str | None, settings: dict[str, str] | None = None) -> Iterator[str]:
    """``url`` as is, or a database on a throwaway server started with the test
    suite's functions (deleted afterwards), with ``settings`` on top of theirs."""
    if url:
        yield store_url(url)
        return
    bindir = pgsupport.find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed: " + pgsupport.INSTALL_HINT)
    global _pg_log
    # The test settings (fsync off, SERIALIZABLE default) with room for the data in memory.
    # pg_stat_statements: what the server sends, counted (see ``Statements``).
    pgsupport.SERVER_SETTINGS.update({"shared_buffers": "512MB", "max_wal_size": "4GB", "work_mem": "16MB",
                                      "shared_preload_libraries": "pg_stat_statements", **(settings or {})})
    server = pgsupport.PostgresServer(bindir)
    undo = pgsupport._finalize_on_sigterm()
    try:
        server.start()
        server.setup_template()
        _pg_log = server.log_path
        yield server.url(server.create_database())
    finally:
        _pg_log = None
        server.close()
        undo()


class PostgresErrors:
    """ERROR lines the throwaway PostgreSQL logged from now on, counted by
    message (a serialization failure the store retried shows here); None
    for a server that is not ours."""

    def __init__(self) -> None:
        self._offset = _pg_log.stat().st_size if _pg_log is not None and _pg_log.exists() else None

    def counts(self) -> dict[str, int] | None:
        if self._offset is None or _pg_log is None:
            return None
        with _pg_log.open("rb") as log:
            log.seek(self._offset)
            text = log.read().decode(errors="replace")
        out: dict[str, int] = {}
        for line in text.splitlines():
            _, sep, message = line.partition("ERROR:")
            if sep:
                message = message.strip()
                out[message] = out.get(message, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


LOCK_WAIT_SETTINGS = {"log_lock_waits": "on", "deadlock_timeout": "100ms", "log_min_messages": "log",
                      "log_min_error_statement": "log"}
"""PostgreSQL settings under which :class:`LockWaits` has lines to read: every
lock waited for over 100 ms is logged while it waits and when granted, with
its statement."""
_LOCK_LINE = re.compile(r"process \d+ (still waiting for|acquired) (\w+) on (.+?) after ([\d.]+) ms")


class LockWaits:
    """The lock waits the throwaway PostgreSQL logged from now on (under
    :data:`LOCK_WAIT_SETTINGS`): waits granted after 100 ms or more
    (``granted``: count, by what was waited on and by statement, over one
    and two seconds, the longest), waits still running (``waiting``: the longest seen), and
    statements cancelled by a ``lock_timeout`` (``timed_out``), each with
    the statement that waited (its first 160 characters, the most frequent
    first). None for a server that is not ours."""

    def __init__(self) -> None:
        self._offset = _pg_log.stat().st_size if _pg_log is not None and _pg_log.exists() else None

    def counts(self) -> dict | None:
        if self._offset is None or _pg_log is None:
            return None
        with _pg_log.open("rb") as log:
            log.seek(self._offset)
            lines = log.read().decode(errors="replace").splitlines()
        granted: list[tuple[float, str, str]] = []
        longest_waiting = 0.0
        timed_out: dict[str, int] = {}
        for i, line in enumerate(lines):
            statement = next((rest.partition("STATEMENT:")[2].strip()[:160] for rest in lines[i + 1:i + 4]
                              if "STATEMENT:" in rest), "")
            if (found := _LOCK_LINE.search(line)) is not None:
                ms = float(found.group(4))
                on = re.sub(r"\d+", "N", found.group(3)).split(" of relation")[0]
                if found.group(1) == "acquired":
                    granted.append((ms, f"{found.group(2)} on {on}", statement))
                else:
                    longest_waiting = max(longest_waiting, ms)
            elif "canceling statement due to lock timeout" in line:
                timed_out[statement] = timed_out.get(statement, 0) + 1
        by_lock: dict[str, int] = {}
        waited: dict[str, int] = {}
        slow: dict[str, int] = {}
        for ms, lock, statement in granted:
            by_lock[lock] = by_lock.get(lock, 0) + 1
            waited[statement] = waited.get(statement, 0) + 1
            if ms >= 1000:
                slow[statement] = slow.get(statement, 0) + 1
        return {
            "granted": {
                "count": len(granted),
                "over_1s": sum(1 for ms, _, _ in granted if ms >= 1000),
                "over_2s": sum(1 for ms, _, _ in granted if ms >= 2000),
                "max_ms": round(max((ms for ms, _, _ in granted), default=0.0), 1),
                "by_lock": dict(sorted(by_lock.items(), key=lambda kv: -kv[1])),
                "by_statement": dict(sorted(waited.items(), key=lambda kv: -kv[1])[:8]),
                "over_1s_by_statement": dict(sorted(slow.items(), key=lambda kv: -kv[1])[:8]),
            },
            "longest_still_waiting_ms": round(longest_waiting, 1),
            "timed_out": sum(timed_out.values()),
            "timed_out_by_statement": dict(sorted(timed_out.items(), key=lambda kv: -kv[1])[:8]),
        }


@contextlib.contextmanager
def etcd(endpoint: str | None) -> Iterator[str]:
    """``endpoint`` as is, or a throwaway single-node etcd (killed and deleted afterwards)."""
    if endpoint:
        yield endpoint.removeprefix("http://")
        return
    binary = etcdsupport._find_etcd()
    if binary is None:
        raise SystemExit("etcd is not installed: apt-get install etcd-server, or pass --etcd HOST:PORT")
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-etcd-") as folder:
        server = etcdsupport.EtcdServer(binary, Path(folder))
        try:
            server.start()
            yield server.endpoint
        finally:
            server.stop(signal.SIGTERM)


@contextlib.contextmanager
def workdir(keep: str | None, prefix: str) -> Iterator[Path]:
    """Where the processes' logs go: ``keep`` (created, left in place), or a
    temporary folder deleted afterwards."""
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        yield Path(keep)
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        yield Path(folder)


UVLOOP_SITE = Path(__file__).resolve().parent / "uvloopsite"
LOOPS = ("asyncio", "uvloop")


@contextlib.contextmanager
def server_loop(loop: str) -> Iterator[None]:
    """``tickwheel server`` processes started in the block run on ``loop``
    (one of :data:`LOOPS`): ``asyncio``, as always, or ``uvloop``, its
    ``sitecustomize`` (``uvloopsite/``) first on the ``PYTHONPATH`` they
    inherit; other processes keep asyncio. uvloop is no dependency of
    ours: SystemExit saying so when it is not importable here."""
    if loop == "asyncio":
        yield
        return
    if loop != "uvloop":
        raise ValueError(f"loop {loop!r}: one of {LOOPS}")
    try:
        importable = importlib.util.find_spec("uvloop") is not None
    except ValueError:  # in sys.modules without a spec
        importable = False
    if not importable:
        raise SystemExit("--loop uvloop: uvloop is not importable (no dependency of ours: "
                         "pip install --target DIR uvloop, and DIR on PYTHONPATH)")
    kept = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(UVLOOP_SITE), kept]))
    try:
        yield
    finally:
        if kept is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = kept


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """``--pg-set NAME=VALUE`` flags as a dict (ValueError naming a bad one)."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--pg-set {pair!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def postmaster_pid(url: str) -> int | None:
    """The PostgreSQL server's main process, when it runs on this machine: the
    parent of a backend of ours (None when it is elsewhere)."""
    with observe(url) as pg:
        backend = pg.execute("SELECT pg_backend_pid()").fetchone()[0]
        try:
            stat = Path(f"/proc/{backend}/stat").read_text()
        except OSError:
            return None
    parent = int(stat.rsplit(")", 1)[1].split()[1])
    try:
        return parent if Path(f"/proc/{parent}/comm").read_text().strip() == "postgres" else None
    except OSError:
        return None


def etcd_pid(endpoint: str) -> int | None:
    """The etcd process listening on ``endpoint``'s port on this machine, if any."""
    port = endpoint.rsplit(":", 1)[1]
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() != "etcd":
                continue
            cmdline = (comm.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(arg.endswith(f":{port}".encode()) for arg in cmdline) and b"--listen-client-urls" in cmdline:
            return int(comm.parent.name)
    return None


# ------------------------------------------------------------------ accounting


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # fields from the 3rd (state) on


def processes() -> tuple[dict[int, list[str]], dict[int, list[int]]]:
    """Every process's ``stat`` fields (from the 3rd on) and every parent's
    children, read in one pass over ``/proc``."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None:
            continue
        stats[int(entry.name)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return stats, children


def tree_cpu_s(root: int, table: tuple[dict[int, list[str]], dict[int, list[int]]] | None = None) -> float:
    """CPU seconds (user + system) of ``root`` and every live descendant, plus
    what their exited children left in ``cutime``/``cstime``: PostgreSQL's
    backends come and go, and the postmaster reaps them, so the difference of
    two readings is the tree's CPU in between. ``table`` is a
    :func:`processes` already read (one pass for many roots)."""
    stats, children = table if table is not None else processes()
    total = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        fields = stats.get(pid)
        if fields is None:
            continue
        # utime, stime, cutime, cstime are fields 14-17 (1-based); fields[0] is field 3.
        total += sum(int(v) for v in fields[11:15])
        stack.extend(children.get(pid, ()))
    return total / CLK_TCK


def thread_cpu(pid: int) -> dict[str, tuple[float, float]]:
    """CPU seconds (user, system) of ``pid``'s live threads by kind, summed:
    ``event_loop`` (the main thread: a server's asyncio loop),
    ``python_threads`` (threads named as the main one: Python's keep the
    process's name, so the store's transaction threads and gRPC's poller),
    and each other name (``comm``: gRPC's native threads name themselves,
    ``event_engine`` and others). A thread that ended between two readings
    drops out of the later one; empty when ``pid`` is gone."""
    task = Path(f"/proc/{pid}/task")
    try:
        tids = [int(name) for name in os.listdir(task)]
    except OSError:
        return {}
    main = None
    threads: list[tuple[int, str, float, float]] = []
    for tid in tids:
        try:
            text = (task / str(tid) / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()  # from the 3rd (state) on: utime, stime are [11], [12]
        threads.append((tid, name, int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK))
        if tid == pid:
            main = name
    out: dict[str, tuple[float, float]] = {}
    for tid, name, user, system in threads:
        kind = "event_loop" if tid == pid else "python_threads" if name == main else name
        was = out.get(kind, (0.0, 0.0))
        out[kind] = (was[0] + user, was[1] + system)
    return out


def thread_cpu_between(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]],
                       units: int) -> dict[str, dict[str, float]]:
    """What each kind of :func:`thread_cpu` spent between two readings, in
    milliseconds per unit of work: ``cpu_ms`` (user + system) and
    ``system_ms`` (the kernel's share: system calls, wake-ups)."""
    out = {}
    for kind, (user, system) in sorted(after.items()):
        user0, system0 = before.get(kind, (0.0, 0.0))
        spent, kernel = (user - user0) + (system - system0), system - system0
        out[kind] = {"cpu_ms": round(spent * 1000 / max(units, 1), 4),
                     "system_ms": round(kernel * 1000 / max(units, 1), 4)}
    return out


_SS_USER = re.compile(r"pid=(\d+),")
_SS_BYTES = re.compile(r"\bbytes_(sent|received):(\d+)")


def measured(pg_pid: int, work: Callable[[], object]) -> dict:
    """Run ``work`` once: its wall time, this process's CPU and PostgreSQL's
    (its process tree, in ticks), and what it returned (``rows``)."""
    cpu, pg, wall = time.process_time(), tree_cpu_s(pg_pid), time.perf_counter()
    done = work()
    return {"wall_ms": (time.perf_counter() - wall) * 1e3, "python_cpu_ms": (time.process_time() - cpu) * 1e3,
            "postgres_cpu_ms": (tree_cpu_s(pg_pid) - pg) * 1e3, "rows": done}


def medians(samples: list[dict], digits: int = 2) -> dict:
    """Medians of :func:`measured` samples, but PostgreSQL's CPU as a mean: /proc counts it in ticks (10 ms)."""
    return {key: round((statistics.mean if key == "postgres_cpu_ms" else statistics.median)(s[key] for s in samples),
                       digits)
            for key in samples[0]}


def socket_bytes(pid: int, etcd_port: int | None) -> dict[str, list[int]]:
    """Bytes sent and received (TCP payload, from ``ss -tinp``) on ``pid``'s
    open connections, by peer: ``workers`` (connections to a port ``pid``
    listens on), ``etcd`` (to ``etcd_port``), ``store`` (the rest: the
    server's only other peer is the job store). Cumulative per connection, so
    a difference of two readings misses connections that closed in between
    (the store's pool and the streams stay open through a run)."""

    def lines(*flags: str) -> list[str]:
        out = subprocess.run(["ss", "-H", *flags], capture_output=True, text=True, check=False).stdout
        return out.splitlines()

    listening = set()
    for line in lines("-tlnp"):
        if f"pid={pid}," in line:
            listening.add(line.split()[3].rsplit(":", 1)[1])
    totals: dict[str, list[int]] = {"workers": [0, 0], "etcd": [0, 0], "store": [0, 0]}
    pairs: list[list[str]] = []
    for line in lines("-tinp"):
        if line[:1].isspace() and pairs:
            pairs[-1][1] += line
        else:
            pairs.append([line, ""])
    for head, info in pairs:
        users = _SS_USER.findall(head)
        if str(pid) not in users:
            continue
        fields = head.split()
        local_port, peer_port = fields[3].rsplit(":", 1)[1], fields[4].rsplit(":", 1)[1]
        peer = ("workers" if local_port in listening else
                "etcd" if etcd_port is not None and peer_port == str(etcd_port) else "store")
        counted = dict(_SS_BYTES.findall(info))
        totals[peer][0] += int(counted.get("sent", 0))
        totals[peer][1] += int(counted.get("received", 0))
    return totals


def etcd_counters(endpoint: str) -> dict[str, float]:
    """etcd's gRPC counters from ``/metrics``: messages received and calls
    started in total and per method (``grpc_server_msg_received_total`` counts
    every lease keep-alive and watch message on a stream, not only unary calls)."""
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=5) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        for metric in ("grpc_server_msg_received_total", "grpc_server_started_total"):
            if line.startswith(metric + "{"):
                labels, value = line[len(metric) + 1:].rsplit("} ", 1)
                method = next((p.split("=", 1)[1].strip('"') for p in labels.split(",") if p.startswith("grpc_method=")), "?")
                out[metric] = out.get(metric, 0.0) + float(value)
                out[f"{metric}:{method}"] = out.get(f"{metric}:{method}", 0.0) + float(value)
    return out


def wake_claims(endpoint: str, server_ids: list[str], sender: str = "bench", root: str = "/tickwheel/") -> None:
    """Wake each server's claim as the API of a server that stored due-now
    jobs does once its write committed (``Wakeup.due``: a put on the
    holder's wake key, ``lease/keys.py``, whose value is the sender's id;
    no suffix asks for a claim), through etcd's JSON gateway. Jobs stored
    by plain SQL wake nothing: without it their first claim waits for the
    dispatcher's next tick (0 to 1 s), which no user creating jobs through
    the API waits for."""
    for server_id in server_ids:
        body = json.dumps({"key": base64.b64encode(wake_key(server_id, root).encode()).decode(),
                           "value": base64.b64encode(sender.encode()).decode()}).encode()
        request = urllib.request.Request(f"http://{endpoint}/v3/kv/put", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            response.read()


@dataclass
class Reading:
    """CPU seconds of each process tree and etcd's counters at one instant."""

    at: float
    cpu: dict[str, float]
    etcd: dict[str, float]
    network: dict[str, list[int]] = field(default_factory=dict)
    """The servers' TCP bytes (sent, received) by peer (``socket_bytes``)."""
    members: dict[str, float] = field(default_factory=dict)
    """CPU seconds of each of ``Meter.members``."""


@dataclass
class Meter:
    """The processes whose CPU a benchmark reports, by role."""

    roles: dict[str, list[int]] = field(default_factory=dict)
    etcd_endpoint: str | None = None
    members: dict[str, int] = field(default_factory=dict)
    """Processes also read one by one (each ``server`` of a fleet, by
    name): a breakdown of their roles, not added to ``cpu_cores``."""

    def read(self) -> Reading:
        table = processes()  # one pass for every role: a reading is one instant, not one per process
        cpu = {role: sum(tree_cpu_s(pid, table) for pid in pids) for role, pids in self.roles.items()}
        members = {name: tree_cpu_s(pid, table) for name, pid in self.members.items()}
        counters = etcd_counters(self.etcd_endpoint) if self.etcd_endpoint else {}
        port = int(self.etcd_endpoint.rsplit(":", 1)[1]) if self.etcd_endpoint else None
        network: dict[str, list[int]] = {}
        for pid in self.roles.get("server", ()):  # every server of a fleet, summed by peer
            for peer, (sent, received) in socket_bytes(pid, port).items():
                total = network.setdefault(peer, [0, 0])
                total[0] += sent
                total[1] += received
        return Reading(time.time(), cpu, counters, network, members)

    def cpu_s(self) -> float:
        """All the metered processes' CPU seconds right now (one pass)."""
        table = processes()
        return sum(tree_cpu_s(pid, table) for pids in self.roles.values() for pid in pids)

    def settle(self, *, interval: float = 0.2, idle_s: float = 0.03, timeout: float = 10.0) -> float:
        """Wait until the metered processes are near idle (at most ``idle_s``
        CPU seconds in all over ``interval``: what a start left running,
        such as a peer's workers checking their tables after saying they
        are ready, is then not in the next reading), or ``timeout``;
        returns the seconds waited."""
        began = time.monotonic()
        last = self.cpu_s()
        while time.monotonic() - began < timeout:
            time.sleep(interval)  # sampling other processes' CPU; nothing to await
            now = self.cpu_s()
            if now - last <= idle_s:
                break
            last = now
        return round(time.monotonic() - began, 2)

    @staticmethod
    def difference(before: Reading, after: Reading, executions: int) -> dict:
        """CPU per role (seconds, and milliseconds per execution), all of
        it over the wall time between the readings (``cpu_cores``: never
        above the machine's cores when the readings are right), etcd
        requests (total, per execution, by method) and the server's network
        bytes per execution by peer, between two readings."""
        def figures(seconds: float) -> dict:
            return {"cpu_s": round(seconds, 2), "cpu_ms_per_execution": round(seconds * 1000 / max(executions, 1), 4)}

        cpu = {role: figures(after.cpu[role] - before.cpu[role]) for role in after.cpu}
        by_server = {name: figures(after.members[name] - before.members.get(name, 0.0)) for name in after.members}
        network = {
            peer: {"sent_bytes_per_execution": round((sent - before.network.get(peer, [0, 0])[0]) / max(executions, 1), 1),
                   "received_bytes_per_execution":
                       round((received - before.network.get(peer, [0, 0])[1]) / max(executions, 1), 1)}
            for peer, (sent, received) in after.network.items()
        }
        received = "grpc_server_msg_received_total"
        delta = {k: after.etcd.get(k, 0.0) - before.etcd.get(k, 0.0) for k in after.etcd}
        by_method = {k.split(":", 1)[1]: int(v) for k, v in delta.items() if k.startswith(received + ":") and v}
        etcd_figures = {
            "requests": int(delta.get(received, 0)),
            "calls_started": int(delta.get("grpc_server_started_total", 0)),
            "requests_per_execution": round(delta.get(received, 0) / max(executions, 1), 5),
            "requests_by_method": by_method,
            "seconds": round(after.at - before.at, 2),
        } if after.etcd else None
        wall = after.at - before.at
        cores = round(sum(after.cpu[role] - before.cpu[role] for role in after.cpu) / wall, 2) if wall > 0 else None
        return {"cpu": cpu, "cpu_cores": cores, "cpu_by_server": by_server or None, "etcd": etcd_figures,
                "server_network": network or None}


@contextlib.contextmanager
def _cpu_sampled(pids: dict[str, int]) -> Iterator[None]:
    """With ``TICKWHEEL_CPUSAMPLE=PREFIX`` (servers run with
    ``loadtest/cpusample`` first on ``PYTHONPATH``): each of ``pids``'
    samples dumped and cleared as the block starts and again, into
    ``PREFIX.<pid>.<name>``, as it ends (SIGUSR1, ``cpusample/sitecustomize.py``)."""
    prefix = os.environ.get("TICKWHEEL_CPUSAMPLE")
    if not prefix:
        yield
        return

    def dump(label: str) -> None:
        for name, pid in pids.items():
            Path(f"{prefix}.{pid}.label").write_text(label.format(name=name))
            os.kill(pid, signal.SIGUSR1)
        time.sleep(0.2)  # the handler runs at the server's next bytecode

    dump("{name}.before")
    try:
        yield
    finally:
        dump("{name}")


@contextlib.contextmanager
def profiled(pids: dict[str, int], folder: Path | None) -> Iterator[None]:
    """Sample ``pids`` (name → pid) with py-spy while the block runs, into
    ``folder/<name>.txt`` (collapsed stacks, per thread, idle included, so
    waiting shows as well as working); nothing when ``folder`` is None
    (but ``cpusample``'s dumps, :func:`_cpu_sampled`, when
    ``TICKWHEEL_CPUSAMPLE`` is set).
    ``TICKWHEEL_PYSPY_ARGS`` replaces the sampling options (default
    ``--rate 100 --threads --idle``): ``--rate 200 --gil --native`` keeps
    only what holds the interpreter, C frames included."""
    if folder is None:
        with _cpu_sampled(pids):
            yield
        return
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        raise SystemExit(f"--profile needs py-spy: {sys.executable} -m pip install py-spy==0.4.0")
    folder.mkdir(parents=True, exist_ok=True)
    samplers = [
        subprocess.Popen(
            [str(spy), "record", "--pid", str(pid), "--output", str(folder / f"{name}.txt"), "--format", "raw",
             *os.environ.get("TICKWHEEL_PYSPY_ARGS", "--rate 100 --threads --idle").split()],
            stdout=subprocess.DEVNULL, stderr=(folder / f"{name}.log").open("w"),
        )
        for name, pid in pids.items()
    ]
    try:
        yield
    finally:
        for sampler in samplers:
            sampler.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        for sampler in samplers:
            try:
                sampler.wait(120)
            except subprocess.TimeoutExpired:
                sampler.kill()
                sampler.wait(10)


_WRITTEN_TABLE = re.compile(r"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([A-Za-z_][A-Za-z0-9_.]*)", re.IGNORECASE)


def written_table(query: str) -> str | None:
    """The table an INSERT, UPDATE or DELETE statement writes; None for any
    other statement, including a write inside a ``WITH`` clause (the store
    issues none)."""
    found = _WRITTEN_TABLE.match(query)
    return found.group(1).lower() if found else None


PHASES = (
    ("transaction", r"^(?:BEGIN|COMMIT|ROLLBACK|SET LOCAL)\b"),
    ("claim", r"FROM job_cursors|^UPDATE job_cursors |^SELECT partition, epoch FROM partitions "
              r"|^INSERT INTO executions \(id, job_id, tenant, partition, origin, |^SELECT id, version, spec FROM jobs "
              r"|^(?:UPDATE|INSERT INTO) skips |^SELECT e\.job_id FROM executions AS e WHERE e\.job_id = ANY "
              r"|^SELECT t\.name, t\.weight, t\.max_concurrency, t\.state FROM tenants AS t "),
    ("start", r"^UPDATE executions AS e SET status = \S+, handed_out_at = "),
    ("hand_out", r"^UPDATE executions SET status = \S+, owner = |^SELECT t\.name, t\.weight, t\.max_concurrency, \(SELECT "
                 r"| AS q \(tenant, n\) CROSS JOIN LATERAL |^SELECT e\.id, e\.job_id, e\.tenant, e\.partition, e\.origin, "
                 r"|^SELECT e\.id, e\.job_id, e\.tenant, e\.status, e\.origin, |^SELECT a\.id, a\.job_id, a\.tenant, a\.status, "),
    ("outcome", r"^UPDATE executions SET status = \S+, (?:error|attempt) = "
                r"|^SELECT e\.id, e\.job_id, e\.tenant, e\.partition, e\.status, e\.delivery, "
                r"|^INSERT INTO attempts |^SELECT j\.id, j\.spec, j\.version FROM jobs "
                r"|^SELECT w\.job_id FROM executions AS w WHERE w\.job_id = ANY "),
)
"""The phases of an execution's life by the shapes of the statements that
serve them, as ``pg_stat_statements`` prints them (constants as ``$n``):
the dispatcher's claim (the epochs' check, the due cursors, the
definitions, the executions' insert, handed out or not, the cursors'
advance, skip ranges, the offer's tenants and overlap probe), the
gateway's hand-out (its tenants, its take, the rows taken, the overlap
policies' reads, an arming) and a start of armed rows, the results' outcome (the
rows locked, the update, attempt rows, the job's next in line woken); the
transaction control of all of them apart. A manual run's insert of its
execution has the claim's shape and counts there. The first that matches."""
_PHASES = tuple((name, re.compile(pattern)) for name, pattern in PHASES)


def phase_of(query: str) -> str:
    """The phase (:data:`PHASES`) a statement serves, ``other`` for none."""
    text = " ".join(query.split())
    for name, pattern in _PHASES:
        if pattern.search(text):
            return name
    return "other"


_WAL_STATS = "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal"


def wal_stats(pg: psycopg.Connection, settle: float = 5.0) -> tuple[int, int, int] | None:
    """The cluster's WAL records, full-page images and bytes so far
    (``pg_stat_wal``, PostgreSQL 14 and later; None before), once two
    readings 0.5 s apart agree: backends report theirs when idle, not at
    once (as :func:`table_writes`)."""
    deadline = time.monotonic() + settle
    last = None
    while True:
        try:
            now = tuple(int(v) for v in pg.execute(f"{OWN_QUERY} {_WAL_STATS}").fetchone())
        except psycopg.errors.UndefinedTable:
            return None
        if now == last or time.monotonic() > deadline:
            return now
        last = now
        time.sleep(0.5)  # waiting for other backends to report; nothing to await


def sessions(pg: psycopg.Connection) -> int:
    """Sessions established so far to ``pg``'s database (``pg_stat_database``)."""
    return int(pg.execute(
        OWN_QUERY + " SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()[0])


class Statements:
    """What reached PostgreSQL, from ``pg_stat_statements`` when the server
    has it loaded (the throwaway one does): statements by shape with their
    calls, rows and time, including ``COMMIT`` and ``ROLLBACK`` (a rollback
    is a failed try, usually a serialization conflict the store retried),
    and the rows written (inserted, updated or deleted) per table, as the
    statements that wrote them counted them, and the WAL written since the
    reset."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.available = False
        self._wal_at = "0/0"
        self._wal_stats_at: tuple[int, int, int] | None = None
        self._sessions_at = 0
        try:
            with observe(url) as pg:
                pg.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                pg.execute("SELECT 1 FROM pg_stat_statements LIMIT 1")
            self.available = True
        except psycopg.Error:
            pass

    def reset(self) -> None:
        if self.available:
            with observe(self.url) as pg:
                pg.execute("SELECT pg_stat_statements_reset()")
                self._wal_at = pg.execute(OWN_QUERY + " SELECT pg_current_wal_lsn()").fetchone()[0]
                self._wal_stats_at = wal_stats(pg, settle=0)
                self._sessions_at = sessions(pg)

    def report(self, executions: int, top: int = 12) -> dict | None:
        """Since the last reset, in this database: calls per execution, commits,
        rollbacks, and the ``top`` statement shapes by time (``TICKWHEEL_STATEMENTS_TOP``
        replaces it), each with the WAL it wrote and the shared buffer blocks
        it read (hit or not) per execution; the same summed by phase of an
        execution's life (:func:`phase_of`), and the cluster's WAL records
        and full-page images (``pg_stat_wal``)."""
        top = int(os.environ.get("TICKWHEEL_STATEMENTS_TOP", top))
        if not self.available:
            return None
        with observe(self.url) as pg:
            rows = pg.execute(
                "SELECT query, calls, rows, total_exec_time, wal_bytes, shared_blks_hit + shared_blks_read "
                "FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND query NOT LIKE '%%pg_stat_statements%%' AND query NOT LIKE %s ORDER BY total_exec_time DESC",
                (OWN_QUERY + "%",),
            ).fetchall()
            wal = pg.execute(OWN_QUERY + " SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
                             (self._wal_at,)).fetchone()[0]
            opened = sessions(pg) - self._sessions_at
            wal_now = wal_stats(pg) if self._wal_stats_at is not None else None
        by_keyword: dict[str, int] = {}
        written: dict[str, int] = {}
        phases: dict[str, list] = {}
        for query, calls, nrows, total, written_wal, blocks in rows:
            phase = phases.setdefault(phase_of(query), [0, 0, 0.0, 0.0, 0])
            phase[0] += calls
            phase[1] += nrows if written_table(query) is not None else 0
            phase[2] += total
            phase[3] += float(written_wal)
            phase[4] += blocks
        for query, calls, nrows, _, _, _ in rows:
            keyword = query.split(None, 1)[0].upper() if query.strip() else "?"
            by_keyword[keyword] = by_keyword.get(keyword, 0) + calls
            table = written_table(query)
            if table is not None:
                written[table] = written.get(table, 0) + nrows
        calls = sum(r[1] for r in rows)
        per = max(executions, 1)
        return {
            "statements": calls,
            "statements_per_execution": round(calls / per, 3),
            "rows_written": sum(written.values()),
            "rows_written_per_execution": round(sum(written.values()) / per, 3),
            # The whole cluster's WAL since the reset (autovacuum included).
            "wal_bytes": int(wal),
            "wal_bytes_per_execution": round(float(wal) / per, 1),
            # The same WAL by kind (``pg_stat_wal``): records and full-page images (a page's first
            # change after a checkpoint writes the whole page).
            "wal": None if wal_now is None else {
                "records_per_execution": round((wal_now[0] - self._wal_stats_at[0]) / per, 2),
                "full_page_images_per_execution": round((wal_now[1] - self._wal_stats_at[1]) / per, 3),
                "bytes_per_execution": round((wal_now[2] - self._wal_stats_at[2]) / per, 1),
            },
            # Per phase of an execution's life (:data:`PHASES`): what its statements cost.
            "phases": {
                name: {"statements_per_execution": round(calls / per, 4),
                       "rows_written_per_execution": round(nrows / per, 3),
                       "blocks_per_execution": round(blocks / per, 2),
                       "wal_bytes_per_execution": round(written_wal / per, 1),
                       "exec_ms_per_execution": round(total / per, 4)}
                for name, (calls, nrows, total, written_wal, blocks) in sorted(phases.items())
            },
            "rows_written_by_table": {
                table: {"rows": count, "per_execution": round(count / per, 3)}
                for table, count in sorted(written.items(), key=lambda kv: -kv[1])
            },
            "by_kind": dict(sorted(by_keyword.items(), key=lambda kv: -kv[1])),
            "commits": by_keyword.get("COMMIT", 0),
            "rollbacks": by_keyword.get("ROLLBACK", 0),
            # Connections opened to this database since the reset, the benchmark's own included
            # (backends report theirs when they flush their statistics): each a new backend,
            # several ms of PostgreSQL's CPU.
            "sessions_opened": opened,
            "exec_s": round(sum(r[3] for r in rows) / 1000, 3),
            "blocks_per_execution": round(sum(r[5] for r in rows) / per, 2),
            "top": [
                {"query": " ".join(query.split())[:240], "calls": calls, "rows": nrows,
                 "calls_per_execution": round(calls / per, 4), "total_ms": round(total, 1),
                 "mean_ms": round(total / max(calls, 1), 3),
                 "wal_bytes_per_execution": round(float(written_wal) / per, 1),
                 "blocks_per_execution": round(blocks / per, 2)}
                for query, calls, nrows, total, written_wal, blocks in rows[:top]
            ],
        }


    def jit(self, executions: int, top: int = 6) -> dict | None:
        """Since the last reset, in this database: what PostgreSQL spent
        compiling statements with JIT (``pg_stat_statements``' ``jit_*``
        columns, PostgreSQL 15 and later; None before, or without the
        extension). ``calls_jitted`` counts the executions that compiled
        (each emits its code once); ``jit_ms`` is generation, inlining,
        optimisation and emission together, a part of the executions' time;
        ``top``: the statement shapes that compiled, by JIT time."""
        if not self.available:
            return None
        with observe(self.url) as pg:
            try:
                rows = pg.execute(
                    "SELECT query, calls, total_exec_time, jit_functions, jit_emission_count, jit_generation_time "
                    "+ jit_inlining_time + jit_optimization_time + jit_emission_time FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND jit_functions > 0 AND query NOT LIKE '%%pg_stat_statements%%' AND query NOT LIKE %s "
                    "ORDER BY 6 DESC",
                    (OWN_QUERY + "%",),
                ).fetchall()
            except psycopg.errors.UndefinedColumn:  # before PostgreSQL 15
                return None
            setting = pg.execute(OWN_QUERY + " SELECT current_setting('jit'), current_setting('jit_above_cost')"
                                 ).fetchone()
        per = max(executions, 1)
        jit_ms = sum(r[5] for r in rows)
        return {
            # This observer's own session's settings: the server's may differ (its connect options).
            "observer_settings": {"jit": setting[0], "jit_above_cost": setting[1]},
            "statements_jitted": len(rows),
            "calls_jitted": sum(r[4] for r in rows),
            "functions": sum(r[3] for r in rows),
            "jit_ms": round(jit_ms, 1),
            "jit_ms_per_execution": round(jit_ms / per, 4),
            "top": [
                {"query": " ".join(query.split())[:240], "calls": calls, "calls_jitted": emitted,
                 "functions": functions, "jit_ms": round(spent, 1),
                 "jit_ms_per_jitted_call": round(spent / max(emitted, 1), 3),
                 "mean_ms": round(total / max(calls, 1), 3)}
                for query, calls, total, functions, emitted, spent in rows[:top]
            ],
        }


def table_writes(url: str, settle: float = 5.0) -> dict[str, int]:
    """Rows inserted, updated and deleted so far in each table of ``url``'s
    database (``pg_stat_user_tables``), once two readings 0.5 s apart agree
    (backends report their counts when idle or exiting, not at once) or
    after ``settle`` seconds. Unlike ``Statements``' figure it counts writes
    inside ``WITH`` clauses too: what a peer that writes in CTEs wrote."""
    deadline = time.monotonic() + settle
    last: dict[str, int] | None = None
    with observe(url) as pg:
        while True:
            rows = pg.execute(
                f"{OWN_QUERY} SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables"
            ).fetchall()
            now = {name: int(count) for name, count in rows}
            if now == last or time.monotonic() > deadline:
                return now
            last = now
            time.sleep(0.5)  # waiting for other backends to report; nothing to await


HOT_TABLES = ("executions", "jobs", "job_cursors")
"""The tables every execution rewrites: :func:`table_updates` and
:func:`index_sizes` read these."""


def table_updates(url: str, settle: float = 5.0) -> dict[str, tuple[int, int, int, int]]:
    """Per table of :data:`HOT_TABLES`: rows updated, of them HOT updates
    (no index entry written), and the bytes of its heap and of its indexes,
    once two readings 0.5 s apart agree (as :func:`table_writes`)."""
    deadline = time.monotonic() + settle
    last: dict[str, tuple[int, int, int, int]] | None = None
    with observe(url) as pg:
        while True:
            rows = pg.execute(
                f"{OWN_QUERY} SELECT relname, n_tup_upd, n_tup_hot_upd, pg_relation_size(relid), "
                "pg_indexes_size(relid) FROM pg_stat_user_tables WHERE relname = ANY(%s)",
                (list(HOT_TABLES),),
            ).fetchall()
            now = {name: tuple(int(v) for v in values) for name, *values in rows}
            if now == last or time.monotonic() > deadline:
                return now
            last = now
            time.sleep(0.5)  # waiting for other backends to report; nothing to await


def index_sizes(url: str) -> dict[str, tuple[int, int]]:
    """Per index of :data:`HOT_TABLES`: its bytes and the scans that used it
    (``pg_stat_user_indexes``). PostgreSQL counts no index inserts; an
    index's growth over a run is the entries written into it."""
    with observe(url) as pg:
        rows = pg.execute(
            f"{OWN_QUERY} SELECT indexrelname, pg_relation_size(indexrelid), idx_scan FROM pg_stat_user_indexes "
            "WHERE relname = ANY(%s)", (list(HOT_TABLES),),
        ).fetchall()
    return {name: (int(size), int(scans)) for name, size, scans in rows}


def indexes_between(before: dict, after: dict, executions: int) -> dict:
    """Per index, between two :func:`index_sizes` readings: the bytes it grew
    by and the scans that used it, per execution; indexes neither written
    nor read are left out."""
    per = max(executions, 1)
    out = {}
    for name, (size, scans) in sorted(after.items()):
        size0, scans0 = before.get(name, (0, 0))
        if size != size0 or scans != scans0:
            out[name] = {"bytes_per_execution": round((size - size0) / per, 1),
                         "scans_per_execution": round((scans - scans0) / per, 4)}
    return out


def updates_between(before: dict, after: dict, executions: int) -> dict:
    """Per table, between two :func:`table_updates` readings: updates, the
    HOT share of them, and heap and index bytes grown, per execution."""
    per = max(executions, 1)
    out = {}
    for table, (upd, hot, heap, index) in after.items():
        upd0, hot0, heap0, index0 = before.get(table, (0, 0, 0, 0))
        out[table] = {
            "updates_per_execution": round((upd - upd0) / per, 3),
            "hot_updates_per_execution": round((hot - hot0) / per, 3),
            "heap_bytes_per_execution": round((heap - heap0) / per, 1),
            "index_bytes_per_execution": round((index - index0) / per, 1),
        }
    return out


def writes_between(before: dict[str, int], after: dict[str, int], executions: int) -> dict:
    """Rows written per table between two :func:`table_writes` readings, in
    total and per execution."""
    per = max(executions, 1)
    delta = {t: after[t] - before.get(t, 0) for t in after if after[t] - before.get(t, 0)}
    total = sum(delta.values())
    return {
        "rows_written": total,
        "rows_written_per_execution": round(total / per, 3),
        "rows_written_by_table": {t: {"rows": n, "per_execution": round(n / per, 3)}
                                  for t, n in sorted(delta.items(), key=lambda kv: -kv[1])},
    }


# ------------------------------------------------------------------ the cluster


def admin_metadata(server: ServerProcess) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {server.admin_token}"),)


async def create_tenant_and_credential(server: ServerProcess, max_jobs: int) -> str:
    """The bench tenant (through AdminService; reused if it exists) and a worker
    credential for its ``echo`` handler; returns the credential's secret."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        tenant = admin_pb2.Tenant(name=TENANT, quotas=admin_pb2.TenantQuotas(max_jobs=max_jobs))
        try:
            await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=tenant), metadata=admin_metadata(server))
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise
        issued = await admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=[TENANT], handlers=[HANDLER], http=False,
                                                   description="benchmark"),
            metadata=admin_metadata(server),
        )
    return issued.credential.secret


def worker_ids(workers: int, servers: int = 1, member: int = 0) -> list[str]:
    """The bench workers' ids that connect to server ``member`` of a fleet of
    ``servers``: worker k goes to server k % servers."""
    return [f"bench-w{k}" for k in range(workers) if k % servers == member]


def workers_logged(server: ServerProcess, ids: list[str]) -> bool:
    """The server's log says each of the bench workers ``ids`` connected."""
    log = server.log()
    return all(f"worker {worker} connected" in log for worker in ids)


@dataclass
class Fleet:
    """``tickwheel server`` processes sharing one store and etcd, by server id."""

    servers: list[ServerProcess]
    server_ids: list[str]

    @property
    def first(self) -> ServerProcess:
        return self.servers[0]

    @property
    def pids(self) -> list[int]:
        return [server.process.pid for server in self.servers]

    @property
    def addresses(self) -> list[str]:
        return [server.address for server in self.servers]

    def members(self) -> dict[str, int]:
        """Each server's pid by its server id (``Meter.members``)."""
        return dict(zip(self.server_ids, self.pids))

    def profiled(self) -> dict[str, int]:
        """``profiled``'s names: ``server`` alone, or ``server-<i>`` each."""
        if len(self.servers) == 1:
            return {"server": self.pids[0]}
        return {f"server-{i}": pid for i, pid in enumerate(self.pids)}

    def terminate(self, timeout: float = 30.0) -> list[int]:
        """SIGTERM each (a graceful stop), then wait; the exit codes."""
        for server in self.servers:
            if server.process.poll() is None:
                server.process.send_signal(signal.SIGTERM)
        return [server.process.wait(timeout) for server in self.servers]

    def stop(self) -> None:
        """What is still running stopped gracefully, killed if it does not."""
        for server in self.servers:
            if server.process.poll() is None:
                try:
                    server.terminate(30)
                except subprocess.TimeoutExpired:
                    server.kill()


def fleet_ids(server_id: str, servers: int) -> list[str]:
    """The servers' ids: ``server_id`` alone, or ``server_id-<i>`` each."""
    return [server_id] if servers == 1 else [f"{server_id}-{i}" for i in range(servers)]


def start_fleet(folder: Path, url: str, etcd_endpoint: str, server_id: str, servers: int = 1) -> Fleet:
    """``servers`` ``tickwheel server`` processes on one store and etcd, each
    its own ``--server-id`` and port, started one after the other (the first
    migrates the store and records the tzdata fingerprints before the next
    starts); whatever started is stopped if one fails."""
    fleet = Fleet([], fleet_ids(server_id, servers))
    try:
        for i, member in enumerate(fleet.server_ids):
            extra = ("--migrate",) if i == 0 else ()
            fleet.servers.append(start_server_process(folder, "--store", url, "--etcd", etcd_endpoint, *extra,
                                                      "--server-id", member))
            if i == 0:
                wait_started(url, fleet.servers[0])
    except BaseException:
        fleet.stop()
        raise
    return fleet


async def wait_fleet(fleet: Fleet, workers: int, timeout: float = READY_TIMEOUT) -> dict:
    """Poll ClusterStatus (the first server's) until every partition is owned
    and split evenly among the fleet's servers (each ``P // N`` or one more,
    none owned by anyone else) and each server has its bench workers
    connected (its ``workers`` figure, or its log's line for each, for a
    server whose figure lags); returns each server's figures."""
    deadline = time.monotonic() + timeout
    n = len(fleet.servers)
    expected = {member: worker_ids(workers, n, i) for i, member in enumerate(fleet.server_ids)}
    async with grpc.aio.insecure_channel(fleet.first.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        while True:
            status = await admin.ClusterStatus(admin_pb2.ClusterStatusRequest(), metadata=admin_metadata(fleet.first))
            seen = {s.server_id: s for s in status.servers}
            share = status.partition_count // n
            figures = {member: {"workers": seen[member].workers, "partitions_owned": seen[member].partitions_owned}
                       for member in fleet.server_ids if member in seen}
            split = (len(figures) == n and sum(f["partitions_owned"] for f in figures.values()) == status.partition_count
                     and all(share <= f["partitions_owned"] <= share + 1 for f in figures.values()))
            connected = all(
                member in seen and (seen[member].workers >= len(ids) or workers_logged(server, ids))
                for (member, ids), server in zip(expected.items(), fleet.servers)
            )
            if split and connected:
                return figures
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"fleet not ready after {timeout:.0f} s: {figures} of {status.partition_count} partitions, "
                    f"workers expected {expected}\n{fleet.servers[-1].log()[-3000:]}"
                )
            await asyncio.sleep(0.1)  # polling other processes' state; nothing to await


async def wait_ready(server: ServerProcess, server_id: str, workers: int, timeout: float = READY_TIMEOUT) -> dict:
    """One server's :func:`wait_fleet`: it owns every partition and its
    ``workers`` streams are connected."""
    return (await wait_fleet(Fleet([server], [server_id]), workers, timeout))[server_id]


def wait_started(url: str, server: ServerProcess, timeout: float = READY_TIMEOUT) -> None:
    """Wait until the server has recorded its tzdata release's fingerprints,
    the CPU-heavy part of its start (done in the background after it
    serves), so that it is idle before anything is measured."""
    deadline = time.monotonic() + timeout
    with observe(url) as pg:
        while not pg.execute(f"{OWN_QUERY} SELECT count(*) FROM tzdata_versions").fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server recorded no tzdata fingerprints in {timeout:.0f} s\n{server.log()[-3000:]}")
            time.sleep(0.1)  # polling another process's progress; nothing to await
    time.sleep(0.5)  # the recompute that follows finds no job and ends


@dataclass
class WorkerProcesses:
    processes: list[subprocess.Popen]
    logs: list[Path]

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def check_alive(self) -> None:
        for process, log in zip(self.processes, self.logs):
            if process.poll() is not None:
                raise RuntimeError(f"worker {process.pid} exited ({process.returncode}):\n{log.read_text()[-3000:]}")

    def stop(self, timeout: float = 30.0) -> list[int]:
        """SIGTERM each (graceful: in-flight work finishes), then wait; SIGKILL
        what is still running after ``timeout``. Returns the exit codes."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = []
        for process in self.processes:
            try:
                codes.append(process.wait(timeout))
            except subprocess.TimeoutExpired:
                process.kill()
                codes.append(process.wait(10))
        return codes


HOLD_ENV = "TICKWHEEL_BENCH_HOLD"


def register_held_echo(registry) -> None:
    """``echo`` that waits ``$TICKWHEEL_BENCH_HOLD`` seconds before answering
    (``tickwheel worker --handlers _harness:register_held_echo``): results
    then come back after the hand-out, so a burst measures the hand-out
    alone, without result recording competing for the same CPU and store."""
    hold = float(os.environ.get(HOLD_ENV, "0"))

    async def held_echo(ctx) -> bytes:
        await asyncio.sleep(hold)
        return ctx.payload

    registry.register(HANDLER, held_echo)


def start_workers(folder: Path, addresses: str | list[str], credential: str, count: int, slots: int,
                  hold: float = 0.0) -> WorkerProcesses:
    """``count`` ``tickwheel worker`` processes running ``echo`` (no HTTP),
    ``slots`` each, worker k connected to ``addresses[k % len(addresses)]``
    (one address: all to it): the built-in handler, or with ``hold`` > 0 one
    that waits that long first (:func:`register_held_echo`)."""
    addresses = [addresses] if isinstance(addresses, str) else addresses
    handlers, env = BUILTINS, None
    if hold > 0:
        handlers = "_harness:register_held_echo"
        env = {**os.environ, HOLD_ENV: str(hold),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))}
    env = {**(env or os.environ), "TICKWHEEL_WORKER_CREDENTIAL": credential}  # not a flag: ps would show it
    processes, logs = [], []
    for i in range(count):
        log = folder / f"worker-{i}.log"
        with log.open("w") as out:
            processes.append(subprocess.Popen(
                [TICKWHEEL, "worker", "--address", addresses[i % len(addresses)], "--handlers", handlers,
                 "--no-http", "--slots", str(slots), "--worker-id", f"bench-w{i}", "--grace", str(10 + hold),
                 "--log-level", "WARNING"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder, env=env,
            ))
        logs.append(log)
    return WorkerProcesses(processes, logs)


@contextlib.contextmanager
def cluster(folder: Path, url: str, etcd_endpoint: str, *, workers: int, slots: int, max_jobs: int,
            server_id: str, hold: float = 0.0, servers: int = 1) -> Iterator[tuple[Fleet, WorkerProcesses]]:
    """``servers`` ``tickwheel server`` processes (:func:`start_fleet`: the
    first migrates the store) and ``workers`` worker processes, worker k
    connected to server k % ``servers``; yielded once every partition is
    owned and split among the servers, every worker connected, the servers'
    start done and their CPU near idle. Whatever the block did not stop is
    stopped gracefully afterwards."""
    fleet = start_fleet(folder, url, etcd_endpoint, server_id, servers)
    pool = None
    try:
        credential = asyncio.run(create_tenant_and_credential(fleet.first, max_jobs))
        pool = start_workers(folder, fleet.addresses, credential, workers, slots, hold)
        asyncio.run(wait_fleet(fleet, workers))
        Meter({"server": fleet.pids}).settle()  # the later servers' start (and a rebalance) done
        yield fleet, pool
    finally:
        if pool is not None:
            pool.stop()
        fleet.stop()


def by_server(ids: dict[str, int], workers: int, servers: list[str]) -> dict[str, int]:
    """Counts by bench worker id summed by the server each worker is connected
    to (worker k to ``servers[k % len(servers)]``)."""
    out = dict.fromkeys(servers, 0)
    for i, member in enumerate(servers):
        for worker in worker_ids(workers, len(servers), i):
            out[member] += ids.get(worker, 0)
    return out


def claimed_by_owner(url: str, since_us: int = 0) -> dict[str, int]:
    """Executions (of instants from ``since_us`` on: a run's own, not
    :func:`insert_history`'s) by the server that owns their partition now
    (the fleet's split is sticky through a run: the server that claimed
    them)."""
    with observe(url) as pg:
        rows = pg.execute(
            f"{OWN_QUERY} SELECT p.owner, count(*) FROM executions e JOIN partitions p ON p.partition = e.partition "
            "WHERE e.nominal_at >= %s GROUP BY p.owner ORDER BY p.owner", (since_us,)
        ).fetchall()
    return {owner: int(n) for owner, n in rows}


def reset_data(url: str) -> None:
    """Empty the data tables and the tenant's job count, so a run starts from
    nothing (the cluster, partitions and credentials stay; the tzdata
    fingerprints go, so that :func:`wait_started` sees the next server's)."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            present = set(sa.inspect(conn).get_table_names())
            tables = [t for t in DATA_TABLES if t in present]
            if tables:
                conn.execute(sa.text(f"TRUNCATE {', '.join(tables)}"))
            if "tenants" in present:
                conn.execute(sa.text("UPDATE tenant_quota SET used = 0"))
    finally:
        engine.dispose()


MAX_HISTORY = 10_000_000
"""The most ``--history`` a benchmark accepts."""
HISTORY_SPAN_US = 23 * 3600 * 1_000_000
HISTORY_GAP_US = 3600 * 1_000_000
HISTORY_PER_JOB = 20
HISTORY_TENANTS = 4
HISTORY = (
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, delivery, "
    "status, handler, missed_count, reap_count, payload, error, dead_reason, created_at, finished_at, "
    "attempt_started_at, attempt_worker_id, attempt_waited_us, attempt_output) "
    "SELECT 'history-' || k || ':' || g, 'history-' || k, "
    "CASE WHEN mod(k, %(tenants)s) = 0 THEN %(tenant)s ELSE 'history-' || mod(k, %(tenants)s) END, "
    "mod(k, %(partitions)s), 'scheduled', at, at, at, 1, 1, "
    "CASE mod(g, 100) WHEN 0 THEN 'dead' WHEN 1 THEN 'canceled' ELSE 'succeeded' END, %(handler)s, 0, 0, '', "
    "CASE mod(g, 100) WHEN 0 THEN 'boom' ELSE '' END, CASE mod(g, 100) WHEN 0 THEN 'attempts' ELSE '' END, "
    "at, at + 50000, CASE WHEN mod(g, 100) > 1 THEN at + 10000 END, "
    "CASE WHEN mod(g, 100) > 1 THEN 'history-w' END, CASE WHEN mod(g, 100) > 1 THEN 0 END, "
    "CASE WHEN mod(g, 100) > 1 THEN '{}'::bytea END "
    "FROM (SELECT g, mod(g, %(jobs)s) AS k, %(first)s + g * %(span)s / %(count)s AS at "
    "FROM generate_series(1, %(count)s::bigint) AS g) s"
)
"""The history rows :func:`insert_history` writes, in one statement."""


def insert_history(url: str, count: int, now_us: int) -> dict:
    """``count`` ended executions already in the store before a run: a store
    that has been running, not an empty one (issue 17: the cost of a
    statement that scans history grows with it). One set-based
    ``INSERT … SELECT FROM generate_series``: ``count // 20`` jobs (no
    ``jobs`` rows: ended one-offs whose rows are gone), one in four of
    the benchmark's tenant, the rest of three others; one in a hundred dead,
    one in a hundred canceled, the rest succeeded (their attempt kept on the
    row, as a plain success's); instants spread over the 23 hours ending an hour before
    ``now_us`` (inside retention, whose pass leaves them; a run's own
    executions are those of instants from ``now_us`` on). Then ``VACUUM
    ANALYZE executions``, as autovacuum would have left a table that old,
    and a ``CHECKPOINT`` (skipped, ``checkpoint_s`` null, without the
    privilege), so that writing the history's pages out is not billed to
    the run. Returns the rows, by status, and the seconds each step took."""
    if count <= 0:
        return {"rows": 0}
    began = time.perf_counter()
    with observe(url) as pg:
        pg.execute(f"{OWN_QUERY} {HISTORY}", {
            "count": count, "jobs": max(1, count // HISTORY_PER_JOB), "tenants": HISTORY_TENANTS,
            "tenant": TENANT, "partitions": PARTITIONS, "handler": HANDLER,
            "first": now_us - HISTORY_GAP_US - HISTORY_SPAN_US, "span": HISTORY_SPAN_US})
        inserted = time.perf_counter()
        pg.execute("VACUUM ANALYZE executions")
        vacuumed = time.perf_counter()
        try:  # the history's pages written out now, not by a checkpoint billed to the run
            pg.execute("CHECKPOINT")
            checkpoint = round(time.perf_counter() - vacuumed, 2)
        except psycopg.errors.InsufficientPrivilege:
            checkpoint = None
        statuses = dict(pg.execute(f"{OWN_QUERY} SELECT status, count(*) FROM executions WHERE nominal_at < %s "
                                   "GROUP BY status", (now_us,)).fetchall())
    return {"rows": count, "statuses": statuses, "insert_s": round(inserted - began, 2),
            "vacuum_s": round(vacuumed - inserted, 2), "checkpoint_s": checkpoint}


def count_jobs(cur, tenant: str, count: int) -> None:
    """Count ``count`` jobs COPYed in for ``tenant`` in its quota slot 0
    (where a COPY without ``quota_slot`` puts them), its allowance raised
    to cover them."""
    cur.execute(
        "UPDATE tenant_quota SET used = used + %s, allowance = GREATEST(allowance, used + %s) "
        "WHERE tenant = %s AND slot = 0",
        (count, count, tenant),
    )


def server_settings(url: str) -> dict:
    """The server's own settings (a plain connection: ``observe`` overrides the isolation)."""
    with psycopg.connect(conninfo(url), autocommit=True) as pg:
        return {name: pg.execute(f"SHOW {name}").fetchone()[0] for name in (
            "server_version", "shared_buffers", "fsync", "synchronous_commit", "default_transaction_isolation",
        )}


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = math.ceil(fraction * len(sorted_values) - 1e-9)
    return sorted_values[min(len(sorted_values), max(rank, 1)) - 1]


# ------------------------------------------------------------------ jobs


JOB_COLUMNS = (
    "id", "tenant", "partition", "name", "state", "spec", "time_zone", "next_run_at", "next_due_at", "run_count",
    "tzdata_version", "pause_reason", "paused_at", "version", "created_at", "updated_at",
)
"""A job row as the benchmarks build it: the job with its cursor (:func:`copy_jobs` splits them)."""
_CURSOR_ONLY = ("next_run_at", "next_due_at", "run_count")
_CURSOR_COLUMNS = ("job_id", "tenant", "partition", "state", "version", "next_run_at", "next_due_at", "run_count")


def copy_jobs(cur: psycopg.Cursor, rows) -> int:
    """COPY ``rows`` (:data:`JOB_COLUMNS` tuples) into ``jobs`` and their
    cursors into ``job_cursors`` (migration 0032); how many."""
    on_job = [i for i, name in enumerate(JOB_COLUMNS) if name not in _CURSOR_ONLY]
    on_cursor = [JOB_COLUMNS.index("id" if name == "job_id" else name) for name in _CURSOR_COLUMNS]
    cursors = []
    with cur.copy(f"COPY jobs ({', '.join(JOB_COLUMNS[i] for i in on_job)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([row[i] for i in on_job])
            cursors.append([row[i] for i in on_cursor])
    with cur.copy(f"COPY job_cursors ({', '.join(_CURSOR_COLUMNS)}) FROM STDIN") as copy:
        for row in cursors:
            copy.write_row(row)
    return len(cursors)


def insert_once_jobs(url: str, count: int, due: datetime, *, name: str, payload: bytes = b"{}",
                     on_commit: Callable[[], object] | None = None) -> dict:
    """``count`` one-off jobs due at ``due``, for the ``echo`` handler, stored
    in one transaction, and the instant it committed (``committed_at``, Unix
    seconds).

    Every row is what CreateJob stores: the definition normalised by the API's
    own ``normalise_job``, ids from ``new_job_id``, the first fire from the
    schedule engine (``validate``), the partition from ``partition_of``, a
    ``request_ids`` row per job and the tenant's quota slot 0 counting them
    (:func:`count_jobs`). They
    are written with COPY in one transaction rather than through
    ``JobStore.create``: creating is not what is measured
    (``bench_create.py`` measures it), and one commit makes every job
    visible to the dispatcher at the same instant. ``on_commit`` runs right
    after the commit (a benchmark's CPU reading, so that what the storing
    cost is left out of what it measures).
    """
    now = datetime.now(timezone.utc)
    template = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=HANDLER)),
                           payload=payload)
    template.schedule.once_at.FromDatetime(due)
    template = normalise_job(template, now)
    version = tzdata_version()
    began = time.perf_counter()
    with observe(url, autocommit=False) as pg:
        partitions = pg.execute("SELECT partition_count FROM cluster WHERE id = 1").fetchone()[0]
        now_us = to_us(now)
        jobs, requests = [], []
        for i in range(count):
            job_id = new_job_id(now)
            template.name = f"{name}-{i:06d}"
            schedule = schedule_of(template, job_id)
            fire = validate_schedule(schedule, now)
            jobs.append((
                job_id, TENANT, partition_of(job_id, partitions), template.name, "active",
                template.SerializeToString(), zone_of(schedule), to_us(fire.nominal_at), to_us(fire.due_at), 0,
                version, "", None, 1, now_us, now_us,
            ))
            requests.append((TENANT, "job", f"{name}-{i}", job_id, now_us))
        built = time.perf_counter()
        with pg.cursor() as cur:
            copy_jobs(cur, jobs)
            with cur.copy("COPY request_ids (tenant, kind, request_id, target, created_at) FROM STDIN") as copy:
                for row in requests:
                    copy.write_row(row)
            count_jobs(cur, TENANT, count)
        pg.commit()
        committed_at = time.time()
        if on_commit is not None:
            on_commit()
    return {
        "jobs": count,
        "build_s": round(built - began, 2),
        "store_s": round(time.perf_counter() - built, 2),
        "committed_at": committed_at,
    }


def insert_bench_jobs(conn, rows: int, spec: str = "") -> None:
    """``rows`` active jobs ``job_1`` … of tenant ``bench`` in partition 0,
    each with its cursor (``job_cursors``, migration 0032), none due: the
    jobs a store benchmark's executions hang from (one statement each)."""
    conn.exec_driver_sql(
        "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, tzdata_version, "
        "pause_reason, version, created_at, updated_at) "
        "SELECT 'job_' || g, 'bench', 0, 'j', 'active', %(spec)s, 'UTC', 'x', '', 1, 0, 0 "
        "FROM generate_series(1, %(rows)s) AS g",
        {"spec": spec, "rows": rows},
    )
    conn.exec_driver_sql(
        "INSERT INTO job_cursors (job_id, tenant, partition, state, version, run_count) "
        "SELECT 'job_' || g, 'bench', 0, 'active', 1, 0 FROM generate_series(1, %(rows)s) AS g",
        {"rows": rows},
    )
