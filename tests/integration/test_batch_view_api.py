"""Batch answers a default client can read (JobView), against the real
gRPC server: 100 small pause items over jobs at the default 64 KiB payload
quota answered readable in JOB_VIEW_BASIC; in JOB_VIEW_FULL (the default) a
batch whose answer would be over 3 MiB refused before anything is written,
for every batch that answers jobs (create, update, pause, resume); a view
that is not one refused; the Python SDK's helpers halving a refused call."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from tickwheel import AsyncClient
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from .test_server_api import bearer, cron_job, violations

PAYLOAD = bytes(range(256)) * 256  # the default max_payload_bytes, 64 KiB
DEFAULT_RECEIVE = 4 * 1024 * 1024
BASIC, FULL = scheduler_pb2.JOB_VIEW_BASIC, scheduler_pb2.JOB_VIEW_FULL


def big_job() -> job_pb2.Job:
    job = cron_job()
    job.payload = PAYLOAD
    return job


def too_large(error: grpc.aio.AioRpcError) -> bool:
    """The refusal of a batch whose answer would be too large: INVALID_ARGUMENT
    `items` with the ErrorInfo reason the SDKs key on."""
    status = rpc_status.from_call(error)
    reasons = []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reasons.append(info.reason)
    return (
        error.code() == grpc.StatusCode.INVALID_ARGUMENT
        and "JOB_VIEW_BASIC" in violations(error)["items"]
        and reasons == ["BATCH_ANSWER_TOO_LARGE"]
    )


async def create_big(scheduler, key: str, count: int, prefix: str = "big") -> list[str]:
    """``count`` jobs at the payload quota, created 50 a call in the basic view."""
    made = []
    for n in range(0, count, 50):
        items = [scheduler_pb2.CreateJobRequest(job=big_job(), request_id=f"{prefix}-{i}") for i in range(n, min(count, n + 50))]
        reply = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=items, view=BASIC),
                                                metadata=bearer(key))  # fmt: skip
        assert reply.created_count == len(items)
        made += [r.job.job.id for r in reply.results]
    return made


async def jobs_as_stored(server, key: str, ids: list[str]) -> list[job_pb2.Job]:
    """The jobs ``ids`` as stored, through ListJobs' pages (a few calls, not
    a GetJob each: the tenant's request-rate quota)."""
    by_id: dict[str, job_pb2.Job] = {}
    token = ""
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        while True:
            listed = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=1000, page_token=token),
                                              metadata=bearer(key))  # fmt: skip
            by_id.update((job.id, job) for job in listed.jobs)
            token = listed.next_page_token
            if not token:
                break
    return [by_id[i] for i in ids]


async def test_batch_pause_of_jobs_at_the_payload_quota_fits_a_default_client(server) -> None:
    """The attack: 100 pause items (a request under 10 KB) over jobs at the
    payload quota. The full answer (6.5 MB) is refused before anything is
    written; the basic one pauses them all and a default client reads it."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:  # a default client: 4 MiB received at most
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        made = await create_big(scheduler, key, 100)
        items = [scheduler_pb2.PauseJobRequest(id=i, reason="incident") for i in made]
        request = scheduler_pb2.BatchPauseJobsRequest(items=items)
        assert request.ByteSize() < 10_000
        for view in (scheduler_pb2.JOB_VIEW_UNSPECIFIED, FULL):
            request.view = view
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await scheduler.BatchPauseJobs(request, metadata=bearer(key))
            assert too_large(refused.value)
        for job in await jobs_as_stored(server, key, made):  # nothing written
            assert (job.state, job.version, job.pause_reason, job.payload) == (job_pb2.JOB_STATE_ACTIVE, 1, "", PAYLOAD)

        request.view = BASIC
        reply = await scheduler.BatchPauseJobs(request, metadata=bearer(key))
        assert (reply.paused_count, reply.failed_count) == (100, 0)
        assert reply.ByteSize() < 3 * 1024 * 1024 < DEFAULT_RECEIVE
        for made_id, result in zip(made, reply.results):
            job = result.job.job
            assert (job.id, job.name, job.state, job.version, job.pause_reason) == (
                made_id, "report", job_pb2.JOB_STATE_PAUSED, 2, "incident")  # fmt: skip
            assert not job.payload and not job.HasField("schedule") and not job.HasField("target") and not job.tenant
        for job in await jobs_as_stored(server, key, made):  # the definition kept whole
            assert (job.state, job.payload) == (job_pb2.JOB_STATE_PAUSED, PAYLOAD)

        resume = scheduler_pb2.BatchResumeJobsRequest(items=[scheduler_pb2.ResumeJobRequest(id=i) for i in made])
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await scheduler.BatchResumeJobs(resume, metadata=bearer(key))
        assert too_large(refused.value)
        assert {job.state for job in await jobs_as_stored(server, key, made)} == {job_pb2.JOB_STATE_PAUSED}
        resume.view = BASIC
        reply = await scheduler.BatchResumeJobs(resume, metadata=bearer(key))
        assert reply.resumed_count == 100
        assert all(r.job.job.state == job_pb2.JOB_STATE_ACTIVE and r.job.job.HasField("next_run_at") for r in reply.results)
        assert all(not r.job.job.payload for r in reply.results)


async def test_a_full_batch_update_over_the_answer_budget_writes_nothing(server) -> None:
    """A small change (the name) to 100 jobs at the payload quota: refused
    whole in the full view, versions and names unchanged; applied in the
    basic one. A smaller batch is answered whole, payloads included."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        made = await create_big(scheduler, key, 100)
        mask = field_mask_pb2.FieldMask(paths=["name"])
        items = [scheduler_pb2.UpdateJobRequest(job=job_pb2.Job(id=i, version=1, name="renamed"), update_mask=mask)
                 for i in made]  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await scheduler.BatchUpdateJobs(scheduler_pb2.BatchUpdateJobsRequest(items=items), metadata=bearer(key))
        assert too_large(refused.value)
        assert {(j.version, j.name) for j in await jobs_as_stored(server, key, made)} == {(1, "report")}

        reply = await scheduler.BatchUpdateJobs(scheduler_pb2.BatchUpdateJobsRequest(items=items[:10], view=FULL),
                                                metadata=bearer(key))  # fmt: skip
        assert reply.updated_count == 10
        assert all(r.job.job.payload == PAYLOAD and r.job.job.name == "renamed" for r in reply.results)
        reply = await scheduler.BatchUpdateJobs(scheduler_pb2.BatchUpdateJobsRequest(items=items[10:], view=BASIC),
                                                metadata=bearer(key))  # fmt: skip
        assert (reply.updated_count, reply.failed_count) == (90, 0)
        assert all((r.job.job.name, r.job.job.version, r.job.job.payload) == ("renamed", 2, b"") for r in reply.results)


async def test_a_full_batch_create_over_the_answer_budget_creates_nothing(server) -> None:
    """50 items at the payload quota (a request under 4 MiB) would answer
    over 3 MiB in the full view: refused, no job created and no request id
    kept, so the same items in the basic view create every job."""
    key = await server.create_tenant("acme")
    items = [scheduler_pb2.CreateJobRequest(job=big_job(), request_id=f"c-{i}") for i in range(50)]
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=items), metadata=bearer(key))
        assert too_large(refused.value)
        tenant = await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=server.admin_metadata())
        assert tenant.job_count == 0
        reply = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=items, view=BASIC),
                                                metadata=bearer(key))  # fmt: skip
        assert (reply.created_count, reply.existing_count) == (50, 0)
        job = reply.results[0].job.job
        assert job.id and job.name == "report" and job.version == 1 and job.HasField("next_run_at")
        assert not job.payload and not job.HasField("schedule")
        # A repeat answers the jobs found, in the basic view too.
        reply = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=items, view=BASIC),
                                                metadata=bearer(key))  # fmt: skip
        assert reply.existing_count == 50 and all(not r.job.job.payload and r.job.job.id for r in reply.results)


@pytest.mark.parametrize("rpc", ["BatchCreateJobs", "BatchUpdateJobs", "BatchPauseJobs", "BatchResumeJobs"])
async def test_a_view_that_is_not_one_is_refused_and_writes_nothing(server, rpc) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        (made,) = await create_big(scheduler, key, 1)
        item = {
            "BatchCreateJobs": scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="v"),
            "BatchUpdateJobs": scheduler_pb2.UpdateJobRequest(job=job_pb2.Job(id=made, version=1, name="x"),
                                                              update_mask=field_mask_pb2.FieldMask(paths=["name"])),
            "BatchPauseJobs": scheduler_pb2.PauseJobRequest(id=made),
            "BatchResumeJobs": scheduler_pb2.ResumeJobRequest(id=made),
        }[rpc]  # fmt: skip
        request = getattr(scheduler_pb2, rpc + "Request")(items=[item], view=7)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await getattr(scheduler, rpc)(request, metadata=bearer(key))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "view" in violations(refused.value)
        (job,) = await jobs_as_stored(server, key, [made])
        assert (job.version, job.name, job.state) == (1, "report", job_pb2.JOB_STATE_ACTIVE)
        listed = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key))
        assert len(listed.jobs) == 1


async def test_the_python_sdk_halves_a_call_whose_answer_would_be_too_large(server) -> None:
    """``create_jobs`` and ``update_jobs`` in the full view over jobs at the
    payload quota: each refused call is sent again as halves, every job
    answered whole; in the basic view in one call each."""
    key = await server.create_tenant("acme")
    async with AsyncClient(server.address, key) as client:
        created = await client.create_jobs([big_job() for _ in range(60)], [f"s-{i}" for i in range(60)])
        assert [o.ok and o.created and o.job.payload == PAYLOAD for o in created] == [True] * 60
        changes = [job_pb2.Job(id=o.job.id, version=1, name="renamed") for o in created]
        updated = await client.update_jobs(changes, ["name"])
        assert [o.ok and o.job.payload == PAYLOAD and o.job.version == 2 for o in updated] == [True] * 60
        changes = [job_pb2.Job(id=o.job.id, version=2, name="again") for o in created]
        updated = await client.update_jobs(changes, ["name"], view=BASIC)
        assert [o.ok and not o.job.payload and o.job.name == "again" for o in updated] == [True] * 60
        paused = await client.batch_pause_jobs([scheduler_pb2.PauseJobRequest(id=o.job.id) for o in created], view=BASIC)
        assert paused.paused_count == 60
