"""The peers the benchmarks measure Tickwheel against, run in the same
invocation on the same PostgreSQL server, with the same job count: pgqueuer
draining no-op jobs and firing a burst of deferred ones, APScheduler 3 firing
one-off jobs from its SQLAlchemy job store on PostgreSQL, the raw
``FOR UPDATE SKIP LOCKED`` claim of recurring jobs over asyncpg, and the
gRPC floor: a ``grpc.aio`` SchedulerService whose CreateJob answers with the
request's job and does nothing else, the least any Python gRPC server can
spend on a call.

pgqueuer, APScheduler and asyncpg are the ``bench`` extra (``bash
scripts/install.sh --bench``). They are imported only inside the functions that
run a peer (:func:`require` names the extra when one is missing), so the pure
helpers here, and every benchmark run with ``--no-peer``, need none of them.

Each peer keeps to its own place on the server: pgqueuer and APScheduler to a
database of their own (created beside the benchmark's, dropped afterwards),
the raw claim to the schema ``peer_raw`` in the benchmark's database, so none
touches Tickwheel's tables. Peer processes are this file run as a program
(``python peers.py pgqueuer-worker|apscheduler …``), so their CPU is measured
apart from the benchmark's own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import make_url

import _harness as h

HERE = Path(__file__).resolve().parent
EXTRA_HINT = "the benchmark's peers need the bench extra: bash scripts/install.sh --bench (or pass --no-peer)"
PGQUEUER_SETTINGS = "5x10,10x50"
"""pgqueuer's worker processes × dequeue batch tried by default: its
documented default batch (10) and a larger one, the best reported."""
PGQUEUER_ENTRYPOINT = "noop"
ENQUEUE_BATCH = 1000
RAW_SCHEMA = "peer_raw"
RAW_BATCHES = (100, 1000)
READY_TIMEOUT = 180.0
"""Seconds a peer's worker processes (and the gRPC floor) may take to say
they are ready: ten pgqueuer workers importing asyncpg on a loaded
machine took more than a minute, and the run then ended without the
figures it had already measured."""
POLL = 0.25
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


# ------------------------------------------------------------------ pure helpers


def require(module: str):
    """``module`` imported, or SystemExit naming the bench extra."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise SystemExit(f"{module} is not installed: {EXTRA_HINT}") from error


def ratio(numerator: float | None, denominator: float | None, digits: int = 3) -> float | None:
    """``numerator / denominator`` rounded, None when either is missing or the
    denominator is not positive (a peer that did not run has no ratio)."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return round(numerator / denominator, digits)


def parse_pgqueuer_settings(text: str) -> list[tuple[int, int]]:
    """``"5x10,10x50"`` as [(workers, batch), …]; ValueError naming a bad item
    (workers 1–64, batch 1–10 000)."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        workers, sep, batch = item.lower().partition("x")
        if not sep or not workers.isdigit() or not batch.isdigit():
            raise ValueError(f"pgqueuer setting {item!r}: expected WORKERSxBATCH, e.g. 5x10")
        workers_n, batch_n = int(workers), int(batch)
        if not 1 <= workers_n <= 64 or not 1 <= batch_n <= 10_000:
            raise ValueError(f"pgqueuer setting {item!r}: workers must be 1-64 and batch 1-10000")
        out.append((workers_n, batch_n))
    if not out:
        raise ValueError("no pgqueuer setting given")
    return out


def best_of(runs: list[dict], key: str, *, lowest: bool = False) -> dict | None:
    """The run with the highest (``lowest``: the lowest) ``key``, leaving out
    runs where it is None; None when none has it."""
    found = [run for run in runs if run.get(key) is not None]
    if not found:
        return None
    return (min if lowest else max)(found, key=lambda run: run[key])


def distribution(values: list[float]) -> dict | None:
    """min, p50, p90, p99 and max of ``values`` (seconds, rounded to 0.1 ms),
    None for none."""
    if not values:
        return None
    values = sorted(values)
    return {
        "min": round(values[0], 4), "p50": round(h.percentile(values, 0.50), 4),
        "p90": round(h.percentile(values, 0.90), 4), "p99": round(h.percentile(values, 0.99), 4),
        "max": round(values[-1], 4),
    }


def cpu_ms_per_execution(cpu: dict | None) -> dict | None:
    """A ``Meter.difference`` ``cpu`` figure as milliseconds per execution by
    role, with their ``total`` (every measured process); None for none."""
    if not cpu:
        return None
    out = {role: figures["cpu_ms_per_execution"] for role, figures in cpu.items()}
    out["total"] = round(sum(out.values()), 4)
    return out


def lateness(starts: list[float], due: float) -> dict:
    """Starts (Unix seconds) against their due instant: the distribution of
    start − due (signed: an early start is negative, not clamped) and how
    many were early."""
    late = [start - due for start in starts]
    return {"started": len(late), "early": sum(1 for value in late if value < 0),
            "lateness_s": distribution(late)}


@dataclass(frozen=True)
class RawClaim:
    """The raw claim's three statements (asyncpg's ``$n`` placeholders) on the
    plain table pair in ``schema``, one transaction per batch:

    - ``claim`` ($1 horizon, $2 limit): the due active jobs in ``next_run_at``
      order, locked, skipping what another claimer holds;
    - ``insert`` ($1 job ids, $2 tenants, $3 partitions, $4 nominal instants,
      $5 due instants, $6 handler, $7 payload, $8 created_at): one execution
      row per claimed job, its id the job's id and its nominal instant;
    - ``reschedule`` ($1 job ids, $2 step): each claimed job's cursor moved
      on by the step, its run count up by one.
    """

    claim: str
    insert: str
    reschedule: str


def raw_claim_sql(schema: str = RAW_SCHEMA) -> RawClaim:
    """The plain claim on ``schema``'s ``jobs`` and ``executions``
    (ValueError for a schema name that is not a plain identifier)."""
    if not _NAME.match(schema):
        raise ValueError(f"schema {schema!r} is not a plain identifier")
    return RawClaim(
        claim=(
            f"SELECT id, tenant, partition, next_run_at, next_due_at FROM {schema}.jobs "
            "WHERE state = 'active' AND next_run_at <= $1 ORDER BY next_run_at LIMIT $2 FOR UPDATE SKIP LOCKED"
        ),
        insert=(
            f"INSERT INTO {schema}.executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, "
            "attempt, delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at) "
            "SELECT v.job_id || ':' || v.nominal_at, v.job_id, v.tenant, v.partition, 'scheduled', v.nominal_at, "
            "v.due_at, v.due_at, 1, 0, 'scheduled', $6, 1, 0, $7, '', '', $8 "
            "FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bigint[]) "
            "AS v(job_id, tenant, partition, nominal_at, due_at)"
        ),
        reschedule=(
            f"UPDATE {schema}.jobs SET next_run_at = next_run_at + $2, next_due_at = next_due_at + $2, "
            "run_count = run_count + 1 WHERE id = ANY($1::text[])"
        ),
    )


def prepare_raw_tables(pg: psycopg.Connection, schema: str = RAW_SCHEMA) -> int:
    """``schema``'s ``jobs`` and ``executions`` made afresh in the shape of
    Tickwheel's (``LIKE … INCLUDING ALL``: columns, defaults, checks,
    indexes; no foreign keys), with the cursor in the job's row (Tickwheel
    keeps it in ``job_cursors``, migration 0032, indexed by ``(partition,
    next_run_at)``) and indexed for the plain claim by ``(next_run_at)``,
    on active jobs. ``jobs`` gets a copy of every job of Tickwheel's with
    its cursor, ``executions`` stays empty; both ``VACUUM ANALYZE``d. Returns
    the rows copied. ``pg`` must be in autocommit (VACUUM)."""
    raw_claim_sql(schema)  # the name check
    pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    pg.execute(f"CREATE SCHEMA {schema}")
    pg.execute(f"CREATE TABLE {schema}.jobs (LIKE public.jobs INCLUDING ALL)")
    pg.execute(f"CREATE TABLE {schema}.executions (LIKE public.executions INCLUDING ALL)")
    # Tickwheel keeps the cursor in a table of its own (job_cursors,
    # migration 0032); the plain claim keeps it in the job's row.
    pg.execute(
        f"ALTER TABLE {schema}.jobs ADD COLUMN next_run_at BIGINT, ADD COLUMN next_due_at BIGINT, "
        "ADD COLUMN run_count BIGINT NOT NULL DEFAULT 0, ADD COLUMN next_nominal_at BIGINT"
    )
    pg.execute(f"CREATE INDEX raw_jobs_due ON {schema}.jobs (next_run_at) WHERE state = 'active'")
    columns = [row[0] for row in pg.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'jobs' "
        "ORDER BY ordinal_position"
    ).fetchall()]
    listed = ", ".join(columns)
    copied = pg.execute(
        f"INSERT INTO {schema}.jobs ({listed}, next_run_at, next_due_at, run_count, next_nominal_at) "
        f"SELECT {', '.join('j.' + c for c in columns)}, c.next_run_at, c.next_due_at, c.run_count, c.next_nominal_at "
        "FROM public.jobs AS j JOIN public.job_cursors AS c ON c.job_id = j.id"
    ).rowcount
    pg.execute(f"VACUUM ANALYZE {schema}.jobs")
    pg.execute(f"VACUUM ANALYZE {schema}.executions")
    return copied


def libpq_url(url: str, database: str | None = None) -> str:
    """A ``postgresql://`` URL (what asyncpg and libpq take) for a SQLAlchemy
    URL, on ``database`` when given."""
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


# ------------------------------------------------------------------ databases


@contextlib.contextmanager
def peer_database(url: str, suffix: str) -> Iterator[str]:
    """A database named after ``url``'s with ``suffix``, on the same server,
    made empty for the peer, at READ COMMITTED by default, and dropped
    afterwards; yields its libpq URL."""
    base = make_url(url).database or "postgres"
    name = f"{base}_{suffix}"[:63]
    if not _NAME.match(name):
        raise ValueError(f"peer database {name!r} is not a plain identifier")
    with psycopg.connect(libpq_url(url), autocommit=True) as pg:
        pg.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        pg.execute(f"CREATE DATABASE {name} TEMPLATE template0")
        # PostgreSQL's own default, which the peers are written for (the
        # throwaway server's default is Tickwheel's SERIALIZABLE).
        pg.execute(f"ALTER DATABASE {name} SET default_transaction_isolation = 'read committed'")
    try:
        yield libpq_url(url, name)
    finally:
        with psycopg.connect(libpq_url(url), autocommit=True) as pg:
            pg.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# ------------------------------------------------------------------ pgqueuer


@dataclass
class PgqueuerWorkers:
    """pgqueuer worker processes, each one QueueManager on its own asyncpg
    connection, recording when each job's function started."""

    processes: list[subprocess.Popen]
    outputs: list[Path]
    logs: list[Path]
    """Each one's stderr."""

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        for process, log in zip(self.processes, self.logs):
            line = ""
            while line.strip() != "ready":
                if time.monotonic() > deadline or process.poll() is not None:
                    said = log.read_text()[-3000:] if log.exists() else "(no log)"
                    raise RuntimeError(f"pgqueuer worker {process.pid} not ready:\n{said}")
                line = process.stdout.readline()

    def stop(self, timeout: float = 30.0) -> list[dict]:
        """SIGTERM each (its QueueManager shuts down, in-flight jobs finish),
        wait, and read what each recorded."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        return [json.loads(path.read_text()) if path.exists() else {"starts": [], "exit": p.returncode}
                for p, path in zip(self.processes, self.outputs)]


def start_pgqueuer_workers(dsn: str, workers: int, batch: int, folder: Path) -> PgqueuerWorkers:
    processes, outputs, logs = [], [], []
    for i in range(workers):
        out = folder / f"pgqueuer-{workers}x{batch}-{i}.json"
        out.unlink(missing_ok=True)
        logs.append(folder / f"pgqueuer-{i}.log")
        processes.append(subprocess.Popen(
            [sys.executable, str(HERE / "peers.py"), "pgqueuer-worker", "--batch", str(batch), "--out", str(out)],
            stdout=subprocess.PIPE, stderr=logs[-1].open("w"), stdin=subprocess.DEVNULL,
            text=True, env={**os.environ, "TICKWHEEL_PEER_DSN": dsn},
        ))
        outputs.append(out)
    pool = PgqueuerWorkers(processes, outputs, logs)
    try:
        pool.wait_ready()
    except BaseException:
        pool.stop()
        raise
    return pool


async def _pgqueuer_worker(dsn: str, batch: int, out: Path) -> None:
    asyncpg = require("asyncpg")
    pgqueuer = require("pgqueuer")
    connection = await asyncpg.connect(dsn)
    manager = pgqueuer.QueueManager(pgqueuer.Queries.from_asyncpg_connection(connection))
    starts: list[list[float]] = []

    @manager.entrypoint(PGQUEUER_ENTRYPOINT)
    async def noop(job) -> None:
        starts.append([time.time(), job.execute_after.timestamp()])

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, manager.shutdown.set)
    print("ready", flush=True)
    # No periodic log aggregation: it folds the log this benchmark reads.
    await manager.run(batch_size=batch, dequeue_timeout=timedelta(seconds=30),
                      log_aggregation_interval=timedelta(0))
    out.write_text(json.dumps({"starts": starts}))


async def _pgqueuer_install(dsn: str) -> None:
    asyncpg = require("asyncpg")
    pgqueuer = require("pgqueuer")
    connection = await asyncpg.connect(dsn)
    try:
        await pgqueuer.Queries.from_asyncpg_connection(connection).install()
    finally:
        await connection.close()


async def _pgqueuer_enqueue(dsn: str, jobs: int, due: float | None,
                            on_commit: Callable[[], object] | None = None) -> tuple[float, float]:
    """``jobs`` no-op jobs enqueued with pgqueuer's own batch enqueue,
    ``ENQUEUE_BATCH`` per call, all in one transaction (they become visible
    together, as Tickwheel's are); with ``due`` (Unix seconds), each deferred
    to exactly that instant (the interval is taken from the transaction's own
    ``now()``, which is also what pgqueuer adds it to). ``on_commit`` runs
    right after the commit (a CPU reading). Returns (the transaction's now,
    the instant it committed)."""
    asyncpg = require("asyncpg")
    pgqueuer = require("pgqueuer")
    connection = await asyncpg.connect(dsn)
    try:
        queries = pgqueuer.Queries.from_asyncpg_connection(connection)
        async with connection.transaction():
            now = (await connection.fetchval("SELECT extract(epoch FROM now())::float8"))
            after = timedelta(seconds=due - now) if due is not None else None
            for start in range(0, jobs, ENQUEUE_BATCH):
                n = min(ENQUEUE_BATCH, jobs - start)
                await queries.enqueue([PGQUEUER_ENTRYPOINT] * n, [None] * n, [0] * n, [after] * n)
        committed_at = time.time()
        if on_commit is not None:
            on_commit()
        return now, committed_at
    finally:
        await connection.close()


def _pgqueuer_state(pg: psycopg.Connection) -> dict:
    """pgqueuer's queue and log right now, on ``pg`` (autocommit): one
    connection for every poll, as Tickwheel's benchmarks poll, since a new
    one costs PostgreSQL a backend's start that would count as the peer's."""
    queued = pg.execute("SELECT count(*) FROM pgqueuer").fetchone()[0]
    first_pick, last_done, done = pg.execute(
        "SELECT extract(epoch FROM min(created) FILTER (WHERE status = 'picked'))::float8, "
        "extract(epoch FROM max(created) FILTER (WHERE status = 'successful'))::float8, "
        "count(*) FILTER (WHERE status = 'successful') FROM pgqueuer_log"
    ).fetchone()
    return {"queued": queued, "first_pick": first_pick, "last_done": last_done, "successful": done}


def _reset_pgqueuer(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")


def run_pgqueuer(url: str, jobs: int, settings: list[tuple[int, int]], folder: Path, *,
                 due_in: float | None = None, stall: float = 60.0) -> dict:
    """pgqueuer 1.6 in its own database on ``url``'s server, once per
    (workers, batch) setting: ``workers`` worker processes connected and idle,
    then ``jobs`` no-op jobs enqueued (:func:`_pgqueuer_enqueue`), due now or,
    with ``due_in``, all at the whole second ``due_in`` seconds on; the run
    ends when the queue is empty (or after ``stall`` seconds without
    progress). Per setting: executions/s over the window from the first pick
    to the last completion, both as pgqueuer logged them (``pgqueuer_log``,
    the database's clock), and from the jobs' commit (``from_commit_*``);
    the start of each job's function against its due instant; CPU of the
    workers and of PostgreSQL per execution, from the commit to the end
    (what the enqueue cost is ``enqueue_cpu_s``, apart; before it the
    workers are let settle, ``settled_s``: a QueueManager checks its
    tables and LISTENs after its worker says "ready"), the loop polling
    only the queue's count (the log, three rows a job, read once at the
    end: its scan would count as pgqueuer's CPU); statements
    (``sql``: ``pg_stat_statements`` in its database, when the server has it)
    and rows written (``writes``, from the tables' own counters: pgqueuer
    writes in ``WITH`` clauses, which ``sql``'s figure leaves out), both
    counting the enqueue, since pgqueuer's queue row is its execution."""
    require("pgqueuer")
    require("asyncpg")
    out: dict = {"peer": f"pgqueuer {_version('pgqueuer')}", "driver": f"asyncpg {_version('asyncpg')}",
                 "jobs": jobs, "runs": []}
    with peer_database(url, "pgqueuer") as dsn:
        asyncio.run(_pgqueuer_install(dsn))
        sqlalchemy_dsn = make_url(dsn).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
        postmaster = h.postmaster_pid(sqlalchemy_dsn)
        for workers, batch in settings:
            _reset_pgqueuer(dsn)
            load_before = h.load_average()
            pool = start_pgqueuer_workers(dsn, workers, batch, folder)
            try:
                meter = h.Meter({"workers": pool.pids, **({"postgres": [postmaster]} if postmaster else {})})
                statements = h.Statements(sqlalchemy_dsn)
                statements.reset()
                writes_before = h.table_writes(sqlalchemy_dsn)
                with psycopg.connect(dsn, autocommit=True) as poll:
                    settled = meter.settle()  # its workers check their tables and LISTEN after "ready"
                    readings = [meter.read()]
                    due = math.ceil(time.time() + due_in) if due_in is not None else None
                    _, committed_at = asyncio.run(
                        _pgqueuer_enqueue(dsn, jobs, due, on_commit=lambda: readings.append(meter.read())))
                    enqueued, before = readings
                    last, progress_at = None, time.monotonic()
                    while True:
                        # The queue only: its log, three rows a job, is read once at the end.
                        queued = poll.execute("SELECT count(*) FROM pgqueuer").fetchone()[0]
                        if queued == 0:
                            break
                        if queued != last:
                            last, progress_at = queued, time.monotonic()
                        elif time.monotonic() - progress_at > stall and (due is None or time.time() > due):
                            break
                        for process in pool.processes:
                            if process.poll() is not None:
                                raise RuntimeError(f"pgqueuer worker {process.pid} exited ({process.returncode})")
                        time.sleep(POLL)  # polling another process's progress; nothing to await
                after = meter.read()
                sql = statements.report(jobs)
            finally:
                recorded = pool.stop()
            writes = h.writes_between(writes_before, h.table_writes(sqlalchemy_dsn), jobs)
            with psycopg.connect(dsn, autocommit=True) as pg:
                state = _pgqueuer_state(pg)
            starts = [start for worker in recorded for start in worker["starts"]]
            window = (state["last_done"] - state["first_pick"]) if state["first_pick"] and state["last_done"] else None
            run = {
                "workers": workers,
                "batch": batch,
                "successful": state["successful"],
                "left_in_queue": state["queued"],
                "seconds": round(window, 3) if window else None,
                "executions_per_s": round(state["successful"] / window) if window else None,
                "from_commit_s": round(state["last_done"] - committed_at, 3) if state["last_done"] else None,
                "from_commit_executions_per_s":
                    round(state["successful"] / (state["last_done"] - committed_at)) if state["last_done"] else None,
                **h.Meter.difference(before, after, jobs),
                "settled_s": settled,
                "enqueue_cpu_s": {role: figures["cpu_s"] for role, figures in
                                  h.Meter.difference(enqueued, before, jobs)["cpu"].items()},
                "sql": sql,
                "writes": writes,
                "load_average_before": load_before,
                "load_average_after": h.load_average(),
            }
            run.pop("etcd", None)
            if due is not None:
                run["due_at"] = datetime.fromtimestamp(due, timezone.utc).isoformat()
                run["enqueued_before_due_s"] = round(due - committed_at, 2)
                run.update(lateness([start for start, _ in starts], due))
                run["early_against_execute_after"] = sum(1 for start, after_ in starts if start < after_)
            else:
                run["started"] = len(starts)
            run["dropped"] = jobs - state["successful"]
            out["runs"].append(run)
    out["best"] = _best_pgqueuer(out["runs"], burst=due_in is not None)
    return out


def _best_pgqueuer(runs: list[dict], *, burst: bool) -> dict | None:
    """The best setting: the highest executions/s, or for a burst the lowest
    p99 lateness, among the runs that dropped nothing."""
    complete = [run for run in runs if run["dropped"] == 0]
    if burst:
        for run in complete:
            run["p99_s"] = (run.get("lateness_s") or {}).get("p99")
        found = best_of(complete, "p99_s", lowest=True)
    else:
        found = best_of(complete, "executions_per_s")
    if found is None:
        return None
    keep = ("workers", "batch", "executions_per_s", "from_commit_executions_per_s", "p99_s", "lateness_s", "cpu",
            "cpu_cores")
    return {**{k: found[k] for k in keep if k in found},
            "statements_per_execution": (found.get("sql") or {}).get("statements_per_execution"),
            "rows_written_per_execution": found["writes"]["rows_written_per_execution"]}


def _version(module: str) -> str:
    from importlib.metadata import version

    return version(module)


# ------------------------------------------------------------------ APScheduler

_APS_STARTS: list[float] = []


def aps_job() -> None:
    """The no-op APScheduler runs: it records when it started."""
    _APS_STARTS.append(time.time())


def _apscheduler(dsn: str, jobs: int, lead: float, timeout: float, threads: int) -> dict:
    """APScheduler 3 in this process: a BackgroundScheduler with the
    SQLAlchemy job store on ``dsn`` and a thread pool of ``threads``; ``jobs``
    one-off jobs (DateTrigger) due at one whole second, stored with the job
    store's own row format (pickled job state) in one transaction before the
    scheduler runs them, misfire grace unlimited (so late jobs still run)."""
    require("apscheduler")
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.job import Job
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.date import DateTrigger
    from apscheduler.util import datetime_to_utc_timestamp
    import pickle

    url = make_url(dsn).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    store = SQLAlchemyJobStore(url=url)
    scheduler = BackgroundScheduler(jobstores={"default": store},
                                    executors={"default": ThreadPoolExecutor(threads)}, timezone=timezone.utc)
    scheduler.start(paused=True)  # creates the job table
    try:
        due = datetime.fromtimestamp(math.ceil(time.time() + lead), timezone.utc)
        rows = []
        for i in range(jobs):
            job = Job(scheduler, id=f"burst-{i:06d}", func=aps_job, args=(), kwargs={}, name="burst",
                      trigger=DateTrigger(due), executor="default", misfire_grace_time=None, coalesce=False,
                      max_instances=1, next_run_time=due)
            rows.append({"id": job.id, "next_run_time": datetime_to_utc_timestamp(due),
                         "job_state": pickle.dumps(job.__getstate__(), store.pickle_protocol)})
        with store.engine.begin() as conn:
            conn.execute(store.jobs_t.delete())
            conn.execute(store.jobs_t.insert(), rows)
        stored_at = time.time()
        if due.timestamp() - stored_at < 1:
            raise SystemExit(f"storing {jobs} APScheduler jobs left {due.timestamp() - stored_at:.1f} s: raise its lead")
        scheduler.resume()
        deadline = due.timestamp() + timeout
        while len(_APS_STARTS) < jobs and time.time() < deadline:
            time.sleep(POLL)  # the scheduler's threads run the jobs; nothing to await
    finally:
        scheduler.shutdown(wait=True)
    with store.engine.begin() as conn:
        left = conn.execute(sa.select(sa.func.count()).select_from(store.jobs_t)).scalar()
    store.engine.dispose()
    return {
        "peer": f"APScheduler {_version('apscheduler')}", "job_store": "SQLAlchemyJobStore (PostgreSQL, psycopg)",
        "scheduler": "BackgroundScheduler", "threads": threads, "misfire_grace_time": None,
        "jobs": jobs, "due_at": due.isoformat(), "stored_before_due_s": round(due.timestamp() - stored_at, 2),
        **lateness(list(_APS_STARTS), due.timestamp()),
        "dropped": jobs - len(_APS_STARTS), "left_in_store": left,
    }


def run_apscheduler(url: str, jobs: int, folder: Path, *, lead: float = 10.0, timeout: float = 180.0,
                    threads: int = 10) -> dict:
    """:func:`_apscheduler` in a process of its own, in a database of its own
    on ``url``'s server; its report, with the load average around it."""
    require("apscheduler")
    with peer_database(url, "apscheduler") as dsn:
        load_before = h.load_average()
        log = folder / "apscheduler.log"
        with log.open("w") as err:
            done = subprocess.run(
                [sys.executable, str(HERE / "peers.py"), "apscheduler", "--jobs", str(jobs), "--lead", str(lead),
                 "--timeout", str(timeout), "--threads", str(threads)],
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True, timeout=lead + timeout + 120,
                env={**os.environ, "TICKWHEEL_PEER_DSN": dsn}, check=False,
            )
        if done.returncode != 0:
            raise RuntimeError(f"the APScheduler peer failed ({done.returncode}):\n{log.read_text()[-3000:]}")
        report = json.loads(done.stdout)
    report["p99_s"] = (report.get("lateness_s") or {}).get("p99")
    return {**report, "load_average_before": load_before, "load_average_after": h.load_average()}


# ------------------------------------------------------------------ the raw claim


async def _raw_claim(dsn: str, schema: str, batch: int, horizon_us: int, step_us: int, handler: str,
                     payload: bytes, created_at: int) -> dict:
    asyncpg = require("asyncpg")
    sql = raw_claim_sql(schema)
    # READ COMMITTED whatever the server's default (the throwaway one's is SERIALIZABLE).
    connection = await asyncpg.connect(dsn, server_settings={"default_transaction_isolation": "read committed"})
    claimed = batches = 0
    try:
        claim = await connection.prepare(sql.claim)
        insert = await connection.prepare(sql.insert)
        reschedule = await connection.prepare(sql.reschedule)
        phases = dict.fromkeys(("claim", "insert", "reschedule", "commit"), 0.0)
        began = time.perf_counter()
        while True:
            transaction = connection.transaction()
            await transaction.start()
            try:
                mark = time.perf_counter()
                rows = await claim.fetch(horizon_us, batch)
                phases["claim"] += time.perf_counter() - mark
                if rows:
                    ids = [row[0] for row in rows]
                    mark = time.perf_counter()
                    await insert.fetch(ids, [row[1] for row in rows], [row[2] for row in rows],
                                       [row[3] for row in rows], [row[4] for row in rows], handler, payload, created_at)
                    phases["insert"] += time.perf_counter() - mark
                    mark = time.perf_counter()
                    await reschedule.fetch(ids, step_us)
                    phases["reschedule"] += time.perf_counter() - mark
            except BaseException:
                await transaction.rollback()
                raise
            mark = time.perf_counter()
            await transaction.commit()
            phases["commit"] += time.perf_counter() - mark
            claimed += len(rows)
            batches += 1
            if len(rows) < batch:
                break
        elapsed = time.perf_counter() - began
    finally:
        await connection.close()
    return {"batch": batch, "occurrences": claimed, "batches": batches, "seconds": round(elapsed, 3),
            "occurrences_per_s": round(claimed / elapsed) if elapsed > 0 else None,
            "phases_s": {name: round(seconds, 3) for name, seconds in phases.items()}}


async def run_raw_claim(url: str, batch: int, *, horizon_us: int, step_us: int, handler: str, payload: bytes,
                        created_at: int, schema: str = RAW_SCHEMA) -> dict:
    """The raw claim over asyncpg, at READ COMMITTED (PostgreSQL's own
    default, what a plain queue runs at), ``batch`` jobs per transaction,
    until a batch comes back short, on the tables :func:`prepare_raw_tables`
    made: every job due by ``horizon_us`` claimed once, an execution row
    inserted for it and its cursor moved on by ``step_us``. ``phases_s``:
    the time inside each statement and the commits, summed."""
    require("asyncpg")
    return await _raw_claim(libpq_url(url), schema, batch, horizon_us, step_us, handler, payload, created_at)


def check_raw_drained(pg: psycopg.Connection, expected: int, rescheduled_to: int, schema: str = RAW_SCHEMA) -> None:
    """Every due job claimed exactly once: ``expected`` execution rows, and
    as many jobs with their cursor at ``rescheduled_to`` and run count 1."""
    raw_claim_sql(schema)
    executions, distinct = pg.execute(f"SELECT count(*), count(DISTINCT job_id) FROM {schema}.executions").fetchone()
    moved = pg.execute(f"SELECT count(*) FROM {schema}.jobs WHERE next_run_at = %s AND run_count = 1",
                       (rescheduled_to,)).fetchone()[0]
    if not executions == distinct == moved == expected:
        raise AssertionError(f"raw claim: expected {expected} executions and rescheduled jobs, "
                             f"found {executions} ({distinct} jobs), {moved}")


# ------------------------------------------------------------------ the peers' processes


# ------------------------------------------------------------------ the gRPC floor


async def _grpc_floor() -> None:
    """Serve SchedulerService on a free loopback port, CreateJob answering
    with the request's job (every other method UNIMPLEMENTED); print
    ``ready PORT`` and serve until killed."""
    import grpc.aio

    from tickwheel.v1 import scheduler_pb2_grpc

    class Echo(scheduler_pb2_grpc.SchedulerServiceServicer):
        async def CreateJob(self, request, context):  # noqa: N802 (the gRPC method's name)
            return request.job

    server = grpc.aio.server()
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"ready {port}", flush=True)
    await server.wait_for_termination()


@dataclass
class GrpcFloor:
    """The gRPC floor's process and the address it serves."""

    process: subprocess.Popen
    address: str

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)


def start_grpc_floor(folder: Path, timeout: float = READY_TIMEOUT) -> GrpcFloor:
    process = subprocess.Popen([sys.executable, str(HERE / "peers.py"), "grpc-floor"],
                               stdout=subprocess.PIPE, stderr=(folder / "grpc-floor.log").open("w"),
                               stdin=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + timeout
    line = ""
    while not line.startswith("ready "):
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"the gRPC floor did not start:\n{(folder / 'grpc-floor.log').read_text()[-3000:]}")
        line = process.stdout.readline()
    return GrpcFloor(process, f"127.0.0.1:{int(line.split()[1])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a peer's process (started by the benchmarks)")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("pgqueuer-worker")
    worker.add_argument("--batch", type=int, required=True)
    worker.add_argument("--out", required=True)
    aps = commands.add_parser("apscheduler")
    aps.add_argument("--jobs", type=int, required=True)
    aps.add_argument("--lead", type=float, required=True)
    aps.add_argument("--timeout", type=float, required=True)
    aps.add_argument("--threads", type=int, required=True)
    commands.add_parser("grpc-floor")
    args = parser.parse_args(argv)
    if args.command == "grpc-floor":
        asyncio.run(_grpc_floor())
        return 0
    dsn = os.environ["TICKWHEEL_PEER_DSN"]  # not a flag: ps would show it
    if args.command == "pgqueuer-worker":
        asyncio.run(_pgqueuer_worker(dsn, args.batch, Path(args.out)))
    else:
        json.dump(_apscheduler(dsn, args.jobs, args.lead, args.timeout, args.threads), sys.stdout)
    return 0


if __name__ == "__main__":
    # Run as the module ``peers``, not ``__main__``: APScheduler stores the
    # job function by its import path.
    sys.path.insert(0, str(HERE))
    import peers

    sys.exit(peers.main())
