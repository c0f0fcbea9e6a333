"""``update_jobs`` and ``delete_jobs`` against a scripted server: calls of at
most 1 000 items in order, one outcome per item with item errors mapped like
the single calls', UNAVAILABLE retried with the very same items, and a
server answering the wrong number of results refused."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.rpc import code_pb2, status_pb2

from tests.unit.sdk.fake_tickwheel import FakeTickwheel, failure
from tests.unit.sdk.test_sdk_batch import FAST, _bad_request, _client
from tickwheel import AsyncClient, DeleteOutcome, TickwheelError, UpdateOutcome
from tickwheel import batch
from tickwheel.v1 import job_pb2, scheduler_pb2


def _updated(request: scheduler_pb2.BatchUpdateJobsRequest, _context=None) -> scheduler_pb2.BatchUpdateJobsResponse:
    """Applies every item whose id does not start with "gone" (NOT_FOUND) or
    whose name is not "bad" (INVALID_ARGUMENT on ``job.name``)."""
    response = scheduler_pb2.BatchUpdateJobsResponse()
    for item in request.items:
        if item.job.id.startswith("gone"):
            response.results.add(error=status_pb2.Status(code=code_pb2.NOT_FOUND, message="job not found"))
        elif item.job.name == "bad":
            response.results.add(error=_bad_request("job.name", "bad"))
        else:
            job = job_pb2.Job(id=item.job.id, name=item.job.name, version=item.job.version + 1)
            response.results.add(job=scheduler_pb2.UpdateJobResponse(job=job))
    return response


def _deleted(request: scheduler_pb2.BatchDeleteJobsRequest, _context=None) -> scheduler_pb2.BatchDeleteJobsResponse:
    response = scheduler_pb2.BatchDeleteJobsResponse()
    for item in request.items:
        if item.id.startswith("gone"):
            response.results.add(error=status_pb2.Status(code=code_pb2.NOT_FOUND, message="job not found"))
        else:
            response.results.add(deleted=scheduler_pb2.DeleteJobResponse(canceled_executions=len(item.id)))
    return response


def test_updates_go_in_calls_of_at_most_1000_in_order_with_the_mask(fake: FakeTickwheel) -> None:
    fake.reply("BatchUpdateJobs", _updated)
    changes = [job_pb2.Job(id=f"j{i}", version=3, name="bad" if i == 7 else f"n{i}") for i in range(2100)]
    changes[5] = job_pb2.Job(id="gone-5", version=1, name="x")
    with _client(fake) as client:
        outcomes = client.update_jobs(changes, ["name"])

    calls = fake.requests("BatchUpdateJobs")
    assert [len(call.items) for call in calls] == [1000, 1000, 100]
    items = [item for call in calls for item in call.items]
    assert [item.job.id for item in items] == [change.id for change in changes]
    assert all(list(item.update_mask.paths) == ["name"] for item in items)
    assert len(outcomes) == 2100 and all(isinstance(o, UpdateOutcome) for o in outcomes)
    assert [o.job_id for o in outcomes] == [change.id for change in changes]
    assert outcomes[0].ok and outcomes[0].job.version == 4
    assert outcomes[5].error.code == grpc.StatusCode.NOT_FOUND and outcomes[5].job is None
    assert outcomes[7].error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in outcomes[7].error.field_violations] == ["job.name"]


def test_an_update_request_keeps_its_own_mask(fake: FakeTickwheel) -> None:
    fake.reply("BatchUpdateJobs", _updated)
    own = scheduler_pb2.UpdateJobRequest(job=job_pb2.Job(id="a", version=1, name="x"), update_mask={"paths": ["labels"]})
    with _client(fake) as client:
        client.update_jobs([own, job_pb2.Job(id="b", version=1, name="y")], ["name"])
    (call,) = fake.requests("BatchUpdateJobs")
    assert [list(item.update_mask.paths) for item in call.items] == [["labels"], ["name"]]


def test_deletes_go_in_calls_with_their_versions_and_map_each_item(fake: FakeTickwheel) -> None:
    fake.reply("BatchDeleteJobs", _deleted)
    ids = [f"job-{i}" for i in range(1500)]
    ids[3] = "gone-3"
    with _client(fake) as client:
        outcomes = client.delete_jobs(ids, [i % 2 for i in range(1500)], batch_size=700)

    calls = fake.requests("BatchDeleteJobs")
    assert [len(call.items) for call in calls] == [700, 700, 100]
    items = [item for call in calls for item in call.items]
    assert [(item.id, item.version) for item in items] == [(job_id, i % 2) for i, job_id in enumerate(ids)]
    assert all(isinstance(o, DeleteOutcome) for o in outcomes)
    assert outcomes[0].ok and outcomes[0].canceled_executions == len("job-0")
    assert outcomes[3].error.code == grpc.StatusCode.NOT_FOUND and not outcomes[3].ok


@pytest.mark.parametrize(("method", "handler"), [("BatchUpdateJobs", _updated), ("BatchDeleteJobs", _deleted)])
def test_an_unavailable_call_is_retried_with_the_same_items(fake: FakeTickwheel, method, handler) -> None:
    unavailable = failure(grpc.StatusCode.UNAVAILABLE, "store unreachable")
    fake.script(method, unavailable, unavailable)
    fake.reply(method, handler)
    sleeps: list[float] = []
    with _client(fake, sleeps) as client:
        if method == "BatchUpdateJobs":
            outcomes = client.update_jobs([job_pb2.Job(id=f"j{i}", version=1, name="n") for i in range(3)], ["name"])
        else:
            outcomes = client.delete_jobs(["a", "b", "c"])
    calls = fake.requests(method)
    assert len(calls) == 3 and calls[0] == calls[1] == calls[2]
    assert len(sleeps) == 2 and all(o.ok for o in outcomes)


def test_an_update_without_a_version_is_not_retried(fake: FakeTickwheel) -> None:
    """The server refuses it anyway; without a version a retry could apply twice."""
    fake.reply("BatchUpdateJobs", failure(grpc.StatusCode.UNAVAILABLE, "down"))
    with _client(fake) as client, pytest.raises(TickwheelError) as raised:
        client.update_jobs([job_pb2.Job(id="a", name="n")], ["name"])
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(fake.requests("BatchUpdateJobs")) == 1


def test_a_call_failing_after_its_retries_raises(fake: FakeTickwheel) -> None:
    fake.reply("BatchDeleteJobs", failure(grpc.StatusCode.UNAVAILABLE, "down"))
    with _client(fake) as client, pytest.raises(TickwheelError) as raised:
        client.delete_jobs(["a"])
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(fake.requests("BatchDeleteJobs")) == FAST.max_attempts


@pytest.mark.parametrize("drop", [1, -1])
def test_a_wrong_number_of_results_is_an_error(fake: FakeTickwheel, drop: int) -> None:
    def short(request, _context=None):
        response = _deleted(request)
        if drop > 0:
            del response.results[-1]
        else:
            response.results.add(deleted=scheduler_pb2.DeleteJobResponse())
        return response

    fake.reply("BatchDeleteJobs", short)
    with _client(fake) as client, pytest.raises(TickwheelError) as raised:
        client.delete_jobs(["a", "b"])
    assert raised.value.code == grpc.StatusCode.INTERNAL


def test_a_result_with_neither_is_an_error() -> None:
    request = batch.plan_updates([job_pb2.Job(id="a", version=1)])[0]
    response = scheduler_pb2.BatchUpdateJobsResponse()
    response.results.add()
    with pytest.raises(TickwheelError) as raised:
        batch.update_outcomes(request, response)
    assert raised.value.code == grpc.StatusCode.INTERNAL


def test_nothing_given_makes_no_call_and_bad_arguments_none_either(fake: FakeTickwheel) -> None:
    with _client(fake) as client:
        assert client.update_jobs([]) == [] and client.delete_jobs([]) == []
        with pytest.raises(TypeError):
            client.delete_jobs("job-1")
        with pytest.raises(TypeError):
            client.delete_jobs([1])
        with pytest.raises(ValueError):
            client.delete_jobs(["a", "b"], [1])
        with pytest.raises(TypeError):
            client.update_jobs([{"id": "a"}])
        with pytest.raises(ValueError):
            client.update_jobs([job_pb2.Job(id="a", version=1)], batch_size=1001)
    assert fake.requests("BatchUpdateJobs") == [] and fake.requests("BatchDeleteJobs") == []


def test_the_async_client_sends_the_same_calls(fake: FakeTickwheel) -> None:
    fake.reply("BatchUpdateJobs", _updated)
    fake.reply("BatchDeleteJobs", _deleted)

    async def run():
        async with AsyncClient(fake.address, api_key=fake.api_key, retries=FAST) as client:
            updated = await client.update_jobs([job_pb2.Job(id=f"j{i}", version=1, name="n") for i in range(3)],
                                               ["name"], batch_size=2)  # fmt: skip
            deleted = await client.delete_jobs(["gone", "b"])
            return updated, deleted

    updated, deleted = asyncio.run(run())
    assert [len(call.items) for call in fake.requests("BatchUpdateJobs")] == [2, 1]
    assert [o.job.version for o in updated] == [2, 2, 2]
    assert not deleted[0].ok and deleted[1].ok


def test_batch_pause_and_resume_are_sent_as_given_and_retried(fake: FakeTickwheel) -> None:
    unavailable = failure(grpc.StatusCode.UNAVAILABLE, "store unreachable")
    fake.script("BatchPauseJobs", unavailable)
    fake.reply("BatchPauseJobs", scheduler_pb2.BatchPauseJobsResponse(paused_count=1))
    fake.reply("BatchResumeJobs", scheduler_pb2.BatchResumeJobsResponse(resumed_count=1))
    with _client(fake) as client:
        client.batch_pause_jobs([scheduler_pb2.PauseJobRequest(id="a", reason="incident")])
        client.batch_resume_jobs([scheduler_pb2.ResumeJobRequest(id="a")])
        with pytest.raises(ValueError):
            client.batch_pause_jobs([])
    paused = fake.requests("BatchPauseJobs")
    assert len(paused) == 2 and paused[0] == paused[1] and paused[0].items[0].reason == "incident"
    assert fake.requests("BatchResumeJobs")[0].items[0].id == "a"
