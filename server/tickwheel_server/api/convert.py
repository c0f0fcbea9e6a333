"""Domain records ↔ protobuf messages. Pure functions, no I/O."""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import DecodeError, Message
from tickwheel.v1 import admin_pb2, execution_pb2, job_pb2

from tickwheel.shared.ids import from_us, to_us

from ..errors import FailedPrecondition, InvalidArgument
from ..alerts.catalogue import AlertRecord
from ..fields import duration_problem, timestamp_problem
from ..store.credentials import WorkerCredential
from ..store.history import AttemptRecord, ExecutionRecord, SkipRecord
from ..store.jobpages import JobPage
from ..store.jobrecords import JobRecord
from ..store.tenants import ApiKey, Tenant
from ..wire import EXECUTION_ORIGIN_TO_PROTO

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

JOB_STATE_TO_PROTO = {
    "active": job_pb2.JOB_STATE_ACTIVE,
    "paused": job_pb2.JOB_STATE_PAUSED,
    "completed": job_pb2.JOB_STATE_COMPLETED,
}
JOB_STATE_FROM_PROTO = {value: key for key, value in JOB_STATE_TO_PROTO.items()}
TENANT_STATE_TO_PROTO = {"active": admin_pb2.TENANT_STATE_ACTIVE, "paused": admin_pb2.TENANT_STATE_PAUSED}
EXECUTION_STATUS_TO_PROTO = {
    "scheduled": job_pb2.EXECUTION_STATUS_SCHEDULED,
    "waiting": job_pb2.EXECUTION_STATUS_WAITING,
    "running": job_pb2.EXECUTION_STATUS_RUNNING,
    "succeeded": job_pb2.EXECUTION_STATUS_SUCCEEDED,
    "dead": job_pb2.EXECUTION_STATUS_DEAD,
    "canceled": job_pb2.EXECUTION_STATUS_CANCELED,
}
EXECUTION_STATUS_FROM_PROTO = {value: key for key, value in EXECUTION_STATUS_TO_PROTO.items()}
ATTEMPT_STATUS_TO_PROTO = {
    "running": execution_pb2.ATTEMPT_STATUS_RUNNING,
    "succeeded": execution_pb2.ATTEMPT_STATUS_SUCCEEDED,
    "failed": execution_pb2.ATTEMPT_STATUS_FAILED,
    "timed_out": execution_pb2.ATTEMPT_STATUS_TIMED_OUT,
    "lost": execution_pb2.ATTEMPT_STATUS_LOST,
    "canceled": execution_pb2.ATTEMPT_STATUS_CANCELED,
}
ALERT_KIND_TO_PROTO = {
    "late": admin_pb2.ALERT_KIND_LATE,
    "skipped": admin_pb2.ALERT_KIND_SKIPPED,
    "dead_letter": admin_pb2.ALERT_KIND_DEAD_LETTER,
    "poison": admin_pb2.ALERT_KIND_POISON,
    "circuit_open": admin_pb2.ALERT_KIND_CIRCUIT_OPEN,
    "partition_unowned": admin_pb2.ALERT_KIND_PARTITION_UNOWNED,
    "clock_skew": admin_pb2.ALERT_KIND_CLOCK_SKEW,
    "tzdata_shift": admin_pb2.ALERT_KIND_TZDATA_SHIFT,
    "job_unreadable": admin_pb2.ALERT_KIND_JOB_UNREADABLE,
    "schedule_uncomputable": admin_pb2.ALERT_KIND_SCHEDULE_UNCOMPUTABLE,
    "calendar_runs_changed": admin_pb2.ALERT_KIND_CALENDAR_RUNS_CHANGED,
    "etcd_nospace": admin_pb2.ALERT_KIND_ETCD_NOSPACE,
}
ALERT_KIND_FROM_PROTO = {value: key for key, value in ALERT_KIND_TO_PROTO.items()}
ALERT_SEVERITY_TO_PROTO = {
    "info": admin_pb2.ALERT_SEVERITY_INFO,
    "warning": admin_pb2.ALERT_SEVERITY_WARNING,
    "critical": admin_pb2.ALERT_SEVERITY_CRITICAL,
}
SKIP_REASON_TO_PROTO = {
    "overlap": execution_pb2.SKIP_REASON_OVERLAP,
    "misfire": execution_pb2.SKIP_REASON_MISFIRE,
    "job_paused": execution_pb2.SKIP_REASON_JOB_PAUSED,
    "tenant_paused": execution_pb2.SKIP_REASON_TENANT_PAUSED,
    "calendar": execution_pb2.SKIP_REASON_CALENDAR,
    "backlog": execution_pb2.SKIP_REASON_BACKLOG,
}


def timestamp(instant: datetime | None) -> timestamp_pb2.Timestamp | None:
    if instant is None:
        return None
    message = timestamp_pb2.Timestamp()
    set_timestamp(message, instant)
    return message


def set_timestamp(message: timestamp_pb2.Timestamp, instant: datetime) -> None:
    """``message`` = the aware ``instant``, to the microsecond: what
    ``FromDatetime`` gives, without its time-tuple round trip."""
    if instant.tzinfo is None:
        raise ValueError("naive datetime: instants must be timezone-aware")
    delta = instant - _EPOCH
    message.seconds = delta.days * 86_400 + delta.seconds  # a timedelta's seconds and microseconds are never negative
    message.nanos = delta.microseconds * 1000


def instant(message: timestamp_pb2.Timestamp, field: str = "timestamp") -> datetime:
    """The aware UTC instant of ``message``; INVALID_ARGUMENT ``field`` when
    it is not a valid Timestamp (microseconds kept, nanoseconds dropped)."""
    problem = timestamp_problem(message)
    if problem is not None:
        raise InvalidArgument.field(field, problem)
    return message.ToDatetime(tzinfo=timezone.utc)


def span(message: duration_pb2.Duration, field: str) -> timedelta:
    """The timedelta of ``message``; INVALID_ARGUMENT ``field`` when it is
    not a valid Duration. The field's own bounds are the caller's."""
    problem = duration_problem(message)
    if problem is not None:
        raise InvalidArgument.field(field, problem)
    return message.ToTimedelta()


UNREADABLE = (
    "its stored definition cannot be read by this server (written by a newer version, or damaged; "
    "see its JOB_UNREADABLE alert): delete it and create it again, or use a server that reads it"
)


def stored_job(record: JobRecord) -> job_pb2.Job:
    """The job's stored definition; FailedPrecondition naming the job when
    this server cannot parse it (the call that needs it changes nothing)."""
    try:
        return job_pb2.Job.FromString(record.spec)
    except DecodeError:
        raise FailedPrecondition(f"job {record.id!r}", UNREADABLE, kind="JOB_UNREADABLE") from None


def job_to_proto(record: JobRecord) -> job_pb2.Job:
    """The stored definition plus the output-only fields from the record.

    ``next_run_at`` and ``next_due_at`` are unset unless the job is active, as
    the contract says; a paused job's store row keeps its cursor (where the
    paused span starts) for ResumeJob. A definition this server cannot parse
    gives the output-only fields alone (logged), so that one such row does
    not fail a whole listing.
    """
    job = job_pb2.Job()
    fill_job(job, record)
    return job


def fill_job(job: job_pb2.Job, record: JobRecord) -> None:
    """Make the empty ``job`` (a response's field, say) what
    :func:`job_to_proto` answers for ``record``, in place: no message is
    built only to be copied into the response."""
    try:
        job.MergeFromString(record.spec)
    except DecodeError:
        log.warning("job %s of tenant %s: %s", record.id, record.tenant, UNREADABLE)
        job.Clear()  # a parse that failed may have merged part of the bytes
    set_output_fields(job, record)


def set_output_fields(job: job_pb2.Job, record: JobRecord) -> None:
    """Set ``job``'s output-only fields from ``record`` (in place), as
    :func:`job_to_proto` answers them; ``job`` holds the definition."""
    job.id = record.id
    job.tenant = record.tenant
    job.state = JOB_STATE_TO_PROTO[record.state]
    job.run_count = record.run_count
    job.version = record.version
    job.tzdata_version = record.tzdata_version
    job.pause_reason = record.pause_reason
    if record.state == "active":
        if record.next_run_at is not None:
            set_timestamp(job.next_run_at, record.next_run_at)
        if record.next_due_at is not None:
            set_timestamp(job.next_due_at, record.next_due_at)
    if record.created_at is not None:
        set_timestamp(job.created_at, record.created_at)
    if record.updated_at is not None:
        set_timestamp(job.updated_at, record.updated_at)


def _duration(delta) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromTimedelta(delta)
    return message


def attempt_to_proto(record: AttemptRecord) -> execution_pb2.Attempt:
    return execution_pb2.Attempt(
        attempt=record.attempt,
        delivery=record.delivery,
        status=ATTEMPT_STATUS_TO_PROTO.get(record.status, execution_pb2.ATTEMPT_STATUS_UNSPECIFIED),
        started_at=timestamp(record.started_at),
        finished_at=timestamp(record.finished_at),
        lateness=_duration(record.lateness),
        worker_id=record.worker_id,
        error=record.error,
        output=record.output,
    )


def last_run_to_proto(last: ExecutionRecord) -> job_pb2.LastRun:
    """A job's last finished execution as GetJob reports it (gRPC and the
    HTTP API): the error of its last attempt when it did not succeed."""
    return job_pb2.LastRun(
        execution_id=last.id,
        nominal_at=timestamp(last.nominal_at),
        status=EXECUTION_STATUS_TO_PROTO[last.status],
        finished_at=timestamp(last.finished_at),
        error=last.attempts[-1].error if last.attempts and last.status != "succeeded" else "",
    )


def execution_to_proto(record: ExecutionRecord) -> execution_pb2.Execution:
    """An execution with its attempts (as many as the record carries)."""
    return execution_pb2.Execution(
        id=record.id,
        job_id=record.job_id,
        tenant=record.tenant,
        origin=EXECUTION_ORIGIN_TO_PROTO.get(record.origin, execution_pb2.EXECUTION_ORIGIN_UNSPECIFIED),
        nominal_at=timestamp(record.nominal_at),
        due_at=timestamp(record.due_at),
        ready_at=timestamp(record.ready_at),
        attempt=record.attempt,
        delivery=record.delivery,
        status=EXECUTION_STATUS_TO_PROTO.get(record.status, job_pb2.EXECUTION_STATUS_UNSPECIFIED),
        owner=record.owner or "",
        worker_id=record.worker_id or "",
        error=record.error,
        dead_reason=record.dead_reason,
        missed_count=record.missed_count,
        payload=record.payload,
        attempts=[attempt_to_proto(a) for a in record.attempts],
        created_at=timestamp(record.created_at),
        finished_at=timestamp(record.finished_at),
        reap_count=record.reap_count,
    )


def skip_to_proto(record: SkipRecord) -> execution_pb2.SkipRange:
    return execution_pb2.SkipRange(
        job_id=record.job_id,
        from_at=timestamp(record.from_at),
        to_at=timestamp(record.to_at),
        count=record.count,
        reason=SKIP_REASON_TO_PROTO.get(record.reason, execution_pb2.SKIP_REASON_UNSPECIFIED),
        created_at=timestamp(record.created_at),
    )


def alert_to_proto(record: AlertRecord) -> admin_pb2.Alert:
    """An alert; ``resolved_at`` unset while it is open."""
    return admin_pb2.Alert(
        id=record.id,
        kind=ALERT_KIND_TO_PROTO.get(record.kind, admin_pb2.ALERT_KIND_UNSPECIFIED),
        severity=ALERT_SEVERITY_TO_PROTO.get(record.severity, admin_pb2.ALERT_SEVERITY_UNSPECIFIED),
        tenant=record.tenant,
        job_id=record.job_id,
        execution_id=record.execution_id,
        server_id=record.server_id,
        summary=record.summary,
        details=record.details,
        raised_at=timestamp(record.raised_at),
        last_seen_at=timestamp(record.last_seen_at),
        count=record.count,
        resolved_at=timestamp(record.resolved_at),
    )


MAX_FILTER_VALUES = 32
"""The most values a filter of enum values (``statuses``, ``kinds``) may
list, repeats included: more than any enum here has. A packed repeated
enum is a byte a value, so a 4 MiB request held 4 million, each read in
Python on the event loop (about a second a call)."""
MAX_MASK_PATHS = 64
"""The most paths an update mask may name, repeats included: a Job has 58
paths in all, a Calendar 11. 500 000 copies of ``name`` fit a 4 MiB
UpdateJob, each checked on the event loop (seconds a call), and the mask
was kept whole in the job's revision."""


def enum_filter(values, names: dict[int, str], field: str, unknown_are: str) -> list[str]:
    """The store's names of a filter's enum ``values``, each once, sorted;
    INVALID_ARGUMENT ``field`` past :data:`MAX_FILTER_VALUES` values, or
    naming the values not in ``names`` (``unknown_are``: how the message
    calls them)."""
    if len(values) > MAX_FILTER_VALUES:
        raise InvalidArgument.field(field, f"at most {MAX_FILTER_VALUES} values (got {len(values)})")
    unknown = [v for v in values if v not in names]
    if unknown:
        raise InvalidArgument.field(field, f"{unknown_are} {unknown}")
    return sorted({names[v] for v in values})


def check_mask_size(paths: Sequence[str], field: str = "update_mask") -> None:
    """INVALID_ARGUMENT ``field`` when an update mask names more than
    :data:`MAX_MASK_PATHS` paths (checked before any path is read)."""
    if len(paths) > MAX_MASK_PATHS:
        raise InvalidArgument.field(field, f"at most {MAX_MASK_PATHS} paths (got {len(paths)})")


def alert_kinds(values, field: str = "kinds") -> list[str]:
    """Store kinds for ``AlertKind`` values; INVALID_ARGUMENT ``field`` naming
    the unknown ones (``ALERT_KIND_UNSPECIFIED`` included), or past
    :data:`MAX_FILTER_VALUES`."""
    return enum_filter(values, ALERT_KIND_FROM_PROTO, field, "unknown alert kinds")


def tenant_to_proto(tenant: Tenant) -> admin_pb2.Tenant:
    return admin_pb2.Tenant(
        name=tenant.name,
        weight=tenant.weight,
        max_concurrency=tenant.max_concurrency,
        quotas=admin_pb2.TenantQuotas(
            max_jobs=tenant.max_jobs,
            max_payload_bytes=tenant.max_payload_bytes,
            requests_per_second=tenant.requests_per_second,
            max_pending_manual_runs=tenant.max_pending_manual_runs,
        ),
        state=TENANT_STATE_TO_PROTO[tenant.state],
        pause_reason=tenant.pause_reason,
        created_at=timestamp(tenant.created_at),
        version=tenant.version,
    )


def api_key_to_proto(key: ApiKey) -> admin_pb2.ApiKey:
    return admin_pb2.ApiKey(
        id=key.id,
        tenant=key.tenant,
        description=key.description,
        created_at=timestamp(key.created_at),
        expires_at=timestamp(key.expires_at),
    )


def worker_credential_to_proto(credential: WorkerCredential) -> admin_pb2.WorkerCredential:
    return admin_pb2.WorkerCredential(
        id=credential.id,
        tenants=credential.tenants,
        handlers=credential.handlers,
        http=credential.http,
        description=credential.description,
        created_at=timestamp(credential.created_at),
    )


# Page tokens are opaque to clients: base64 of the last key of the page.
_TOKEN_PREFIX = "p1:"


def page_token(last_key: str) -> str:
    return base64.urlsafe_b64encode((_TOKEN_PREFIX + last_key).encode()).decode()


PAGE_BYTES = 3 * 1024 * 1024
"""The most a listing's items take in one answer. A stock gRPC client
receives at most 4 MiB a message, and a page of jobs or runs each holding a
payload at the default quota (64 KiB; a definition may add 64 KiB more) is
past that at 64 items: a default ListJobs page of such jobs failed
RESOURCE_EXHAUSTED in the client, for every page size. A page is "at most"
its size, so the page stops before the item that would pass this (never
before its first item) and its token continues from the last item it holds."""
_ITEM_FRAMING = 6
"""A repeated field's tag and length prefix, at most, per item of up to 4 MiB."""


def fitting(messages: Sequence[Message], budget: int = PAGE_BYTES) -> int:
    """How many of ``messages``, from the first, a page holds: all when their
    serialized sizes add up to at most ``budget``, else those before the one
    that would pass it (always at least one)."""
    total = 0
    for count, message in enumerate(messages):
        total += message.ByteSize() + _ITEM_FRAMING
        if total > budget and count:
            return count
    return len(messages)


def jobs_answer(page: JobPage, size: int) -> tuple[list[job_pb2.Job], str]:
    """ListJobs' and SearchJobs' jobs and next token: :func:`jobs_page`, cut
    to :data:`PAGE_BYTES` (the token then after the last job kept)."""
    records, token = jobs_page(page, size)
    jobs = [job_to_proto(record) for record in records]
    kept = fitting(jobs)
    if kept < len(jobs):
        return jobs[:kept], page_token(jobs[kept - 1].id)
    return jobs, token


def executions_answer(page):
    """The executions of a history or dead-letter page as the answer holds
    them, cut to :data:`PAGE_BYTES`, and the page as cut (``more`` set, so
    its ``next_key`` continues after the last execution kept)."""
    answer = [execution_to_proto(record) for record in page.executions]
    kept = fitting(answer)
    if kept == len(answer):
        return answer, page
    return answer[:kept], dataclasses.replace(page, executions=page.executions[:kept], more=True)


def jobs_page(page: JobPage, size: int) -> tuple[list[JobRecord], str]:
    """A page of ``size`` jobs out of ``page`` (read with a limit of
    ``size + 1``) and its next token: after the page's last job when more
    were found, after where a filtered page's bounded scan stopped when it
    came back short (:class:`~tickwheel_server.store.jobpages.JobPage`),
    empty at the end (ListJobs, SearchJobs)."""
    found = page.jobs
    last = found[size - 1].id if len(found) > size else page.scanned_to
    return found[:size], page_token(last) if last else ""


def parse_page_token(token: str) -> str:
    """The key after which the next page starts; INVALID_ARGUMENT `page_token` when not ours."""
    if not token:
        return ""
    try:
        decoded = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        decoded = ""
    if len(token) > 1024 or not decoded.startswith(_TOKEN_PREFIX) or not decoded.isprintable():
        raise InvalidArgument.field("page_token", "not a page token returned by this API")
    return decoded[len(_TOKEN_PREFIX) :]


def execution_page_token(key: tuple[datetime, str] | None) -> str:
    """The token of a page that continues before ``key`` = (instant, id):
    history (nominal instant, execution id), dead letters (finished
    instant, execution id) and alerts (raised instant, alert id); empty
    for ``None`` (the last page)."""
    return "" if key is None else page_token(f"{to_us(key[0])}:{key[1]}")


def parse_execution_page_token(token: str) -> tuple[datetime, str] | None:
    """The (instant, id) key a page continues before (see :func:`execution_page_token`);
    None for the first page; INVALID_ARGUMENT `page_token` when not ours."""
    key = parse_page_token(token)
    if not token:
        return None
    micros, _, ident = key.partition(":")
    try:
        instant = from_us(int(micros))
    except (ValueError, OverflowError):
        instant = None
    if instant is None or not ident or not micros.lstrip("-").isdigit():
        raise InvalidArgument.field("page_token", "not a page token returned by this API")
    return instant, ident


def page_size(requested: int, *, default: int, maximum: int, field: str = "page_size") -> int:
    if requested < 0:
        raise InvalidArgument.field(field, f"must be between 0 and {maximum}")
    if requested > maximum:
        raise InvalidArgument.field(field, f"at most {maximum}")
    return requested or default
