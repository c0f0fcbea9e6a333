"""Finding the tenants with work when a worker group may serve thousands of
tenants (store/tenant_walk.py), on SQLite and PostgreSQL: the arming pass
and the hand-out round walk only the tenants that have scheduled work, at
most a bounded number a pass, from a rotating start, so none is starved when
more have work than one pass visits; names hostile to SQL are parameters;
rows the arm may not take at the head of a tenant's window do not use up
its share."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import to_us
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.queue import ExecutionQueue
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tables import executions, tenants
from tickwheel_server.store.tenant_walk import TenantWalk

from .test_arming import AHEAD, one_off
from .test_handout import add_execution

HOSTILE = (
    "o'brien", "'; DROP TABLE executions; --", "a\\b%_", ":after", "ü名\u200b", "x" * 200, "t) OR (1=1",
    "%(after)s", "?",
)


def add_tenants(engine, names) -> None:
    with engine.begin() as conn:
        conn.execute(tenants.insert(), [dict(
            name=name, weight=1, max_concurrency=0, max_jobs=1000, max_payload_bytes=65536, requests_per_second=100,
            state="active", pause_reason="", created_at=0, updated_at=0, version=1,
        ) for name in names])


def add_soon(engine, clock, ident: str, tenant: str, due_in: float = 2, **options) -> None:
    """An armable one-off run of ``tenant`` due ``due_in`` seconds from now."""
    add_execution(engine, clock, ident, due_in=due_in, tenant=tenant, spec=one_off(clock, due_in, **options))


def walking(engine, clock, steps: int, ready_steps: int = 1) -> ExecutionQueue:
    """A queue whose stores walk for any tenant list, ``steps`` tenants and
    ``ready_steps`` (instant, tenant) pairs of the ready side a pass."""
    queue = ExecutionQueue(engine, clock, loose_scan_above=0)
    queue.handout.walk.steps = queue.arming.walk.steps = steps
    queue.handout.walk.ready_steps = queue.arming.walk.ready_steps = ready_steps
    return queue


@contextmanager
def captured(engine) -> Iterator[list[tuple[str, object]]]:
    found: list[tuple[str, object]] = []

    def listen(conn, cursor, statement, parameters, context, executemany) -> None:
        found.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", listen)
    try:
        yield found
    finally:
        event.remove(engine, "before_cursor_execute", listen)


async def arm(queue, clock, capability, limit):
    return await queue.arming.arm("s1", clock.now(), clock.now() + AHEAD, capability, limit)


async def test_ten_thousand_idle_tenants_and_one_with_work_arm_it_in_the_first_pass(migrated_engine, clock) -> None:
    names = [f"t{i:05d}" for i in range(10_000)]
    add_tenants(migrated_engine, names + ["zz_busy"])
    add_soon(migrated_engine, clock, "busy_run", "zz_busy")
    queue = ExecutionQueue(migrated_engine, clock)
    everyone = Capability(tuple(names) + ("zz_busy",), ("echo",), True)
    with captured(migrated_engine) as sent:
        armed = await arm(queue, clock, everyone, 100)
    assert [a.handed.id for a in armed] == ["busy_run"]
    assert any("WITH RECURSIVE" in s for s, _p in sent), "a long tenant list is walked, not probed one by one"
    # No statement names the 10 000 tenants: what the pass sends follows the work.
    assert max(len(p or ()) for _s, p in sent) < 50
    add_execution(migrated_engine, clock, "busy_now", tenant="zz_busy")
    with captured(migrated_engine) as sent:
        handed = await queue.handout.hand_out_ready("s1", clock.now(), everyone, 100)
    assert [h.id for h in handed] == ["busy_now"]
    assert max(len(p or ()) for _s, p in sent) < 50


async def test_a_tenant_walk_visits_at_most_its_steps_and_goes_round_every_tenant(migrated_engine, clock) -> None:
    names = [f"t{i:02d}" for i in range(10)]
    add_tenants(migrated_engine, names + ["idle"])
    for name in names:
        add_execution(migrated_engine, clock, f"{name}_run", tenant=name, due_in=3600)  # parked an hour ahead
    walk = TenantWalk(above=0, steps=4)
    group = Capability(tuple(names), ("echo",), True)
    hour, now = to_us(clock.now() + timedelta(hours=1)), to_us(clock.now())
    seen: list[list[str]] = []
    with migrated_engine.connect() as conn:
        for _ in range(5):
            seen.append([t.name for t in walk.by_tenant(conn, group, hour, None)])
        other = [t.name for t in walk.by_tenant(conn, Capability(("idle",), ("echo",), True), hour, None)]
        assert walk.by_tenant(conn, group, now, None) == []  # nothing ready yet: none with work, the walk goes on
        after_idle = [t.name for t in walk.by_tenant(conn, group, hour, None)]
        later = to_us(clock.now() + timedelta(hours=2))
        assert [t.name for t in walk.by_tenant(conn, group, hour, later)] == []
        assert walk.visit(conn, group, now) == []
    assert all(len(visited) == 4 for visited in seen), seen
    # Each pass goes on after the last one's last tenant, round the end to the first.
    assert sum(seen[:3], [])[:10] == names and seen[2][2:] == names[:2] and seen[3] == names[2:6], seen
    assert seen[4] == names[6:10] and after_idle == names[4:8], (seen, after_idle)
    assert other == names[:4], "another group's walk keeps its own start"
    with migrated_engine.connect() as conn:
        visited = TenantWalk(above=0, steps=50).visit(conn, group, hour)  # the ready side's, whole
        by_tenant = TenantWalk(above=0, steps=50).by_tenant(conn, group, hour, None)
    assert [(t.name, t.weight, t.max_concurrency) for t in visited] == [(name, 1, 0) for name in names]
    assert [(t.name, t.weight, t.max_concurrency) for t in by_tenant] == [(name, 1, 0) for name in names]


async def test_more_tenants_with_work_than_a_pass_walks_are_each_armed_within_a_round_of_passes(
    migrated_engine, clock,
) -> None:
    names = [f"t{i:02d}" for i in range(10)]
    add_tenants(migrated_engine, names)
    for name in names:
        for k in range(4):
            add_soon(migrated_engine, clock, f"{name}_{k}", name, due_in=2 + k / 10)
    queue = walking(migrated_engine, clock, steps=3)
    group = Capability(tuple(names), ("echo",), True)
    armed_by_pass = []
    for _ in range(math.ceil(len(names) / 3)):
        armed = await arm(queue, clock, group, 3)
        armed_by_pass.append({a.handed.tenant for a in armed})
    # Each pass arms for the tenants it walked (at most three, and one the
    # ready side passed), and the passes go round: every tenant armed
    # something, although all still have more.
    assert all(1 <= len(tenants_) <= 4 for tenants_ in armed_by_pass), armed_by_pass
    assert set().union(*armed_by_pass) == set(names), armed_by_pass


async def test_more_tenants_with_ready_work_than_a_round_walks_are_each_handed_out_within_a_round_of_rounds(
    migrated_engine, clock,
) -> None:
    names = [f"t{i:02d}" for i in range(10)]
    add_tenants(migrated_engine, names)
    for name in names:
        for k in range(4):
            add_execution(migrated_engine, clock, f"{name}_{k}", tenant=name)
    queue = walking(migrated_engine, clock, steps=3)
    group = Capability(tuple(names), ("echo",), True)
    served = set()
    for _ in range(math.ceil(len(names) / 3)):
        handed = await queue.handout.hand_out_ready("s1", clock.now(), group, 3)
        assert 1 <= len({h.tenant for h in handed}) <= 4
        served |= {h.tenant for h in handed}
    assert served == set(names)


async def test_tenant_names_hostile_to_sql_are_walked_as_parameters(migrated_engine, clock) -> None:
    add_tenants(migrated_engine, HOSTILE)
    for index, name in enumerate(HOSTILE):
        add_soon(migrated_engine, clock, f"h{index}", name)
    queue = walking(migrated_engine, clock, steps=2)  # each pass's start is a hostile name
    group = Capability(HOSTILE, ("echo",), True)
    armed = []
    for _ in range(math.ceil(len(HOSTILE) / 2)):
        armed += await arm(queue, clock, group, 10)
    assert sorted(a.handed.tenant for a in armed) == sorted(HOSTILE)
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(executions)).scalar() == len(HOSTILE)
    with pytest.raises(ValueError):
        TenantWalk(steps=0)


@pytest.mark.parametrize("ready_steps", [1, 64])  # the ready side cut (both walks run), or covering the window
async def test_paused_capped_and_other_groups_tenants_are_not_armed_by_a_walk(
    migrated_engine, clock, ready_steps,
) -> None:
    add_tenants(migrated_engine, ["acme", "capped", "paused", "stranger"])
    with migrated_engine.begin() as conn:
        conn.execute(tenants.update().where(tenants.c.name == "capped").values(max_concurrency=2))
        conn.execute(tenants.update().where(tenants.c.name == "paused").values(state="paused"))
    for name in ("acme", "capped", "paused", "stranger"):
        add_soon(migrated_engine, clock, f"{name}_run", name)
    queue = walking(migrated_engine, clock, steps=10, ready_steps=ready_steps)
    group = Capability(("acme", "capped", "paused", "unknown"), ("echo",), True)  # not stranger
    assert [a.handed.id for a in await arm(queue, clock, group, 10)] == ["acme_run"]
    add_execution(migrated_engine, clock, "paused_now", tenant="paused")
    add_execution(migrated_engine, clock, "stranger_now", tenant="stranger")
    add_execution(migrated_engine, clock, "acme_now", tenant="acme")
    handed = await queue.handout.hand_out_ready("s1", clock.now(), Capability(group.tenants, ("echo",), True), 10)
    assert [h.id for h in handed] == ["acme_now"]


async def test_runs_the_arm_may_not_take_at_the_head_of_a_window_do_not_use_up_the_share(
    migrated_engine, clock,
) -> None:
    add_tenants(migrated_engine, ["acme"])
    for k in range(3):  # keyed: a key is counted at the instant, so never armed
        add_soon(migrated_engine, clock, f"keyed{k}", "acme", due_in=1 + k / 10, key="db")
    for k in range(2):
        add_soon(migrated_engine, clock, f"free{k}", "acme", due_in=2 + k / 10)
    queue = ExecutionQueue(migrated_engine, clock)
    armed = await arm(queue, clock, Capability(("acme",), ("echo",), True), 3)
    assert sorted(a.handed.id for a in armed) == ["free0", "free1"]
    with migrated_engine.connect() as conn:
        statuses = dict(conn.execute(sa.select(executions.c.id, executions.c.status)).all())
    assert statuses == {"keyed0": "scheduled", "keyed1": "scheduled", "keyed2": "scheduled",
                        "free0": "armed", "free1": "armed"}


def park(engine, clock, names, *, runs: int = 1, first_in: float = 3600) -> None:
    """``runs`` scheduled executions of each of ``names``, ready from
    ``first_in`` seconds ahead a millisecond apart (outside both windows:
    retries backing off, runs due later), written in bulk."""
    spec = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo"))).SerializeToString()
    start = to_us(clock.now() + timedelta(seconds=first_in))
    job_rows, rows = [], []
    for i, name in enumerate(names):
        job_rows.append(dict(
            id=f"park_{name}", tenant=name, partition=i % 8, name="j", state="active", spec=spec, time_zone="UTC",
            next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x", pause_reason="", paused_at=None,
            version=1, created_at=0, updated_at=0))
        rows += [dict(
            id=f"park_{name}:{k}", job_id=f"park_{name}", tenant=name, partition=i % 8, origin="scheduled",
            nominal_at=start + k * 1000, due_at=start + k * 1000, ready_at=start + k * 1000, attempt=2, delivery=1,
            status="scheduled", owner=None, worker_id=None, handler="echo", missed_count=1, reap_count=0,
            payload=b"", error="", dead_reason="", created_at=0, finished_at=None) for k in range(runs)]
    with engine.begin() as conn:
        for at in range(0, len(job_rows), 2000):
            insert_jobs(conn, job_rows[at:at + 2000])
        for at in range(0, len(rows), 2000):
            conn.execute(executions.insert(), rows[at:at + 2000])


async def test_beside_ten_thousand_parked_tenants_a_quiet_tenant_s_runs_are_found_in_the_first_pass(
    migrated_engine, clock,
) -> None:
    """What the walk alone finds for a worker group of more than 64 tenants:
    every run not handed out by the claim itself (a retry whose backoff
    ended, a run of a partition another server owns or that another server
    wrote, a triggered run, a one-off claimed ahead). With 10 000 tenants
    whose only runs are parked outside the window, the tenant walk of 1 024
    tenants a pass reached the last tenant in its tenth pass; the ready
    side's walk finds its runs in the first, and the pass does not run the
    tenant walk at all (nothing else is in the window)."""
    names = [f"t{i:05d}" for i in range(10_000)]
    add_tenants(migrated_engine, names + ["zz_quiet"])
    park(migrated_engine, clock, names)
    add_soon(migrated_engine, clock, "quiet_soon", "zz_quiet")  # a one-off claimed ahead: armed
    add_execution(migrated_engine, clock, "quiet_retry", tenant="zz_quiet")  # a retry ready now
    with migrated_engine.begin() as conn:
        conn.execute(executions.update().where(executions.c.id == "quiet_retry").values(attempt=2, delivery=1,
                                                                                         partition=7))
    queue = ExecutionQueue(migrated_engine, clock)
    everyone = Capability(tuple(names) + ("zz_quiet",), ("echo",), True)
    with captured(migrated_engine) as sent:
        armed = await arm(queue, clock, everyone, 100)
    assert [a.handed.id for a in armed] == ["quiet_soon"]
    assert not any("WITH RECURSIVE walk" in s for s, _p in sent), "the window was covered: no tenant walk"
    handed = await queue.handout.hand_out_ready("s1", clock.now(), everyone, 100)
    assert [h.id for h in handed] == ["quiet_retry"]


async def test_a_hostile_tenant_s_parked_rows_and_burst_do_not_delay_another_tenant_s_ready_run(
    migrated_engine, clock,
) -> None:
    """The attack: a tenant first in name order holds thousands of parked
    rows (every instant a distinct one, just outside the arm's window) and a
    burst of ready rows at the instant of the quiet tenant's run, beside
    300 parked tenants; the walks are cut small (16 tenants, 8 pairs a pass)
    so 300 stand for thousands. The quiet tenant's runs are armed and handed
    out in the first pass, each tenant to its fair share; what the hostile
    tenant wrote is all still there."""
    names = [f"p{i:03d}" for i in range(300)]
    add_tenants(migrated_engine, ["aaa_hostile"] + names + ["zz_quiet"])
    park(migrated_engine, clock, ["aaa_hostile"], runs=3000, first_in=AHEAD.total_seconds() + 0.5)
    park(migrated_engine, clock, names)
    now = to_us(clock.now())
    spec = one_off(clock, 2).SerializeToString()
    with migrated_engine.begin() as conn:
        # Half ready now, half at the quiet tenant's instant 2 s ahead: a job each.
        insert_jobs(conn, [dict(
            id=f"burst_{k}", tenant="aaa_hostile", partition=0, name="j", state="active", spec=spec,
            time_zone="UTC", next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x", pause_reason="",
            paused_at=None, version=1, created_at=0, updated_at=0) for k in range(4000)])
        conn.execute(executions.insert(), [dict(
            id=f"burst_{k}:1", job_id=f"burst_{k}", tenant="aaa_hostile", partition=0, origin="scheduled",
            nominal_at=now + at, due_at=now + at, ready_at=now + at, attempt=1, delivery=0, status="scheduled",
            owner=None, worker_id=None, handler="echo", missed_count=1, reap_count=0, payload=b"", error="",
            dead_reason="", created_at=0, finished_at=None)
            for k, at in ((k, 0 if k < 2000 else 2_000_000) for k in range(4000))])
    add_soon(migrated_engine, clock, "quiet_soon", "zz_quiet")
    add_execution(migrated_engine, clock, "quiet_now", tenant="zz_quiet")
    queue = walking(migrated_engine, clock, steps=16, ready_steps=8)
    group = Capability(("aaa_hostile",) + tuple(names) + ("zz_quiet",), ("echo",), True)
    armed = await arm(queue, clock, group, 10)
    assert "quiet_soon" in {a.handed.id for a in armed}
    # Half each; the quiet tenant's unused four go to the hostile one.
    assert Counter(a.handed.tenant for a in armed) == {"aaa_hostile": 9, "zz_quiet": 1}
    handed = await queue.handout.hand_out_ready("s1", clock.now(), group, 10)
    assert "quiet_now" in {h.id for h in handed}
    assert Counter(h.tenant for h in handed)["aaa_hostile"] == 9, "the hostile tenant has its share, no more"
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(executions).where(
            executions.c.tenant == "aaa_hostile")).scalar() == 3000 + 4000
