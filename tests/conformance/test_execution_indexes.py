"""Which indexes an execution is in, by status, on SQLite and PostgreSQL.

A change of status is never a HOT update, so the engine inserts the new row
version into every index whose predicate it satisfies: the indexes a
``running`` execution is in are what each hand-out pays per row (migration
0014). Membership is read from the engine's own catalog (every index of
``executions`` with its predicate) and each predicate evaluated on the real
row, so an index added later that holds running executions fails here.
"""

from __future__ import annotations

import random
import re

import pytest
import sqlalchemy as sa
from tickwheel.v1 import worker_pb2

from tickwheel_server.store.executions import ResultIn
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import ANY_ECHO, add_execution

PRIMARY_KEY = "primary key"
RUNNING = {PRIMARY_KEY, "executions_owner", "executions_busy", "executions_running_tenant"}


def _indexes(conn: sa.Connection) -> dict[str, str | None]:
    """Every index of ``executions`` → its predicate (None: every row)."""
    if conn.dialect.name == "sqlite":
        found = {}
        for name, sql in conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions'"
        ):
            if sql is None:  # the primary key's automatic index
                found[PRIMARY_KEY] = None
                continue
            parts = re.split(r"\sWHERE\s", sql, maxsplit=1, flags=re.IGNORECASE)
            found[name] = parts[1] if len(parts) == 2 else None
        return found
    rows = conn.exec_driver_sql(
        "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid), i.indisprimary FROM pg_index AS i "
        "JOIN pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = 'executions'::regclass"
    )
    return {PRIMARY_KEY if primary else name: predicate for name, predicate, primary in rows}


def indexes_holding(engine: sa.Engine, execution_id: str) -> set[str]:
    """The indexes of ``executions`` whose predicate the row satisfies."""
    with engine.connect() as conn:
        held = set()
        for name, predicate in _indexes(conn).items():
            check = f"SELECT count(*) FROM executions WHERE id = :id AND ({predicate or 'TRUE'})"
            if conn.execute(sa.text(check), {"id": execution_id}).scalar_one():
                held.add(name)
        return held


@pytest.fixture
async def store(migrated_engine, clock) -> ExecutionQueue:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    return ExecutionQueue(migrated_engine, clock, rng=random.Random(3))


async def test_a_handed_out_execution_is_in_four_indexes_only(store, migrated_engine, clock) -> None:
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
        PRIMARY_KEY, "executions_ended", "executions_ended_tenant", "executions_ended_job",
    }  # fmt: skip
