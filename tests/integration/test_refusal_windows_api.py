"""A tenant that keeps calling after RESOURCE_EXHAUSTED, through the real
server on the embedded stores and on PostgreSQL + etcd: once refused, its
calls inside the retry delay are refused RESOURCE_EXHAUSTED with RetryInfo
before their request is even decoded (bytes that are no message get the
refusal, not INVALID_ARGUMENT), nothing is written for them, and a client
that kept calling is told a longer delay than the rate's; another tenant
on the same address is served throughout."""

from __future__ import annotations

import asyncio

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_rate_limit_api import job
from tests.integration.test_server_api import bearer
from tickwheel_server.telemetry.prometheus import parse_samples

FLOOD = 80
"""Calls at once: past the windows' slack (16), so the window is lengthened."""


def retry_delay(error: grpc.aio.AioRpcError) -> float | None:
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return info.retry_delay.ToTimedelta().total_seconds()
    return None


async def test_calls_inside_the_retry_delay_are_refused_undecoded_and_write_nothing(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        slow = admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(requests_per_second=1))
        acme = (await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=slow),
                                         metadata=server.admin_metadata())).api_key.secret  # fmt: skip
        globex = await server.create_tenant("globex")
        raw_create = channel.unary_unary("/tickwheel.v1.SchedulerService/CreateJob")

        async def get(key: str):
            try:
                return await scheduler.GetJob(scheduler_pb2.GetJobRequest(id="nope"), metadata=bearer(key))
            except grpc.aio.AioRpcError as error:
                return error

        flood = await asyncio.gather(*(get(acme) for _ in range(FLOOD)))
        refused = [e for e in flood if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) >= FLOOD - 2, "one second's worth served at most"
        assert all(retry_delay(e) is not None for e in refused), "each refusal says when to retry"
        assert max(retry_delay(e) for e in refused) > 1.0, "kept calling inside its delay: told a longer one"

        try:
            await raw_create(b"\xff\xff", metadata=bearer(acme))
            raise AssertionError("served")
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, "refused before its bytes were decoded"
            assert retry_delay(error) is not None
            assert "API request rate over 1/s" in error.details()
        try:
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job("inside"), request_id="inside"),
                                      metadata=bearer(acme))  # fmt: skip
            raise AssertionError("served")
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and retry_delay(error) is not None

        others = await asyncio.gather(*(
            scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job(f"g{n}"), request_id=f"g{n}"),
                                metadata=bearer(globex))
            for n in range(5)
        ))  # fmt: skip
        assert all(r.job.id for r in others), "another tenant on the same address is served"
        try:
            await raw_create(b"\xff\xff", metadata=bearer(globex))
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, "its bad bytes are its own, refused as such"

        stored = await admin.SearchJobs(admin_pb2.SearchJobsRequest(tenant="acme", page_size=100),
                                        metadata=server.admin_metadata())  # fmt: skip
        assert list(stored.jobs) == [], "nothing written for the refused calls"
        scraped = parse_samples(await server.server.metrics.scrape())
        assert scraped[("tickwheel_refusal_windows_refused_total", ())] >= 2, "the refusals inside the window counted"
        assert scraped[("tickwheel_refusal_windows", ())] >= 1
        assert ("tickwheel_authentications_refused_total", ()) in scraped
