"""How much of each job a batch call answers (``JobView``), and the size
its answer may reach.

A batch answers each item with its job; in ``JOB_VIEW_FULL`` (the
default, what the batch calls answered before views) that is the whole
definition, payload included, so a few hundred small items over jobs with
large payloads would answer past what a default gRPC client reads: the
change applied, the caller told RESOURCE_EXHAUSTED, and so every retry.
:class:`AnswerBudget` refuses such a call before anything is written: the
store runs its check inside the call's transaction, on the outcomes about
to be committed, and an answer over :data:`ANSWER_BUDGET` raises
:class:`~tickwheel_server.errors.AnswerTooLarge`, which rolls the
transaction back. The check adds up an upper bound of each item's answer
from the record's lengths (:func:`job_bound`): no message is built while
the rows are locked. ``JOB_VIEW_BASIC`` answers the job's identity and
state only (:func:`basic_job`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tickwheel.v1 import job_pb2, scheduler_pb2

from ..errors import AnswerTooLarge, InvalidArgument
from ..store.jobcreate import CREATED
from ..store.jobrecords import JobRecord, NewJobs
from . import convert
from .status import status_for

ANSWER_BUDGET = convert.PAGE_BYTES
"""The most bytes a batch call answers: what a listing's page holds (a
default gRPC client reads 4 MiB)."""

_VIEWS = {
    scheduler_pb2.JOB_VIEW_UNSPECIFIED: True,
    scheduler_pb2.JOB_VIEW_FULL: True,
    scheduler_pb2.JOB_VIEW_BASIC: False,
}

_FIXED = 256
"""More than the bytes of a job's answer beyond its variable-length fields:
the tags and length prefixes of the result, the response and the job, and
its numbers and four timestamps at their widest (varints of 10 bytes)."""


def full_view(request) -> bool:
    """True when ``request`` (a batch request) asks for whole jobs;
    INVALID_ARGUMENT ``view`` for a value that is not a ``JobView``."""
    full = _VIEWS.get(request.view)
    if full is None:
        raise InvalidArgument.field("view", f"must be JOB_VIEW_BASIC or JOB_VIEW_FULL, not {request.view}")
    return full


def basic_job(record: JobRecord) -> job_pb2.Job:
    """``record``'s job in ``JOB_VIEW_BASIC``: identity and state, no definition."""
    job = job_pb2.Job(
        id=record.id, name=record.name, state=convert.JOB_STATE_TO_PROTO[record.state], version=record.version,
        run_count=record.run_count, pause_reason=record.pause_reason,
    )  # fmt: skip
    if record.state == "active":
        if record.next_run_at is not None:
            convert.set_timestamp(job.next_run_at, record.next_run_at)
        if record.next_due_at is not None:
            convert.set_timestamp(job.next_due_at, record.next_due_at)
    if record.updated_at is not None:
        convert.set_timestamp(job.updated_at, record.updated_at)
    return job


def job_in_view(record: JobRecord, full: bool) -> job_pb2.Job:
    """``record``'s job as the view asks (:func:`convert.job_to_proto` when full)."""
    return convert.job_to_proto(record) if full else basic_job(record)


def _text(value: str) -> int:
    return len(value.encode())


def job_bound(record: JobRecord, full: bool) -> int:
    """At least the bytes ``record``'s job adds to a batch answer (its result
    included) in the view: the definition's and the texts' lengths, and
    :data:`_FIXED` for the rest."""
    texts = _text(record.id) + _text(record.pause_reason)
    if full:  # the definition (which holds the name) and the output-only texts
        return len(record.spec) + texts + _text(record.tenant) + _text(record.tzdata_version) + _FIXED
    return texts + _text(record.name) + _FIXED


def _answered(results: Iterable) -> int:
    """The bytes results already made (messages; None skipped) add to an answer."""
    return sum(result.ByteSize() + 8 for result in results if result is not None)


class AnswerBudget:
    """The check a batch's store call runs on its outcomes before it
    commits (see the module): ``refused`` holds the results already made
    (items refused before the store), ``bound(outcome)`` the bound of a
    successful outcome's result."""

    def __init__(self, refused: Iterable, bound: Callable[[object], int]) -> None:
        self._used = _answered(refused)
        self._bound = bound

    def __call__(self, outcomes: Iterable) -> None:
        total = self._used
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                total += status_for(outcome)[1].ByteSize() + 8
            else:
                total += self._bound(outcome)
        if total > ANSWER_BUDGET:
            raise AnswerTooLarge(total, ANSWER_BUDGET)


def create_check(batch: NewJobs, refused: Iterable[Exception], full: bool) -> Callable[[list], None]:
    """The check :meth:`~tickwheel_server.store.jobs.JobStore.create_batch`
    runs on a BatchCreateJobs call's outcomes (``batch``'s, its other items
    ``refused``): :class:`AnswerBudget`'s refusal, the outcomes bounded by
    :func:`create_bound` (a created job from its columns, no record built)."""
    used = _answered(status_for(error)[1] for error in refused)

    def check(outcomes: list) -> None:
        total = used + create_bound(batch, outcomes, full)
        if total > ANSWER_BUDGET:
            raise AnswerTooLarge(total, ANSWER_BUDGET)

    return check


def create_bound(batch: NewJobs, outcomes: list, full: bool) -> int:
    """At least the bytes the results of ``batch``'s ``outcomes`` add to a
    BatchCreateJobs answer in the view."""
    fixed = _FIXED + _text(batch.tenant)
    specs, ids, names, tzdata = batch.specs, batch.ids, batch.names, batch.tzdata
    if full and len(outcomes) == len(ids) and outcomes.count(CREATED) == len(outcomes):
        # Every job created (the usual call): the same sum, column by column.
        return fixed * len(ids) + sum(map(len, ids)) + sum(map(len, specs)) + sum(map(len, tzdata))
    total = 0
    for k, outcome in enumerate(outcomes):
        if outcome is CREATED:  # ids and tzdata versions are the server's ASCII
            total += fixed + len(ids[k]) + (len(specs[k]) + len(tzdata[k]) if full else _text(names[k]))
        elif isinstance(outcome, Exception):
            total += status_for(outcome)[1].ByteSize() + 8
        else:
            total += job_bound(outcome[0], full)
    return total
