"""TriggerJob, BackfillJob and GetJob's last run through the real gRPC
server with a real worker, on the embedded stores and on PostgreSQL + etcd."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from tickwheel.v1 import execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer, violations
from tests.support.workers import running_worker
from tickwheel_worker import HandlerRegistry

WAIT = 20.0


class Flaky:
    """Fails while ``failing``; records every call."""

    def __init__(self) -> None:
        self.failing = False
        self.calls: list[tuple[str, bytes]] = []

    async def __call__(self, ctx) -> bytes:
        self.calls.append((ctx.execution_id, ctx.payload))
        if self.failing:
            raise RuntimeError("the ledger is locked")
        return b"ok"


@pytest.fixture
async def cluster(server):
    acme, globex = await server.create_tenant("acme"), await server.create_tenant("globex")
    credential = await server.issue_worker_credential(["acme"], handlers=["ledger"])
    handler = Flaky()
    registry = HandlerRegistry()
    registry.register("ledger", handler)
    async with (
        grpc.aio.insecure_channel(server.address) as channel,
        running_worker(server.address, credential, registry, worker_id="w1", http=False, slots=8),
    ):
        yield scheduler_pb2_grpc.SchedulerServiceStub(channel), acme, globex, handler


async def create(scheduler, key: str, *, cron: str = "0 0 1 1 *", start_at: datetime | None = None,
                 max_attempts: int = 0) -> job_pb2.Job:
    job = job_pb2.Job(name="ledger", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="ledger")),
                      payload=b"normal")
    job.schedule.cron.expression = cron
    job.schedule.cron.time_zone = "Europe/London"
    job.jitter.exact = True
    if start_at is not None:
        job.start_at.FromDatetime(start_at)
    if max_attempts:
        job.retry_policy.max_attempts = max_attempts
        job.retry_policy.initial_backoff.FromMilliseconds(100)
        job.retry_policy.max_backoff.FromMilliseconds(200)
    reply = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"c-{abs(hash((cron, max_attempts)))}"),
                                      metadata=bearer(key))
    return reply.job


async def ended(scheduler, key: str, execution_id: str):
    deadline = asyncio.get_running_loop().time() + WAIT
    while True:
        reply = await scheduler.GetExecution(scheduler_pb2.GetExecutionRequest(id=execution_id), metadata=bearer(key))
        if reply.execution.status in (job_pb2.EXECUTION_STATUS_SUCCEEDED, job_pb2.EXECUTION_STATUS_DEAD,
                                      job_pb2.EXECUTION_STATUS_CANCELED):
            return reply.execution
        assert asyncio.get_running_loop().time() < deadline, f"{execution_id} did not end"
        await asyncio.sleep(0.05)


async def test_a_repeated_trigger_runs_once_and_two_request_ids_run_twice(cluster) -> None:
    scheduler, acme, _, handler = cluster
    job = await create(scheduler, acme)
    trigger = scheduler_pb2.TriggerJobRequest(id=job.id, request_id="click-1")
    first = await scheduler.TriggerJob(trigger, metadata=bearer(acme))
    again = await scheduler.TriggerJob(trigger, metadata=bearer(acme))
    other = await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job.id, request_id="click-2", payload=b"x"),
                                       metadata=bearer(acme))
    assert (first.created, again.created, other.created) == (True, False, True)
    assert first.execution.id == again.execution.id == f"{job.id}:trigger:click-1"
    await ended(scheduler, acme, first.execution.id)
    await ended(scheduler, acme, other.execution.id)
    assert sorted(handler.calls) == sorted([(first.execution.id, b"normal"), (other.execution.id, b"x")])


async def test_trigger_and_backfill_reject_bad_input_and_other_tenants(cluster) -> None:
    scheduler, acme, globex, _ = cluster
    job = await create(scheduler, acme)
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job.id), metadata=bearer(acme))
    assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT and list(violations(missing.value)) == ["request_id"]
    with pytest.raises(grpc.aio.AioRpcError) as foreign:
        await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job.id, request_id="r"), metadata=bearer(globex))
    assert foreign.value.code() == grpc.StatusCode.NOT_FOUND
    now = datetime.now(timezone.utc)
    for start, end, field in ((now - timedelta(days=1), now + timedelta(days=1), "to_at"),
                              (now - timedelta(days=1), now - timedelta(days=2), "to_at")):
        request = scheduler_pb2.BackfillJobRequest(id=job.id)
        request.from_at.FromDatetime(start)
        request.to_at.FromDatetime(end)
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await scheduler.BackfillJob(request, metadata=bearer(acme))
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and list(violations(bad.value)) == [field]
    with pytest.raises(grpc.aio.AioRpcError) as none:
        await scheduler.BackfillJob(scheduler_pb2.BackfillJobRequest(id=job.id), metadata=bearer(acme))
    assert sorted(violations(none.value)) == ["from_at", "to_at"]


async def test_backfill_twice_over_overlapping_windows_never_duplicates_and_dry_run_matches(cluster) -> None:
    scheduler, acme, _, handler = cluster
    job = await create(scheduler, acme, cron="0 * * * *", start_at=datetime(2026, 1, 1, tzinfo=timezone.utc))
    day = datetime(2026, 3, 29, tzinfo=timezone.utc)  # London springs forward at 01:00 UTC: still 24 hours

    def window(start_hour: int, end_hour: int) -> scheduler_pb2.BackfillJobRequest:
        request = scheduler_pb2.BackfillJobRequest(id=job.id)
        request.from_at.FromDatetime(day + timedelta(hours=start_hour))
        request.to_at.FromDatetime(day + timedelta(hours=end_hour))
        return request

    dry_request = window(0, 6)
    dry_request.dry_run = True
    dry = await scheduler.BackfillJob(dry_request, metadata=bearer(acme))
    real = await scheduler.BackfillJob(window(0, 6), metadata=bearer(acme))
    assert [o.execution_id for o in dry.occurrences] == [o.execution_id for o in real.occurrences]
    assert (dry.created_count, real.created_count, len(real.occurrences)) == (6, 6, 6)
    overlapping = await scheduler.BackfillJob(window(3, 9), metadata=bearer(acme))
    assert (overlapping.created_count, overlapping.existing_count) == (3, 3)
    assert [o.already_exists for o in overlapping.occurrences] == [True] * 3 + [False] * 3
    ids = [o.execution_id for o in real.occurrences] + [o.execution_id for o in overlapping.occurrences[3:]]
    for ident in ids:
        execution = await ended(scheduler, acme, ident)
        assert (execution.status, execution.origin) == (
            job_pb2.EXECUTION_STATUS_SUCCEEDED, execution_pb2.EXECUTION_ORIGIN_BACKFILL
        )
    assert sorted(call[0] for call in handler.calls) == sorted(ids)


async def test_get_job_says_why_the_last_run_failed(cluster) -> None:
    scheduler, acme, _, handler = cluster
    job = await create(scheduler, acme, max_attempts=2)
    reply = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(acme))
    assert not reply.job.HasField("last_run")
    handler.failing = True
    triggered = await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job.id, request_id="t1"),
                                           metadata=bearer(acme))
    execution = await ended(scheduler, acme, triggered.execution.id)
    assert execution.status == job_pb2.EXECUTION_STATUS_DEAD and len(execution.attempts) == 2
    reply = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(acme))
    last = reply.job.last_run
    assert (last.execution_id, last.status) == (triggered.execution.id, job_pb2.EXECUTION_STATUS_DEAD)
    assert "the ledger is locked" in last.error
