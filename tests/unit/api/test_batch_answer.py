"""BatchCreateJobs' answer assembled from serialized parts (api/batchanswer)
is, item for item, the message the servicer would build from each job's
record: created jobs as ``job_to_proto`` reads them back, repeats with
their first job, refusals with their status; and the counts."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from tickwheel.v1 import job_pb2, scheduler_pb2

from tickwheel.shared.ids import new_job_ids, partition_of, to_us
from tickwheel_server.api import convert, validate
from tickwheel_server.api import batchanswer
from tickwheel_server.api.status import status_for
from tickwheel_server.errors import InvalidArgument, NotFound, QuotaExceeded
from tickwheel_server.store.jobcreate import CREATED
from tickwheel_server.store.jobrecords import NewJobs

NOW = datetime(2027, 3, 1, 12, 0, 0, 250_001, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def empty_cache():
    validate._TEMPLATES.clear()
    yield
    validate._TEMPLATES.clear()


def cron(name: str, expression: str = "0 3 * * *", zone: str = "UTC", **fields) -> job_pb2.Job:
    job = job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone=zone)),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="report")),
    )
    job.MergeFrom(job_pb2.Job(**fields))
    return job


def expected(batch: NewJobs, index: int, created_at: datetime) -> scheduler_pb2.BatchCreateJobsResult:
    record = batch.record(index, partition_of(batch.ids[index], 256), created_at)
    return scheduler_pb2.BatchCreateJobsResult(
        job=scheduler_pb2.CreateJobResponse(job=convert.job_to_proto(record), created=True)
    )


def batch_create_response(*args) -> scheduler_pb2.BatchCreateJobsResponse:
    """The serialized answer, parsed as a client reads it."""
    return scheduler_pb2.BatchCreateJobsResponse.FromString(batchanswer.batch_create_response(*args).data)


def build(jobs: list[job_pb2.Job], tzdata: list[str] | None = None) -> NewJobs:
    batch = NewJobs("acme")
    ids = new_job_ids(NOW, len(jobs))
    for index, job in enumerate(jobs):
        spec, run, due, zone, limits = validate.new_definition(job, NOW, ids[index])
        batch.add(ids[index], f"r{index}", job.name, spec, zone, run, due,
                  (tzdata or ["2025b"] * len(jobs))[index], len(job.payload), limits)  # fmt: skip
    return batch


@pytest.mark.parametrize("created_at", [NOW, NOW.replace(microsecond=0)])
def test_created_jobs_answer_what_job_to_proto_reads_back(created_at: datetime) -> None:
    once = job_pb2.Job(name="once", target=cron("x").target, payload=b"\x00\x01")
    once.schedule.once_at.FromSeconds(4_102_444_800)  # 2100-01-01, no jitter: due == nominal, whole seconds
    jobs = [
        cron("plain"),
        cron("plain too", payload=b"p"),
        cron("labelled", labels={"team": "ops", "tier": "1"}),
        cron("hashed", "H 3 * * *", "America/New_York"),
        cron("large", payload=b"x" * 70_000),  # lengths past two varint bytes
        once,
        cron("another zone", zone="Europe/Berlin"),
    ]
    batch = build(jobs, ["2025b", "2025b", "2025b", "2025b", "2025b", "2025b", "2026a"])
    reply = batch_create_response(len(jobs), {}, list(range(len(jobs))), batch, [CREATED] * len(jobs), created_at)
    assert list(reply.results) == [expected(batch, i, created_at) for i in range(len(jobs))]
    assert (reply.created_count, reply.existing_count, reply.failed_count) == (len(jobs), 0, 0)


@pytest.mark.parametrize("created_at", [NOW, NOW.replace(microsecond=0)])
def test_a_createjob_group_answers_each_created_job_as_job_to_proto_reads_it_back(created_at: datetime) -> None:
    """CreateJob's answers of a group's created jobs (CreatedAnswers) parse
    as the message each job's record gives: active and completed, two
    tzdata versions, labels, a large payload."""
    jobs = [cron("plain"), cron("labelled", labels={"team": "ops"}), cron("hashed", "H 3 * * *", "America/New_York"),
            cron("large", payload=b"x" * 70_000), cron("done")]  # fmt: skip
    batch = build(jobs, ["2025b", "2025b", "2026a", "2025b", "2025b"])
    batch.next_runs[4] = batch.next_dues[4] = None
    answers = batchanswer.CreatedAnswers(batch, created_at)
    for k in (3, 0, 4, 1, 2, 0):  # in any order, twice: the memoised parts are not an earlier job's
        record = batch.record(k, partition_of(batch.ids[k], 256), created_at)
        assert scheduler_pb2.CreateJobResponse.FromString(answers.answer(k).data) == scheduler_pb2.CreateJobResponse(
            job=convert.job_to_proto(record), created=True
        )


def test_a_job_without_a_fire_answers_completed_without_instants() -> None:
    batch = build([cron("a")])
    batch.next_runs[0] = batch.next_dues[0] = None
    reply = batch_create_response(1, {}, [0], batch, [CREATED], NOW)
    assert reply.results[0] == expected(batch, 0, NOW)
    assert reply.results[0].job.job.state == job_pb2.JOB_STATE_COMPLETED
    assert not reply.results[0].job.job.HasField("next_run_at")


def test_refusals_repeats_and_store_errors_keep_their_places() -> None:
    earlier = build([cron("earlier")]).record(0, 7, NOW - timedelta(days=1))
    refused = InvalidArgument.field("job.name", "required")
    over = QuotaExceeded("acme", "max_jobs", 3, "the tenant has as many jobs as it may")
    gone = NotFound("job", "job_gone")
    # Items 0 and 3 failed validation; the batch's jobs are items 1, 2, 4, 5.
    batch = build([cron("a"), cron("b"), cron("c"), cron("d")])
    outcomes = [CREATED, (earlier, False), over, gone]
    reply = batch_create_response(6, {0: refused, 3: refused}, [1, 2, 4, 5], batch, outcomes, NOW)
    results = list(reply.results)
    assert results[0] == scheduler_pb2.BatchCreateJobsResult(error=status_for(refused)[1])
    assert results[1] == expected(batch, 0, NOW)
    assert results[2] == scheduler_pb2.BatchCreateJobsResult(
        job=scheduler_pb2.CreateJobResponse(job=convert.job_to_proto(earlier), created=False)
    )
    assert results[3] == scheduler_pb2.BatchCreateJobsResult(error=status_for(refused)[1])
    assert results[4] == scheduler_pb2.BatchCreateJobsResult(error=status_for(over)[1])
    assert results[5] == scheduler_pb2.BatchCreateJobsResult(error=status_for(gone)[1])
    assert (reply.created_count, reply.existing_count, reply.failed_count) == (1, 1, 4)


def test_the_serialized_definition_parses_as_the_normalised_job() -> None:
    """A job of a known shape is its template's bytes plus its own name,
    payload and labels: it parses as validating it in full gives, and its
    instants are that fire's."""
    ids = new_job_ids(NOW, 3)
    keys = [job_pb2.ConcurrencyKey(key="db", limit=2), job_pb2.ConcurrencyKey(key="api", limit=1)]
    jobs = [cron("a", concurrency_keys=keys), cron("b", payload=b"22", labels={"k": "v"}, concurrency_keys=keys),
            cron("c", "H H * * *", "Europe/Berlin")]  # fmt: skip
    for job, job_id in zip(jobs, ids):
        out, schedule, fire = validate._normalise(job, NOW, "job", validate.DEFAULT_POLICY, job_id)
        spec, run, due, zone, limits = validate.new_definition(job, NOW, job_id)
        assert job_pb2.Job.FromString(spec) == out
        assert (run, due, zone) == (to_us(fire.nominal_at), to_us(fire.due_at), schedule.zone)
        assert limits == tuple((key.key, key.limit) for key in job.concurrency_keys)
    assert len(validate._TEMPLATES) == 2, "the second job came from the first one's template"


def outcome(decide):
    """What ``decide()`` gives: its answer, or the violations it raised."""
    try:
        return decide()
    except InvalidArgument as error:
        return error.violations


@pytest.mark.parametrize("name", ["", "x"])
@pytest.mark.parametrize("payload", [b"", b"p", b"x" * 300])
def test_a_definition_at_the_size_limit_is_judged_as_in_full(name: str, payload: bytes) -> None:
    """A template's job is sized as protobuf sizes it, to the byte (a label
    value too long pushes it past the limit), with or without a name or a
    payload: the same violations, counts included, as validating in full."""
    ids = new_job_ids(NOW, 2)
    validate.new_definition(cron("first"), NOW, ids[0])  # the template
    for extra in (-1, 0, 1):
        probe = validate.normalise_job(cron("first"), NOW)  # what the job normalises to, but for these:
        probe.name, probe.payload = name, payload
        probe.labels["big"] = "v" * 60_000
        value = 60_000 + validate.MAX_DEFINITION_BYTES + extra - (probe.ByteSize() - len(payload))
        job = cron(name, labels={"big": "v" * value}, payload=payload)
        full = outcome(lambda: validate._normalise(job, NOW, "job", validate.DEFAULT_POLICY, ids[1]))
        templated = outcome(lambda: validate.new_definition(job, NOW, ids[1]))
        assert len(validate._TEMPLATES) == 1
        if isinstance(full, list):
            assert templated == full
        else:
            assert job_pb2.Job.FromString(templated[0]) == full[0]
    sizes = [v.description for v in templated if v.field == "job"]
    assert sizes == [f"the definition without its payload is {validate.MAX_DEFINITION_BYTES + 1} bytes serialized; "
                     f"at most {validate.MAX_DEFINITION_BYTES}"]  # fmt: skip
