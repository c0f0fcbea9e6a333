"""PauseTenant and ResumeTenant through the real server and the `tickwheel
admin tenant pause/resume` command, with a real worker, on the embedded
stores and on PostgreSQL + etcd: the state in GetTenant and ListTenants, a
paused tenant's due occurrence recorded as a ``tenant_paused`` skip range
with no execution while another tenant's runs, and new work claimed again
after the resume."""

from __future__ import annotations

import asyncio
import subprocess
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer, violations
from tests.support.polling import eventually
from tests.support.server import TICKWHEEL, Running
from tests.support.workers import running_worker
from tickwheel_worker import HandlerRegistry


class World:
    def __init__(self, running: Running, channel: grpc.aio.Channel, keys: dict[str, str], calls: list[str]) -> None:
        self.running = running
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        self.keys = keys
        self.calls = calls
        """Execution ids the worker ran."""

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [TICKWHEEL, "--address", self.running.address, "--admin-token", self.running.admin_token, *args],
            capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    async def tenant(self, name: str) -> admin_pb2.Tenant:
        reply = await self.admin.GetTenant(admin_pb2.GetTenantRequest(name=name), metadata=self.running.admin_metadata())
        return reply.tenant

    async def create(self, tenant: str, request_id: str, *, cron: str = "", once_at: datetime | None = None) -> job_pb2.Job:
        job = job_pb2.Job(name="paused", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="ledger")))
        if cron:
            job.schedule.cron.expression = cron
            job.schedule.cron.time_zone = "UTC"
        else:
            job.schedule.once_at.FromDatetime(once_at)
        job.jitter.exact = True
        reply = await self.scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=job, request_id=request_id), metadata=bearer(self.keys[tenant])
        )
        return reply.job

    async def history(self, tenant: str, job_id: str) -> scheduler_pb2.ListExecutionsResponse:
        return await self.scheduler.ListExecutions(
            scheduler_pb2.ListExecutionsRequest(job_id=job_id), metadata=bearer(self.keys[tenant])
        )

    async def status(self, tenant: str, execution_id: str) -> int:
        reply = await self.scheduler.GetExecution(
            scheduler_pb2.GetExecutionRequest(id=execution_id), metadata=bearer(self.keys[tenant])
        )
        return reply.execution.status


@pytest.fixture
async def world(server):
    keys = {name: await server.create_tenant(name) for name in ("acme", "globex")}
    credential = await server.issue_worker_credential(["acme", "globex"], handlers=["ledger"])
    calls: list[str] = []

    async def ledger(ctx) -> bytes:
        calls.append(ctx.execution_id)
        return b"ok"

    registry = HandlerRegistry()
    registry.register("ledger", ledger)
    async with (
        grpc.aio.insecure_channel(server.address) as channel,
        running_worker(server.address, credential, registry, worker_id="w1", http=False, slots=8),
    ):
        yield World(server, channel, keys, calls)


async def test_pause_and_resume_show_in_get_and_list_and_refuse_bad_input(world) -> None:
    metadata = world.running.admin_metadata()
    printed = await asyncio.to_thread(world.cli, "admin", "tenant", "pause", "acme", "--reason", "invoice overdue")
    assert printed.strip() == "paused tenant acme (invoice overdue)"
    tenant = await world.tenant("acme")
    assert (tenant.state, tenant.pause_reason) == (admin_pb2.TENANT_STATE_PAUSED, "invoice overdue")
    again = await world.admin.PauseTenant(admin_pb2.PauseTenantRequest(name="acme", reason="invoice overdue"),
                                          metadata=metadata)  # fmt: skip
    assert again.tenant == tenant, "pausing a paused tenant with the same reason changes nothing"
    listed = await world.admin.ListTenants(admin_pb2.ListTenantsRequest(), metadata=metadata)
    assert {t.name: t.state for t in listed.tenants} == {
        "acme": admin_pb2.TENANT_STATE_PAUSED, "globex": admin_pb2.TENANT_STATE_ACTIVE,
    }

    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await world.admin.PauseTenant(admin_pb2.PauseTenantRequest(), metadata=metadata)
    assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT and list(violations(missing.value)) == ["name"]
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await world.admin.ResumeTenant(admin_pb2.ResumeTenantRequest(name="nobody"), metadata=metadata)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as tenant_key:
        await world.admin.PauseTenant(admin_pb2.PauseTenantRequest(name="globex"), metadata=bearer(world.keys["globex"]))
    assert tenant_key.value.code() == grpc.StatusCode.PERMISSION_DENIED

    printed = await asyncio.to_thread(world.cli, "admin", "tenant", "resume", "acme")
    assert printed.strip() == "resumed tenant acme"
    tenant = await world.tenant("acme")
    assert (tenant.state, tenant.pause_reason) == (admin_pb2.TENANT_STATE_ACTIVE, "")


async def test_a_paused_tenants_due_occurrence_is_skipped_while_others_run_and_new_work_runs_after_resume(world) -> None:
    await world.admin.PauseTenant(admin_pb2.PauseTenantRequest(name="acme"), metadata=world.running.admin_metadata())
    paused = await world.create("acme", "minutely", cron="* * * * *")
    active = await world.create("globex", "minutely", cron="* * * * *")

    async def skipped() -> execution_pb2.SkipRange | None:
        history = await world.history("acme", paused.id)
        assert list(history.executions) == [], "a paused tenant's occurrence became an execution"
        return history.skips[0] if history.skips else None

    # The claim takes every occurrence within its 60 s look-ahead: for acme
    # as one skip range (the first claim takes the next minute's; from that
    # minute on the claim extends the range by the following one), for
    # globex as executions.
    skip = await eventually(skipped, "acme's occurrence recorded as skipped")
    assert skip.reason == execution_pb2.SKIP_REASON_TENANT_PAUSED and skip.count >= 1
    assert skip.from_at == paused.next_run_at
    _assert_minutely(skip)
    await eventually(lambda: _has_execution(world, active.id), "globex's occurrence claimed")
    assert list((await world.history("globex", active.id)).skips) == []
    after = await world.scheduler.GetJob(scheduler_pb2.GetJobRequest(id=paused.id), metadata=bearer(world.keys["acme"]))
    assert after.job.next_run_at.ToDatetime() > skip.to_at.ToDatetime(), "the cursor moved past the skipped run"

    await world.admin.ResumeTenant(admin_pb2.ResumeTenantRequest(name="acme"), metadata=world.running.admin_metadata())
    resumed_at = datetime.now(timezone.utc)
    once = await world.create("acme", "once", once_at=datetime.now(timezone.utc) + timedelta(seconds=1))
    executed = f"{once.id}:"
    await eventually(lambda: _ran(world, executed), "acme's one-off ran after the resume")
    (final,) = (await world.history("acme", paused.id)).skips
    _assert_minutely(final)
    assert final.from_at == skip.from_at and final.count >= skip.count
    reach = resumed_at + timedelta(seconds=60)
    assert final.to_at.ToDatetime(tzinfo=timezone.utc) <= reach, "the paused range is not extended past one look-ahead after the resume"


def _assert_minutely(skip: execution_pb2.SkipRange) -> None:
    """A minutely job's range: ``count`` consecutive minutes from ``from_at``."""
    span = skip.to_at.ToDatetime() - skip.from_at.ToDatetime()
    assert span == timedelta(minutes=skip.count - 1), (skip.from_at, skip.to_at, skip.count)

async def test_an_execution_created_before_the_pause_waits_for_the_resume(world) -> None:
    metadata = world.running.admin_metadata()
    job = await world.create("acme", "yearly", cron="0 0 1 1 *")
    other = await world.create("globex", "yearly", cron="0 0 1 1 *")
    await world.admin.PauseTenant(admin_pb2.PauseTenantRequest(name="acme"), metadata=metadata)
    held = await world.scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job.id, request_id="held"),
                                            metadata=bearer(world.keys["acme"]))  # fmt: skip
    ran = await world.scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=other.id, request_id="runs"),
                                           metadata=bearer(world.keys["globex"]))  # fmt: skip
    await eventually(lambda: _ran(world, ran.execution.id), "globex's trigger ran")
    gateway = world.running.server.gateway
    rounds = gateway.rounds_run

    async def three_more_rounds() -> bool:
        return gateway.rounds_run > rounds + 2

    await eventually(three_more_rounds, "three more hand-out rounds")
    assert await world.status("acme", held.execution.id) == job_pb2.EXECUTION_STATUS_SCHEDULED
    await world.admin.ResumeTenant(admin_pb2.ResumeTenantRequest(name="acme"), metadata=metadata)
    await eventually(lambda: _ran(world, held.execution.id), "acme's trigger ran after the resume")


async def _has_execution(world: World, job_id: str) -> bool:
    return bool((await world.history("globex", job_id)).executions)


async def _ran(world: World, prefix: str) -> bool:
    return any(call.startswith(prefix) for call in world.calls)
