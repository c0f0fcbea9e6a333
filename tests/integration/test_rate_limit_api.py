"""The per-tenant API request rate through the real server, on the embedded
stores and on PostgreSQL + etcd: a tenant allowed 5 requests a second that
sends 20 CreateJob calls at once gets RESOURCE_EXHAUSTED naming the limit for
those over it, and nothing is written for them; another tenant's burst on
the same server is untouched."""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_status import rpc_status
from google.rpc import error_details_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer

BURST = 20


def job(name: str) -> job_pb2.Job:
    created = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    created.schedule.cron.expression = "0 0 1 1 *"
    created.schedule.cron.time_zone = "UTC"
    return created


async def test_a_burst_over_the_tenants_rate_is_refused_naming_the_limit_and_writes_nothing(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        slow = admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(requests_per_second=5))
        acme = (await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=slow),
                                         metadata=server.admin_metadata())).api_key.secret  # fmt: skip
        globex = await server.create_tenant("globex")  # the default rate, 100/s

        async def create(key: str, n: int):
            request = scheduler_pb2.CreateJobRequest(job=job(f"burst-{n}"), request_id=f"burst-{n}")
            try:
                return await scheduler.CreateJob(request, metadata=bearer(key))
            except grpc.aio.AioRpcError as error:
                return error

        started = time.monotonic()
        replies = await asyncio.gather(*(create(acme, n) for n in range(BURST)))
        elapsed = time.monotonic() - started
        created = [r for r in replies if isinstance(r, scheduler_pb2.CreateJobResponse)]
        refused = [r for r in replies if isinstance(r, grpc.aio.AioRpcError)]
        assert len(created) >= 5, "a burst of one second's worth is allowed"
        assert len(created) <= 5 + int(elapsed * 5) + 1, f"{len(created)} allowed in {elapsed:.2f} s at 5/s"
        assert refused and {e.code() for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        error = refused[0]
        assert "tenant 'acme': API request rate over 5/s" in error.details()
        status = rpc_status.from_call(error)
        [detail] = [d for d in status.details if d.Is(error_details_pb2.QuotaFailure.DESCRIPTOR)]
        failure = error_details_pb2.QuotaFailure()
        detail.Unpack(failure)
        assert failure.violations[0].subject == "tenant:acme"

        others = await asyncio.gather(*(create(globex, n) for n in range(BURST)))
        assert all(isinstance(r, scheduler_pb2.CreateJobResponse) for r in others), "globex is not limited by acme"

        stored = await admin.SearchJobs(admin_pb2.SearchJobsRequest(tenant="acme", page_size=100),
                                        metadata=server.admin_metadata())  # fmt: skip
        assert sorted(j.id for j in stored.jobs) == sorted(r.job.id for r in created), "refused calls wrote nothing"
        tenant = await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=server.admin_metadata())
        assert tenant.job_count == len(created)
