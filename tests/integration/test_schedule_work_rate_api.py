"""A tenant pays for the schedule fires its calls make the server compute,
through the real server on the embedded stores and on PostgreSQL + etcd.

A tenant allowed 5 requests a second sends a burst of calls that each make
the server compute thousands of fires (a BackfillJob whose window holds
more than the 10 000 occurrences one call may take, refused INVALID_ARGUMENT
after counting them; a PreviewSchedule of 1000 fires; UpdateJob's dry-run
diff over two days of an every-minute job). The fires computed, counted at
the schedule engine's call sites, stay within what its rate pays for (100
fires a request, :data:`~tickwheel_server.auth.ratelimit.FIRES_PER_TOKEN`)
plus the one call that started with a bucket not in debt; the calls over it
are refused RESOURCE_EXHAUSTED naming ``requests_per_second``, with the wait
in RetryInfo, and write nothing. Another tenant is not limited by it."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tickwheel_server.api import nextruns
from tickwheel_server.api import scheduler as scheduler_api
from tickwheel_server.auth.ratelimit import FIRES_PER_TOKEN
from tickwheel_server.policy import rundiff

from tests.integration.test_server_api import bearer

RATE = 5
BURST = 12


class Counted:
    fires = 0


@pytest.fixture
def counted(monkeypatch) -> type[Counted]:
    """Counts every fire the three calls' schedule work computes."""
    Counted.fires = 0
    next_fire, preview, iter_fires = scheduler_api.next_fire, nextruns.preview, rundiff.iter_fires

    def counted_next_fire(*args, **kwargs):
        Counted.fires += 1
        return next_fire(*args, **kwargs)

    def counted_preview(*args, **kwargs):
        fires = preview(*args, **kwargs)
        Counted.fires += len(fires)
        return fires

    def counted_iter_fires(*args, **kwargs):
        for fire in iter_fires(*args, **kwargs):
            Counted.fires += 1
            yield fire

    monkeypatch.setattr(scheduler_api, "next_fire", counted_next_fire)
    monkeypatch.setattr(nextruns, "preview", counted_preview)
    monkeypatch.setattr(rundiff, "iter_fires", counted_iter_fires)
    return Counted


def every_minute(name: str) -> job_pb2.Job:
    created = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    created.schedule.cron.expression = "* * * * *"
    created.schedule.cron.time_zone = "UTC"
    return created


def at(instant: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(instant)
    return stamp


def calls(job_id: str, version: int):
    """(RPC name, request, the most fires one such call computes)."""
    now = datetime.now(timezone.utc)
    backfill = scheduler_pb2.BackfillJobRequest(id=job_id, from_at=at(now - timedelta(days=30)), to_at=at(now))
    preview = scheduler_pb2.PreviewScheduleRequest(job_id=job_id, count=1000)
    update = scheduler_pb2.UpdateJobRequest(
        job=job_pb2.Job(id=job_id, version=version, name="renamed"), update_mask=field_mask_pb2.FieldMask(paths=["name"]),
        validate_only=True, diff_window=duration_pb2.Duration(seconds=2 * 86400),
    )
    return [
        ("BackfillJob", backfill, scheduler_api.MAX_BACKFILL + 1),
        ("PreviewSchedule", preview, 1000),
        ("UpdateJob", update, 2 * (2 * 1440 + 1)),
    ]


@pytest.mark.parametrize("rpc", ["BackfillJob", "PreviewSchedule", "UpdateJob"])
async def test_a_tenant_computes_no_more_fires_than_its_rate_pays_for(server, counted, rpc: str) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        acme = await slow_tenant(admin, server, RATE)
        globex = await server.create_tenant("globex")  # the default rate, 100/s
        created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=every_minute("busy"), request_id="busy"),
                                            metadata=bearer(acme))  # fmt: skip
        await asyncio.sleep(1.0 / RATE)  # the create's token back
        [(_, request, most)] = [c for c in calls(created.job.id, created.job.version) if c[0] == rpc]
        method = getattr(scheduler, rpc)

        async def call(key: str):
            try:
                return await method(request, metadata=bearer(key))
            except grpc.aio.AioRpcError as error:
                return error

        counted.fires = 0
        started = time.monotonic()
        replies = await asyncio.gather(*(call(acme) for _ in range(BURST)))
        elapsed = time.monotonic() - started
        paid = FIRES_PER_TOKEN * (RATE + RATE * elapsed)
        assert counted.fires <= paid + most, (
            f"{counted.fires} fires computed in {elapsed:.2f} s for a tenant paying for {paid:.0f} "
            f"(plus one call's {most})"
        )

        refused = [r for r in replies if isinstance(r, grpc.aio.AioRpcError)
                   and r.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]  # fmt: skip
        assert refused, "the calls over the tenant's rate are refused"
        status = rpc_status.from_call(refused[-1])
        assert "tenant 'acme': API request rate over 5/s" in refused[-1].details()
        [failure] = [d for d in status.details if d.Is(error_details_pb2.QuotaFailure.DESCRIPTOR)]
        [info] = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
        [retry] = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
        unpacked = error_details_pb2.ErrorInfo()
        info.Unpack(unpacked)
        assert unpacked.metadata["quota"] == "requests_per_second"
        wait = error_details_pb2.RetryInfo()
        retry.Unpack(wait)
        assert wait.retry_delay.ToMilliseconds() >= 1
        for reply in replies:
            if isinstance(reply, grpc.aio.AioRpcError) and reply.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                assert rpc == "BackfillJob" and reply.code() == grpc.StatusCode.INVALID_ARGUMENT, reply
                assert "to_at" in reply.details() and "more than 10000 occurrences" in reply.details()

        other = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=every_minute("other"), request_id="o"),
                                          metadata=bearer(globex))  # fmt: skip
        answered = await call_as(scheduler, rpc, other.job, globex)
        assert not isinstance(answered, grpc.aio.AioRpcError) or answered.code() != grpc.StatusCode.RESOURCE_EXHAUSTED, (
            "globex is not limited by acme's work"
        )

        executions = await admin.SearchExecutions(
            admin_pb2.SearchExecutionsRequest(tenant="acme", job_id=created.job.id, page_size=500),
            metadata=server.admin_metadata(),
        )
        assert all(e.origin != execution_pb2.EXECUTION_ORIGIN_BACKFILL for e in executions.executions), "no backfill"
        job = await admin.SearchJobs(admin_pb2.SearchJobsRequest(tenant="acme", page_size=10),
                                     metadata=server.admin_metadata())  # fmt: skip
        assert [j.name for j in job.jobs] == ["busy"], "no dry run renamed the job"


async def slow_tenant(admin, server, rate: int) -> str:
    """Create tenant ``acme`` allowed ``rate`` requests a second; its API key."""
    slow = admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(requests_per_second=rate))
    created = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=slow), metadata=server.admin_metadata())
    return created.api_key.secret


async def call_as(scheduler, rpc: str, job: job_pb2.Job, key: str):
    [(_, request, _)] = [c for c in calls(job.id, job.version) if c[0] == rpc]
    try:
        return await getattr(scheduler, rpc)(request, metadata=bearer(key))
    except grpc.aio.AioRpcError as error:
        return error
