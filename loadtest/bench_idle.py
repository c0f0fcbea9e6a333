"""Benchmark: CPU of an idle `tickwheel server` after a burst has drained,
beside the same server idle on an empty store.

    .venv/bin/python loadtest/bench_idle.py [--pg URL] [--etcd HOST:PORT] [--jobs 100000] [--burst 20000]
                                            [--window 15] [--windows 4] [--settle 5] [--smoke]

Prints one JSON object. Two scenarios run one after the other, each with a
real `tickwheel server` process (PostgreSQL + etcd, owning all 256
partitions) and a real `tickwheel worker` process (the built-in ``echo``
handler, ``--slots`` slots) connected to it:

- ``baseline``: an empty store. Once the worker is connected and
  ``--settle`` seconds have passed (start-up work: the tzdata fingerprints
  take ~2 s of CPU), CPU is measured over ``--windows`` consecutive windows
  of ``--window`` seconds.
- ``after_burst``: ``--jobs`` jobs stored (COPY; each built as CreateJob
  stores it: ``normalise_job``, first fire from the engine), of which
  ``--burst`` fall due together: half daily crons for the minute B (the
  first minute boundary at least ``--lead`` seconds away; default jitter, so
  due within that minute), half one-offs at B. The others are daily crons
  due between B + 2 h and B + 22 h, so nothing else falls due. The
  dispatcher claims the burst in its look-ahead, the gateway hands it out at
  the due instants, the worker completes it. Once every burst execution has
  succeeded (``drain``), ``--settle`` seconds, then the same windows.

CPU is read from /proc/<pid>/stat (utime + stime, clock ticks): the server
process, the worker process, etcd (when this script started it) and
PostgreSQL: the postmaster, every live child, and the children that exited
within the window (their time lands in the postmaster's cutime + cstime:
autovacuum workers come and go), split by process kind (``backends`` are
client connections: the server's pool and this script's one idle
connection). Each figure is a fraction of one core over the window; the goal
is under 0.05 for the server and for PostgreSQL each, after the burst.
Beside each window: the load average (the machine may be shared) and, read
after the window, dead tuples and (auto)vacuum counts of ``jobs`` and
``executions`` (pg_stat_user_tables). ``ratio`` divides the after-burst mean
by the baseline mean, per process.

Without ``--pg`` a throwaway PostgreSQL is started with the test suite's
functions, but with autovacuum ON as in production (the suite turns it off;
idle CPU after a burst is largely about what vacuum leaves behind), and one
database per scenario. ``--pg URL`` uses that empty database for both
scenarios (the baseline first, then the jobs are loaded); PostgreSQL's CPU
is then measured only if that server runs on this machine. Without
``--etcd`` a throwaway etcd per scenario.

``--smoke`` runs tiny sizes, one-offs only and one-second windows, so CI
keeps the script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url
from tickwheel.v1 import job_pb2

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import etcd as etcdsupport  # noqa: E402
from tests.support import postgres as pgsupport  # noqa: E402
from tests.support.server import TICKWHEEL, ServerProcess, start_server_process  # noqa: E402
from tickwheel_server.api.validate import normalise_job  # noqa: E402
from tickwheel.shared.ids import new_job_id, partition_of, to_us  # noqa: E402
from tickwheel_server.jobspec import schedule_of  # noqa: E402
from tickwheel_server.schedule import pin_tzdata, tzdata_version  # noqa: E402
from tickwheel_server.schedule import validate as validate_schedule  # noqa: E402

import _harness as h  # noqa: E402

UTC = timezone.utc
HANDLER = "echo"
HANDLERS = "tickwheel_worker.handlers:register_builtins"  # adds `echo`
PAYLOAD = b'{"bench": "idle"}'
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
GOAL = 0.05
JOB_COLUMNS = (
    "id", "tenant", "partition", "name", "state", "spec", "time_zone", "next_run_at", "next_due_at", "run_count",
    "tzdata_version", "pause_reason", "paused_at", "version", "created_at", "updated_at",
)
BACKGROUND = ("autovacuum launcher", "checkpointer", "background writer", "walwriter", "logical replication",
              "stats collector", "archiver")


# ------------------------------------------------------------------ CPU


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, own ticks, reaped children's ticks) of ``pid``, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "; fields[0] is the state
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _kind(pid: int) -> str:
    """What a PostgreSQL child process is, from its title."""
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "exited"
    if "autovacuum worker" in title:
        return "autovacuum"
    if any(name in title for name in BACKGROUND):
        return "background"
    return "backends"


@dataclass
class PostgresSnapshot:
    own: int
    reaped: int
    children: dict[int, tuple[str, int]]


def postgres_snapshot(postmaster: int) -> PostgresSnapshot:
    """The postmaster's ticks, its reaped children's, and each live child's (with its kind)."""
    found = _stat(postmaster)
    if found is None:
        raise RuntimeError(f"PostgreSQL's postmaster {postmaster} is gone")
    children: dict[int, tuple[str, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        child = _stat(int(entry.name))
        if child is not None and child[0] == postmaster:
            children[int(entry.name)] = (_kind(int(entry.name)), child[1])
    return PostgresSnapshot(found[1], found[2], children)


def postgres_delta(before: PostgresSnapshot, after: PostgresSnapshot) -> dict[str, int]:
    """Ticks spent between two snapshots, by process kind (``exited``: children
    that ended in between, from the postmaster's reaped time)."""
    out = {"backends": 0, "autovacuum": 0, "background": after.own - before.own, "exited": 0}
    for pid, (kind, ticks) in after.children.items():
        earlier = before.children.get(pid)
        out[kind] = out.get(kind, 0) + ticks - (earlier[1] if earlier else 0)
    vanished = sum(ticks for pid, (_, ticks) in before.children.items() if pid not in after.children)
    out["exited"] = after.reaped - before.reaped - vanished
    return out


def own_ticks(pid: int) -> int:
    found = _stat(pid)
    if found is None:
        raise RuntimeError(f"process {pid} is gone")
    return found[1]


def fraction(ticks: int, seconds: float) -> float:
    """Ticks over a window as a fraction of one core."""
    return round(ticks / CLOCK_TICKS / seconds, 4)


# ------------------------------------------------------------------ processes


def cli(*args: str) -> str:
    """Run `tickwheel ARGS`; the last line of its output (ids and secrets come last)."""
    done = subprocess.run([TICKWHEEL, *args], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"tickwheel {' '.join(args[:3])} failed: {done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def stop(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it does not exit in time."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def wait_for(check, timeout: float, what: str, interval: float = 0.2):
    """Poll ``check`` (a child process or the database) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise RuntimeError(f"not within {timeout:.0f} s: {what} (last: {value!r})")
        time.sleep(interval)


def conninfo(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def connect(url: str) -> psycopg.Connection:
    """This script's connection: autocommit at READ COMMITTED, so its polling
    never holds a snapshot (vacuum's horizon) nor joins the server's
    SERIALIZABLE conflicts."""
    pg = psycopg.connect(conninfo(url), autocommit=True)
    pg.execute("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")
    return pg


def local_postmaster(pg: psycopg.Connection) -> int | None:
    """The postmaster of the server ``pg`` is connected to, if it runs on this machine."""
    backend = pg.execute("SELECT pg_backend_pid()").fetchone()[0]
    found = _stat(backend)
    if found is None:
        return None
    data_dir = pg.execute("SHOW data_directory").fetchone()[0]
    try:
        first = Path(data_dir, "postmaster.pid").read_text().split("\n", 1)[0]
    except OSError:
        return None
    return found[0] if first.strip() == str(found[0]) else None


# ------------------------------------------------------------------ the jobs


def _job(expression: str | None, at: datetime | None, now: datetime, exact: bool) -> job_pb2.Job:
    job = job_pb2.Job(name="bench-idle", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=HANDLER)),
                      payload=PAYLOAD)
    if expression is not None:
        job.schedule.cron.expression = expression
        job.schedule.cron.time_zone = "UTC"
    else:
        job.schedule.once_at.FromDatetime(at)
    if exact:
        job.jitter.exact = True
    return normalise_job(job, now)


def job_rows(tenant: str, now: datetime, burst_at: datetime, jobs: int, burst: int, cron_share: float,
             partitions: int, seed: int = 1):
    """COPY rows: ``burst`` jobs due at ``burst_at`` (``cron_share`` of them
    daily crons for its minute), the rest daily crons 2 h to 22 h later."""
    rng = random.Random(seed)
    version = tzdata_version()
    now_us = to_us(now)
    crons = round(burst * cron_share)
    burst_cron = _job(f"{burst_at.minute} {burst_at.hour} * * *", None, now, exact=False)
    burst_once = _job(None, burst_at, now, exact=False)
    later: dict[int, job_pb2.Job] = {}
    for i in range(jobs):
        ident = new_job_id(now)
        if i < crons:
            spec = burst_cron
        elif i < burst:
            spec = burst_once
        else:
            minute = rng.randrange(120, 1320)
            spec = later.get(minute)
            if spec is None:
                when = burst_at + timedelta(minutes=minute)
                spec = later[minute] = _job(f"{when.minute} {when.hour} * * *", None, now, exact=False)
        fire = validate_schedule(schedule_of(spec, ident), now)  # CreateJob's first fire
        name = f"idle-{i:07d}"
        spec.name = name
        yield (
            ident, tenant, partition_of(ident, partitions), name, "active", spec.SerializeToString(), "UTC",
            to_us(fire.nominal_at), to_us(fire.due_at), 0, version, "", None, 1, now_us, now_us,
        )


def load_jobs(pg: psycopg.Connection, tenant: str, rows) -> int:
    count = h.copy_jobs(pg.cursor(), rows)
    # Counted in the tenant's quota slot 0, where a COPY without quota_slot puts them.
    pg.execute(
        "UPDATE tenant_quota SET used = used + %s, allowance = GREATEST(allowance, used + %s) "
        "WHERE tenant = %s AND slot = 0",
        (count, count, tenant),
    )
    # A table at rest has been vacuumed and analysed; the burst is what makes garbage.
    pg.execute("VACUUM ANALYZE jobs")
    pg.execute("VACUUM ANALYZE job_cursors")
    return count


def table_stats(pg: psycopg.Connection) -> dict:
    rows = pg.execute(
        "SELECT relname, n_live_tup, n_dead_tup, vacuum_count, autovacuum_count, autoanalyze_count "
        "FROM pg_stat_user_tables WHERE relname IN ('jobs', 'executions') ORDER BY relname"
    ).fetchall()
    return {r[0]: {"live": r[1], "dead": r[2], "vacuums": r[3] + r[4], "autoanalyzes": r[5]} for r in rows}


def statuses(pg: psycopg.Connection) -> dict[str, int]:
    return dict(pg.execute("SELECT status, count(*) FROM executions GROUP BY status").fetchall())


# ------------------------------------------------------------------ scenarios


@dataclass
class Services:
    url: str
    etcd: str
    etcd_pid: int | None


def measure(pg: psycopg.Connection, postmaster: int | None, processes: dict[str, int], window: float,
            windows: int) -> list[dict]:
    """CPU over consecutive windows; nothing here touches the database inside a window."""
    out = []
    for _ in range(windows):
        load_before = os.getloadavg()
        before = {name: own_ticks(pid) for name, pid in processes.items()}
        pg_before = postgres_snapshot(postmaster) if postmaster else None
        began = time.monotonic()
        time.sleep(window)  # the measurement itself: the processes run on their own meanwhile
        pg_after = postgres_snapshot(postmaster) if postmaster else None
        after = {name: own_ticks(pid) for name, pid in processes.items()}
        seconds = time.monotonic() - began
        figures: dict = {name: fraction(after[name] - before[name], seconds) for name in processes}
        if pg_before and pg_after:
            split = postgres_delta(pg_before, pg_after)
            figures["postgres"] = fraction(sum(split.values()), seconds)
            figures["postgres_by_kind"] = {kind: fraction(t, seconds) for kind, t in split.items()}
        else:
            figures["postgres"] = None
        figures["seconds"] = round(seconds, 2)
        figures["load_average"] = [round(x, 2) for x in (*load_before[:1], *os.getloadavg())]
        figures["tables"] = table_stats(pg)
        out.append(figures)
    return out


def summary(windows: list[dict], names: list[str]) -> dict:
    out = {}
    for name in names:
        values = [w[name] for w in windows if w.get(name) is not None]
        if values:
            out[name] = {"mean": round(sum(values) / len(values), 4), "max": max(values)}
    return out


def scenario(name: str, services: Services, workdir: Path, args: argparse.Namespace, jobs: int, burst: int) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack, connect(services.url) as pg:
        server: ServerProcess = start_server_process(
            workdir, "--store", services.url, "--etcd", services.etcd, "--migrate", "--server-id", f"idle-{name}",
        )
        stack.callback(stop, server.process)
        admin = ("--address", server.address, "--admin-token", server.admin_token)
        tenant = f"bench-{name.replace('_', '-')}"  # one per scenario: with --pg both share a database
        cli("admin", "tenant", "create", tenant, *admin)
        credential = cli("admin", "worker-credential", "create", "--tenant", tenant, "--handler", HANDLER, *admin)
        partitions = pg.execute("SELECT partition_count FROM cluster").fetchone()[0]
        wait_for(
            lambda: pg.execute("SELECT count(*) FROM partitions WHERE owner = %s", (f"idle-{name}",)).fetchone()[0]
            == partitions,
            60, f"server idle-{name} owns all {partitions} partitions",
        )
        postmaster = local_postmaster(pg)
        figures: dict = {"jobs": jobs, "burst": burst}
        burst_at = None
        if jobs:
            now = datetime.now(UTC)
            if args.cron_share > 0:
                burst_at = (now + timedelta(seconds=args.lead + 59)).replace(second=0, microsecond=0)
            else:
                burst_at = now + timedelta(seconds=args.lead)
            began = time.monotonic()
            load_jobs(pg, tenant, job_rows(tenant, now, burst_at, jobs, burst, args.cron_share, partitions))
            figures["load_s"] = round(time.monotonic() - began, 1)
            figures["burst_at"] = burst_at.isoformat()
        log = (workdir / f"worker-{name}.log").open("w")
        stack.callback(log.close)
        worker = subprocess.Popen(
            [TICKWHEEL, "worker", "--address", server.address, "--worker-id",
             f"idle-{name}", "--handlers", HANDLERS, "--no-http", "--slots", str(args.slots), "--grace", "2"],
            stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
            env={**os.environ, "TICKWHEEL_WORKER_CREDENTIAL": credential},  # not a flag: ps would show it
        )
        stack.callback(stop, worker)
        wait_for(lambda: f"worker idle-{name} connected" in server.log(), 30, "the worker connects")
        if burst:
            wait_for(lambda: statuses(pg).get("succeeded", 0) >= burst, args.lead + 120 + burst / 50,
                     f"{burst} burst executions succeed", interval=0.5)
            drained = datetime.now(UTC)
            left = {status: n for status, n in statuses(pg).items() if status != "succeeded"}
            if left:
                raise RuntimeError(f"after the burst, executions not succeeded: {left}")
            figures["drained_s_after_burst_at"] = round((drained - burst_at).total_seconds(), 1)
        time.sleep(args.settle)  # start-up or drain leftovers settle before measuring
        processes = {"server": server.process.pid, "worker": worker.pid}
        if services.etcd_pid is not None:
            processes["etcd"] = services.etcd_pid
        figures["windows"] = measure(pg, postmaster, processes, args.window, args.windows)
        figures["summary"] = summary(figures["windows"], ["server", "postgres", *processes])
        if "Traceback" in server.log():
            raise RuntimeError(f"the server logged an error:\n{server.log()[-4000:]}")
        return figures


# ------------------------------------------------------------------ services


@contextmanager
def postgres(url: str | None, databases: int):
    """``url`` (every scenario on it) or a throwaway server with autovacuum on
    and one fresh database per scenario."""
    if url:
        yield [url] * databases
        return
    bindir = pgsupport.find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed: " + pgsupport.INSTALL_HINT)
    pgsupport.SERVER_SETTINGS.update({"autovacuum": "on", "shared_buffers": "256MB", "max_wal_size": "2GB"})
    server = pgsupport.PostgresServer(bindir)
    undo = pgsupport._finalize_on_sigterm()
    try:
        server.start()
        server.setup_template()
        yield [server.url(server.create_database()) for _ in range(databases)]
    finally:
        server.close()
        undo()


@contextmanager
def etcd(endpoint: str | None, workdir: Path):
    """``endpoint``, or a throwaway etcd (its pid for CPU)."""
    if endpoint:
        yield endpoint, None
        return
    binary = etcdsupport._find_etcd()
    if binary is None:
        raise SystemExit("etcd is not installed (apt-get install etcd-server, or TICKWHEEL_ETCD_BIN)")
    workdir.mkdir(parents=True, exist_ok=True)
    server = etcdsupport.EtcdServer(binary, workdir)
    try:
        server.start()
        yield server.endpoint, server._process.pid
    finally:
        server.stop(signal.SIGTERM)


def run(args: argparse.Namespace) -> dict:
    began = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="tickwheel-bench-idle-"))
    report: dict = {"benchmark": "idle", "smoke": args.smoke, "goal_cpu_fraction": GOAL,
                    "window_s": args.window, "windows": args.windows}
    try:
        with postgres(args.pg, 2) as urls:
            for (name, jobs, burst), url in zip((("baseline", 0, 0), ("after_burst", args.jobs, args.burst)), urls):
                with etcd(args.etcd, workdir / f"etcd-{name}") as (endpoint, etcd_pid):
                    report[name] = scenario(name, Services(url, endpoint, etcd_pid), workdir / name, args, jobs, burst)
            with connect(urls[-1]) as pg:
                report["server"] = {
                    setting: pg.execute(f"SHOW {setting}").fetchone()[0]
                    for setting in ("server_version", "autovacuum", "autovacuum_naptime", "shared_buffers")
                }
                report["server"]["default_transaction_isolation"] = pg.execute(  # the server's, not this session's
                    "SELECT reset_val FROM pg_settings WHERE name = 'default_transaction_isolation'"
                ).fetchone()[0]
                report["server"]["storage_parameters"] = dict(pg.execute(
                    "SELECT relname, coalesce(array_to_string(reloptions, ','), '') FROM pg_class "
                    "WHERE relname IN ('jobs', 'executions') ORDER BY relname"
                ).fetchall())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    base, loaded = report["baseline"]["summary"], report["after_burst"]["summary"]
    report["ratio"] = {
        name: round(loaded[name]["mean"] / base[name]["mean"], 2) if base[name]["mean"] else None
        for name in loaded if name in base
    }
    report["under_goal"] = {name: loaded[name]["mean"] < GOAL for name in ("server", "postgres") if name in loaded}
    report["machine"] = {"cpus": os.cpu_count(), "clock_ticks_per_s": CLOCK_TICKS}
    report["total_s"] = round(time.perf_counter() - began, 1)
    report["python"] = platform.python_version()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", help="an empty PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--etcd", help="etcd HOST:PORT; default: a throwaway etcd per scenario")
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs stored after the burst (default 100 000)")
    parser.add_argument("--burst", type=int, default=20_000, help="of those, due together (default 20 000)")
    parser.add_argument("--cron-share", type=float, default=0.5, help="share of the burst that is daily crons")
    parser.add_argument("--lead", type=float, default=10.0, help="seconds at least from loading to the burst")
    parser.add_argument("--slots", type=int, default=256, help="the worker's slots (default 256)")
    parser.add_argument("--window", type=float, default=15.0, help="seconds per measured window (default 15)")
    parser.add_argument("--windows", type=int, default=4, help="consecutive windows (default 4)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before the first window (default 5)")
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.burst, args.cron_share, args.lead = 2000, 200, 0.0, 3.0
        args.window, args.windows, args.settle = 1.0, 1, 0.5
    if not 0 <= args.burst <= args.jobs or not 0 <= args.cron_share <= 1 or args.window <= 0 or args.windows < 1:
        parser.error("need 0 <= --burst <= --jobs, 0 <= --cron-share <= 1, --window > 0, --windows >= 1")
    if args.pg:
        args.pg = make_url(args.pg).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    pin_tzdata()
    report = run(args)
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
