"""Benchmark: what the index of scheduled rows by ready instant costs the
writes that insert scheduled rows (a claim ahead, a retry, a requeue), before
and after migration 0030 put the tenant into it. Store level, on PostgreSQL.

    .venv/bin/python loadtest/bench_scheduled_index.py [--rows 200000] [--batch 1000] [--rounds 2] [--smoke]

Prints one JSON object. A throwaway PostgreSQL is started (``tests/support``)
and deleted afterwards. Each round, alternately, a database migrated up to
0028 (``executions_scheduled (ready_at, partition)``) and one migrated to the
end (``executions_scheduled_tenant (ready_at, tenant, partition)``) take
``--rows`` scheduled executions of 1 000 tenants (names of 12 characters)
at distinct instants, ``--batch`` a statement, one ``INSERT … SELECT FROM
generate_series`` each (as the claim's insert, one statement a batch): the
PostgreSQL CPU (the postmaster's process tree) and WAL per row, and the
index's size per row. ``--smoke`` runs tiny counts so CI keeps the script
working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import sys

import sqlalchemy as sa

import _harness as h
from tickwheel_server.store import create_store_engine, migrate

_INSERT = (
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, delivery, "
    "status, handler, missed_count, reap_count, payload, error, dead_reason, created_at) "
    "SELECT 'x' || g, 'job' || g, 'tenant-' || lpad((g % 1000)::text, 5, '0'), g % 256, 'scheduled', "
    "1000000000 + g, 1000000000 + g, 1000000000 + g, 1, 0, 'scheduled', 'echo', 1, 0, '', '', '', 0 "
    "FROM generate_series(CAST(:start AS BIGINT), CAST(:stop AS BIGINT)) AS g"
)


def one(url: str, postmaster: int, target: int | None, rows: int, batch: int) -> dict:
    engine = create_store_engine(url)
    try:
        migrate(engine, target=target)
        h.reset_data(url)
        with engine.connect() as conn:
            wal0 = conn.exec_driver_sql("SELECT pg_current_wal_insert_lsn()").scalar()
        cpu0 = h.tree_cpu_s(postmaster)
        for start in range(0, rows, batch):
            with engine.begin() as conn:
                conn.execute(sa.text(_INSERT), {"start": start, "stop": min(rows, start + batch) - 1})
        cpu = h.tree_cpu_s(postmaster) - cpu0
        with engine.connect() as conn:
            wal = conn.exec_driver_sql(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), CAST(%(w)s AS pg_lsn))", {"w": wal0}).scalar()
            sizes = dict(conn.exec_driver_sql(
                "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes "
                "WHERE relname = 'executions' AND indexrelname LIKE 'executions_scheduled%%'").all())
        return {"postgres_cpu_us_per_row": round(cpu * 1e6 / rows, 2), "wal_bytes_per_row": round(float(wal) / rows, 1),
                "index_bytes_per_row": {name: round(size / rows, 1) for name, size in sizes.items()}}
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows, args.batch, args.rounds = 200, 50, 1
    load_before = h.load_average()
    runs: list[dict] = []
    for _ in range(args.rounds):
        for label, target in (("before (0028)", 28), ("after (0030)", None)):
            with h.postgres(None) as url:
                runs.append({"schema": label, **one(url, h.postmaster_pid(url), target, args.rows, args.batch)})
    print(json.dumps({"benchmark": "scheduled_index", "smoke": args.smoke, "rows": args.rows, "batch": args.batch,
                      "runs": runs, "machine": {"load_before": load_before, "load_after": h.load_average()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
