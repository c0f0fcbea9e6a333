"""max_pending_manual_runs through the API on two real servers (PostgreSQL
and etcd): TriggerJob and BackfillJob racing at the quota stop exactly at
it, every refusal is RESOURCE_EXHAUSTED with an ErrorInfo naming the quota,
and a refused call leaves nothing behind."""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta, timezone

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import field_mask_pb2, timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc

from tests.support.server import running_server

from .test_server_api import bearer, cron_job, violations

LIMIT = 30


def _ts(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def quota_named(error: grpc.aio.AioRpcError) -> tuple[str, str]:
    """The (quota, limit) the refusal's ErrorInfo names."""
    status = rpc_status.from_call(error)
    assert status is not None, "the refusal carries no google.rpc.Status"
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.metadata["quota"], info.metadata["limit"]
    raise AssertionError("no ErrorInfo in the refusal")


async def set_quotas(server, channel, **quotas) -> admin_pb2.Tenant:
    reply = await admin_pb2_grpc.AdminServiceStub(channel).UpdateTenant(
        admin_pb2.UpdateTenantRequest(
            tenant=admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(**quotas)),
            update_mask=field_mask_pb2.FieldMask(paths=["quotas"]),
        ),
        metadata=server.admin_metadata(),
    )  # fmt: skip
    return reply.tenant


@pytest.mark.postgres
@pytest.mark.etcd
async def test_triggers_and_backfills_on_two_servers_stop_exactly_at_the_quota(postgres_url, etcd_endpoint) -> None:
    """8 writers, half on each server, trigger and backfill one hourly job
    (windows of 1 to 4 hours, none overlapping another's) past the quota,
    then trigger until refused. No worker is connected, so nothing starts:
    afterwards exactly the quota's runs exist, each answered created, the
    refused ones left nothing, and GetTenant counts them."""
    async with running_server(postgres_url, etcd_endpoint) as one, running_server(postgres_url, etcd_endpoint) as two:
        key = await one.create_tenant("acme")
        async with grpc.aio.insecure_channel(one.address) as a, grpc.aio.insecure_channel(two.address) as b:
            tenant = await set_quotas(one, a, max_pending_manual_runs=LIMIT, requests_per_second=1_000_000)
            assert tenant.quotas.max_pending_manual_runs == LIMIT
            stubs = [scheduler_pb2_grpc.SchedulerServiceStub(channel) for channel in (a, b)]
            job = (await stubs[0].CreateJob(scheduler_pb2.CreateJobRequest(
                job=cron_job("0 * * * *", "UTC"), request_id="job"), metadata=bearer(key))).job  # fmt: skip
            created: set[str] = set()
            refused_triggers: list[str] = []
            refused_windows: list[tuple[datetime, datetime]] = []
            hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
            rng = random.Random(35)

            def refusal(error: grpc.aio.AioRpcError) -> None:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
                assert quota_named(error) == ("max_pending_manual_runs", str(LIMIT))

            async def trigger(scheduler, rid: str) -> None:
                try:
                    reply = await scheduler.TriggerJob(
                        scheduler_pb2.TriggerJobRequest(id=job.id, request_id=rid), metadata=bearer(key))
                except grpc.aio.AioRpcError as error:
                    refusal(error)
                    refused_triggers.append(rid)
                else:
                    assert reply.created
                    created.add(reply.execution.id)

            async def writer(w: int) -> None:
                scheduler = stubs[w % 2]
                for n in range(6):
                    if rng.random() < 0.5:
                        await trigger(scheduler, f"w{w}-{n}")
                        continue
                    end = hour - timedelta(hours=1 + (w * 6 + n) * 5)
                    start = end - timedelta(hours=rng.randint(1, 4))
                    try:
                        reply = await scheduler.BackfillJob(scheduler_pb2.BackfillJobRequest(
                            id=job.id, from_at=_ts(start), to_at=_ts(end)), metadata=bearer(key))  # fmt: skip
                    except grpc.aio.AioRpcError as error:
                        refusal(error)
                        refused_windows.append((start, end))
                    else:
                        assert reply.existing_count == 0
                        created.update(o.execution_id for o in reply.occurrences)
                for n in range(3):  # what room is left, single runs fill
                    await trigger(scheduler, f"w{w}-last-{n}")

            await asyncio.gather(*(writer(w) for w in range(8)))
            assert refused_triggers, "the writers passed the quota"
            read = await admin_pb2_grpc.AdminServiceStub(b).GetTenant(
                admin_pb2.GetTenantRequest(name="acme"), metadata=two.admin_metadata())
            pending = read.pending_manual_runs
        engine = sa.create_engine(postgres_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(sa.text(
                    "SELECT id, nominal_at FROM executions WHERE tenant = 'acme' AND origin IN ('trigger', 'backfill')"
                )).all()  # fmt: skip
                slots = conn.execute(sa.text("SELECT used, allowance FROM manual_quota WHERE tenant = 'acme'")).all()
        finally:
            engine.dispose()
    assert {row.id for row in rows} == created and len(created) == LIMIT == pending
    assert not any(f":trigger:{rid}" in row.id for rid in refused_triggers for row in rows)
    for start, end in refused_windows:  # a refused backfill is refused whole
        assert not any(start.timestamp() * 1e6 <= row.nominal_at < end.timestamp() * 1e6 for row in rows)
    assert all(used <= allowance for used, allowance in slots) and sum(a for _, a in slots) <= LIMIT
    assert sum(used for used, _ in slots) == LIMIT


async def test_the_quota_is_bounded_and_read_back(server) -> None:
    await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await set_quotas(server, channel, max_pending_manual_runs=10_000_001)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "tenant.quotas.max_pending_manual_runs" in refused.value.details()
        assert (await set_quotas(server, channel, max_pending_manual_runs=7)).quotas.max_pending_manual_runs == 7
        default = await set_quotas(server, channel, max_pending_manual_runs=0)
        assert default.quotas.max_pending_manual_runs == 100_000


async def test_a_refused_tenant_create_or_update_writes_nothing(server) -> None:
    """Quotas out of bounds, negative or past their maximum, are refused
    INVALID_ARGUMENT naming every field at fault: a refused create leaves
    no tenant (nor its key), a refused update leaves the tenant's version
    and quotas as they were."""
    await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        md = server.admin_metadata()
        quotas = admin_pb2.TenantQuotas(max_pending_manual_runs=-1, max_jobs=1_000_000_001)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.CreateTenant(admin_pb2.CreateTenantRequest(
                tenant=admin_pb2.Tenant(name="globex", quotas=quotas)), metadata=md)  # fmt: skip
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert set(violations(refused.value)) == {"tenant.quotas.max_pending_manual_runs", "tenant.quotas.max_jobs"}
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await admin.GetTenant(admin_pb2.GetTenantRequest(name="globex"), metadata=md)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        before = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=md)).tenant
        for value in (-5, 10_000_001):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await set_quotas(server, channel, max_pending_manual_runs=value)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert list(violations(refused.value)) == ["tenant.quotas.max_pending_manual_runs"]
        after = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=md)).tenant
        assert (after.version, after.quotas) == (before.version, before.quotas)

