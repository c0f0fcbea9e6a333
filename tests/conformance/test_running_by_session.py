"""The readers of running rows by tenant or worker id, a session at a time
(migration 0040: ``executions_running (owner, tenant, worker_id)`` for the
two indexes ``executions_owner`` and ``executions_running_worker``;
:func:`store.session_walk.running_rows`).

- A capped tenant's hand-outs racing on many servers, a server's rows
  restamped to a new session between rounds, and a row without an owner:
  the running count never passes the cap and reaches it whenever work
  waits (the count is exact: neither a session missed nor a row counted
  twice), on SQLite and PostgreSQL.
- On PostgreSQL, with the running rows of 4 sessions, 10 tenants and 40
  workers (ANALYZE'd): the hello's read, a capped tenant's count,
  ClusterStatus' counts and a tenant's running executions in a search,
  as the store sends them, each in a custom and a generic plan, read
  ``executions_running`` only, in a nested loop over the sessions, and no
  more rows of ``executions`` than their scope holds and a probe a
  session (fails before migration 0040: another index, or every running
  row).
"""

from __future__ import annotations

import asyncio
import random

import pytest
import sqlalchemy as sa

from tickwheel.shared.ids import to_us
from tickwheel_server.store.engine import capabilities
from tickwheel_server.store.handout_tenants import rooms_under_caps
from tickwheel_server.store.operations import OperationsStore
from tickwheel_server.store.requeue import RequeueStore
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore
from tickwheel_server.store.unheld import disown
from tickwheel.v1 import job_pb2

from tests.support.jobrows import insert_jobs
from tests.support.plans import captured, describe, nodes, plan, rows_read

from .test_isolation import Server, running_count, spec

CAP = 30
SERVERS = 8


def _backlog(engine, clock, count: int) -> None:
    """``count`` executions of one job of acme, that may overlap, all ready now."""
    job = spec(job_pb2.OVERLAP_POLICY_ALLOW)
    due = to_us(clock.now())
    with engine.begin() as conn:
        insert_jobs(conn, [dict(
            id="job_a", tenant="acme", partition=0, name="j", state="active", spec=job.SerializeToString(),
            time_zone="UTC", next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x",
            pause_reason="", paused_at=None, version=1, created_at=0, updated_at=0)])
        conn.execute(executions.insert(), [
            dict(id=f"a{i:05d}", job_id="job_a", tenant="acme", partition=0, origin="scheduled", nominal_at=due + i,
                 due_at=due + i, ready_at=due + i, attempt=1, delivery=0, status="scheduled", handler="echo",
                 missed_count=1, reap_count=0, payload=b"", error="", dead_reason="", created_at=0)
            for i in range(count)
        ])  # fmt: skip


async def test_a_capped_tenant_s_hand_outs_racing_on_many_sessions_fill_its_cap_exactly(
    migrated_engine, clock
) -> None:
    tenants = TenantStore(migrated_engine, clock)
    await tenants.create(Tenant(name="acme"))
    await tenants.update("acme", max_concurrency=CAP)
    _backlog(migrated_engine, clock, 400)
    servers = [Server(migrated_engine, clock, f"s{n}", tenants=("acme",)) for n in range(SERVERS)]
    requeue = RequeueStore(migrated_engine, clock)
    clock.advance(1)
    rng = random.Random(7)
    for round_ in range(6):
        handed = await asyncio.gather(*(server.claim(limit=7) for server in servers))
        assert running_count(migrated_engine, "acme") == CAP, round_  # never past the cap, and up to it
        assert len({h.id for batch in handed for h in batch}) == sum(len(batch) for batch in handed)
        # Some end; one server's rows move to a new session (its lease lost and
        # renewed) while the next round counts; one row has lost its owner.
        with migrated_engine.connect() as conn:
            running = conn.execute(
                sa.select(executions.c.id, executions.c.delivery, executions.c.attempt, executions.c.owner)
                .where(executions.c.tenant == "acme", executions.c.status == "running")
            ).all()
        ended = rng.sample(running, 5)
        for server in servers:
            mine = [row for row in ended if row.owner == server.owner]
            if mine:
                await server.finish(mine)
        moved = servers[round_ % SERVERS]
        renamed = f"{moved.owner}-{round_}"
        again = asyncio.gather(requeue.restamp(moved.owner, renamed), *(s.claim(limit=7) for s in servers))
        await again
        moved.owner = renamed
        assert running_count(migrated_engine, "acme") == CAP, round_
        if round_ == 2:
            with migrated_engine.begin() as conn:
                conn.execute(executions.update().where(executions.c.id == running[0].id,
                                                       executions.c.status == "running").values(owner=None))
    with migrated_engine.begin() as conn:
        capped = type("Capped", (), {"name": "acme", "max_concurrency": CAP})
        assert rooms_under_caps(conn, capabilities(migrated_engine), [capped]) == {"acme": 0}
        assert rooms_under_caps(conn, capabilities(migrated_engine), [type("C", (), {
            "name": "acme", "max_concurrency": CAP + 4})]) == {"acme": 4}


# --------------------------------------------------------------------------- plans at scale (PostgreSQL)

SESSIONS = [f"7a3f00e1c0b0000{n}" for n in range(4)]
TENANTS = 10
WORKERS = 40


@pytest.mark.postgres
async def test_the_readers_by_tenant_and_worker_read_each_session_s_range_only(migrated_engine, clock) -> None:
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plans")
    with migrated_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, owner, worker_id, handed_out_at, handler, missed_count, reap_count, payload, error, "
            "dead_reason, created_at) "
            "SELECT 'run_' || lpad(g::text, 6, '0'), 'job_' || (g %% 500), 't' || ((g %% %(workers)s) %% %(tenants)s), "
            "0, 'scheduled', g, g, g, 1, 1, 'running', (CAST(%(sessions)s AS TEXT[]))[1 + g %% 4], "
            "'w' || (g %% %(workers)s), g, 'echo', 0, 0, '', '', '', 0 FROM generate_series(1, 8000) AS g",
            {"workers": WORKERS, "tenants": TENANTS, "sessions": SESSIONS},
        )
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at) "
            "SELECT 'ready_' || g, 'job_r', 't' || g, 0, 'scheduled', 1, 1, 1, 1, 0, 'scheduled', 'echo', 0, 0, "
            "'', '', '', 0 FROM generate_series(1, 2) AS g"
        )  # ClusterStatus counts the running rows of tenants with ready work: t1, t2
    with migrated_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE executions")
    caps = capabilities(migrated_engine)
    capped = [type("Capped", (), {"name": f"t{n}", "max_concurrency": 10**6}) for n in range(3)]
    with captured(migrated_engine) as seen:
        with migrated_engine.begin() as conn:
            assert disown(conn, caps, "elsewhere", "w1", [], tenants=["t1", "t2"], since_us=10**12) == []
            assert rooms_under_caps(conn, caps, capped) == {f"t{n}": 10**6 - 800 for n in range(3)}
            conn.rollback()
        page = await OperationsStore(migrated_engine, clock).search_executions(tenant="t1", statuses=["running"],
                                                                               limit=50)
        assert len(page.executions) == 50 and page.executions[0].id == "run_007991"
        queues = await OperationsStore(migrated_engine, clock).queues(clock.now(), 10)
        assert [(q.tenant, q.running) for q in queues] == [("t1", 800), ("t2", 800)]
    walked = [sent for sent in seen if "running_sessions" in sent.statement]
    assert len(walked) == 4, [sent.statement for sent in seen]
    for statement, parameters, _ in walked:
        most = _scope(statement)
        for mode in ("force_custom_plan", "force_generic_plan"):
            top = plan(migrated_engine, statement, parameters, mode=mode, analyze=True)
            names = {n["Index Name"] for n in nodes(top) if "Index Name" in n}
            assert names == {"executions_running"}, (mode, describe(top))
            assert not any(n["Node Type"] == "Seq Scan" for n in nodes(top)), (mode, describe(top))
            assert any(n["Node Type"] == "Nested Loop" for n in nodes(top)), (mode, describe(top))
            # the scope's rows, a probe a session, one finding the end (per-loop rows rounded: a margin)
            assert rows_read(top, "executions") <= most + 2 * (len(SESSIONS) + 2), (mode, statement, describe(top))


def _scope(statement: str) -> int:
    """The running rows a reader's scope holds: the rows it may read, beside the walk's probes."""
    if "worker_id =" in statement:
        return 200  # w1's (of t1)
    if "sort_nominal_at" in statement:
        return 800  # t1's, sorted for the page
    if "count(*)" in statement and "handed_out_at" in statement:
        return 2 * 800  # ClusterStatus: t1's and t2's
    assert "count(*)" in statement, statement
    return 3 * 800  # the capped t0, t1 and t2
