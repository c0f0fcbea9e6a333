"""Hostile request bytes against the real gRPC server, in process, on the
embedded stores and on PostgreSQL + etcd.

Hypothesis sends CreateJob, BatchCreateJobs, UpdateJob, BatchUpdateJobs,
BatchDeleteJobs, PreviewSchedule and BackfillJob requests as raw protobuf
bytes: mutated valid messages, random bytes, unknown fields, invalid UTF-8
in string fields, and well-formed messages with extreme
values (instants and durations anywhere in int64, any text). Every answer is
OK or a status that names what is wrong (INVALID_ARGUMENT, NOT_FOUND,
RESOURCE_EXHAUSTED, FAILED_PRECONDITION), never INTERNAL or UNKNOWN; nothing
is written when a call fails; no call logs an error or a traceback; and the
server still serves afterwards. The server runs on its own event loop in a
thread, so that Hypothesis drives it with a blocking channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, calendar_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2

from tests.support.server import Running, running_server

from .test_server_api import bearer, cron_job, violations

ANSWERS = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION,
}
SERVICE = "/tickwheel.v1.SchedulerService/"
FUZZ = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
"""50 examples a method and backend: a few seconds each on two shared cores."""


@contextlib.contextmanager
def server_in_thread(store: str, etcd: str) -> Iterator[Running]:
    """A real server (:func:`running_server`) on an event loop of its own thread."""
    started = threading.Event()
    box: dict = {}

    async def serve() -> None:
        try:
            async with running_server(store, etcd) as running:
                box["running"], box["loop"], box["stop"] = running, asyncio.get_running_loop(), asyncio.Event()
                started.set()
                await box["stop"].wait()
        except BaseException as error:  # reported by the test thread
            box["error"] = error
            started.set()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert started.wait(60), "the server did not start"
    if "error" in box:
        raise box["error"]
    try:
        yield box["running"]
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(60)


@pytest.fixture
def live(store_and_etcd):
    with server_in_thread(*store_and_etcd) as running:
        yield running


@pytest.fixture
def channel(live):
    with grpc.insecure_channel(live.address) as opened:
        yield opened


@pytest.fixture
def tenant_key(live, channel) -> str:
    """A tenant whose request rate does not limit the fuzzing."""
    reply = admin_pb2_grpc.AdminServiceStub(channel).CreateTenant(
        admin_pb2.CreateTenantRequest(
            tenant=admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(requests_per_second=1_000_000))
        ),
        metadata=live.admin_metadata(),
    )
    return reply.api_key.secret


def call(channel, method: str, raw: bytes, key: str) -> tuple[grpc.StatusCode, bytes | None]:
    """Send ``raw`` as the request of ``method``; the status and the reply bytes."""
    try:
        reply = channel.unary_unary(SERVICE + method)(raw, metadata=bearer(key), timeout=30)
    except grpc.RpcError as error:
        return error.code(), None
    return grpc.StatusCode.OK, reply


def job_count(live, channel) -> int:
    reply = admin_pb2_grpc.AdminServiceStub(channel).GetTenant(
        admin_pb2.GetTenantRequest(name="acme"), metadata=live.admin_metadata()
    )
    return reply.job_count


# --- strategies: bytes -------------------------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def unknown_field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


@st.composite
def mutated(draw, valid: bytes) -> bytes:
    """``valid`` with bytes flipped, inserted, deleted or cut off."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            del data[at]
        elif kind == "truncate":
            del data[at:]
    return bytes(data)


@st.composite
def with_unknown_fields(draw, valid: bytes) -> bytes:
    """``valid`` plus fields of numbers no message here uses, at the top."""
    extra = b"".join(
        unknown_field(draw(st.integers(1000, 2**29 - 1)), draw(st.binary(max_size=64)))
        for _ in range(draw(st.integers(1, 3)))
    )
    return valid + extra


@st.composite
def with_bad_utf8(draw, valid: bytes, marker: bytes) -> bytes:
    """``valid`` with the string ``marker`` replaced by bytes that are not UTF-8."""
    bad = draw(st.sampled_from([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80z"]))
    return valid.replace(marker, bad[: len(marker)].ljust(len(marker), b"\xff"))


def raw_requests(valid: bytes, marker: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(
        mutated(valid), st.binary(max_size=256), with_unknown_fields(valid), with_bad_utf8(valid, marker)
    )


# --- strategies: well-formed messages with hostile values --------------------------------

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
TEXT = st.text(max_size=80)


def timestamps() -> st.SearchStrategy[timestamp_pb2.Timestamp]:
    seconds = st.one_of(INT64, st.integers(-62_135_596_800, 253_402_300_799), st.integers(1_700_000_000, 1_900_000_000))
    return st.builds(timestamp_pb2.Timestamp, seconds=seconds, nanos=INT32)


def durations() -> st.SearchStrategy[duration_pb2.Duration]:
    seconds = st.one_of(INT64, st.integers(-400_000_000_000, 400_000_000_000), st.integers(-100_000, 100_000))
    return st.builds(duration_pb2.Duration, seconds=seconds, nanos=INT32)


def schedules() -> st.SearchStrategy[job_pb2.Schedule]:
    return st.one_of(
        st.builds(job_pb2.Schedule, cron=st.builds(
            job_pb2.CronSchedule,
            expression=st.one_of(st.sampled_from(["*/5 * * * *", "0 0 29 2 *", "H H * * *", "@yearly"]), TEXT),
            time_zone=st.one_of(st.sampled_from(["", "UTC", "Europe/London", "Pacific/Kiritimati"]), TEXT),
        )),
        st.builds(job_pb2.Schedule, once_at=timestamps()),
        st.builds(job_pb2.Schedule, local=st.builds(
            job_pb2.LocalTimeSchedule,
            local_time=st.one_of(st.sampled_from(["2030-03-31T02:30", "9999-12-31T23:59"]), TEXT),
            time_zone=st.one_of(st.just("Europe/Berlin"), TEXT),
        )),
    )  # fmt: skip


def targets() -> st.SearchStrategy[job_pb2.Target]:
    return st.one_of(
        st.builds(job_pb2.Target, handler=st.builds(job_pb2.HandlerTarget, name=st.one_of(st.just("echo"), TEXT))),
        st.builds(job_pb2.Target, http=st.builds(
            job_pb2.HttpTarget,
            url=st.one_of(st.just("https://example.com/hook"), TEXT),
            method=st.one_of(st.just(""), TEXT),
            headers=st.dictionaries(TEXT, TEXT, max_size=4),
        )),
    )  # fmt: skip


def optional(strategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


@st.composite
def jobs(draw) -> job_pb2.Job:
    job = job_pb2.Job(
        name=draw(st.one_of(st.just("report"), TEXT)),
        schedule=draw(schedules()),
        target=draw(targets()),
        max_runs=draw(st.one_of(st.just(0), INT64)),
        labels=draw(st.dictionaries(TEXT, TEXT, max_size=4)),
        overlap_policy=draw(st.integers(0, 6)),
        misfire_policy=draw(st.integers(0, 5)),
        misfire_run_all_limit=draw(st.one_of(st.just(0), INT32)),
        payload=draw(st.binary(max_size=64)),
    )
    for field in ("start_at", "end_at"):
        value = draw(optional(timestamps()))
        if value is not None:
            getattr(job, field).CopyFrom(value)
    for field in ("timeout", "misfire_threshold", "lateness_threshold"):
        value = draw(optional(durations()))
        if value is not None:
            getattr(job, field).CopyFrom(value)
    for field in ("initial_backoff", "max_backoff"):
        value = draw(optional(durations()))
        if value is not None:
            getattr(job.retry_policy, field).CopyFrom(value)
    window = draw(optional(durations()))
    if window is not None:
        job.jitter.window.CopyFrom(window)
    job.jitter.exact = draw(st.booleans())
    job.dst_policy.gap = draw(st.integers(0, 5))
    job.dst_policy.repeat = draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 2))):
        job.concurrency_keys.add(key=draw(st.one_of(st.just("db"), TEXT)), limit=draw(INT32))
    return job


def valid_create(marker: str = "zz") -> bytes:
    job = cron_job()
    job.name = marker
    job.labels["team"] = "ops"
    job.timeout.FromSeconds(30)
    return scheduler_pb2.CreateJobRequest(job=job, request_id="fuzz-valid").SerializeToString()


# --- the fuzz ------------------------------------------------------------------------------


def errors_logged(records) -> list[logging.LogRecord]:
    """The records at ERROR or above, or with a traceback. A server whose
    first reads of the database's clock are too slow to decide (the suite
    loads the machine) logs that at INFO and alerts only if no comparison
    decides within the fence's grace: a clock found skewed, or one that
    cannot be compared for that long, is an error here too."""
    return [r for r in records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.fixture
def no_errors_logged(caplog):
    """Fails the test if any record at ERROR or above, or with a traceback, is logged."""
    caplog.set_level(logging.WARNING)
    yield caplog
    bad = errors_logged(caplog.records)
    assert not bad, [f"{r.name}: {r.getMessage()}" for r in bad[:5]]
    refused = [r for r in caplog.records if r.name == "tickwheel_server.api.decoding"]
    assert len(refused) <= 3, "refusals are logged at most once a minute per service"


def assert_healthy(live, channel, key: str) -> None:
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=1000), metadata=bearer(key), timeout=30)
    admin_pb2_grpc.AdminServiceStub(channel).SearchJobs(
        admin_pb2.SearchJobsRequest(page_size=1000), metadata=live.admin_metadata(), timeout=30
    )
    created = scheduler.CreateJob(
        scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="after-fuzz"), metadata=bearer(key), timeout=30
    )
    assert created.created


def test_fuzzed_create_job(live, channel, tenant_key, no_errors_logged) -> None:
    counter = iter(range(1_000_000))

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        if data.draw(st.booleans(), label="structured"):
            raw = scheduler_pb2.CreateJobRequest(job=data.draw(jobs()), request_id=f"fuzz-{next(counter)}").SerializeToString()
        else:
            raw = data.draw(raw_requests(valid_create(), b"zz"), label="raw")
        before = job_count(live, channel)
        code, _ = call(channel, "CreateJob", raw, tenant_key)
        assert code in ANSWERS, code
        if code != grpc.StatusCode.OK:
            assert job_count(live, channel) == before, "a failed CreateJob wrote a job"

    run()
    assert_healthy(live, channel, tenant_key)


def valid_batch() -> bytes:
    return scheduler_pb2.BatchCreateJobsRequest(
        items=[scheduler_pb2.CreateJobRequest.FromString(valid_create()) for _ in range(2)]
    ).SerializeToString()


ITEM_ANSWERS = {code.value[0] for code in ANSWERS - {grpc.StatusCode.OK}}

VIEWS = st.one_of(st.sampled_from(list(scheduler_pb2.JobView.values())), st.integers(-(2**31), 2**31 - 1))
"""A batch's view: mostly one of JobView's, sometimes any int32 (refused: INVALID_ARGUMENT ``view``)."""


def assert_in_view(view: int, answered: list[job_pb2.Job]) -> None:
    """An answered batch asked for a view there is, and its jobs are in it:
    no definition in JOB_VIEW_BASIC."""
    assert view in scheduler_pb2.JobView.values(), f"a batch in view {view} was answered"
    if view == scheduler_pb2.JOB_VIEW_BASIC:
        for job in answered:
            assert not job.payload and not job.tenant and not job.HasField("schedule") and not job.HasField("target")


def test_fuzzed_batch_create_jobs(live, channel, tenant_key, no_errors_logged) -> None:
    """Fuzzed batches: refused whole with nothing written, or one answer per
    item, each a job or a refusal naming what is wrong, and exactly the jobs
    the answer says were created written."""
    counter = iter(range(1_000_000))

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        if data.draw(st.booleans(), label="structured"):
            items = [
                scheduler_pb2.CreateJobRequest(
                    job=data.draw(jobs()),
                    request_id=data.draw(st.one_of(st.just(f"fuzz-b{next(counter)}"), st.just("fuzz-b-same"), TEXT)),
                )
                for _ in range(data.draw(st.integers(0, 4), label="items"))
            ]
            raw = scheduler_pb2.BatchCreateJobsRequest(items=items, view=data.draw(VIEWS, label="view")).SerializeToString()
        else:
            raw = data.draw(raw_requests(valid_batch(), b"zz"), label="raw")
        before = job_count(live, channel)
        code, reply = call(channel, "BatchCreateJobs", raw, tenant_key)
        assert code in ANSWERS, code
        if code != grpc.StatusCode.OK:
            assert job_count(live, channel) == before, "a failed BatchCreateJobs wrote a job"
            return
        answer = scheduler_pb2.BatchCreateJobsResponse.FromString(reply)
        sent = scheduler_pb2.BatchCreateJobsRequest.FromString(raw)
        assert len(answer.results) == len(sent.items) >= 1
        assert_in_view(sent.view, [r.job.job for r in answer.results if r.HasField("job")])
        for result in answer.results:
            assert result.HasField("job") or result.error.code in ITEM_ANSWERS, result
        assert answer.created_count + answer.existing_count + answer.failed_count == len(sent.items)
        assert job_count(live, channel) == before + answer.created_count

    run()
    assert_healthy(live, channel, tenant_key)


def test_fuzzed_update_job(live, channel, tenant_key, no_errors_logged) -> None:
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    job = scheduler.CreateJob(
        scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="to-update"), metadata=bearer(tenant_key)
    ).job

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        current = scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(tenant_key)).job
        if data.draw(st.booleans(), label="structured"):
            patch = data.draw(jobs())
            patch.id, patch.version = current.id, current.version
            paths = data.draw(st.lists(st.sampled_from(
                ["name", "schedule", "target", "labels", "timeout", "retry_policy", "jitter", "start_at", "end_at",
                 "misfire_threshold", "lateness_threshold", "max_runs", "concurrency_keys", "dst_policy", "payload"]
            ), max_size=4))  # fmt: skip
            raw = scheduler_pb2.UpdateJobRequest(job=patch, update_mask={"paths": paths}).SerializeToString()
        else:
            patch = job_pb2.Job(id=current.id, version=current.version, name="zz")
            valid = scheduler_pb2.UpdateJobRequest(job=patch, update_mask={"paths": ["name"]}).SerializeToString()
            raw = data.draw(raw_requests(valid, b"zz"), label="raw")
        code, _ = call(channel, "UpdateJob", raw, tenant_key)
        assert code in ANSWERS, code
        after = scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(tenant_key)).job
        if code != grpc.StatusCode.OK:
            assert after.version == current.version, "a failed UpdateJob changed the job"

    run()
    assert_healthy(live, channel, tenant_key)


MASK_PATHS = ["name", "schedule", "target", "labels", "timeout", "retry_policy", "jitter", "payload", "version", "id"]


def test_fuzzed_batch_update_jobs(live, channel, tenant_key, no_errors_logged) -> None:
    """Fuzzed BatchUpdateJobs: refused whole with nothing changed, or one
    answer per item; a job's version moves exactly by the items answered
    with a new version of it, and a failed item changes nothing."""
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    ids = [
        scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=cron_job(), request_id=f"to-batch-update-{i}"),
                            metadata=bearer(tenant_key)).job.id
        for i in range(2)
    ]  # fmt: skip

    def versions() -> dict[str, int]:
        return {
            job_id: scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job_id), metadata=bearer(tenant_key)).job.version
            for job_id in ids
        }

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        before = versions()
        if data.draw(st.booleans(), label="structured"):
            items = []
            for _ in range(data.draw(st.integers(0, 4), label="items")):
                patch = data.draw(jobs())
                patch.id = data.draw(st.one_of(st.sampled_from(ids), TEXT))
                # A job's live version by its index: the choices drawn never
                # depend on the store's state (Hypothesis replays a choice
                # sequence and refuses one whose shape changed with it).
                live = [before[job_id] for job_id in ids]
                patch.version = data.draw(
                    st.one_of(st.integers(0, len(live) - 1).map(live.__getitem__), st.integers(0, 5))
                )
                paths = data.draw(st.lists(st.one_of(st.sampled_from(MASK_PATHS), TEXT), max_size=4))
                items.append(scheduler_pb2.UpdateJobRequest(job=patch, update_mask={"paths": paths}))
            raw = scheduler_pb2.BatchUpdateJobsRequest(items=items, view=data.draw(VIEWS, label="view")).SerializeToString()
        else:
            patch = job_pb2.Job(id=ids[0], version=before[ids[0]], name="zz")
            valid = scheduler_pb2.BatchUpdateJobsRequest(
                items=[scheduler_pb2.UpdateJobRequest(job=patch, update_mask={"paths": ["name"]})]
            ).SerializeToString()
            raw = data.draw(raw_requests(valid, b"zz"), label="raw")
        code, reply = call(channel, "BatchUpdateJobs", raw, tenant_key)
        assert code in ANSWERS, code
        after = versions()
        if code != grpc.StatusCode.OK:
            assert after == before, "a failed BatchUpdateJobs changed a job"
            return
        answer = scheduler_pb2.BatchUpdateJobsResponse.FromString(reply)
        sent = scheduler_pb2.BatchUpdateJobsRequest.FromString(raw)
        assert len(answer.results) == len(sent.items) >= 1
        assert_in_view(sent.view, [r.job.job for r in answer.results if r.HasField("job")])
        assert answer.updated_count + answer.failed_count == len(sent.items)
        for job_id in ids:
            answered = [r.job.job.version for item, r in zip(sent.items, answer.results)
                        if item.job.id == job_id and r.HasField("job")]  # fmt: skip
            for result in answer.results:
                assert result.HasField("job") or result.error.code in ITEM_ANSWERS, result
            assert after[job_id] == max([before[job_id], *answered])

    run()
    assert_healthy(live, channel, tenant_key)


def test_fuzzed_batch_delete_jobs(live, channel, tenant_key, no_errors_logged) -> None:
    """Fuzzed BatchDeleteJobs: refused whole with nothing deleted, or one
    answer per item and exactly the jobs answered deleted gone."""
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    counter = iter(range(1_000_000))

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        mine = [
            scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=cron_job(), request_id=f"doomed-{next(counter)}"),
                                metadata=bearer(tenant_key)).job.id
            for _ in range(2)
        ]  # fmt: skip
        if data.draw(st.booleans(), label="structured"):
            items = [
                scheduler_pb2.DeleteJobRequest(
                    id=data.draw(st.one_of(st.sampled_from(mine), TEXT)),
                    version=data.draw(st.one_of(st.just(0), st.just(1), st.integers(-(2**63), 2**63 - 1))),
                )
                for _ in range(data.draw(st.integers(0, 4), label="items"))
            ]
            raw = scheduler_pb2.BatchDeleteJobsRequest(items=items).SerializeToString()
        else:
            valid = scheduler_pb2.BatchDeleteJobsRequest(
                items=[scheduler_pb2.DeleteJobRequest(id=job_id) for job_id in mine]
            ).SerializeToString()
            raw = data.draw(raw_requests(valid, b"job_"), label="raw")
        before = job_count(live, channel)
        code, reply = call(channel, "BatchDeleteJobs", raw, tenant_key)
        assert code in ANSWERS, code
        if code != grpc.StatusCode.OK:
            assert job_count(live, channel) == before, "a failed BatchDeleteJobs deleted a job"
            return
        answer = scheduler_pb2.BatchDeleteJobsResponse.FromString(reply)
        sent = scheduler_pb2.BatchDeleteJobsRequest.FromString(raw)
        assert len(answer.results) == len(sent.items) >= 1
        for result in answer.results:
            assert result.HasField("deleted") or result.error.code in ITEM_ANSWERS, result
        assert answer.deleted_count + answer.failed_count == len(sent.items)
        assert job_count(live, channel) == before - answer.deleted_count

    run()
    assert_healthy(live, channel, tenant_key)


def test_fuzzed_preview_schedule(live, channel, tenant_key, no_errors_logged) -> None:
    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        if data.draw(st.booleans(), label="structured"):
            request = scheduler_pb2.PreviewScheduleRequest(job=data.draw(jobs()), count=data.draw(st.integers(-5, 1001)))
            request.job.id = data.draw(st.one_of(st.just(""), st.just("job_preview"), TEXT))
            after = data.draw(optional(st.one_of(timestamps(), st.sampled_from([
                timestamp_pb2.Timestamp(seconds=253_402_300_799),  # 9999-12-31T23:59:59Z
                timestamp_pb2.Timestamp(seconds=253_370_764_800),  # 9999-01-01
                timestamp_pb2.Timestamp(seconds=253_370_764_799),  # the last second before it
                timestamp_pb2.Timestamp(seconds=-62_135_596_800),  # 0001-01-01
            ]))))  # fmt: skip
            if after is not None:
                request.after.CopyFrom(after)
            raw = request.SerializeToString()
        else:
            job = cron_job()
            job.name = "zz"
            valid = scheduler_pb2.PreviewScheduleRequest(job=job, count=3).SerializeToString()
            raw = data.draw(raw_requests(valid, b"zz"), label="raw")
        code, _ = call(channel, "PreviewSchedule", raw, tenant_key)
        assert code in ANSWERS, code

    run()
    assert_healthy(live, channel, tenant_key)


def test_fuzzed_backfill_job(live, channel, tenant_key, no_errors_logged) -> None:
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    yearly = cron_job("0 0 1 1 *", "UTC")
    job = scheduler.CreateJob(
        scheduler_pb2.CreateJobRequest(job=yearly, request_id="to-backfill"), metadata=bearer(tenant_key)
    ).job

    def executions() -> int:
        listed = scheduler.ListExecutions(
            scheduler_pb2.ListExecutionsRequest(job_id=job.id, page_size=500), metadata=bearer(tenant_key)
        )
        return len(listed.executions)

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        if data.draw(st.booleans(), label="structured"):
            request = scheduler_pb2.BackfillJobRequest(
                id=data.draw(st.one_of(st.just(job.id), TEXT)), dry_run=data.draw(st.booleans())
            )
            for field in ("from_at", "to_at"):
                value = data.draw(optional(st.one_of(timestamps(), st.sampled_from([
                    timestamp_pb2.Timestamp(seconds=-62_135_596_800),  # 0001-01-01
                    timestamp_pb2.Timestamp(seconds=0),
                    timestamp_pb2.Timestamp(seconds=1_577_836_800),  # 2020-01-01
                ]))))  # fmt: skip
                if value is not None:
                    getattr(request, field).CopyFrom(value)
            raw = request.SerializeToString()
        else:
            valid = scheduler_pb2.BackfillJobRequest(
                id=job.id, from_at={"seconds": 1_577_836_800}, to_at={"seconds": 1_609_459_200}, dry_run=True
            ).SerializeToString()
            raw = data.draw(raw_requests(valid, job.id[-2:].encode()), label="raw")
        before = executions()
        code, _ = call(channel, "BackfillJob", raw, tenant_key)
        assert code in ANSWERS, code
        if code != grpc.StatusCode.OK:
            assert executions() == before, "a failed BackfillJob created executions"

    run()
    assert_healthy(live, channel, tenant_key)


# --- the cases of issue 15, one by one ------------------------------------------------------


async def test_invalid_utf8_is_invalid_argument_on_every_service_before_authentication(server, caplog) -> None:
    caplog.set_level(logging.WARNING)
    request = scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="zz").SerializeToString()
    bad = request.replace(b"zz", b"\xff\xfe")
    async with grpc.aio.insecure_channel(server.address) as channel:
        for method in (
            "/tickwheel.v1.SchedulerService/CreateJob",
            "/tickwheel.v1.SchedulerService/GetJob",
            "/tickwheel.v1.AdminService/GetTenant",
            "/tickwheel.v1.AdminService/SearchJobs",
            "/tickwheel.v1.AdminService/WatchAlerts",
        ):
            for _ in range(3):
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    if method.endswith("WatchAlerts"):
                        async for _ in channel.unary_stream(method)(b"\x0a\x02\xff\xfe"):
                            pass
                    else:
                        await channel.unary_unary(method)(bad if method.endswith("CreateJob") else b"\x0a\x02\xff\xfe")
                assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, error.value.details())
                assert "the request is not a valid tickwheel.v1." in error.value.details()
                assert "" in violations(error.value)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert len([r for r in caplog.records if r.name == "tickwheel_server.api.decoding"]) <= 2


async def test_a_worker_stream_with_a_message_that_does_not_parse_ends_invalid_argument(server, caplog) -> None:
    caplog.set_level(logging.WARNING)
    await server.create_tenant("acme")
    secret = await server.issue_worker_credential(["acme"], handlers=["echo"])
    hello = worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w1", handlers=["echo"], slots=1))
    async with grpc.aio.insecure_channel(server.address) as channel:
        pull = channel.stream_stream("/tickwheel.v1.WorkerService/Pull")
        first = pull(iter([b"\x0a\x04\x0a\x02\xff\xfe"]), metadata=bearer(secret))
        with pytest.raises(grpc.aio.AioRpcError) as error:
            async for _ in first:
                pass
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "tickwheel.v1.PullRequest" in error.value.details()

        queue: asyncio.Queue = asyncio.Queue()
        await queue.put(hello.SerializeToString())

        async def requests():
            while (item := await queue.get()) is not None:
                yield item

        later = pull(requests(), metadata=bearer(secret))
        welcome = worker_pb2.PullResponse.FromString(await later.read())
        assert welcome.WhichOneof("message") == "welcome"
        await queue.put(b"\xff\xff\xff\xff")
        with pytest.raises(grpc.aio.AioRpcError) as error:
            while True:
                if await later.read() is grpc.aio.EOF:
                    break
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        await queue.put(None)
    assert not errors_logged(caplog.records), [r.getMessage() for r in errors_logged(caplog.records)[:5]]


async def test_unknown_fields_are_not_stored(server) -> None:
    key = await server.create_tenant("acme")
    job = cron_job().SerializeToString() + unknown_field(4242, b"x" * 3_000_000)
    request = varint(1 << 3 | 2) + varint(len(job)) + job + scheduler_pb2.CreateJobRequest(request_id="big").SerializeToString()
    options = [("grpc.max_send_message_length", 8 << 20)]
    async with grpc.aio.insecure_channel(server.address, options=options) as channel:
        created = scheduler_pb2.CreateJobResponse.FromString(
            await channel.unary_unary(SERVICE + "CreateJob")(request, metadata=bearer(key))
        )
        assert created.created and created.ByteSize() < 10_000
        for n in range(2):
            await channel.unary_unary(SERVICE + "CreateJob")(
                request.replace(b"big", f"bi{n}".encode()), metadata=bearer(key)
            )
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        listed = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key))
        assert len(listed.jobs) == 3 and listed.ByteSize() < 30_000
        got = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=created.job.id), metadata=bearer(key))
        assert got.job.ByteSize() < 10_000


async def test_ten_thousand_bad_labels_answer_a_status_the_client_receives(server) -> None:
    """Past their bound the labels are refused by their count alone, before
    one is read (``validate.check_counts``); within it, 32 bad labels and 32
    bad headers are more violations than the answer lists."""
    key = await server.create_tenant("acme")
    job = cron_job()
    job.labels.update({f"BAD{i}": "\u202e" for i in range(10_000)})
    within = cron_job()
    within.labels.update({f"BAD{i}": "\u202e" for i in range(32)})
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="labels"), metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
        assert violations(error.value).keys() == {"job.labels"}
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=within, request_id="some"), metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
        found = violations(error.value)
        assert len(found) <= 21 and all(field.startswith("job.labels[") for field in found), found
        assert "more violations not listed" in error.value.details()


@pytest.mark.parametrize(
    "job, field",
    [
        (job_pb2.Job(name="a\0b"), "job.name"),
        (job_pb2.Job(name="invoice\u202egpj.exe"), "job.name"),
        (job_pb2.Job(labels={"env": "\x1b[2J"}), "job.labels[env]"),
        (job_pb2.Job(timeout=duration_pb2.Duration(seconds=2**62)), "job.timeout"),
        (job_pb2.Job(start_at=timestamp_pb2.Timestamp(seconds=2**62)), "job.start_at"),
        (job_pb2.Job(schedule=job_pb2.Schedule(once_at=timestamp_pb2.Timestamp(seconds=2**62))), "job.schedule.once_at"),
        (job_pb2.Job(target=job_pb2.Target(http=job_pb2.HttpTarget(
            url="https://example.com/", headers={"X-A": "a\r\nHost: internal"}))), "job.target.http.headers[X-A]"),
        (job_pb2.Job(target=job_pb2.Target(http=job_pb2.HttpTarget(
            url="https://example.com/", headers={"Host": "internal"}))), "job.target.http.headers[Host]"),
    ],
)  # fmt: skip
async def test_each_bad_field_of_the_issue_is_named_and_nothing_is_written(server, job, field) -> None:
    key = await server.create_tenant("acme")
    request = cron_job()
    request.MergeFrom(job)
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=request, request_id="bad"), metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
        assert field in violations(error.value)
        assert list((await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key))).jobs) == []


def _with(change) -> job_pb2.Job:
    job = cron_job()
    change(job)
    return job


_HTTP = job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/"))


@pytest.mark.parametrize(
    "job, request_id, field",
    [
        (cron_job(), "r\n", "request_id"),
        (_with(lambda j: j.labels.update({"env\n": "x"})), "r", "job.labels"),
        (_with(lambda j: setattr(j.target.handler, "name", "echo\n")), "r", "job.target.handler.name"),
        (_with(lambda j: setattr(j.schedule.cron, "expression", "0 3 29 2 *\n")), "r", "job.schedule.cron.expression"),
        (_with(lambda j: (j.target.CopyFrom(_HTTP), setattr(j.target.http, "url", "https://example.com/\n"))), "r",
         "job.target.http.url"),
        (_with(lambda j: (j.target.CopyFrom(_HTTP), j.target.http.headers.update({"X-A": "v\n"}))), "r",
         "job.target.http.headers[X-A]"),
        (_with(lambda j: (j.target.CopyFrom(_HTTP), j.target.http.headers.update({"X-A\n": "v"}))), "r",
         "job.target.http.headers"),
        (_with(lambda j: j.concurrency_keys.add(key="k\n", limit=1)), "r", "job.concurrency_keys[0].key"),
    ],
)  # fmt: skip
async def test_a_trailing_newline_is_refused_where_the_field_allows_no_line_break(server, job, request_id, field):
    """A pattern anchored with ``$`` also matches before a final newline:
    `r\\n` passed as a request id, `echo\\n` as a handler, `v\\n` as a header
    value (a worker's HTTP client then refused it at every run). Each is
    INVALID_ARGUMENT naming the field, and nothing is written."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=request_id), metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
        assert any(name.startswith(field) for name in violations(error.value)), violations(error.value)
        assert list((await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key))).jobs) == []


async def test_a_tenant_calendar_or_server_name_with_a_trailing_newline_is_refused(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="globex\n")),
                                     metadata=server.admin_metadata())  # fmt: skip
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        names = [t.name for t in (await admin.ListTenants(admin_pb2.ListTenantsRequest(),
                                                          metadata=server.admin_metadata())).tenants]  # fmt: skip
        assert names == ["acme"]
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        calendar = calendar_pb2.Calendar(name="holidays\n", time_zone="UTC")
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(calendar=calendar, request_id="cal"), metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "calendar.name" in violations(error.value)
        calendar = calendar_pb2.Calendar(name="holidays", time_zone="UTC", holidays=["2027-01-01\n"])
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(calendar=calendar, request_id="cal"), metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert any(name.startswith("calendar.holidays") for name in violations(error.value)), violations(error.value)
        listed = await scheduler.ListCalendars(calendar_pb2.ListCalendarsRequest(), metadata=bearer(key))
        assert list(listed.calendars) == []


@pytest.mark.parametrize(
    "request_, field",
    [
        (scheduler_pb2.PreviewScheduleRequest(job=cron_job(), after={"seconds": 253_402_300_799}), "after"),
        (scheduler_pb2.PreviewScheduleRequest(job=cron_job(), after={"seconds": 2**62}), "after"),
        (scheduler_pb2.PreviewScheduleRequest(job=cron_job(), after={"seconds": 0, "nanos": -1}), "after"),
    ],
)
async def test_preview_after_the_horizon_is_invalid_argument(server, request_, field) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler_pb2_grpc.SchedulerServiceStub(channel).PreviewSchedule(request_, metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in violations(error.value)


async def test_backfill_from_year_one_is_invalid_argument(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job = (await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=cron_job("0 0 1 1 *", "UTC"), request_id="y"), metadata=bearer(key)
        )).job  # fmt: skip
        request = scheduler_pb2.BackfillJobRequest(
            id=job.id, from_at={"seconds": -62_135_596_800}, to_at={"seconds": 1_577_836_800}
        )
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.BackfillJob(request, metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "from_at" in violations(error.value)


async def each_refused(calls) -> list[grpc.aio.AioRpcError]:
    """Await each (call, field) of ``calls``: every one INVALID_ARGUMENT
    naming its field. Their errors, in order."""
    errors = []
    for pending, field in calls:
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await pending
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, error.value.details())
        assert field in violations(error.value), (field, violations(error.value))
        errors.append(error.value)
    return errors


async def test_reasons_descriptions_ids_and_filters_are_checked_too(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        job = (await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="r"), metadata=bearer(key)
        )).job  # fmt: skip
        calls = [
            (scheduler.PauseJob(scheduler_pb2.PauseJobRequest(id=job.id, reason="ok\u202e"), metadata=bearer(key)), "reason"),
            (scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id + "\0"), metadata=bearer(key)), "id"),
            (scheduler.GetJob(scheduler_pb2.GetJobRequest(id="job x"), metadata=bearer(key)), "id"),
            (scheduler.ListJobs(scheduler_pb2.ListJobsRequest(name_prefix="\x1b["), metadata=bearer(key)), "name_prefix"),
            (admin.IssueApiKey(admin_pb2.IssueApiKeyRequest(tenant="acme", description="a\nb"),
                               metadata=server.admin_metadata()), "description"),
            (admin.IssueApiKey(admin_pb2.IssueApiKeyRequest(tenant="acme", description="d" * 257),
                               metadata=server.admin_metadata()), "description"),
            (admin.PauseTenant(admin_pb2.PauseTenantRequest(name="acme", reason="\u2066x"),
                               metadata=server.admin_metadata()), "reason"),
            (admin.SearchJobs(admin_pb2.SearchJobsRequest(tenant="Not A Tenant"), metadata=server.admin_metadata()), "tenant"),
            (admin.ListWorkerCredentials(admin_pb2.ListWorkerCredentialsRequest(tenant="t" * 100_000),
                                         metadata=server.admin_metadata()), "tenant"),
            (admin.ListWorkerCredentials(admin_pb2.ListWorkerCredentialsRequest(tenant="Acme"),
                                         metadata=server.admin_metadata()), "tenant"),
            (admin.GetTenant(admin_pb2.GetTenantRequest(name="acme\0"), metadata=server.admin_metadata()), "name"),
        ]  # fmt: skip
        await each_refused(calls)
        still = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(key))
        assert still.job.state == job_pb2.JOB_STATE_ACTIVE
        tenant = await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=server.admin_metadata())
        assert tenant.tenant.state == admin_pb2.TENANT_STATE_ACTIVE
        assert len((await admin.ListApiKeys(admin_pb2.ListApiKeysRequest(tenant="acme"),
                                            metadata=server.admin_metadata())).api_keys) == 1  # fmt: skip


async def test_filters_and_update_masks_past_their_bounds_are_refused_and_write_nothing(server) -> None:
    """A packed repeated enum is a byte a value and a mask path a few: a 4 MiB
    ListExecutions held 4 million statuses and an UpdateJob 500 000 copies of
    ``name``, each read in Python on the event loop (a second or more a
    call), and the mask was kept whole in the job's revision; a calendar's
    4 million bad ``business_days`` made a violation each (7 s, 700 MB).
    Past 32 values or 64 paths the call is refused naming the field,
    nothing is written; a mask naming a path twice is kept once."""
    key = await server.create_tenant("acme")
    admin_md = server.admin_metadata()
    flood = [job_pb2.EXECUTION_STATUS_SUCCEEDED] * 1_000_000
    names = field_mask_pb2.FieldMask(paths=["name"] * 100_000)
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        job = (await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="r"), metadata=bearer(key)
        )).job  # fmt: skip
        await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="uk", time_zone="Europe/London"), request_id="c"), metadata=bearer(key))
        renamed = job_pb2.Job(id=job.id, version=job.version, name="renamed")
        calls = [
            (scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job.id, statuses=flood),
                                      metadata=bearer(key)), "statuses"),
            (scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=renamed, update_mask=names), metadata=bearer(key)),
             "update_mask"),
            (scheduler.UpdateCalendar(calendar_pb2.UpdateCalendarRequest(
                calendar=calendar_pb2.Calendar(name="uk", version=1, time_zone="UTC"),
                update_mask=field_mask_pb2.FieldMask(paths=["time_zone"] * 100_000)), metadata=bearer(key)), "update_mask"),
            (admin.SearchExecutions(admin_pb2.SearchExecutionsRequest(statuses=flood), metadata=admin_md), "statuses"),
            (admin.ListAlerts(admin_pb2.ListAlertsRequest(kinds=[admin_pb2.ALERT_KIND_LATE] * 1_000_000),
                              metadata=admin_md), "kinds"),
            *((scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(name=f"flood{day}", time_zone="UTC", business_days=[day] * 1_000_000),
                request_id=f"flood{day}"), metadata=bearer(key)), "calendar.business_days") for day in (1, 9)),
        ]  # fmt: skip
        for error in await each_refused(calls):
            assert len(error.details()) < 2000, error.details()[:200]
        still = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(key))).job
        assert (still.name, still.version) == (job.name, job.version)
        calendar = (await scheduler.GetCalendar(calendar_pb2.GetCalendarRequest(name="uk"), metadata=bearer(key))).calendar
        assert (calendar.version, calendar.time_zone) == (1, "Europe/London")
        listed = await scheduler.ListCalendars(calendar_pb2.ListCalendarsRequest(), metadata=bearer(key))
        assert [c.name for c in listed.calendars] == ["uk"]
        assert list((await scheduler.ListJobRevisions(
            scheduler_pb2.ListJobRevisionsRequest(id=job.id), metadata=bearer(key))).revisions) == []  # fmt: skip

        # At the bounds: answered, and a path given twice is kept once.
        await scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job.id, statuses=flood[:32]),
                                       metadata=bearer(key))
        twice = field_mask_pb2.FieldMask(paths=["name", "labels", "name"])
        updated = await scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=renamed, update_mask=twice),
                                            metadata=bearer(key))
        assert updated.job.name == "renamed"
        (revision,) = (await scheduler.ListJobRevisions(
            scheduler_pb2.ListJobRevisionsRequest(id=job.id), metadata=bearer(key))).revisions  # fmt: skip
        assert list(revision.update_mask.paths) == ["name", "labels"]
