"""Benchmark: the dispatcher's claim on PostgreSQL, beside the raw-SQL claim
of the same jobs in the same run.

    .venv/bin/python loadtest/bench_dispatch.py [--pg URL] [--jobs N] [--latency-sizes 100000,1000000]
                                                [--due 10000] [--runs 3] [--rounds 3] [--no-peer] [--smoke]

Prints one JSON object. Without ``--pg`` a throwaway PostgreSQL is started
with the test suite's functions (``tests/support/postgres.py``: initdb in RAM,
fsync off, SERIALIZABLE by default) and deleted afterwards; ``--pg URL`` uses
that (empty) database instead and migrates it. Every job is a
``tickwheel.v1.Job`` built as the API builds it (``normalise_job``): a
``* * * * *`` cron in UTC, exact jitter (due = nominal), a handler target;
one tenant; 256 partitions, all owned by the benchmark at epoch 1. Jobs are
inserted directly (COPY), then ``VACUUM ANALYZE``.

- ``throughput``: ``--jobs`` jobs, all due at ``T``; ``claim_due(owned, T,
  lookahead=59 s, batch=--batch)`` is called until a batch comes back short
  (one occurrence per job: the next, ``T + 60 s``, is past the horizon).
  ``store.occurrences_per_s`` = executions created (each job's cursor
  advanced in the same transaction) per wall-clock second, with the store's
  cache of parsed definitions filled before timing (a server claiming its
  recurring jobs again); ``store_cold_cache`` is the
  same with an empty cache (every definition parsed: a server that just
  started). ``sql_s`` is the time inside the driver's execute calls (client,
  network and server), ``python_s`` the rest (planning, row building,
  SQLAlchemy); ``pg_cpu_ms_per_occurrence``, PostgreSQL's CPU (the
  postmaster's process tree, when it runs on this machine) and
  ``wal_bytes_per_occurrence``, the cluster's WAL, both over the claims
  and per execution created. Beside it, the peer: ``raw``, the plain claim any
  application would write, over asyncpg (the ``bench`` extra: ``bash
  scripts/install.sh --bench``), on a plain table pair in the schema
  ``peer_raw`` of the same database, in the shape of Tickwheel's ``jobs``
  and ``executions`` (their columns and indexes, the dispatcher's index
  swapped for ``(next_run_at)``), ``jobs`` holding a copy of the same rows:
  per transaction ``SELECT … WHERE next_run_at <= horizon ORDER BY
  next_run_at LIMIT n FOR UPDATE SKIP LOCKED``, one ``INSERT … SELECT FROM
  unnest`` of an execution row per claimed job, one ``UPDATE`` moving each
  claimed job's ``next_run_at`` on a minute (``peers.raw_claim_sql``), at
  READ COMMITTED, once per batch size of ``peers.RAW_BATCHES``; ``raw`` is
  the best. ``ratio`` = store / raw (goal >= 0.4). ``--no-peer`` leaves it
  out (``raw``, ``ratio`` null). And where the store's own time goes:
  ``replay``, the store's transactions issued directly on one psycopg
  connection with every value precomputed before timing (no planning, no
  SQLAlchemy), one transaction per batch: the epoch check ``FOR SHARE``, the
  claim's exact SELECT (captured from the store's first batch, with its
  parameters: ``… LIMIT n FOR UPDATE SKIP LOCKED``), then the store's own
  ``INSERT … SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING`` and
  ``UPDATE … FROM unnest(arrays)`` (captured too, binary parameters);
  ``replay_executemany`` writes the same rows with psycopg's pipelined
  executemany of single-row INSERTs and UPDATEs (what SQLAlchemy sends for
  an executemany, and what the store does on SQLite), for what the array
  statements buy. ``ratio_to_replay`` = store / replay. The data is
  reloaded before every run; ``--rounds`` repeats them all (in reverse
  order every other round) and the best of each is reported.
- ``latency``: for each size in ``--latency-sizes``, that many jobs stored, of
  which ``--due`` are due at ``T`` and the rest are daily crons due within the
  next 24 h (not due); the time of one ``claim_due(…, batch=--due)`` that
  claims all the due ones, median of ``--runs`` runs after one that warms the
  engine and the cache of parsed definitions (the due jobs reset and
  ``VACUUM ANALYZE`` between runs), and ``ratio_largest_smallest``.
- ``jit`` in ``throughput`` and in ``latency``: what PostgreSQL spent
  compiling statements with JIT over that part (``_harness.Statements.jit``:
  by statement, and per occurrence claimed by the store's runs and the
  replays; the raw peer's statements are the peer's own and listed too),
  when the server has ``pg_stat_statements`` loaded (the throwaway one does).
- ``explain``: the plan of the claim's SELECT (captured from a real
  ``claim_due``), on the largest latency data set (few due) and on the
  throughput data set (all due): whether it scans ``jobs_due``.

``--smoke`` runs tiny sizes in a few seconds, so CI keeps the script working;
its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from tickwheel.v1 import job_pb2

from tickwheel_server.api.validate import normalise_job
from tickwheel.shared.clock import SystemClock
from tickwheel.shared.ids import partition_of, to_us
from tickwheel_server.schedule import pin_tzdata, tzdata_version
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store import pipeline as store_pipeline
from tickwheel_server.jobspec import DefinitionCache
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.partitions import raise_epochs_in

import _harness as h
import peers

ROOT = Path(__file__).resolve().parents[1]
GOAL_RATIO = 0.4
"""The store's claim at least 0.4 × the raw claim's, in the same run (issue 17)."""

UTC = timezone.utc
T = datetime(2027, 1, 4, 0, 0, tzinfo=UTC)
T_US = to_us(T)
MINUTE_US = 60_000_000
LOOKAHEAD = timedelta(seconds=59)  # one occurrence per due job: the next (T + 60 s) is past the horizon
PARTITIONS = 256
TENANT = "bench"
CLAIM_IDLE_TIMEOUT = 10.0  # the server's sessions' idle limit, its default session TTL (a connect option)
HANDLER = "echo"
PAYLOAD = b'{"bench": true}'
EXECUTION_ID_SUFFIX = ":2027-01-04T00:00:00Z"
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

JOB_COLUMNS = (
    "id", "tenant", "partition", "name", "state", "spec", "time_zone", "next_run_at", "next_due_at", "run_count",
    "tzdata_version", "pause_reason", "paused_at", "version", "created_at", "updated_at",
)
"""What :func:`job_rows` yields: a job with its cursor, as one row (the raw peer's shape)."""
CURSOR_ONLY = ("next_run_at", "next_due_at", "run_count")
CURSOR_COLUMNS = ("job_id", "tenant", "partition", "state", "version", "next_run_at", "next_due_at", "run_count")
"""``job_cursors``' columns COPY fills (migration 0032), taken from a :data:`JOB_COLUMNS` row."""
EXECUTION_COLUMNS = (
    "id", "job_id", "tenant", "partition", "origin", "nominal_at", "due_at", "ready_at", "attempt", "delivery",
    "status", "owner", "worker_id", "handler", "missed_count", "reap_count", "payload", "error", "dead_reason",
    "created_at", "finished_at",
)
CHECK_EPOCHS_SQL = "SELECT partition, epoch FROM partitions WHERE partition = ANY(%s) ORDER BY partition FOR SHARE"
UPDATE_SQL = (
    "UPDATE job_cursors SET next_run_at=%s, next_due_at=%s, run_count=%s, state=%s WHERE job_cursors.job_id = %s"
)


# ------------------------------------------------------------------ the data


def job_id(rng: random.Random) -> str:
    """``job_`` + a ULID for ``T`` with seeded random bits (reproducible, same shape as ``new_job_id``)."""
    value = ((T_US // 1000) << 80) | rng.getrandbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "job_" + "".join(reversed(chars))


def job_spec(expression: str) -> job_pb2.Job:
    """A job as the API stores it: validated, defaults filled in (``normalise_job``)."""
    job = job_pb2.Job(name="bench", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=HANDLER)), payload=PAYLOAD)
    job.schedule.cron.expression = expression
    job.schedule.cron.time_zone = "UTC"
    job.jitter.exact = True
    return normalise_job(job, T - timedelta(minutes=1))


def job_rows(seed: int, due: int, not_due: int = 0):
    """``due`` minutely jobs due at ``T``, then ``not_due`` daily jobs due in
    the next 24 h (minute boundaries from ``T + 1 min``), as COPY rows."""
    rng = random.Random(seed)
    minutely = job_spec("* * * * *")
    daily: dict[int, job_pb2.Job] = {}
    version = tzdata_version()
    for i in range(due + not_due):
        ident = job_id(rng)
        if i < due:
            spec, at = minutely, T_US
        else:
            minute = rng.randrange(1, 1440)
            spec = daily.get(minute)
            if spec is None:
                spec = daily[minute] = job_spec(f"{minute % 60} {minute // 60} * * *")
            at = T_US + minute * MINUTE_US
        name = f"bench-{i:08d}"
        spec.name = name
        yield (
            ident, TENANT, partition_of(ident, PARTITIONS), name, "active", spec.SerializeToString(), "UTC",
            at, at, 0, version, "", None, 1, T_US, T_US,
        )


def conninfo(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def prepare_schema(url: str) -> None:
    engine = create_store_engine(url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            conn.execute(sa.text("TRUNCATE jobs, job_cursors, executions, skips, partitions"))
            conn.execute(sa.text("DELETE FROM tenants WHERE name = :n"), {"n": TENANT})
            conn.execute(
                sa.text(
                    "INSERT INTO tenants (name, weight, max_concurrency, max_jobs, max_payload_bytes, "
                    "requests_per_second, state, pause_reason, created_at, updated_at, version) "
                    "VALUES (:n, 1, 0, 100000000, 65536, 1000, 'active', '', :t, :t, 1)"
                ),
                {"n": TENANT, "t": T_US},
            )
            raise_epochs_in(conn, {p: 1 for p in range(PARTITIONS)}, "bench", T_US)
    finally:
        engine.dispose()


def load(pg: psycopg.Connection, rows) -> int:
    """Empty jobs/executions/skips, COPY ``rows`` into jobs and their
    cursors into job_cursors, VACUUM ANALYZE."""
    pg.execute("TRUNCATE jobs, job_cursors, executions, skips")
    count = 0
    on_job = [i for i, name in enumerate(JOB_COLUMNS) if name not in CURSOR_ONLY]
    on_cursor = [JOB_COLUMNS.index("id" if name == "job_id" else name) for name in CURSOR_COLUMNS]
    cursors = []
    with pg.cursor().copy(f"COPY jobs ({', '.join(JOB_COLUMNS[i] for i in on_job)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([row[i] for i in on_job])
            cursors.append([row[i] for i in on_cursor])
            count += 1
    with pg.cursor().copy(f"COPY job_cursors ({', '.join(CURSOR_COLUMNS)}) FROM STDIN") as copy:
        for row in cursors:
            copy.write_row(row)
    vacuum(pg)
    return count


def vacuum(pg: psycopg.Connection) -> None:
    pg.execute("VACUUM ANALYZE jobs")
    pg.execute("VACUUM ANALYZE job_cursors")
    pg.execute("VACUUM ANALYZE executions")


def check_drained(pg: psycopg.Connection, expected: int) -> None:
    executions = pg.execute("SELECT count(*) FROM executions").fetchone()[0]
    advanced = pg.execute(
        "SELECT count(*) FROM job_cursors WHERE next_run_at = %s AND run_count = 1", (T_US + MINUTE_US,)
    ).fetchone()[0]
    derived = pg.execute(
        "SELECT count(*) FROM executions WHERE id = job_id || %s AND nominal_at = %s", (EXECUTION_ID_SUFFIX, T_US)
    ).fetchone()[0]
    if not executions == advanced == derived == expected:
        raise AssertionError(
            f"expected {expected} executions (derived ids) and advanced jobs, found {executions} ({derived}), {advanced}"
        )


# ------------------------------------------------------------------ capture


class Capture:
    """Statements the store sends, with their parameters, and the time spent
    inside the driver's execute calls: through SQLAlchemy (its cursor
    events) and in round trips of several (``store.pipeline.send``: each
    statement counted, the trip's time as the driver's)."""

    def __init__(self, engine: sa.engine.Engine) -> None:
        self.engine = engine
        self.claim: tuple[str, dict] | None = None
        self.writes: dict[str, str] = {}
        self.statements = 0
        self.round_trips = 0
        """Each statement sent alone, each pipeline's Sync, each COMMIT sent alone (psycopg's
        one-off prepare of a statement it runs often left out)."""
        self.sql_s = 0.0
        self._started: list[float] = []

    def __enter__(self) -> Capture:
        event.listen(self.engine, "before_cursor_execute", self._before)
        event.listen(self.engine, "after_cursor_execute", self._after)
        event.listen(self.engine, "commit", self._commit)
        self._send = store_pipeline.send
        store_pipeline.send = self._pipelined
        return self

    def __exit__(self, *exc) -> None:
        event.remove(self.engine, "before_cursor_execute", self._before)
        event.remove(self.engine, "after_cursor_execute", self._after)
        event.remove(self.engine, "commit", self._commit)
        store_pipeline.send = self._send

    def _commit(self, conn) -> None:
        # A COMMIT is sent only for a transaction still open (one whose pipeline carried it is not).
        if conn.connection.dbapi_connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self.round_trips += 1

    def _seen(self, statement: str, parameters) -> None:
        if self.claim is None and "FROM job_cursors" in statement and "FOR UPDATE" in statement:
            self.claim = (statement, dict(parameters))
        if statement.startswith("INSERT INTO executions"):
            self.writes["insert"] = statement
        elif statement.startswith("UPDATE job_cursors"):
            self.writes["update"] = statement
        self.statements += 1

    def _pipelined(self, conn, statements, **options):
        self.round_trips += 1
        for statement, parameters in statements:
            self._seen(statement, parameters)
        started = time.perf_counter()
        try:
            return self._send(conn, statements, **options)
        finally:
            self.sql_s += time.perf_counter() - started

    def _before(self, conn, cursor, statement, parameters, context, executemany) -> None:
        dbapi = conn.connection.dbapi_connection
        idle = dbapi.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        self.round_trips += 2 if idle and not dbapi.autocommit else 1  # psycopg's BEGIN: a trip of its own
        self._seen(statement, parameters)
        self._started.append(time.perf_counter())

    def _after(self, conn, cursor, statement, parameters, context, executemany) -> None:
        self.sql_s += time.perf_counter() - self._started.pop()


def explain(url: str, statement: str, parameters: dict) -> dict:
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            plan = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters).scalar()
            text = [r[0] for r in conn.exec_driver_sql("EXPLAIN (COSTS OFF) " + statement, parameters)]
            conn.rollback()
    finally:
        engine.dispose()
    nodes: list[tuple[str, str | None, str | None]] = []

    def walk(node: dict) -> None:
        nodes.append((node["Node Type"], node.get("Index Name"), node.get("Relation Name")))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return {
        # jobs_due is job_cursors_due since migration 0032 (the key's name kept).
        "uses_jobs_due": any(name == "job_cursors_due" and kind in ("Index Scan", "Bitmap Index Scan",
                                                                     "Index Only Scan") for kind, name, _ in nodes),
        "limit": any(kind == "Limit" for kind, _, _ in nodes),
        "seq_scan_on_jobs": any(kind == "Seq Scan" and relation in ("jobs", "job_cursors")
                                for kind, _, relation in nodes),
        "sort": any(kind == "Sort" for kind, _, _ in nodes),
        "plan": text,
    }


# ------------------------------------------------------------------ throughput


@contextmanager
def gc_frozen():
    """Bench data out of the collector's way (a server does not hold it)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def fill(specs: DefinitionCache, seed: int, jobs: int) -> None:
    """The cache a server has once it claimed these jobs before: every
    definition parsed (before timing)."""
    for row in job_rows(seed, jobs):
        specs.get(row[0], row[JOB_COLUMNS.index("version")], row[JOB_COLUMNS.index("spec")])


async def run_store(url: str, owned: dict[int, int], batch: int, specs: DefinitionCache) -> tuple[dict, Capture]:
    """Claim until a batch comes back short, with ``specs`` as the store's
    cache of parsed definitions (empty: cold; filled by an earlier claim of
    the same jobs: warm)."""
    engine = create_store_engine(url, idle_in_transaction_timeout=CLAIM_IDLE_TIMEOUT)
    store = DispatchStore(engine, SystemClock(), definitions=specs)
    claimed = batches = 0
    misses = specs.misses
    postmaster = h.postmaster_pid(url)
    try:
        with psycopg.connect(conninfo(url), autocommit=True) as watch:
            wal_at = watch.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            cpu_at = h.tree_cpu_s(postmaster) if postmaster else 0.0
            with Capture(engine) as capture, gc_frozen():
                began = time.perf_counter()
                while True:
                    result = await store.claim_due(owned, T, lookahead=LOOKAHEAD, batch=batch)
                    claimed += len(result.executions)
                    batches += 1
                    if result.stale_partitions:
                        raise AssertionError(f"stale partitions {sorted(result.stale_partitions)}")
                    if not result.full:
                        break
                elapsed = time.perf_counter() - began
            # PostgreSQL's CPU (the postmaster's tree: backends, autovacuum,
            # checkpointer) and the cluster's WAL during the claims.
            pg_cpu = h.tree_cpu_s(postmaster) - cpu_at if postmaster else None
            wal = int(watch.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (wal_at,)).fetchone()[0])
    finally:
        engine.dispose()
    assert capture.claim is not None and {"insert", "update"} <= set(capture.writes)
    return {
        "occurrences": claimed,
        "batches": batches,
        "seconds": round(elapsed, 3),
        "occurrences_per_s": round(claimed / elapsed),
        "sql_s": round(capture.sql_s, 3),
        "python_s": round(elapsed - capture.sql_s, 3),
        "statements_per_batch": round(capture.statements / batches, 1),
        "round_trips_per_batch": round(capture.round_trips / batches, 2),
        "definitions_parsed": specs.misses - misses,
        "pg_cpu_ms_per_occurrence": None if pg_cpu is None else round(pg_cpu * 1000 / max(claimed, 1), 4),
        "wal_bytes_per_occurrence": round(wal / max(claimed, 1), 1),
    }, capture


def precompute(seed: int, jobs: int) -> dict[str, dict[str, tuple]]:
    """What the store writes for each job, computed before timing: the
    array statements' columns (``insert``, ``update``) and the full rows of
    the per-row shapes (``insert_row``, ``update_row``)."""
    pre: dict[str, dict[str, tuple]] = {"insert": {}, "update": {}, "insert_row": {}, "update_row": {}}
    after = T_US + MINUTE_US
    for row in job_rows(seed, jobs):
        ident, partition = row[0], row[2]
        execution = ident + EXECUTION_ID_SUFFIX
        pre["insert"][ident] = (execution, ident, TENANT, partition, T_US, T_US, HANDLER, 1, PAYLOAD)
        pre["update"][ident] = (ident, after, after, 1, "active")
        pre["insert_row"][ident] = (
            execution, ident, TENANT, partition, "scheduled", T_US, T_US, T_US, 1, 0, "scheduled",
            None, None, HANDLER, 1, 0, PAYLOAD, "", "", T_US, None,
        )
        pre["update_row"][ident] = (after, after, 1, "active", ident)
    return pre


# The array statements' parameters, in the order of ``precompute``'s tuples.
INSERT_ARRAYS = ("ids", "job_ids", "tenants", "partitions", "nominal_ats", "due_ats", "handlers", "missed_counts",
                 "payloads")
UPDATE_ARRAYS = ("ids", "next_run_ats", "next_due_ats", "run_counts", "states")
# One single-row statement per row, pipelined by psycopg's executemany: what
# SQLAlchemy sends for an executemany (the SQLite path's shapes).
INSERT_ROW_SQL = (
    f"INSERT INTO executions ({', '.join(EXECUTION_COLUMNS)}) VALUES ({', '.join(['%s'] * len(EXECUTION_COLUMNS))}) "
    "ON CONFLICT (id) DO NOTHING"
)


def run_replay(url: str, owned: dict[int, int], batch: int, capture: Capture, pre: dict[str, dict[str, tuple]],
                shapes: str) -> dict:
    """The claim's transactions on one psycopg connection, values precomputed:
    ``shapes`` = "arrays" (the store's own INSERT and UPDATE over arrays, as
    it sent them, one of each per batch) or "executemany" (pipelined
    single-row INSERTs and UPDATEs)."""
    statement, parameters = capture.claim
    partitions = sorted(owned)
    claimed = batches = 0
    with psycopg.connect(conninfo(url)) as pg:
        pg.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        cur = pg.cursor()
        with gc_frozen():
            began = time.perf_counter()
            while True:
                cur.execute(CHECK_EPOCHS_SQL, (partitions,))
                cur.fetchall()
                cur.execute(statement, parameters)
                rows = cur.fetchall()
                if rows:
                    if shapes == "arrays":
                        inserts = zip(*[pre["insert"][row[0]] for row in rows])
                        cur.execute(capture.writes["insert"],
                                    {"created_at": T_US, **{n: list(c) for n, c in zip(INSERT_ARRAYS, inserts)}})
                        updates = zip(*[pre["update"][row[0]] for row in rows])
                        cur.execute(capture.writes["update"], {n: list(c) for n, c in zip(UPDATE_ARRAYS, updates)})
                    else:
                        cur.executemany(INSERT_ROW_SQL, [pre["insert_row"][row[0]] for row in rows])
                        cur.executemany(UPDATE_SQL, [pre["update_row"][row[0]] for row in rows])
                pg.commit()
                claimed += len(rows)
                batches += 1
                if len(rows) < batch:
                    break
            elapsed = time.perf_counter() - began
    return {
        "occurrences": claimed,
        "batches": batches,
        "seconds": round(elapsed, 3),
        "occurrences_per_s": round(claimed / elapsed),
    }


async def run_raw(url: str, pg: psycopg.Connection, jobs: int, batch: int) -> dict:
    """The raw claim (``peers.run_raw_claim``) of the jobs just loaded, on
    a copy of them in ``peer_raw``, checked drained."""
    peers.prepare_raw_tables(pg)
    figures = await peers.run_raw_claim(url, batch, horizon_us=T_US + int(LOOKAHEAD.total_seconds() * 1e6),
                                  step_us=MINUTE_US, handler=HANDLER, payload=PAYLOAD, created_at=T_US)
    peers.check_raw_drained(pg, jobs, T_US + MINUTE_US)
    pg.execute(f"DROP SCHEMA {peers.RAW_SCHEMA} CASCADE")
    return figures


async def throughput(url: str, jobs: int, batch: int, rounds: int, seed: int, peer: bool) -> tuple[dict, dict]:
    owned = {p: 1 for p in range(PARTITIONS)}
    runs: dict[str, list[dict]] = {"store_cold_cache": [], "store": [], "replay": [], "replay_executemany": []}
    if peer:
        runs.update({f"raw_{size}": [] for size in peers.RAW_BATCHES})
    pre = precompute(seed, jobs)
    explain_all_due = None
    capture: Capture | None = None
    with psycopg.connect(conninfo(url), autocommit=True) as pg:
        for round_ in range(rounds):
            # Every other round in reverse, so no variant always runs first
            # (the store's first run captures the statements the replays send).
            order = list(runs) if round_ % 2 == 0 else list(reversed(runs))
            if capture is None:
                order.sort(key=lambda name: name.startswith("replay"))
            for name in order:
                load(pg, job_rows(seed, jobs))
                if name.startswith("raw_"):
                    runs[name].append(await run_raw(url, pg, jobs, int(name.removeprefix("raw_"))))
                    continue
                if name.startswith("store"):
                    specs = DefinitionCache()
                    if name == "store":
                        fill(specs, seed, jobs)
                    figures, capture = await run_store(url, owned, batch, specs)
                else:
                    shapes = "arrays" if name == "replay" else "executemany"
                    figures = run_replay(url, owned, batch, capture, pre, shapes)
                check_drained(pg, jobs)
                runs[name].append(figures)
            if explain_all_due is None:
                load(pg, job_rows(seed, jobs))
                explain_all_due = explain(url, *capture.claim)
    best = {name: max(found, key=lambda r: r["occurrences_per_s"]) for name, found in runs.items()}
    raw = peers.best_of([best[name] for name in best if name.startswith("raw_")], "occurrences_per_s")

    def per_s(figures: dict | None) -> float | None:
        return figures["occurrences_per_s"] if figures else None

    return {
        "jobs": jobs,
        "batch": batch,
        "occurrences_per_job": 1,
        "occurrences_per_s": {"tickwheel": per_s(best["store"]), "raw_best": per_s(raw)},
        "ratio": peers.ratio(per_s(best["store"]), per_s(raw)),
        "ratio_cold_cache": peers.ratio(per_s(best["store_cold_cache"]), per_s(raw)),
        "goal_ratio": GOAL_RATIO,
        **{name: figures for name, figures in best.items() if not name.startswith("raw_")},
        "raw": raw,
        "raw_by_batch": {name.removeprefix("raw_"): figures for name, figures in best.items()
                         if name.startswith("raw_")} or None,
        "ratio_to_replay": peers.ratio(per_s(best["store"]), per_s(best["replay"])),
        "ratio_executemany_to_replay": peers.ratio(per_s(best["replay_executemany"]), per_s(best["replay"])),
        "runs_per_s": {name: [r["occurrences_per_s"] for r in found] for name, found in runs.items()},
    }, explain_all_due


# ------------------------------------------------------------------ latency


def reset_due(pg: psycopg.Connection, due_ids: list[str]) -> None:
    """Make the claimed jobs due again, as before the claim; VACUUM so no run
    pays for the dead index entries of the previous one."""
    pg.execute("TRUNCATE executions")
    pg.execute(
        "UPDATE job_cursors SET next_run_at = %s, next_due_at = %s, run_count = 0 WHERE job_id = ANY(%s)",
        (T_US, T_US, due_ids),
    )
    vacuum(pg)


async def latency(url: str, sizes: list[int], due: int, runs: int, seed: int) -> tuple[dict, dict | None]:
    owned = {p: 1 for p in range(PARTITIONS)}
    out: dict = {"due": due, "runs": runs, "sizes": {}}
    plan = None
    with psycopg.connect(conninfo(url), autocommit=True) as pg:
        for size in sizes:
            began = time.perf_counter()
            load(pg, job_rows(seed, due, size - due))
            load_s = time.perf_counter() - began
            due_ids = [r[0] for r in pg.execute("SELECT job_id FROM job_cursors WHERE next_run_at = %s", (T_US,))]
            timings, sql = [], []
            claim = None
            engine = create_store_engine(url, idle_in_transaction_timeout=CLAIM_IDLE_TIMEOUT)
            store = DispatchStore(engine, SystemClock())
            try:
                for run in range(runs + 1):  # run 0 warms the engine (connection, compiled statements)
                    if run:
                        reset_due(pg, due_ids)
                    with Capture(engine) as capture, gc_frozen():
                        started = time.perf_counter()
                        result = await store.claim_due(owned, T, lookahead=LOOKAHEAD, batch=due)
                        timings.append(time.perf_counter() - started)
                    sql.append(capture.sql_s)
                    if len(result.executions) != due or result.full is not True:
                        raise AssertionError(f"claimed {len(result.executions)} of {due}")
                    claim = claim or capture.claim
            finally:
                engine.dispose()
            out["sizes"][str(size)] = {
                "median_ms": round(statistics.median(timings[1:]) * 1000, 1),
                "runs_ms": [round(t * 1000, 1) for t in timings[1:]],
                "sql_ms": [round(t * 1000, 1) for t in sql[1:]],
                "first_ms": round(timings[0] * 1000, 1),
                "load_s": round(load_s, 1),
            }
            if size == max(sizes):
                reset_due(pg, due_ids)
                plan = explain(url, *claim)
        pg.execute("TRUNCATE jobs, job_cursors, executions, skips")
    smallest, largest = out["sizes"][str(min(sizes))], out["sizes"][str(max(sizes))]
    out["ratio_largest_smallest"] = round(largest["median_ms"] / smallest["median_ms"], 3)
    out["goal_ratio"] = 1.5
    return out, plan


# ------------------------------------------------------------------ server


@contextmanager
def postgres(url: str | None):
    """``url`` as is, or a throwaway server started with the test suite's functions."""
    if url:
        yield url, None
        return
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.support import postgres as pgsupport

    bindir = pgsupport.find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed: " + pgsupport.INSTALL_HINT)
    # The test settings (fsync off, SERIALIZABLE default), with room for a million jobs in memory.
    # pg_stat_statements: what each part compiled with JIT (``jit``).
    pgsupport.SERVER_SETTINGS.update({"shared_buffers": "512MB", "max_wal_size": "4GB", "work_mem": "16MB",
                                      "shared_preload_libraries": "pg_stat_statements"})
    server = pgsupport.PostgresServer(bindir)
    undo = pgsupport._finalize_on_sigterm()
    try:
        server.start()
        server.setup_template()
        yield server.url(server.create_database()), server
    finally:
        server.close()
        undo()


def server_info(url: str) -> dict:
    with psycopg.connect(conninfo(url)) as pg:
        return {name: pg.execute(f"SHOW {name}").fetchone()[0] for name in (
            "server_version", "shared_buffers", "work_mem", "fsync", "synchronous_commit",
            "default_transaction_isolation",
        )}


async def run(args: argparse.Namespace, url: str, throwaway: bool) -> dict:
    prepare_schema(url)
    load_before = [round(x, 2) for x in os.getloadavg()]
    began = time.perf_counter()
    statements = h.Statements(url)
    statements.reset()
    tp, explain_all_due = await throughput(url, args.jobs, args.batch, args.rounds, args.seed, not args.no_peer)
    # Per occurrence that the store's runs and their replays claimed.
    tp["jit"] = statements.jit(args.jobs * args.rounds * 4)
    statements.reset()
    lat, explain_few_due = await latency(url, args.latency_sizes, args.due, args.runs, args.seed + 1)
    lat["jit"] = statements.jit(args.due * (args.runs + 1) * len(args.latency_sizes))
    return {
        "benchmark": "dispatch",
        "smoke": args.smoke,
        "partitions_owned": PARTITIONS,
        "lookahead_s": LOOKAHEAD.total_seconds(),
        "throughput": tp,
        "latency": lat,
        "explain": {"few_due": explain_few_due, "all_due": explain_all_due},
        "server": {**server_info(url), "throwaway": throwaway},
        "machine": {"cpus": os.cpu_count(), "load_average_before": load_before,
                    "load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "total_s": round(time.perf_counter() - began, 1),
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", help="an empty PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--jobs", type=int, default=100_000, help="due jobs for the throughput run (default 100 000)")
    parser.add_argument("--batch", type=int, default=1000, help="claim batch for the throughput run (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="store/replay/raw runs, alternated (default 3)")
    parser.add_argument(
        "--latency-sizes", default="100000,1000000", help="jobs stored for the latency runs (default 100000,1000000)"
    )
    parser.add_argument("--due", type=int, default=10_000, help="due jobs in the latency runs (default 10 000)")
    parser.add_argument("--runs", type=int, default=3, help="latency runs per size (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-peer", action="store_true", help="leave the raw claim out (no bench extra needed)")
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.rounds, args.latency_sizes, args.due, args.runs = 2000, 1, "2000,20000", 1000, 2
    args.latency_sizes = sorted({int(s) for s in str(args.latency_sizes).split(",") if s.strip()})
    if not args.no_peer:  # before anything runs: a missing extra is said at once
        peers.require("asyncpg")
    if not args.latency_sizes or min(args.latency_sizes) < args.due:
        parser.error("--latency-sizes must each be at least --due")
    pin_tzdata()
    with postgres(args.pg) as (url, server):
        if args.pg:
            url = str(make_url(url).set(drivername="postgresql+psycopg").render_as_string(hide_password=False))
        report = asyncio.run(run(args, url, server is not None))
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
