"""Benchmark: what the API's checks of a request's lists cost on the event
loop, by shape, without a server: CPU milliseconds a call
(``time.thread_time``, the best of ``--repeat`` rounds) of the function
each call's list passes before anything else reads it:

- ``statuses_honest``: ListExecutions' ``statuses`` with 3 values
  (``scheduler._statuses``);
- ``statuses_flood``: the same with ``--values`` copies of one status
  (4 million: what a 4 MiB request holds, a byte a value);
- ``kinds_flood``: ListAlerts' ``kinds`` with ``--values`` copies
  (``convert.alert_kinds``);
- ``mask_honest``: UpdateJob's mask of 3 paths (``scheduler.update_paths``);
- ``mask_flood``: ``--paths`` copies of ``name`` (500 000 fit 4 MiB);
- ``calendar_mask_flood``: UpdateCalendar's mask, ``--paths`` copies of
  ``time_zone`` (``calendars.update_paths``);
- ``weekdays_flood``: CreateCalendar's ``business_days``, ``--values``
  copies of 9, no weekday (``calendars.normalise_calendar``: a violation
  each, where nothing bounds them);
- ``labels_flood``: CreateJob's job with ``--paths`` / 2 labels (``validate.new_job``,
  the create path: the job copied for its shape's key before any check);
- ``keys_flood``: a job with ``--paths`` × 2 empty concurrency keys, 2 bytes each
  (``validate.normalise_job``: a violation or two each).
- ``nul_labels_flood`` / ``nul_keys_flood``: a job holding a zero byte in
  its payload and the ``labels_flood`` / ``keys_flood`` lists
  (``decoding.nul_fields``, which a request with a zero byte passes
  before anything else reads it: ``kept``, the fields it named).

Each figure also says whether the check ``refused`` the list
(INVALID_ARGUMENT) or passed it on (``paths``/``values`` kept: what the
store then reads, and for a job's mask what its revision keeps).

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_request_lists.py [--values 4000000] [--paths 500000] [--repeat 3] [--smoke]

Prints one JSON object. Run it with another tree's ``PYTHONPATH`` to
compare trees (each times that tree's code); ``--smoke`` runs tiny sizes
so CI keeps the script alive (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import datetime, timezone

from google.protobuf import field_mask_pb2
from tickwheel.v1 import admin_pb2, calendar_pb2, job_pb2, scheduler_pb2

from tickwheel_server.api import calendars, convert, decoding, scheduler, validate
from tickwheel_server.errors import InvalidArgument


def timed(check, argument, repeat: int) -> dict:
    """The best of ``repeat`` rounds of ``check(argument)``, in CPU ms, and
    what it made of the list: refused, or how many items it kept."""
    best, kept, refused = float("inf"), None, False
    for _ in range(repeat):
        started = time.thread_time()
        try:
            kept = len(check(argument))
        except InvalidArgument:
            refused = True
        best = min(best, time.thread_time() - started)
    return {"cpu_ms": round(best * 1000, 3), "refused": refused, "kept": kept}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=4_000_000)
    parser.add_argument("--paths", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.values, args.paths, args.repeat = 100, 100, 1
    status = job_pb2.EXECUTION_STATUS_SUCCEEDED
    # Parsed as the server has them: repeated fields of a decoded request, not Python lists.
    statuses = scheduler_pb2.ListExecutionsRequest.FromString(
        scheduler_pb2.ListExecutionsRequest(job_id="j", statuses=[status] * args.values).SerializeToString()
    ).statuses
    kinds = admin_pb2.ListAlertsRequest.FromString(
        admin_pb2.ListAlertsRequest(kinds=[admin_pb2.ALERT_KIND_LATE] * args.values).SerializeToString()
    ).kinds

    def mask(paths: list[str]) -> field_mask_pb2.FieldMask:
        return field_mask_pb2.FieldMask.FromString(field_mask_pb2.FieldMask(paths=paths).SerializeToString())

    def crowded(labels: int, keys: int) -> job_pb2.Job:
        job = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
        job.schedule.cron.expression, job.schedule.cron.time_zone = "0 3 * * *", "UTC"
        job.labels.update({f"k{i}": "" for i in range(labels)})
        job.concurrency_keys.extend([job_pb2.ConcurrencyKey()] * keys)
        return job_pb2.Job.FromString(job.SerializeToString())

    def with_zero_byte(job: job_pb2.Job) -> job_pb2.Job:
        job.payload = b"\0"
        return job

    now = datetime.now(timezone.utc)
    shapes = {
        "statuses_honest": (scheduler._statuses, [status, job_pb2.EXECUTION_STATUS_DEAD,
                                                  job_pb2.EXECUTION_STATUS_CANCELED]),
        "statuses_flood": (scheduler._statuses, statuses),
        "kinds_flood": (convert.alert_kinds, kinds),
        "mask_honest": (scheduler.update_paths, mask(["name", "labels", "payload"])),
        "mask_flood": (scheduler.update_paths, mask(["name"] * args.paths)),
        "calendar_mask_flood": (calendars.update_paths, mask(["time_zone"] * args.paths)),
        "weekdays_flood": (calendars.normalise_calendar, calendar_pb2.Calendar.FromString(
            calendar_pb2.Calendar(name="c", time_zone="UTC", business_days=[9] * args.values).SerializeToString())),
        "labels_flood": (lambda job: [validate.new_job(job, now, "job_x")], crowded(args.paths // 2, 0)),
        "keys_flood": (lambda job: [validate.normalise_job(job, now)], crowded(0, args.paths * 2)),
        "nul_labels_flood": (decoding.nul_fields, with_zero_byte(crowded(args.paths // 2, 0))),
        "nul_keys_flood": (decoding.nul_fields, with_zero_byte(crowded(0, args.paths * 2))),
    }
    report = {
        "benchmark": "request_lists", "smoke": args.smoke, "values": args.values, "paths": args.paths,
        "repeat": args.repeat, "load": round(os.getloadavg()[0], 2),
        "shapes": {name: timed(check, argument, args.repeat) for name, (check, argument) in shapes.items()},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
