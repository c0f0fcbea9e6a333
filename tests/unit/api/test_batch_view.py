"""The answer budget of the batch calls (api/batchview): each item's bound
is at least what its job adds to the answer, in either view, for jobs at
the edges of what a record holds (texts at their longest, numbers and
instants at their widest); the budget refuses past its limit and counts
refused items; a view that is not one is refused."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from tickwheel.v1 import job_pb2, scheduler_pb2

from tickwheel.shared.ids import new_job_ids, to_us
from tickwheel_server.api import batchanswer, batchview, convert
from tickwheel_server.api.status import status_for
from tickwheel_server.errors import AnswerTooLarge, InvalidArgument, NotFound
from tickwheel_server.store.jobcreate import CREATED
from tickwheel_server.store.jobrecords import JobRecord, NewJobs

WIDE = datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc)


def record(state: str = "active", *, text: str = "é" * 1024, payload: bytes = b"\xff" * 65536) -> JobRecord:
    spec = job_pb2.Job(name=text, payload=payload, labels={"k" * 63: "v" * 63},
                       target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="h" * 200))).SerializeToString()  # fmt: skip
    return JobRecord(
        id="j" * 200, tenant="t" * 63, partition=7, name=text, state=state, spec=spec, time_zone="Europe/London",
        next_run_at=WIDE, next_due_at=WIDE, run_count=2**63 - 1, tzdata_version="2099zz", pause_reason=text,
        version=2**63 - 1, created_at=WIDE, updated_at=WIDE, paused_at=WIDE,
    )  # fmt: skip


@pytest.mark.parametrize("state", ["active", "paused", "completed"])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("text", ["", "x", "é" * 1024, "\U0001f600" * 1024])
def test_the_bound_is_at_least_every_result_the_job_is_answered_in(state, full, text) -> None:
    rec = record(state, text=text)
    job = batchview.job_in_view(rec, full)
    counts = 2**63 - 1
    results = [
        scheduler_pb2.BatchPauseJobsResult(job=scheduler_pb2.PauseJobResponse(job=job, held_executions=counts)),
        scheduler_pb2.BatchResumeJobsResult(job=scheduler_pb2.ResumeJobResponse(job=job, released_executions=counts)),
        scheduler_pb2.BatchUpdateJobsResult(job=scheduler_pb2.UpdateJobResponse(job=job)),
        scheduler_pb2.BatchCreateJobsResult(job=scheduler_pb2.CreateJobResponse(job=job, created=True)),
    ]
    bound = batchview.job_bound(rec, full)
    for result in results:  # as an element of the response's results: its tag and length prefix too
        assert len(result.SerializeToString()) + 1 + 5 <= bound


def test_the_basic_view_holds_no_definition() -> None:
    job = batchview.job_in_view(record("paused"), False)
    assert not job.payload and not job.labels and not job.HasField("target") and not job.tenant
    assert job.name == "é" * 1024 and job.state == job_pb2.JOB_STATE_PAUSED and not job.HasField("next_run_at")
    full = batchview.job_in_view(record("paused"), True)
    assert full == convert.job_to_proto(record("paused"))


def test_the_budget_refuses_past_its_limit_counting_refusals_and_errors() -> None:
    rec = record()
    each = batchview.job_bound(rec, True)
    fit = batchview.ANSWER_BUDGET // each
    batchview.AnswerBudget([], lambda r: batchview.job_bound(r, True))([rec] * fit)
    with pytest.raises(AnswerTooLarge) as refused:
        batchview.AnswerBudget([], lambda r: batchview.job_bound(r, True))([rec] * (fit + 1))
    assert refused.value.violations[0].field == "items" and "JOB_VIEW_BASIC" in str(refused.value)
    # Items refused before the store, and errors the store answers, count too.
    slack = batchview.ANSWER_BUDGET - fit * each
    refusal = scheduler_pb2.BatchPauseJobsResult(error=status_for(InvalidArgument.field("id", "x" * 400))[1])
    refusals = slack // refusal.ByteSize() + 1
    with pytest.raises(AnswerTooLarge):
        batchview.AnswerBudget([refusal] * refusals, lambda r: batchview.job_bound(r, True))([rec] * fit)
    missing = NotFound("job", "j" * 10_000)
    errors = slack // status_for(missing)[1].ByteSize() + 1
    with pytest.raises(AnswerTooLarge):
        batchview.AnswerBudget([], lambda r: batchview.job_bound(r, True))([rec] * fit + [missing] * errors)
    # The basic view of the same jobs fits a thousand of them.
    batchview.AnswerBudget([], lambda r: batchview.job_bound(r, False))([record(text="x" * 200)] * 1000)


@pytest.mark.parametrize("view", [-1, 3, 7, 2**31 - 1])
def test_a_view_that_is_not_one_is_refused(view) -> None:
    with pytest.raises(InvalidArgument) as refused:
        batchview.full_view(scheduler_pb2.BatchPauseJobsRequest(view=view))
    assert refused.value.violations[0].field == "view"
    assert batchview.full_view(scheduler_pb2.BatchPauseJobsRequest()) is True
    assert batchview.full_view(scheduler_pb2.BatchPauseJobsRequest(view=scheduler_pb2.JOB_VIEW_BASIC)) is False


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("name", ["r", "é" * 1024, "\U0001f600" * 1024])
def test_a_batch_create_answer_is_within_its_bound(full, name) -> None:
    """The answer BatchCreateJobs sends for created, found and refused items
    is no larger than the bound its transaction checked."""
    now = datetime(2027, 3, 1, 12, 0, 0, 250_001, tzinfo=timezone.utc)
    batch = NewJobs("t" * 63)
    ids = new_job_ids(now, 3)
    for i, job_id in enumerate(ids):
        spec = job_pb2.Job(name=name, payload=b"\xff" * 4096).SerializeToString()
        due = to_us(WIDE) if i else None
        batch.add(job_id, f"r{i}", name, spec, "UTC", due, due, "2099zz", 4096, ())  # fmt: skip
    outcomes = [CREATED, CREATED, (record(text=name), False)]
    refused = {3: InvalidArgument.field("job.name", "x" * 400)}
    answer = batchanswer.batch_create_response(4, refused, [0, 1, 2], batch, outcomes, WIDE, full)
    size = len(answer.data) if full else answer.ByteSize()
    bound = batchview.create_bound(batch, outcomes, full) + sum(
        status_for(e)[1].ByteSize() + 8 for e in refused.values()
    )  # fmt: skip
    assert size <= bound
