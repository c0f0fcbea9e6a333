"""Every unary RPC of SchedulerService and AdminService, once.

For each RPC there is an :class:`Rpc` spec (service, method, response type,
whether a failed attempt may be repeated) and a pure request builder whose
signature and docstring become the client method's: ``Client.create_job``
and ``AsyncClient.create_job`` both call :func:`create_job` to build the
request, then send it. So the contract of each client method is written here,
once. Builders raise ``ValueError``/``TypeError`` for arguments that can be
rejected locally; everything else is the server's to judge.

"Retried" below means: on a retryable status (UNAVAILABLE by default), with
backoff, within the call's deadline (see ``RetryOptions``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Literal, TypeVar

from google.protobuf import field_mask_pb2
from google.protobuf.message import Message

from tickwheel import builders
from tickwheel.builders import DurationLike, TimestampLike
from tickwheel.v1 import admin_pb2, calendar_pb2, job_pb2, scheduler_pb2

Resp = TypeVar("Resp", bound=Message)


def _always(_request: Any) -> bool:
    return True


def _never(_request: Any) -> bool:
    return False


def _has_request_id(request: Any) -> bool:
    return bool(request.request_id)


def _every_item_has_request_id(request: Any) -> bool:
    return bool(request.items) and all(item.request_id for item in request.items)


def _every_item_has_version(request: Any) -> bool:
    return bool(request.items) and all(item.job.version for item in request.items)


def _is_dry_run(request: Any) -> bool:
    return bool(request.dry_run)


@dataclass(frozen=True)
class Rpc(Generic[Resp]):
    """One unary RPC: where it goes, what it returns, and whether an attempt
    that failed with a retryable status may be sent again."""

    service: Literal["scheduler", "admin"]
    method: str
    response: type[Resp]
    idempotent: Callable[[Any], bool]


def _sched(method: str, response: type[Resp], idempotent: Callable[[Any], bool]) -> Rpc[Resp]:
    return Rpc("scheduler", method, response, idempotent)


def _admin(method: str, response: type[Resp], idempotent: Callable[[Any], bool]) -> Rpc[Resp]:
    return Rpc("admin", method, response, idempotent)


S = scheduler_pb2
A = admin_pb2

CREATE_JOB = _sched("CreateJob", S.CreateJobResponse, _has_request_id)
BATCH_CREATE_JOBS = _sched("BatchCreateJobs", S.BatchCreateJobsResponse, _every_item_has_request_id)
GET_JOB = _sched("GetJob", S.GetJobResponse, _always)
LIST_JOBS = _sched("ListJobs", S.ListJobsResponse, _always)
UPDATE_JOB = _sched("UpdateJob", S.UpdateJobResponse, _never)
# UpdateJob with validate_only writes nothing, but it is UpdateJob: as the
# other SDKs decide by RPC, never retried.
PREVIEW_UPDATE = _sched("UpdateJob", S.UpdateJobResponse, _never)
LIST_JOB_REVISIONS = _sched("ListJobRevisions", S.ListJobRevisionsResponse, _always)
DELETE_JOB = _sched("DeleteJob", S.DeleteJobResponse, _never)
# A batch is retried on UNAVAILABLE: each update item carries the version it
# expects, each delete deletes at most once, so no item applies twice. An
# item a lost attempt did apply answers FAILED_PRECONDITION (update) or
# NOT_FOUND (delete) on the retry.
BATCH_UPDATE_JOBS = _sched("BatchUpdateJobs", S.BatchUpdateJobsResponse, _every_item_has_version)
BATCH_DELETE_JOBS = _sched("BatchDeleteJobs", S.BatchDeleteJobsResponse, _always)
# Pausing a paused job and resuming an active one change nothing.
BATCH_PAUSE_JOBS = _sched("BatchPauseJobs", S.BatchPauseJobsResponse, _always)
BATCH_RESUME_JOBS = _sched("BatchResumeJobs", S.BatchResumeJobsResponse, _always)
PAUSE_JOB = _sched("PauseJob", S.PauseJobResponse, _never)
RESUME_JOB = _sched("ResumeJob", S.ResumeJobResponse, _never)
TRIGGER_JOB = _sched("TriggerJob", S.TriggerJobResponse, _has_request_id)
BACKFILL_JOB = _sched("BackfillJob", S.BackfillJobResponse, _is_dry_run)
PREVIEW_SCHEDULE = _sched("PreviewSchedule", S.PreviewScheduleResponse, _always)
GET_EXECUTION = _sched("GetExecution", S.GetExecutionResponse, _always)
LIST_EXECUTIONS = _sched("ListExecutions", S.ListExecutionsResponse, _always)
CANCEL_EXECUTION = _sched("CancelExecution", S.CancelExecutionResponse, _never)
LIST_DEAD_LETTERS = _sched("ListDeadLetters", S.ListDeadLettersResponse, _always)
REPLAY_DEAD_LETTER = _sched("ReplayDeadLetter", S.ReplayDeadLetterResponse, _never)
# Calendars follow the jobs' rule: a create carries a request id, reads are
# safe, an update or delete is never repeated (a reply lost after a commit
# would make the retry answer FAILED_PRECONDITION or NOT_FOUND).
CREATE_CALENDAR = _sched("CreateCalendar", calendar_pb2.CreateCalendarResponse, _has_request_id)
GET_CALENDAR = _sched("GetCalendar", calendar_pb2.GetCalendarResponse, _always)
LIST_CALENDARS = _sched("ListCalendars", calendar_pb2.ListCalendarsResponse, _always)
UPDATE_CALENDAR = _sched("UpdateCalendar", calendar_pb2.UpdateCalendarResponse, _never)
DELETE_CALENDAR = _sched("DeleteCalendar", calendar_pb2.DeleteCalendarResponse, _never)

CLUSTER_STATUS = _admin("ClusterStatus", A.ClusterStatusResponse, _always)
CREATE_TENANT = _admin("CreateTenant", A.CreateTenantResponse, _never)
GET_TENANT = _admin("GetTenant", A.GetTenantResponse, _always)
LIST_TENANTS = _admin("ListTenants", A.ListTenantsResponse, _always)
UPDATE_TENANT = _admin("UpdateTenant", A.UpdateTenantResponse, _never)
PAUSE_TENANT = _admin("PauseTenant", A.PauseTenantResponse, _never)
RESUME_TENANT = _admin("ResumeTenant", A.ResumeTenantResponse, _never)
ISSUE_API_KEY = _admin("IssueApiKey", A.IssueApiKeyResponse, _never)
ROTATE_API_KEY = _admin("RotateApiKey", A.RotateApiKeyResponse, _never)
REVOKE_API_KEY = _admin("RevokeApiKey", A.RevokeApiKeyResponse, _never)
LIST_API_KEYS = _admin("ListApiKeys", A.ListApiKeysResponse, _always)
ISSUE_WORKER_CREDENTIAL = _admin("IssueWorkerCredential", A.IssueWorkerCredentialResponse, _never)
REVOKE_WORKER_CREDENTIAL = _admin("RevokeWorkerCredential", A.RevokeWorkerCredentialResponse, _never)
LIST_WORKER_CREDENTIALS = _admin("ListWorkerCredentials", A.ListWorkerCredentialsResponse, _always)
SEARCH_JOBS = _admin("SearchJobs", A.SearchJobsResponse, _always)
SEARCH_EXECUTIONS = _admin("SearchExecutions", A.SearchExecutionsResponse, _always)
DRAIN_SERVER = _admin("DrainServer", A.DrainServerResponse, _never)
LIST_ALERTS = _admin("ListAlerts", A.ListAlertsResponse, _always)
RECOMPUTE_SCHEDULES = _admin("RecomputeSchedules", A.RecomputeSchedulesResponse, _is_dry_run)


# --- helpers -----------------------------------------------------------------


def new_request_id() -> str:
    """A fresh request id (a uuid4), valid for CreateJob and TriggerJob."""
    return str(uuid.uuid4())


def field_mask(paths: Sequence[str] | field_mask_pb2.FieldMask | None) -> field_mask_pb2.FieldMask | None:
    if paths is None or isinstance(paths, field_mask_pb2.FieldMask):
        return paths
    if isinstance(paths, str):
        raise TypeError("update_mask is a sequence of paths, not one string")
    return field_mask_pb2.FieldMask(paths=list(paths))


def _statuses(statuses: Iterable[str | int]) -> list[int]:
    return [builders.execution_status(s) for s in statuses]


def _state(state: str | int | None) -> int:
    return 0 if state is None else builders.job_state(state)


def _set_ts(field: Any, value: TimestampLike | None) -> None:
    if value is not None:
        field.CopyFrom(builders.timestamp(value))


def _set_duration(field: Any, value: DurationLike | timedelta | None) -> None:
    if value is not None:
        field.CopyFrom(builders.duration(value))


# --- SchedulerService ---------------------------------------------------------


def create_job(job: job_pb2.Job, *, request_id: str | None = None) -> scheduler_pb2.CreateJobRequest:
    """Creates ``job`` and computes its first run. Returns ``CreateJobResponse``:
    the job as stored (id, state, ``next_run_at``) and ``created``, False when
    the request id had been seen and the existing job is returned.

    ``request_id`` makes the call idempotent for 24 h. When omitted a fresh
    uuid4 is used: this call's own retries are then safe, but running your
    program twice creates two jobs, so pass a stable id where that matters.
    Retried (the request id makes it safe). The job is durable before the
    reply. INVALID_ARGUMENT names the offending field
    (``job.schedule.cron.expression``).
    """
    return scheduler_pb2.CreateJobRequest(job=job, request_id=request_id or new_request_id())


MAX_BATCH_ITEMS = 1000
"""The most items one BatchCreateJobs, BatchUpdateJobs or BatchDeleteJobs call takes."""


def batch_create_jobs(
    items: Sequence[scheduler_pb2.CreateJobRequest], *, view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED
) -> scheduler_pb2.BatchCreateJobsRequest:
    """Creates up to 1 000 jobs in one call, each item a ``CreateJobRequest``
    with its own ``request_id`` (idempotent per item). Returns
    ``BatchCreateJobsResponse``: one result per item, in order, each the
    item's ``CreateJobResponse`` or its ``error`` (a ``google.rpc.Status``
    with the code and details CreateJob would have answered); a bad item
    does not fail the others. A store failure fails the whole call
    (UNAVAILABLE, nothing written). Retried: every item carries a request id
    (an item without one is refused here). Prefer ``create_jobs``, which
    takes any number of jobs and maps each result. ``view``: see
    :func:`job_view`."""
    items = list(items)
    if not 1 <= len(items) <= MAX_BATCH_ITEMS:
        raise ValueError(f"batch_create_jobs takes 1 to {MAX_BATCH_ITEMS} items, got {len(items)}")
    for index, item in enumerate(items):
        if not isinstance(item, scheduler_pb2.CreateJobRequest):
            raise TypeError(f"items[{index}] is a {type(item).__name__}, not a CreateJobRequest")
        if not item.request_id:
            raise ValueError(f"items[{index}] has no request_id: each item needs its own")
    return scheduler_pb2.BatchCreateJobsRequest(items=items, view=job_view(view))


def get_job(job_id: str, *, next_runs: int = 0, revision: int = 0) -> scheduler_pb2.GetJobRequest:
    """Returns ``GetJobResponse``: the job with its last outcome and its
    upcoming fires (``next_runs``, default 5, at most 100). NOT_FOUND for an
    unknown id or another tenant's job. ``revision`` (non-zero): the job as
    it was at that version, one ``list_job_revisions`` lists (NOT_FOUND
    otherwise), without next runs. Retried."""
    return scheduler_pb2.GetJobRequest(id=job_id, next_runs=next_runs, revision=revision)


def list_jobs(
    *,
    state: str | int | None = None,
    name_prefix: str = "",
    page_size: int = 0,
    page_token: str = "",
) -> scheduler_pb2.ListJobsRequest:
    """Returns one page of the tenant's jobs, ordered by id (``ListJobsResponse``;
    ``next_page_token`` empty on the last page; a filtered page may be short
    or empty and still carry a token: its scan stopped before the end).
    ``state`` is ``"active"``, ``"paused"``, ``"completed"`` or None for all;
    ``page_size`` default 100, at most 1000. Use ``iter_jobs`` or ``pages``
    to walk every page. Retried."""
    return scheduler_pb2.ListJobsRequest(
        state=_state(state), name_prefix=name_prefix, page_size=page_size, page_token=page_token
    )


def update_job(
    job: job_pb2.Job, *, update_mask: Sequence[str] | field_mask_pb2.FieldMask | None = None
) -> scheduler_pb2.UpdateJobRequest:
    """Changes the fields of ``job`` named in ``update_mask`` (``Job`` field
    names such as ``"schedule"``, ``"payload"``, ``"retry_policy"``; None or
    empty means every mutable field). ``job.id`` and ``job.version`` (as last
    read) are required: FAILED_PRECONDITION when the stored version moved on.
    Returns ``UpdateJobResponse`` with the job as stored. Running executions
    are never touched; those not yet started follow the change as the
    contract's UpdateJob comment says (a new schedule keeps the instants it
    shares, cancels the rest; a new target or payload applies to them).
    Never retried: a lost reply after a commit would make the retry fail on
    the version anyway."""
    request = scheduler_pb2.UpdateJobRequest(job=job)
    mask = field_mask(update_mask)
    if mask is not None:
        request.update_mask.CopyFrom(mask)
    return request


def preview_update(
    job: job_pb2.Job,
    *,
    update_mask: Sequence[str] | field_mask_pb2.FieldMask | None = None,
    diff_window: DurationLike | None = None,
) -> scheduler_pb2.UpdateJobRequest:
    """``update_job`` with ``validate_only``: the change is checked as
    UpdateJob checks it (the same errors, the version check included) and
    nothing is written. Returns ``UpdateJobResponse`` with the job as the
    change would define it and ``run_diff``: the runs added, removed and
    moved over ``diff_window`` from now (default 30 days, between 1 minute
    and 366 days; seconds or a timedelta), at most 100 listed per kind with
    their counts. Never retried (it is UpdateJob)."""
    request = update_job(job, update_mask=update_mask)
    request.validate_only = True
    if diff_window is not None:
        request.diff_window.CopyFrom(builders.duration(diff_window))
    return request


def list_job_revisions(job_id: str, *, page_size: int = 0, page_token: str = "") -> scheduler_pb2.ListJobRevisionsRequest:
    """Returns one page of the job's revisions, newest first
    (``ListJobRevisionsResponse``): each the definition an applied update
    replaced (without its payload: ``get_job(job_id, revision=...)`` has
    it), who changed it, when and with which mask. ``page_size`` default 20,
    at most 100. To roll back, update the job to a revision's definition:
    ``update_job(get_job(id, revision=n).job`` with the current version, no
    mask). Retried."""
    return scheduler_pb2.ListJobRevisionsRequest(id=job_id, page_size=page_size, page_token=page_token)


def delete_job(job_id: str, *, version: int = 0) -> scheduler_pb2.DeleteJobRequest:
    """Deletes the job and cancels its executions that have not started (held ones too);
    history stays for the retention window. ``version`` (when non-zero) must
    equal the stored one: FAILED_PRECONDITION otherwise. Returns
    ``DeleteJobResponse`` (``canceled_executions``). Never retried."""
    return scheduler_pb2.DeleteJobRequest(id=job_id, version=version)


def job_view(view: int) -> int:
    """``view`` when it is a ``JobView`` (``scheduler_pb2.JOB_VIEW_BASIC``:
    each item's job answered with its identity and state only, no payload;
    ``JOB_VIEW_FULL`` or unspecified: the whole job), else ``ValueError``.
    A batch whose answer would be over 3 MiB is refused whole, nothing
    written (INVALID_ARGUMENT, ErrorInfo reason ``BATCH_ANSWER_TOO_LARGE``):
    send fewer items or ``JOB_VIEW_BASIC``."""
    if isinstance(view, bool) or view not in scheduler_pb2.JobView.values():
        raise ValueError(f"view must be a tickwheel.v1.JobView value, got {view!r}")
    return view


def _batch_items(name: str, items: Sequence[Any], kind: type) -> list:
    items = list(items)
    if not 1 <= len(items) <= MAX_BATCH_ITEMS:
        raise ValueError(f"{name} takes 1 to {MAX_BATCH_ITEMS} items, got {len(items)}")
    for index, item in enumerate(items):
        if not isinstance(item, kind):
            raise TypeError(f"items[{index}] is a {type(item).__name__}, not a {kind.__name__}")
    return items


def batch_update_jobs(
    items: Sequence[scheduler_pb2.UpdateJobRequest], *, view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED
) -> scheduler_pb2.BatchUpdateJobsRequest:
    """Changes up to 1 000 jobs in one call, each item an ``UpdateJobRequest``
    (``job.id`` and ``job.version`` required, as for ``update_job``), applied
    in order in one transaction. Returns ``BatchUpdateJobsResponse``: one
    result per item, the job as stored or the ``error`` UpdateJob would have
    answered; a bad item does not fail the others. Retried on UNAVAILABLE:
    the versions make each change apply once (an item the lost attempt
    applied answers FAILED_PRECONDITION). Prefer ``update_jobs``. ``view``:
    see :func:`job_view`."""
    return scheduler_pb2.BatchUpdateJobsRequest(
        items=_batch_items("batch_update_jobs", items, scheduler_pb2.UpdateJobRequest), view=job_view(view)
    )


def batch_delete_jobs(items: Sequence[scheduler_pb2.DeleteJobRequest]) -> scheduler_pb2.BatchDeleteJobsRequest:
    """Deletes up to 1 000 jobs in one call, each item a ``DeleteJobRequest``,
    in order in one transaction. Returns ``BatchDeleteJobsResponse``: one
    result per item, ``deleted`` (``canceled_executions``) or the ``error``
    DeleteJob would have answered. Retried on UNAVAILABLE: a job the lost
    attempt deleted answers NOT_FOUND. Prefer ``delete_jobs``."""
    return scheduler_pb2.BatchDeleteJobsRequest(
        items=_batch_items("batch_delete_jobs", items, scheduler_pb2.DeleteJobRequest)
    )


def batch_pause_jobs(
    items: Sequence[scheduler_pb2.PauseJobRequest], *, view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED
) -> scheduler_pb2.BatchPauseJobsRequest:
    """Pauses up to 1 000 jobs in one call, each item a ``PauseJobRequest``
    answered as ``pause_job`` would be alone (``BatchPauseJobsResponse``),
    in order, in one transaction. Retried: pausing a paused job changes
    nothing. ``view``: see :func:`job_view` (``JOB_VIEW_BASIC`` keeps the
    answer small whatever the jobs' payloads)."""
    return scheduler_pb2.BatchPauseJobsRequest(
        items=_batch_items("batch_pause_jobs", items, scheduler_pb2.PauseJobRequest), view=job_view(view)
    )


def batch_resume_jobs(
    items: Sequence[scheduler_pb2.ResumeJobRequest], *, view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED
) -> scheduler_pb2.BatchResumeJobsRequest:
    """Resumes up to 1 000 jobs in one call, each item a ``ResumeJobRequest``
    answered as ``resume_job`` would be alone (``BatchResumeJobsResponse``),
    in order, in one transaction. Retried: resuming an active job changes
    nothing. An item reached once the paused spans counted before it
    exceed what the tenant's request rate pays for is answered
    RESOURCE_EXHAUSTED (``requests_per_second``, with a retry delay) and
    stays paused: send it again after the delay. ``view``: see :func:`job_view`."""
    return scheduler_pb2.BatchResumeJobsRequest(
        items=_batch_items("batch_resume_jobs", items, scheduler_pb2.ResumeJobRequest), view=job_view(view)
    )


def pause_job(job_id: str, *, reason: str = "") -> scheduler_pb2.PauseJobRequest:
    """Stops creating occurrences and holds the executions that have not
    started until :func:`resume_job`; ``reason`` is kept with the job.
    Returns ``PauseJobResponse`` (the PAUSED job, ``held_executions``).
    Never retried."""
    return scheduler_pb2.PauseJobRequest(id=job_id, reason=reason)


def resume_job(job_id: str) -> scheduler_pb2.ResumeJobRequest:
    """Resumes a paused job: each occurrence that came due while paused
    (claimed ahead or not) runs late when still within the job's misfire
    threshold (a bounded few, see the proto); other held executions are
    released. Returns ``ResumeJobResponse`` (the ACTIVE job, ``skipped``:
    the older occurrences as one skip range, and ``released_executions``).
    Never retried."""
    return scheduler_pb2.ResumeJobRequest(id=job_id)


def trigger_job(
    job_id: str,
    *,
    request_id: str | None = None,
    payload: bytes | str = b"",
    allow_overlap: bool = False,
) -> scheduler_pb2.TriggerJobRequest:
    """Runs the job now, once per ``request_id``: the execution id is
    ``<job id>:trigger:<request id>``. When omitted a fresh uuid4 is used.
    ``payload`` (``str`` sent as UTF-8) replaces the job's for this execution
    only; ``allow_overlap`` lets it run beside a running one instead of
    queueing. Returns ``TriggerJobResponse`` (``execution``, ``created``).
    Retried (the request id makes it safe)."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    return scheduler_pb2.TriggerJobRequest(
        id=job_id, request_id=request_id or new_request_id(), payload=payload, allow_overlap=allow_overlap
    )


def backfill_job(
    job_id: str,
    from_at: TimestampLike,
    to_at: TimestampLike,
    *,
    dry_run: bool = False,
    allow_overlap: bool = False,
) -> scheduler_pb2.BackfillJobRequest:
    """Creates the occurrences the schedule had in ``[from_at, to_at)`` with
    their normal ids, so a repeated or overlapping backfill never duplicates.
    ``to_at`` must be after ``from_at`` and not in the future; a window of
    more than 10 000 occurrences is INVALID_ARGUMENT ``to_at`` (split it).
    ``dry_run`` creates nothing and returns exactly what a real run would.
    Returns ``BackfillJobResponse``. Retried only when ``dry_run``."""
    request = scheduler_pb2.BackfillJobRequest(id=job_id, dry_run=dry_run, allow_overlap=allow_overlap)
    request.from_at.CopyFrom(builders.timestamp(from_at))
    request.to_at.CopyFrom(builders.timestamp(to_at))
    return request


def preview_schedule(
    job_id: str | None = None,
    *,
    job: job_pb2.Job | None = None,
    after: TimestampLike | None = None,
    count: int = 0,
) -> scheduler_pb2.PreviewScheduleRequest:
    """The next fires of a saved job (``job_id``) or of an unsaved ``job``
    (its schedule, DST policy, jitter, start/end and max runs are used; its
    ``id`` seeds ``H`` and jitter). Exactly one of the two. Fires strictly
    after ``after`` (default now); ``count`` default 5, at most 1000. Returns
    ``PreviewScheduleResponse``. Retried."""
    if (job_id is None) == (job is None):
        raise ValueError("give exactly one of job_id or job")
    request = scheduler_pb2.PreviewScheduleRequest(count=count)
    if job_id is not None:
        request.job_id = job_id
    else:
        request.job.CopyFrom(job)
    _set_ts(request.after, after)
    return request


def get_execution(execution_id: str) -> scheduler_pb2.GetExecutionRequest:
    """Returns ``GetExecutionResponse``: one execution with its attempts.
    Retried."""
    return scheduler_pb2.GetExecutionRequest(id=execution_id)


def list_executions(
    job_id: str,
    *,
    statuses: Iterable[str | int] = (),
    from_at: TimestampLike | None = None,
    to_at: TimestampLike | None = None,
    page_size: int = 0,
    page_token: str = "",
) -> scheduler_pb2.ListExecutionsRequest:
    """One page of a job's history, newest nominal instant first, each
    execution with its attempts, plus the skip ranges overlapping the page.
    ``statuses`` filters (``"dead"``, ``"succeeded"``, ...; empty means all);
    ``[from_at, to_at)`` bounds the nominal instants. ``page_size`` default
    50, at most 500. Returns ``ListExecutionsResponse``. Retried."""
    request = scheduler_pb2.ListExecutionsRequest(
        job_id=job_id, statuses=_statuses(statuses), page_size=page_size, page_token=page_token
    )
    _set_ts(request.from_at, from_at)
    _set_ts(request.to_at, to_at)
    return request


def cancel_execution(execution_id: str, *, reason: str = "") -> scheduler_pb2.CancelExecutionRequest:
    """Cancels an execution: a waiting one at once, a running one through its
    worker. FAILED_PRECONDITION when it had already ended. Returns
    ``CancelExecutionResponse``. Never retried."""
    return scheduler_pb2.CancelExecutionRequest(id=execution_id, reason=reason)


def list_dead_letters(
    *, job_id: str = "", page_size: int = 0, page_token: str = ""
) -> scheduler_pb2.ListDeadLettersRequest:
    """One page of the tenant's dead executions (only ``job_id``'s when
    given), newest first, with attempts. Returns ``ListDeadLettersResponse``.
    Retried."""
    return scheduler_pb2.ListDeadLettersRequest(job_id=job_id, page_size=page_size, page_token=page_token)


def replay_dead_letter(execution_id: str) -> scheduler_pb2.ReplayDeadLetterRequest:
    """Starts a fresh attempt series for a DEAD execution, same id
    (FAILED_PRECONDITION when it is not DEAD). Returns
    ``ReplayDeadLetterResponse``. Never retried."""
    return scheduler_pb2.ReplayDeadLetterRequest(execution_id=execution_id)


# --- AdminService ---------------------------------------------------------------



# --- calendars ----------------------------------------------------------------

def create_calendar(
    calendar: calendar_pb2.Calendar, *, request_id: str | None = None
) -> calendar_pb2.CreateCalendarRequest:
    """Creates a business-day calendar of the tenant (build one with
    :func:`tickwheel.builders.calendar`).
    Returns ``CreateCalendarResponse``: the calendar as stored (version 1)
    and ``created``, False when the request id had been seen. ALREADY_EXISTS
    when the name is taken, RESOURCE_EXHAUSTED past 1 000 calendars,
    INVALID_ARGUMENT naming the field (``calendar.holidays[3]``). Retried
    (the request id, a fresh uuid4 when omitted, makes it safe)."""
    return calendar_pb2.CreateCalendarRequest(calendar=calendar, request_id=request_id or new_request_id())


def get_calendar(name: str) -> calendar_pb2.GetCalendarRequest:
    """Returns ``GetCalendarResponse``: the calendar with every holiday and
    half-day. NOT_FOUND for an unknown name or another tenant's. Retried."""
    return calendar_pb2.GetCalendarRequest(name=name)


def list_calendars(*, page_size: int = 0, page_token: str = "") -> calendar_pb2.ListCalendarsRequest:
    """One page of the tenant's calendars by name, without their dates (their
    counts instead): ``ListCalendarsResponse``. ``page_size`` default 100,
    at most 1000. Use ``iter_calendars`` to walk every page. Retried."""
    return calendar_pb2.ListCalendarsRequest(page_size=page_size, page_token=page_token)


def update_calendar(
    calendar: calendar_pb2.Calendar, *, update_mask: Sequence[str] | field_mask_pb2.FieldMask | None = None
) -> calendar_pb2.UpdateCalendarRequest:
    """Replaces the fields of ``calendar`` named in ``update_mask``
    (``"time_zone"``, ``"business_days"``, ``"holidays"``, ``"half_days"``;
    None or empty means all four). ``calendar.name`` and ``calendar.version``
    (as last read) are required: FAILED_PRECONDITION when the stored
    version moved on. Returns ``UpdateCalendarResponse``. Never retried."""
    request = calendar_pb2.UpdateCalendarRequest(calendar=calendar)
    mask = field_mask(update_mask)
    if mask is not None:
        request.update_mask.CopyFrom(mask)
    return request


def delete_calendar(name: str, *, version: int = 0) -> calendar_pb2.DeleteCalendarRequest:
    """Deletes a calendar; ``version`` (when non-zero) must equal the stored
    one: FAILED_PRECONDITION otherwise. Returns ``DeleteCalendarResponse``.
    Never retried."""
    return calendar_pb2.DeleteCalendarRequest(name=name, version=version)

def cluster_status(*, top_tenants: int = 0) -> admin_pb2.ClusterStatusRequest:
    """Returns ``ClusterStatusResponse``: live servers, partition owners and
    epochs, the ``top_tenants`` deepest queues (default 10). Retried."""
    return admin_pb2.ClusterStatusRequest(top_tenants=top_tenants)


def _quotas(
    max_jobs: int, max_payload_bytes: int, requests_per_second: int, max_pending_manual_runs: int = 0
) -> admin_pb2.TenantQuotas | None:
    if not (max_jobs or max_payload_bytes or requests_per_second or max_pending_manual_runs):
        return None
    return admin_pb2.TenantQuotas(
        max_jobs=max_jobs, max_payload_bytes=max_payload_bytes, requests_per_second=requests_per_second,
        max_pending_manual_runs=max_pending_manual_runs,
    )


def create_tenant(
    name: str,
    *,
    weight: int = 0,
    max_concurrency: int = 0,
    max_jobs: int = 0,
    max_payload_bytes: int = 0,
    requests_per_second: int = 0,
    max_pending_manual_runs: int = 0,
) -> admin_pb2.CreateTenantRequest:
    """Creates tenant ``name`` (1-63 of [a-z0-9-], starting with a letter;
    ALREADY_EXISTS when taken) and its first API key. Zero values take the
    defaults (weight 1, no concurrency cap, default quotas). Returns
    ``CreateTenantResponse``; ``api_key.secret`` is shown only this once.
    Never retried."""
    tenant = admin_pb2.Tenant(name=name, weight=weight, max_concurrency=max_concurrency)
    quotas = _quotas(max_jobs, max_payload_bytes, requests_per_second, max_pending_manual_runs)
    if quotas is not None:
        tenant.quotas.CopyFrom(quotas)
    return admin_pb2.CreateTenantRequest(tenant=tenant)


def get_tenant(name: str) -> admin_pb2.GetTenantRequest:
    """Returns ``GetTenantResponse``: the tenant, its job count and its
    manual runs waiting to start. Retried."""
    return admin_pb2.GetTenantRequest(name=name)


def list_tenants(*, page_size: int = 0, page_token: str = "") -> admin_pb2.ListTenantsRequest:
    """One page of tenants by name (``ListTenantsResponse``). Retried."""
    return admin_pb2.ListTenantsRequest(page_size=page_size, page_token=page_token)


def update_tenant(
    tenant: admin_pb2.Tenant, *, update_mask: Sequence[str] | field_mask_pb2.FieldMask | None = None
) -> admin_pb2.UpdateTenantRequest:
    """Changes ``tenant.name``'s fields named in ``update_mask``
    (``"weight"``, ``"max_concurrency"``, ``"quotas"``; None or empty means all
    three), or one quota alone (``"quotas.max_jobs"``,
    ``"quotas.requests_per_second"``...): ``"quotas"`` sets all four, a quota
    left 0 back to its default. ``tenant.version`` non-zero must equal the
    stored one (FAILED_PRECONDITION otherwise). Returns
    ``UpdateTenantResponse``. Never retried."""
    request = admin_pb2.UpdateTenantRequest(tenant=tenant)
    mask = field_mask(update_mask)
    if mask is not None:
        request.update_mask.CopyFrom(mask)
    return request


def pause_tenant(name: str, *, reason: str = "") -> admin_pb2.PauseTenantRequest:
    """Stops creating and handing out the tenant's executions. Returns
    ``PauseTenantResponse``. Never retried."""
    return admin_pb2.PauseTenantRequest(name=name, reason=reason)


def resume_tenant(name: str) -> admin_pb2.ResumeTenantRequest:
    """Resumes a paused tenant; its jobs continue at their next future run.
    Returns ``ResumeTenantResponse``. Never retried."""
    return admin_pb2.ResumeTenantRequest(name=name)


def issue_api_key(tenant: str, *, description: str = "") -> admin_pb2.IssueApiKeyRequest:
    """Issues a new API key for ``tenant``. Returns ``IssueApiKeyResponse``;
    the secret is shown only this once. Never retried."""
    return admin_pb2.IssueApiKeyRequest(tenant=tenant, description=description)


def rotate_api_key(key_id: str, *, grace: DurationLike | None = None) -> admin_pb2.RotateApiKeyRequest:
    """Issues a replacement for key ``key_id``; the old key keeps working for
    ``grace`` (default 24 h, at most 30 days). Returns
    ``RotateApiKeyResponse``. Never retried."""
    request = admin_pb2.RotateApiKeyRequest(id=key_id)
    _set_duration(request.grace, grace)
    return request


def revoke_api_key(key_id: str) -> admin_pb2.RevokeApiKeyRequest:
    """Revokes an API key at once. Returns ``RevokeApiKeyResponse``. Never
    retried."""
    return admin_pb2.RevokeApiKeyRequest(id=key_id)


def list_api_keys(tenant: str, *, page_size: int = 0, page_token: str = "") -> admin_pb2.ListApiKeysRequest:
    """One page of a tenant's unexpired keys, newest first, never their
    secrets (``ListApiKeysResponse``; follow ``next_page_token``, or use
    ``client.pages``). Retried."""
    return admin_pb2.ListApiKeysRequest(tenant=tenant, page_size=page_size, page_token=page_token)


def issue_worker_credential(
    tenants: Sequence[str],
    *,
    handlers: Sequence[str] = (),
    http: bool = False,
    description: str = "",
) -> admin_pb2.IssueWorkerCredentialRequest:
    """Issues a worker credential serving ``tenants`` (each must exist),
    limited to ``handlers`` (empty: any) and allowed HTTP targets when
    ``http``. Returns ``IssueWorkerCredentialResponse``; the secret is shown
    only this once. Never retried."""
    if isinstance(tenants, str):
        raise TypeError("tenants is a sequence of names, not one string")
    return admin_pb2.IssueWorkerCredentialRequest(
        tenants=list(tenants), handlers=list(handlers), http=http, description=description
    )


def revoke_worker_credential(credential_id: str) -> admin_pb2.RevokeWorkerCredentialRequest:
    """Revokes a worker credential; streams using it are closed. Returns
    ``RevokeWorkerCredentialResponse``. Never retried."""
    return admin_pb2.RevokeWorkerCredentialRequest(id=credential_id)


def list_worker_credentials(
    *, tenant: str = "", page_size: int = 0, page_token: str = ""
) -> admin_pb2.ListWorkerCredentialsRequest:
    """One page of the worker credentials not revoked (only those serving
    ``tenant`` when given), newest first (``ListWorkerCredentialsResponse``;
    follow ``next_page_token``, or use ``client.pages``). Retried."""
    return admin_pb2.ListWorkerCredentialsRequest(tenant=tenant, page_size=page_size, page_token=page_token)


def search_jobs(
    *,
    tenant: str = "",
    name_prefix: str = "",
    state: str | int | None = None,
    page_size: int = 0,
    page_token: str = "",
) -> admin_pb2.SearchJobsRequest:
    """One page of jobs across tenants, ordered by id (``SearchJobsResponse``;
    a filtered page may be short or empty and still carry a token: walk
    with ``client.pages``). Retried."""
    return admin_pb2.SearchJobsRequest(
        tenant=tenant, name_prefix=name_prefix, state=_state(state), page_size=page_size, page_token=page_token
    )


def search_executions(
    *,
    tenant: str = "",
    job_id: str = "",
    statuses: Iterable[str | int] = (),
    from_at: TimestampLike | None = None,
    to_at: TimestampLike | None = None,
    page_size: int = 0,
    page_token: str = "",
) -> admin_pb2.SearchExecutionsRequest:
    """One page of executions across tenants, newest first
    (``SearchExecutionsResponse``). Retried."""
    request = admin_pb2.SearchExecutionsRequest(
        tenant=tenant, job_id=job_id, statuses=_statuses(statuses), page_size=page_size, page_token=page_token
    )
    _set_ts(request.from_at, from_at)
    _set_ts(request.to_at, to_at)
    return request


def drain_server(server_id: str, *, grace: DurationLike | None = None) -> admin_pb2.DrainServerRequest:
    """Moves a server's partitions and workers away; its workers get
    ``grace`` (default 60 s) to finish. Returns ``DrainServerResponse``. Never
    retried."""
    request = admin_pb2.DrainServerRequest(server_id=server_id)
    _set_duration(request.grace, grace)
    return request


def _alert_kinds(kinds: Iterable[str | int]) -> list[int]:
    out = []
    for kind in kinds:
        if isinstance(kind, int) and not isinstance(kind, bool):
            out.append(kind)
        else:
            out.append(admin_pb2.AlertKind.Value("ALERT_KIND_" + str(kind).upper().replace("-", "_")))
    return out


def list_alerts(
    *,
    include_resolved: bool = False,
    kinds: Iterable[str | int] = (),
    tenant: str = "",
    page_size: int = 0,
    page_token: str = "",
) -> admin_pb2.ListAlertsRequest:
    """One page of alerts, newest first (``ListAlertsResponse``); ``kinds``
    are ``"late"``, ``"dead_letter"``, ... or enum values. Retried."""
    return admin_pb2.ListAlertsRequest(
        include_resolved=include_resolved,
        kinds=_alert_kinds(kinds),
        tenant=tenant,
        page_size=page_size,
        page_token=page_token,
    )


def watch_alerts(
    *, kinds: Iterable[str | int] = (), tenant: str = "", include_open: bool = False
) -> admin_pb2.WatchAlertsRequest:
    """Alerts as they are raised and resolved, until the caller stops
    iterating; ``include_open`` first sends every open alert. A server stream:
    never retried, and no deadline."""
    return admin_pb2.WatchAlertsRequest(kinds=_alert_kinds(kinds), tenant=tenant, include_open=include_open)


def recompute_schedules(*, zones: Sequence[str] = (), dry_run: bool = False) -> admin_pb2.RecomputeSchedulesRequest:
    """Recomputes stored next runs after a time-zone database change, for
    ``zones`` (empty: the zones whose rules changed). ``dry_run`` reports what
    would shift and changes nothing. Returns ``RecomputeSchedulesResponse``.
    Retried only when ``dry_run``."""
    if isinstance(zones, str):
        raise TypeError("zones is a sequence of zone names, not one string")
    return admin_pb2.RecomputeSchedulesRequest(zones=list(zones), dry_run=dry_run)
