"""BatchCreateJobs' answer, assembled from serialized parts.

A created item is answered with its job: the definition it was stored from
(already serialized, :class:`~tickwheel_server.store.jobrecords.NewJobs`'s
``specs``) plus the output-only fields :func:`.convert.job_to_proto` would
set from its row. Those fields are the same for every job of a call but
for the id and the two instants, so the shared ones are serialized once
per (state, tzdata version) and each job adds its own; the results are
joined as protobuf's wire format and sent as they are
(:class:`.decoding.Serialized`). A
message that appears twice in a serialization merges, and the definition
holds no output-only field, so each job parses as the message
``job_to_proto`` gives (``tests/unit/api/test_batch_answer.py``).
Refused and repeated items are answered through the messages as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tickwheel.v1 import job_pb2, scheduler_pb2

from tickwheel.shared.ids import from_us

from ..errors import TickwheelError
from ..store.jobcreate import CREATED, Outcome
from ..store.jobrecords import NewJobs
from ..wire import varint
from . import convert
from .batchview import basic_job
from .decoding import Serialized
from .status import status_for


_SMALL = [varint(n) for n in range(1 << 14)]
"""Varints of the lengths most parts have."""


def _length(value: int) -> bytes:
    return _SMALL[value] if value < 16384 else varint(value)


_RESULT = b"\x0a"  # BatchCreateJobsResponse.results = 1
_JOB_RESULT = b"\x0a"  # BatchCreateJobsResult.job = 1
_ERROR_RESULT = b"\x12"  # BatchCreateJobsResult.error = 2
_JOB = b"\x0a"  # CreateJobResponse.job = 1
_CREATED_TRUE = b"\x10\x01"  # CreateJobResponse.created = 2
_CREATED_COUNT, _EXISTING_COUNT, _FAILED_COUNT = b"\x10", b"\x18", b"\x20"  # BatchCreateJobsResponse 2, 3, 4
_ID = b"\x0a"  # Job.id = 1
_NEXT_RUN_AT = varint(22 << 3 | 2)
_NEXT_DUE_AT = varint(23 << 3 | 2)
assert job_pb2.Job.DESCRIPTOR.fields_by_name["next_run_at"].number == 22
assert job_pb2.Job.DESCRIPTOR.fields_by_name["next_due_at"].number == 23
assert job_pb2.Job.DESCRIPTOR.fields_by_name["id"].number == 1
assert [scheduler_pb2.BatchCreateJobsResponse.DESCRIPTOR.fields_by_name[name].number
        for name in ("results", "created_count", "existing_count", "failed_count")] == [1, 2, 3, 4]  # fmt: skip


class _Timestamps:
    """Serialized ``google.protobuf.Timestamp`` bodies of instants in
    microseconds (length-prefixed), their seconds and nanos parts memoised
    for one answer (at most a part per job)."""

    def __init__(self) -> None:
        self._seconds: dict[int, bytes] = {}
        self._nanos: dict[int, bytes] = {}

    def field(self, tag: bytes, micros: int) -> bytes:
        seconds, rest = divmod(micros, 1_000_000)
        if seconds < 0:  # never for a fire (instants start at 1970); varints of negatives are 10 bytes
            stamp = convert.timestamp(from_us(micros))
            body = stamp.SerializeToString()
            return tag + _length(len(body)) + body
        part = self._seconds.get(seconds)
        if part is None:
            part = self._seconds[seconds] = b"\x08" + varint(seconds)
        if rest:
            nanos = self._nanos.get(rest)
            if nanos is None:
                nanos = self._nanos[rest] = b"\x10" + varint(rest * 1000)
            part += nanos
        return tag + _length(len(part)) + part


def batch_create_response(
    size: int,
    refused: dict[int, TickwheelError],
    accepted: Sequence[int],
    batch: NewJobs,
    outcomes: Sequence[Outcome | None],
    created_at: datetime,
    full: bool = True,
) -> Serialized | scheduler_pb2.BatchCreateJobsResponse:
    """The answer to a call of ``size`` items, serialized: item ``refused[i]`` failed
    validation; item ``accepted[k]`` is ``batch``'s job ``k``, whose
    :meth:`~tickwheel_server.store.jobs.JobStore.create_batch` outcome is
    ``outcomes[k]`` (created at ``created_at``). Not ``full``: each job in
    ``JOB_VIEW_BASIC``, answered as a message (:func:`_basic_response`)."""
    if not full:
        return _basic_response(size, refused, accepted, batch, outcomes, created_at)
    # Every item accepted (the usual call): item i is the batch's job i.
    outcome_of = None if len(accepted) == size else dict(zip(accepted, range(len(accepted))))
    stamps = _Timestamps()
    shared: dict[tuple[bool, str], bytes] = {}
    parts: list[bytes] = []
    created = existing = 0
    ids, specs, next_runs, next_dues, tzdata = batch.ids, batch.specs, batch.next_runs, batch.next_dues, batch.tzdata
    last_run: int | None = None
    run_field = b""
    for index in range(size):
        k = index if outcome_of is None else outcome_of.get(index)
        outcome = refused[index] if k is None else outcomes[k]
        if k is not None and outcome is CREATED:
            run = next_runs[k]
            active = run is not None  # NewJobs.state
            common = shared.get((active, tzdata[k]))
            if common is None:
                common = shared[(active, tzdata[k])] = _shared_fields(batch.tenant, batch.state(k), tzdata[k], created_at)
            job_id = ids[k].encode()
            spec = specs[k]
            # The job's body: its definition, the shared fields, its id and
            # instants; joined once, with the whole answer, below.
            if active:
                if run != last_run:
                    run_field, last_run = stamps.field(_NEXT_RUN_AT, run), run
                due_field = stamps.field(_NEXT_DUE_AT, next_dues[k])
            else:
                due_field = b""
            id_length = _length(len(job_id))
            body_size = len(spec) + len(common) + len(_ID) + len(id_length) + len(job_id)
            if active:
                body_size += len(run_field) + len(due_field)
            body_length = _length(body_size)
            result_size = len(_JOB) + len(body_length) + body_size + len(_CREATED_TRUE)
            result_length = _length(result_size)
            parts += (_RESULT, _length(len(_JOB_RESULT) + len(result_length) + result_size), _JOB_RESULT, result_length, _JOB,
                      body_length, spec, common, _ID, id_length, job_id)  # fmt: skip
            if active:
                parts += (run_field, due_field)
            parts.append(_CREATED_TRUE)
            created += 1
            continue
        if isinstance(outcome, tuple):
            record, _ = outcome  # an earlier request's job, not this item's
            body = scheduler_pb2.CreateJobResponse(job=convert.job_to_proto(record)).SerializeToString()
            tag = _JOB_RESULT
            existing += 1
        else:
            body = status_for(outcome)[1].SerializeToString()
            tag = _ERROR_RESULT
        result = tag + _length(len(body)) + body
        parts += (_RESULT, _length(len(result)), result)
    for tag, count in ((_CREATED_COUNT, created), (_EXISTING_COUNT, existing), (_FAILED_COUNT, size - created - existing)):
        if count:
            parts += (tag, varint(count))
    return Serialized(b"".join(parts))


def _basic_response(
    size: int,
    refused: dict[int, TickwheelError],
    accepted: Sequence[int],
    batch: NewJobs,
    outcomes: Sequence[Outcome | None],
    created_at: datetime,
) -> scheduler_pb2.BatchCreateJobsResponse:
    """:func:`batch_create_response` in ``JOB_VIEW_BASIC``: no definition
    to copy, so the messages are built as usual."""
    outcome_of = dict(zip(accepted, range(len(accepted))))
    response = scheduler_pb2.BatchCreateJobsResponse()
    for index in range(size):
        k = outcome_of.get(index)
        outcome = refused[index] if k is None else outcomes[k]
        result = response.results.add()
        if k is not None and outcome is CREATED:
            result.job.job.CopyFrom(basic_job(batch.record(k, 0, created_at)))
            result.job.created = True
            response.created_count += 1
        elif isinstance(outcome, tuple):
            result.job.job.CopyFrom(basic_job(outcome[0]))
            response.existing_count += 1
        else:
            result.error.CopyFrom(status_for(outcome)[1])
            response.failed_count += 1
    return response


def _shared_fields(tenant: str, state: str, tzdata: str, created_at: datetime) -> bytes:
    """The output-only fields every job created by one call in ``state``
    with ``tzdata`` answers alike (``run_count`` 0 and ``pause_reason``
    empty are protobuf's defaults)."""
    job = job_pb2.Job(tenant=tenant, state=convert.JOB_STATE_TO_PROTO[state], version=1, tzdata_version=tzdata)
    convert.set_timestamp(job.created_at, created_at)
    convert.set_timestamp(job.updated_at, created_at)
    return job.SerializeToString()


class CreatedAnswers:
    """CreateJob answers of a group's created jobs, serialized as
    :func:`batch_create_response` serializes a created item's
    ``CreateJobResponse`` (the shared fields and instants memoised for the group)."""

    def __init__(self, batch: NewJobs, created_at: datetime) -> None:
        self._batch = batch
        self._created_at = created_at
        self._stamps = _Timestamps()
        self._shared: dict[tuple[bool, str], bytes] = {}

    def answer(self, k: int) -> Serialized:
        batch = self._batch
        run = batch.next_runs[k]
        active = run is not None
        tzdata = batch.tzdata[k]
        common = self._shared.get((active, tzdata))
        if common is None:
            common = _shared_fields(batch.tenant, batch.state(k), tzdata, self._created_at)
            self._shared[(active, tzdata)] = common
        job_id = batch.ids[k].encode()
        parts = [batch.specs[k], common, _ID, _length(len(job_id)), job_id]
        if active:
            parts.append(self._stamps.field(_NEXT_RUN_AT, run))
            parts.append(self._stamps.field(_NEXT_DUE_AT, batch.next_dues[k]))
        body = b"".join(parts)
        return Serialized(b"".join((_JOB, _length(len(body)), body, _CREATED_TRUE)))
