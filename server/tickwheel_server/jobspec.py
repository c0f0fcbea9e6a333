"""A job's definition (``tickwheel.v1.Job``) read as the engine and the
dispatcher need it: its :class:`Schedule`, misfire policy, payload and target.
Pure; shared by the API (validation, preview) and the dispatcher (claims).
"""

from __future__ import annotations

from datetime import timedelta

from tickwheel.v1 import job_pb2

from .api.convert import instant
from .errors import FieldViolation, InvalidArgument
from .schedule import GapPolicy, RepeatPolicy, Schedule, ScheduleError, parse_local_time

MAX_JITTER = timedelta(hours=1)
MISFIRE_POLICIES = {
    job_pb2.MISFIRE_POLICY_UNSPECIFIED: "run_once",
    job_pb2.MISFIRE_POLICY_RUN_ONCE: "run_once",
    job_pb2.MISFIRE_POLICY_RUN_ALL: "run_all",
    job_pb2.MISFIRE_POLICY_SKIP: "skip",
}

_GAP = {
    job_pb2.DST_GAP_POLICY_UNSPECIFIED: GapPolicy.AUTO,
    job_pb2.DST_GAP_POLICY_AUTO: GapPolicy.AUTO,
    job_pb2.DST_GAP_POLICY_SHIFT: GapPolicy.SHIFT,
    job_pb2.DST_GAP_POLICY_SKIP: GapPolicy.SKIP,
}
_REPEAT = {
    job_pb2.DST_REPEAT_POLICY_UNSPECIFIED: RepeatPolicy.AUTO,
    job_pb2.DST_REPEAT_POLICY_AUTO: RepeatPolicy.AUTO,
    job_pb2.DST_REPEAT_POLICY_ONCE: RepeatPolicy.ONCE,
    job_pb2.DST_REPEAT_POLICY_BOTH: RepeatPolicy.BOTH,
}


def schedule_of(job: job_pb2.Job, job_id: str, field: str = "job") -> Schedule:
    """The engine's :class:`Schedule` for a job message (schedule, DST policy,
    jitter, start/end, max_runs). Raises InvalidArgument naming the field."""
    violations: list[FieldViolation] = []
    common: dict = dict(
        gap=_GAP.get(job.dst_policy.gap),
        repeat=_REPEAT.get(job.dst_policy.repeat),
        exact=job.jitter.exact,
        jitter_window=job.jitter.window.ToTimedelta() if job.jitter.HasField("window") else None,
        start_at=instant(job.start_at) if job.HasField("start_at") else None,
        end_at=instant(job.end_at) if job.HasField("end_at") else None,
        max_runs=job.max_runs,
        job_id=job_id,
    )
    if common["gap"] is None:
        violations.append(FieldViolation(f"{field}.dst_policy.gap", "unknown value"))
    if common["repeat"] is None:
        violations.append(FieldViolation(f"{field}.dst_policy.repeat", "unknown value"))
    window = common["jitter_window"]
    if window is not None and not timedelta(0) <= window <= MAX_JITTER:
        violations.append(FieldViolation(f"{field}.jitter.window", "must be between 0 and 1 hour"))
    if job.max_runs < 0:
        violations.append(FieldViolation(f"{field}.max_runs", "must be >= 0 (0 means unlimited)"))
    if common["start_at"] and common["end_at"] and common["end_at"] <= common["start_at"]:
        violations.append(FieldViolation(f"{field}.end_at", "must be after start_at"))
    kind = job.schedule.WhichOneof("kind")
    schedule: Schedule | None = None
    if kind is None:
        violations.append(FieldViolation(f"{field}.schedule", "required: set cron, once_at or local"))
    elif kind == "cron":
        if not job.schedule.cron.expression.strip():
            violations.append(FieldViolation(f"{field}.schedule.cron.expression", "required"))
        else:
            schedule = Schedule.cron(job.schedule.cron.expression, job.schedule.cron.time_zone or "UTC", **common)
    elif kind == "once_at":
        schedule = Schedule.once(instant(job.schedule.once_at), **common)
    else:
        local = job.schedule.local
        wall = None
        try:
            wall = parse_local_time(local.local_time)
        except ScheduleError as error:
            violations.append(FieldViolation(f"{field}.{error.field}", error.reason))
        if not local.time_zone:
            violations.append(FieldViolation(f"{field}.schedule.local.time_zone", "required"))
        elif wall is not None:
            schedule = Schedule.local(wall, local.time_zone, **common)
    if violations:
        raise InvalidArgument(violations)
    assert schedule is not None
    return schedule



def handler_of(job: job_pb2.Job) -> str | None:
    """The handler name a worker must serve, or None for an HTTP target."""
    return job.target.handler.name if job.target.WhichOneof("kind") == "handler" else None
