"""A job's stored definition (``tickwheel.v1.Job``) read once into what every
reader needs: :class:`JobDefinition`, parsed once per (job id, version) through
one bounded LRU (:class:`DefinitionCache`), owning the defaults a definition
may leave unset. Pure; shared by the API (validation, preview), the
dispatcher's claim, the hand-out and the recording of outcomes.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

from google.protobuf import timestamp_pb2
from google.protobuf.message import DecodeError
from tickwheel.v1 import job_pb2

from .errors import FieldViolation, InvalidArgument
from .fields import duration_problem, timestamp_problem
from .policy.admission import Rules, rules_of
from .policy.breaker import http_target_host
from .policy.outcome import RetryPolicy
from .schedule import GapPolicy, RepeatPolicy, Schedule, ScheduleError, ScheduleKind, parse_local_time
from .schedule.calendarrule import CalendarRule
from .schedule.jitter import MAX_WINDOW as MAX_JITTER_WINDOW
from .schedule.model import schedule_in_order
from .wire import varint

DEFAULT_MAX_ATTEMPTS = 5
"""Attempts of an execution when the retry policy names none."""
DEFAULT_INITIAL_BACKOFF = timedelta(seconds=1)
"""The first retry's backoff ceiling when the retry policy names none."""
DEFAULT_MAX_BACKOFF = timedelta(hours=1)
"""The backoff's cap when the retry policy names none (the API writes at
least ``initial_backoff`` when that is longer)."""
DEFAULT_TIMEOUT = timedelta(minutes=5)
"""A run's time limit when the job names none."""
DEFAULT_TIMEOUT_US = DEFAULT_TIMEOUT // timedelta(microseconds=1)
"""``DEFAULT_TIMEOUT`` in microseconds, as the hand-out reads it."""
DEFAULT_LATENESS_THRESHOLD = timedelta(minutes=5)
"""How long a due execution may wait before it is late, when the job names no threshold."""
DEFAULT_RUN_ALL_LIMIT = 100
"""Occurrences a ``run_all`` misfire runs at most when the job names no limit."""
MAX_RUN_ALL_LIMIT = 10_000
"""The API's bound on ``misfire_run_all_limit``; a stored value past it is refused, not obeyed."""
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST_INSTANT = datetime(9999, 1, 1, tzinfo=timezone.utc)
"""A job's instants (``start_at``, ``end_at``, ``once_at``) lie in
[EARLIEST_INSTANT, LATEST_INSTANT): the year left before protobuf's last
Timestamp keeps every due instant (nominal + at most an hour of jitter, or a
DST shift) representable."""
MAX_CRON_EXPRESSION = 512
_CRON_CHARACTERS = re.compile(r"^[\x20-\x7e\t]*\Z")
MAX_ZONE_NAME = 64
MISFIRE_POLICIES = {
    job_pb2.MISFIRE_POLICY_UNSPECIFIED: "run_once",
    job_pb2.MISFIRE_POLICY_RUN_ONCE: "run_once",
    job_pb2.MISFIRE_POLICY_RUN_ALL: "run_all",
    job_pb2.MISFIRE_POLICY_SKIP: "skip",
}

CALENDAR_RULES = {
    job_pb2.CALENDAR_RULE_ONLY: CalendarRule.ONLY,
    job_pb2.CALENDAR_RULE_NEXT: CalendarRule.NEXT,
    job_pb2.CALENDAR_RULE_PREVIOUS: CalendarRule.PREVIOUS,
    job_pb2.CALENDAR_RULE_SKIP: CalendarRule.SKIP,
}
"""The calendar rules this server serves."""
CALENDAR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
"""A calendar's name (the rule of ``Calendar.name``)."""


class JobCalendarRef(NamedTuple):
    """The calendar a job names, and its rule."""

    name: str
    rule: CalendarRule


def calendar_ref_of(job: job_pb2.Job, field: str = "job") -> JobCalendarRef | None:
    """The calendar ``job`` names and its rule, None when it names none.
    InvalidArgument ``<field>.calendar.name`` / ``<field>.calendar.rule``
    for a malformed name or a rule that is unspecified or unknown."""
    if not job.HasField("calendar"):
        return None
    violations: list[FieldViolation] = []
    name = job.calendar.name
    if not CALENDAR_NAME.match(name):
        violations.append(FieldViolation(
            f"{field}.calendar.name", "required: 1 to 64 characters of [A-Za-z0-9_.-] starting with a letter or a digit"
        ))  # fmt: skip
    rule = CALENDAR_RULES.get(job.calendar.rule)
    if rule is None:
        if job.calendar.rule == job_pb2.CALENDAR_RULE_UNSPECIFIED:
            problem = "required: ONLY, NEXT, PREVIOUS or SKIP"
        else:
            problem = f"unknown value {job.calendar.rule}"
        violations.append(FieldViolation(f"{field}.calendar.rule", problem))
    if violations:
        raise InvalidArgument(violations)
    assert rule is not None
    return JobCalendarRef(name, rule)


_CALENDAR_TAG = bytes(((job_pb2.Job.DESCRIPTOR.fields_by_name["calendar"].number << 3 | 2) & 0x7F | 0x80,))
"""The first byte of ``Job.calendar``'s tag (field 31, length-delimited),
however its varint is spelled: no definition holds the field without it."""


def calendar_ref(spec: bytes) -> tuple[str, bool]:
    """(the name of the calendar a stored definition names, whether its rule
    is ``previous``); ('', False) for none, or for bytes that do not parse.
    The name is what ``jobs.calendar`` holds; only a ``previous`` job has a
    scan key of its own to write (``store/calendarcursor.py``)."""
    if _CALENDAR_TAG not in spec:
        # No byte of the tag: the field cannot be there (most jobs name no
        # calendar; this saves parsing each definition a batch stores).
        return "", False
    try:
        job = job_pb2.Job.FromString(spec)
    except DecodeError:
        return "", False
    if not job.HasField("calendar"):
        return "", False
    return job.calendar.name, job.calendar.rule == job_pb2.CALENDAR_RULE_PREVIOUS


def calendar_named(specs: list[bytes]) -> bool:
    """Whether any of the stored definitions ``specs`` may name a calendar
    (:func:`calendar_ref` of each then tells); False: none does. One search
    over them joined, not one a definition."""
    return _CALENDAR_TAG in b"".join(specs)


def calendar_column(spec: bytes) -> str:
    """The name of the calendar a stored definition names ('' for none, or
    for bytes that do not parse): what ``jobs.calendar`` holds."""
    return calendar_ref(spec)[0]


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
    jitter, start/end, max_runs). Raises InvalidArgument naming the field.

    The claim reads one for every job it claims that the cache has not seen
    (every one-off), so the fields are read once each and the value built
    positionally."""
    violations: list[FieldViolation] = []
    window = None
    jitter = job.jitter
    if jitter.HasField("window"):
        problem = duration_problem(jitter.window)
        if problem is None:
            window = jitter.window.ToTimedelta()
        else:
            violations.append(FieldViolation(f"{field}.jitter.window", problem))
    dst = job.dst_policy
    gap = _GAP.get(dst.gap)
    repeat = _REPEAT.get(dst.repeat)
    start_at = _instant(job, "start_at", field, violations) if job.HasField("start_at") else None
    end_at = _instant(job, "end_at", field, violations) if job.HasField("end_at") else None
    max_runs = job.max_runs
    if gap is None:
        violations.append(FieldViolation(f"{field}.dst_policy.gap", "unknown value"))
    if repeat is None:
        violations.append(FieldViolation(f"{field}.dst_policy.repeat", "unknown value"))
    if window is not None and not timedelta(0) <= window <= MAX_JITTER_WINDOW:
        violations.append(FieldViolation(f"{field}.jitter.window", "must be between 0 and 1 hour"))
    if max_runs < 0:
        violations.append(FieldViolation(f"{field}.max_runs", "must be >= 0 (0 means unlimited)"))
    if start_at and end_at and end_at <= start_at:
        violations.append(FieldViolation(f"{field}.end_at", "must be after start_at"))
    schedule = _schedule_kind(
        job.schedule, gap, repeat, jitter.exact, window, start_at, end_at, max_runs, job_id, field, violations
    )
    if violations:
        raise InvalidArgument(violations)
    assert schedule is not None
    return schedule


def _schedule_kind(
    message: job_pb2.Schedule, gap: GapPolicy | None, repeat: RepeatPolicy | None, exact: bool,
    window: timedelta | None, start_at: datetime | None, end_at: datetime | None, max_runs: int, job_id: str,
    field: str, violations: list[FieldViolation],
) -> Schedule | None:
    """The :class:`Schedule` of ``message`` (a job's ``schedule``) with the
    job's other schedule fields as :func:`schedule_of` read them; None, with
    what is wrong appended to ``violations``, when the schedule is not
    valid or ``violations`` already holds one (then nothing is built)."""
    kind = message.WhichOneof("kind")
    if kind is None:
        violations.append(FieldViolation(f"{field}.schedule", "required: set cron, once_at or local"))
    elif kind == "once_at":
        at = _instant(message, "once_at", f"{field}.schedule", violations)
        if at is not None and not violations:
            return schedule_in_order(
                ScheduleKind.ONCE, "", "UTC", at, gap, repeat, exact, window, start_at, end_at, max_runs, job_id
            )
    elif kind == "cron":
        cron = message.cron
        expression = cron.expression
        if not expression.strip():
            violations.append(FieldViolation(f"{field}.schedule.cron.expression", "required"))
        elif len(expression) > MAX_CRON_EXPRESSION or not _CRON_CHARACTERS.match(expression):
            violations.append(FieldViolation(
                f"{field}.schedule.cron.expression",
                f"at most {MAX_CRON_EXPRESSION} characters of printable ASCII, spaces and tabs",
            ))  # fmt: skip
        elif len(cron.time_zone) > MAX_ZONE_NAME:
            violations.append(FieldViolation(f"{field}.schedule.cron.time_zone", f"at most {MAX_ZONE_NAME} characters"))
        elif not violations:
            return schedule_in_order(
                ScheduleKind.CRON, expression, cron.time_zone or "UTC", None, gap, repeat, exact, window, start_at,
                end_at, max_runs, job_id,
            )
    else:
        local = message.local
        wall = None
        try:
            wall = parse_local_time(local.local_time)
        except ScheduleError as error:
            violations.append(FieldViolation(f"{field}.{error.field}", error.reason))
        if not local.time_zone:
            violations.append(FieldViolation(f"{field}.schedule.local.time_zone", "required"))
        elif len(local.time_zone) > MAX_ZONE_NAME:
            violations.append(FieldViolation(f"{field}.schedule.local.time_zone", f"at most {MAX_ZONE_NAME} characters"))
        elif wall is not None and not violations:
            return schedule_in_order(
                ScheduleKind.LOCAL, "", local.time_zone, wall, gap, repeat, exact, window, start_at, end_at, max_runs,
                job_id,
            )
    return None


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _instant(message, name: str, prefix: str, violations: list[FieldViolation]) -> datetime | None:
    """``message.<name>`` as an aware instant, None when unset; a violation
    (and None) when it is not a valid Timestamp or lies outside
    [EARLIEST_INSTANT, LATEST_INSTANT). Converted as ``Timestamp.ToDatetime``
    converts a valid one (nanoseconds truncated to microseconds), without its
    second validation."""
    if not message.HasField(name):
        return None
    value: timestamp_pb2.Timestamp = getattr(message, name)
    seconds, nanos = value.seconds, value.nanos
    if _EARLIEST_S <= seconds < _LATEST_S and 0 <= nanos < 1_000_000_000:
        # Valid, and within the bounds (nanos add less than a second):
        # ``timestamp_problem``'s and the bounds' answer without their calls.
        return _EPOCH + timedelta(0, seconds, nanos // 1000)
    problem = timestamp_problem(value)
    if problem is None:
        problem = "must be between 1970-01-01T00:00:00Z and 9999-01-01T00:00:00Z (exclusive)"
    violations.append(FieldViolation(f"{prefix}.{name}", problem))
    return None


_EARLIEST_S = (EARLIEST_INSTANT - _EPOCH) // timedelta(seconds=1)
_LATEST_S = (LATEST_INSTANT - _EPOCH) // timedelta(seconds=1)
"""The seconds of a Timestamp in [EARLIEST_INSTANT, LATEST_INSTANT) (whole seconds both)."""


def key_limits(job: job_pb2.Job) -> tuple[tuple[str, int], ...]:
    """The (key, limit) pairs of ``job``'s concurrency keys, as the store
    records them (a limit under 1 counts as 1)."""
    return tuple((key.key, max(1, key.limit)) for key in job.concurrency_keys)


def handler_of(job: job_pb2.Job) -> str | None:
    """The handler name a worker must serve, or None for an HTTP target."""
    return job.target.handler.name if job.target.WhichOneof("kind") == "handler" else None


# ------------------------------------------------------------ the parsed definition


_DEFAULT_RETRY = RetryPolicy(DEFAULT_MAX_ATTEMPTS, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF)


class JobDefinition:
    """A job's stored definition (``jobs.spec``) at one version, read once
    into what its readers need.

    What the claim and the hand-out read is computed at parse; what only the
    outcome of a failed run or the lateness watch reads (the retry policy,
    the target's host, the lateness threshold) on first use, from the message
    kept here, and then kept too. Both ways the value is the same, so a
    definition shared between threads may compute one twice, never wrongly.

    A definition this server cannot read is still a value: ``problem`` says
    why the dispatcher may not claim it (it quarantines the job), the
    hand-out reads bytes that do not parse as an empty definition, and the
    outcome of a result fails where it needs the retry policy or the
    target's host (:meth:`retry_or_problem`, :meth:`host`)."""

    __slots__ = (
        "job_id", "version", "rules", "target", "timeout_us", "unparsed", "problem", "schedule",
        "misfire_policy", "misfire_threshold", "run_all_limit", "handler", "payload", "calendar",
        "_job", "_retry", "_host", "_lateness", "_target_delimited",
    )

    job_id: str
    version: int
    # -- the hand-out and the gateway's assignment
    rules: Rules
    """Overlap policy and concurrency keys (:mod:`.policy.admission`)."""
    target: job_pb2.Target
    timeout_us: int
    """The run's time limit, the default filled in."""
    unparsed: str | None
    """Why the bytes do not parse; None when they do. The other attributes
    then read an empty definition's values."""
    # -- the dispatcher's claim
    problem: str | None
    """Why the dispatcher cannot claim it (``job_unreadable``); None: the claim fields below are set."""
    schedule: Schedule | None
    misfire_policy: str
    misfire_threshold: timedelta
    run_all_limit: int
    handler: str | None
    """The handler name a worker must serve; None for an HTTP target."""
    payload: bytes
    calendar: JobCalendarRef | None
    """The business-day calendar the job names and its rule; None when it names none (or cannot be read)."""

    @classmethod
    def parse(cls, job_id: str, version: int, spec: bytes | None) -> "JobDefinition":
        """Read ``spec`` (None or empty: a deleted job's, read as an empty
        definition). Never raises: a definition this build cannot read
        (bytes that do not parse, an enum value or a target kind it does not
        know, a value out of the bounds the API enforces) gets ``problem``;
        bytes that do not parse are otherwise read as an empty definition."""
        decoded: str | None = None
        try:
            job = job_pb2.Job.FromString(spec) if spec else job_pb2.Job()
        except DecodeError as error:
            decoded = str(error)
            job = job_pb2.Job()
        self = cls.__new__(cls)
        self.job_id = job_id
        self.version = version
        self.rules = rules_of(job)
        self.target = target = job.target
        kind = target.WhichOneof("kind")
        self.timeout_us = _duration_us(job.timeout) if job.HasField("timeout") else DEFAULT_TIMEOUT_US
        self.unparsed = None if decoded is None else f"the definition does not parse: {decoded}"
        problem, schedule, self.misfire_threshold = _claim_of(job, job_id, kind)
        self.calendar = None
        if problem is None:
            try:
                self.calendar = calendar_ref_of(job)
            except InvalidArgument as error:
                problem = str(error)
        self.problem = self.unparsed if self.unparsed is not None else problem
        self.schedule = schedule if self.problem is None else None
        self.misfire_policy = MISFIRE_POLICIES.get(job.misfire_policy, "")
        self.run_all_limit = job.misfire_run_all_limit or DEFAULT_RUN_ALL_LIMIT
        self.handler = target.handler.name if kind == "handler" else None  # handler_of's answer
        self.payload = job.payload
        self._job = job
        self._retry = self._host = self._lateness = self._target_delimited = None
        return self

    def _of_job(self, job_id: str, version: int, message: job_pb2.Schedule, payload: bytes) -> "JobDefinition":
        """The definition of a job of this clean shape (see
        :class:`DefinitionShapes`) with its own ``schedule`` and ``payload``:
        what :meth:`parse` of its whole definition answers."""
        shape = self.schedule
        assert shape is not None and self.problem is None
        violations: list[FieldViolation] = []
        problem = None
        try:
            schedule = _schedule_kind(
                message, shape.gap, shape.repeat, shape.exact, shape.jitter_window, shape.start_at, shape.end_at,
                shape.max_runs, job_id, "job", violations,
            )
        except (ValueError, OverflowError) as error:  # as :func:`_claim_of` reads it
            schedule, problem = None, f"a value out of range: {error}"
        if violations:
            schedule, problem = None, str(InvalidArgument(violations))
        job = JobDefinition.__new__(JobDefinition)
        job.job_id = job_id
        job.version = version
        job.rules = self.rules
        job.target = self.target
        job.timeout_us = self.timeout_us
        job.unparsed = None
        job.problem = problem
        job.schedule = schedule
        job.misfire_policy = self.misfire_policy
        # A schedule's problem ends the claim's reading before the threshold and the calendar (_claim_of, parse).
        job.misfire_threshold = self.misfire_threshold if problem is None else _ZERO
        job.calendar = self.calendar if problem is None else None
        job.run_all_limit = self.run_all_limit
        job.handler = self.handler
        job.payload = payload
        job._job = self._job
        job._retry = self._retry
        job._host = self._host
        job._lateness = self._lateness
        job._target_delimited = self._target_delimited
        return job

    def __repr__(self) -> str:
        return f"JobDefinition({self.job_id!r}, version={self.version}, problem={self.problem!r})"

    @property
    def target_delimited(self) -> bytes:
        """``target`` serialized as a length-delimited field's value (its
        length as a varint, then its bytes), once: every assignment of this
        definition carries it (:func:`.gateway.assignments.add_assignment`)."""
        encoded = self._target_delimited
        if encoded is None:
            target = self.target.SerializeToString()
            encoded = self._target_delimited = varint(len(target)) + target
        return encoded

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy, the defaults filled in (the defaults too when it cannot be read)."""
        return self._retry_read()[0]

    @property
    def retry_problem(self) -> str | None:
        """Why the retry policy cannot be read (a backoff out of range); then
        :attr:`retry` holds the defaults and :meth:`retry_or_problem` says why."""
        return self._retry_read()[1]

    def _retry_read(self) -> tuple[RetryPolicy, str | None]:
        if self._retry is None:
            self._retry = _retry_of(self._job)
        return self._retry

    @property
    def breaker_host(self) -> str:
        """The host an HTTP target calls (the circuit breaker's key beside the tenant); '' for a handler."""
        if self._host is None:
            self._host = http_target_host(self._job)
        return self._host

    @property
    def lateness_threshold(self) -> timedelta:
        """How long a due execution may wait before it is late, the default filled in."""
        if self._lateness is None:
            self._lateness = _lateness_of(self._job)
        return self._lateness

    def retry_or_problem(self) -> RetryPolicy | str:
        """The retry policy, or why it cannot be read (the bytes do not
        parse, a backoff out of range): what :func:`.policy.outcome.decide` takes."""
        return self.unparsed or self.retry_problem or self.retry

    def host(self) -> str:
        """:attr:`breaker_host`; raises :class:`DecodeError` when the bytes do not parse."""
        if self.unparsed is not None:
            raise DecodeError(self.unparsed)
        return self.breaker_host


def _retry_of(job: job_pb2.Job) -> tuple[RetryPolicy, str | None]:
    policy = job.retry_policy
    if not (policy.max_attempts or policy.HasField("initial_backoff") or policy.HasField("max_backoff")):
        return _DEFAULT_RETRY, None
    try:
        return RetryPolicy(
            policy.max_attempts or DEFAULT_MAX_ATTEMPTS,
            policy.initial_backoff.ToTimedelta() if policy.HasField("initial_backoff") else DEFAULT_INITIAL_BACKOFF,
            policy.max_backoff.ToTimedelta() if policy.HasField("max_backoff") else DEFAULT_MAX_BACKOFF,
        ), None
    except (ValueError, OverflowError) as error:  # a Duration out of timedelta's range
        return _DEFAULT_RETRY, f"retry_policy: a value out of range: {error}"


def _lateness_of(job: job_pb2.Job) -> timedelta:
    """The lateness threshold; the default when unset or out of timedelta's range (the API bounds it to 30 days)."""
    if not job.HasField("lateness_threshold"):
        return DEFAULT_LATENESS_THRESHOLD
    try:
        return job.lateness_threshold.ToTimedelta()
    except (ValueError, OverflowError):
        return DEFAULT_LATENESS_THRESHOLD


def _claim_of(job: job_pb2.Job, job_id: str, kind: str | None) -> tuple[str | None, Schedule | None, timedelta]:
    """(why the dispatcher cannot claim it or None, its schedule, its
    misfire threshold); ``kind``: which target it names (None: none this server knows)."""
    if job.misfire_policy not in MISFIRE_POLICIES:
        return f"unknown misfire_policy value {job.misfire_policy}", None, _ZERO
    if kind is None:
        return "no target this server knows (target kind unset or unknown)", None, _ZERO
    run_all_limit = job.misfire_run_all_limit or DEFAULT_RUN_ALL_LIMIT
    if not 1 <= run_all_limit <= MAX_RUN_ALL_LIMIT:
        return f"misfire_run_all_limit {run_all_limit} is outside 1..{MAX_RUN_ALL_LIMIT}", None, _ZERO
    try:
        schedule = schedule_of(job, job_id)
        threshold = _duration(job.misfire_threshold) if job.HasField("misfire_threshold") else _ZERO
    except InvalidArgument as error:
        return str(error), None, _ZERO
    except (ValueError, OverflowError) as error:  # a Timestamp or Duration out of datetime's range
        return f"a value out of range: {error}", None, _ZERO
    if threshold < _ZERO:
        return "misfire_threshold is negative", None, _ZERO
    return None, schedule, threshold


_ZERO = timedelta(0)


def _toward_zero_us(nanos: int) -> int:
    return nanos // 1000 if nanos >= 0 else -(-nanos // 1000)


def _duration_us(duration) -> int:
    """``Duration.ToMicroseconds()``: nanoseconds rounded toward zero, without its method's Python calls."""
    return duration.seconds * 1_000_000 + _toward_zero_us(duration.nanos)


def _duration(duration) -> timedelta:
    """``Duration.ToTimedelta()``, the same way (raises as it does past timedelta's range)."""
    return timedelta(0, duration.seconds, _toward_zero_us(duration.nanos))


NO_DEFINITION = JobDefinition.parse("", 0, None)
"""The definition of an execution whose job was deleted: every default."""


_PER_JOB = ("name", "payload", "schedule")
"""The fields by which jobs of one shape differ (with ``labels``, which no reader reads)."""
_PLACEHOLDER_SCHEDULE = job_pb2.Schedule(once_at=timestamp_pb2.Timestamp()).SerializeToString()
"""A valid schedule (a one-off at the epoch) a shape is read with: what the
rest of its definition makes of the job does not depend on it."""


def _opening(spec: bytes) -> tuple[int, int] | None:
    """Where the schedule's bytes start and end in ``spec`` when it opens
    with its name then its schedule (or its schedule alone), each length
    one byte long; None otherwise (see :class:`DefinitionShapes`)."""
    at = 2 + spec[1] if len(spec) > 1 and spec[0] == 0x1A and spec[1] < 0x80 else 0  # field 3, length-delimited
    if len(spec) > at + 1 and spec[at] == 0x22 and spec[at + 1] < 0x80:  # field 4, length-delimited
        end = at + 2 + spec[at + 1]
        if end <= len(spec):
            return at + 2, end
    return None


class DefinitionShapes:
    """Definitions read once per shape: jobs whose definitions differ only
    in name, payload, labels and schedule (a batch of one-offs, a tenant's
    jobs made by one program) share what the rest makes of them.

    :meth:`parse` answers what :meth:`JobDefinition.parse` answers. Sound
    because the parse reads the name and the labels nowhere, the payload
    only to keep it, and the schedule only to build the :class:`Schedule`
    (:func:`_schedule_kind`) after the job's other schedule fields were
    read without a violation: every other attribute is a function of the
    shape (the definition serialized without those four fields). A shape
    is used only when it is clean, that is, read with a valid placeholder
    schedule it has no ``problem``: then a job's problem can only come from
    its own schedule, as in a full parse. A shape with a problem is read in
    full each time, as is a definition that does not parse.

    Tails: a definition as the API stores it opens with its name (field 3)
    and its schedule (field 4), fields being serialized in number order
    (the id and the tenant are not stored). The bytes after the schedule
    (its tail) are then everything but those two: a tail already seen
    gives its shape and its payload (the last payload field, which only a
    tail holds) without parsing the definition, and only its schedule's
    bytes are parsed. Sound because a tail is kept only when it holds no
    schedule field of its own (parsed alone, none is present): then the
    job's schedule is the one its opening bytes hold, as a full parse
    merges it; its name is read nowhere. Anything else (another opening,
    a length over one byte, bytes that do not parse) takes the way above.
    Jobs whose payloads all differ miss every tail, and each miss costs a
    parse of its tail more: when a full table of tails is emptied having
    served fewer reads than it holds, tails are left alone for the next
    ``tails_off_for`` definitions (a heuristic of speed only: either way
    the answer is a full parse's).

    Bounded: at most ``max_shapes`` shapes and as many tails, of at most
    ``max_key_bytes`` each; a full table is emptied and refills. Safe to
    share between threads (a shape, once made, is never changed)."""

    def __init__(self, max_shapes: int = 512, max_key_bytes: int = 4096, tails_off_for: int = 20_000) -> None:
        if max_shapes < 1 or max_key_bytes < 0 or tails_off_for < 0:
            raise ValueError("max_shapes must be >= 1, max_key_bytes and tails_off_for >= 0")
        self.max_shapes = max_shapes
        self.max_key_bytes = max_key_bytes
        self.tails_off_for = tails_off_for
        self._shapes: dict[bytes, JobDefinition | None] = {}
        self._tails: dict[bytes, tuple[JobDefinition, bytes]] = {}
        """A tail (see above) → its clean shape and its payload."""
        self._parsed = 0
        self._tails_off_until = 0
        """While :attr:`_parsed` is below it, tails are neither read nor kept."""
        self._tail_reads = 0
        """Definitions read through the tails now held."""

    def __len__(self) -> int:
        return len(self._shapes)

    def parse(self, job_id: str, version: int, spec: bytes | None) -> JobDefinition:
        """:meth:`JobDefinition.parse` of ``spec`` (``job_id`` at ``version``), the same value."""
        if not spec:
            return JobDefinition.parse(job_id, version, spec)
        self._parsed += 1
        opening = _opening(spec) if self._parsed >= self._tails_off_until else None
        if opening is not None:
            known = self._tails.get(spec[opening[1]:])
            if known is not None:
                try:
                    schedule = job_pb2.Schedule.FromString(spec[opening[0]:opening[1]])
                except DecodeError:
                    pass
                else:
                    self._tail_reads += 1
                    return known[0]._of_job(job_id, version, schedule, known[1])
        try:
            job = job_pb2.Job.FromString(spec)
        except DecodeError:
            return JobDefinition.parse(job_id, version, spec)
        schedule, payload = job.schedule, job.payload  # kept as they were when cleared below
        for name in _PER_JOB:
            job.ClearField(name)
        if job.labels:
            job.ClearField("labels")
        key = job.SerializeToString(deterministic=True)
        shape = self._shapes.get(key, self)
        if shape is self:
            shape = self._learn(key, job)
        if shape is None:
            return JobDefinition.parse(job_id, version, spec)
        if opening is not None:
            self._keep_tail(spec[opening[1]:], shape, payload)
        return shape._of_job(job_id, version, schedule, payload)

    def _keep_tail(self, tail: bytes, shape: JobDefinition, payload: bytes) -> None:
        """Keep ``tail`` (of a definition of clean ``shape``, its payload
        ``payload``) unless it holds a schedule field or is over the bound."""
        if len(tail) > self.max_key_bytes:
            return
        try:
            if job_pb2.Job.FromString(tail).HasField("schedule"):
                return
        except DecodeError:
            return
        if len(self._tails) >= self.max_shapes:
            if self._tail_reads < len(self._tails):  # mostly missed: every job a payload of its own
                self._tails_off_until = self._parsed + self.tails_off_for
            self._tails.clear()
            self._tail_reads = 0
        self._tails[tail] = (shape, payload)

    def _learn(self, key: bytes, job: job_pb2.Job) -> JobDefinition | None:
        """The definition of ``job`` (without its per-job fields) with the
        placeholder schedule, None when it has a problem; kept under ``key``."""
        job.schedule.MergeFromString(_PLACEHOLDER_SCHEDULE)
        shape: JobDefinition | None = JobDefinition.parse("", 0, job.SerializeToString())
        assert shape is not None
        if shape.problem is not None:
            shape = None
        else:
            # What its jobs read on first use, read once for all of them.
            shape._retry_read()
            shape.lateness_threshold  # noqa: B018
            shape.breaker_host  # noqa: B018
            shape.target_delimited  # noqa: B018
        if len(key) <= self.max_key_bytes:
            if len(self._shapes) >= self.max_shapes:
                self._shapes.clear()
            self._shapes[key] = shape
        return shape


class DefinitionCache:
    """Parsed definitions by job id, valid for one job version: a bounded LRU.

    Sound because a job's ``spec`` changes only with its ``version``
    (``JobStore.update`` replaces both; ids are never reused), so an entry
    recorded for another version is parsed again and replaced: an update is
    never served stale. Bounded by ``max_entries`` and by
    ``max_payload_bytes`` (payloads are up to the tenant's
    ``max_payload_bytes`` each); the least recently used entries go first.
    Safe to share between threads (claims, hand-outs and results run in
    executor threads); one instance serves a server's dispatcher, hand-out
    and outcomes, so what the claim parsed the hand-out finds."""

    def __init__(self, max_entries: int = 100_000, max_payload_bytes: int = 64 << 20) -> None:
        if max_entries < 1 or max_payload_bytes < 0:
            raise ValueError("max_entries must be >= 1 and max_payload_bytes >= 0")
        self.max_entries = max_entries
        self.max_payload_bytes = max_payload_bytes
        self._entries: OrderedDict[str, JobDefinition] = OrderedDict()
        self._payload_bytes = 0
        self._lock = threading.Lock()
        self._shapes = DefinitionShapes()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def payload_bytes(self) -> int:
        return self._payload_bytes

    def cached(self, job_id: str, version: int) -> JobDefinition | None:
        """The definition of ``job_id`` at ``version`` if held (None otherwise)."""
        with self._lock:
            found = self._entries.get(job_id)
            if found is not None and found.version == version:
                self._entries.move_to_end(job_id)
                self.hits += 1
                return found
        return None

    def get(self, job_id: str, version: int, spec: bytes | None) -> JobDefinition:
        """The definition of ``job_id`` at ``version`` (its bytes ``spec``),
        from the cache or parsed now (see :meth:`JobDefinition.parse`)."""
        found = self.cached(job_id, version)
        if found is not None:
            return found
        return self.parse(job_id, version, spec)

    def parse(self, job_id: str, version: int, spec: bytes | None) -> JobDefinition:
        """Parse ``spec`` (``job_id`` at ``version``) and keep it, without
        looking it up first: for a caller whose :meth:`cached` just missed
        (the claim's one-offs miss every time)."""
        parsed = self._shapes.parse(job_id, version, bytes(spec) if spec is not None else None)
        with self._lock:
            self.misses += 1
            old = self._entries.pop(job_id, None)
            if old is not None:
                self._payload_bytes -= len(old.payload)
            size = len(parsed.payload)
            if size <= self.max_payload_bytes:
                self._entries[job_id] = parsed
                self._payload_bytes += size
                while len(self._entries) > self.max_entries or self._payload_bytes > self.max_payload_bytes:
                    _, evicted = self._entries.popitem(last=False)
                    self._payload_bytes -= len(evicted.payload)
        return parsed
