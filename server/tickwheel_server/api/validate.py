"""Job validation: every problem found at once, each naming its field.

Pure: takes a ``tickwheel.v1.Job`` and returns the normalised job (defaults
filled in, so GetJob shows what is in force) and its :class:`Schedule`, or
raises :class:`InvalidArgument` listing every violation. Nothing is written
before this passes.

An HTTP target's URL is checked against the server's address policy
(:mod:`tickwheel.shared.targets`) without DNS: an IP literal or ``localhost``
in a refused range is refused here; a host name is checked by the worker,
after resolution, when it is called.

Every field is bounded: text by length and by the characters it may hold
(:mod:`.text`), instants and durations first against protobuf's own range
and then against the field's (checked before any conversion, which would
raise), and the definition as a whole by its serialized size without the
payload (:data:`MAX_DEFINITION_BYTES`; the payload is the tenant's quota).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from google.protobuf import duration_pb2
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import from_us, to_us
from tickwheel.shared.targets import ALLOW_FLAG, DEFAULT_POLICY, TargetPolicy

from ..errors import FieldViolation, InvalidArgument
from ..fields import duration_problem
from ..wire import length_prefix
from ..jobspec import (
    DEFAULT_INITIAL_BACKOFF, DEFAULT_LATENESS_THRESHOLD, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BACKOFF,
    DEFAULT_RUN_ALL_LIMIT, DEFAULT_TIMEOUT, EARLIEST_INSTANT, LATEST_INSTANT, calendar_ref_of, key_limits, schedule_of,
)
from .text import HEADER_NAME, HEADER_VALUE, shown, text_problem
from ..schedule import (
    Fire, Schedule, ScheduleError, ScheduleKind, fires_depend_on_job_id, jitter_micros_within, jitter_window,
)
from ..schedule import validate as validate_schedule

NAME_MAX = 200
HANDLER_MAX = 200
"""The longest handler name, a job's and a worker's hello's."""
HANDLER = re.compile(rf"^[A-Za-z0-9_.:-]{{1,{HANDLER_MAX}}}\Z")
KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,128}\Z")
LABEL_KEY = re.compile(r"^[a-z0-9_.-]{1,63}\Z")
_REQUEST_ID = r"[A-Za-z0-9_.:-]{1,128}"
REQUEST_ID = re.compile(rf"^{_REQUEST_ID}\Z")
ID = re.compile(r"^[\x21-\x7e]{1,256}\Z")
URL_CHARACTERS = re.compile(r"^[\x21-\x7e]*\Z")
HTTP_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
RESERVED_HEADERS = {"idempotency-key", "traceparent"}
"""Headers the worker sets itself, besides every ``Tickwheel-*`` header."""
FRAMING_HEADERS = {
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "upgrade", "te",
    "trailer", "expect",
}  # fmt: skip
"""Headers that would change where the request goes or how it is framed."""
MAX_HEADERS = 32
MAX_HEADER_NAME = 128
MAX_HEADER_VALUE = 4096
MAX_HEADERS_BYTES = 16 * 1024
MAX_LABELS = 32
MAX_LABEL_VALUE = 256
MAX_DEFINITION_BYTES = 64 * 1024
"""A job's serialized definition without its payload, at most (INVALID_ARGUMENT
``job``); the payload counts against the tenant's ``max_payload_bytes``, so a
stored definition is at most that quota plus this."""

MAX_TIMEOUT = timedelta(hours=6)
DEFAULT_MISFIRE_THRESHOLD = timedelta(seconds=60)
MIN_BACKOFF = timedelta(milliseconds=100)
MAX_BACKOFF = timedelta(hours=24)
MAX_THRESHOLD = timedelta(days=30)
"""The longest misfire or lateness threshold."""

def _duration(span: timedelta) -> duration_pb2.Duration:
    micros = (span.days * 86_400 + span.seconds) * 1_000_000 + span.microseconds
    seconds, rest = divmod(micros, 1_000_000)
    if seconds < 0 and rest:  # protobuf: nanos take the sign of seconds
        seconds, rest = seconds + 1, rest - 1_000_000
    return duration_pb2.Duration(seconds=seconds, nanos=rest * 1000)


_REQUEST_ID_LINES = re.compile(rf"(?:{_REQUEST_ID}\n)*")


def request_ids_valid(values: Sequence[str]) -> bool:
    """Whether :func:`check_request_id` accepts every one of ``values``:
    one match over them each ended by a newline (which no valid id holds:
    an id holding one makes more lines than ids). False says only that
    some are refused: check each to know which."""
    joined = "\n".join(values) + "\n" if values else ""
    return joined.count("\n") == len(values) and _REQUEST_ID_LINES.fullmatch(joined) is not None


def check_request_id(value: str, field: str = "request_id") -> str:
    if not REQUEST_ID.match(value):
        raise InvalidArgument.field(field, "required: 1 to 128 characters of [A-Za-z0-9_.:-]")
    return value


def check_id(value: str, field: str) -> str:
    """An id the caller names (a job, an execution): required, at most 256
    printable ASCII characters without spaces; anything else could not be
    one of ours."""
    if not value:
        raise InvalidArgument.field(field, "required")
    if not ID.match(value):
        raise InvalidArgument.field(field, "not an id: at most 256 printable ASCII characters without spaces")
    return value


def check_text(value: str, field: str, max_chars: int, *, required: bool = False) -> str:
    """Free text (a reason, a description, a name prefix): see :mod:`.text`."""
    problem = text_problem(value, max_chars, required=required)
    if problem is not None:
        raise InvalidArgument.field(field, problem)
    return value


def _span(message, name: str, field: str, default: timedelta, violations: list[FieldViolation]) -> timedelta | None:
    """``message.<name>`` as a timedelta, ``default`` when unset, None (and a
    violation on ``field``) when it is not a valid protobuf Duration."""
    if not message.HasField(name):
        return default
    value = getattr(message, name)
    problem = duration_problem(value)
    if problem is not None:
        violations.append(FieldViolation(field, problem))
        return None
    return value.ToTimedelta()


def _header_violations(headers, field: str) -> list[FieldViolation]:
    violations: list[FieldViolation] = []
    if len(headers) > MAX_HEADERS:
        return [FieldViolation(field, f"at most {MAX_HEADERS} headers")]
    seen: set[str] = set()
    size = 0
    for name, value in sorted(headers.items()):
        where = f"{field}[{shown(name)}]"
        lowered = name.lower()
        size += len(name) + len(value)
        if not name or len(name) > MAX_HEADER_NAME or not HEADER_NAME.match(name):
            violations.append(FieldViolation(where, f"a header name is an RFC 9110 token of 1 to {MAX_HEADER_NAME} characters"))
        elif lowered in RESERVED_HEADERS or lowered.startswith("tickwheel-"):
            violations.append(FieldViolation(where, "cannot be set: Tickwheel sets it"))
        elif lowered in FRAMING_HEADERS:
            violations.append(FieldViolation(where, "cannot be set: it changes the request's routing or framing"))
        elif lowered in seen:
            violations.append(FieldViolation(where, "named twice (header names are case-insensitive)"))
        seen.add(lowered)
        if len(value) > MAX_HEADER_VALUE or not HEADER_VALUE.match(value):
            violations.append(FieldViolation(
                where, f"a header value is at most {MAX_HEADER_VALUE} characters of printable ASCII, spaces and tabs "
                "(no CR, LF or NUL)",
            ))  # fmt: skip
    if size > MAX_HEADERS_BYTES:
        violations.append(FieldViolation(field, f"names and values together at most {MAX_HEADERS_BYTES} characters"))
    return violations


def _label_violations(labels, field: str) -> list[FieldViolation]:
    violations = []
    if len(labels) > MAX_LABELS:
        violations.append(FieldViolation(f"{field}.labels", f"at most {MAX_LABELS} labels"))
    for key, value in sorted(labels.items()):
        where = f"{field}.labels[{shown(key)}]"
        if not LABEL_KEY.match(key):
            violations.append(FieldViolation(where, "a label key is 1 to 63 characters of [a-z0-9_.-]"))
        value_problem = text_problem(value, MAX_LABEL_VALUE)
        if value_problem is not None:
            violations.append(FieldViolation(where, f"a label value: {value_problem}"))
    return violations


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
    if (parts is None or len(http.url) > 2048 or not URL_CHARACTERS.match(http.url)
            or parts.scheme not in ("http", "https") or not parts.hostname):
        violations.append(FieldViolation(
            f"{field}.http.url", "an absolute http or https URL of at most 2048 printable ASCII characters (no spaces)"
        ))  # fmt: skip
    elif (refusal := policy.url_refusal(http.url)) is not None:
        violations.append(FieldViolation(
            f"{field}.http.url",
            f"refused by the target address policy: {refusal}; HTTP targets may not reach loopback, link-local, "
            f"private, unspecified or reserved addresses unless the operator allows the network ({ALLOW_FLAG})",
        ))
    if http.method and http.method.upper() not in HTTP_METHODS:
        violations.append(FieldViolation(f"{field}.http.method", f"one of {sorted(HTTP_METHODS)}"))
    violations += _header_violations(http.headers, f"{field}.http.headers")
    return violations


def normalise_job(
    job: job_pb2.Job, now: datetime, field: str = "job", *, target_policy: TargetPolicy = DEFAULT_POLICY
) -> job_pb2.Job:
    """A copy of ``job`` with its definition validated and defaults filled in,
    output-only fields cleared. The schedule must fire after ``now`` (or be a
    one-off); an HTTP target's URL must pass ``target_policy`` (the server's,
    from ``--allow-target-network``; without one, nothing is allow-listed).
    Raises InvalidArgument listing every problem."""
    return _normalise(job, now, field, target_policy, "job_validation")[0]


Definition = tuple[bytes, int, int, str, tuple[tuple[str, int], ...]]
"""What :func:`new_definition` decides for a job: its normalised definition
serialized, its first fire's nominal and due instants (microseconds since
the epoch), the zone it is stored under (:func:`zone_of`) and its
concurrency-key limits (:func:`~tickwheel_server.jobspec.key_limits`)."""


def new_definition(
    job: job_pb2.Job, now: datetime, job_id: str, *, target_policy: TargetPolicy = DEFAULT_POLICY
) -> Definition:
    """:func:`new_job` as the store takes it (:data:`Definition`), without
    a message or a datetime per job: a job of a known shape is its
    template's serialized definition followed by its own name, payload
    and labels serialized, which parses as the normalised job (a field
    appears once; the order of fields does not change a message)."""
    spec, template, _, next_run, next_due = _definition(job, now, job_id, target_policy)
    return spec, next_run, next_due, template.zone, template.key_limits


def new_job(
    job: job_pb2.Job, now: datetime, job_id: str, *, target_policy: TargetPolicy = DEFAULT_POLICY
) -> tuple[job_pb2.Job, Schedule, Fire]:
    """:func:`normalise_job` for a job about to be created as ``job_id``:
    the normalised definition, its schedule and its first fire, the
    schedule computed and validated once (its jitter is the job id's).

    Jobs that differ only in name, labels and payload (a batch's usual
    shape) share one validated template (:class:`_Template`): the first is
    validated in full, the next ones check their name, labels and size and
    take their schedule and first fire from it. Same answers and same
    violations as validating each in full
    (``tests/unit/api/test_validate_templates.py``)."""
    spec, template, first, _, next_due = _definition(job, now, job_id, target_policy)
    return (job_pb2.Job.FromString(spec), template.schedule.for_job(job_id),
            Fire(first.nominal_at, from_us(next_due), first.utc_offset, first.note))  # fmt: skip


def _definition(
    job: job_pb2.Job, now: datetime, job_id: str, target_policy: TargetPolicy
) -> tuple[bytes, _Template, Fire, int, int]:
    """(the serialized definition, its template, its first fire as the
    template knows it (not jittered unless computed for this job), the
    nominal and due instants in microseconds); InvalidArgument listing
    every violation."""
    # The shape keeps any output-only field the request set: _normalise
    # clears them, so such a job only misses the template a job without
    # them made and makes its own (equal) one.
    check_counts(job, "job")
    key, name, payload, labels = _shape_key(job)
    template = _TEMPLATES.get(key)
    if template is None or not (template.policy is target_policy or template.policy == target_policy):
        out, schedule, fire = _normalise(job, now, "job", target_policy, job_id)
        assert schedule is not None and fire is not None  # no violation: both computed
        template = _Template(out, schedule, fire, now, target_policy)
        if len(key) <= MAX_TEMPLATE_BYTES:
            if len(_TEMPLATES) >= MAX_TEMPLATES:
                _TEMPLATES.clear()
            _TEMPLATES[key] = template
        return out.SerializeToString(), template, fire, to_us(fire.nominal_at), to_us(fire.due_at)
    return template.definition(name, payload, labels, now, job_id)


MAX_CONCURRENCY_KEYS = 8


def check_counts(job: job_pb2.Job, field: str) -> None:
    """InvalidArgument naming each of ``job``'s labels, concurrency keys and
    HTTP headers that holds more entries than it may, before anything of
    the job is copied or read: copying a map is Python-slow in upb (300 000
    labels, which fit a 4 MiB request, took 4.5 s), and an empty
    concurrency key is 2 bytes on the wire."""
    violations = []
    if len(job.labels) > MAX_LABELS:
        violations.append(FieldViolation(f"{field}.labels", f"at most {MAX_LABELS} labels"))
    if len(job.concurrency_keys) > MAX_CONCURRENCY_KEYS:
        violations.append(FieldViolation(f"{field}.concurrency_keys", f"at most {MAX_CONCURRENCY_KEYS} keys"))
    if len(job.target.http.headers) > MAX_HEADERS:
        violations.append(FieldViolation(f"{field}.target.http.headers", f"at most {MAX_HEADERS} headers"))
    if violations:
        raise InvalidArgument(violations)


def _shape_key(job: job_pb2.Job) -> tuple[bytes, str, bytes, dict[str, str]]:
    """(``job`` serialized without its name, payload and labels, which is
    its shape's key; its name; its payload; its labels). Without labels
    (a batch's usual job) the name and the payload are taken out of
    ``job`` itself and put back, rather than a copy made: proto3 scalars
    without presence, so ``job`` is left as it was."""
    name, payload = job.name, job.payload
    if not job.labels:
        job.ClearField("name")
        job.ClearField("payload")
        try:
            # Not ``deterministic``: a key needs only that equal bytes be
            # equal shapes (they parse to one message); a map
            # (``target.http.headers``) serialized in another order only
            # makes an equal template of its own.
            return job.SerializeToString(), name, payload, {}
        finally:
            job.name = name
            job.payload = payload
    shape = job_pb2.Job()
    shape.CopyFrom(job)
    labels = dict(shape.labels)
    shape.ClearField("name")
    shape.ClearField("payload")
    shape.ClearField("labels")
    return shape.SerializeToString(deterministic=True), name, payload, labels


MAX_TEMPLATES = 512
"""Validated templates kept (:func:`new_job`); a full cache is emptied and refills."""
MAX_TEMPLATE_BYTES = 4096
"""A definition (without name, labels and payload) longer than this,
serialized, is validated in full every time rather than kept: the cache
holds at most about ``MAX_TEMPLATES`` times this."""
_OUTPUT_ONLY = ("id", "tenant", "state", "next_run_at", "next_due_at", "run_count", "version", "tzdata_version",
                "last_run", "created_at", "updated_at", "pause_reason")  # fmt: skip


class _Template:
    """A definition that passed validation in full, without its name,
    labels and payload: what every job of the same shape (its serialized
    definition without name, labels and payload, and the same target
    policy) normalises to. Sound because :func:`_normalise`
    reads the name and the labels only to check each on its own and the
    payload only to size the definition, and everything else (defaults,
    target, policies, the schedule's fields) is a function of the shape;
    the job id and ``now`` enter only the first fire, computed per job
    here. Immutable but for ``last``, a one-entry memo that a race can only
    recompute."""

    __slots__ = ("prefix", "schedule", "by_job_id", "window_ms", "zone", "key_limits", "policy", "last")

    def __init__(self, out: job_pb2.Job, schedule: Schedule, fire: Fire, now: datetime, policy: TargetPolicy) -> None:
        job = job_pb2.Job()
        job.CopyFrom(out)
        job.ClearField("name")
        job.ClearField("payload")
        job.ClearField("labels")
        self.prefix = job.SerializeToString()
        """The shape's normalised definition, serialized."""
        self.schedule = schedule.for_job("")
        self.by_job_id = fires_depend_on_job_id(schedule)
        """The nominal fires depend on the job id (``H``): computed per job."""
        self.window_ms = jitter_window(schedule) // timedelta(milliseconds=1)
        """Each job's due instant is its nominal one plus its own delay in this window (milliseconds)."""
        self.zone = zone_of(schedule)
        self.key_limits = key_limits(out)
        self.policy = policy
        unjittered = Fire(fire.nominal_at, fire.nominal_at, fire.utc_offset, fire.note)
        self.last: tuple[datetime, Fire | FieldViolation, int] = (now, unjittered, to_us(fire.nominal_at))
        """(``now``, the first fire after it without jitter or the violation
        saying why there is none, that fire's nominal instant in
        microseconds), for the last ``now`` computed; it answers every
        later ``now`` before that fire too (CreateJob calls each ask at
        their own instant)."""

    def definition(
        self, name: str, payload: bytes, labels: dict[str, str], now: datetime, job_id: str
    ) -> tuple[bytes, _Template, Fire, int, int]:
        """:func:`_definition` of this shape with ``name``, ``payload`` and ``labels`` as ``job_id`` at ``now``."""
        violations: list[FieldViolation] = []
        name_problem = text_problem(name, NAME_MAX, required=True)
        if name_problem is not None:
            violations.append(FieldViolation("job.name", name_problem))
        if labels:
            violations += _label_violations(labels, "job")
        fire: Fire | None = None
        next_run = next_due = 0
        if self.by_job_id:
            try:
                fire = validate_schedule(self.schedule.for_job(job_id), now)
                next_run, next_due = to_us(fire.nominal_at), to_us(fire.due_at)
            except ScheduleError as error:
                violations.append(FieldViolation(f"job.{error.field}", error.reason))
        else:
            last = self.last
            # The first fire after the memo's instant is still the first
            # after a later ``now`` that precedes it: the fires are
            # strictly after ``now`` and do not depend on it otherwise.
            if last[0] != now and not (last[0] < now and type(last[1]) is Fire and now < last[1].nominal_at):
                try:
                    first = validate_schedule(self.schedule, now)
                    last = (now, first, to_us(first.nominal_at))
                except ScheduleError as error:
                    last = (now, FieldViolation(f"job.{error.field}", error.reason), 0)
                self.last = last
            if isinstance(last[1], FieldViolation):
                violations.append(last[1])
            else:
                fire, next_run = last[1], last[2]
                next_due = next_run + jitter_micros_within(job_id, self.window_ms)
        # Serialized as protobuf would (an empty field is left out), so the size below is ByteSize's.
        encoded = name.encode()
        spec = b"".join((
            self.prefix,
            _NAME_TAG + length_prefix(encoded) + encoded if encoded else b"",
            _PAYLOAD_TAG + length_prefix(payload) + payload if payload else b"",
            job_pb2.Job(labels=labels).SerializeToString() if labels else b"",
        ))  # fmt: skip
        definition = len(spec) - len(payload)
        if definition > MAX_DEFINITION_BYTES:
            violations.append(FieldViolation(
                "job",
                f"the definition without its payload is {definition} bytes serialized; at most {MAX_DEFINITION_BYTES}",
            ))  # fmt: skip
        if violations:
            raise InvalidArgument(violations)
        assert fire is not None
        return spec, self, fire, next_run, next_due


_TEMPLATES: dict[bytes, _Template] = {}
_NAME_TAG = b"\x1a"  # Job.name = 3, length-delimited
_PAYLOAD_TAG = b"\x5a"  # Job.payload = 11, length-delimited
assert job_pb2.Job.DESCRIPTOR.fields_by_name["name"].number == 3
assert job_pb2.Job.DESCRIPTOR.fields_by_name["payload"].number == 11




_OVERLAP_POLICIES = frozenset(job_pb2.OverlapPolicy.values())
_MISFIRE_POLICIES = frozenset(job_pb2.MisfirePolicy.values())


def _normalise(
    job: job_pb2.Job, now: datetime, field: str, target_policy: TargetPolicy, job_id: str
) -> tuple[job_pb2.Job, Schedule | None, Fire | None]:
    check_counts(job, field)
    violations: list[FieldViolation] = []
    out = job_pb2.Job()
    out.CopyFrom(job)
    for output_only in _OUTPUT_ONLY:
        out.ClearField(output_only)
    name_problem = text_problem(out.name, NAME_MAX, required=True)
    if name_problem is not None:
        violations.append(FieldViolation(f"{field}.name", name_problem))
    violations += _target_violations(out.target, f"{field}.target", target_policy)
    timeout = _span(out, "timeout", f"{field}.timeout", DEFAULT_TIMEOUT, violations)
    if timeout is not None:
        if not timedelta(0) < timeout <= MAX_TIMEOUT:
            violations.append(FieldViolation(f"{field}.timeout", "must be more than 0 and at most 6 hours"))
        out.timeout.CopyFrom(_duration(timeout))
    retry = out.retry_policy
    attempts = retry.max_attempts or DEFAULT_MAX_ATTEMPTS
    initial = _span(retry, "initial_backoff", f"{field}.retry_policy.initial_backoff", DEFAULT_INITIAL_BACKOFF, violations)
    default_cap = max(DEFAULT_MAX_BACKOFF, initial) if initial is not None else DEFAULT_MAX_BACKOFF
    cap = _span(retry, "max_backoff", f"{field}.retry_policy.max_backoff", default_cap, violations)
    if not 1 <= attempts <= 100:
        violations.append(FieldViolation(f"{field}.retry_policy.max_attempts", "must be between 1 and 100"))
    if initial is not None and not MIN_BACKOFF <= initial <= MAX_BACKOFF:
        violations.append(FieldViolation(f"{field}.retry_policy.initial_backoff", "at least 100 ms and at most 24 hours"))
    if cap is not None and initial is not None and (cap < initial or cap > MAX_BACKOFF):
        violations.append(FieldViolation(f"{field}.retry_policy.max_backoff", "at least initial_backoff and at most 24 hours"))
    out.retry_policy.max_attempts = attempts
    if initial is not None and cap is not None:
        out.retry_policy.initial_backoff.CopyFrom(_duration(initial))
        out.retry_policy.max_backoff.CopyFrom(_duration(cap))
    if out.overlap_policy not in _OVERLAP_POLICIES:
        violations.append(FieldViolation(f"{field}.overlap_policy", "unknown value"))
    elif out.overlap_policy == job_pb2.OVERLAP_POLICY_UNSPECIFIED:
        out.overlap_policy = job_pb2.OVERLAP_POLICY_SKIP
    if out.misfire_policy not in _MISFIRE_POLICIES:
        violations.append(FieldViolation(f"{field}.misfire_policy", "unknown value"))
    elif out.misfire_policy == job_pb2.MISFIRE_POLICY_UNSPECIFIED:
        out.misfire_policy = job_pb2.MISFIRE_POLICY_RUN_ONCE
    threshold = _span(out, "misfire_threshold", f"{field}.misfire_threshold", DEFAULT_MISFIRE_THRESHOLD, violations)
    if threshold is not None:
        if not timedelta(0) <= threshold <= MAX_THRESHOLD:
            violations.append(FieldViolation(f"{field}.misfire_threshold", "must be >= 0 and at most 30 days"))
        out.misfire_threshold.CopyFrom(_duration(threshold))
    limit = out.misfire_run_all_limit or DEFAULT_RUN_ALL_LIMIT
    if not 1 <= limit <= 10_000:
        violations.append(FieldViolation(f"{field}.misfire_run_all_limit", "must be between 1 and 10000"))
    out.misfire_run_all_limit = limit
    lateness = _span(out, "lateness_threshold", f"{field}.lateness_threshold", DEFAULT_LATENESS_THRESHOLD, violations)
    if lateness is not None:
        if not timedelta(0) <= lateness <= MAX_THRESHOLD:
            violations.append(FieldViolation(
                f"{field}.lateness_threshold", "must be >= 0 (0 disables the alert) and at most 30 days"
            ))  # fmt: skip
        out.lateness_threshold.CopyFrom(_duration(lateness))
    named: set[str] = set()  # at most MAX_CONCURRENCY_KEYS (check_counts)
    for index, key in enumerate(out.concurrency_keys):
        if not KEY.match(key.key):
            violations.append(FieldViolation(f"{field}.concurrency_keys[{index}].key", "1 to 128 characters of [A-Za-z0-9_.:-]"))
        elif key.key in named:
            violations.append(FieldViolation(f"{field}.concurrency_keys[{index}].key", f"{key.key!r} is named twice"))
        named.add(key.key)
        if key.limit < 1:
            violations.append(FieldViolation(f"{field}.concurrency_keys[{index}].limit", "must be >= 1"))
    violations += _label_violations(out.labels, field)
    try:
        calendar_ref_of(out, field)
    except InvalidArgument as error:
        violations += error.violations
    if out.dst_policy.gap == job_pb2.DST_GAP_POLICY_UNSPECIFIED:
        out.dst_policy.gap = job_pb2.DST_GAP_POLICY_AUTO
    if out.dst_policy.repeat == job_pb2.DST_REPEAT_POLICY_UNSPECIFIED:
        out.dst_policy.repeat = job_pb2.DST_REPEAT_POLICY_AUTO
    schedule = fire = None
    try:
        schedule = schedule_of(out, job_id=job_id, field=field)
        fire = validate_schedule(schedule, now)
    except InvalidArgument as error:
        violations += error.violations
    except ScheduleError as error:
        violations.append(FieldViolation(f"{field}.{error.field}", error.reason))
    definition = out.ByteSize() - len(out.payload)
    if definition > MAX_DEFINITION_BYTES:
        violations.append(FieldViolation(
            field, f"the definition without its payload is {definition} bytes serialized; at most {MAX_DEFINITION_BYTES}"
        ))  # fmt: skip
    if violations:
        raise InvalidArgument(violations)
    return out, schedule, fire


def bounded_instant(message, field: str) -> datetime:
    """An instant a request names for the schedule engine (PreviewSchedule's
    ``after``, BackfillJob's window): a valid Timestamp within
    [EARLIEST_INSTANT, LATEST_INSTANT), INVALID_ARGUMENT ``field`` otherwise.
    Instants outside have no occurrence a job could have, and the engine's
    arithmetic near protobuf's limits would overflow."""
    from .convert import instant  # convert loads the store's records: `tickwheel apply` checks jobs without them

    at = instant(message, field)
    if not EARLIEST_INSTANT <= at < LATEST_INSTANT:
        raise InvalidArgument.field(field, "must be between 1970-01-01T00:00:00Z and 9999-01-01T00:00:00Z (exclusive)")
    return at


def backfill_window(request, now: datetime) -> tuple[datetime, datetime]:
    """BackfillJob's ``[from_at, to_at)``: both required and bounded
    (:func:`bounded_instant`), ``to_at`` after ``from_at`` and not after
    ``now``. Raises InvalidArgument naming every field at fault."""
    violations = [FieldViolation(name, "required") for name in ("from_at", "to_at") if not request.HasField(name)]
    if violations:
        raise InvalidArgument(violations)
    start, end = None, None
    for name in ("from_at", "to_at"):
        try:
            if name == "from_at":
                start = bounded_instant(request.from_at, name)
            else:
                end = bounded_instant(request.to_at, name)
        except InvalidArgument as error:
            violations += error.violations
    if violations:
        raise InvalidArgument(violations)
    assert start is not None and end is not None
    if end <= start:
        raise InvalidArgument.field("to_at", "must be after from_at")
    if end > now:
        raise InvalidArgument.field("to_at", "must not be in the future: the dispatcher runs what is still to come")
    return start, end


def until_horizon(schedule: Schedule) -> Schedule:
    """``schedule`` ending no later than LATEST_INSTANT: a preview lists the
    fires before it and then ends, as at the schedule's own end."""
    if schedule.end_at is not None and schedule.end_at <= LATEST_INSTANT:
        return schedule
    return replace(schedule, end_at=LATEST_INSTANT)


def schedule_error(error: ScheduleError, field: str = "job") -> InvalidArgument:
    return InvalidArgument.field(f"{field}.{error.field}", error.reason)


def zone_of(schedule: Schedule) -> str:
    return schedule.zone if schedule.kind is not ScheduleKind.ONCE else "UTC"


