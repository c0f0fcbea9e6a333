"""AdminService.RecomputeSchedules on an embedded server, and the start hook
that records the running tzdata release."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support.server import running_server
from tickwheel_server.schedule import tzdata_version
from tests.support.jobrows import job_row
from tickwheel_server.store.tables import tzdata_versions

from .test_server_api import bearer, violations


async def test_recompute_schedules(tmp_path):
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}") as running:
        key = await running.create_tenant("acme")
        async with grpc.aio.insecure_channel(running.address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            job = job_pb2.Job(
                name="report",
                schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 9 * * *", time_zone="Europe/London")),
                target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
            )
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="r1"), metadata=bearer(key))

            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await admin.RecomputeSchedules(
                    admin_pb2.RecomputeSchedulesRequest(zones=["Europe/London", "Mars/Olympus_Mons"]),
                    metadata=running.admin_metadata(),
                )
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "Mars/Olympus_Mons" in violations(caught.value)["zones"]

            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await admin.RecomputeSchedules(admin_pb2.RecomputeSchedulesRequest(), metadata=bearer(key))
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED

            reply = await admin.RecomputeSchedules(
                admin_pb2.RecomputeSchedulesRequest(zones=["Europe/London", "Asia/Tokyo"], dry_run=True),
                metadata=running.admin_metadata(),
            )
            assert reply.tzdata_version == tzdata_version()
            assert reply.examined == 1
            assert list(reply.shifted) == []  # computed with this release already

            reply = await admin.RecomputeSchedules(
                admin_pb2.RecomputeSchedulesRequest(), metadata=running.admin_metadata()
            )
            assert (reply.tzdata_version, reply.examined, list(reply.shifted)) == (tzdata_version(), 0, [])

        # The start hook records this release's fingerprints (in the background).
        for _ in range(100):
            with running.server.engine.connect() as conn:
                versions = conn.execute(sa.select(tzdata_versions.c.version)).scalars().all()
            if versions:
                break
            await asyncio.sleep(0.05)
        assert versions == [tzdata_version()]


async def test_start_recomputes_jobs_of_another_release_and_logs_and_alerts_the_shift(tmp_path, caplog):
    """A job recorded by release "2026a" (fingerprints never recorded: every
    zone may have changed) whose stored cursor is off by 30 minutes."""
    from datetime import datetime, timedelta, timezone

    from tickwheel.shared.clock import SystemClock
    from tickwheel.shared.ids import new_job_id, to_us
    from tickwheel_server.schedule import Schedule, next_fire
    from tickwheel_server.store import create_store_engine, migrate
    from tickwheel_server.store.cluster import ensure_cluster
    from tickwheel_server.store.jobrecords import NewJob
    from tickwheel_server.store.jobs import JobStore
    from tickwheel_server.store.tenants import Tenant, TenantStore

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine, clock = create_store_engine(url), SystemClock()
    migrate(engine)
    cluster = await ensure_cluster(engine, clock, 16)
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    spec = job_pb2.Job(
        name="report",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 9 * * *", time_zone="Europe/London")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
    )
    spec.jitter.exact = True
    right = next_fire(Schedule.cron("0 9 * * *", "Europe/London", exact=True), datetime.now(timezone.utc)).nominal_at
    wrong = right + timedelta(minutes=30)
    ident = new_job_id(clock.now())
    await JobStore(engine, clock, partition_count=cluster.partition_count).create(
        NewJob(
            id=ident, tenant="acme", name="report", spec=spec.SerializeToString(), time_zone="Europe/London",
            next_run_at=wrong, next_due_at=wrong, tzdata_version="2026a", payload_size=0,
        ),
        "r1",
    )
    engine.dispose()
    caplog.set_level("WARNING", logger="tickwheel.server")
    async with running_server(url) as running:
        for _ in range(200):
            lines = [r.getMessage() for r in caplog.records if "shifted" in r.getMessage()]
            if lines:
                break
            await asyncio.sleep(0.05)
        with running.server.engine.connect() as conn:
            row = job_row(conn, ident)
        for _ in range(200):
            alert = await running.server.stores.alerts.get(f"tzdata_shift:2026a->{tzdata_version()}")
            if alert is not None:
                break
            await asyncio.sleep(0.05)
    assert alert is not None and alert.kind == "tzdata_shift" and alert.details["shifted"] == "1"
    assert (row.next_run_at, row.tzdata_version) == (to_us(right), tzdata_version())
    assert lines == [
        f"tzdata 2026a→{tzdata_version()} shifted 1 runs: job {ident} (acme) "
        f"{wrong:%Y-%m-%dT%H:%M:%SZ} → {right:%Y-%m-%dT%H:%M:%SZ}"
    ]


async def test_operator_lists_are_bounded_and_nothing_is_written(tmp_path):
    """IssueWorkerCredential's ``tenants`` and ``handlers`` and
    RecomputeSchedules' ``zones`` past their bounds: INVALID_ARGUMENT naming
    the field, no credential issued (before: a credential naming the same
    tenant 1001 times, or 1001 handlers, was stored; any number of zones
    was accepted)."""
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}") as running:
        await running.create_tenant("acme")
        meta = running.admin_metadata()
        async with grpc.aio.insecure_channel(running.address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            for request, field in (
                (admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"] * 1001), "tenants"),
                (admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"], handlers=["echo"] * 1001), "handlers"),
                (admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"], handlers=["bad name"] * 900), "handlers"),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await admin.IssueWorkerCredential(request, metadata=meta)
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
                assert list(violations(caught.value)) == [field]
                assert len(caught.value.details()) < 2000, "the bad names are not all echoed"
            listed = await admin.ListWorkerCredentials(admin_pb2.ListWorkerCredentialsRequest(), metadata=meta)
            assert list(listed.credentials) == [], "nothing was written"
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await admin.RecomputeSchedules(
                    admin_pb2.RecomputeSchedulesRequest(zones=["Europe/London"] * 1001), metadata=meta
                )
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert list(violations(caught.value)) == ["zones"]
            await admin.IssueWorkerCredential(
                admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"] * 1000, handlers=["echo"] * 1000), metadata=meta
            )
