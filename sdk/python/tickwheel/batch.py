"""Creating, changing and deleting any number of jobs through the batch RPCs: the pure half.

``plan`` splits jobs into calls of at most 1 000 items (and fewer when
their payloads would make a call larger than a server takes) and gives each item
its request id once (the caller's, or a fresh uuid4), so a retried call
resends the very same ids and the server answers a repeat instead of
creating twice. ``outcomes`` turns one call's response into one
:class:`CreateOutcome` per item, in order, each item's error mapped to
:class:`~tickwheel.errors.TickwheelError` as a failed CreateJob would be.
The clients' ``create_jobs`` send the planned calls between the two.

A call whose answer would be over what a default client reads is refused
by the server before anything is written (:func:`answer_too_large`); the
clients then send it again as two halves (:func:`halves`) until each
answer fits, so the whole job, payload included, is still answered
(``view`` ``JOB_VIEW_BASIC`` asks for the jobs' identity and state only,
in fewer calls).

``plan_updates``/``update_outcomes`` and ``plan_deletes``/``delete_outcomes``
do the same for BatchUpdateJobs and BatchDeleteJobs (the clients'
``update_jobs`` and ``delete_jobs``). Those calls carry no request ids: each
update names the version it expects and a delete happens once, so a retried
call applies nothing twice; an item that a lost attempt had applied answers
FAILED_PRECONDITION (update) or NOT_FOUND (delete) instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import grpc

from google.protobuf import field_mask_pb2

from google.rpc import error_details_pb2

from tickwheel._calls import (
    MAX_BATCH_ITEMS, batch_create_jobs, batch_delete_jobs, batch_update_jobs, field_mask, new_request_id,
)
from tickwheel.errors import TickwheelError
from tickwheel.v1 import job_pb2, scheduler_pb2

__all__ = [
    "MAX_BATCH_ITEMS", "MAX_CALL_BYTES", "CreateOutcome", "DeleteOutcome", "UpdateOutcome", "answer_too_large",
    "delete_outcomes", "halves", "outcomes", "plan", "plan_deletes", "plan_updates", "update_outcomes",
]

MAX_CALL_BYTES = 3 * 1024 * 1024
"""Items are packed into one call up to this many bytes: gRPC servers refuse
messages over 4 MiB by default, and a thousand jobs with 64 KiB payloads
would be 64 MiB."""

ANSWER_MARGIN = 512
"""Bytes each item of a BatchCreateJobs call in the full view counts beyond
its own size when calls are packed: its answer holds its job and the
output-only fields the server adds (and bounds generously), and a call
whose answer would be over :data:`MAX_CALL_BYTES` is refused."""


@dataclass(frozen=True)
class CreateOutcome:
    """What became of one job given to ``create_jobs``.

    Exactly one of ``job`` and ``error`` is set. ``job`` is the job as
    stored; ``created`` is False when its ``request_id`` had been seen and
    the existing job was returned. ``error`` is what CreateJob would have
    raised for this job alone (``field_violations`` relative to the item,
    e.g. ``job.schedule.cron``)."""

    request_id: str
    job: job_pb2.Job | None = None
    created: bool = False
    error: TickwheelError | None = None

    @property
    def ok(self) -> bool:
        """True when the job exists (created now or before)."""
        return self.error is None


def plan(
    jobs: Iterable[job_pb2.Job],
    request_ids: Sequence[str | None] | None = None,
    *,
    batch_size: int = MAX_BATCH_ITEMS,
    max_bytes: int = MAX_CALL_BYTES,
    view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED,
) -> list[scheduler_pb2.BatchCreateJobsRequest]:
    """The BatchCreateJobs requests that create ``jobs``, in order, at most
    ``batch_size`` (1..1000) items each and, past the first item, at most
    ``max_bytes`` of items; none for no jobs.

    ``request_ids``, when given, has one entry per job: a string is that
    job's request id, None or empty gets a fresh uuid4. Without it every job
    gets a fresh uuid4: retries of a call are then safe, but running the
    program twice creates every job twice, so pass stable ids where that
    matters. Raises ``ValueError`` for a length mismatch or a bad
    ``batch_size`` and ``TypeError`` for an item that is not a ``Job``.
    """
    _check_batch_size(batch_size)
    jobs = list(jobs)
    if isinstance(request_ids, str):
        raise TypeError("request_ids is a sequence with one id per job, not one string")
    if request_ids is not None and len(request_ids) != len(jobs):
        raise ValueError(f"request_ids has {len(request_ids)} entries for {len(jobs)} jobs")
    items = []
    for index, job in enumerate(jobs):
        if not isinstance(job, job_pb2.Job):
            raise TypeError(f"jobs[{index}] is a {type(job).__name__}, not a tickwheel.v1.job_pb2.Job")
        given = request_ids[index] if request_ids is not None else None
        items.append(scheduler_pb2.CreateJobRequest(job=job, request_id=given or new_request_id()))
    margin = 0 if view == scheduler_pb2.JOB_VIEW_BASIC else ANSWER_MARGIN
    return [batch_create_jobs(call, view=view) for call in _split(items, batch_size, max_bytes, margin)]


def _check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_ITEMS:
        raise ValueError(f"batch_size must be 1 to {MAX_BATCH_ITEMS}, got {batch_size!r}")


def _split(items: list, batch_size: int, max_bytes: int, margin: int = 0) -> list[list]:
    """``items`` in order, in runs of at most ``batch_size`` and, past each
    run's first item, at most ``max_bytes``, each item counting ``margin``
    bytes more than its size."""
    calls: list[list] = []
    size = 0
    for item in items:
        item_bytes = item.ByteSize() + 8 + margin  # the field's tag and length prefix, generously
        if not calls or len(calls[-1]) >= batch_size or size + item_bytes > max_bytes:
            calls.append([])
            size = 0
        calls[-1].append(item)
        size += item_bytes
    return calls


def outcomes(
    request: scheduler_pb2.BatchCreateJobsRequest, response: scheduler_pb2.BatchCreateJobsResponse
) -> list[CreateOutcome]:
    """One outcome per item of ``request``, in order, from ``response``.

    A response with another number of results than items, or a result with
    neither a job nor an error, breaks the contract: it raises
    ``TickwheelError`` (INTERNAL) rather than pair a job with the wrong item
    or drop one. The items' jobs were still created or not as the server
    decided: repeating the call with the same request ids is safe."""
    if len(response.results) != len(request.items):
        raise TickwheelError(
            grpc.StatusCode.INTERNAL,
            f"BatchCreateJobs answered {len(response.results)} results for {len(request.items)} items",
        )
    out = []
    for index, (item, result) in enumerate(zip(request.items, response.results)):
        kind = result.WhichOneof("result")
        if kind == "job":
            out.append(CreateOutcome(item.request_id, job=result.job.job, created=result.job.created))
        elif kind == "error":
            out.append(CreateOutcome(item.request_id, error=TickwheelError.from_status(result.error)))
        else:
            raise TickwheelError(
                grpc.StatusCode.INTERNAL, f"BatchCreateJobs result {index} has neither a job nor an error"
            )
    return out


@dataclass(frozen=True)
class UpdateOutcome:
    """What became of one change given to ``update_jobs``: exactly one of
    ``job`` (as stored after it; at its old version when it changed
    nothing) and ``error`` (what UpdateJob would have raised for it alone:
    ``field_violations`` relative to the item, NOT_FOUND, FAILED_PRECONDITION
    for a stale version) is set."""

    job_id: str
    job: job_pb2.Job | None = None
    error: TickwheelError | None = None

    @property
    def ok(self) -> bool:
        """True when the change was applied (or changed nothing)."""
        return self.error is None


@dataclass(frozen=True)
class DeleteOutcome:
    """What became of one id given to ``delete_jobs``: deleted, with how
    many executions that had not started were canceled, or ``error`` (what
    DeleteJob would have raised for it alone). NOT_FOUND after a retried
    call may mean an earlier attempt of the call deleted it."""

    job_id: str
    canceled_executions: int = 0
    error: TickwheelError | None = None

    @property
    def ok(self) -> bool:
        """True when this item deleted the job."""
        return self.error is None


def plan_updates(
    changes: Iterable[job_pb2.Job | scheduler_pb2.UpdateJobRequest],
    update_mask: Sequence[str] | field_mask_pb2.FieldMask | None = None,
    *,
    batch_size: int = MAX_BATCH_ITEMS,
    max_bytes: int = MAX_CALL_BYTES,
    view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED,
) -> list[scheduler_pb2.BatchUpdateJobsRequest]:
    """The BatchUpdateJobs requests that apply ``changes``, in order, at
    most ``batch_size`` (1..1000) items and, past the first, ``max_bytes``
    each. A change is a ``Job`` (its ``id``, the ``version`` last read and
    the new values), sent with ``update_mask`` (None or empty: every
    mutable field), or a whole ``UpdateJobRequest`` with its own mask.
    ``TypeError`` for anything else; ``ValueError`` for a bad ``batch_size``."""
    _check_batch_size(batch_size)
    mask = field_mask(update_mask)
    items = []
    for index, change in enumerate(changes):
        if isinstance(change, scheduler_pb2.UpdateJobRequest):
            items.append(change)
        elif isinstance(change, job_pb2.Job):
            item = scheduler_pb2.UpdateJobRequest(job=change)
            if mask is not None:
                item.update_mask.CopyFrom(mask)
            items.append(item)
        else:
            raise TypeError(f"changes[{index}] is a {type(change).__name__}, not a Job or an UpdateJobRequest")
    return [batch_update_jobs(call, view=view) for call in _split(items, batch_size, max_bytes)]


def plan_deletes(
    job_ids: Iterable[str],
    versions: Sequence[int] | None = None,
    *,
    batch_size: int = MAX_BATCH_ITEMS,
) -> list[scheduler_pb2.BatchDeleteJobsRequest]:
    """The BatchDeleteJobs requests that delete ``job_ids``, in order, at
    most ``batch_size`` (1..1000) each. ``versions``, when given, has one
    entry per id (0: any version). ``TypeError`` for an id that is not a
    string; ``ValueError`` for a length mismatch or a bad ``batch_size``."""
    _check_batch_size(batch_size)
    if isinstance(job_ids, str):
        raise TypeError("job_ids is a sequence of ids, not one string")
    job_ids = list(job_ids)
    if versions is not None and len(versions) != len(job_ids):
        raise ValueError(f"versions has {len(versions)} entries for {len(job_ids)} ids")
    items = []
    for index, job_id in enumerate(job_ids):
        if not isinstance(job_id, str):
            raise TypeError(f"job_ids[{index}] is a {type(job_id).__name__}, not a str")
        version = versions[index] if versions is not None else 0
        items.append(scheduler_pb2.DeleteJobRequest(id=job_id, version=version))
    return [batch_delete_jobs(call) for call in _split(items, batch_size, MAX_CALL_BYTES)]


ANSWER_TOO_LARGE = "BATCH_ANSWER_TOO_LARGE"
"""The ErrorInfo reason of a batch refused because its answer would be too large."""


def answer_too_large(error: TickwheelError, request) -> bool:
    """True when ``error`` refused ``request`` (a batch request) for the
    size of its answer, nothing written, and ``request`` can be halved."""
    return len(request.items) > 1 and any(
        isinstance(detail, error_details_pb2.ErrorInfo) and detail.reason == ANSWER_TOO_LARGE
        for detail in error.details
    )


def halves(request) -> list:
    """``request`` (a batch request) as two requests of its first and
    second half of items, in order, with its ``view``."""
    items = list(request.items)
    middle = len(items) // 2
    return [type(request)(items=items[:middle], view=request.view), type(request)(items=items[middle:], view=request.view)]


def _results(method: str, request, response) -> list:
    if len(response.results) != len(request.items):
        raise TickwheelError(
            grpc.StatusCode.INTERNAL, f"{method} answered {len(response.results)} results for {len(request.items)} items"
        )
    return list(response.results)


def update_outcomes(
    request: scheduler_pb2.BatchUpdateJobsRequest, response: scheduler_pb2.BatchUpdateJobsResponse
) -> list[UpdateOutcome]:
    """One outcome per item of ``request``, in order, from ``response``;
    ``TickwheelError`` (INTERNAL) when the response breaks the contract (as
    :func:`outcomes`)."""
    out = []
    for index, (item, result) in enumerate(zip(request.items, _results("BatchUpdateJobs", request, response))):
        kind = result.WhichOneof("result")
        if kind == "job":
            out.append(UpdateOutcome(item.job.id, job=result.job.job))
        elif kind == "error":
            out.append(UpdateOutcome(item.job.id, error=TickwheelError.from_status(result.error)))
        else:
            raise TickwheelError(grpc.StatusCode.INTERNAL, f"BatchUpdateJobs result {index} has neither a job nor an error")
    return out


def delete_outcomes(
    request: scheduler_pb2.BatchDeleteJobsRequest, response: scheduler_pb2.BatchDeleteJobsResponse
) -> list[DeleteOutcome]:
    """One outcome per item of ``request``, in order, from ``response``;
    ``TickwheelError`` (INTERNAL) when the response breaks the contract."""
    out = []
    for index, (item, result) in enumerate(zip(request.items, _results("BatchDeleteJobs", request, response))):
        kind = result.WhichOneof("result")
        if kind == "deleted":
            out.append(DeleteOutcome(item.id, canceled_executions=result.deleted.canceled_executions))
        elif kind == "error":
            out.append(DeleteOutcome(item.id, error=TickwheelError.from_status(result.error)))
        else:
            raise TickwheelError(
                grpc.StatusCode.INTERNAL, f"BatchDeleteJobs result {index} has neither a deletion nor an error"
            )
    return out
