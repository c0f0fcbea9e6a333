"""Migration 0036 (peer text stored raw, escaped in place) on PostgreSQL,
and the read path's guard: prints JSON.

The store is migrated to 0035 and given ``--rows`` executions, each with
one attempt; ``--raw-every`` n-th holds raw control characters in its
error, dead reason and attempt's error (ESC, CR LF, U+202E, C1), the rest
a printable error or none. Then:

- ``migration``: migration 0036 applied, its statements counted by kind
  (SELECT, UPDATE: one per changed column a batch, each an executemany
  over the batch's rows), the rows it rewrote, its batches, its wall time
  and PostgreSQL's CPU; then the walk again (what a second migrating
  process would do), which must rewrite nothing. Left out (``null``) on
  a tree without migration 0036 (main).
- ``reads_per_page_of_100``: a job's ListExecutions page of 100 runs
  with their attempts (``HistoryStore.list_executions``), ``--reads``
  times each, before the migration and after: the client's CPU per read,
  for a job whose runs are all raw (job_000) and one whose none is
  (job_001). On the branch each error and reason read is checked with
  ``str.isprintable`` and escaped only when raw; run it with main's tree
  on PYTHONPATH for the A/B.

    python loadtest/bench_peer_text.py [--postgres URL] [--rows 200000] [--raw-every 100] [--reads 300]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import statistics
import time
from collections import Counter

from sqlalchemy import event

from _harness import load_average, postgres, postmaster_pid, tree_cpu_s

from tickwheel.shared.clock import SystemClock
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.tables import attempts, executions, jobs, tenants

RAW = "HTTP 500 \x1b]0;owned\x07\x1b[2J\r\nforged \u202etxt.exe\x85"
PRINTABLE = "HTTP 503: Service Unavailable; retry after 30 s"
JOBS = 100


def migration_module():
    try:
        return importlib.import_module("tickwheel_server.store.migrations.0036_escape_peer_text")
    except ImportError:
        return None


def fill(engine, rows: int, raw_every: int) -> None:
    """``rows`` dead executions of :data:`JOBS` jobs of tenant ``t``, one attempt each."""
    with engine.begin() as conn:
        conn.execute(tenants.insert(), [dict(
            name="t", weight=1, max_concurrency=0, max_jobs=10**6, max_payload_bytes=65536, requests_per_second=100,
            state="active", pause_reason="", created_at=0, updated_at=0, version=1, max_pending_manual_runs=100)])
        conn.execute(jobs.insert(), [dict(
            id=f"job_{n:03d}", tenant="t", partition=0, name="j", state="active", spec=b"", time_zone="UTC",
            tzdata_version="x", pause_reason="", paused_at=None, version=1, created_at=0, updated_at=0,
            quota_slot=0, calendar="") for n in range(JOBS)])  # fmt: skip
    done = 0
    while done < rows:
        chunk = range(done, min(rows, done + 5_000))
        runs, tries = [], []
        for n in chunk:
            error = RAW if n % raw_every == 0 else (PRINTABLE if n % 2 else "")
            at = 1_700_000_000_000_000 + n * 1_000_000
            runs.append(dict(
                id=f"exe_{n:09d}", job_id=f"job_{n % JOBS:03d}", tenant="t", partition=0, origin="scheduled",
                nominal_at=at, due_at=at, ready_at=at, attempt=1, delivery=1, status="dead", missed_count=0,
                reap_count=0, payload=b"", error=error, dead_reason=error and "failed permanently: " + error,
                created_at=at, finished_at=at + 1, allow_overlap=False))  # fmt: skip
            tries.append(dict(execution_id=f"exe_{n:09d}", attempt=1, delivery=1, status="failed", started_at=at,
                              finished_at=at + 1, lateness_us=0, worker_id="w1", error=error, waited_us=0))
        with engine.begin() as conn:
            conn.execute(executions.insert(), runs)
            conn.execute(attempts.insert(), tries)
        done = chunk.stop
    with engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE executions")
        conn.exec_driver_sql("ANALYZE attempts")


def counted(engine, pg_pid: int | None, work) -> dict:
    kinds: Counter = Counter()
    written = [0]

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        kind = statement.lstrip().split(None, 1)[0].upper()
        kinds[kind] += 1
        if kind == "UPDATE" and "schema_migrations_lock" not in statement:  # the peer text's, not the lock's
            written[0] += len(parameters) if executemany else 1

    event.listen(engine, "before_cursor_execute", capture)
    pg0 = tree_cpu_s(pg_pid) if pg_pid else 0.0
    t0, cpu0 = time.perf_counter(), time.process_time()
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    return {
        "statements": dict(sorted(kinds.items())), "rows_rewritten": written[0],
        "wall_s": round(time.perf_counter() - t0, 2), "client_cpu_s": round(time.process_time() - cpu0, 2),
        "postgres_cpu_s": round(tree_cpu_s(pg_pid) - pg0, 2) if pg_pid else None,
    }


def walk_again(engine, module) -> list[str]:
    from tickwheel_server.store.engine import capabilities

    caps, cursors, after = capabilities(engine), [], ""
    while after is not None:
        cursors.append(after)
        with engine.begin() as conn:
            after = module.backfill(conn, caps, after)
    return cursors


async def reads(engine, count: int) -> dict:
    """Client CPU per page of job_000's runs (every one stored raw until
    migrated) and job_001's (none), alternated."""
    history = HistoryStore(engine, SystemClock())
    cpus: dict[str, list[float]] = {"raw_job": [], "printable_job": []}

    async def page(job_id: str):
        found = await history.list_executions("t", job_id, limit=100)
        assert found.executions

    for job_id in ("job_000", "job_001"):
        await page(job_id)  # warm
    for _ in range(count):
        for label, job_id in (("raw_job", "job_000"), ("printable_job", "job_001")):
            cpu0 = time.process_time()
            await page(job_id)
            cpus[label].append(time.process_time() - cpu0)
    return {label: {"cpu_ms_p50": round(statistics.median(v) * 1e3, 3), "cpu_ms_mean": round(statistics.mean(v) * 1e3, 3)}
            for label, v in cpus.items()}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", default="")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--raw-every", type=int, default=100)
    parser.add_argument("--reads", type=int, default=300)
    args = parser.parse_args()
    module = migration_module()
    with postgres(args.postgres or None) as url:
        engine = create_store_engine(url)
        migrate(engine, target=35)
        fill(engine, args.rows, args.raw_every)
        pg_pid = postmaster_pid(url)
        before = await reads(engine, args.reads)
        migration = None
        if module is not None:
            migration = {"batch": module.BATCH, "first": counted(engine, pg_pid, lambda: migrate(engine))}
            cursors: list[str] = []
            migration["again"] = counted(engine, pg_pid, lambda: cursors.extend(walk_again(engine, module)))
            migration["batches"] = len(cursors)
        else:
            migrate(engine)
        result = {"bench": "peer_text", "rows": args.rows, "raw_every": args.raw_every, "migration": migration,
                  "reads_per_page_of_100": {"before_migration": before, "after": await reads(engine, args.reads)},
                  "reads": args.reads, "loadavg": load_average()}
        engine.dispose()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
