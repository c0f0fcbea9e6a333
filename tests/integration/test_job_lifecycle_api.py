"""UpdateJob, PauseJob, ResumeJob, DeleteJob and the history RPCs through
the real gRPC server, on the embedded stores and on PostgreSQL + etcd.

Jobs here fire once a year, so a dispatcher running in the same server never
claims them during a test: what is checked is the API's own effect.
"""

from __future__ import annotations

from datetime import datetime, timezone

import grpc
import pytest
from google.protobuf import field_mask_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer, violations


@pytest.fixture
async def client(server):
    """(scheduler stub, acme's metadata, globex's metadata, admin stub)."""
    acme, globex = await server.create_tenant("acme"), await server.create_tenant("globex")
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield (
            scheduler_pb2_grpc.SchedulerServiceStub(channel), bearer(acme), bearer(globex),
            admin_pb2_grpc.AdminServiceStub(channel),
        )


def yearly(expression: str = "0 9 1 1 *") -> job_pb2.Job:
    return job_pb2.Job(
        name="new-year",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone="Europe/London")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        payload=b"v1",
    )


async def create(scheduler, meta, request_id: str = "create-1") -> job_pb2.Job:
    request = scheduler_pb2.CreateJobRequest(job=yearly(), request_id=request_id)
    return (await scheduler.CreateJob(request, metadata=meta)).job


async def rpc_error(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call
    return error.value


async def test_update_job_recomputes_and_refuses_a_stale_version(client) -> None:
    scheduler, acme, _, _ = client
    job = await create(scheduler, acme)
    change = job_pb2.Job(id=job.id, version=job.version, payload=b"v2", name="ignored: not in the mask")
    change.schedule.cron.expression, change.schedule.cron.time_zone = "30 6 2 2 *", "Asia/Tokyo"
    updated = (await scheduler.UpdateJob(
        scheduler_pb2.UpdateJobRequest(job=change, update_mask=field_mask_pb2.FieldMask(paths=["schedule", "payload"])),
        metadata=acme,
    )).job
    assert (updated.version, updated.payload, updated.name) == (2, b"v2", "new-year")
    assert updated.schedule.cron.expression == "30 6 2 2 *" and updated.retry_policy.max_attempts == 5
    next_run = updated.next_run_at.ToDatetime(tzinfo=timezone.utc)
    assert (next_run.month, next_run.day, next_run.hour, next_run.minute) == (2, 1, 21, 30)  # 06:30 JST, 2 Feb
    assert next_run > datetime.now(timezone.utc)

    stale = await rpc_error(scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=change), metadata=acme))
    assert stale.code() == grpc.StatusCode.FAILED_PRECONDITION
    got = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=acme)).job
    assert (got.version, got.payload) == (2, b"v2")

    # An empty mask replaces every mutable field: unset ones fall back to their defaults.
    full = yearly("0 10 1 1 *")
    full.id, full.version = job.id, 2
    replaced = (await scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=full), metadata=acme)).job
    assert (replaced.version, replaced.schedule.cron.expression, replaced.payload) == (3, "0 10 1 1 *", b"v1")


async def test_a_path_into_a_message_changes_that_field_alone(client) -> None:
    """UpdateJob's mask reaches into a message: `retry_policy.max_attempts`
    keeps the stored backoffs, `schedule.cron.expression` the time zone
    (not UpdateTenant's old `quotas` shape, where one value reset its
    siblings); the whole message's path still replaces it."""
    scheduler, acme, _, _ = client
    first = yearly()
    first.retry_policy.max_attempts = 3
    first.retry_policy.initial_backoff.FromSeconds(2)
    first.retry_policy.max_backoff.FromSeconds(60)
    job = (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=first, request_id="sub"), metadata=acme)).job
    patch = job_pb2.Job(id=job.id, version=job.version)
    patch.retry_policy.max_attempts = 7
    patch.schedule.cron.expression = "0 9 2 1 *"
    mask = field_mask_pb2.FieldMask(paths=["retry_policy.max_attempts", "schedule.cron.expression"])
    updated = (await scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=patch, update_mask=mask),
                                         metadata=acme)).job  # fmt: skip
    assert updated.retry_policy.max_attempts == 7
    assert (updated.retry_policy.initial_backoff.seconds, updated.retry_policy.max_backoff.seconds) == (2, 60)
    assert (updated.schedule.cron.expression, updated.schedule.cron.time_zone) == ("0 9 2 1 *", "Europe/London")
    patch.version = updated.version
    whole = field_mask_pb2.FieldMask(paths=["retry_policy"])
    replaced = (await scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=patch, update_mask=whole),
                                          metadata=acme)).job  # fmt: skip
    assert replaced.retry_policy.max_attempts == 7 and replaced.retry_policy.initial_backoff.seconds != 2


async def test_a_path_under_a_parent_the_patch_leaves_unset_clears_the_field(client) -> None:
    """A mask path whose parent the patch leaves unset clears the field, as
    an unset field at the path does: `schedule.cron.time_zone` and
    `retry_policy.max_attempts` with no `schedule` and no `retry_policy` in
    the patch put the zone and the attempts back to their defaults (they
    were left as stored, and the call answered as if it had changed them).
    The siblings stay; a stored one-off with a cron path has nothing to clear."""
    scheduler, acme, _, _ = client
    first = yearly()
    first.retry_policy.max_attempts = 3
    first.retry_policy.initial_backoff.FromSeconds(2)
    job = (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=first, request_id="unset-parent"),
                                     metadata=acme)).job  # fmt: skip
    mask = field_mask_pb2.FieldMask(paths=["schedule.cron.time_zone", "retry_policy.max_attempts"])
    patch = job_pb2.Job(id=job.id, version=job.version)
    updated = (await scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=patch, update_mask=mask),
                                         metadata=acme)).job  # fmt: skip
    assert updated.version == job.version + 1
    assert (updated.schedule.cron.expression, updated.schedule.cron.time_zone) == ("0 9 1 1 *", "")
    assert updated.retry_policy.max_attempts != 3 and updated.retry_policy.initial_backoff.seconds == 2
    stored = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=acme)).job
    assert stored.schedule.cron.time_zone == "" and stored.retry_policy.max_attempts == updated.retry_policy.max_attempts


async def test_malformed_updates_are_invalid_argument_naming_the_field(client) -> None:
    scheduler, acme, _, _ = client
    job = await create(scheduler, acme)
    cases = {
        "update_mask": (job_pb2.Job(id=job.id, version=1), ["version"]),
        "update_mask ": (job_pb2.Job(id=job.id, version=1), ["no_such_field"]),
        "job.version": (job_pb2.Job(id=job.id), ["name"]),
        "job.id": (job_pb2.Job(version=1), ["name"]),
        "job.name": (job_pb2.Job(id=job.id, version=1), ["name"]),
        "job.schedule.cron.expression": (
            job_pb2.Job(id=job.id, version=1, schedule=yearly("61 * * * *").schedule), ["schedule"],
        ),
    }
    for field, (patch, paths) in cases.items():
        request = scheduler_pb2.UpdateJobRequest(job=patch, update_mask=field_mask_pb2.FieldMask(paths=paths))
        error = await rpc_error(scheduler.UpdateJob(request, metadata=acme))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert field.strip() in violations(error), (field, violations(error))
    assert (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=acme)).job == job


async def test_pause_and_resume_round_trip(client) -> None:
    scheduler, acme, _, _ = client
    job = await create(scheduler, acme)
    paused = await scheduler.PauseJob(scheduler_pb2.PauseJobRequest(id=job.id, reason="audit"), metadata=acme)
    assert (paused.job.state, paused.job.pause_reason, paused.job.version) == (job_pb2.JOB_STATE_PAUSED, "audit", 2)
    assert (paused.canceled_executions, paused.held_executions) == (0, 0) and not paused.job.HasField("next_run_at")
    got = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=acme)
    assert got.job.state == job_pb2.JOB_STATE_PAUSED and list(got.next_runs) == []
    again = await scheduler.PauseJob(scheduler_pb2.PauseJobRequest(id=job.id, reason="other"), metadata=acme)
    assert (again.job.version, again.job.pause_reason) == (2, "audit")

    resumed = await scheduler.ResumeJob(scheduler_pb2.ResumeJobRequest(id=job.id), metadata=acme)
    assert (resumed.job.state, resumed.job.version, resumed.job.pause_reason) == (job_pb2.JOB_STATE_ACTIVE, 3, "")
    assert resumed.job.next_run_at == job.next_run_at  # still in the future: nothing was skipped
    assert not resumed.HasField("skipped") and resumed.released_executions == 0
    still = await scheduler.ResumeJob(scheduler_pb2.ResumeJobRequest(id=job.id), metadata=acme)
    assert still.job.version == 3
    history = await scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job.id), metadata=acme)
    assert list(history.skips) == []


async def test_delete_then_get_is_not_found_and_the_count_drops(server, client) -> None:
    scheduler, acme, _, admin = client
    job = await create(scheduler, acme)
    stale = await rpc_error(scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=job.id, version=7), metadata=acme))
    assert stale.code() == grpc.StatusCode.FAILED_PRECONDITION
    deleted = await scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=job.id, version=1), metadata=acme)
    assert deleted.canceled_executions == 0
    for call in (
        scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=acme),
        scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=job.id), metadata=acme),
        scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job.id), metadata=acme),  # no history kept
    ):
        assert (await rpc_error(call)).code() == grpc.StatusCode.NOT_FOUND
    tenant = await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=server.admin_metadata())
    assert tenant.job_count == 0


async def test_history_of_a_new_job_and_another_tenants_view(client) -> None:
    scheduler, acme, globex, _ = client
    job = await create(scheduler, acme)
    request = scheduler_pb2.ListExecutionsRequest(job_id=job.id, page_size=10)
    empty = await scheduler.ListExecutions(request, metadata=acme)
    assert (list(empty.executions), list(empty.skips), empty.next_page_token) == ([], [], "")
    bad = {
        "page_token": scheduler_pb2.ListExecutionsRequest(job_id=job.id, page_token="nope"),
        "statuses": scheduler_pb2.ListExecutionsRequest(job_id=job.id, statuses=[0]),
        "job_id": scheduler_pb2.ListExecutionsRequest(),
    }
    for field, request in bad.items():
        error = await rpc_error(scheduler.ListExecutions(request, metadata=acme))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and field in violations(error), field
    unknown = f"{job.id}:2028-01-01T09:00:00Z"
    for call in (
        scheduler.GetExecution(scheduler_pb2.GetExecutionRequest(id=unknown), metadata=acme),
        scheduler.CancelExecution(scheduler_pb2.CancelExecutionRequest(id=unknown), metadata=acme),
        scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job.id), metadata=globex),
        scheduler.PauseJob(scheduler_pb2.PauseJobRequest(id=job.id), metadata=globex),
        scheduler.ResumeJob(scheduler_pb2.ResumeJobRequest(id=job.id), metadata=globex),
        scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=job.id), metadata=globex),
        scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=job_pb2.Job(id=job.id, version=1, name="x"),
                                                           update_mask=field_mask_pb2.FieldMask(paths=["name"])),
                            metadata=globex),
    ):
        assert (await rpc_error(call)).code() == grpc.StatusCode.NOT_FOUND
    assert (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=acme)).job == job
