"""What a give-back of unsent hand-outs and a hand-out round's per-candidate
writes cost in the store, on a throwaway PostgreSQL: a micro-benchmark of
two statements' shapes, not of a server.

- ``give_back``: ``--rows`` executions ``running`` under one session are
  given back in one transaction (``unsend.release_unsent``), the rows put
  back as they were between repetitions.
- ``round``: ``--rows`` executions of as many jobs, each naming one
  concurrency key of limit ``--rows / 2``, are taken by one hand-out round
  (``HandoutStore.hand_out_ready``): half start and hold a slot, half wait
  for the key (the writes of ``handout_starts.settle``).
- ``reap``: ``--rows`` executions ``running`` under a session that ended
  are requeued by the reaper's one call (``RequeueStore.reap_owner``).

``--plan-cache-mode force_generic_plan`` plans every prepared statement
generic, as a server's statements are once they have run a few times
(psycopg prepares a statement on its fifth run, PostgreSQL then keeps a
generic plan if it looks no dearer than the custom ones); ``--stale-stats``
analyzes the rows while they are ended, so the plans see none running or
ready.

Prints JSON: per part, the median over ``--repeat`` repetitions of the
transaction's wall time and this process's CPU, the mean of PostgreSQL's
(its process tree, counted in ticks), and the load average. Run it once with ``PYTHONPATH`` on each tree
to compare two versions of the store, alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from tickwheel.v1 import job_pb2  # noqa: E402

import loadtest._harness as harness  # noqa: E402
from tickwheel.shared.clock import FakeClock  # noqa: E402
from tickwheel.shared.ids import from_us  # noqa: E402
from tickwheel_server.store import create_store_engine, migrate  # noqa: E402
from tickwheel_server.store.engine import capabilities  # noqa: E402
from tickwheel_server.store.executions import Capability  # noqa: E402
from tickwheel_server.store.queue import ExecutionQueue  # noqa: E402
from tickwheel_server.store.unsend import release_unsent  # noqa: E402
from tickwheel_server.store.tenants import Tenant, TenantStore  # noqa: E402

T0 = 1_800_000_000_000_000
_EXECUTIONS = (
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
    "delivery, status, owner, handed_out_at, handler, missed_count, reap_count, payload, error, dead_reason, "
    "created_at) "
    "SELECT 'job_' || g || ':1', 'job_' || g, 'bench', 0, 'scheduled', %(t)s + g, %(t)s + g, %(t)s + g, 1, "
    "%(delivery)s, %(status)s, %(owner)s, %(at)s, 'echo', 0, 0, '', '', '', 0 FROM generate_series(1, %(rows)s) AS g"
)


def _spec(rows: int) -> bytes:
    job = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
                      overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW)
    job.concurrency_keys.add(key="db", limit=max(1, rows // 2))
    return job.SerializeToString()


def _reset(engine: sa.Engine, rows: int, running: bool, stale: bool = False) -> None:
    """The bench's rows afresh (``running`` under ``s1``, else
    ``scheduled``), analyzed; ``stale``: analyzed while they were still
    ended (``succeeded``), then put in their status: statistics that see
    none of them running or ready, as after a quiet spell."""
    status = "running" if running else "scheduled"
    with engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE executions, attempts, jobs, job_cursors, concurrency_keys, tenant_gates")
        harness.insert_bench_jobs(conn, rows, _spec(rows))
        conn.exec_driver_sql(_EXECUTIONS, {
            "t": T0, "rows": rows, "delivery": 1 if running else 0, "status": "succeeded" if stale else status,
            "owner": "s1" if running else None, "at": T0 if running else None,
        })
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE executions")
        conn.exec_driver_sql("VACUUM ANALYZE jobs")
    if stale:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE executions SET status = %(status)s", {"status": status})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--pg", help="a PostgreSQL URL to use instead of a throwaway server")
    parser.add_argument("--plan-cache-mode", choices=("auto", "force_generic_plan", "force_custom_plan"),
                        default="auto", help="the throwaway server's plan_cache_mode: force_generic_plan plans "
                        "each prepared statement as a long-running server's cache keeps it")
    parser.add_argument("--stale-stats", action="store_true",
                        help="the rows analyzed while ended, then running or ready (autovacuum off)")
    args = parser.parse_args()
    settings = {"plan_cache_mode": args.plan_cache_mode, **({"autovacuum": "off"} if args.stale_stats else {})}
    with harness.postgres(args.pg, settings) as url:
        engine = create_store_engine(url)
        migrate(engine)
        clock = FakeClock(from_us(T0 + args.rows + 1))
        asyncio.run(TenantStore(engine, clock).create(Tenant(name="bench", max_concurrency=0)))
        pg_pid = harness.postmaster_pid(url)
        caps = capabilities(engine)
        handed = [(f"job_{g}:1", 1) for g in range(1, args.rows + 1)]
        give_back, rounds, reaps = [], [], []
        queue = ExecutionQueue(engine, clock)
        every = Capability(("bench",), ("echo",), True)
        for _ in range(args.repeat):
            _reset(engine, args.rows, running=True, stale=args.stale_stats)

            def release() -> int:
                with engine.begin() as conn:
                    release_unsent(conn, caps, handed, now_us=0, owner="s1")
                return len(handed)

            give_back.append(harness.measured(pg_pid, release))
            with engine.connect() as conn:
                back = conn.exec_driver_sql("SELECT count(*) FROM executions WHERE status = 'scheduled'").scalar()
            assert back == args.rows, f"{back} of {args.rows} given back"
            _reset(engine, args.rows, running=False, stale=args.stale_stats)

            def round_() -> int:
                return len(asyncio.run(queue.handout.hand_out_ready("s1", clock.now(), every, args.rows)))

            rounds.append(harness.measured(pg_pid, round_))
            _reset(engine, args.rows, running=True, stale=args.stale_stats)

            def reap() -> int:
                return len(asyncio.run(queue.requeues.reap_owner("s1", "session expired", limit=args.rows)).requeued)

            reaps.append(harness.measured(pg_pid, reap))
        engine.dispose()
    print(json.dumps({"rows": args.rows, "repeat": args.repeat, "plan_cache_mode": args.plan_cache_mode,
                      "stale_stats": args.stale_stats, "give_back": harness.medians(give_back),
                      "round": harness.medians(rounds), "reap": harness.medians(reaps),
                      "load_average": harness.load_average()}))


if __name__ == "__main__":
    main()
