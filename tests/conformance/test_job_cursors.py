"""The narrow cursor table (``job_cursors``, migration 0032) on SQLite and
PostgreSQL: the migration copies every job's cursor in bounded batches (also
on CockroachDB's path, stopped after its first column dropped and run
again); the
claim writes cursors only and reads no job row for a definition it holds;
a cursor without its job row at its version is left as it is, never run;
and a job write reaches no other tenant's cursor."""

from __future__ import annotations

import re
from datetime import timedelta
from importlib import import_module

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from tests.conformance.conftest import STORE_BACKENDS
from .test_dispatch_claim import MINUTE, NOW, OWNED, World as ClaimWorld, cron_job
from tickwheel.shared.ids import execution_id, to_us
from tickwheel_server.errors import NotFound
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.errors import MigrationError
from tickwheel_server.store.migrate_steps import OneByOne
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import executions, job_cursors, jobs
from tickwheel_server.store.tenants import Tenant, TenantStore

MIGRATION = import_module("tickwheel_server.store.migrations.0032_job_cursors")


@pytest.mark.parametrize("backend", [*STORE_BACKENDS, pytest.param("cockroachdb", marks=pytest.mark.postgres)])
def test_the_migration_copies_every_cursor_in_batches_and_moves_the_columns(
    request, tmp_path, backend: str, monkeypatch
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = create_store_engine(url)
    if backend == "cockroachdb":  # CockroachDB's path, on PostgreSQL: a statement a transaction
        engine.dialect.name = "cockroachdb"
        execute = OneByOne.execute

        def stopped_after_the_first_drop(self, statement, parameters=None):
            if "DROP COLUMN IF EXISTS next_due_at" in str(statement) and not stops:
                stops.append(str(statement))
                raise RuntimeError("the migrating process stops here")
            return execute(self, statement, parameters)

        stops: list[str] = []
        monkeypatch.setattr(OneByOne, "execute", stopped_after_the_first_drop)
    batches = []
    backfill = MIGRATION.backfill

    def counted(conn, caps, after):
        batches.append(after)
        return backfill(conn, caps, after)

    monkeypatch.setattr(MIGRATION, "BATCH", 10)
    monkeypatch.setattr(MIGRATION, "backfill", counted)
    try:
        migrate(engine, target=30)
        old = []
        for n in range(25):
            state = ("active", "paused", "completed")[n % 3]
            run = None if state == "completed" else 1_000 * n
            old.append(dict(
                id=f"job_{n:03d}", tenant=f"t{n % 2}", partition=n % 4, name="j", state=state, spec=b"",
                time_zone="UTC", next_run_at=run, next_due_at=None if run is None else run + 5, run_count=n,
                tzdata_version="x", pause_reason="", paused_at=None, version=n + 1, created_at=0, updated_at=0,
                quota_slot=0, calendar="", next_nominal_at=None if n != 7 else 9_999_999,
            ))  # fmt: skip
        with engine.begin() as conn:
            for tenant in ("t0", "t1"):
                conn.execute(sa.text(
                    "INSERT INTO tenants (name, weight, max_concurrency, max_jobs, max_payload_bytes, "
                    "requests_per_second, state, pause_reason, created_at, updated_at, version) "
                    "VALUES (:t, 1, 0, 100, 65536, 100, 'active', '', 0, 0, 1)"
                ), {"t": tenant})  # fmt: skip
            conn.execute(sa.table("jobs", *(sa.column(name) for name in old[0])).insert(), old)
        if backend == "cockroachdb":
            with pytest.raises(MigrationError, match="0032_job_cursors"):
                migrate(engine)
            assert stops and batches == ["", "job_009", "job_019"]
            batches.clear()
            migrate(engine)  # from the first statement again: the copy is skipped, its columns gone
            assert batches == [""]
        else:
            migrate(engine)
            assert batches == ["", "job_009", "job_019"], "three bounded batches, in id order"
        with engine.connect() as conn:
            copied = conn.execute(sa.select(job_cursors).order_by(job_cursors.c.job_id)).all()
            columns = {column["name"] for column in sa.inspect(conn).get_columns("jobs")}
            indexes = {index["name"] for index in sa.inspect(conn).get_indexes("job_cursors")}
        assert [tuple(row) for row in copied] == [
            (row["id"], row["tenant"], row["partition"], row["state"], row["version"], row["next_run_at"],
             row["next_due_at"], row["run_count"], row["next_nominal_at"])
            for row in old
        ]  # fmt: skip
        assert not columns & {"next_run_at", "next_due_at", "run_count", "next_nominal_at"}
        assert "job_cursors_due" in indexes
    finally:
        engine.dispose()


class World(ClaimWorld):
    """The claim's world (``test_dispatch_claim``), reading a job's executions."""

    def executions_of(self, job_id: str) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(conn.execute(sa.select(executions.c.id).where(executions.c.job_id == job_id)).scalars())


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    for name in ("acme", "other"):
        await TenantStore(migrated_engine, clock).create(Tenant(name=name))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    return World(migrated_engine, clock)


def statements_of(engine: sa.Engine) -> tuple[list[str], callable]:
    sent: list[str] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", capture)
    return sent, lambda: event.remove(engine, "before_cursor_execute", capture)


async def test_a_claim_writes_the_cursor_only_and_reads_no_job_row_it_holds_parsed(world) -> None:
    job = await world.create(cron_job(), NOW + MINUTE)
    before = world.job_row(job.id)
    with world.engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT * FROM jobs WHERE id = :id"), {"id": job.id}).one()
        version = None
        if world.engine.dialect.name == "postgresql":
            version = conn.execute(sa.text("SELECT xmin::text FROM jobs WHERE id = :id"), {"id": job.id}).scalar()
    await world.dispatch.claim_due(OWNED, NOW + 30 * timedelta(seconds=1))
    after = world.job_row(job.id)
    assert (after.next_run_at, after.run_count) == (to_us(NOW + 2 * MINUTE), 1)
    assert after.updated_at == before.updated_at and after.spec == before.spec and after.version == before.version
    # The next minutes: the definition is cached. The first of them still
    # reads it with the cursor (the batch before parsed every definition it
    # read); after that, on PostgreSQL nothing of ``jobs`` is read, and
    # nowhere is anything of it written.
    for minute in (1, 2):
        sent, stop = statements_of(world.engine)
        try:
            result = await world.dispatch.claim_due(OWNED, NOW + minute * MINUTE + timedelta(seconds=30))
        finally:
            stop()
        assert [e.id for e in result.executions] == [execution_id(job.id, NOW + (minute + 1) * MINUTE)]
        assert not [s for s in sent if re.search(r"(UPDATE|INSERT INTO|DELETE FROM)\s+jobs\b", s)], sent
    if world.engine.dialect.name == "postgresql":  # SQLite reads the definition with the cursor, always
        assert not [s for s in sent if re.search(r"\bjobs\b", s)], sent
    with world.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT * FROM jobs WHERE id = :id"), {"id": job.id}).one() == stored
        if world.engine.dialect.name == "postgresql":
            assert conn.execute(sa.text("SELECT xmin::text FROM jobs WHERE id = :id"), {"id": job.id}).scalar() \
                == version, "a new version of the job's row"


async def test_a_cursor_at_another_version_than_its_job_is_left_as_it_is_and_never_run(world) -> None:
    job = await world.create(cron_job(), NOW)
    with world.engine.begin() as conn:  # a cursor no job write wrote: a forged version
        conn.execute(job_cursors.update().where(job_cursors.c.job_id == job.id).values(version=job.version + 5))
    result = await world.dispatch.claim_due(OWNED, NOW)
    assert result.executions == [] and world.executions_of(job.id) == []
    [finding] = result.unreadable
    assert (finding.job_id, finding.kind) == (job.id, "job_unreadable")
    assert world.job_row(job.id).next_run_at == to_us(NOW), "the cursor stays where it was"


async def test_a_cursor_without_its_job_row_is_left_as_it_is_and_never_run(world) -> None:
    job = await world.create(cron_job(), NOW)
    good = await world.create(cron_job(), NOW)
    with world.engine.begin() as conn:
        conn.execute(jobs.delete().where(jobs.c.id == job.id))  # the cursor alone: what no write leaves
    result = await world.dispatch.claim_due(OWNED, NOW)
    assert execution_id(good.id, NOW) in [e.id for e in result.executions]
    assert [f.job_id for f in result.unreadable] == [job.id] and world.executions_of(job.id) == []


async def test_a_job_write_names_another_tenant_s_job_and_reaches_no_cursor(world) -> None:
    theirs = await world.create(cron_job(), NOW + MINUTE, tenant="other")
    before = world.job_row(theirs.id)
    with pytest.raises(NotFound):
        await world.jobs.pause("acme", theirs.id)
    with pytest.raises(NotFound):
        await world.jobs.delete("acme", theirs.id, 0)
    [outcome] = await world.jobs.delete_many("acme", [(theirs.id, 0)])
    assert isinstance(outcome, NotFound)
    after = world.job_row(theirs.id)
    assert tuple(after) == tuple(before)
    with world.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(job_cursors)).scalar() == 1


async def test_every_job_has_one_cursor_through_create_update_pause_resume_and_delete(world) -> None:
    a = await world.create(cron_job(), NOW + MINUTE)
    paused, _ = await world.jobs.pause("acme", a.id)
    row = world.job_row(a.id)
    assert (row.state, row.version) == ("paused", paused.version)
    with world.engine.connect() as conn:
        cursor = conn.execute(sa.select(job_cursors).where(job_cursors.c.job_id == a.id)).one()
        job = conn.execute(sa.select(jobs.c.state, jobs.c.version).where(jobs.c.id == a.id)).one()
    assert (cursor.state, cursor.version, cursor.tenant) == (job.state, job.version, "acme")
    await world.jobs.delete("acme", a.id, 0)
    with world.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(job_cursors)).scalar() == 0
