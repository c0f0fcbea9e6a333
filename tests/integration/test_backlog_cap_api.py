"""The backlog cap through the real gRPC server, on the embedded stores and
on PostgreSQL + etcd: a job whose queue already holds its cap of
executions no worker takes gets no occurrence more; its history
(ListExecutions) shows the occurrence as a ``SKIP_REASON_BACKLOG`` range."""

from __future__ import annotations

import asyncio

import grpc
from tickwheel.v1 import execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tickwheel_server.policy.backlog import NOT_STARTED_CAP

WAIT = 90.0
"""Seconds to wait for the claim of the job's next occurrence (within a minute of the resume)."""


def minutely() -> job_pb2.Job:
    job = job_pb2.Job(
        name="nobody-takes-me", overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW,
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="* * * * *", time_zone="UTC")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="no-worker-serves-this")),
    )  # fmt: skip
    job.jitter.exact = True
    return job


async def test_a_full_queue_turns_the_next_occurrence_into_a_backlog_range(server) -> None:
    key = await server.create_tenant("acme")
    meta = bearer(key)
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        request = scheduler_pb2.CreateJobRequest(job=minutely(), request_id="c1")
        created = await scheduler.CreateJob(request, metadata=meta)
        job_id = created.job.id
        # Paused while its queue fills (no occurrence claimed meanwhile), then resumed on a full queue.
        await scheduler.PauseJob(scheduler_pb2.PauseJobRequest(id=job_id), metadata=meta)
        for n in range(NOT_STARTED_CAP):
            await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job_id, request_id=f"t{n}"), metadata=meta)
        resumed = await scheduler.ResumeJob(scheduler_pb2.ResumeJobRequest(id=job_id), metadata=meta)
        cursor = resumed.job.next_run_at.ToDatetime()
        deadline = asyncio.get_running_loop().time() + WAIT
        while True:
            page = await scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job_id), metadata=meta)
            backlog = [s for s in page.skips if s.reason == execution_pb2.SKIP_REASON_BACKLOG]
            if backlog or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.2)
        assert backlog, f"no backlog range within {WAIT} s: {page}"
        assert backlog[-1].from_at.ToDatetime() == cursor and backlog[-1].job_id == job_id
        triggered = [e for e in page.executions if e.origin == execution_pb2.EXECUTION_ORIGIN_TRIGGER]
        assert len(triggered) == NOT_STARTED_CAP
        # No occurrence beside them from the resume on. One may have been
        # claimed between the create and the pause (the claim looks a
        # minute ahead, and a loaded machine may run one in that gap).
        claimed = [e.nominal_at.ToDatetime() for e in page.executions if e not in triggered]
        assert all(nominal < cursor for nominal in claimed), (claimed, cursor)
        assert {e.status for e in page.executions} == {job_pb2.EXECUTION_STATUS_SCHEDULED}
