"""What the transactions that hold the rows of a server's runs send
PostgreSQL, on an engine built with the idle limit the server's config
gives it (hardening, session 26: the server's sessions' idle limit bounded
by the session TTL), counted from libpq's own trace, on a throwaway
PostgreSQL: counts, not times.

Each repetition puts ``--rows`` ready executions in tenant ``bench``
(``bench_handout_statements._reset``), then, each under the trace, on one
pooled connection: a hand-out round (``hand_out_ready``, which locks and
takes them), a result batch for half of them (``record_results``,
successes: the read ``FOR UPDATE`` and the writes), and the requeue of the
rest as a dead session's (``reap_owner``, ``SKIP LOCKED``). With
``--unheld N``, N of the rest are first marked not held by their worker and
given back by the reaper's ``release_unheld`` (under the trace too); with
``--deleted N``, the jobs of N of the rest are deleted before, so the reap
(or the give-back) ends their runs canceled. Each of those steps also
reports its statements per run it ended (``per_run``): issue 17's "no
per-row round trips" holds when that falls as the batch grows.

The limit is what each tree's ``app.py`` gives the server's engine from a
default ``ServerConfig``: ``store_idle_limit`` where the config has it, else
``store_idle_in_transaction_timeout``. Prints JSON: that limit as the
session reports it (``SHOW``) and per transaction its round trips and
statements. Run it once with ``PYTHONPATH`` on each tree to compare.
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

from tickwheel.v1 import worker_pb2  # noqa: E402

import loadtest._harness as harness  # noqa: E402
from loadtest.bench_handout_statements import T0, _reset, _sent  # noqa: E402
from tests.support.libpq_trace import client_messages  # noqa: E402
from tickwheel.shared.clock import FakeClock  # noqa: E402
from tickwheel.shared.ids import from_us  # noqa: E402
from tickwheel_server.config import ServerConfig  # noqa: E402
from tickwheel_server.store import create_store_engine, migrate  # noqa: E402
from tickwheel_server.store.executions import Capability, ResultIn  # noqa: E402
from tickwheel_server.store.queue import ExecutionQueue  # noqa: E402
from tickwheel_server.store.tenants import Tenant, TenantStore  # noqa: E402


def server_idle_limit(config: ServerConfig) -> float:
    """The idle limit the tree's server gives its engine (see the module docstring)."""
    return getattr(config, "store_idle_limit", config.store_idle_in_transaction_timeout)


def _mark_rest(engine, owner: str, unheld: int, deleted: int) -> None:
    """Of ``owner``'s running rows in id order: the first ``unheld`` marked
    not held by their worker (as a hello that did not list them marks them),
    the jobs of the last ``deleted`` deleted (as DeleteJob leaves a running run)."""
    with engine.begin() as conn:
        if unheld:
            conn.exec_driver_sql(
                "UPDATE executions SET unheld_delivery = delivery, worker_id = COALESCE(worker_id, 'w1') "
                "WHERE id IN (SELECT id FROM executions WHERE owner = %(o)s AND status = 'running' "
                "ORDER BY id LIMIT %(n)s)", {"o": owner, "n": unheld})
        if deleted:
            conn.exec_driver_sql(
                "DELETE FROM jobs WHERE id IN (SELECT job_id FROM executions WHERE owner = %(o)s "
                "AND status = 'running' ORDER BY id DESC LIMIT %(n)s)", {"o": owner, "n": deleted})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--unheld", type=int, default=0, help="running rows given back by release_unheld first")
    parser.add_argument("--deleted", type=int, default=0, help="running rows whose job is deleted before the reap")
    parser.add_argument("--pg", help="a PostgreSQL URL to use instead of a throwaway server")
    args = parser.parse_args()
    config = ServerConfig(store="postgresql://unused", etcd="memory", admin_token="t" * 16)
    runs = []
    with harness.postgres(args.pg, {}) as url:
        migrating = create_store_engine(url)
        migrate(migrating)
        migrating.dispose()
        engine = create_store_engine(url, pool_size=1, max_overflow=0, lock_timeout=config.store_lock_timeout,
                                     idle_in_transaction_timeout=server_idle_limit(config))
        with engine.connect() as conn:
            limit = conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar()
        clock = FakeClock(from_us(T0 + args.rows + 1))
        asyncio.run(TenantStore(engine, clock).create(Tenant(name="bench", max_concurrency=0)))
        every = Capability(("bench",), ("echo",), True)
        for _ in range(args.repeat):
            _reset(engine, args.rows, 0)
            queue = ExecutionQueue(engine, clock)
            counts = {}
            with client_messages(engine) as (messages, _):
                handed = asyncio.run(queue.handout.hand_out_ready("s1", clock.now(), every, args.rows))
            counts["hand_out_ready"] = _sent(messages)[:2]
            results = [ResultIn(h.id, h.delivery, h.attempt, worker_pb2.RESULT_OUTCOME_SUCCEEDED, "", "w1", ("bench",))
                       for h in handed[: len(handed) // 2]]
            with client_messages(engine) as (messages, _):
                acks = asyncio.run(queue.outcomes.record_results(results))
            counts["record_results"] = _sent(messages)[:2]
            _mark_rest(engine, "s1", args.unheld, args.deleted)
            ended = {}
            if args.unheld:
                with client_messages(engine) as (messages, _):
                    released = asyncio.run(queue.requeues.release_unheld("s1"))
                counts["release_unheld"] = _sent(messages)[:2]
                ended["release_unheld"] = args.unheld
            with client_messages(engine) as (messages, _):
                reaped = asyncio.run(queue.requeues.reap_owner("s1", "the server's session expired"))
            counts["reap_owner"] = _sent(messages)[:2]
            ended["reap_owner"] = len(reaped.requeued) + len(reaped.canceled)
            runs.append({
                "handed": len(handed), "recorded": sum(a.accepted for a in acks), "reaped": len(reaped.requeued),
                "canceled": len(reaped.canceled),
                **({"released": len(getattr(released, "back", released))} if args.unheld else {}),
                **{what: {"round_trips": trips, "statements": statements,
                          **({"per_run": round(statements / ended[what], 3)} if ended.get(what) else {})}
                   for what, (trips, statements) in counts.items()},
            })
        engine.dispose()
    print(json.dumps({"rows": args.rows, "idle_in_transaction_session_timeout": limit,
                      "load": harness.load_average(), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
