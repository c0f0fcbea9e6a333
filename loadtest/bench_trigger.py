"""What a manual run costs in the store, on a throwaway PostgreSQL: TriggerJob's
store call from concurrent callers of one tenant, and the hand-out round that
starts those runs (a micro-benchmark of the store's calls, not of a server).

- ``trigger``: ``--calls`` triggers (``ManualStore.trigger``, one
  transaction each, distinct request ids) of ``--jobs`` jobs of tenant
  ``bench``, ``--concurrency`` at a time; per repetition its wall time, this
  process's CPU and PostgreSQL's, and the retries the store's transactions
  took (by SQLSTATE: ``40001`` serialization failures, ``40P01``
  deadlocks), summed over the repetitions.
- ``round``: one hand-out round (``HandoutStore.hand_out_ready``) starting
  every run the part above created (overlap ``allow``: all start).

Each part also reports what reached PostgreSQL in the last repetition
(``pg_stat_statements``: statements and rows written per call or per run
started, commits, rollbacks, the costliest shapes), when the server has it.

Run it once with ``PYTHONPATH`` on each tree to compare two versions of the
store, alternating: it uses nothing a tree without the manual-run quota
lacks (the tenant keeps its default quotas; ``--calls`` stays under the
default ``max_pending_manual_runs``).

Prints JSON: per part, the median over ``--repeat`` repetitions (PostgreSQL's
CPU a mean: counted in ticks), the retries summed over them, and the load
average.
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

from tickwheel.v1 import job_pb2  # noqa: E402

import loadtest._harness as harness  # noqa: E402
from tickwheel.shared.clock import SystemClock  # noqa: E402
from tickwheel_server.store import create_store_engine, migrate  # noqa: E402
from tickwheel_server.store.executions import Capability  # noqa: E402
from tickwheel_server.store.manual import ManualStore  # noqa: E402
from tickwheel_server.store.queue import ExecutionQueue  # noqa: E402
from tickwheel_server.store.tenants import Tenant, TenantStore  # noqa: E402


def _spec() -> bytes:
    job = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
                      overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW)
    return job.SerializeToString()


def _reset(engine, jobs: int) -> None:
    """The bench's jobs afresh, no executions (every run of the previous
    repetition started, so no quota unit is held)."""
    with engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE executions, attempts, jobs, job_cursors, tenant_gates")
        harness.insert_bench_jobs(conn, jobs, _spec())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pg", help="a PostgreSQL URL to use instead of a throwaway server")
    args = parser.parse_args()
    with harness.postgres(args.pg) as url:
        engine = create_store_engine(url)
        migrate(engine)
        # A real clock: a transaction retried after a conflict waits on it.
        clock = SystemClock()
        asyncio.run(TenantStore(engine, clock).create(Tenant(name="bench")))
        pg_pid = harness.postmaster_pid(url)
        manual = ManualStore(engine, clock)
        queue = ExecutionQueue(engine, clock)
        every = Capability(("bench",), ("echo",), True)
        statements = harness.Statements(url)
        triggers, rounds, trigger_use, round_use = [], [], [], []
        for repetition in range(args.repeat):
            _reset(engine, args.jobs)

            async def storm() -> int:
                gate = asyncio.Semaphore(args.concurrency)

                async def one(n: int) -> bool:
                    async with gate:
                        _, created = await manual.trigger("bench", f"job_{1 + n % args.jobs}", f"r{repetition}-{n}")
                        return created

                return sum(await asyncio.gather(*(one(n) for n in range(args.calls))))

            statements.reset()
            triggers.append(harness.measured(pg_pid, lambda: asyncio.run(storm())))
            trigger_use.append(statements.report(args.calls, top=6))
            assert triggers[-1]["rows"] == args.calls, triggers[-1]
            statements.reset()
            rounds.append(harness.measured(pg_pid, lambda: len(asyncio.run(
                queue.handout.hand_out_ready("s1", clock.now(), every, args.calls)))))
            round_use.append(statements.report(args.calls, top=8))
            assert rounds[-1]["rows"] == args.calls, rounds[-1]
        engine.dispose()
    trigger = harness.medians(triggers)
    trigger["per_call_ms"] = round(trigger["wall_ms"] / args.calls, 3)
    trigger["retries"] = dict(manual.retries)
    trigger["statements"] = trigger_use[-1]  # the last repetition's, per call
    round_ = harness.medians(rounds)
    round_["statements"] = round_use[-1]  # the last repetition's, per run started
    print(json.dumps({"calls": args.calls, "jobs": args.jobs, "concurrency": args.concurrency,
                      "repeat": args.repeat, "trigger": trigger, "round": round_,
                      "load_average": harness.load_average()}))


if __name__ == "__main__":
    main()
