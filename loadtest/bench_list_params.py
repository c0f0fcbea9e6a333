"""What a list bound as one array parameter costs against an expanding
``IN``, on a throwaway PostgreSQL: a micro-benchmark of statement shapes,
not of a server.

- ``lock_keys``: the key rows of ``n`` (tenant, key) pairs locked
  (``isolation.lock_keys``, what every result of a keyed job does), out of
  ``--keys`` rows.
- ``disarm``: ``n`` executions armed by one session given back
  (``ArmStore.disarm``, by (id, delivery) pairs), put back armed between
  repetitions.
- ``prune``: retention's batch of ``n`` ended executions and their
  attempts deleted (``RetentionStore.prune_executions``), put back between
  repetitions.

For each part and each ``n`` of ``--sizes``: the median over ``--repeat``
repetitions of the transaction's wall time and this process's CPU, the
mean of PostgreSQL's (its process tree, in ticks). And ``texts``: how many
distinct statement texts the part sent over every ``n`` from 1 to
``--texts`` (with an expanding ``IN``, one per length: a prepared plan
each in psycopg, a plan-cache entry each on CockroachDB). Prints JSON. Run
it once with ``PYTHONPATH`` on each tree to compare two versions of the
store, alternating.
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
from sqlalchemy import event  # noqa: E402

import loadtest._harness as harness  # noqa: E402
from tickwheel.shared.clock import FakeClock  # noqa: E402
from tickwheel.shared.ids import from_us  # noqa: E402
from tickwheel_server.store import create_store_engine, migrate  # noqa: E402
from tickwheel_server.store.arming import ArmStore  # noqa: E402
from tickwheel_server.store.engine import capabilities  # noqa: E402
from tickwheel_server.store.isolation import lock_keys  # noqa: E402
from tickwheel_server.store.retention import RetentionStore  # noqa: E402
from tickwheel_server.store.tenants import Tenant, TenantStore  # noqa: E402

T0 = 1_800_000_000_000_000
_EXECUTIONS = (
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
    "delivery, status, owner, handler, missed_count, reap_count, payload, error, dead_reason, created_at, "
    "finished_at) "
    "SELECT 'job_' || g || ':1', 'job_' || g, 'bench', 0, 'scheduled', %(t)s + g, %(t)s + g, %(t)s + g, 1, "
    "%(delivery)s, %(status)s, %(owner)s, 'echo', 0, 0, '', '', '', 0, %(finished)s "
    "FROM generate_series(1, %(rows)s) AS g"
)
_ATTEMPTS = (
    "INSERT INTO attempts (execution_id, attempt, delivery, status, started_at, finished_at, lateness_us, "
    "worker_id, error, waited_us) "
    "SELECT 'job_' || g || ':1', 1, 1, 'failed', %(t)s + g, %(t)s + g, 0, 'w', 'e', 0 "
    "FROM generate_series(1, %(rows)s) AS g"
)


def _reset(engine: sa.Engine, rows: int, status: str, stale: bool = False) -> None:
    """The bench's executions afresh in ``status``, analyzed; ``stale``
    (an armed batch only): analyzed while they were ended, then armed, so
    the plans see none armed (as after a quiet spell)."""
    stale = stale and status == "armed"
    ended = status == "succeeded"
    with engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE executions, attempts, jobs, job_cursors, attempt_rollups")
        harness.insert_bench_jobs(conn, rows)
        conn.exec_driver_sql(_EXECUTIONS, {
            "t": T0, "rows": rows, "delivery": 1, "status": status, "owner": None if ended else "s1",
            "finished": T0 + rows if ended else None,
        })
        if ended:
            conn.exec_driver_sql(_ATTEMPTS, {"t": T0, "rows": rows})
        if stale:
            conn.exec_driver_sql("UPDATE executions SET status = 'succeeded'")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE executions")
    if stale:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE executions SET status = 'armed'")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--pg", help="a PostgreSQL URL to use instead of a throwaway server")
    parser.add_argument("--plan-cache-mode", choices=("auto", "force_generic_plan", "force_custom_plan"),
                        default="auto", help="the throwaway server's plan_cache_mode (bench_give_back.py says why)")
    parser.add_argument("--stale-stats", action="store_true",
                        help="the disarm's rows analyzed while ended, then armed (autovacuum off)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    rows = max(max(sizes), args.texts)
    out: dict = {"sizes": sizes, "repeat": args.repeat, "plan_cache_mode": args.plan_cache_mode,
                 "stale_stats": args.stale_stats, "lock_keys": {}, "disarm": {}, "prune": {}, "texts": {}}
    settings = {"plan_cache_mode": args.plan_cache_mode, **({"autovacuum": "off"} if args.stale_stats else {})}
    with harness.postgres(args.pg, settings) as url:
        engine = create_store_engine(url)
        migrate(engine)
        clock = FakeClock(from_us(T0 + rows + 10))
        asyncio.run(TenantStore(engine, clock).create(Tenant(name="bench", max_concurrency=0)))
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO concurrency_keys (tenant, name, max_running, running, limit_set_at) "
                "SELECT 'bench', 'key_' || g, 1, 0, 0 FROM generate_series(1, %(keys)s) AS g", {"keys": args.keys})
        pg_pid = harness.postmaster_pid(url)
        caps = capabilities(engine)
        arming = ArmStore(engine, clock)
        retention = RetentionStore(engine, clock)
        sent: list[str] = []
        event.listen(engine, "before_cursor_execute", lambda c, cur, statement, *rest: sent.append(statement))

        def lock(n: int) -> int:
            with engine.begin() as conn:
                return len(lock_keys(conn, caps, [("bench", f"key_{g}") for g in range(1, n + 1)]))

        def disarm(n: int) -> int:
            return len(asyncio.run(arming.disarm("s1", [(f"job_{g}:1", 1) for g in range(1, n + 1)])))

        def prune(n: int) -> int:
            return asyncio.run(retention.prune_executions(from_us(T0 + rows + 5), limit=n)).executions

        parts = {"lock_keys": (lock, None), "disarm": (disarm, "armed"), "prune": (prune, "succeeded")}
        for name, (work, status) in parts.items():
            for n in sizes:
                samples = []
                for _ in range(args.repeat):
                    if status:
                        _reset(engine, rows, status, args.stale_stats)
                    samples.append(harness.measured(pg_pid, lambda: work(n)))
                    assert samples[-1]["rows"] == n, (name, n, samples[-1])
                out[name][str(n)] = harness.medians(samples, 3)
            texts = set()
            for n in range(1, args.texts + 1):
                if status:
                    _reset(engine, rows, status)
                sent.clear()
                work(n)
                texts |= {s for s in sent if s.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE"))}
            out["texts"][name] = len(texts)
        engine.dispose()
    out["load_average"] = harness.load_average()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
