"""Benchmark: what GetJob's 100 next runs (101 fires computed, one more
read for a calendar's moves) cost for crons that fire rarely, in zones with
and without DST: the matcher's searches (a count) and process CPU.

    .venv/bin/python loadtest/bench_next_runs.py [--repeat 20]

Prints one JSON object: per (expression, zone), ``searches`` (calls of the
compiled matcher's ``next_match`` for one preview), ``cpu_ms_first`` (a
fresh engine: compile and zone tables included) and ``cpu_ms`` (the median
of ``--repeat`` previews on a warm engine). Pure Python, in process, on the
engine of the tree on ``PYTHONPATH`` (the same path ``api/nextruns.py``
takes: ``schedule.preview`` up to the horizon).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
from datetime import datetime, timezone

from tickwheel_server.schedule.engine import Engine
from tickwheel_server.schedule.model import Schedule, ScheduleKind

AFTER = datetime(2027, 1, 4, tzinfo=timezone.utc)
HORIZON = datetime(9999, 1, 1, tzinfo=timezone.utc)
FIRES = 101
CASES = [
    ("* * * * *", "Europe/London"),
    ("0 0 29 2 *", "UTC"),
    ("0 0 29 2 *", "Europe/London"),
    ("0 0 * 2 1#5", "UTC"),
    ("0 0 * 2 1#5", "Europe/London"),
    ("30 2 * 2 1#5", "Australia/Sydney"),
    ("59 23 * 2 1#5", "America/Santiago"),
]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(expression: str, zone: str, repeat: int) -> dict:
    schedule = Schedule(ScheduleKind.CRON, expression=expression, zone=zone, end_at=HORIZON)
    engine = Engine()
    started = _cpu()
    engine.preview(schedule, AFTER, FIRES)
    first = _cpu() - started
    compiled = engine.compile(schedule)
    real = compiled.matcher.next_match
    calls = [0]

    def counting(minute: int):
        calls[0] += 1
        return real(minute)

    compiled.next_match = compiled.matcher.next_match = counting
    engine.preview(schedule, AFTER, FIRES)
    searches = calls[0]
    compiled.next_match = compiled.matcher.next_match = real
    times = []
    for _ in range(repeat):
        started = _cpu()
        engine.preview(schedule, AFTER, FIRES)
        times.append(_cpu() - started)
    return {"expression": expression, "zone": zone, "fires": FIRES, "searches": searches,
            "cpu_ms_first": round(first * 1000, 1), "cpu_ms": round(statistics.median(times) * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(json.dumps({"cases": [measure(expression, zone, args.repeat) for expression, zone in CASES]}, indent=1))


if __name__ == "__main__":
    main()
