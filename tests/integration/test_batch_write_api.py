"""BatchUpdateJobs and BatchDeleteJobs against the real gRPC server, on the
embedded stores and on PostgreSQL + etcd: each item answered as the single
call would answer it, another tenant's ids untouched, repeated ids applied
in order, concurrent overlapping batches ending every job in one state, the
quota given back, and batches that are not one refused whole."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import code_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from .test_server_api import bearer, cron_job, status_violations, violations


def update(job: job_pb2.Job, *paths: str) -> scheduler_pb2.UpdateJobRequest:
    return scheduler_pb2.UpdateJobRequest(job=job, update_mask=field_mask_pb2.FieldMask(paths=list(paths)))


def delete(job_id: str, version: int = 0) -> scheduler_pb2.DeleteJobRequest:
    return scheduler_pb2.DeleteJobRequest(id=job_id, version=version)


async def create(scheduler, key: str, count: int, prefix: str = "j") -> list[job_pb2.Job]:
    reply = await scheduler.BatchCreateJobs(
        scheduler_pb2.BatchCreateJobsRequest(items=[
            scheduler_pb2.CreateJobRequest(job=cron_job(), request_id=f"{prefix}{i}") for i in range(count)
        ]),
        metadata=bearer(key),
    )  # fmt: skip
    assert reply.created_count == count
    return [result.job.job for result in reply.results]


async def job_count(server, channel, tenant: str = "acme") -> int:
    admin = admin_pb2_grpc.AdminServiceStub(channel)
    reply = await admin.GetTenant(admin_pb2.GetTenantRequest(name=tenant), metadata=server.admin_metadata())
    return reply.job_count


async def get(scheduler, key: str, job_id: str) -> job_pb2.Job:
    return (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job_id), metadata=bearer(key))).job


async def test_each_update_item_is_answered_as_update_job_alone(server) -> None:
    acme, other = await server.create_tenant("acme"), await server.create_tenant("other")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        a, b, c = await create(scheduler, acme, 3)
        (theirs,) = await create(scheduler, other, 1, "t")
        request = scheduler_pb2.BatchUpdateJobsRequest(items=[
            update(job_pb2.Job(id=a.id, version=1, name="renamed"), "name"),
            update(job_pb2.Job(id=a.id, version=1, name="lost"), "name"),  # the version the caller read: stale now
            update(job_pb2.Job(id=a.id, version=2, payload=b"p2"), "payload"),  # sees the first item
            update(job_pb2.Job(id=b.id, version=1, schedule=cron_job("61 * * * *").schedule), "schedule"),
            update(job_pb2.Job(id=theirs.id, version=1, name="pwned"), "name"),
            update(job_pb2.Job(id=b.id, name="no version"), "name"),
            update(job_pb2.Job(id=b.id, version=1), "id"),
            update(job_pb2.Job(id=b.id, version=1, name="report"), "name"),  # changes nothing
            update(job_pb2.Job(id=c.id, version=1, schedule=cron_job("0 9 * * *", "Asia/Tokyo").schedule), "schedule"),
            update(job_pb2.Job(id="no-such-job", version=1, name="x"), "name"),
        ])  # fmt: skip
        reply = await scheduler.BatchUpdateJobs(request, metadata=bearer(acme))
        results = list(reply.results)
        assert len(results) == 10
        assert results[0].job.job.name == "renamed" and results[0].job.job.version == 2
        assert results[1].error.code == code_pb2.FAILED_PRECONDITION and "stale" in results[1].error.message
        assert results[2].job.job.version == 3 and results[2].job.job.payload == b"p2"
        assert results[2].job.job.name == "renamed"
        assert results[3].error.code == code_pb2.INVALID_ARGUMENT
        assert "job.schedule.cron.expression" in status_violations(results[3].error)
        assert results[4].error.code == code_pb2.NOT_FOUND
        assert results[5].error.code == code_pb2.INVALID_ARGUMENT and "job.version" in status_violations(results[5].error)
        assert results[6].error.code == code_pb2.INVALID_ARGUMENT and "update_mask" in status_violations(results[6].error)
        assert results[7].job.job.version == 1, "an item that changes nothing makes no new version"
        assert results[8].job.job.schedule.cron.time_zone == "Asia/Tokyo" and results[8].job.job.version == 2
        assert results[9].error.code == code_pb2.NOT_FOUND
        assert (reply.updated_count, reply.failed_count) == (4, 6)

        stored = await get(scheduler, acme, a.id)
        assert (stored.name, stored.payload, stored.version) == ("renamed", b"p2", 3)
        assert (await get(scheduler, acme, b.id)).version == 1
        assert (await get(scheduler, acme, c.id)).next_run_at == results[8].job.job.next_run_at
        untouched = await get(scheduler, other, theirs.id)
        assert (untouched.name, untouched.version) == ("report", 1), "another tenant's job changed"

        # The single call answers the same for the same stale item.
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.UpdateJob(request.items[1], metadata=bearer(acme))
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_each_delete_item_is_answered_as_delete_job_alone(server) -> None:
    acme, other = await server.create_tenant("acme"), await server.create_tenant("other")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        a, b, c = await create(scheduler, acme, 3)
        (theirs,) = await create(scheduler, other, 1, "t")
        triggered = await scheduler.TriggerJob(
            scheduler_pb2.TriggerJobRequest(id=a.id, request_id="now"), metadata=bearer(acme)
        )
        theirs_triggered = await scheduler.TriggerJob(
            scheduler_pb2.TriggerJobRequest(id=theirs.id, request_id="now"), metadata=bearer(other)
        )
        reply = await scheduler.BatchDeleteJobs(
            scheduler_pb2.BatchDeleteJobsRequest(items=[
                delete(a.id),
                delete(theirs.id),
                delete(b.id, version=7),
                delete(""),
                delete(a.id),  # deleted by the first item
                delete(c.id, version=1),
                delete("has space"),
                delete(b.id, version=-1),
            ]),
            metadata=bearer(acme),
        )  # fmt: skip
        results = list(reply.results)
        assert results[0].deleted.canceled_executions == 1
        assert results[1].error.code == code_pb2.NOT_FOUND
        assert results[2].error.code == code_pb2.FAILED_PRECONDITION
        assert results[3].error.code == code_pb2.INVALID_ARGUMENT and "id" in status_violations(results[3].error)
        assert results[4].error.code == code_pb2.NOT_FOUND
        assert results[5].deleted.canceled_executions == 0
        assert results[6].error.code == code_pb2.INVALID_ARGUMENT and "id" in status_violations(results[6].error)
        assert results[7].error.code == code_pb2.INVALID_ARGUMENT and "version" in status_violations(results[7].error)
        assert (reply.deleted_count, reply.failed_count) == (2, 6)

        canceled = await scheduler.GetExecution(
            scheduler_pb2.GetExecutionRequest(id=triggered.execution.id), metadata=bearer(acme)
        )
        assert canceled.execution.status == job_pb2.EXECUTION_STATUS_CANCELED
        assert canceled.execution.dead_reason == "canceled: job deleted"
        assert (await get(scheduler, acme, b.id)).id == b.id
        assert (await get(scheduler, other, theirs.id)).id == theirs.id, "another tenant's job was deleted"
        kept = await scheduler.GetExecution(
            scheduler_pb2.GetExecutionRequest(id=theirs_triggered.execution.id), metadata=bearer(other)
        )
        assert kept.execution.status != job_pb2.EXECUTION_STATUS_CANCELED
        assert await job_count(server, channel) == 1
        assert await job_count(server, channel, "other") == 1


async def test_a_batch_delete_gives_the_quota_back(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        await admin.UpdateTenant(
            admin_pb2.UpdateTenantRequest(
                tenant=admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(max_jobs=50)),
                update_mask=field_mask_pb2.FieldMask(paths=["quotas"]),
            ),
            metadata=server.admin_metadata(),
        )  # fmt: skip
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        created = await create(scheduler, key, 50)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="full"),
                                      metadata=bearer(key))  # fmt: skip
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        reply = await scheduler.BatchDeleteJobs(
            scheduler_pb2.BatchDeleteJobsRequest(items=[delete(job.id) for job in created[:30]]), metadata=bearer(key)
        )
        assert reply.deleted_count == 30
        assert await job_count(server, channel) == 20
        again = await create(scheduler, key, 30, "again")
        assert len(again) == 30
        assert await job_count(server, channel) == 50


async def test_concurrent_overlapping_batches_end_each_job_in_one_state(server) -> None:
    """Four deletes and four updates race over overlapping sets of 120 jobs,
    each batch in its own order: no call fails, each job is deleted by
    exactly one item, and every job left was renamed by exactly one item."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        jobs = await create(scheduler, key, 120)
        rng = random.Random(7)
        doomed = jobs[:60]
        deletes = []
        for _ in range(4):
            chosen = rng.sample(doomed, 40)
            deletes.append(scheduler_pb2.BatchDeleteJobsRequest(items=[delete(job.id) for job in chosen]))
        updates = []
        for n in range(4):
            chosen = rng.sample(jobs, 80)
            updates.append(scheduler_pb2.BatchUpdateJobsRequest(items=[
                update(job_pb2.Job(id=job.id, version=1, name=f"u{n}", payload=b"x" * 100), "name", "payload")
                for job in chosen
            ]))  # fmt: skip
        replies = await asyncio.gather(
            *(scheduler.BatchDeleteJobs(request, metadata=bearer(key)) for request in deletes),
            *(scheduler.BatchUpdateJobs(request, metadata=bearer(key)) for request in updates),
        )
        deleted: dict[str, int] = {}
        for request, reply in zip(deletes, replies[:4]):
            for item, result in zip(request.items, reply.results):
                if result.HasField("deleted"):
                    deleted[item.id] = deleted.get(item.id, 0) + 1
                else:
                    assert result.error.code == code_pb2.NOT_FOUND, result
        covered = {item.id for request in deletes for item in request.items}
        assert deleted == {job_id: 1 for job_id in covered}
        renamed: dict[str, list[str]] = {}
        for request, reply in zip(updates, replies[4:]):
            for item, result in zip(request.items, reply.results):
                if result.HasField("job"):
                    renamed.setdefault(item.job.id, []).append(result.job.job.name)
                else:
                    assert result.error.code in (code_pb2.NOT_FOUND, code_pb2.FAILED_PRECONDITION), result
        left = {job.id for job in jobs} - covered
        assert await job_count(server, channel) == len(left)
        for job_id in left:
            stored = await get(scheduler, key, job_id)
            names = renamed.get(job_id, [])
            assert len(names) <= 1, f"{job_id} renamed twice from version 1"
            assert stored.version == 1 + len(names)
            assert stored.name == (names[0] if names else "report")


async def test_a_batch_that_is_not_one_is_refused_whole(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        (job,) = await create(scheduler, key, 1)
        for size in (0, 1001):
            calls = (
                scheduler.BatchDeleteJobs(
                    scheduler_pb2.BatchDeleteJobsRequest(items=[delete(job.id)] * size), metadata=bearer(key)
                ),
                scheduler.BatchUpdateJobs(
                    scheduler_pb2.BatchUpdateJobsRequest(
                        items=[update(job_pb2.Job(id=job.id, version=1, name="x"), "name")] * size
                    ),
                    metadata=bearer(key),
                ),
            )
            for call in calls:
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    await call
                assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "items" in violations(error.value)
        for call in (
            scheduler.BatchDeleteJobs(scheduler_pb2.BatchDeleteJobsRequest(items=[delete(job.id)])),
            scheduler.BatchUpdateJobs(scheduler_pb2.BatchUpdateJobsRequest(items=[update(job)])),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await call
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # A NUL byte in any item refuses the call, naming it: nothing deleted.
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.BatchDeleteJobs(
                scheduler_pb2.BatchDeleteJobsRequest(items=[delete(job.id), delete("x\x00y")]), metadata=bearer(key)
            )
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert any("id" in field for field in violations(error.value))
        # A mask of a thousand long paths is the item's INVALID_ARGUMENT, not the call's.
        huge = update(job_pb2.Job(id=job.id, version=1, name="x"), *[f"name{i}" * 50 for i in range(1000)])
        reply = await scheduler.BatchUpdateJobs(
            scheduler_pb2.BatchUpdateJobsRequest(items=[huge, update(job_pb2.Job(id=job.id, version=1, name="ok"), "name")]),
            metadata=bearer(key),
        )
        assert reply.results[0].error.code == code_pb2.INVALID_ARGUMENT
        assert "update_mask" in status_violations(reply.results[0].error)
        assert reply.results[1].job.job.name == "ok"
        stored = await get(scheduler, key, job.id)
        assert (stored.name, stored.version) == ("ok", 2)


async def test_the_readme_grpcurl_calls_answer_per_item(server) -> None:
    """BatchUpdateJobs and BatchDeleteJobs as README.md shows them (JSON, a
    mask as a string, versions as strings), through reflection."""
    import json

    from .test_server_api import grpcurl

    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        a, b = await create(scheduler, key, 2)
    auth = f"authorization: Bearer {key}"
    updated = await grpcurl("-plaintext", "-H", auth, "-d", json.dumps({"items": [
        {"job": {"id": a.id, "version": "1", "labels": {"team": "ops"}}, "updateMask": {"paths": ["labels"]}},
        {"job": {"id": b.id, "version": "4", "labels": {"team": "ops"}}, "updateMask": {"paths": ["labels"]}},
    ]}), server.address, "tickwheel.v1.SchedulerService/BatchUpdateJobs")  # fmt: skip
    assert updated.returncode == 0, updated.stderr
    answer = json.loads(updated.stdout)
    assert answer["results"][0]["job"]["job"]["labels"] == {"team": "ops"}
    assert answer["results"][1]["error"]["code"] == code_pb2.FAILED_PRECONDITION
    assert (answer["updatedCount"], answer["failedCount"]) == (1, 1)
    deleted = await grpcurl("-plaintext", "-H", auth, "-d", json.dumps({"items": [
        {"id": a.id}, {"id": b.id, "version": "5"},
    ]}), server.address, "tickwheel.v1.SchedulerService/BatchDeleteJobs")  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    answer = json.loads(deleted.stdout)
    assert "deleted" in answer["results"][0] and answer["results"][1]["error"]["code"] == code_pb2.FAILED_PRECONDITION


async def test_pause_and_resume_in_batches_answer_each_item_as_alone(server) -> None:
    """An operator pausing a team's jobs during an incident, then resuming
    them: held executions, repeats in one call, another tenant's ids and bad
    fields answered per item."""
    acme, other = await server.create_tenant("acme"), await server.create_tenant("other")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        a, b, c = await create(scheduler, acme, 3)
        (theirs,) = await create(scheduler, other, 1, "t")
        triggered = await scheduler.TriggerJob(
            scheduler_pb2.TriggerJobRequest(id=a.id, request_id="now"), metadata=bearer(acme)
        )
        pause = scheduler_pb2.PauseJobRequest
        reply = await scheduler.BatchPauseJobs(scheduler_pb2.BatchPauseJobsRequest(items=[
            pause(id=a.id, reason="incident 42"), pause(id=b.id), pause(id=a.id, reason="again"),
            pause(id=theirs.id), pause(id=""), pause(id=c.id, reason="x" * 2000),
        ]), metadata=bearer(acme))  # fmt: skip
        results = list(reply.results)
        assert results[0].job.held_executions == 1 and results[0].job.job.state == job_pb2.JOB_STATE_PAUSED
        assert results[0].job.job.pause_reason == "incident 42" and results[0].job.job.version == 2
        assert results[1].job.job.state == job_pb2.JOB_STATE_PAUSED
        assert results[2].job.held_executions == 0 and results[2].job.job.pause_reason == "incident 42"
        assert results[3].error.code == code_pb2.NOT_FOUND
        assert results[4].error.code == code_pb2.INVALID_ARGUMENT and "id" in status_violations(results[4].error)
        assert results[5].error.code == code_pb2.INVALID_ARGUMENT and "reason" in status_violations(results[5].error)
        assert (reply.paused_count, reply.failed_count) == (3, 3)
        held = await scheduler.GetExecution(
            scheduler_pb2.GetExecutionRequest(id=triggered.execution.id), metadata=bearer(acme)
        )
        assert held.execution.status == job_pb2.EXECUTION_STATUS_WAITING
        assert (await get(scheduler, acme, c.id)).state == job_pb2.JOB_STATE_ACTIVE
        assert (await get(scheduler, other, theirs.id)).state == job_pb2.JOB_STATE_ACTIVE, "another tenant's job paused"

        resume = scheduler_pb2.ResumeJobRequest
        reply = await scheduler.BatchResumeJobs(scheduler_pb2.BatchResumeJobsRequest(items=[
            resume(id=a.id), resume(id=b.id), resume(id=a.id), resume(id=theirs.id), resume(id=c.id),
        ]), metadata=bearer(acme))  # fmt: skip
        results = list(reply.results)
        assert results[0].job.released_executions == 1 and results[0].job.job.state == job_pb2.JOB_STATE_ACTIVE
        assert results[0].job.job.version == 3 and results[0].job.job.HasField("next_run_at")
        assert results[1].job.job.state == job_pb2.JOB_STATE_ACTIVE
        assert results[2].job.released_executions == 0 and results[2].job.job.version == 3
        assert results[3].error.code == code_pb2.NOT_FOUND
        assert results[4].job.job.version == 1, "resuming an active job changes nothing"
        assert (reply.resumed_count, reply.failed_count) == (4, 1)
        released = await scheduler.GetExecution(
            scheduler_pb2.GetExecutionRequest(id=triggered.execution.id), metadata=bearer(acme)
        )
        assert released.execution.status == job_pb2.EXECUTION_STATUS_SCHEDULED


async def test_concurrent_overlapping_pauses_pause_each_job_once(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        jobs = await create(scheduler, key, 90)
        rng = random.Random(3)
        requests = [
            scheduler_pb2.BatchPauseJobsRequest(
                items=[scheduler_pb2.PauseJobRequest(id=job.id, reason=f"p{n}") for job in rng.sample(jobs, 60)]
            )
            for n in range(4)
        ]
        replies = await asyncio.gather(*(scheduler.BatchPauseJobs(r, metadata=bearer(key)) for r in requests))
        assert all(reply.failed_count == 0 for reply in replies)
        paused_by: dict[str, set[str]] = {}
        for reply in replies:
            for result in reply.results:
                paused_by.setdefault(result.job.job.id, set()).add(result.job.job.pause_reason)
        for job_id, reasons in paused_by.items():
            stored = await get(scheduler, key, job_id)
            assert stored.version == 2 and reasons == {stored.pause_reason}, (job_id, reasons)
