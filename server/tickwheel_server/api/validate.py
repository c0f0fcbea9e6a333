"""Job validation: every problem found at once, each naming its field.

Pure: takes a ``tickwheel.v1.Job`` and returns the normalised job (defaults
filled in, so GetJob shows what is in force) and its :class:`Schedule`, or
raises :class:`InvalidArgument` listing every violation. Nothing is written
before this passes.

An HTTP target's URL is checked against the server's address policy
(:mod:`tickwheel_server.targets`) without DNS: an IP literal or ``localhost``
in a refused range is refused here; a host name is checked by the worker,
after resolution, when it is called.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from google.protobuf import duration_pb2
from tickwheel.v1 import job_pb2

from ..errors import FieldViolation, InvalidArgument
from ..jobspec import schedule_of
from ..schedule import Schedule, ScheduleError, ScheduleKind
from ..schedule import validate as validate_schedule
from ..targets import ALLOW_FLAG, DEFAULT_POLICY, TargetPolicy

NAME_MAX = 200
HANDLER = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
LABEL_KEY = re.compile(r"^[a-z0-9_.-]{1,63}$")
REQUEST_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
HTTP_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
RESERVED_HEADERS = {"idempotency-key", "tickwheel-attempt", "tickwheel-delivery", "tickwheel-scheduled-at", "traceparent"}

DEFAULT_TIMEOUT = timedelta(minutes=5)
MAX_TIMEOUT = timedelta(hours=6)
DEFAULT_ATTEMPTS = 5
DEFAULT_INITIAL_BACKOFF = timedelta(seconds=1)
DEFAULT_MAX_BACKOFF = timedelta(hours=1)
DEFAULT_MISFIRE_THRESHOLD = timedelta(seconds=60)
DEFAULT_RUN_ALL_LIMIT = 100
DEFAULT_LATENESS_THRESHOLD = timedelta(minutes=5)

def _duration(seconds: timedelta) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromTimedelta(seconds)
    return message


def check_request_id(value: str, field: str = "request_id") -> str:
    if not REQUEST_ID.match(value):
        raise InvalidArgument.field(field, "required: 1 to 128 characters of [A-Za-z0-9_.:-]")
    return value


def _target_violations(target: job_pb2.Target, field: str, policy: TargetPolicy) -> list[FieldViolation]:
    kind = target.WhichOneof("kind")
    if kind is None:
        return [FieldViolation(field, "required: set http or handler")]
    if kind == "handler":
        if not HANDLER.match(target.handler.name):
            return [FieldViolation(f"{field}.handler.name", "1 to 200 characters of [A-Za-z0-9_.:-]")]
        return []
    http = target.http
    violations = []
    try:
        parts = urlsplit(http.url)
        parts.port  # noqa: B018 - raises ValueError on a port out of range
    except ValueError:
        parts = None
    if parts is None or len(http.url) > 2048 or parts.scheme not in ("http", "https") or not parts.hostname:
        violations.append(FieldViolation(f"{field}.http.url", "an absolute http or https URL of at most 2048 characters"))
    elif (refusal := policy.url_refusal(http.url)) is not None:
        violations.append(FieldViolation(
            f"{field}.http.url",
            f"refused by the target address policy: {refusal}; HTTP targets may not reach loopback, link-local, "
            f"private, unspecified or reserved addresses unless the operator allows the network ({ALLOW_FLAG})",
        ))
    if http.method and http.method.upper() not in HTTP_METHODS:
        violations.append(FieldViolation(f"{field}.http.method", f"one of {sorted(HTTP_METHODS)}"))
    if len(http.headers) > 32:
        violations.append(FieldViolation(f"{field}.http.headers", "at most 32 headers"))
    reserved = sorted(h for h in http.headers if h.lower() in RESERVED_HEADERS)
    if reserved:
        violations.append(FieldViolation(f"{field}.http.headers", f"cannot set {reserved}: Tickwheel sets them"))
    return violations


def normalise_job(
    job: job_pb2.Job, now: datetime, field: str = "job", *, target_policy: TargetPolicy = DEFAULT_POLICY
) -> job_pb2.Job:
    """A copy of ``job`` with its definition validated and defaults filled in,
    output-only fields cleared. The schedule must fire after ``now`` (or be a
    one-off); an HTTP target's URL must pass ``target_policy`` (the server's,
    from ``--allow-target-network``; without one, nothing is allow-listed).
    Raises InvalidArgument listing every problem."""
    violations: list[FieldViolation] = []
    out = job_pb2.Job()
    out.CopyFrom(job)
    for output_only in ("id", "tenant", "state", "next_run_at", "next_due_at", "run_count", "version",
                        "tzdata_version", "last_run", "created_at", "updated_at", "pause_reason"):
        out.ClearField(output_only)
    if not out.name or len(out.name) > NAME_MAX:
        violations.append(FieldViolation(f"{field}.name", f"required, at most {NAME_MAX} characters"))
    violations += _target_violations(out.target, f"{field}.target", target_policy)
    timeout = out.timeout.ToTimedelta() if out.HasField("timeout") else DEFAULT_TIMEOUT
    if not timedelta(0) < timeout <= MAX_TIMEOUT:
        violations.append(FieldViolation(f"{field}.timeout", "must be more than 0 and at most 6 hours"))
    out.timeout.CopyFrom(_duration(timeout))
    retry = out.retry_policy
    attempts = retry.max_attempts or DEFAULT_ATTEMPTS
    initial = retry.initial_backoff.ToTimedelta() if retry.HasField("initial_backoff") else DEFAULT_INITIAL_BACKOFF
    cap = retry.max_backoff.ToTimedelta() if retry.HasField("max_backoff") else max(DEFAULT_MAX_BACKOFF, initial)
    if not 1 <= attempts <= 100:
        violations.append(FieldViolation(f"{field}.retry_policy.max_attempts", "must be between 1 and 100"))
    if initial < timedelta(milliseconds=100):
        violations.append(FieldViolation(f"{field}.retry_policy.initial_backoff", "at least 100 ms"))
    if cap < initial or cap > timedelta(hours=24):
        violations.append(FieldViolation(f"{field}.retry_policy.max_backoff", "at least initial_backoff and at most 24 hours"))
    out.retry_policy.max_attempts = attempts
    out.retry_policy.initial_backoff.CopyFrom(_duration(initial))
    out.retry_policy.max_backoff.CopyFrom(_duration(cap))
    if out.overlap_policy not in job_pb2.OverlapPolicy.values():
        violations.append(FieldViolation(f"{field}.overlap_policy", "unknown value"))
    elif out.overlap_policy == job_pb2.OVERLAP_POLICY_UNSPECIFIED:
        out.overlap_policy = job_pb2.OVERLAP_POLICY_SKIP
    if out.misfire_policy not in job_pb2.MisfirePolicy.values():
        violations.append(FieldViolation(f"{field}.misfire_policy", "unknown value"))
    elif out.misfire_policy == job_pb2.MISFIRE_POLICY_UNSPECIFIED:
        out.misfire_policy = job_pb2.MISFIRE_POLICY_RUN_ONCE
    threshold = out.misfire_threshold.ToTimedelta() if out.HasField("misfire_threshold") else DEFAULT_MISFIRE_THRESHOLD
    if threshold < timedelta(0):
        violations.append(FieldViolation(f"{field}.misfire_threshold", "must be >= 0"))
    out.misfire_threshold.CopyFrom(_duration(threshold))
    limit = out.misfire_run_all_limit or DEFAULT_RUN_ALL_LIMIT
    if not 1 <= limit <= 10_000:
        violations.append(FieldViolation(f"{field}.misfire_run_all_limit", "must be between 1 and 10000"))
    out.misfire_run_all_limit = limit
    lateness = out.lateness_threshold.ToTimedelta() if out.HasField("lateness_threshold") else DEFAULT_LATENESS_THRESHOLD
    if lateness < timedelta(0):
        violations.append(FieldViolation(f"{field}.lateness_threshold", "must be >= 0 (0 disables the alert)"))
    out.lateness_threshold.CopyFrom(_duration(lateness))
    if len(out.concurrency_keys) > 8:
        violations.append(FieldViolation(f"{field}.concurrency_keys", "at most 8 keys"))
    named: set[str] = set()
    for index, key in enumerate(out.concurrency_keys):
        if not KEY.match(key.key):
            violations.append(FieldViolation(f"{field}.concurrency_keys[{index}].key", "1 to 128 characters of [A-Za-z0-9_.:-]"))
        elif key.key in named:
            violations.append(FieldViolation(f"{field}.concurrency_keys[{index}].key", f"{key.key!r} is named twice"))
        named.add(key.key)
        if key.limit < 1:
            violations.append(FieldViolation(f"{field}.concurrency_keys[{index}].limit", "must be >= 1"))
    if len(out.labels) > 32:
        violations.append(FieldViolation(f"{field}.labels", "at most 32 labels"))
    for key, value in out.labels.items():
        if not LABEL_KEY.match(key) or len(value) > 256:
            violations.append(FieldViolation(f"{field}.labels[{key}]", "keys 1-63 characters of [a-z0-9_.-], values at most 256 characters"))
    if out.dst_policy.gap == job_pb2.DST_GAP_POLICY_UNSPECIFIED:
        out.dst_policy.gap = job_pb2.DST_GAP_POLICY_AUTO
    if out.dst_policy.repeat == job_pb2.DST_REPEAT_POLICY_UNSPECIFIED:
        out.dst_policy.repeat = job_pb2.DST_REPEAT_POLICY_AUTO
    try:
        validate_schedule(schedule_of(out, job_id="job_validation", field=field), now)
    except InvalidArgument as error:
        violations += error.violations
    except ScheduleError as error:
        violations.append(FieldViolation(f"{field}.{error.field}", error.reason))
    if violations:
        raise InvalidArgument(violations)
    return out


def schedule_error(error: ScheduleError, field: str = "job") -> InvalidArgument:
    return InvalidArgument.field(f"{field}.{error.field}", error.reason)


def zone_of(schedule: Schedule) -> str:
    return schedule.zone if schedule.kind is not ScheduleKind.ONCE else "UTC"


