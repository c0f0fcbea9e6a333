"""The claim's SELECT reads about its batch on cursors stored after the last
ANALYZE (issue 17).

One-offs stored in one transaction (BatchCreateJobs, the end-to-end
benchmark's COPY) are all due at once, and the table's statistics predate
them: PostgreSQL estimated 8 rows where 5 000 were due in a lane, priced
the ordered scan of ``job_cursors_due`` and a Bitmap Heap Scan with a Sort
alike, and took the latter, reading and sorting every due row of the
lane's partitions for each batch of 1 000: quadratic over a drain. Here the
statistics are taken on an empty table, 10 000 due cursors are stored over
256 partitions, and the statement a real claim sends for a lane of 128 of
them is run under EXPLAIN ANALYZE, custom and generic plan: the cursors it
reads stay within the batch and a partition's worth of slack. The rows
are the first of the lane in (partition, next_run_at) order, as before.

And the tenant's state is read once a run of one tenant's rows, not once a
row (1 000 probes of ``tenants`` for a one-tenant batch before), each row
still carrying its own tenant's state (paused, active, or '' for a tenant
row missing)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tickwheel.shared.ids import to_us
from tickwheel_server.store.claim_reads import DUE_SQL, due_rows
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.partitions import raise_epochs_in
from tickwheel_server.store.tenants import Tenant, TenantStore

from tests.support.plans import as_prepared, captured, describe, plan, rows_read

pytestmark = pytest.mark.postgres

PARTITIONS = 256
LANE = list(range(128))
DUE = 10_000
BATCH = 1000


@pytest.fixture
async def engine(migrated_engine, clock) -> sa.Engine:
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plans")
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    with migrated_engine.begin() as conn:
        raise_epochs_in(conn, {p: 1 for p in range(PARTITIONS)}, "fresh-test", to_us(clock.now()))
    with migrated_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")  # the statistics: nothing stored yet
    return migrated_engine


def _store_due(engine: sa.Engine, due_us: int, tenant: str = "'acme'") -> None:
    """``DUE`` cursors (and their job rows) over every partition, due at
    instants spread over the last ``DUE`` microseconds, in one transaction;
    ``tenant`` the SQL of each row's tenant (of ``g``, its number)."""
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, tzdata_version, "
            "pause_reason, version, created_at, updated_at, calendar) "
            f"SELECT 'job_' || lpad(g::text, 6, '0'), {tenant}, mod(g, {PARTITIONS}), 'j', 'active', '', 'UTC', 'x', '', "
            f"1, 0, 0, '' FROM generate_series(1, {DUE}) AS g"
        )
        conn.exec_driver_sql(
            "INSERT INTO job_cursors (job_id, tenant, partition, state, version, run_count, next_run_at, "
            "next_due_at) "
            f"SELECT 'job_' || lpad(g::text, 6, '0'), {tenant}, mod(g, {PARTITIONS}), 'active', 1, 0, "
            f"{due_us} - mod(g * 7919, {DUE}), {due_us} FROM generate_series(1, {DUE}) AS g"
        )


async def _claim_statement(engine: sa.Engine, clock) -> tuple[str, dict]:
    """The SELECT a real claim of ``LANE`` sends (on a store with nothing due yet)."""
    with captured(engine) as sent:
        await DispatchStore(engine, clock).claim_due({p: 1 for p in LANE}, clock.now(), batch=BATCH)
    selects = [s for s in sent if "FROM job_cursors" in s.statement and "FOR UPDATE" in s.statement]
    assert len(selects) == 1, [s.statement for s in sent]
    return selects[0].statement, dict(selects[0].parameters)


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
async def test_a_claim_on_cursors_stored_after_analyze_reads_about_its_batch(engine, clock, mode) -> None:
    statement, parameters = await _claim_statement(engine, clock)
    _store_due(engine, to_us(clock.now()))
    top = plan(engine, statement, parameters, mode=mode, analyze=True)
    read = rows_read(top, "job_cursors")
    assert top["Actual Rows"] == BATCH, describe(top)
    # The batch, and at most the LIMIT's look at the next row of each scan.
    assert read <= BATCH + len(LANE), f"read {read} cursors for a batch of {BATCH}\n{statement}\n{describe(top)}"
    # One tenant: its state read once, not once a row.
    assert rows_read(top, "tenants") == 1, describe(top)


async def test_the_batch_is_the_lane_s_first_due_rows_in_partition_then_due_order(engine, clock) -> None:
    statement, parameters = await _claim_statement(engine, clock)
    _store_due(engine, to_us(clock.now()))
    prepared, arguments = as_prepared(statement, parameters)
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute(f"PREPARE probe AS {prepared}")
        got = [(row[2], row[4], row[0]) for row in cursor.execute(f"EXECUTE probe({arguments})").fetchall()]
        conn.rollback()
        cursor.execute("DEALLOCATE probe")
        expected = [tuple(row) for row in conn.exec_driver_sql(
            "SELECT partition, next_run_at, job_id FROM job_cursors WHERE state = 'active' "
            "AND partition = ANY(%(live)s) AND next_run_at <= %(horizon)s ORDER BY partition, next_run_at LIMIT %(batch)s",
            {"live": LANE, "horizon": parameters["horizon"], "batch": BATCH},
        )]
        conn.rollback()
    assert [(p, at) for p, at, _ in got] == [(p, at) for p, at, _ in expected]
    assert sorted(got) == sorted(expected)


def _run(engine: sa.Engine, statement: str, parameters: dict) -> list:
    """The statement's rows, as the claim reads them; nothing it locks stays locked."""
    prepared, arguments = as_prepared(statement, parameters)
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute(f"PREPARE probe AS {prepared}")
        found = cursor.execute(f"EXECUTE probe({arguments})").fetchall()
        conn.rollback()
        cursor.execute("DEALLOCATE probe")
    return found


@pytest.mark.parametrize("lateral", [True, False], ids=["lateral", "one statement (CockroachDB's)"])
async def test_each_row_carries_its_own_tenant_s_state_read_once_a_run(engine, clock, lateral) -> None:
    await TenantStore(engine, clock).create(Tenant(name="beta"))
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE tenants SET state = 'paused' WHERE name = 'beta'")
    statement, parameters = await _claim_statement(engine, clock)
    assert statement == DUE_SQL[False, True, "SELECT j.spec" in statement, True]  # what PostgreSQL gets
    # Runs of each tenant, and single rows between them: acme, beta (paused), ghost (no tenant row).
    _store_due(engine, to_us(clock.now()), tenant="(ARRAY['acme', 'beta', 'ghost'])[1 + mod(g / 512, 3)]")
    found = _run(engine, DUE_SQL[False, True, True, lateral], parameters)
    carried = sum(1 for row in found if row[7] is None)  # read once for the run above
    assert 0 < carried < BATCH if lateral else carried == 0
    rows = due_rows(found)
    assert len(rows) == BATCH and {row.tenant for row in rows} == {"acme", "beta", "ghost"}
    states = {"acme": "active", "beta": "paused", "ghost": ""}
    assert [row.tenant_state for row in rows] == [states[row.tenant] for row in rows]
    assert all(row.spec is not None for row in rows)
