"""Benchmark: what a worker's hello costs the store now that it marks the
running rows dealt to it under another session that it does not list
(store/unheld.py), by how many running rows its tenant has. Store level,
on PostgreSQL.

    .venv/bin/python loadtest/bench_hello.py [--running 1000,10000,50000] [--hellos 100] [--smoke]

Prints one JSON object. A throwaway PostgreSQL is started (``tests/support``)
and deleted afterwards. Per size, the tenant's ``--running`` rows are
running under a dead session, dealt to ``--hellos`` workers evenly, handed
out now. Then, as after a server's death, each of those workers says hello
once at another server listing nothing: each hello marks its share
(``marking``). Then as many hellos of workers with nothing dealt to them
(``nothing_to_mark``: a worker that restarts, the usual hello). Before this
change a hello listing nothing sent no statement at all; one listing what
it runs sends the re-attachment it always sent, plus this read. Figures:
PostgreSQL CPU (the postmaster's process tree), the caller's wall time and
the server process's CPU, per hello. ``--smoke`` runs tiny counts so CI
keeps the script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import sqlalchemy as sa

import _harness as h
from tickwheel.shared.clock import SystemClock
from tickwheel.shared.ids import to_us
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.requeue import RequeueStore

_INSERT = (
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, delivery, "
    "status, owner, worker_id, handed_out_at, handler, missed_count, reap_count, payload, error, dead_reason, "
    "created_at) "
    "SELECT 'job' || g || '\\:1', 'job' || g, 'acme', g % 256, 'scheduled', 1, 1, 1, 1, 1, 'running', 'dead', "
    "'w' || (g % CAST(:workers AS INTEGER)), CAST(:at AS BIGINT), 'echo', 0, 0, '', '', '', 0 "
    "FROM generate_series(1, CAST(:rows AS INTEGER)) AS g"
)


async def hellos(store: RequeueStore, workers: list[str], since_us: int, postmaster: int) -> dict:
    walls: list[float] = []
    cpu0, process0 = h.tree_cpu_s(postmaster), time.process_time()
    for worker in workers:
        started = time.perf_counter()
        await store.reattach("live", worker, [], tenants=("acme",), disown_since_us=since_us)
        walls.append(time.perf_counter() - started)
    cpu, process = h.tree_cpu_s(postmaster) - cpu0, time.process_time() - process0
    walls.sort()
    return {
        "hellos": len(workers),
        "postgres_cpu_ms_per_hello": round(cpu * 1000 / len(workers), 3),
        "server_cpu_ms_per_hello": round(process * 1000 / len(workers), 3),
        "wall_ms_per_hello": {"p50": round(statistics.median(walls) * 1000, 3),
                              "max": round(walls[-1] * 1000, 3)},
    }


def one(url: str, postmaster: int, rows: int, workers: int) -> dict:
    engine = create_store_engine(url)
    try:
        migrate(engine)
        h.reset_data(url)
        now_us = to_us(SystemClock().now())
        with engine.begin() as conn:
            conn.execute(sa.text(_INSERT), {"rows": rows, "workers": workers, "at": now_us})
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE executions")
        store = RequeueStore(engine, SystemClock())
        since = now_us - 30_000_000
        marking = asyncio.run(hellos(store, [f"w{k}" for k in range(workers)], since, postmaster))
        idle = asyncio.run(hellos(store, [f"idle{k}" for k in range(workers)], since, postmaster))
        with engine.connect() as conn:
            marked = conn.execute(sa.text(
                "SELECT count(*) FROM executions WHERE unheld_delivery = delivery")).scalar_one()
        return {"running": rows, "marked": marked, "marking": marking, "nothing_to_mark": idle}
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--running", default="1000,10000,50000")
    parser.add_argument("--hellos", type=int, default=100)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.running.split(",")]
    if args.smoke:
        sizes, args.hellos = [50], 5
    load_before = h.load_average()
    with h.postgres(None) as url:
        postmaster = h.postmaster_pid(url)
        runs = [one(url, postmaster, size, args.hellos) for size in sizes]
    print(json.dumps({"benchmark": "hello", "smoke": args.smoke, "runs": runs,
                      "machine": {"load_before": load_before, "load_after": h.load_average()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
