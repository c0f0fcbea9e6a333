"""Benchmark: BatchCreateJobs' Python a job on the event loop, without a
database: CPU microseconds a job (``time.thread_time``, the best of
``--repeat`` rounds) of a call of ``--items`` jobs shaped as
``bench_create.py``'s (handler jobs, one cron, a small payload, each its
own name and request id), decoded from the request's bytes as gRPC hands
them over.

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_batch_validate.py [--items 1000] [--repeat 15]
        [--replay-jobs 50000] [--smoke]

Prints one JSON object, ``us_per_job`` by part:

- ``validate``: the servicer's ``_new_jobs`` on the call's items (request
  ids, definitions through the tree's shapes, ids, the batch's columns):
  what the loop does before the store's call.
- ``answer``: ``batch_create_response`` of every job created.
- ``in_full``: the peer: each item's definition validated in full
  (``validate._normalise``, no shape shared), the cost the shapes avoid.
- ``never_fires``: ``_new_jobs`` on a call of ``--items`` jobs whose
  crons never fire (``m h L-30 2 *``, the 30th-from-last day of February,
  each its own minute and hour): every one refused INVALID_ARGUMENT,
  nothing written. ``never_fires_masks`` is the month masks (the matcher's
  step for day terms) one such call evaluates, a count, not a time.
- ``replay``: ``bench_create.py``'s own batch phase of ``--replay-jobs``
  jobs (``serialized_batches``: the bytes it sends, 1 000 a call), each
  call decoded, validated at an instant of its own (as calls arrive: the
  shape's first-fire memo asked again each call) and answered; the best
  of three passes.

Run it with another tree's ``PYTHONPATH`` to compare trees: each part
times what that tree does. ``--smoke`` runs tiny sizes so CI keeps the
script working.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from tickwheel.v1 import job_pb2, scheduler_pb2

from bench_create import serialized_batches
from tickwheel.shared.targets import DEFAULT_POLICY
from tickwheel_server.api import validate
from tickwheel_server.api.batchanswer import batch_create_response
from tickwheel_server.api.scheduler import SchedulerServicer
from tickwheel_server.schedule import cron
from tickwheel_server.store.jobcreate import CREATED

NOW = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)


def request_bytes(items: int, expression=lambda i: "0 3 1 1 *") -> bytes:
    """A BatchCreateJobsRequest of ``items`` jobs as bench_create.py builds
    them, item ``i``'s cron ``expression(i)``."""
    request = scheduler_pb2.BatchCreateJobsRequest()
    for i in range(items):
        item = request.items.add(request_id=f"bench-{i}")
        item.job.CopyFrom(job_pb2.Job(
            name="bench",
            schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression(i), time_zone="UTC")),
            target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
            payload=b'{"bench": true}',
        ))  # fmt: skip
    return request.SerializeToString()


def best_us(run, items: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.thread_time()
        run()
        best = min(best, time.thread_time() - began)
    return round(best / items * 1e6, 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--replay-jobs", type=int, default=50_000)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.items, args.repeat, args.replay_jobs = 20, 2, 2000
    raw = request_bytes(args.items)
    servicer = SimpleNamespace(_target_policy=DEFAULT_POLICY)
    loop = asyncio.new_event_loop()

    def new_jobs(raw=raw):
        request = scheduler_pb2.BatchCreateJobsRequest.FromString(raw)
        items = [(item.job, item.request_id, NOW) for item in request.items]
        return loop.run_until_complete(SchedulerServicer._new_jobs(servicer, "bench", items))

    never_raw = request_bytes(args.items, lambda i: f"{i % 60} {i // 60 % 24} L-30 2 *")
    masks = [0]
    real_masks = cron.month_mask_function

    def counting_masks(*fields):
        mask = real_masks(*fields)

        def counted(length, first_weekday):
            masks[0] += 1
            return mask(length, first_weekday)

        return counted

    cron.month_mask_function = counting_masks
    _, never_accepted, never_refused = new_jobs(never_raw)
    cron.month_mask_function = real_masks
    assert not never_accepted and len(never_refused) == args.items

    batch, accepted, refused = new_jobs()
    assert len(accepted) == args.items and not refused, refused
    outcomes = [CREATED] * len(batch)

    def answer():
        batch_create_response(args.items, refused, accepted, batch, outcomes, NOW)

    def in_full():
        request = scheduler_pb2.BatchCreateJobsRequest.FromString(raw)
        for index, item in enumerate(request.items):
            validate._normalise(item.job, NOW, "job", DEFAULT_POLICY, f"job_{index}")

    calls = serialized_batches(args.replay_jobs, "batch")
    passes = iter(range(3))

    def replay():
        first = next(passes) * len(calls)
        for k, call in enumerate(calls):
            at = NOW + timedelta(milliseconds=first + k)
            request = scheduler_pb2.BatchCreateJobsRequest.FromString(call)
            items = [(item.job, item.request_id, at) for item in request.items]
            made, taken, failed = loop.run_until_complete(SchedulerServicer._new_jobs(servicer, "bench", items))
            assert not failed, failed
            batch_create_response(len(items), failed, taken, made, [CREATED] * len(made), at)

    parts = {
        "validate": best_us(new_jobs, args.items, args.repeat),
        "never_fires": best_us(lambda: new_jobs(never_raw), args.items, args.repeat),
        "answer": best_us(answer, args.items, args.repeat),
        "in_full": best_us(in_full, args.items, args.repeat),
        "replay": best_us(replay, args.replay_jobs, 3),
    }
    loop.close()
    print(json.dumps({"benchmark": "batch_validate", "smoke": args.smoke, "items": args.items, "repeat": args.repeat,
                      "us_per_job": parts, "never_fires_masks": masks[0]}))  # fmt: skip


if __name__ == "__main__":
    main()
