"""A job's definition (``tickwheel.v1.Job``) read as the engine and the
dispatcher need it: its :class:`Schedule`, misfire policy, payload and target.
Pure; shared by the API (validation, preview) and the dispatcher (claims).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from google.protobuf import timestamp_pb2
from tickwheel.v1 import job_pb2

from .api.convert import duration_problem, timestamp_problem
from .errors import FieldViolation, InvalidArgument
from .schedule import GapPolicy, RepeatPolicy, Schedule, ScheduleError, parse_local_time

MAX_JITTER = timedelta(hours=1)
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST_INSTANT = datetime(9999, 1, 1, tzinfo=timezone.utc)
"""A job's instants (``start_at``, ``end_at``, ``once_at``) lie in
[EARLIEST_INSTANT, LATEST_INSTANT): the year left before protobuf's last
Timestamp keeps every due instant (nominal + at most an hour of jitter, or a
DST shift) representable."""
MAX_CRON_EXPRESSION = 512
_CRON_CHARACTERS = re.compile(r"^[\x20-\x7e\t]*$")
MAX_ZONE_NAME = 64
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
    window = None
    if job.jitter.HasField("window"):
        problem = duration_problem(job.jitter.window)
        if problem is None:
            window = job.jitter.window.ToTimedelta()
        else:
            violations.append(FieldViolation(f"{field}.jitter.window", problem))
    common: dict = dict(
        gap=_GAP.get(job.dst_policy.gap),
        repeat=_REPEAT.get(job.dst_policy.repeat),
        exact=job.jitter.exact,
        jitter_window=window,
        start_at=_instant(job, "start_at", field, violations),
        end_at=_instant(job, "end_at", field, violations),
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
        cron = job.schedule.cron
        if not cron.expression.strip():
            violations.append(FieldViolation(f"{field}.schedule.cron.expression", "required"))
        elif len(cron.expression) > MAX_CRON_EXPRESSION or not _CRON_CHARACTERS.match(cron.expression):
            violations.append(FieldViolation(
                f"{field}.schedule.cron.expression",
                f"at most {MAX_CRON_EXPRESSION} characters of printable ASCII, spaces and tabs",
            ))  # fmt: skip
        elif len(cron.time_zone) > MAX_ZONE_NAME:
            violations.append(FieldViolation(f"{field}.schedule.cron.time_zone", f"at most {MAX_ZONE_NAME} characters"))
        else:
            schedule = Schedule.cron(cron.expression, cron.time_zone or "UTC", **common)
    elif kind == "once_at":
        at = _instant(job.schedule, "once_at", f"{field}.schedule", violations)
        if at is not None:
            schedule = Schedule.once(at, **common)
    else:
        local = job.schedule.local
        wall = None
        try:
            wall = parse_local_time(local.local_time)
        except ScheduleError as error:
            violations.append(FieldViolation(f"{field}.{error.field}", error.reason))
        if not local.time_zone:
            violations.append(FieldViolation(f"{field}.schedule.local.time_zone", "required"))
        elif len(local.time_zone) > MAX_ZONE_NAME:
            violations.append(FieldViolation(f"{field}.schedule.local.time_zone", f"at most {MAX_ZONE_NAME} characters"))
        elif wall is not None:
            schedule = Schedule.local(wall, local.time_zone, **common)
    if violations:
        raise InvalidArgument(violations)
    assert schedule is not None
    return schedule



def _instant(message, name: str, prefix: str, violations: list[FieldViolation]) -> datetime | None:
    """``message.<name>`` as an aware instant, None when unset; a violation
    (and None) when it is not a valid Timestamp or lies outside
    [EARLIEST_INSTANT, LATEST_INSTANT)."""
    if not message.HasField(name):
        return None
    value: timestamp_pb2.Timestamp = getattr(message, name)
    problem = timestamp_problem(value)
    if problem is None:
        at = value.ToDatetime(tzinfo=timezone.utc)
        if EARLIEST_INSTANT <= at < LATEST_INSTANT:
            return at
        problem = "must be between 1970-01-01T00:00:00Z and 9999-01-01T00:00:00Z (exclusive)"
    violations.append(FieldViolation(f"{prefix}.{name}", problem))
    return None


def handler_of(job: job_pb2.Job) -> str | None:
    """The handler name a worker must serve, or None for an HTTP target."""
    return job.target.handler.name if job.target.WhichOneof("kind") == "handler" else None
