"""Benchmark: the CPU a BatchCreateJobs of 1 000 jobs spends on its
wake-up (``Wakeup.due`` and what its caller computes for it), for jobs due
later (no wake) and jobs due now (issue 21, session 16).

    .venv/bin/python loadtest/bench_wake_due.py [--jobs 1000] [--iterations 2000]

Prints one JSON object: ``*_cpu_us_per_batch`` (process CPU per batch, µs).
Pure Python, in process (no store, no lease store: every partition is this
server's, so a due-now batch ends in one in-process wake). It runs against
the tree on ``PYTHONPATH``: where ``Wakeup.due`` still takes partitions
(before session 16), the caller hashes every job's partition first, as
the API did.
"""

from __future__ import annotations

import argparse
import inspect
import json
import time

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import new_job_ids, partition_of, to_us
from tickwheel_server.dispatcher.wakeup import Wakeup

PARTITIONS = 256


class _Holders:
    server_id = "me"
    partition_count = PARTITIONS

    def holder(self, partition: int) -> str:
        return "me"

    def wake_key(self, server_id: str) -> str:
        return "/w/" + server_id

    def members(self) -> list[str]:
        return ["me"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()
    clock = FakeClock()
    wakeup = Wakeup(None, _Holders(), clock, local=lambda: None, session=lambda: None, within=2.0)
    ids = new_job_ids(clock.now(), args.jobs)
    now = to_us(clock.now())
    takes_ids = "str" in str(inspect.signature(Wakeup.due).parameters["dues"].annotation)
    report: dict[str, object] = {"jobs": args.jobs, "takes_job_ids": takes_ids}
    for label, due in (("due_later", now + 3_600_000_000), ("due_now", now)):
        pairs = [(ident, due) for ident in ids]

        def once() -> None:
            if takes_ids:
                wakeup.due(pairs)
            else:  # before: the API hashed every created job, then due() filtered
                wakeup.due([(partition_of(ident, PARTITIONS), at) for ident, at in pairs])

        for _ in range(min(50, args.iterations)):
            once()
        start = time.process_time()
        for _ in range(args.iterations):
            once()
        report[f"{label}_cpu_us_per_batch"] = round((time.process_time() - start) / args.iterations * 1e6, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
