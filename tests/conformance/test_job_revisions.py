"""Job revisions on SQLite and PostgreSQL: each applied update keeps the
definition it replaced in its own transaction, single and batch; the
newest KEEP are kept; a delete takes them; every read is tenant-scoped
(docs/architecture.md, "Job changes")."""

from __future__ import annotations


import pytest
import sqlalchemy as sa

from tests.conformance.test_job_batch_changes import make, rename
from tickwheel_server.errors import NotFound, VersionConflict
from tickwheel_server.store import revisions as revisions_module
from tickwheel_server.store.jobbatch import JobChange
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.revisions import RevisionStore
from tickwheel_server.store.tables import job_revisions
from tickwheel_server.store.tenants import Tenant, TenantStore


@pytest.fixture
def tenants(migrated_engine, clock) -> TenantStore:
    return TenantStore(migrated_engine, clock)


@pytest.fixture
def jobs(migrated_engine, clock) -> JobStore:
    return JobStore(migrated_engine, clock, partition_count=16)


@pytest.fixture
def revisions(migrated_engine, clock) -> RevisionStore:
    return RevisionStore(migrated_engine, clock)


def renamed(name: str, by: str = "api_key:k1", mask: tuple[str, ...] = ("name",)):
    return lambda record: JobChange(
        name=name, spec=record.spec, time_zone=record.time_zone, tzdata_version=record.tzdata_version,
        payload_size=0, reschedule=None, changed_by=by, update_mask=mask,
    )  # fmt: skip


def revision_count(engine, job_id: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).where(job_revisions.c.job_id == job_id)).scalar()


async def test_an_update_keeps_the_definition_it_replaced(jobs, tenants, revisions, clock) -> None:
    await tenants.create(Tenant(name="acme"))
    (job,) = await make(jobs, clock, 1)
    created_at = job.updated_at
    clock.advance(5)
    updated, _ = await jobs.update(
        "acme", job.id, 1, name="renamed", spec=job.spec, time_zone=job.time_zone,
        tzdata_version=job.tzdata_version, payload_size=0, reschedule=None, changed_by="api_key:k1",
        update_mask=("name", "labels"),
    )  # fmt: skip
    (kept,) = await revisions.list("acme", job.id)
    assert (kept.version, kept.name, kept.spec, kept.changed_to_version) == (1, "nightly", job.spec, 2)
    assert (kept.changed_by, kept.update_mask) == ("api_key:k1", ("name", "labels"))
    assert kept.version_at == created_at and kept.changed_at == updated.updated_at
    assert await revisions.get("acme", job.id, 1) == kept


async def test_a_batch_keeps_one_revision_per_applied_item(jobs, tenants, revisions, clock, migrated_engine) -> None:
    await tenants.create(Tenant(name="acme"))
    a, b = await make(jobs, clock, 2)
    outcomes = await jobs.update_many(
        "acme",
        [(a.id, 1, renamed("a2", mask=())), (a.id, 2, renamed("a3")), (b.id, 9, renamed("b2")),
         (b.id, 1, lambda record: None)],
    )  # fmt: skip
    assert isinstance(outcomes[2], VersionConflict)
    listed = await revisions.list("acme", a.id)
    assert [(r.version, r.name, r.update_mask) for r in listed] == [(2, "a2", ("name",)), (1, "nightly", ())]
    # a refused item and one that changed nothing keep none
    assert await revisions.list("acme", b.id) == []


async def test_a_failed_batch_keeps_no_revision(jobs, tenants, clock, migrated_engine) -> None:
    await tenants.create(Tenant(name="acme"))
    (a,) = await make(jobs, clock, 1)

    def broken(record):
        raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        await jobs.update_many("acme", [(a.id, 1, renamed("one")), (a.id, 2, broken)])
    assert revision_count(migrated_engine, a.id) == 0


async def test_only_the_newest_revisions_are_kept(jobs, tenants, revisions, clock, migrated_engine, monkeypatch) -> None:
    monkeypatch.setattr(revisions_module, "KEEP", 3)
    await tenants.create(Tenant(name="acme"))
    a, b = await make(jobs, clock, 2)
    for version in range(1, 6):
        await jobs.update_many("acme", [(a.id, version, renamed(f"a{version + 1}")), (b.id, version, rename(f"b{version}"))])
    assert [r.version for r in await revisions.list("acme", a.id)] == [5, 4, 3]
    assert revision_count(migrated_engine, a.id) == 3 and revision_count(migrated_engine, b.id) == 3
    # a batch that adds more than KEEP revisions of one job at once still leaves KEEP
    await jobs.update_many("acme", [(a.id, 6 + i, renamed(f"x{i}")) for i in range(5)])
    assert [r.version for r in await revisions.list("acme", a.id)] == [10, 9, 8]


async def test_listing_pages_newest_first(jobs, tenants, revisions, clock) -> None:
    await tenants.create(Tenant(name="acme"))
    (a,) = await make(jobs, clock, 1)
    await jobs.update_many("acme", [(a.id, v, renamed(f"n{v}")) for v in range(1, 6)])
    first = await revisions.list("acme", a.id, limit=2)
    second = await revisions.list("acme", a.id, before_version=first[-1].version, limit=2)
    rest = await revisions.list("acme", a.id, before_version=second[-1].version, limit=2)
    assert [r.version for r in first + second + rest] == [5, 4, 3, 2, 1]


async def test_another_tenants_job_is_not_found(jobs, tenants, revisions, clock) -> None:
    await tenants.create(Tenant(name="acme"))
    await tenants.create(Tenant(name="globex"))
    (a,) = await make(jobs, clock, 1)
    await jobs.update_many("acme", [(a.id, 1, renamed("two"))])
    with pytest.raises(NotFound):
        await revisions.list("globex", a.id)
    with pytest.raises(NotFound):
        await revisions.get("globex", a.id, 1)
    with pytest.raises(NotFound):
        await revisions.get("acme", a.id, 2**62)
    with pytest.raises(NotFound):
        await revisions.get("acme", "no-such-job", 1)


async def test_deleting_a_job_deletes_its_revisions_only(jobs, tenants, revisions, clock, migrated_engine) -> None:
    await tenants.create(Tenant(name="acme"))
    a, b = await make(jobs, clock, 2)
    await jobs.update_many("acme", [(a.id, 1, renamed("a2")), (b.id, 1, renamed("b2"))])
    await jobs.delete("acme", a.id)
    assert revision_count(migrated_engine, a.id) == 0
    assert [r.version for r in await revisions.list("acme", b.id)] == [1]
