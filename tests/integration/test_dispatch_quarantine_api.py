"""A job row the server cannot read, through the real server (embedded stores,
and PostgreSQL + etcd): the other jobs still run on time, the bad one stays
active and untouched, and AdminService lists its JOB_UNREADABLE alert."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import field_mask_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_dispatch_flow import once_job, wait_for_status
from tests.support.workers import builtin_handlers, running_worker
from tickwheel.shared.ids import to_us
from tests.support.jobrows import job_row, write_job
from tickwheel_server.store.tables import executions, jobs

WAIT = 20.0


async def test_an_unreadable_job_is_alerted_and_the_others_still_run(server) -> None:
    key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], http=True)
    meta = (("authorization", f"Bearer {key}"),)
    async with (
        grpc.aio.insecure_channel(server.address) as channel,
        running_worker(server.address, credential, builtin_handlers(), worker_id="w1", slots=8),
    ):
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        now = datetime.now(timezone.utc)
        # Far ahead, so no claim reads it before it is damaged: then, as a
        # newer version would write it, a misfire policy this server does not
        # know, and due now.
        bad = (await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job("bad", now + timedelta(hours=1)), request_id="bad"),
            metadata=meta,
        )).job  # fmt: skip
        damaged = job_pb2.Job.FromString(bad.SerializeToString())
        damaged.misfire_policy = 7
        due = to_us(now + timedelta(seconds=1))
        with server.server.engine.begin() as conn:
            write_job(conn, bad.id, spec=damaged.SerializeToString(), next_run_at=due, next_due_at=due)
        good = [
            (await scheduler.CreateJob(
                scheduler_pb2.CreateJobRequest(job=once_job(f"good{n}", now + timedelta(seconds=1.5)), request_id=f"g{n}"),
                metadata=meta,
            )).job
            for n in range(2)
        ]  # fmt: skip

        for job in good:
            await wait_for_status(scheduler, key, job.id, job_pb2.EXECUTION_STATUS_SUCCEEDED)

        deadline = asyncio.get_running_loop().time() + WAIT
        while True:
            listed = await admin.ListAlerts(
                admin_pb2.ListAlertsRequest(kinds=[admin_pb2.ALERT_KIND_JOB_UNREADABLE]),
                metadata=server.admin_metadata(),
            )
            if listed.alerts or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        [alert] = listed.alerts
        assert (alert.job_id, alert.tenant, alert.severity) == (bad.id, "acme", admin_pb2.ALERT_SEVERITY_CRITICAL)
        assert "misfire_policy" in alert.details["reason"]
        with server.server.engine.connect() as conn:
            row = job_row(conn, bad.id)
            claimed = conn.execute(sa.select(executions.c.id).where(executions.c.job_id == bad.id)).all()
        assert (row.state, row.next_run_at, row.spec, claimed) == ("active", due, damaged.SerializeToString(), [])


async def test_a_definition_that_does_not_parse_fails_only_the_calls_that_need_it(server) -> None:
    # Damaged bytes (not a newer version's fields, which parse): the job is
    # listed, its ready run is handed out beside the others' without holding
    # them up, and the calls that need its definition answer
    # FAILED_PRECONDITION naming it, writing nothing.
    key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], http=True)
    meta = (("authorization", f"Bearer {key}"),)
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        now = datetime.now(timezone.utc)
        bad = (await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job("bad", now + timedelta(hours=1)), request_id="bad"),
            metadata=meta,
        )).job  # fmt: skip
        await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=bad.id, request_id="t1"), metadata=meta)
        with server.server.engine.begin() as conn:
            conn.execute(jobs.update().where(jobs.c.id == bad.id).values(spec=b"\x0a\xff\x01garbage"))
        good = (await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job("good", now + timedelta(seconds=1)), request_id="good"),
            metadata=meta,
        )).job  # fmt: skip

        async with running_worker(server.address, credential, builtin_handlers(), worker_id="w1", slots=8):
            await wait_for_status(scheduler, key, good.id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
            deadline = asyncio.get_running_loop().time() + WAIT
            while True:
                with server.server.engine.connect() as conn:
                    delivery = conn.execute(
                        sa.select(executions.c.delivery).where(executions.c.id == f"{bad.id}:trigger:t1")
                    ).scalar_one()
                if delivery >= 1 or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert delivery >= 1, "the damaged job's trigger was never handed out"

        listed = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=meta)
        assert {job.id for job in listed.jobs} == {bad.id, good.id}
        got = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=bad.id), metadata=meta)
        assert (got.job.id, got.job.state, list(got.next_runs)) == (bad.id, job_pb2.JOB_STATE_ACTIVE, [])

        update = job_pb2.Job(id=bad.id, version=bad.version, name="renamed")
        backfill = scheduler_pb2.BackfillJobRequest(id=bad.id)
        backfill.from_at.FromDatetime(now - timedelta(hours=1))
        backfill.to_at.FromDatetime(now)
        preview = scheduler_pb2.PreviewScheduleRequest(job_id=bad.id, count=1)
        for method, request in (
            (scheduler.UpdateJob, scheduler_pb2.UpdateJobRequest(
                job=update, update_mask=field_mask_pb2.FieldMask(paths=["name"]))),
            (scheduler.TriggerJob, scheduler_pb2.TriggerJobRequest(id=bad.id, request_id="t2")),
            (scheduler.BackfillJob, backfill),
            (scheduler.PreviewSchedule, preview),
        ):  # fmt: skip
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await method(request, metadata=meta)
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.value
            assert bad.id in refused.value.details()
        with server.server.engine.connect() as conn:
            row = conn.execute(sa.select(jobs.c.version, jobs.c.spec).where(jobs.c.id == bad.id)).one()
            triggers = conn.execute(
                sa.select(sa.func.count()).select_from(executions).where(executions.c.id == f"{bad.id}:trigger:t2")
            ).scalar_one()
        assert (row.version, row.spec, triggers) == (bad.version, b"\x0a\xff\x01garbage", 0)
        await scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=bad.id), metadata=meta)
