"""UpdateJob with ``validate_only``: the run diff of a checked change, as the answer (nothing written).

The request was checked as a real update before this runs (mask, merge,
validation, tenant scope, version): :func:`dry_run` adds the payload quota
the store would check, lists both definitions' runs over the window with
the schedule engine (:mod:`tickwheel_server.policy.rundiff`) and answers
``UpdateJobResponse`` with ``run_diff``. CPU-bound: run it off the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from tickwheel.v1 import job_pb2, scheduler_pb2

from ..auth.ratelimit import Meter
from ..errors import InvalidArgument, QuotaExceeded
from ..jobspec import JobDefinition, schedule_of
from ..policy import rundiff
from ..policy.calendarplan import preview_with_calendar, rule_decider
from ..schedule import Fire, Schedule, ScheduleError, ScheduleKind, next_fire
from ..schedule.businessdays import BusinessCalendar
from ..store.jobbatch import JobChange
from ..store.jobrecords import JobRecord
from . import convert, validate


def diff_window(request) -> timedelta:
    """The window ``request`` (an UpdateJobRequest) asks the diff for:
    INVALID_ARGUMENT ``diff_window`` outside its bounds, or when set
    without ``validate_only``."""
    if not request.HasField("diff_window"):
        return rundiff.DEFAULT_WINDOW
    if not request.validate_only:
        raise InvalidArgument.field("diff_window", "only with validate_only")
    window = convert.span(request.diff_window, "diff_window")
    try:
        return rundiff.check_window(window)
    except ValueError as error:
        raise InvalidArgument.field("diff_window", str(error)) from None


def _fire(fire: Fire) -> job_pb2.ScheduledFire:
    return job_pb2.ScheduledFire(
        nominal_at=convert.timestamp(fire.nominal_at), due_at=convert.timestamp(fire.due_at),
        local_time=fire.local_text, note=fire.note,
    )


def diff_to_proto(diff: rundiff.RunDiff) -> scheduler_pb2.RunDiff:
    return scheduler_pb2.RunDiff(
        from_at=convert.timestamp(diff.from_at), to_at=convert.timestamp(diff.to_at),
        window_truncated=diff.window_truncated,
        added=[_fire(f) for f in diff.added], added_count=diff.added_count,
        removed=[_fire(f) for f in diff.removed], removed_count=diff.removed_count,
        moved=[scheduler_pb2.MovedRun(before=_fire(a), after=_fire(b)) for a, b in diff.moved],
        moved_count=diff.moved_count, unchanged_count=diff.unchanged_count,
    )  # fmt: skip


def with_calendar(
    runs: list[Fire], schedule: Schedule, job: job_pb2.Job, calendars: Mapping[str, BusinessCalendar],
    now: datetime | None = None,
) -> list[Fire]:
    """``runs`` (consecutive fires of ``schedule``, the schedule of ``job``)
    as ``job``'s calendar rule leaves them: moved ones at their moved due
    instant, dropped and skipped ones left out (they do not run). Unchanged
    when the job names no calendar or one not in ``calendars``."""
    ref = JobDefinition.parse("", 0, job.SerializeToString()).calendar if job.HasField("calendar") else None
    cal = calendars.get(ref.name) if ref is not None else None
    if cal is None or not runs:
        return runs
    after = next_fire(schedule, runs[-1].nominal_at)

    decide_one = rule_decider(cal, ref, schedule, now)
    return [shown.fire for shown in preview_with_calendar(runs, after, decide_one) if not shown.skipped]


def run_diff(
    record: JobRecord, stored: job_pb2.Job, changed: job_pb2.Job, now: datetime, window: timedelta,
    calendars: Mapping[str, BusinessCalendar] | None = None, meter: Meter | None = None,
) -> rundiff.RunDiff:
    """The diff of ``stored``'s and ``changed``'s runs whose nominal instant
    is in [now, now + window) (see ``RunDiff`` in scheduler.proto);
    ``max_runs`` counts the runs the job made before ``now``. With the
    tenant's ``calendars`` (by name) that the definitions name, each side's
    runs are as its calendar rule leaves them (:func:`with_calendar`).
    The fires computed are counted in ``meter`` (the tenant pays for them:
    :mod:`~tickwheel_server.auth.ratelimit`)."""
    meter = meter if meter is not None else Meter()
    try:
        old = validate.until_horizon(schedule_of(stored, record.id))
        new = validate.until_horizon(schedule_of(changed, record.id))
        end = min(now + window, validate.LATEST_INSTANT)
        ahead = 0
        cursor = record.next_run_at
        if (old.max_runs or new.max_runs) and cursor is not None and cursor > now:
            # the occurrences created ahead of the cursor are counted in run_count already
            ahead = len(rundiff.runs_in_window(replace(old, max_runs=0), now, cursor)[0])
            meter.fires += ahead + 1
        before = rundiff.runs_before_window(ahead, record.run_count)
        old_runs, old_end = rundiff.runs_in_window(old, now, end, runs_so_far=before)
        meter.fires += len(old_runs) + 1
        new_runs, new_end = rundiff.runs_in_window(new, now, end, runs_so_far=before)
        meter.fires += len(new_runs) + 1
        if calendars:
            old_runs = with_calendar(old_runs, old, stored, calendars, now)
            new_runs = with_calendar(new_runs, new, changed, calendars, now)
    except ScheduleError as error:
        raise validate.schedule_error(error) from None
    old_runs, new_runs, cut = rundiff.window_runs(old_runs, old_end, new_runs, new_end)
    return rundiff.diff_runs(
        old_runs, new_runs, from_at=now, to_at=cut, window_truncated=cut < end,
        one_offs=old.kind is not ScheduleKind.CRON and new.kind is not ScheduleKind.CRON,
    )


def dry_run(
    record: JobRecord, change: JobChange | None, *, max_payload_bytes: int, now: datetime, window: timedelta,
    calendars: Mapping[str, BusinessCalendar] | None = None, meter: Meter | None = None,
) -> scheduler_pb2.UpdateJobResponse:
    """What UpdateJob would answer for ``change`` (None: it changes nothing)
    of ``record``, with the run diff, writing nothing: the changed
    definition with ``record``'s output-only fields. QuotaExceeded when the
    payload is over ``max_payload_bytes``, as the store would raise."""
    stored = convert.stored_job(record)
    if change is not None and change.payload_size > max_payload_bytes:
        raise QuotaExceeded(
            record.tenant, "max_payload_bytes", max_payload_bytes, f"payload of {change.payload_size} bytes is over the limit"
        )
    changed = stored if change is None else job_pb2.Job.FromString(change.spec)
    answer = job_pb2.Job()
    answer.CopyFrom(changed)
    convert.set_output_fields(answer, record)
    diff = run_diff(record, stored, changed, now, window, calendars, meter)
    return scheduler_pb2.UpdateJobResponse(job=answer, run_diff=diff_to_proto(diff))
