"""The tenant walk's statements on PostgreSQL, shown with EXPLAIN ANALYZE
(store/tenant_walk.py): what a pass reads is bounded by the walk's steps,
not by how many tenants there are or how much work one of them has.

The data: 3 000 tenants, each with one execution parked an hour ahead (a
retry backing off), tenant ``flood`` with 20 000 runs ready within the arm's
window and 20 000 ready now. ANALYZE'd. The statements explained are those
an arming pass and a hand-out round really send (captured), with their own
parameters.

What the planner does, for the record (PostgreSQL 15): the walk is a
Recursive Union whose every step is an Index Only Scan (or Index Scan) on
``executions_tenant_ready`` under a Limit of one row, run once per step, and
each tenant's first ready instant one more such scan; nothing else of
``executions`` is read, and ``tenants`` only by primary key for the tenants
with work. The ready side's walk, which every pass runs first, is a
Recursive Union whose every step is two Index (Only) Scans on
``executions_scheduled_tenant`` under a Limit of one row (the next
(instant, tenant) pair's instant, its tenant); the tenants it passed are
read by primary key, once each.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.queue import ExecutionQueue
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tables import executions, tenants

from .test_handout_explain import _capturing, _describe, _explain, _index_scans_only, _nodes

pytestmark = pytest.mark.postgres

T = datetime(2027, 1, 4, tzinfo=timezone.utc)
TENANTS = 3000
FLOOD = 20_000
STEPS = 64


def _populate(engine: sa.Engine) -> list[str]:
    now_us = to_us(T)
    names = [f"t{i:05d}" for i in range(TENANTS)] + ["flood"]
    spec = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    spec.schedule.once_at.FromDatetime(T + timedelta(seconds=5))
    common = dict(partition=0, origin="scheduled", attempt=1, delivery=0, status="scheduled", handler="echo",
                  missed_count=1, reap_count=0, payload=b"", error="", dead_reason="", created_at=now_us)
    with engine.begin() as conn:
        conn.execute(tenants.insert(), [dict(
            name=name, weight=1, max_concurrency=0, max_jobs=1_000_000, max_payload_bytes=65536,
            requests_per_second=100, state="active", pause_reason="", created_at=now_us, updated_at=now_us,
            version=1) for name in names])
        insert_jobs(conn, [dict(
            id=f"job_{name}", tenant=name, partition=0, name="j", state="active", spec=spec.SerializeToString(),
            time_zone="UTC", next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x", pause_reason="",
            paused_at=None, version=1, created_at=now_us, updated_at=now_us) for name in names])
        parked = now_us + 3600 * 1_000_000
        rows = [dict(id=f"{name}:park", job_id=f"job_{name}", tenant=name, nominal_at=parked, due_at=parked,
                     ready_at=parked, **common) for name in names[:-1]]
        for k in range(2 * FLOOD):
            ready = now_us - k if k < FLOOD else now_us + 1_000_000 + k
            rows.append(dict(id=f"flood:{k}", job_id="job_flood", tenant="flood", nominal_at=ready, due_at=ready,
                             ready_at=ready, **common))
        for start in range(0, len(rows), 5000):
            conn.execute(executions.insert(), rows[start:start + 5000])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")
    return names


@pytest.fixture
def populated(postgres_url):
    engine = create_store_engine(postgres_url)
    migrate(engine)
    names = _populate(engine)
    yield engine, names
    engine.dispose()


def _read_rows(plan: dict) -> int:
    return sum((n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n.get("Actual Loops", 1)
               for n in _nodes(plan) if n.get("Relation Name") == "executions")


async def _walk_plans(engine: sa.Engine, names: list[str], steps: int, kind: str = "walk") -> list[dict]:
    """The plans of the walks of ``kind`` (``walk``: by tenant; ``ready``:
    the ready side's) of one arm and one round."""
    group = Capability(tuple(names), ("echo",), False)
    with _capturing(engine) as captured:
        queue = ExecutionQueue(engine, FakeClock(T))
        queue.arming.walk.steps = queue.handout.walk.steps = steps
        queue.arming.walk.ready_steps = queue.handout.walk.ready_steps = steps
        await queue.arming.arm("s1", T, T + timedelta(seconds=10), group, 100)
        await queue.handout.hand_out_ready("s1", T, group, 100)
    walks = [(s, p) for s, p in captured if f"WITH RECURSIVE {kind}" in s]
    assert len(walks) >= 2, "the arm and the round each walked"
    return [_explain(engine, s, p, analyze=True) for s, p in walks]


async def test_a_walk_reads_two_index_entries_a_step_whatever_the_tenants(populated) -> None:
    engine, names = populated
    for plan in await _walk_plans(engine, names, STEPS):
        # Each step: the next tenant (one entry) and its first ready instant (one): 3 001 tenants and
        # 40 000 flood rows are there, a pass of 64 steps reads about 128.
        _two_entries_a_step(plan, "executions_tenant_ready")


def _two_entries_a_step(plan: dict, index: str) -> None:
    """``plan`` read at most two entries of ``index`` a step (and a few
    more), nothing of ``executions`` by a sequential scan, and only the
    tenant with work (the flood) had its settings read: by primary key, once each."""
    shown = _index_scans_only(plan, index)
    read = _read_rows(plan)
    assert read <= 2 * STEPS + 4, f"the walk read {read} rows in {STEPS} steps:\n{shown}"
    assert not any(n["Node Type"] == "Seq Scan" for n in _nodes(plan)), _describe(plan)
    settings = [n for n in _nodes(plan) if n.get("Relation Name") == "tenants"]
    assert sum(n["Actual Rows"] * n.get("Actual Loops", 1) for n in settings) <= 2, shown


async def test_a_walk_s_cost_follows_its_steps_not_the_tenant_count(populated) -> None:
    engine, names = populated
    small = [_read_rows(plan) for plan in await _walk_plans(engine, names, 8)]
    large = [_read_rows(plan) for plan in await _walk_plans(engine, names, 4 * 8)]
    assert all(r <= 2 * 8 + 4 for r in small), small
    assert all(r <= 2 * 32 + 4 for r in large) and max(large) > max(small), (small, large)


async def test_the_ready_side_reads_two_index_entries_a_step_whatever_the_backlog(populated) -> None:
    """The flood's 40 000 rows are at distinct instants in both windows, so
    each pass's ready side stops at its bound (and the tenant walk runs
    too): two entries a step, the flood's settings read once."""
    engine, names = populated
    for plan in await _walk_plans(engine, names, STEPS, "ready"):
        _two_entries_a_step(plan, "executions_scheduled_tenant")


async def test_with_only_parked_tenants_a_pass_reads_a_few_entries_and_walks_no_tenant(populated) -> None:
    """Without the flood, 3 000 tenants each with a run parked an hour
    ahead: the ready side finds its windows empty with a descent or two, so
    the pass sends no tenant walk at all."""
    engine, names = populated
    with engine.begin() as conn:
        conn.execute(sa.delete(executions).where(executions.c.tenant == "flood"))
    group = Capability(tuple(names), ("echo",), False)
    with _capturing(engine) as captured:
        queue = ExecutionQueue(engine, FakeClock(T))
        assert await queue.arming.arm("s1", T, T + timedelta(seconds=10), group, 100) == []
        assert not await queue.handout.hand_out_ready("s1", T, group, 100)
    assert not any("WITH RECURSIVE walk" in s for s, _p in captured)
    ready = [(s, p) for s, p in captured if "WITH RECURSIVE ready" in s]
    assert len(ready) == 2
    for statement, parameters in ready:
        plan = _explain(engine, statement, parameters, analyze=True)
        assert _read_rows(plan) <= 4, _describe(plan)
