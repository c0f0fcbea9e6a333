"""The Python SDK's batch helpers keep each answer readable: ``view`` sent
on every call, and a call the server refuses for the size of its answer
(INVALID_ARGUMENT with ErrorInfo BATCH_ANSWER_TOO_LARGE: nothing written)
sent again as two halves, in order, until each fits; any other refusal, or
a refused single item, raised as it was."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from tests.unit.sdk.fake_tickwheel import FakeTickwheel, Failure, failure
from tests.unit.sdk.test_sdk_batch import _client
from tests.unit.sdk.test_sdk_batch_changes import _updated
from tickwheel import AsyncClient, TickwheelError, batch
from tickwheel._calls import batch_pause_jobs
from tickwheel.v1 import job_pb2, scheduler_pb2

BASIC = scheduler_pb2.JOB_VIEW_BASIC


def too_large() -> Failure:
    status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message="items: the answer would be too large")
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason="BATCH_ANSWER_TOO_LARGE", domain="tickwheel"))
    status.details.append(detail)
    return Failure(rpc_status.to_status(status))


def refuse_over(limit: int):
    """A BatchUpdateJobs/BatchCreateJobs handler refusing calls of more than ``limit`` items."""

    def handle(request, context=None):
        if len(request.items) > limit:
            return too_large()
        if isinstance(request, scheduler_pb2.BatchUpdateJobsRequest):
            return _updated(request)
        response = scheduler_pb2.BatchCreateJobsResponse(created_count=len(request.items))
        for item in request.items:
            response.results.add().job.job.CopyFrom(job_pb2.Job(id=item.request_id, name=item.job.name))
        return response

    return handle


def test_a_refused_update_call_is_halved_until_each_answer_fits(fake: FakeTickwheel) -> None:
    fake.reply("BatchUpdateJobs", refuse_over(300))
    changes = [job_pb2.Job(id=f"j{i}", version=1, name=f"n{i}") for i in range(1100)]
    with _client(fake) as client:
        outcomes = client.update_jobs(changes, ["name"])
    sizes = [len(call.items) for call in fake.requests("BatchUpdateJobs")]
    assert sizes == [1000, 500, 250, 250, 500, 250, 250, 100]
    assert [o.job_id for o in outcomes] == [c.id for c in changes] and all(o.ok for o in outcomes)
    assert [o.job.name for o in outcomes] == [c.name for c in changes]


def test_the_view_is_sent_on_every_call_and_its_halves(fake: FakeTickwheel) -> None:
    fake.reply("BatchCreateJobs", refuse_over(3))
    jobs = [job_pb2.Job(name=f"n{i}") for i in range(7)]
    with _client(fake) as client:
        outcomes = client.create_jobs(jobs, [f"r{i}" for i in range(7)], view=BASIC)
    calls = fake.requests("BatchCreateJobs")
    assert [len(call.items) for call in calls] == [7, 3, 4, 2, 2]
    assert {call.view for call in calls} == {BASIC}
    # The halves resend the very items: the same request ids, so a repeat creates nothing twice.
    assert [o.request_id for o in outcomes] == [f"r{i}" for i in range(7)]
    assert [o.job.name for o in outcomes] == [f"n{i}" for i in range(7)]


async def test_the_async_client_halves_too(fake: FakeTickwheel) -> None:
    fake.reply("BatchUpdateJobs", refuse_over(1))
    async with AsyncClient(fake.address, api_key=fake.api_key) as client:
        outcomes = await client.update_jobs([job_pb2.Job(id=f"j{i}", version=1, name="x") for i in range(3)], ["name"])
    assert [len(call.items) for call in fake.requests("BatchUpdateJobs")] == [3, 1, 2, 1, 1]
    assert [o.job_id for o in outcomes] == ["j0", "j1", "j2"]


def test_a_refused_single_item_and_other_refusals_are_raised(fake: FakeTickwheel) -> None:
    fake.reply("BatchUpdateJobs", refuse_over(0))
    with _client(fake) as client, pytest.raises(TickwheelError) as refused:
        client.update_jobs([job_pb2.Job(id="j0", version=1, name="x"), job_pb2.Job(id="j1", version=1)], ["name"])
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [len(call.items) for call in fake.requests("BatchUpdateJobs")] == [2, 1]

    other = FakeTickwheel().start()
    try:
        other.reply("BatchUpdateJobs", failure(grpc.StatusCode.INVALID_ARGUMENT, "items", [("items", "must hold")]))
        with _client(other) as client, pytest.raises(TickwheelError):
            client.update_jobs([job_pb2.Job(id=f"j{i}", version=1) for i in range(4)], ["name"])
        assert [len(call.items) for call in other.requests("BatchUpdateJobs")] == [4]  # not halved
    finally:
        other.stop()


def test_the_view_is_checked_and_carried_by_the_builders() -> None:
    assert batch_pause_jobs([scheduler_pb2.PauseJobRequest(id="a")], view=BASIC).view == BASIC
    assert batch_pause_jobs([scheduler_pb2.PauseJobRequest(id="a")]).view == scheduler_pb2.JOB_VIEW_UNSPECIFIED
    for bad in (7, -1, True, "BASIC"):
        with pytest.raises(ValueError):
            batch_pause_jobs([scheduler_pb2.PauseJobRequest(id="a")], view=bad)
    (request,) = batch.plan_updates([job_pb2.Job(id="a", version=1)], view=BASIC)
    assert request.view == BASIC
    left, right = batch.halves(scheduler_pb2.BatchPauseJobsRequest(
        items=[scheduler_pb2.PauseJobRequest(id=str(i)) for i in range(5)], view=BASIC))  # fmt: skip
    assert ([i.id for i in left.items], [i.id for i in right.items], left.view, right.view) == (
        ["0", "1"], ["2", "3", "4"], BASIC, BASIC)  # fmt: skip


def test_create_calls_leave_room_for_what_the_answer_adds() -> None:
    """A full answer holds each job and its output-only fields: creates are
    packed so that the answer the server bounds stays under 3 MiB, and a
    call is not refused (and rolled back) only to be halved."""
    jobs = [job_pb2.Job(name=f"j{i}", payload=b"x" * 3000) for i in range(1000)]
    requests = batch.plan(jobs)
    assert len(requests) > 1 and sum(len(r.items) for r in requests) == 1000
    for r in requests:
        assert sum(item.ByteSize() + 8 + batch.ANSWER_MARGIN for item in r.items) <= batch.MAX_CALL_BYTES
    basic = batch.plan(jobs, view=BASIC)
    assert len(basic) <= len(requests) and all(r.view == BASIC for r in basic)
