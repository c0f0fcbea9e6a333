"""What one hand-out round sends PostgreSQL, counted from libpq's own trace,
with and without ready runs whose job was deleted (hardening, session 25:
a deleted job's run is canceled by the round instead of sent), on a
throwaway PostgreSQL: counts, not times.

Each repetition puts ``--live`` ready executions of as many jobs and
``--deleted`` ready executions whose job row is gone (what a give-back
racing a DeleteJob leaves) in tenant ``bench``, then runs one
``HandoutStore.hand_out_ready`` round (LATERAL, the PostgreSQL path; with
``--union`` the UNION ALL path CockroachDB gets) under the trace.

Prints JSON: per repetition the round trips and statements sent, the
statements' texts counted, and what the round handed out and what it left
canceled. Run it once with ``PYTHONPATH`` on each tree to compare two
versions of the store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tickwheel.v1 import job_pb2  # noqa: E402

import loadtest._harness as harness  # noqa: E402
from tests.support.libpq_trace import client_messages  # noqa: E402
from tickwheel.shared.clock import FakeClock  # noqa: E402
from tickwheel.shared.ids import from_us  # noqa: E402
from tickwheel_server.store import create_store_engine, migrate  # noqa: E402
from tickwheel_server.store.executions import Capability  # noqa: E402
from tickwheel_server.store.queue import ExecutionQueue  # noqa: E402
from tickwheel_server.store.tenants import Tenant, TenantStore  # noqa: E402

T0 = 1_800_000_000_000_000
_EXECUTIONS = (
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
    "delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at) "
    "SELECT 'job_' || g || ':1', 'job_' || g, 'bench', 0, 'scheduled', %(t)s + g, %(t)s + g, %(t)s + g, 1, "
    "0, 'scheduled', 'echo', 0, 0, '', '', '', 0 FROM generate_series(1, %(rows)s) AS g"
)


def _reset(engine, live: int, deleted: int) -> None:
    """``live + deleted`` ready executions, the last ``deleted`` of them with no job row."""
    job = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
                      overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW)
    with engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE executions, attempts, jobs, job_cursors, concurrency_keys, tenant_gates")
        harness.insert_bench_jobs(conn, live, job.SerializeToString())
        conn.exec_driver_sql(_EXECUTIONS, {"t": T0, "rows": live + deleted})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE executions")
        conn.exec_driver_sql("VACUUM ANALYZE jobs")


def _sent(messages: list[str]) -> tuple[int, int, list[str]]:
    """Round trips (each ends with a Sync or a simple Query), statements
    executed (an Execute or a simple Query each) and the texts parsed."""
    kinds = [message.split(None, 1)[0] for message in messages]
    trips = sum(kind in ("Sync", "Query") for kind in kinds)
    statements = sum(kind in ("Execute", "Query") for kind in kinds)
    texts = [message[len(kind) + 1:] for message, kind in zip(messages, kinds) if kind in ("Parse", "Query")]
    return trips, statements, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=200)
    parser.add_argument("--deleted", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--union", action="store_true", help="the UNION ALL take (CockroachDB's), not LATERAL")
    parser.add_argument("--pg", help="a PostgreSQL URL to use instead of a throwaway server")
    args = parser.parse_args()
    runs = []
    with harness.postgres(args.pg, {}) as url:
        # One pooled connection: what a round sends is on it (a statement psycopg has prepared is sent
        # without its text, so statements are counted by their Execute and texts by their first Parse).
        engine = create_store_engine(url, pool_size=1, max_overflow=0)
        migrate(engine)
        clock = FakeClock(from_us(T0 + args.live + args.deleted + 1))
        asyncio.run(TenantStore(engine, clock).create(Tenant(name="bench", max_concurrency=0)))
        every = Capability(("bench",), ("echo",), True)
        for _ in range(args.repeat):
            _reset(engine, args.live, args.deleted)
            queue = ExecutionQueue(engine, clock, lateral=not args.union)
            with client_messages(engine) as (messages, _):
                handed = asyncio.run(queue.handout.hand_out_ready("s1", clock.now(), every, args.live + args.deleted))
            trips, statements, texts = _sent(messages)
            with engine.connect() as conn:
                ended = dict(conn.exec_driver_sql(
                    "SELECT status, count(*) FROM executions WHERE status IN ('canceled', 'dead') GROUP BY status"
                ).all())
            runs.append({"round_trips": trips, "statements": statements, "handed": len(handed),
                         "without_definition": sum(h.definition is None for h in handed), "ended": ended,
                         "parsed": Counter(text[:100] for text in texts)})
        engine.dispose()
    print(json.dumps({"live": args.live, "deleted": args.deleted, "take": "union" if args.union else "lateral",
                      "load": harness.load_average(),
                      "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
