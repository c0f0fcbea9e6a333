"""A paused tenant in the dispatcher's claim, on SQLite and PostgreSQL: its
occurrences that come due become one ``tenant_paused`` skip range per job and
no execution; other tenants are claimed as usual; resuming writes nothing but
the tenant's row and the next claims continue at the next run not skipped."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from tickwheel.shared.ids import execution_id, new_job_id, to_us
from tickwheel_server.errors import NotFound
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.jobrecords import JobRecord, NewJob
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.partitions import PartitionStore
from tests.support.jobrows import job_row
from tickwheel_server.store.tables import executions, jobs, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_dispatch_claim import MINUTE, NOW, OWNED, PARTITIONS, cron_job


class World:
    def __init__(self, engine: sa.Engine, clock) -> None:
        self.engine = engine
        self.clock = clock
        self.tenants = TenantStore(engine, clock)
        self.jobs = JobStore(engine, clock, partition_count=PARTITIONS)
        self.dispatch = DispatchStore(engine, clock)

    async def create(self, tenant: str, cursor) -> JobRecord:
        job = cron_job()
        ident = new_job_id(self.clock.now())
        record, _ = await self.jobs.create(
            NewJob(
                id=ident, tenant=tenant, name=job.name, spec=job.SerializeToString(), time_zone="UTC",
                next_run_at=cursor, next_due_at=cursor, tzdata_version="2026a", payload_size=len(job.payload),
            ),
            f"req-{ident}",
        )
        return record

    def rows(self, table: sa.Table, job_id: str) -> list[sa.Row]:
        with self.engine.connect() as conn:
            if table is jobs:
                return [job_row(conn, job_id)]
            return conn.execute(sa.select(table).where(table.c.job_id == job_id)).all()


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    found = World(migrated_engine, clock)
    await found.tenants.create(Tenant(name="acme"))
    await found.tenants.create(Tenant(name="beta"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    return found


async def test_a_paused_tenants_occurrences_become_one_skip_range_and_resume_continues_at_the_next_run(world) -> None:
    paused = await world.create("acme", NOW + MINUTE)
    other = await world.create("beta", NOW + MINUTE)
    tenant = await world.tenants.pause("acme", "invoice overdue")
    assert (tenant.state, tenant.pause_reason) == ("paused", "invoice overdue")

    for k in range(3):  # three claims, a minute apart, while paused
        result = await world.dispatch.claim_due(OWNED, NOW + k * MINUTE)
        assert {e.id for e in result.executions} == {execution_id(other.id, NOW + (k + 1) * MINUTE)}
        assert result.skipped == 1 and result.jobs == 2
    assert world.rows(executions, paused.id) == [], "a paused tenant gets no execution"
    [skip] = world.rows(skips, paused.id)
    assert (skip.reason, skip.tenant, skip.from_at, skip.to_at, skip.count) == (
        "tenant_paused", "acme", to_us(NOW + MINUTE), to_us(NOW + 3 * MINUTE), 3,
    )
    [cursor] = world.rows(jobs, paused.id)
    assert (cursor.state, cursor.next_run_at, cursor.run_count) == ("active", to_us(NOW + 4 * MINUTE), 3)
    assert len(world.rows(executions, other.id)) == 3 and world.rows(skips, other.id) == []

    resumed = await world.tenants.resume("acme")
    assert (resumed.state, resumed.pause_reason) == ("active", "")
    [unchanged] = world.rows(jobs, paused.id)
    assert unchanged.next_run_at == cursor.next_run_at and unchanged.version == cursor.version, "resume wrote no job"
    result = await world.dispatch.claim_due(OWNED, NOW + 3 * MINUTE)
    assert {e.id for e in result.executions} == {
        execution_id(paused.id, NOW + 4 * MINUTE), execution_id(other.id, NOW + 4 * MINUTE),
    }
    assert result.skipped == 0
    [skip_after] = world.rows(skips, paused.id)
    assert skip_after.count == 3, "the paused span is closed, not extended by the resumed claim"


async def test_a_long_paused_backlog_is_skipped_in_bounded_claims_extending_one_range(world) -> None:
    job = await world.create("acme", NOW - 30 * MINUTE)
    await world.tenants.pause("acme")
    claims = 0
    while True:
        result = await world.dispatch.claim_due(OWNED, NOW, scan_limit=10)
        claims += 1
        if result.jobs == 0:
            break
    assert claims == 5, "32 occurrences (-30 min … +1 min, the look-ahead) at 10 a claim, then nothing due"
    assert world.rows(executions, job.id) == []
    [skip] = world.rows(skips, job.id)
    assert (skip.reason, skip.from_at, skip.to_at, skip.count) == (
        "tenant_paused", to_us(NOW - 30 * MINUTE), to_us(NOW + MINUTE), 32,
    )
    assert world.rows(jobs, job.id)[0].next_run_at == to_us(NOW + 2 * MINUTE)


async def test_executions_created_before_the_pause_are_kept_for_after_the_resume(world) -> None:
    job = await world.create("acme", NOW + MINUTE)
    await world.dispatch.claim_due(OWNED, NOW)  # NOW + 1 min created, active
    await world.tenants.pause("acme")
    await world.dispatch.claim_due(OWNED, NOW + MINUTE)  # NOW + 2 min skipped, paused
    [row] = world.rows(executions, job.id)
    assert (row.id, row.status) == (execution_id(job.id, NOW + MINUTE), "scheduled")
    [skip] = world.rows(skips, job.id)
    assert (skip.from_at, skip.count) == (to_us(NOW + 2 * MINUTE), 1)


async def test_pause_is_idempotent_and_resume_of_an_active_tenant_changes_nothing(world) -> None:
    first = await world.tenants.pause("acme", "maintenance")
    again = await world.tenants.pause("acme", "maintenance")
    assert again == first
    reworded = await world.tenants.pause("acme", "billing")
    assert (reworded.state, reworded.pause_reason, reworded.version) == ("paused", "billing", first.version + 1)
    beta = await world.tenants.get("beta")
    assert await world.tenants.resume("beta") == beta
    with pytest.raises(NotFound):
        await world.tenants.pause("nobody")
