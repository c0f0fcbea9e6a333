"""A tenant pays for the paused spans its resumes and updates make the
server count, through the real server on the embedded stores and on
PostgreSQL + etcd.

Resuming a paused job (ResumeJob, BatchResumeJobs), or changing the
schedule of one (UpdateJob, BatchUpdateJobs), counts the occurrences the
pause kept from running, up to 100 000 a job
(:data:`~tickwheel_server.policy.jobchanges.MAX_COUNTED_SKIPS`): a number
set by how long ago the job was paused, not by any request field. A tenant
allowed 5 requests a second has jobs every minute paused a week ago (their
cursors set back in the store) and resumes or reschedules them all at once.
The fires counted, at the schedule engine's call site in
:mod:`~tickwheel_server.policy.jobchanges`, stay within what its rate pays
for (100 fires a request,
:data:`~tickwheel_server.auth.ratelimit.FIRES_PER_TOKEN`) plus one job's
span; the calls or items over it are refused RESOURCE_EXHAUSTED naming
``requests_per_second`` with the wait in RetryInfo. Every answer is true:
a job answered resumed (or updated) is so in the store, a job refused is
still paused as it was."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import field_mask_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tickwheel.shared.ids import to_us
from tickwheel_server.auth.ratelimit import FIRES_PER_TOKEN
from tickwheel_server.policy import jobchanges

from tests.integration.test_schedule_work_rate_api import every_minute, slow_tenant
from tests.integration.test_server_api import bearer

RATE = 5
JOBS = 6
PAUSED_FOR = timedelta(days=7)
SPAN = int(PAUSED_FOR / timedelta(minutes=1))
"""Occurrences of an every-minute job paused for PAUSED_FOR: what one job's resume counts."""


class Counted:
    fires = 0


@pytest.fixture
def counted(monkeypatch) -> type[Counted]:
    """Counts every fire the paused-span rules compute."""
    Counted.fires = 0
    next_fire = jobchanges.next_fire

    def counted_next_fire(*args, **kwargs):
        Counted.fires += 1
        return next_fire(*args, **kwargs)

    monkeypatch.setattr(jobchanges, "next_fire", counted_next_fire)
    return Counted


def paused_long_ago(engine: sa.Engine, tenant: str, now: datetime) -> None:
    """Move ``tenant``'s paused jobs' cursors back by :data:`PAUSED_FOR`, as
    if they had been paused then (a whole minute: an occurrence of theirs)."""
    cursor = to_us(now.replace(second=0, microsecond=0) - PAUSED_FOR)
    with engine.begin() as conn:
        moved = conn.execute(
            sa.text("UPDATE job_cursors SET next_run_at = :at, next_due_at = :at, next_nominal_at = NULL "
                    "WHERE tenant = :tenant AND state = 'paused'"),
            {"at": cursor, "tenant": tenant},
        ).rowcount  # fmt: skip
    assert moved == JOBS


def rescheduled(job: job_pb2.Job) -> job_pb2.Job:
    changed = job_pb2.Job(id=job.id, version=job.version)
    changed.schedule.cron.expression = "*/2 * * * *"
    changed.schedule.cron.time_zone = "UTC"
    return changed


SCHEDULE = field_mask_pb2.FieldMask(paths=["schedule"])


async def send(scheduler, rpc: str, jobs: list[job_pb2.Job], key: str) -> list[status_pb2.Status | None]:
    """Send ``rpc`` for every job at once (one call each, or one batch);
    the outcome of each job: None when applied, else its status."""

    async def one(method, request):
        try:
            await method(request, metadata=bearer(key))
            return None
        except grpc.aio.AioRpcError as error:
            return rpc_status.from_call(error)

    if rpc == "ResumeJob":
        requests = [scheduler_pb2.ResumeJobRequest(id=job.id) for job in jobs]
        return list(await asyncio.gather(*(one(scheduler.ResumeJob, r) for r in requests)))
    if rpc == "UpdateJob":
        requests = [scheduler_pb2.UpdateJobRequest(job=rescheduled(job), update_mask=SCHEDULE) for job in jobs]
        return list(await asyncio.gather(*(one(scheduler.UpdateJob, r) for r in requests)))
    if rpc == "BatchResumeJobs":
        batch = scheduler_pb2.BatchResumeJobsRequest(items=[scheduler_pb2.ResumeJobRequest(id=j.id) for j in jobs])
        reply = await scheduler.BatchResumeJobs(batch, metadata=bearer(key))
    else:
        batch = scheduler_pb2.BatchUpdateJobsRequest(items=[
            scheduler_pb2.UpdateJobRequest(job=rescheduled(job), update_mask=SCHEDULE) for job in jobs
        ])  # fmt: skip
        reply = await scheduler.BatchUpdateJobs(batch, metadata=bearer(key))
    assert len(reply.results) == len(jobs)
    return [None if result.WhichOneof("result") == "job" else result.error for result in reply.results]


def over_rate(status: status_pb2.Status) -> bool:
    """True for RESOURCE_EXHAUSTED on ``requests_per_second`` with a wait in RetryInfo."""
    if status.code != grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]:
        return False
    infos, waits = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
    quota = [d.Unpack(infos) and infos.metadata["quota"] for d in status.details if d.Is(infos.DESCRIPTOR)]
    delay = [d.Unpack(waits) and waits.retry_delay.ToMilliseconds() for d in status.details if d.Is(waits.DESCRIPTOR)]
    return quota == ["requests_per_second"] and len(delay) == 1 and delay[0] >= 1 and "over 5/s" in status.message


@pytest.mark.parametrize("rpc", ["ResumeJob", "BatchResumeJobs", "UpdateJob", "BatchUpdateJobs"])
async def test_a_tenant_pays_for_the_paused_spans_it_makes_the_server_count(server, counted, rpc: str) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        acme = await slow_tenant(admin, server, RATE)
        created = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=[
            scheduler_pb2.CreateJobRequest(job=every_minute(f"paused-{n}"), request_id=f"p{n}") for n in range(JOBS + 1)
        ]), metadata=bearer(acme))  # fmt: skip
        *created_paused, active = [result.job.job for result in created.results]
        paused = await scheduler.BatchPauseJobs(scheduler_pb2.BatchPauseJobsRequest(items=[
            scheduler_pb2.PauseJobRequest(id=job.id) for job in created_paused
        ]), metadata=bearer(acme))  # fmt: skip
        jobs = [result.job.job for result in paused.results]
        assert len(jobs) == JOBS and all(job.state == job_pb2.JOB_STATE_PAUSED for job in jobs)
        if rpc.startswith("Batch"):  # last, an active job: it has no span to count, and is never refused for one
            jobs.append(active)
        paused_long_ago(server.server.engine, "acme", datetime.now(timezone.utc))
        await asyncio.sleep(2.0 / RATE)  # the two calls' tokens back

        counted.fires = 0
        started = time.monotonic()
        outcomes = await send(scheduler, rpc, jobs, acme)
        elapsed = time.monotonic() - started
        paid = FIRES_PER_TOKEN * (RATE + RATE * elapsed)
        assert counted.fires <= paid + SPAN + 2, (
            f"{counted.fires} fires counted in {elapsed:.2f} s by {rpc} of {JOBS} jobs paused "
            f"{SPAN} minutes, for a tenant paying for {paid:.0f} (plus one job's {SPAN})"
        )

        refused = [status for status in outcomes if status is not None]
        assert refused, f"the {rpc} over the tenant's rate are refused"
        assert all(over_rate(status) for status in refused), refused
        applied = [job.id for job, status in zip(jobs, outcomes) if status is None]
        assert applied, "a tenant not in debt has its first job's span counted"
        if rpc == "BatchUpdateJobs":
            assert active.id in applied, "an active job's change counts no span: not refused"

        found = await admin.SearchJobs(admin_pb2.SearchJobsRequest(tenant="acme", page_size=JOBS + 1),
                                       metadata=server.admin_metadata())  # fmt: skip
        stored = {job.id: job for job in found.jobs}
        for job in jobs:
            now = stored[job.id]
            if job.id == active.id:
                assert now.state == job_pb2.JOB_STATE_ACTIVE
            elif job.id in applied:
                assert now.version == job.version + 1, f"{job.id} answered {rpc}: written"
                if rpc.endswith("ResumeJobs") or rpc == "ResumeJob":
                    assert now.state == job_pb2.JOB_STATE_ACTIVE
                else:
                    assert now.schedule.cron.expression == "*/2 * * * *"
            else:
                assert (now.version, now.state) == (job.version, job_pb2.JOB_STATE_PAUSED), (
                    f"{job.id} answered refused: nothing written"
                )
                assert now.schedule.cron.expression == "* * * * *"
