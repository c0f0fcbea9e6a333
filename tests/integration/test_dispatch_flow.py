"""Flow 1 end to end through the real server: a job is created over gRPC,
claimed by the dispatcher, handed out at its due instant through the store,
run by a real worker and recorded in history; on the embedded stores and on
PostgreSQL + etcd."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from google.protobuf import field_mask_pb2
from tickwheel.v1 import execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support.workers import builtin_handlers, running_worker

WAIT = 20.0


@pytest.fixture
async def cluster(server):
    acme = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], http=True)
    async with (
        grpc.aio.insecure_channel(server.address) as channel,
        running_worker(server.address, credential, builtin_handlers(), worker_id="w1", slots=8),
    ):
        yield server, scheduler_pb2_grpc.SchedulerServiceStub(channel), acme


def once_job(name: str, at: datetime) -> job_pb2.Job:
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")), payload=b"hi")
    job.schedule.once_at.FromDatetime(at)
    return job


async def history(scheduler, key: str, job_id: str) -> list[execution_pb2.Execution]:
    reply = await scheduler.ListExecutions(
        scheduler_pb2.ListExecutionsRequest(job_id=job_id), metadata=(("authorization", f"Bearer {key}"),)
    )
    return list(reply.executions)


async def wait_for_status(scheduler, key: str, job_id: str, status: int) -> list[execution_pb2.Execution]:
    """Poll the public API (what a user would do) until an execution has ``status``."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while asyncio.get_running_loop().time() < deadline:
        found = await history(scheduler, key, job_id)
        if any(e.status == status for e in found):
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"no execution of {job_id} reached status {status}: {found}")


async def test_a_one_off_job_runs_once_on_time_with_its_history(cluster) -> None:
    running, scheduler, key = cluster
    meta = (("authorization", f"Bearer {key}"),)
    due = datetime.now(timezone.utc) + timedelta(seconds=1.5)
    created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=once_job("soon", due), request_id="r1"), metadata=meta)
    job_id = created.job.id
    [execution] = await wait_for_status(scheduler, key, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert execution.id == f"{job_id}:{due.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z"
    assert (execution.attempt, execution.delivery, execution.missed_count) == (1, 1, 1)
    [attempt] = execution.attempts
    assert attempt.status == execution_pb2.ATTEMPT_STATUS_SUCCEEDED and attempt.worker_id == "w1"
    started = attempt.started_at.ToDatetime(tzinfo=timezone.utc)
    assert started >= due, "never early"
    assert attempt.lateness.ToTimedelta() >= timedelta(0)
    assert attempt.lateness.ToTimedelta() < timedelta(seconds=5)
    job = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job_id), metadata=meta)
    assert job.job.state == job_pb2.JOB_STATE_COMPLETED and job.job.run_count == 1


async def test_a_one_off_already_past_runs_once_marked_late(cluster) -> None:
    _, scheduler, key = cluster
    meta = (("authorization", f"Bearer {key}"),)
    past = datetime.now(timezone.utc) - timedelta(hours=3)
    created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=once_job("late", past), request_id="r2"), metadata=meta)
    [execution] = await wait_for_status(scheduler, key, created.job.id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert execution.attempts[0].lateness.ToTimedelta() >= timedelta(hours=3)


async def test_pause_holds_a_run_claimed_ahead_and_resume_releases_it(server) -> None:
    """A one-off claimed in the look-ahead, paused and resumed, runs once:
    the pause holds it (WAITING), the gateway passes over it once it is due
    with a free worker connected, the resume releases it, and it starts at
    its instant, never before, under the id it was claimed with.

    The worker connects only once the pause holds the run: with one
    connected from the start, a pause that comes after the due instant (a
    loaded machine can take the whole margin between the creation and the
    pause) finds the run handed out, and proves nothing about holding."""
    key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], http=True)
    meta = (("authorization", f"Bearer {key}"),)
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        due = datetime.now(timezone.utc) + timedelta(seconds=2)
        created = await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job("later", due), request_id="r3"), metadata=meta
        )
        # Claimed within the 60 s look-ahead by the dispatcher's next tick.
        [claimed] = await wait_for_status(scheduler, key, created.job.id, job_pb2.EXECUTION_STATUS_SCHEDULED)
        paused = await scheduler.PauseJob(
            scheduler_pb2.PauseJobRequest(id=created.job.id, reason="maintenance"), metadata=meta
        )
        assert (paused.held_executions, paused.canceled_executions) == (1, 0)
        [execution] = await history(scheduler, key, created.job.id)
        assert execution.status == job_pb2.EXECUTION_STATUS_WAITING and not execution.attempts
        async with running_worker(server.address, credential, builtin_handlers(), worker_id="w1", slots=8):
            # Due, with a free worker: the gateway's rounds from here on pass over it while paused.
            await asyncio.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()))
            gateway = server.server.gateway
            rounds = gateway.rounds_run
            while gateway.rounds_run < rounds + 3:
                gateway.wake()
                await asyncio.wait_for(gateway.round_done.wait(), WAIT)
            [execution] = await history(scheduler, key, created.job.id)
            assert execution.status == job_pb2.EXECUTION_STATUS_WAITING and not execution.attempts
            resumed = await scheduler.ResumeJob(scheduler_pb2.ResumeJobRequest(id=created.job.id), metadata=meta)
            assert resumed.released_executions == 1 and not resumed.HasField("skipped")
            [execution] = await wait_for_status(scheduler, key, created.job.id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert execution.id == claimed.id
    [attempt] = execution.attempts
    assert attempt.worker_id == "w1" and attempt.started_at.ToDatetime(tzinfo=timezone.utc) >= due


async def test_renaming_a_job_leaves_its_claimed_run_to_run(cluster) -> None:
    _, scheduler, key = cluster
    meta = (("authorization", f"Bearer {key}"),)
    due = datetime.now(timezone.utc) + timedelta(seconds=4)
    created = await scheduler.CreateJob(
        scheduler_pb2.CreateJobRequest(job=once_job("old", due), request_id="r4"), metadata=meta
    )
    [claimed] = await wait_for_status(scheduler, key, created.job.id, job_pb2.EXECUTION_STATUS_SCHEDULED)
    change = job_pb2.Job(id=created.job.id, version=created.job.version, name="new")
    change.labels["team"] = "ops"
    await scheduler.UpdateJob(
        scheduler_pb2.UpdateJobRequest(job=change, update_mask=field_mask_pb2.FieldMask(paths=["name", "labels"])),
        metadata=meta,
    )
    [execution] = await wait_for_status(scheduler, key, created.job.id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert execution.id == claimed.id and execution.attempts[0].started_at.ToDatetime(tzinfo=timezone.utc) >= due
