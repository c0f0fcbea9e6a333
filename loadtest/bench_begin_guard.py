"""What the guard of transactions that begin themselves
(``store/begin_guard.py``) costs every other statement, on a throwaway
PostgreSQL: ``--statements`` ``SELECT 1`` through SQLAlchemy on one
connection in a transaction, alternately without and with the guard's
``before_cursor_execute`` listener on the engine, ``--rounds`` times each.

Prints JSON: per variant, this process's CPU per statement (µs) in each
round and their median, and the load average.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import event  # noqa: E402

import loadtest._harness as harness  # noqa: E402
from tickwheel_server.store import create_store_engine  # noqa: E402
from tickwheel_server.store.begin_guard import _refuse_before_begin  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pg", help="a PostgreSQL URL to use instead of a throwaway server")
    args = parser.parse_args()
    per: dict[str, list[float]] = {"plain": [], "guarded": []}
    with harness.postgres(args.pg) as url:
        engine = create_store_engine(url, pool_size=1, max_overflow=0)
        with engine.begin() as conn:
            for _ in range(2_000):  # psycopg prepares it; the pool and caches are warm
                conn.exec_driver_sql("SELECT 1").fetchall()
            for _ in range(args.rounds):
                for variant in ("plain", "guarded"):
                    if variant == "guarded":
                        event.listen(engine, "before_cursor_execute", _refuse_before_begin)
                    start = time.process_time()
                    for _ in range(args.statements):
                        conn.exec_driver_sql("SELECT 1").fetchall()
                    per[variant].append(round((time.process_time() - start) / args.statements * 1e6, 2))
                    if variant == "guarded":
                        event.remove(engine, "before_cursor_execute", _refuse_before_begin)
        engine.dispose()
    print(json.dumps({
        "statements": args.statements,
        **{variant: {"cpu_us_per_statement": rounds, "median": statistics.median(rounds)}
           for variant, rounds in per.items()},
        "load_average": harness.load_average(),
    }))


if __name__ == "__main__":
    main()
