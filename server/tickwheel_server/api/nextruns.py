"""A job's next runs as GetJob and the console show them, with what the job's calendar does to each.

The runs are the stored cursor and the schedule's following fires.

Without a calendar the runs are the fires as the engine computes them. With
one, they are as the claim will treat them
(:func:`~tickwheel_server.policy.calendarplan.preview_with_calendar`): a
moved run due at its moved instant with a note saying why, a skipped one
marked ``skipped``, a dropped one left out (a ``previous`` run moved to an
earlier day shows that day, never before now). A calendar that is gone
leaves the fires as they are (the claim quarantines such a job).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwheel.v1 import job_pb2

from ..errors import NotFound
from ..jobspec import JobDefinition, calendar_column, schedule_of
from ..policy.calendarplan import PreviewedFire, preview_with_calendar, rule_decider
from ..schedule import Fire, Schedule, ScheduleError, ScheduleKind, preview, zones
from ..schedule.businessdays import BusinessCalendar
from ..store.calendars import CalendarStore
from ..store.jobrecords import JobRecord
from . import convert, validate


async def named_calendars(calendars: CalendarStore, tenant: str, specs: list[bytes]) -> dict[str, BusinessCalendar]:
    """The tenant's calendars the stored definitions ``specs`` name, by
    name (one read each, decoded once per version: :meth:`CalendarStore.decoded`; those gone are left out): what a dry run's diff
    takes (:func:`~tickwheel_server.api.dryrun.run_diff`)."""
    found: dict[str, BusinessCalendar] = {}
    for name in sorted({calendar_column(spec) for spec in specs} - {""}):
        try:
            found[name] = await calendars.decoded(tenant, name)
        except NotFound:
            continue
    return found


def fire_to_proto(fire: Fire, skipped: bool = False) -> job_pb2.ScheduledFire:
    return job_pb2.ScheduledFire(
        nominal_at=convert.timestamp(fire.nominal_at),
        due_at=convert.timestamp(fire.due_at),
        local_time=fire.local_text,
        note=fire.note,
        skipped=skipped,
    )


def upcoming(schedule: Schedule, after: datetime, count: int, *, runs_so_far: int = 0) -> list[Fire]:
    """Up to ``count`` fires strictly after ``after``, with DST notes."""
    try:
        return preview(validate.until_horizon(schedule), after, count, runs_so_far)
    except ScheduleError as error:
        raise validate.schedule_error(error) from None


def offset_at(schedule: Schedule, at: datetime) -> int:
    """The schedule's zone's UTC offset at ``at`` in seconds (0 for a one-off instant)."""
    if schedule.kind is ScheduleKind.ONCE:
        return 0
    offset = at.astimezone(zones.zoneinfo(schedule.zone)).utcoffset() or timedelta(0)
    return int(offset.total_seconds())


async def next_runs(
    calendars: CalendarStore, tenant: str, record: JobRecord, job: job_pb2.Job, count: int
) -> list[job_pb2.ScheduledFire]:
    """Up to ``count`` next runs of ``record`` (``job`` its message); none
    unless it is active, or when its definition could not be read (no
    schedule in ``job``)."""
    if record.state != "active" or record.next_run_at is None or not job.HasField("schedule"):
        return []
    schedule = schedule_of(job, record.id)
    first = Fire(record.next_run_at, record.next_due_at or record.next_run_at, offset_at(schedule, record.next_run_at))
    ref = JobDefinition.parse(record.id, record.version, record.spec).calendar
    if ref is None:
        later = upcoming(schedule, record.next_run_at, count - 1, runs_so_far=record.run_count + 1)
        return [fire_to_proto(fire) for fire in [first, *later]]
    # One fire more than shown: the last shown one's move must not reach it.
    fires = [first, *upcoming(schedule, record.next_run_at, count, runs_so_far=record.run_count + 1)]
    try:
        cal = await calendars.decoded(tenant, ref.name)
    except NotFound:
        return [fire_to_proto(fire) for fire in fires[:count]]

    decide_one = rule_decider(cal, ref, schedule, calendars.clock.now())
    shown: list[PreviewedFire] = preview_with_calendar(fires[:count], fires[count] if len(fires) > count else None,
                                                       decide_one)  # fmt: skip
    return [fire_to_proto(run.fire, run.skipped) for run in shown]
