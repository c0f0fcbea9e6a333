"""Which indexes an execution is in, by status, and a job by state, on
SQLite and PostgreSQL.

A change of status is never a HOT update, so the engine inserts the new row
version into every index whose predicate it satisfies: the indexes a
``running`` execution is in are what each hand-out pays per row (migration
0014), those a ``scheduled`` one is in what each claim pays per occurrence
and those a completed job is in what the claim of a one-off job pays
(migration 0022). Membership is read from the engine's own catalog (every
index of the table with its predicate) and each predicate evaluated on the
real row, so an index added later that holds such rows fails here.
"""

from __future__ import annotations

import random
import re

import pytest
import sqlalchemy as sa
from tickwheel.shared.ids import to_us
from tickwheel.v1 import worker_pb2

from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.executions import ResultIn
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_dispatch_claim import NOW, OWNED, World, once_job
from .test_handout import ANY_ECHO, add_execution

PRIMARY_KEY = "primary key"
RUNNING = {PRIMARY_KEY, "executions_running", "executions_busy"}
"""A running row's indexes since migration 0040: ``executions_running (owner, tenant, worker_id)`` took the
places of ``executions_owner (owner)`` and ``executions_running_worker (tenant, worker_id)``."""
SCHEDULED = {
    PRIMARY_KEY, "executions_scheduled_tenant", "executions_tenant_ready", "executions_not_started",
    "executions_not_started_job",
}  # fmt: skip


def _indexes(conn: sa.Connection, table: str = "executions") -> dict[str, str | None]:
    """Every index of ``table`` → its predicate (None: every row)."""
    if conn.dialect.name == "sqlite":
        found = {}
        for name, sql in conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (table,)
        ):
            if sql is None:  # the primary key's automatic index
                found[PRIMARY_KEY] = None
                continue
            parts = re.split(r"\sWHERE\s", sql, maxsplit=1, flags=re.IGNORECASE)
            found[name] = parts[1] if len(parts) == 2 else None
        return found
    rows = conn.exec_driver_sql(
        "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid), i.indisprimary FROM pg_index AS i "
        "JOIN pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = CAST(%(table)s AS regclass)",
        {"table": table},
    )
    return {PRIMARY_KEY if primary else name: predicate for name, predicate, primary in rows}


def indexes_holding(engine: sa.Engine, row_id: str, table: str = "executions") -> set[str]:
    """The indexes of ``table`` whose predicate its row ``row_id`` satisfies."""
    with engine.connect() as conn:
        held = set()
        for name, predicate in _indexes(conn, table).items():
            key = "job_id" if table == "job_cursors" else "id"
            check = f"SELECT count(*) FROM {table} WHERE {key} = :id AND ({predicate or 'TRUE'})"
            if conn.execute(sa.text(check), {"id": row_id}).scalar_one():
                held.add(name)
        return held


@pytest.fixture
async def store(migrated_engine, clock) -> ExecutionQueue:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    return ExecutionQueue(migrated_engine, clock, rng=random.Random(3))


async def test_a_handed_out_execution_is_in_three_indexes_only(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    scheduled = indexes_holding(migrated_engine, "e1")
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)

    assert indexes_holding(migrated_engine, handed.id) == RUNNING
    # What the take leaves: every index over executions not started (search,
    # the overlap policy's queue) and none over ended ones.
    assert {"executions_not_started", "executions_not_started_job"} <= scheduled
    assert not scheduled & RUNNING - {PRIMARY_KEY}

    await store.outcomes.record_results([ResultIn(handed.id, handed.delivery, handed.attempt,
                                         worker_pb2.RESULT_OUTCOME_SUCCEEDED, "", "w1", ("acme",))])  # fmt: skip
    assert indexes_holding(migrated_engine, handed.id) == {
        PRIMARY_KEY, "executions_ended_tenant", "executions_ended_job",
    }  # fmt: skip


async def test_a_claimed_occurrence_is_in_five_indexes_and_its_completed_job_s_cursor_in_one(
    migrated_engine, clock
) -> None:
    """What a claim of a one-off job writes: the new scheduled execution goes
    into five indexes (the timer wheel's rebuild reads the hand-out's
    ``executions_scheduled_tenant`` instead of an index by partition of its own),
    the job's cursor, completed, into one (its primary key: ``job_cursors_due``
    holds active cursors only), and nothing of the job's row (migration 0032:
    the same row version, in the indexes it was in)."""
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    world = World(migrated_engine, clock)
    job = await world.create(once_job(NOW), NOW)
    held = indexes_holding(migrated_engine, job.id, "jobs")
    assert "jobs_active_zone" in held
    assert indexes_holding(migrated_engine, job.id, "job_cursors") == {PRIMARY_KEY, "job_cursors_due"}
    postgres = migrated_engine.dialect.name == "postgresql"
    version = "SELECT xmin::text FROM jobs WHERE id = :id" if postgres else "SELECT 1"
    with migrated_engine.connect() as conn:
        before = conn.execute(sa.text(version), {"id": job.id}).scalar_one()
        row = conn.execute(sa.text("SELECT * FROM jobs WHERE id = :id"), {"id": job.id}).one()

    claimed = await DispatchStore(migrated_engine, clock).claim_due(OWNED, NOW)

    [execution] = claimed.executions
    assert indexes_holding(migrated_engine, execution.id) == SCHEDULED
    assert world.job_row(job.id).state == "completed"
    assert indexes_holding(migrated_engine, job.id, "job_cursors") == {PRIMARY_KEY}
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.text(version), {"id": job.id}).scalar_one() == before, "a new version of the job's row"
        assert conn.execute(sa.text("SELECT * FROM jobs WHERE id = :id"), {"id": job.id}).one() == row
    assert indexes_holding(migrated_engine, job.id, "jobs") == held


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_migration_22_moves_existing_rows_to_the_new_indexes(backend, request, tmp_path, clock) -> None:
    """A store written before migration 0022 keeps its rows, each in the new
    indexes as its state says; the three indexes replaced are gone."""
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = create_store_engine(url)
    try:
        migrate(engine, target=21)
        add_tenant_as_of(engine, "acme")
        add_execution(engine, clock, "e1", job_id="job_active")
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, next_run_at, next_due_at, "
                "run_count, tzdata_version, pause_reason, paused_at, version, created_at, updated_at) "
                "VALUES ('job_done', 'acme', 0, 'j', 'completed', :spec, 'UTC', NULL, NULL, 1, 'x', '', NULL, 1, 0, 0)"
            ), {"spec": b""})
        migrate(engine)
        with engine.connect() as conn:
            names = set(_indexes(conn)) | set(_indexes(conn, "jobs"))
        assert not names & {"executions_ready", "executions_partition", "jobs_zone"}
        assert indexes_holding(engine, "e1") == SCHEDULED
        assert "jobs_active_zone" in indexes_holding(engine, "job_active", "jobs")
        assert "jobs_active_zone" not in indexes_holding(engine, "job_done", "jobs")
        [rebuilt] = await DispatchStore(engine, clock).scheduled_in([0], clock.now())
        assert rebuilt.id == "e1"
    finally:
        engine.dispose()


def add_tenant_as_of(engine: sa.Engine, name: str) -> None:
    """Tenant ``name`` as a store migrated only so far holds it: the columns
    its ``tenants`` table has then (the current store writes later ones)."""
    row = {"name": name, "weight": 1, "max_concurrency": 0, "max_jobs": 100_000, "max_payload_bytes": 65_536,
           "requests_per_second": 100, "state": "active", "pause_reason": "", "created_at": 0, "updated_at": 0,
           "version": 1}
    with engine.begin() as conn:
        table = sa.Table("tenants", sa.MetaData(), autoload_with=conn)
        conn.execute(table.insert().values({key: value for key, value in row.items() if key in table.c}))


async def _store_at(version: int, backend: str, request, tmp_path, clock) -> sa.Engine:
    """A store migrated up to ``version`` only, with tenant acme and its scheduled execution e1."""
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = create_store_engine(url)
    try:
        migrate(engine, target=version)
        add_tenant_as_of(engine, "acme")
        add_execution(engine, clock, "e1")
    except BaseException:
        engine.dispose()
        raise
    return engine


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_migration_30_puts_existing_scheduled_rows_into_the_index_by_instant_and_tenant(
    backend, request, tmp_path, clock,
) -> None:
    """A store written before migration 0030 keeps its scheduled rows, each
    now in ``executions_scheduled_tenant``; ``executions_scheduled`` is gone,
    and the rows are read through the new index as before (the wheel's rebuild)."""
    engine = await _store_at(28, backend, request, tmp_path, clock)
    try:
        with engine.connect() as conn:
            assert "executions_scheduled" in _indexes(conn)
        migrate(engine)
        with engine.connect() as conn:
            names = set(_indexes(conn))
        assert "executions_scheduled" not in names and "executions_scheduled_tenant" in names
        assert indexes_holding(engine, "e1") == SCHEDULED
        [rebuilt] = await DispatchStore(engine, clock).scheduled_in([0], clock.now())
        assert rebuilt.id == "e1"
    finally:
        engine.dispose()


def _hand_out_as_of(engine: sa.Engine, clock, *, worker_id: str | None = None) -> None:
    """e1 handed out by session s1 (to ``worker_id``) as an older store's
    hand-out wrote it: the columns every version has (today's reads
    columns added since)."""
    with engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE executions SET delivery = delivery + 1, status = 'running', owner = 's1', worker_id = :worker, "
            "handed_out_at = :at WHERE id = 'e1' AND status = 'scheduled'"
        ), {"at": to_us(clock.now()), "worker": worker_id})


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_migration_33_puts_existing_running_rows_into_the_index_by_tenant_and_worker(
    backend, request, tmp_path, clock,
) -> None:
    """A store written before migration 0033 keeps its running rows, each
    now in ``executions_running_worker`` (one entry, as in the index it
    replaces); ``executions_running_tenant`` is gone."""
    engine = await _store_at(32, backend, request, tmp_path, clock)
    try:
        _hand_out_as_of(engine, clock)
        assert "executions_running_tenant" in indexes_holding(engine, "e1")
        migrate(engine, target=33)
        with engine.connect() as conn:
            names = set(_indexes(conn))
        assert "executions_running_tenant" not in names and "executions_running_worker" in names
        assert indexes_holding(engine, "e1") == {PRIMARY_KEY, "executions_owner", "executions_busy",
                                                 "executions_running_worker"}
        migrate(engine)
        assert indexes_holding(engine, "e1") == RUNNING
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_migration_40_puts_existing_running_rows_into_one_index_led_by_the_session(
    backend, request, tmp_path, clock,
) -> None:
    """A store written before migration 0040 keeps its running rows, each
    now in ``executions_running (owner, tenant, worker_id)`` (one entry for
    the two of ``executions_owner`` and ``executions_running_worker``, both
    gone), and its readers by tenant and worker find them there: the
    hello's, the capped tenant's count. Running it again changes nothing."""
    from tickwheel_server.store.engine import capabilities
    from tickwheel_server.store.handout_tenants import rooms_under_caps
    from tickwheel_server.store.unheld import disown

    engine = await _store_at(39, backend, request, tmp_path, clock)
    try:
        _hand_out_as_of(engine, clock, worker_id="w1")
        assert indexes_holding(engine, "e1") == {PRIMARY_KEY, "executions_owner", "executions_busy",
                                                 "executions_running_worker"}
        migrate(engine)
        migrate(engine)
        with engine.connect() as conn:
            names = set(_indexes(conn))
        assert not names & {"executions_owner", "executions_running_worker"}
        assert indexes_holding(engine, "e1") == RUNNING
        caps = capabilities(engine)
        capped = type("Capped", (), {"name": "acme", "max_concurrency": 3})
        with engine.begin() as conn:
            assert rooms_under_caps(conn, caps, [capped]) == {"acme": 2}
            assert disown(conn, caps, "s2", "w1", [], tenants=["acme"], since_us=0) == [("e1", 1)]
    finally:
        engine.dispose()
