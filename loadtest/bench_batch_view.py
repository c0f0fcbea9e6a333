"""Benchmark: what the batch answer budget (api/batchview) costs the server
per item, beside what answering the item costs anyway. In process, no
store: CPU seconds (``time.process_time``) over ``--rounds`` rounds of a
1 000-item batch, as milliseconds per 1 000 items (the median round).

    .venv/bin/python loadtest/bench_batch_view.py [--rounds 200]

Prints one JSON object:

- ``create_check``: the check BatchCreateJobs' transaction runs on 1 000
  created items (``batchview.create_check``), beside ``create_answer``: the
  answer of those items (``batchanswer.batch_create_response``, FULL).
- ``pause_check``: the check of 1 000 paused records (``AnswerBudget`` with
  ``job_bound``), beside ``pause_answer_full`` and ``pause_answer_basic``:
  the results BatchPauseJobs builds for them in each view.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import datetime, timezone

from tickwheel.v1 import job_pb2, scheduler_pb2

from tickwheel.shared.ids import new_job_ids, to_us
from tickwheel_server.api import batchanswer, batchview
from tickwheel_server.store.jobcreate import CREATED
from tickwheel_server.store.jobrecords import JobRecord, NewJobs

NOW = datetime(2027, 3, 1, 12, 0, 0, 250_001, tzinfo=timezone.utc)
ITEMS = 1000


def _job(i: int) -> job_pb2.Job:
    return job_pb2.Job(
        name=f"report-{i}", payload=b"p" * 256, labels={"team": "ops"},
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 3 1 1 *", time_zone="UTC")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="report")),
    )  # fmt: skip


def _median_ms(rounds: int, fn) -> float:
    times = []
    for _ in range(rounds):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return round(statistics.median(times) * 1000, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()

    batch = NewJobs("acme")
    run = to_us(NOW) + 3_600_000_000
    for i, job_id in enumerate(new_job_ids(NOW, ITEMS)):
        spec = _job(i).SerializeToString()
        batch.add(job_id, f"r{i}", f"report-{i}", spec, "UTC", run, run, "2026a", 256, ())
    outcomes = [CREATED] * ITEMS
    records = [
        JobRecord(id=batch.ids[i], tenant="acme", partition=1, name=batch.names[i], state="paused", spec=batch.specs[i],
                  time_zone="UTC", next_run_at=None, next_due_at=None, run_count=3, tzdata_version="2026a",
                  pause_reason="incident", version=2, created_at=NOW, updated_at=NOW)
        for i in range(ITEMS)
    ]  # fmt: skip
    check = batchview.create_check(batch, [], True)

    def pause_answer(full: bool) -> None:
        for record in records:
            scheduler_pb2.BatchPauseJobsResult(
                job=scheduler_pb2.PauseJobResponse(job=batchview.job_in_view(record, full), held_executions=1)
            )

    budget = batchview.AnswerBudget([], lambda record: batchview.job_bound(record, True))
    figures = {
        "items": ITEMS,
        "rounds": args.rounds,
        "ms_per_1000_items": {
            "create_check": _median_ms(args.rounds, lambda: check(outcomes)),
            "create_answer": _median_ms(
                args.rounds, lambda: batchanswer.batch_create_response(ITEMS, {}, range(ITEMS), batch, outcomes, NOW)
            ),
            "pause_check": _median_ms(args.rounds, lambda: budget(records)),
            "pause_answer_full": _median_ms(args.rounds, lambda: pause_answer(True)),
            "pause_answer_basic": _median_ms(args.rounds, lambda: pause_answer(False)),
        },
    }
    with open("/proc/loadavg") as f:
        figures["loadavg"] = f.read().split()[:3]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
