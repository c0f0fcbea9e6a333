"""Typed helpers that build the common ``tickwheel.v1`` messages in one line.

They only assemble messages: validation that needs the schedule engine (is
this cron expression valid, is this zone known) stays on the server, which
answers INVALID_ARGUMENT naming the field. What can be checked locally
(exactly one target, aware datetimes, known policy names) raises
``ValueError`` here.

>>> job = cron_job("nightly-report", "0 2 * * *", "Europe/London", handler="reports.nightly")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime, timedelta

from google.protobuf import duration_pb2, timestamp_pb2

from tickwheel.v1 import calendar_pb2, job_pb2

__all__ = [
    "calendar",
    "cron_job",
    "dst_policy",
    "duration",
    "execution_status",
    "calendar_rule",
    "handler_target",
    "http_target",
    "job_calendar",
    "job_state",
    "local_job",
    "misfire_policy",
    "once_job",
    "overlap_policy",
    "retry_policy",
    "timestamp",
    "weekday",
]

TimestampLike = datetime | timestamp_pb2.Timestamp
DurationLike = timedelta | float | int | duration_pb2.Duration


def timestamp(value: TimestampLike) -> timestamp_pb2.Timestamp:
    """A ``Timestamp`` from an aware ``datetime`` (any zone; stored as UTC).

    Naive datetimes are refused (``ValueError``): an instant without a zone is
    ambiguous, and Tickwheel never guesses the zone.
    """
    if isinstance(value, timestamp_pb2.Timestamp):
        return value
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime or Timestamp, not {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"naive datetime {value.isoformat()}: give it a tzinfo (e.g. timezone.utc)")
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def duration(value: DurationLike) -> duration_pb2.Duration:
    """A ``Duration`` from a ``timedelta`` or a number of seconds."""
    if isinstance(value, duration_pb2.Duration):
        return value
    if isinstance(value, bool) or not isinstance(value, (timedelta, int, float)):
        raise TypeError(f"expected a timedelta or seconds, not {type(value).__name__}")
    d = duration_pb2.Duration()
    d.FromTimedelta(value if isinstance(value, timedelta) else timedelta(seconds=value))
    return d


def _enum(enum_type, prefix: str, value: str | int, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        enum_type.Name(value)  # ValueError when out of range
        return value
    name = prefix + str(value).strip().upper().replace("-", "_")
    try:
        return enum_type.Value(name)
    except ValueError:
        choices = ", ".join(
            n[len(prefix) :].lower() for n in enum_type.keys() if not n.endswith("UNSPECIFIED")
        )
        raise ValueError(f"unknown {what} {value!r}; one of: {choices}") from None


def overlap_policy(value: str | int) -> int:
    """``"skip"``, ``"queue_one"``, ``"allow"`` or ``"replace"`` (or the enum value)."""
    return _enum(job_pb2.OverlapPolicy, "OVERLAP_POLICY_", value, "overlap policy")


def misfire_policy(value: str | int) -> int:
    """``"run_once"``, ``"run_all"`` or ``"skip"`` (or the enum value)."""
    return _enum(job_pb2.MisfirePolicy, "MISFIRE_POLICY_", value, "misfire policy")


def calendar_rule(value: str | int) -> int:
    """``"only"``, ``"next"``, ``"previous"`` or ``"skip"`` (or the enum value)."""
    return _enum(job_pb2.CalendarRule, "CALENDAR_RULE_", value, "calendar rule")


def job_calendar(name: str, rule: str | int) -> job_pb2.JobCalendar:
    """A job's business-day calendar (one of the tenant's, by ``name``) and
    what happens to an occurrence that is not on one of its business days
    (see :func:`calendar_rule`)."""
    return job_pb2.JobCalendar(name=name, rule=calendar_rule(rule))


def job_state(value: str | int) -> int:
    """``"active"``, ``"paused"`` or ``"completed"`` (or the enum value)."""
    return _enum(job_pb2.JobState, "JOB_STATE_", value, "job state")


def execution_status(value: str | int) -> int:
    """``"scheduled"``, ``"waiting"``, ``"running"``, ``"succeeded"``, ``"dead"``
    or ``"canceled"`` (or the enum value)."""
    return _enum(job_pb2.ExecutionStatus, "EXECUTION_STATUS_", value, "execution status")


def dst_policy(gap: str | int | None = None, repeat: str | int | None = None) -> job_pb2.DstPolicy:
    """A DST policy: ``gap`` one of ``auto``/``shift``/``skip``, ``repeat`` one
    of ``auto``/``once``/``both``; ``None`` leaves the server default (auto)."""
    policy = job_pb2.DstPolicy()
    if gap is not None:
        policy.gap = _enum(job_pb2.DstGapPolicy, "DST_GAP_POLICY_", gap, "DST gap policy")
    if repeat is not None:
        policy.repeat = _enum(job_pb2.DstRepeatPolicy, "DST_REPEAT_POLICY_", repeat, "DST repeat policy")
    return policy


def retry_policy(
    max_attempts: int = 0,
    initial_backoff: DurationLike | None = None,
    max_backoff: DurationLike | None = None,
) -> job_pb2.RetryPolicy:
    """A job's retry policy. Zero/``None`` fields take the server defaults
    (5 attempts, 1 s base, 1 h cap); ``max_attempts=1`` disables retries."""
    policy = job_pb2.RetryPolicy(max_attempts=max_attempts)
    if initial_backoff is not None:
        policy.initial_backoff.CopyFrom(duration(initial_backoff))
    if max_backoff is not None:
        policy.max_backoff.CopyFrom(duration(max_backoff))
    return policy


def http_target(url: str, method: str = "", headers: Mapping[str, str] | None = None) -> job_pb2.Target:
    """POST (or ``method``) the payload to ``url``."""
    return job_pb2.Target(http=job_pb2.HttpTarget(url=url, method=method, headers=dict(headers or {})))


def handler_target(name: str) -> job_pb2.Target:
    """Run the handler a worker registered under ``name``."""
    return job_pb2.Target(handler=job_pb2.HandlerTarget(name=name))


def _target(handler: str | None, url: str | None, method: str, headers: Mapping[str, str] | None):
    if (handler is None) == (url is None):
        raise ValueError("give exactly one target: handler=NAME or url=URL")
    if handler is not None:
        if method or headers:
            raise ValueError("method and headers apply to url targets only")
        return handler_target(handler)
    assert url is not None
    return http_target(url, method, headers)


def _payload(payload: bytes | str) -> bytes:
    return payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)


def _job(
    name: str,
    schedule: job_pb2.Schedule,
    *,
    handler: str | None,
    url: str | None,
    method: str,
    headers: Mapping[str, str] | None,
    payload: bytes | str,
    exact: bool,
    jitter: DurationLike | None,
    start_at: TimestampLike | None,
    end_at: TimestampLike | None,
    max_runs: int,
    timeout: DurationLike | None,
    retry: job_pb2.RetryPolicy | None,
    overlap: str | int | None,
    misfire: str | int | None,
    misfire_threshold: DurationLike | None,
    lateness_threshold: DurationLike | None,
    dst_gap: str | int | None,
    dst_repeat: str | int | None,
    concurrency_keys: Mapping[str, int] | Iterable[tuple[str, int]] | None,
    labels: Mapping[str, str] | None,
    calendar: job_pb2.JobCalendar | None = None,
) -> job_pb2.Job:
    if exact and jitter is not None:
        raise ValueError("exact=True and a jitter window exclude each other")
    job = job_pb2.Job(
        name=name,
        schedule=schedule,
        target=_target(handler, url, method, headers),
        payload=_payload(payload),
        max_runs=max_runs,
        labels=dict(labels or {}),
    )
    if exact:
        job.jitter.exact = True
    elif jitter is not None:
        job.jitter.window.CopyFrom(duration(jitter))
    if start_at is not None:
        job.start_at.CopyFrom(timestamp(start_at))
    if end_at is not None:
        job.end_at.CopyFrom(timestamp(end_at))
    if timeout is not None:
        job.timeout.CopyFrom(duration(timeout))
    if retry is not None:
        job.retry_policy.CopyFrom(retry)
    if overlap is not None:
        job.overlap_policy = overlap_policy(overlap)
    if misfire is not None:
        job.misfire_policy = misfire_policy(misfire)
    if misfire_threshold is not None:
        job.misfire_threshold.CopyFrom(duration(misfire_threshold))
    if lateness_threshold is not None:
        job.lateness_threshold.CopyFrom(duration(lateness_threshold))
    if dst_gap is not None or dst_repeat is not None:
        job.dst_policy.CopyFrom(dst_policy(dst_gap, dst_repeat))
    if concurrency_keys:
        items = concurrency_keys.items() if isinstance(concurrency_keys, Mapping) else concurrency_keys
        job.concurrency_keys.extend(job_pb2.ConcurrencyKey(key=k, limit=n) for k, n in items)
    if calendar is not None:
        job.calendar.CopyFrom(calendar)
    return job


def cron_job(
    name: str,
    expression: str,
    tz: str,
    *,
    handler: str | None = None,
    url: str | None = None,
    method: str = "",
    headers: Mapping[str, str] | None = None,
    payload: bytes | str = b"",
    exact: bool = False,
    jitter: DurationLike | None = None,
    start_at: TimestampLike | None = None,
    end_at: TimestampLike | None = None,
    max_runs: int = 0,
    timeout: DurationLike | None = None,
    retry: job_pb2.RetryPolicy | None = None,
    overlap: str | int | None = None,
    misfire: str | int | None = None,
    misfire_threshold: DurationLike | None = None,
    lateness_threshold: DurationLike | None = None,
    dst_gap: str | int | None = None,
    dst_repeat: str | int | None = None,
    concurrency_keys: Mapping[str, int] | Iterable[tuple[str, int]] | None = None,
    labels: Mapping[str, str] | None = None,
    calendar: job_pb2.JobCalendar | None = None,
) -> job_pb2.Job:
    """A recurring job: five-field cron ``expression`` in IANA zone ``tz``
    (``"UTC"`` for UTC), calling exactly one of ``handler`` or ``url``.

    Unset options take the server's defaults (jitter in [0, 60 s) from the job
    id, 5 attempts, overlap ``skip``, misfire ``run_once``); ``exact=True``
    turns jitter off. A ``str`` payload is sent as UTF-8. ``calendar``
    (:func:`job_calendar`) names one of the tenant's business-day calendars
    and what happens to an occurrence off its business days.
    """
    schedule = job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone=tz))
    return _job(
        name, schedule, handler=handler, url=url, method=method, headers=headers,
        payload=payload, exact=exact, jitter=jitter, start_at=start_at, end_at=end_at,
        max_runs=max_runs, timeout=timeout, retry=retry, overlap=overlap, misfire=misfire,
        misfire_threshold=misfire_threshold, lateness_threshold=lateness_threshold,
        dst_gap=dst_gap, dst_repeat=dst_repeat, concurrency_keys=concurrency_keys, labels=labels,
        calendar=calendar,
    )  # fmt: skip


def once_job(
    name: str,
    at: TimestampLike,
    *,
    handler: str | None = None,
    url: str | None = None,
    method: str = "",
    headers: Mapping[str, str] | None = None,
    payload: bytes | str = b"",
    jitter: DurationLike | None = None,
    timeout: DurationLike | None = None,
    retry: job_pb2.RetryPolicy | None = None,
    misfire: str | int | None = None,
    misfire_threshold: DurationLike | None = None,
    lateness_threshold: DurationLike | None = None,
    concurrency_keys: Mapping[str, int] | Iterable[tuple[str, int]] | None = None,
    labels: Mapping[str, str] | None = None,
    calendar: job_pb2.JobCalendar | None = None,
) -> job_pb2.Job:
    """A one-off job at the aware instant ``at``, calling exactly one of
    ``handler`` or ``url``. No jitter unless ``jitter`` is given. An instant
    already past runs at once when within the misfire threshold (default 60 s),
    otherwise as the misfire policy says."""
    schedule = job_pb2.Schedule(once_at=timestamp(at))
    return _job(
        name, schedule, handler=handler, url=url, method=method, headers=headers,
        payload=payload, exact=False, jitter=jitter, start_at=None, end_at=None, max_runs=0,
        timeout=timeout, retry=retry, overlap=None, misfire=misfire,
        misfire_threshold=misfire_threshold, lateness_threshold=lateness_threshold,
        dst_gap=None, dst_repeat=None, concurrency_keys=concurrency_keys, labels=labels,
        calendar=calendar,
    )  # fmt: skip


def local_job(
    name: str,
    local_time: str,
    tz: str,
    *,
    handler: str | None = None,
    url: str | None = None,
    method: str = "",
    headers: Mapping[str, str] | None = None,
    payload: bytes | str = b"",
    jitter: DurationLike | None = None,
    timeout: DurationLike | None = None,
    retry: job_pb2.RetryPolicy | None = None,
    misfire: str | int | None = None,
    misfire_threshold: DurationLike | None = None,
    lateness_threshold: DurationLike | None = None,
    dst_gap: str | int | None = None,
    dst_repeat: str | int | None = None,
    concurrency_keys: Mapping[str, int] | Iterable[tuple[str, int]] | None = None,
    labels: Mapping[str, str] | None = None,
    calendar: job_pb2.JobCalendar | None = None,
) -> job_pb2.Job:
    """A one-off job at a local wall time (``"2027-03-28T02:30:00"``, no
    offset) in IANA zone ``tz``, resolved by the DST policy when that wall time
    is skipped or repeated. Otherwise as :func:`once_job`."""
    schedule = job_pb2.Schedule(local=job_pb2.LocalTimeSchedule(local_time=local_time, time_zone=tz))
    return _job(
        name, schedule, handler=handler, url=url, method=method, headers=headers,
        payload=payload, exact=False, jitter=jitter, start_at=None, end_at=None, max_runs=0,
        timeout=timeout, retry=retry, overlap=None, misfire=misfire,
        misfire_threshold=misfire_threshold, lateness_threshold=lateness_threshold,
        dst_gap=dst_gap, dst_repeat=dst_repeat, concurrency_keys=concurrency_keys, labels=labels,
        calendar=calendar,
    )  # fmt: skip


# --- calendars ----------------------------------------------------------------

_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS = {name: number for number, day in enumerate(_DAY_NAMES, 1) for name in (day, day[:3])}

DateLike = date | str


def weekday(value: str | int) -> int:
    """An ISO weekday number (1 Monday to 7 Sunday) from itself or a name
    (``"mon"``, ``"Monday"``, any case). ``ValueError`` for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"a weekday is a number 1 to 7 or a name, not {type(value).__name__}")
    number = value if isinstance(value, int) else _WEEKDAYS.get(value.strip().lower())
    if number is None or not 1 <= number <= 7:
        raise ValueError(f"not a weekday: {value!r} (1 Monday to 7 Sunday, or a name such as 'mon')")
    return number


def _date_text(value: DateLike) -> str:
    return value.isoformat() if isinstance(value, date) else value


def calendar(
    name: str,
    time_zone: str,
    *,
    business_days: Iterable[str | int] = (),
    holidays: Iterable[DateLike] = (),
    half_days: Iterable[DateLike] = (),
) -> calendar_pb2.Calendar:
    """A ``Calendar`` to create or update: ``business_days`` as ISO numbers
    (1 Monday to 7 Sunday) or names (``"mon"``, ``"Friday"``; empty means
    Monday to Friday), ``holidays`` and ``half_days`` as ``date`` objects or
    ``YYYY-MM-DD`` strings (at most 10 000 each, 1900 to 2200; the server
    folds duplicates)."""
    return calendar_pb2.Calendar(
        name=name, time_zone=time_zone, business_days=[weekday(d) for d in business_days],
        holidays=[_date_text(d) for d in holidays], half_days=[_date_text(d) for d in half_days],
    )  # fmt: skip
