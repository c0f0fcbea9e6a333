"""BatchCreateJobs against the real gRPC server, on the embedded stores and
on PostgreSQL + etcd: per-item answers, idempotency per request id, the
quota counted exactly, and hostile batches refused whole with nothing
written."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import code_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from .test_server_api import bearer, cron_job, status_violations, violations


def item(request_id: str, job: job_pb2.Job | None = None) -> scheduler_pb2.CreateJobRequest:
    return scheduler_pb2.CreateJobRequest(job=job or cron_job(), request_id=request_id)


async def job_count(server, channel) -> int:
    admin = admin_pb2_grpc.AdminServiceStub(channel)
    reply = await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=server.admin_metadata())
    return reply.job_count


async def test_each_item_gets_its_own_answer_and_a_repeat_writes_nothing(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        earlier = await scheduler.CreateJob(item("seen"), metadata=bearer(key))
        request = scheduler_pb2.BatchCreateJobsRequest(items=[
            item("a"),
            item("bad-cron", cron_job("61 * * * *")),
            item("seen"),
            item("bad zone", cron_job("0 9 * * *", "Mars/Olympus")),  # and a request id with a space
            item("a"),
            item("b", job_pb2.Job(name="no target", schedule=cron_job().schedule)),
            item("c"),
        ])  # fmt: skip
        reply = await scheduler.BatchCreateJobs(request, metadata=bearer(key))
        results = list(reply.results)
        assert len(results) == 7
        assert results[0].job.created and results[0].job.job.name == "report"
        assert results[1].error.code == code_pb2.INVALID_ARGUMENT
        assert "job.schedule.cron.expression" in status_violations(results[1].error)
        assert not results[2].job.created and results[2].job.job.id == earlier.job.id
        assert results[3].error.code == code_pb2.INVALID_ARGUMENT and "request_id" in status_violations(results[3].error)
        assert not results[4].job.created and results[4].job.job.id == results[0].job.job.id
        assert results[5].error.code == code_pb2.INVALID_ARGUMENT and "job.target" in status_violations(results[5].error)
        assert results[6].job.created
        assert (reply.created_count, reply.existing_count, reply.failed_count) == (2, 2, 3)
        assert await job_count(server, channel) == 3

        again = await scheduler.BatchCreateJobs(request, metadata=bearer(key))
        assert (again.created_count, again.existing_count, again.failed_count) == (0, 4, 3)
        assert [r.job.job.id for r in again.results if r.HasField("job")] == [
            r.job.job.id for r in results if r.HasField("job")
        ]
        assert await job_count(server, channel) == 3, "a repeated batch writes nothing"


async def test_a_batch_that_is_not_one_is_refused_whole(server) -> None:
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for size in (0, 1001):
            request = scheduler_pb2.BatchCreateJobsRequest(items=[item(f"r{i}") for i in range(size)])
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await scheduler.BatchCreateJobs(request, metadata=bearer(key))
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "items" in violations(error.value)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=[item("x")]))
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert await job_count(server, channel) == 0


async def test_a_full_batch_counts_against_max_jobs_exactly(server) -> None:
    """Two clients race batches of 1 000 at a tenant with room for 1 500:
    exactly 1 500 are created, every other item says max_jobs."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        await admin.UpdateTenant(
            admin_pb2.UpdateTenantRequest(
                tenant=admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(max_jobs=1500)),
                update_mask=field_mask_pb2.FieldMask(paths=["quotas"]),
            ),
            metadata=server.admin_metadata(),
        )  # fmt: skip
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        replies = await asyncio.gather(*(
            scheduler.BatchCreateJobs(
                scheduler_pb2.BatchCreateJobsRequest(items=[item(f"c{c}-{i}") for i in range(1000)]),
                metadata=bearer(key),
            )
            for c in range(2)
        ))  # fmt: skip
        assert sum(r.created_count for r in replies) == 1500
        refused = [r.error for reply in replies for r in reply.results if r.HasField("error")]
        assert len(refused) == 500
        assert all(e.code == code_pb2.RESOURCE_EXHAUSTED and "max_jobs" in e.message for e in refused)
        assert await job_count(server, channel) == 1500
        listed, token = 0, ""
        while True:
            page = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=500, page_token=token),
                                            metadata=bearer(key))  # fmt: skip
            listed += len(page.jobs)
            token = page.next_page_token
            if not token:
                break
        assert listed == 1500


async def test_a_batch_over_the_message_limit_is_refused_and_writes_nothing(server) -> None:
    """1 000 items of 5 KiB payloads (5 MB) pass every item's quota but not
    the server's 4 MiB message limit: refused whole, nothing written."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address, options=[("grpc.max_send_message_length", 16 << 20)]) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job = cron_job()
        job.payload = b"x" * 5000
        request = scheduler_pb2.BatchCreateJobsRequest(items=[item(f"big-{i}", job) for i in range(1000)])
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.BatchCreateJobs(request, metadata=bearer(key))
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await job_count(server, channel) == 0


async def test_each_answered_job_is_what_get_job_reads_back(server) -> None:
    """The answer of a created item is built from its definition, not read
    back from the store: it must be exactly what GetJob then answers, for
    jobs that share a definition and for jobs that do not."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        once = job_pb2.Job(name="once", target=cron_job().target, payload=b"\x00\x01")
        once.schedule.once_at.FromSeconds(4_102_444_800)  # 2100-01-01
        once.jitter.window.FromSeconds(30)
        hooked = cron_job("H 3 * * *", "America/New_York")
        hooked.target.CopyFrom(job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/x", headers={"X-A": "1"})))
        hooked.labels["team"] = "ops"
        items = [item(f"same-{i}", job_pb2.Job(name=f"same {i}", schedule=cron_job().schedule, target=cron_job().target,
                                                payload=b"p" * i))
                 for i in range(5)] + [item("once", once), item("hooked", hooked), item("same-0")]  # fmt: skip
        reply = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=items), metadata=bearer(key))
        assert (reply.created_count, reply.existing_count, reply.failed_count) == (7, 1, 0)
        for result in reply.results:
            stored = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=result.job.job.id), metadata=bearer(key))
            assert result.job.job == stored.job
        assert reply.results[1].job.job.payload == b"p"
        assert reply.results[6].job.job.labels["team"] == "ops"
        assert reply.results[7].job.job == reply.results[0].job.job


async def test_hostile_items_among_good_ones_are_refused_alone(server) -> None:
    """Items of one shape (each later one from the first one's template):
    a name and a label value a thousand times too long, a payload over the
    tenant's quota, another tenant's request id, output-only fields naming
    another tenant and id. Each bad item is refused with its field and
    writes nothing; the good ones are created as the caller's own."""
    acme, globex = await server.create_tenant("acme"), await server.create_tenant("globex")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        theirs = await scheduler.CreateJob(item("shared"), metadata=bearer(globex))
        long_name = cron_job()
        long_name.name = "n" * 200_000
        long_label = cron_job()
        long_label.labels["team"] = "v" * 256_000
        big_payload = cron_job()
        big_payload.payload = b"x" * 1_048_577  # over the default max_payload_bytes (1 MiB)
        disguised = cron_job()
        disguised.id, disguised.tenant, disguised.version = theirs.job.id, "globex", 7
        no_name = cron_job()
        no_name.name = ""
        items = [item("good-0"), item("long-name", long_name), item("long-label", long_label),
                 item("big", big_payload), item("shared"), item("disguised", disguised), item("no-name", no_name),
                 item("good-1")]  # fmt: skip
        reply = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=items), metadata=bearer(acme))
        results = list(reply.results)
        assert (reply.created_count, reply.existing_count, reply.failed_count) == (4, 0, 4)
        assert results[1].error.code == code_pb2.INVALID_ARGUMENT and "job.name" in status_violations(results[1].error)
        assert results[2].error.code == code_pb2.INVALID_ARGUMENT
        assert {"job.labels[team]", "job"} <= set(status_violations(results[2].error))  # and the definition's size
        assert results[3].error.code == code_pb2.RESOURCE_EXHAUSTED and "max_payload_bytes" in results[3].error.message
        assert results[6].error.code == code_pb2.INVALID_ARGUMENT and "job.name" in status_violations(results[6].error)
        created = [results[i].job for i in (0, 4, 5, 7)]
        assert all(answer.created for answer in created)
        assert all(answer.job.tenant == "acme" and answer.job.version == 1 for answer in created)
        assert theirs.job.id not in {answer.job.id for answer in created}, "another tenant's request id is not ours"
        for answer in created:
            stored = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=answer.job.id), metadata=bearer(acme))
            assert stored.job == answer.job
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=theirs.job.id), metadata=bearer(acme))
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert await job_count(server, channel) == 4
