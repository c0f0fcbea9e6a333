""""It didn't run", end to end on the real server: a job whose worker never
comes raises a `late` alert after its threshold, visible through ListAlerts,
and the alert resolves once a worker has run it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tests.support.polling import eventually
from tests.support.workers import builtin_handlers, running_worker


async def test_a_job_whose_worker_never_comes_raises_late_and_resolves_after_it_runs(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        acme = await server.create_tenant("acme")
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        job = job_pb2.Job(name="nightly", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
        job.schedule.once_at.FromDatetime(datetime.now(timezone.utc) + timedelta(milliseconds=200))
        job.lateness_threshold.FromSeconds(1)
        created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="n1"),
                                           metadata=bearer(acme))

        async def late_alerts():
            reply = await admin.ListAlerts(admin_pb2.ListAlertsRequest(kinds=[admin_pb2.ALERT_KIND_LATE]),
                                           metadata=server.admin_metadata())
            return [a for a in reply.alerts if a.job_id == created.job.id]

        [alert] = await eventually(late_alerts, "the late alert is raised")
        assert alert.tenant == "acme" and "did not run" in alert.summary
        credential = await server.issue_worker_credential(["acme"], handlers=["echo"])
        async with running_worker(server.address, credential, builtin_handlers(), worker_id="late-comer", http=False):
            async def resolved():
                return not await late_alerts()

            await eventually(resolved, "the late alert resolves after the job ran")
            reply = await admin.ListAlerts(
                admin_pb2.ListAlertsRequest(kinds=[admin_pb2.ALERT_KIND_LATE], include_resolved=True),
                metadata=server.admin_metadata(),
            )
            [closed] = [a for a in reply.alerts if a.job_id == created.job.id]
            assert closed.HasField("resolved_at")
