"""The real gRPC server: services, health, reflection, authentication and
validation, on the embedded stores and on real PostgreSQL + etcd."""

from __future__ import annotations

import asyncio
import calendar
import json
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

GRPCURL = str(Path(sys.executable).with_name("grpcurl"))


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


# The default fires on 29 February only: a job the embedded server's dispatcher
# would claim while a test runs (a */5 job created at 05:09:58) changes its next
# run and adds an execution under the test's feet.
def cron_job(expression: str = "0 3 29 2 *", zone: str = "Europe/London") -> job_pb2.Job:
    return job_pb2.Job(
        name="report",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone=zone)),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
    )


def violations(error: grpc.aio.AioRpcError) -> dict[str, str]:
    status = rpc_status.from_call(error)
    assert status is not None, "the error carries no google.rpc.Status"
    return status_violations(status)


def status_violations(status) -> dict[str, str]:
    """The BadRequest field violations of a google.rpc.Status, by field."""
    found = {}
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            found.update({v.field: v.description for v in bad.field_violations})
    return found


async def grpcurl(*args: str) -> subprocess.CompletedProcess:
    """Run grpcurl without blocking the event loop the in-process server runs on."""
    process = await asyncio.create_subprocess_exec(
        GRPCURL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    return subprocess.CompletedProcess([GRPCURL, *args], process.returncode, stdout.decode(), stderr.decode())


async def test_grpcurl_lists_the_three_services_health_and_reflection(server) -> None:
    result = await grpcurl("-plaintext", server.address, "list")
    assert result.returncode == 0, result.stderr
    listed = set(result.stdout.split())
    assert {
        "tickwheel.v1.SchedulerService",
        "tickwheel.v1.WorkerService",
        "tickwheel.v1.AdminService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    } <= listed
    described = await grpcurl("-plaintext", server.address, "describe", "tickwheel.v1.AdminService")
    assert described.returncode == 0 and "rpc ClusterStatus" in described.stdout


async def test_health_reports_serving_without_a_credential(server) -> None:
    result = await grpcurl("-plaintext", server.address, "grpc.health.v1.Health/Check")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"status": "SERVING"}
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service="tickwheel.v1.SchedulerService"))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_v1_answers_like_v1alpha(server) -> None:
    from tests.support.reflection_v1 import list_services_v1

    names = await list_services_v1(server.address)
    assert "tickwheel.v1.SchedulerService" in names


async def test_admin_through_grpcurl_with_the_admin_token(server) -> None:
    result = await grpcurl(
        "-plaintext", "-H", f"authorization: Bearer {server.admin_token}",
        server.address, "tickwheel.v1.AdminService/ClusterStatus",
    )
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["partitionCount"] == 256
    assert status["servers"][0]["serverId"] == server.server.server_id
    assert status["storeEngine"] in ("sqlite", "postgresql")
    # A lone server wins every partition; each has an epoch raised by it.
    ownership = server.server.ownership
    while len(ownership.owned()) < 256:
        await asyncio.wait_for(ownership.wait_changed(ownership.generation), 20)
    result = await grpcurl(
        "-plaintext", "-H", f"authorization: Bearer {server.admin_token}",
        server.address, "tickwheel.v1.AdminService/ClusterStatus",
    )
    status = json.loads(result.stdout)
    assert status["servers"][0]["partitionsOwned"] == 256
    assert len(status["partitions"]) == 256
    assert {p["serverId"] for p in status["partitions"]} == {server.server.server_id}
    assert all(int(p["epoch"]) > 0 for p in status["partitions"])


async def test_calls_need_the_right_credential(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await scheduler.ListJobs(scheduler_pb2.ListJobsRequest())
        assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as wrong:
            await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key[:-2] + "xx"))
        assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as tenant_on_admin:
            await admin.ClusterStatus(admin_pb2.ClusterStatusRequest(), metadata=bearer(key))
        assert tenant_on_admin.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as admin_on_scheduler:
            await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=server.admin_metadata())
        assert admin_on_scheduler.value.code() == grpc.StatusCode.PERMISSION_DENIED
        await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key))


async def test_malformed_create_is_invalid_argument_naming_fields_and_writes_nothing(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        cases = {
            "job.schedule.cron.expression": cron_job("61 * * * *"),
            "job.schedule.cron.time_zone": cron_job("0 9 * * *", "Mars/Olympus"),
            "job.schedule": job_pb2.Job(name="x", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo"))),
            "job.target": job_pb2.Job(name="x", schedule=cron_job().schedule),
            "job.name": job_pb2.Job(schedule=cron_job().schedule, target=cron_job().target),
            "job.concurrency_keys[1].key": job_pb2.Job(
                name="x", schedule=cron_job().schedule, target=cron_job().target,
                concurrency_keys=[job_pb2.ConcurrencyKey(key="db", limit=1), job_pb2.ConcurrencyKey(key="db", limit=2)],
            ),
        }
        for field, job in cases.items():
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="r-" + field.replace("[", "-").replace("]", "")), metadata=bearer(key))
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
            assert field in violations(error.value), (field, violations(error.value))
        for bad in ("0 0 30 2 *", "0 0 30W 2 *", "0 0 L-31 * *", "0 0 * * 5#6", "0 0 * * 8#1", "0 0 LX * *"):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=cron_job(bad), request_id="never"),
                                          metadata=bearer(key))
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
            assert "job.schedule.cron.expression" in violations(error.value), bad
        with pytest.raises(grpc.aio.AioRpcError) as no_request_id:
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=cron_job()), metadata=bearer(key))
        assert "request_id" in violations(no_request_id.value)
        listed = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key))
        assert list(listed.jobs) == []
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        tenant = await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=server.admin_metadata())
        assert tenant.job_count == 0


async def test_create_get_list_is_idempotent_and_scoped(server) -> None:
    acme = await server.create_tenant("acme")
    globex = await server.create_tenant("globex")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        request = scheduler_pb2.CreateJobRequest(job=cron_job("30 9 * * MON-FRI"), request_id="create-1")
        first = await scheduler.CreateJob(request, metadata=bearer(acme))
        again = await scheduler.CreateJob(request, metadata=bearer(acme))
        assert first.created and not again.created and again.job.id == first.job.id
        job = first.job
        assert job.id.startswith("job_") and job.tenant == "acme" and job.state == job_pb2.JOB_STATE_ACTIVE
        assert job.version == 1 and job.tzdata_version
        assert job.retry_policy.max_attempts == 5 and job.overlap_policy == job_pb2.OVERLAP_POLICY_SKIP
        assert job.next_due_at.ToDatetime() >= job.next_run_at.ToDatetime()
        got = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id, next_runs=3), metadata=bearer(acme))
        assert len(got.next_runs) == 3
        assert got.next_runs[0].nominal_at == job.next_run_at
        assert all(run.local_time.startswith(("20", "21")) and "T09:30:00" in run.local_time for run in got.next_runs)
        with pytest.raises(grpc.aio.AioRpcError) as other_tenant:
            await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(globex))
        assert other_tenant.value.code() == grpc.StatusCode.NOT_FOUND
        assert list((await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(globex))).jobs) == []
        listed = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=1), metadata=bearer(acme))
        assert [j.id for j in listed.jobs] == [job.id] and listed.next_page_token == ""
        with pytest.raises(grpc.aio.AioRpcError) as bad_token:
            await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_token="nope"), metadata=bearer(acme))
        assert "page_token" in violations(bad_token.value)


async def test_a_filtered_walk_carries_a_short_page_s_token(server, store_and_etcd, monkeypatch) -> None:
    """A filtered page whose bounded scan (``jobpages.PAGE_SCAN``, here 3
    jobs) ends before it fills answers what it found and a token to carry
    on from where the scan stopped; following the tokens, ListJobs and
    SearchJobs (of a tenant or of every tenant) find every matching job
    once, in order."""
    from tickwheel_server.store import jobpages

    monkeypatch.setattr(jobpages, "PAGE_SCAN", 3)
    acme = await server.create_tenant("acme")
    neighbour = await server.create_tenant("acme-")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        matching, everyone = [], []
        for n in range(10):
            job = cron_job()
            job.name = "match-%_" if n in (1, 7, 8) else f"other-{n}"
            created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"r{n}"),
                                                metadata=bearer(acme))
            job.name = "match-%_" if n < 5 else f"other-{n}"  # the neighbour's first five match
            theirs = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"r{n}"),
                                               metadata=bearer(neighbour))
            if n in (1, 7, 8):
                matching.append(created.job.id)
            everyone += ([theirs.job.id] if n < 5 else []) + ([created.job.id] if n in (1, 7, 8) else [])
        calls = {
            "ListJobs": lambda token: scheduler.ListJobs(scheduler_pb2.ListJobsRequest(
                page_size=1, name_prefix="match-%", page_token=token), metadata=bearer(acme)),
            "SearchJobs": lambda token: admin.SearchJobs(admin_pb2.SearchJobsRequest(
                tenant="acme", page_size=1, name_prefix="match-%", page_token=token), metadata=server.admin_metadata()),
            "SearchJobs of every tenant": lambda token: admin.SearchJobs(admin_pb2.SearchJobsRequest(
                page_size=1, name_prefix="match-%", page_token=token), metadata=server.admin_metadata()),
        }
        for rpc, call in calls.items():
            walked, token, short = [], "", 0
            while True:
                page = await call(token)
                assert len(page.jobs) <= 1, rpc
                assert all(j.tenant == "acme" for j in page.jobs) or rpc.endswith("every tenant"), rpc
                walked += [j.id for j in page.jobs]
                short += not page.jobs and bool(page.next_page_token)
                if not page.next_page_token:
                    break
                token = page.next_page_token
            assert walked == (sorted(everyone) if rpc.endswith("every tenant") else matching), rpc
            assert short > 0, (rpc, short)


async def test_preview_schedule_of_an_unsaved_job(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        request = scheduler_pb2.PreviewScheduleRequest(job=cron_job("30 1 * * *"), count=3)
        request.job.jitter.exact = True
        request.after.FromJsonString("2027-10-30T00:00:00Z")
        reply = await scheduler.PreviewSchedule(request, metadata=bearer(key))
    # Europe/London falls back on 2027-10-31: a fixed-time job fires once at 01:30.
    assert [f.nominal_at.ToJsonString() for f in reply.fires] == [
        "2027-10-30T00:30:00Z",
        "2027-10-31T00:30:00Z",
        "2027-11-01T01:30:00Z",
    ]
    assert reply.tzdata_version


async def test_admin_tenants_and_worker_credentials(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        meta = server.admin_metadata()
        with pytest.raises(grpc.aio.AioRpcError) as bad_name:
            await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="Bad Name")), metadata=meta)
        assert "tenant.name" in violations(bad_name.value)
        created = await admin.CreateTenant(
            admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="acme", weight=4)), metadata=meta
        )
        assert created.tenant.weight == 4 and created.api_key.secret
        with pytest.raises(grpc.aio.AioRpcError) as duplicate:
            await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="acme")), metadata=meta)
        assert duplicate.value.code() == grpc.StatusCode.ALREADY_EXISTS
        updated = await admin.UpdateTenant(
            admin_pb2.UpdateTenantRequest(tenant=admin_pb2.Tenant(name="acme", max_concurrency=7, version=1)),
            metadata=meta,
        )
        assert updated.tenant.max_concurrency == 7 and updated.tenant.version == 2
        with pytest.raises(grpc.aio.AioRpcError) as stale:
            await admin.UpdateTenant(
                admin_pb2.UpdateTenantRequest(tenant=admin_pb2.Tenant(name="acme", weight=2, version=1)), metadata=meta
            )
        assert stale.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        rotated = await admin.RotateApiKey(admin_pb2.RotateApiKeyRequest(id=created.api_key.id), metadata=meta)
        keys = await admin.ListApiKeys(admin_pb2.ListApiKeysRequest(tenant="acme"), metadata=meta)
        assert {k.id for k in keys.api_keys} == {created.api_key.id, rotated.api_key.id}
        await admin.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=rotated.api_key.id), metadata=meta)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as revoked:
            await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(rotated.api_key.secret))
        assert revoked.value.code() == grpc.StatusCode.UNAUTHENTICATED
        issued = await admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"], handlers=["echo"], http=True), metadata=meta
        )
        assert issued.credential.secret.startswith("tww_")
        with pytest.raises(grpc.aio.AioRpcError) as unknown_tenant:
            await admin.IssueWorkerCredential(admin_pb2.IssueWorkerCredentialRequest(tenants=["ghost"]), metadata=meta)
        assert unknown_tenant.value.code() == grpc.StatusCode.NOT_FOUND
        listed = await admin.ListTenants(admin_pb2.ListTenantsRequest(), metadata=meta)
        assert [t.name for t in listed.tenants] == ["acme"]


async def test_a_job_with_quartz_day_terms_previews_its_runs(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        created = await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=cron_job("0 9 LW * FRI#3", "UTC"), request_id="quartz"),
            metadata=bearer(key))
        got = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=created.job.id, next_runs=6), metadata=bearer(key))
    for run in got.next_runs:
        local = datetime.fromisoformat(run.local_time)
        last = calendar.monthrange(local.year, local.month)[1]
        last_weekday = max(d for d in range(last - 2, last + 1) if date(local.year, local.month, d).weekday() < 5)
        third_friday = [d for d in range(1, 22) if date(local.year, local.month, d).weekday() == 4][2]
        assert local.day in (last_weekday, third_friday) and (local.hour, local.minute) == (9, 0), run.local_time
