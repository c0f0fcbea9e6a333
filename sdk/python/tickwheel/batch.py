"""Creating any number of jobs through BatchCreateJobs: the pure half.

``plan`` splits jobs into calls of at most 1 000 items (and fewer when
their payloads would make a call larger than a server takes) and gives each item
its request id once (the caller's, or a fresh uuid4), so a retried call
resends the very same ids and the server answers a repeat instead of
creating twice. ``outcomes`` turns one call's response into one
:class:`CreateOutcome` per item, in order, each item's error mapped to
:class:`~tickwheel.errors.TickwheelError` as a failed CreateJob would be.
The clients' ``create_jobs`` send the planned calls between the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import grpc

from tickwheel._calls import MAX_BATCH_ITEMS, batch_create_jobs, new_request_id
from tickwheel.errors import TickwheelError
from tickwheel.v1 import job_pb2, scheduler_pb2

__all__ = ["MAX_BATCH_ITEMS", "MAX_CALL_BYTES", "CreateOutcome", "outcomes", "plan"]

MAX_CALL_BYTES = 3 * 1024 * 1024
"""Items are packed into one call up to this many bytes: gRPC servers refuse
messages over 4 MiB by default, and a thousand jobs with 64 KiB payloads
would be 64 MiB."""


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
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_ITEMS:
        raise ValueError(f"batch_size must be 1 to {MAX_BATCH_ITEMS}, got {batch_size!r}")
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
    calls: list[list[scheduler_pb2.CreateJobRequest]] = []
    size = 0
    for item in items:
        item_bytes = item.ByteSize() + 8  # the field's tag and length prefix, generously
        if not calls or len(calls[-1]) >= batch_size or size + item_bytes > max_bytes:
            calls.append([])
            size = 0
        calls[-1].append(item)
        size += item_bytes
    return [batch_create_jobs(call) for call in calls]


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
