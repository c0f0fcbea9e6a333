"""``create_jobs`` against a scripted server: calls of at most 1 000 items,
request ids chosen once and kept across retries, one outcome per job in
order, per-item errors mapped like CreateJob's, and a server answering the
wrong number of results refused."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from tests.unit.sdk.fake_tickwheel import FakeTickwheel, failure
from tickwheel import AsyncClient, Client, CreateOutcome, RetryOptions, TickwheelError, cron_job
from tickwheel import batch
from tickwheel.v1 import job_pb2, scheduler_pb2

FAST = RetryOptions(max_attempts=4, initial_backoff=0.05, max_backoff=0.08)


def _client(fake: FakeTickwheel, sleeps: list[float] | None = None) -> Client:
    return Client(fake.address, api_key=fake.api_key, retries=FAST,
                  sleep=(sleeps.append if sleeps is not None else lambda _s: None))  # fmt: skip


def _jobs(count: int) -> list[job_pb2.Job]:
    return [cron_job(f"job-{i}", "0 2 * * *", "UTC", handler="echo") for i in range(count)]


def _bad_request(field: str, description: str) -> status_pb2.Status:
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.BadRequest(
        field_violations=[error_details_pb2.BadRequest.FieldViolation(field=field, description=description)]))
    return status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message="invalid job", details=[detail])


def _echo(request: scheduler_pb2.BatchCreateJobsRequest, _context=None) -> scheduler_pb2.BatchCreateJobsResponse:
    """Creates every item whose name does not start with "bad"; those answer
    INVALID_ARGUMENT on ``job.name``. Items named "old-..." were seen before."""
    response = scheduler_pb2.BatchCreateJobsResponse()
    for item in request.items:
        if item.job.name.startswith("bad"):
            response.results.add(error=_bad_request("job.name", "must not start with bad"))
            response.failed_count += 1
            continue
        seen = item.job.name.startswith("old")
        job = job_pb2.Job(id=f"job_{item.request_id}", name=item.job.name, version=1)
        response.results.add(job=scheduler_pb2.CreateJobResponse(job=job, created=not seen))
        response.existing_count += seen
        response.created_count += not seen
    return response


def test_jobs_go_in_calls_of_at_most_1000_with_one_outcome_per_job_in_order(fake: FakeTickwheel) -> None:
    fake.reply("BatchCreateJobs", _echo)
    with _client(fake) as client:
        outcomes = client.create_jobs(_jobs(2500))

    calls = fake.requests("BatchCreateJobs")
    assert [len(call.items) for call in calls] == [1000, 1000, 500]
    items = [item for call in calls for item in call.items]
    assert [item.job.name for item in items] == [f"job-{i}" for i in range(2500)]
    assert all(uuid.UUID(item.request_id).version == 4 for item in items)
    assert len({item.request_id for item in items}) == 2500
    assert len(outcomes) == 2500
    assert [o.job.name for o in outcomes] == [f"job-{i}" for i in range(2500)]
    assert [o.request_id for o in outcomes] == [item.request_id for item in items]
    assert all(o.ok and o.created and o.error is None for o in outcomes)


def test_the_callers_request_ids_are_kept_and_missing_ones_generated(fake: FakeTickwheel) -> None:
    fake.reply("BatchCreateJobs", _echo)
    with _client(fake) as client:
        outcomes = client.create_jobs(_jobs(3), ["import:1", None, ""], batch_size=2)

    calls = fake.requests("BatchCreateJobs")
    assert [len(call.items) for call in calls] == [2, 1]
    ids = [item.request_id for call in calls for item in call.items]
    assert ids[0] == "import:1"
    assert uuid.UUID(ids[1]).version == 4 and uuid.UUID(ids[2]).version == 4
    assert [o.request_id for o in outcomes] == ids


def test_an_unavailable_call_is_retried_with_the_same_request_ids(fake: FakeTickwheel) -> None:
    unavailable = failure(grpc.StatusCode.UNAVAILABLE, "store unreachable")
    fake.script("BatchCreateJobs", _echo, unavailable, unavailable)
    fake.reply("BatchCreateJobs", _echo)
    sleeps: list[float] = []
    with _client(fake, sleeps) as client:
        outcomes = client.create_jobs(_jobs(1500))

    first, *second = fake.requests("BatchCreateJobs")
    assert len(first.items) == 1000 and len(second) == 3
    sent = [[item.request_id for item in call.items] for call in second]
    assert sent[0] == sent[1] == sent[2] and len(sent[0]) == 500
    assert set(sent[0]).isdisjoint(item.request_id for item in first.items)
    assert len(sleeps) == 2 and len(outcomes) == 1500


def test_a_call_failing_after_its_retries_raises(fake: FakeTickwheel) -> None:
    fake.reply("BatchCreateJobs", failure(grpc.StatusCode.UNAVAILABLE, "down"))
    with _client(fake) as client, pytest.raises(TickwheelError) as raised:
        client.create_jobs(_jobs(2))
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(fake.requests("BatchCreateJobs")) == FAST.max_attempts


def test_item_errors_are_mapped_with_their_field_violations_and_details(fake: FakeTickwheel) -> None:
    quota = any_pb2.Any()
    quota.Pack(error_details_pb2.QuotaFailure(
        violations=[error_details_pb2.QuotaFailure.Violation(subject="tenant:acme", description="max_jobs 10")]))

    def answer(request, _context):
        response = _echo(request)
        response.results[3].Clear()
        response.results[3].error.CopyFrom(
            status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message="over max_jobs", details=[quota]))
        return response

    fake.reply("BatchCreateJobs", answer)
    jobs = _jobs(5)
    jobs[1].name = "bad-one"
    jobs[2].name = "old-one"
    with _client(fake) as client:
        outcomes = client.create_jobs(jobs)

    ok, bad, old, over, last = outcomes
    assert ok.ok and ok.created and ok.job.name == "job-0"
    assert not bad.ok and bad.job is None
    assert bad.error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [(v.field, v.description) for v in bad.error.field_violations] == [("job.name", "must not start with bad")]
    assert str(bad.error) == "INVALID_ARGUMENT: job.name: must not start with bad (invalid job)"
    assert old.ok and not old.created and old.job.name == "old-one"
    assert over.error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert isinstance(over.error.details[0], error_details_pb2.QuotaFailure)
    assert last.ok and last.created
    assert len(fake.requests("BatchCreateJobs")) == 1  # item errors are answers, not retried


@pytest.mark.parametrize("drop", [1, -1])
def test_a_wrong_number_of_results_is_an_error(fake: FakeTickwheel, drop: int) -> None:
    def answer(request, _context):
        response = _echo(request)
        if drop > 0:
            del response.results[-1]
        else:
            response.results.add(job=scheduler_pb2.CreateJobResponse(job=job_pb2.Job(id="job_extra")))
        return response

    fake.reply("BatchCreateJobs", answer)
    with _client(fake) as client, pytest.raises(TickwheelError) as raised:
        client.create_jobs(_jobs(3))
    assert raised.value.code == grpc.StatusCode.INTERNAL
    assert "for 3 items" in raised.value.message


def test_a_result_with_neither_job_nor_error_is_an_error(fake: FakeTickwheel) -> None:
    def answer(request, _context):
        response = _echo(request)
        response.results[0].Clear()
        return response

    fake.reply("BatchCreateJobs", answer)
    with _client(fake) as client, pytest.raises(TickwheelError) as raised:
        client.create_jobs(_jobs(2))
    assert raised.value.code == grpc.StatusCode.INTERNAL


def test_no_jobs_make_no_call(fake: FakeTickwheel) -> None:
    with _client(fake) as client:
        assert client.create_jobs([]) == []
    assert fake.calls == []


def test_bad_arguments_are_refused_before_any_call(fake: FakeTickwheel) -> None:
    with _client(fake) as client:
        with pytest.raises(ValueError, match="2 entries for 3 jobs"):
            client.create_jobs(_jobs(3), ["a", "b"])
        with pytest.raises(TypeError, match="jobs\\[1\\]"):
            client.create_jobs([_jobs(1)[0], scheduler_pb2.CreateJobRequest()])
        with pytest.raises(TypeError):
            client.create_jobs(_jobs(1), "abc")
        for size in (0, 1001, True):
            with pytest.raises(ValueError, match="batch_size"):
                client.create_jobs(_jobs(1), batch_size=size)
        with pytest.raises(ValueError, match="request_id"):
            client.batch_create_jobs([scheduler_pb2.CreateJobRequest(job=_jobs(1)[0])])
        with pytest.raises(ValueError, match="1 to 1000"):
            client.batch_create_jobs([])
        too_many = [scheduler_pb2.CreateJobRequest(job=job, request_id=str(i)) for i, job in enumerate(_jobs(1001))]
        with pytest.raises(ValueError, match="1 to 1000"):
            client.batch_create_jobs(too_many)
    assert fake.calls == []


def test_the_async_client_creates_in_the_same_calls(fake: FakeTickwheel) -> None:
    unavailable = failure(grpc.StatusCode.UNAVAILABLE, "store unreachable")
    fake.script("BatchCreateJobs", unavailable)
    fake.reply("BatchCreateJobs", _echo)
    jobs = _jobs(1001)
    jobs[1000].name = "bad"

    async def run() -> list[CreateOutcome]:
        async def no_wait(_seconds: float) -> None:
            return None

        async with AsyncClient(fake.address, api_key=fake.api_key, retries=FAST, sleep=no_wait) as client:
            return await client.create_jobs(jobs, [f"r{i}" for i in range(1001)])

    outcomes = asyncio.run(run())
    calls = fake.requests("BatchCreateJobs")
    assert [len(c.items) for c in calls] == [1000, 1000, 1]
    assert [i.request_id for i in calls[0].items] == [i.request_id for i in calls[1].items]
    assert [o.request_id for o in outcomes] == [f"r{i}" for i in range(1001)]
    assert outcomes[999].created and outcomes[1000].error.code == grpc.StatusCode.INVALID_ARGUMENT


def test_an_item_status_maps_like_a_call_status() -> None:
    error = TickwheelError.from_status(status_pb2.Status(code=code_pb2.NOT_FOUND, message="job job_1 was deleted"))
    assert (error.code, error.message, error.field_violations) == (grpc.StatusCode.NOT_FOUND, "job job_1 was deleted", ())
    for code in (0, 99, -1):  # OK claims success and out-of-range codes are no status at all
        assert TickwheelError.from_status(status_pb2.Status(code=code)).code == grpc.StatusCode.UNKNOWN


def test_plan_is_pure_and_assigns_each_id_once() -> None:
    requests = batch.plan(_jobs(4), ["a", None, "c", None], batch_size=3)
    ids = [item.request_id for r in requests for item in r.items]
    assert ids[0] == "a" and ids[2] == "c" and len(set(ids)) == 4
    assert [len(r.items) for r in requests] == [3, 1]


def test_plan_keeps_calls_under_the_message_size_a_server_takes() -> None:
    jobs = _jobs(40)
    for job in jobs:
        job.payload = b"x" * (256 * 1024)
    requests = batch.plan(jobs)
    assert len(requests) > 1 and sum(len(r.items) for r in requests) == 40
    assert all(r.ByteSize() <= batch.MAX_CALL_BYTES for r in requests)
    assert [i.job.name for r in requests for i in r.items] == [f"job-{i}" for i in range(40)]
    huge = _jobs(2)
    huge[0].payload = b"x" * (batch.MAX_CALL_BYTES + 1)  # alone in its call: the server judges it
    assert [len(r.items) for r in batch.plan(huge)] == [1, 1]
