"""The reaper's question, which sessions hold running or armed executions
(``running_owners``, ``armed_owners``: :mod:`store.session_walk`), on
SQLite and PostgreSQL: the same answer as a grouped read of every such
row, and on PostgreSQL a read of one row a session, however many
executions each session holds (a grouped read took every running row of
the cluster on every 2 s pass)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tickwheel_server.store.arming import ArmStore
from tickwheel_server.store.requeue import RequeueStore
from tickwheel_server.store.tables import executions

from tests.support.plans import captured, nodes, plan, rows_read

HELD = 600
"""Executions each busy session holds."""


def _row(ident: str, status: str, owner: str | None) -> dict:
    return dict(
        id=ident, job_id=f"job_{ident}", tenant="acme", partition=0, origin="scheduled", nominal_at=100, due_at=100,
        ready_at=100, attempt=1, delivery=1, status=status, owner=owner, worker_id="w1" if owner else None,
        handed_out_at=100 if owner else None, handler="echo", missed_count=0, reap_count=0, payload=b"", error="",
        dead_reason="", created_at=0, finished_at=100 if status == "succeeded" else None,
    )


@pytest.fixture
def held(migrated_engine) -> sa.Engine:
    """Running rows of three sessions (two of them busy) and one with no
    owner; armed rows of two; ended rows that once had owners."""
    rows = [_row(f"r{session}_{n}", "running", f"s{session}") for session in (1, 3) for n in range(HELD)]
    rows += [_row("r2_0", "running", "s2"), _row("r_none", "running", None)]
    rows += [_row(f"a{n}", "armed", "s1" if n % 2 else "s4") for n in range(HELD)]
    rows += [_row(f"done_{n}", "succeeded", f"s{n % 5 + 5}") for n in range(HELD)]
    with migrated_engine.begin() as conn:
        conn.execute(executions.insert(), rows)
    if migrated_engine.dialect.name != "sqlite":
        with migrated_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE executions")
    return migrated_engine


async def test_the_sessions_holding_running_and_armed_rows_in_order(held, clock) -> None:
    requeues, arming = RequeueStore(held, clock), ArmStore(held, clock)
    assert await requeues.running_owners() == ["s1", "s2", "s3"]
    assert await requeues.running_owners(limit=2) == ["s1", "s2"]
    assert await requeues.running_owners(limit=1) == ["s1"]
    assert await arming.armed_owners() == ["s1", "s4"]
    with held.begin() as conn:  # nothing running: no session
        conn.execute(executions.update().where(executions.c.status == "running").values(status="succeeded"))
    assert await requeues.running_owners() == []


@pytest.mark.postgres
async def test_a_pass_reads_one_row_a_session_not_every_row_it_holds(held, clock) -> None:
    """Custom and generic plans alike: each statement one probe of the
    status's index led by the owner, reading at most one row; on the
    grouped read the running sessions' 1 201 rows were read every pass."""
    if held.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plans")
    with captured(held) as seen:
        assert await RequeueStore(held, clock).running_owners() == ["s1", "s2", "s3"]
        assert await ArmStore(held, clock).armed_owners() == ["s1", "s4"]
    reads = [s for s in seen if s.statement.lstrip().upper().startswith("SELECT")]
    for sent in reads:
        for mode in ("force_custom_plan", "force_generic_plan"):
            top = plan(held, sent.statement, sent.parameters, mode=mode, analyze=True)
            assert rows_read(top, "executions") <= 1, (mode, sent.statement, top)
            scanned = {n.get("Index Name") for n in nodes(top) if n.get("Relation Name") == "executions"}
            assert scanned <= {"executions_running", "executions_armed"}, (mode, scanned)
    assert len(reads) == 4 + 3  # a probe a session and one finding the end, per status
