"""Benchmark: what the running state's two per-server and per-worker
indexes cost the writes, and what their readers would pay on another
path. Store level, on PostgreSQL; the index sets are the benchmark's own.

    .venv/bin/python loadtest/bench_running_paths.py [--running 10000,100000] [--servers 4]
        [--workers 200] [--tenants 20] [--history 200000] [--cycles 20] [--batch 1000]
        [--rounds 1] [--smoke]

Prints one JSON object. A throwaway PostgreSQL is started (``tests/support``)
and deleted afterwards. For each ``--running`` size and each index set, the
database migrated to the end holds that many running executions, stamped
round robin with ``--servers`` sessions (16 hex digits, as the etcd lease
names them) and dealt to ``--workers`` workers of ``--tenants`` tenants,
beside ``--history`` ended executions of older jobs (their ids sort
first). The index sets:

- ``before``: the set before migration 0040: ``executions_owner (owner)``
  and ``executions_running_worker (tenant, worker_id)``, both ``WHERE
  status = 'running'`` (beside ``executions_busy`` and the primary key),
  read with that store's statements (the texts below);
- ``migrated``: as migrated (0040): one ``executions_running (owner,
  tenant, worker_id) WHERE status = 'running'``, read with the store's own
  statements, captured as it sends them (the hello's read, a capped
  tenant's running count, a tenant's running executions in a search) or
  built as it builds them (ClusterStatus' running counts): the readers by
  tenant or worker walk the sessions first, a probe each, then each
  session's range (:func:`tickwheel_server.store.session_walk.running_rows`).

Writes: ``--cycles`` times, the claim's shape (``--batch`` rows inserted
running, one statement) and the outcome's (the ``--batch`` oldest running
rows ended ``succeeded``, owner and worker cleared, by id in one statement),
so the running rows stay at the size; per execution the buffer blocks and
WAL records and bytes ``EXPLAIN (ANALYZE, BUFFERS, WAL)`` counts for the
two statements, and the running indexes' bytes grown. Reads: each reader's
statement (the texts below, written after the store's own) under ``EXPLAIN
(ANALYZE, BUFFERS)``: its blocks, rows and the indexes its plan reads.
``--smoke`` runs tiny counts so CI keeps the script working; its figures
mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import sqlalchemy as sa
from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import from_us

import _harness as h
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.base import one_of
from tickwheel_server.store.engine import capabilities
from tickwheel_server.store.handout_tenants import rooms_under_caps
from tickwheel_server.store.operations import OperationsStore
from tickwheel_server.store.session_walk import running_rows
from tickwheel_server.store.tables import executions
from tickwheel_server.store.timeline import not_ahead
from tickwheel_server.store.unheld import disown

_ID = "'job_01JEX' || lpad(CAST(g AS TEXT), 16, '0') || 'ABCDEFGH'"
"""A job id as ``job_`` + a ULID's 26 characters; the execution's id adds its instant."""

_INSERT_RUNNING = (
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, delivery, "
    "status, owner, worker_id, handed_out_at, handler, missed_count, reap_count, payload, error, dead_reason, "
    "created_at, allow_overlap) "
    f"SELECT {_ID} || ':2026-12-07T15:00:00Z', {_ID}, "
    "'tenant-' || lpad(CAST((g %% %(workers)s) %% %(tenants)s AS TEXT), 5, '0'), CAST(g %% 256 AS INTEGER), "
    "'scheduled', 1000000000 + g, 1000000000 + g, 1000000000 + g, 1, 1, 'running', "
    "(CAST(%(owners)s AS TEXT[]))[1 + CAST(g %% %(servers)s AS INTEGER)], "
    "'worker-' || lpad(CAST(g %% %(workers)s AS TEXT), 6, '0'), 1000000000 + g, 'echo', 0, 0, '', '', '', 0, false "
    "FROM generate_series(CAST(%(start)s AS BIGINT), CAST(%(stop)s AS BIGINT)) AS g"
)
_HISTORY = (  # ended executions of jobs made before the running ones: their ids sort first
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, delivery, "
    "status, handler, missed_count, reap_count, payload, error, dead_reason, created_at, finished_at, allow_overlap) "
    "SELECT 'job_01JAA' || lpad(CAST(g AS TEXT), 16, '0') || 'ABCDEFGH:2026-12-06T15:00:00Z', "
    "'job_01JAA' || lpad(CAST(g AS TEXT), 16, '0') || 'ABCDEFGH', "
    "'tenant-' || lpad(CAST(g %% %(tenants)s AS TEXT), 5, '0'), CAST(g %% 256 AS INTEGER), 'scheduled', "
    "900000000 + g, 900000000 + g, 900000000 + g, 1, 1, 'succeeded', 'echo', 0, 0, '', '', '', 0, 900000001 + g, false "
    "FROM generate_series(1, CAST(%(history)s AS BIGINT)) AS g"
)
_END = (  # the plain success's update, by id (store/plain_successes.py)
    "UPDATE executions SET status = 'succeeded', finished_at = 2000000000, owner = NULL, worker_id = NULL, "
    "handed_out_at = NULL, attempt_started_at = handed_out_at, attempt_worker_id = worker_id "
    "WHERE id = ANY (CAST(%(ids)s AS TEXT[]))"
)

# The next session with running rows after ``o.owner``: a walk of (sessions)
# probes, not of every running row.
_SKIP_OWNERS = (
    "WITH RECURSIVE o (owner) AS ("
    "(SELECT e.owner FROM executions AS e WHERE e.status = 'running' AND e.owner IS NOT NULL "
    "ORDER BY e.owner LIMIT 1) "
    "UNION ALL SELECT (SELECT e.owner FROM executions AS e WHERE e.status = 'running' AND e.owner > o.owner "
    "ORDER BY e.owner LIMIT 1) FROM o WHERE o.owner IS NOT NULL) "
)

READERS: dict[str, dict[str, str]] = {
    # gateway/liveness.py's safety net, every 5 s on every server: a page of its own session's rows.
    "own_session_page": {
        "main": "SELECT id, delivery, handed_out_at, worker_id FROM executions WHERE owner = %(owner)s "
                "AND status = 'running' AND id > '' ORDER BY id LIMIT 1000",
    },
    # The reaper's sessions of running rows as it read them before store/session_walk.py: every running row.
    "running_owners_grouped": {
        "main": "SELECT owner FROM executions WHERE status = 'running' AND owner IS NOT NULL "
                "GROUP BY owner LIMIT 1000",
    },
    # The same answer walked, a probe a session (session_walk.py sends each probe as a statement of its own).
    "running_owners_walked": {
        "main": _SKIP_OWNERS + "SELECT owner FROM o WHERE owner IS NOT NULL LIMIT 1000",
    },
    # The reaper's pick of a dead session's rows (requeue.py reap_owner).
    "reap_pick": {
        "main": "SELECT id, delivery FROM executions WHERE owner = %(owner)s AND status = 'running' "
                "LIMIT 1000 FOR UPDATE SKIP LOCKED",
    },
    # A worker's hello (unheld.py mark_unheld): its rows, whoever stamped them.
    "hello_worker_rows": {
        "main": "SELECT id, delivery, owner, handed_out_at, tenant, handler FROM executions "
                "WHERE tenant = ANY (CAST(%(tenants)s AS TEXT[])) AND status = 'running' AND worker_id = %(worker)s "
                "LIMIT 20000",
    },
    # A tenant's running executions in a search (timeline.py), before 0040: its range of the worker index, sorted.
    "tenant_running_page": {
        "main": "SELECT id, nominal_at FROM executions WHERE tenant = %(tenant)s AND status = 'running' "
                "ORDER BY nominal_at DESC, id DESC LIMIT 51",
    },
    # ClusterStatus' queues (operations.py): the top tenants' running counts, those started ahead left out.
    "cluster_status_count": {
        "main": "SELECT tenant, count(*) FROM executions WHERE status = 'running' "
                "AND tenant = ANY (CAST(%(tenants)s AS TEXT[])) AND (handed_out_at IS NULL "
                "OR handed_out_at <= %(now)s) GROUP BY tenant",
    },
    # A capped tenant's hand-out round (handout_tenants.py rooms_under_caps): the capped tenants' running counts.
    "tenants_running_count": {
        "main": "SELECT tenant, count(*) FROM executions WHERE status = 'running' "
                "AND tenant = ANY (CAST(%(tenants)s AS TEXT[])) GROUP BY tenant",
    },
}

_BEFORE = ["CREATE INDEX IF NOT EXISTS executions_owner ON executions (owner) WHERE status = 'running'",
           "CREATE INDEX IF NOT EXISTS executions_running_worker ON executions (tenant, worker_id) "
           "WHERE status = 'running'",
           "DROP INDEX IF EXISTS executions_running"]
INDEX_SETS: dict[str, list[str]] = {"before": _BEFORE, "migrated": []}
RUNNING_INDEXES = ("executions_owner", "executions_running_worker", "executions_running", "executions_busy",
                   "executions_pkey")


_NOW_US = 2_000_000_000
"""The readers' clock: after every running row's hand-out instant (none started ahead)."""


def _store_statements(engine, params: dict) -> dict[str, tuple[str, dict]]:
    """The store's own statements of the readers by tenant or worker, as
    it sends them (captured while it runs them, in a transaction rolled
    back) or builds them: reader name -> (text, parameters)."""
    caps = capabilities(engine)
    seen: list[tuple[str, dict]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if not executemany:  # the gate rows' upsert is the one sent many
            seen.append((statement, dict(parameters)))

    capped = [type("Capped", (), {"name": name, "max_concurrency": 10**9}) for name in params["tenants"]]
    sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        with engine.connect() as conn:
            # since far ahead: the read runs, nothing is marked (its instant set back below)
            disown(conn, caps, "nobody", params["worker"], [], tenants=params["tenants"], since_us=2**62)
            rooms_under_caps(conn, caps, capped)
            conn.rollback()
        clock = FakeClock(from_us(_NOW_US))
        asyncio.run(OperationsStore(engine, clock).search_executions(tenant=params["tenant"], statuses=["running"],
                                                                     limit=50))
    finally:
        sa.event.remove(engine, "before_cursor_execute", capture)
    walked = [(sql, values) for sql, values in seen if "running_sessions" in sql]
    [hello] = [(sql, {**values, "handed_out_at_1": 0}) for sql, values in walked if "worker_id =" in sql]
    [capped_count] = [sent for sent in walked if "count(*)" in sent[0]]
    [page] = [sent for sent in walked if "sort_nominal_at" in sent[0]]
    held = running_rows(caps, [executions.c.tenant], one_of(caps, executions.c.tenant, params["tenants"]),
                        not_ahead(_NOW_US))  # operations.py queues' count, built as it builds it
    compiled = sa.select(held.c.tenant, sa.func.count()).group_by(held.c.tenant).compile(engine)
    return {"hello_worker_rows": hello, "tenants_running_count": capped_count, "tenant_running_page": page,
            "cluster_status_count": (str(compiled), dict(compiled.params))}


def _explain(conn, sql: str, params: dict, *, wal: bool) -> dict:
    """One statement run under EXPLAIN ANALYZE: its blocks, WAL, rows and the indexes it read."""
    options = "ANALYZE, BUFFERS, WAL, FORMAT JSON" if wal else "ANALYZE, BUFFERS, FORMAT JSON"
    plan = conn.exec_driver_sql(f"EXPLAIN ({options}) {sql}", params).scalar()[0]["Plan"]
    names: set[str] = set()
    seq: set[str] = set()
    read = 0  # rows the scans of executions returned or filtered out, over all their loops
    stack = [plan]
    while stack:
        node = stack.pop()
        if "Index Name" in node:
            names.add(node["Index Name"])
        if node.get("Node Type") == "Seq Scan":
            seq.add(node.get("Relation Name", "?"))
        if node.get("Relation Name") == "executions":
            read += (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
                     + node.get("Rows Removed by Index Recheck", 0)) * node.get("Actual Loops", 1)
        stack.extend(node.get("Plans", []))
    return {"blocks": plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0),
            "wal_records": plan.get("WAL Records", 0), "wal_bytes": plan.get("WAL Bytes", 0),
            "rows": plan.get("Actual Rows", 0), "executions_rows_read": read, "indexes": sorted(names),
            "seq_scans": sorted(seq)}


def _index_sizes(conn) -> dict[str, int]:
    return dict(conn.exec_driver_sql(
        "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes WHERE relname = 'executions'"
    ).all())


def one(url: str, index_set: str, running: int, args) -> dict:
    """One size under one index set, on an emptied database."""
    h.reset_data(url)
    engine = create_store_engine(url)
    owners = [f"{0x7a3f00e1c0b00000 + i:016x}" for i in range(args.servers)]
    shape = {"owners": owners, "servers": args.servers, "workers": args.workers, "tenants": args.tenants}
    try:
        with engine.begin() as conn:
            for ddl in INDEX_SETS[index_set]:
                conn.exec_driver_sql(ddl)
            if args.history:
                conn.exec_driver_sql(_HISTORY, {"tenants": args.tenants, "history": args.history})
            conn.exec_driver_sql(_INSERT_RUNNING, {**shape, "start": 0, "stop": running - 1})
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE executions")
        writes = {"blocks": 0, "wal_records": 0, "wal_bytes": 0}
        with engine.connect() as conn:
            sizes0 = _index_sizes(conn)
        oldest = 0
        for cycle in range(args.cycles):
            start = running + cycle * args.batch
            with engine.begin() as conn:
                inserted = _explain(conn, _INSERT_RUNNING, {**shape, "start": start, "stop": start + args.batch - 1},
                                    wal=True)
                ids = [row[0] for row in conn.exec_driver_sql(
                    f"SELECT {_ID} || ':2026-12-07T15:00:00Z' FROM generate_series("
                    "CAST(%(a)s AS BIGINT), CAST(%(b)s AS BIGINT)) AS g", {"a": oldest, "b": oldest + args.batch - 1})]
                ended = _explain(conn, _END, {"ids": ids}, wal=True)
            oldest += args.batch
            for measured in (inserted, ended):
                for key in writes:
                    writes[key] += measured[key]
        executions = args.cycles * args.batch
        with engine.connect() as conn:
            grown = {name: round((size - sizes0.get(name, 0)) / executions, 1)
                     for name, size in _index_sizes(conn).items() if name in RUNNING_INDEXES}
            reads = {}
            params = {"owner": owners[0], "tenants": [f"tenant-{t:05d}" for t in range(min(5, args.tenants))],
                      "worker": f"worker-{1:06d}", "tenant": "tenant-00001", "now": _NOW_US}  # of tenant-00001
            sent = _store_statements(engine, params) if index_set == "migrated" else {}
            for name, texts in READERS.items():
                sql, values = sent.get(name, (texts["main"], params))
                try:
                    reads[name] = _explain(conn, sql, values, wal=False)
                finally:
                    conn.rollback()  # the reaper's pick locks its rows
        return {"index_set": index_set, "running": running,
                "writes_per_execution": {key: round(value / executions, 2) for key, value in writes.items()},
                "index_bytes_grown_per_execution": grown, "reads": reads}
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--running", default="10000,100000", help="running executions held, comma-separated sizes")
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--history", type=int, default=200_000, help="ended executions beside the running ones")
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.running.split(",")]
    if args.smoke:
        sizes, args.cycles, args.batch, args.rounds, args.workers, args.history = [300], 2, 50, 1, 20, 1000
    load_before = h.load_average()
    runs: list[dict] = []
    with h.postgres(None) as url:
        engine = create_store_engine(url)
        try:
            migrate(engine)
        finally:
            engine.dispose()
        for _ in range(args.rounds):
            for running in sizes:
                for index_set in INDEX_SETS:
                    runs.append(one(url, index_set, running, args))
                    with sa.create_engine(url).begin() as conn:  # the migrated indexes back for the next set
                        conn.exec_driver_sql("DROP INDEX IF EXISTS executions_owner")
                        conn.exec_driver_sql("DROP INDEX IF EXISTS executions_running_worker")
                        conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS executions_running ON executions "
                                             "(owner, tenant, worker_id) WHERE status = 'running'")
    print(json.dumps({"benchmark": "running_paths", "smoke": args.smoke, "servers": args.servers,
                      "workers": args.workers, "tenants": args.tenants, "history": args.history, "cycles": args.cycles, "batch": args.batch,
                      "runs": runs, "machine": {"load_before": load_before, "load_after": h.load_average()}},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
