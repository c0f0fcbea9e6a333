""""It didn't run", end to end on the real server: a job whose worker never
comes raises a `late` alert after its threshold, visible through ListAlerts,
and the alert resolves once a worker has run it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tests.support.server import running_server
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig, register_builtins

BACKENDS = ["embedded", pytest.param("postgres+etcd", marks=[pytest.mark.postgres, pytest.mark.etcd])]
WAIT = 20.0


async def eventually(check, what: str):
    deadline = asyncio.get_running_loop().time() + WAIT
    while not (value := await check()):
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.1)
    return value


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_job_whose_worker_never_comes_raises_late_and_resolves_after_it_runs(backend, request, tmp_path) -> None:
    if backend == "embedded":
        store, etcd = f"sqlite:///{tmp_path / 'store.db'}", "memory"
    else:
        store, etcd = request.getfixturevalue("postgres_url"), request.getfixturevalue("etcd_endpoint")
    async with running_server(store, etcd) as running, grpc.aio.insecure_channel(running.address) as channel:
        acme = await running.create_tenant("acme")
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        job = job_pb2.Job(name="nightly", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
        job.schedule.once_at.FromDatetime(datetime.now(timezone.utc) + timedelta(milliseconds=200))
        job.lateness_threshold.FromSeconds(1)
        created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="n1"),
                                           metadata=bearer(acme))

        async def late_alerts():
            reply = await admin.ListAlerts(admin_pb2.ListAlertsRequest(kinds=[admin_pb2.ALERT_KIND_LATE]),
                                           metadata=running.admin_metadata())
            return [a for a in reply.alerts if a.job_id == created.job.id]

        [alert] = await eventually(late_alerts, "the late alert is raised")
        assert alert.tenant == "acme" and "did not run" in alert.summary
        credential = await admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"], handlers=["echo"]), metadata=running.admin_metadata()
        )
        registry = HandlerRegistry()
        register_builtins(registry)
        worker = Worker(WorkerConfig(address=running.address, credential=credential.credential.secret,
                                     worker_id="late-comer", handlers=registry, http=False))
        task = asyncio.create_task(worker.run())
        try:
            async def resolved():
                return not await late_alerts()

            await eventually(resolved, "the late alert resolves after the job ran")
            reply = await admin.ListAlerts(
                admin_pb2.ListAlertsRequest(kinds=[admin_pb2.ALERT_KIND_LATE], include_resolved=True),
                metadata=running.admin_metadata(),
            )
            [closed] = [a for a in reply.alerts if a.job_id == created.job.id]
            assert closed.HasField("resolved_at")
        finally:
            await worker.stop(1.0)
            await asyncio.gather(task, return_exceptions=True)
