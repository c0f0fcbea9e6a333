"""The claim's overlap probe (``claim_handout.busy_jobs``): which of the
candidates' jobs have an execution not ended, on SQLite and PostgreSQL, and
on PostgreSQL that it reads the status groups' partial indexes by job, never
the table.

No index holds scheduled, waiting and running rows together (migration 0014
replaced ``executions_active``, which did). A probe that names the three
statuses in one predicate matches none of the partial indexes, and
PostgreSQL read it as a Seq Scan of ``executions``, ended history included,
at every claim that hands out a one-off, a cost that grows with the history
kept (loadtest/RESULTS.md, "the claim's overlap probe").
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tickwheel_server.store.claim_handout import _BUSY_JOBS, busy_jobs
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

# status, attempt of each job's one execution → whether the job is busy
CASES = {
    "scheduled": ("scheduled", 1, True),
    "retrying": ("scheduled", 2, True),
    "waiting": ("waiting", 1, True),
    "running": ("running", 1, True),
    "armed": ("armed", 1, True),
    "succeeded": ("succeeded", 1, False),
    "dead": ("dead", 3, False),
    "canceled": ("canceled", 1, False),
}
ENDED = ("succeeded", "dead", "canceled")


def _job(conn: sa.Connection, job_id: str) -> None:
    insert_jobs(conn, [dict(
        id=job_id, tenant="acme", partition=0, name="j", state="active", spec=b"", time_zone="UTC",
        next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x", pause_reason="", paused_at=None,
        version=1, created_at=0, updated_at=0)])  # fmt: skip


def _execution(conn: sa.Connection, ident: str, job_id: str, status: str, attempt: int = 1, at: int = 0) -> None:
    running = status in ("running", "armed")
    conn.execute(executions.insert().values(
        id=ident, job_id=job_id, tenant="acme", partition=0, origin="scheduled", nominal_at=at, due_at=at,
        ready_at=at, attempt=attempt, delivery=1 if running else 0, status=status, owner="s1" if running else None,
        worker_id=None, handler="echo", missed_count=0, reap_count=0, payload=b"", error="", dead_reason="",
        created_at=0, finished_at=at if status in ENDED else None))  # fmt: skip


@pytest.fixture
async def engine(migrated_engine, clock) -> sa.Engine:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    return migrated_engine


async def test_a_job_is_busy_while_any_of_its_executions_has_not_ended(engine) -> None:
    arrays = engine.dialect.name != "sqlite"
    with engine.begin() as conn:
        for name, (status, attempt, _) in CASES.items():
            _job(conn, f"job_{name}")
            _execution(conn, f"e_{name}", f"job_{name}", status, attempt)
        # Ended history beside a running execution: still busy; history alone: not.
        _job(conn, "job_mixed")
        _execution(conn, "e_mixed_old", "job_mixed", "succeeded", at=1)
        _execution(conn, "e_mixed_now", "job_mixed", "running", at=2)
        _job(conn, "job_idle")
    asked = sorted([f"job_{name}" for name in CASES] + ["job_mixed", "job_idle", "job_unknown"])

    with engine.connect() as conn:
        busy = busy_jobs(conn, arrays, asked)
        none_asked = busy_jobs(conn, arrays, ["job_idle"])

    assert busy == {f"job_{name}" for name, (_, _, expected) in CASES.items() if expected} | {"job_mixed"}
    assert none_asked == set()


def _plan_nodes(plan: dict) -> list[dict]:
    return [plan] + [node for child in plan.get("Plans", []) for node in _plan_nodes(child)]


@pytest.mark.postgres
async def test_the_probe_reads_each_group_s_index_by_job_not_the_history(engine) -> None:
    """20 000 ended executions of 2 000 jobs and a few not ended,
    ANALYZE'd: a probe for 1 000 jobs reads the partial indexes of the
    groups not ended only (by job, or whole when they hold a handful of
    rows, as here), never the table nor an index holding the history, with
    the ids known to the planner and in a generic plan (psycopg prepares a
    statement it sends often)."""
    if engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plan")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, tzdata_version, "
            "pause_reason, version, created_at, updated_at) "
            "SELECT 'job_' || lpad(g::text, 5, '0'), 'acme', 0, 'j', 'active', '', 'UTC', 'x', '', 1, 0, 0 "
            "FROM generate_series(1, 2000) AS g"
        )
        conn.exec_driver_sql(
            "INSERT INTO job_cursors (job_id, tenant, partition, state, version, run_count) "
            "SELECT 'job_' || lpad(g::text, 5, '0'), 'acme', 0, 'active', 1, 0 FROM generate_series(1, 2000) AS g"
        )
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at, finished_at) "
            "SELECT 'job_' || lpad(j::text, 5, '0') || ':' || k, 'job_' || lpad(j::text, 5, '0'), 'acme', 0, "
            "'scheduled', k, k, k, 1, 1, 'succeeded', 'echo', 0, 0, '', '', '', 0, k "
            "FROM generate_series(1, 2000) AS j, generate_series(1, 10) AS k"
        )
        for n, status in enumerate(("scheduled", "waiting", "running", "armed")):
            _execution(conn, f"open_{status}", f"job_{n + 1:05d}", status, at=100)
        conn.exec_driver_sql("ANALYZE executions")
    ids = [f"job_{n:05d}" for n in range(1, 2001, 2)]
    literal = "{" + ",".join(ids) + "}"
    statement = _BUSY_JOBS.replace("%(ids)s", "$1")
    history = {"executions_pkey", "executions_ended", "executions_ended_tenant", "executions_ended_job",
               "executions_dead", "executions_dead_job"}  # fmt: skip
    with engine.connect() as conn:
        conn.exec_driver_sql(f"PREPARE busy (TEXT[]) AS {statement}")
        for mode in ("force_custom_plan", "force_generic_plan"):
            conn.exec_driver_sql(f"SET plan_cache_mode = {mode}")
            plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) EXECUTE busy('{literal}')").scalar()[0]["Plan"]
            nodes = _plan_nodes(plan)
            shown = [(n["Node Type"], n.get("Index Name")) for n in nodes]
            assert not any(n["Node Type"] == "Seq Scan" for n in nodes), (mode, shown)
            used = {n["Index Name"] for n in nodes if "Index Name" in n}
            assert used and not used & history, (mode, shown)
        conn.exec_driver_sql("RESET plan_cache_mode")
        busy = busy_jobs(conn, True, ids)
        conn.rollback()
    assert busy == {"job_00001", "job_00003"}  # the scheduled and the running one (2 and 4 are not asked)
