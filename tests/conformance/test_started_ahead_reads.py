"""A run started ahead of its send instant (store/arming.py: ``running``,
``handed_out_at`` the instant its server will send it at) reads, to every
reader whose clock has not reached that instant, as it did before it was
started: ``scheduled``, the delivery before, no owner, no worker. Every
read path and its status filter agree, one microsecond before the instant
and at it, on SQLite and PostgreSQL; tenant scoping is unchanged
(docs/architecture.md, "Hand-outs decided ahead", "Never seen early")."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from tickwheel.shared.ids import to_us
from tickwheel_server.errors import FailedPrecondition, NotFound
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.operations import OperationsStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_arming import add_one_off, arm, items, row
from .test_handout import ANY_ECHO, add_execution

AHEAD = ("a1", "a2", "a3")
"""Armed, then started half a second before their instant."""


@pytest.fixture
async def world(migrated_engine, clock):
    """``AHEAD`` started ahead by session s1, due at ``due``; ``r1`` handed
    out by a round of s2 (running, sent); ``s1`` scheduled for later; ``ready``
    scheduled and ready (so the tenant has a queue for ClusterStatus). All of
    tenant acme; globex has nothing."""
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await TenantStore(migrated_engine, clock).create(Tenant(name="globex"))
    queue = ExecutionQueue(migrated_engine, clock)
    add_execution(migrated_engine, clock, "r1", due_in=0)
    handed = await queue.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 10)
    assert [h.id for h in handed] == ["r1"]
    for ident in AHEAD:
        add_one_off(migrated_engine, clock, ident, due_in=2)
    add_execution(migrated_engine, clock, "s1", due_in=30)
    armed = await arm(queue, clock)
    assert sorted(a.handed.id for a in armed) == list(AHEAD)
    due = clock.now() + timedelta(seconds=2)
    clock.advance(1.5)
    add_execution(migrated_engine, clock, "ready", due_in=0)
    started = await queue.arming.start("s1", items(armed), due)
    assert started.started == list(AHEAD) and started.at_us == to_us(due)
    for ident in AHEAD:
        assert row(migrated_engine, ident) == ("running", "s1", 1, to_us(due))
    return queue, due


async def everything_read(engine, clock) -> dict:
    """(id, status, delivery, owner, worker) of every execution as each read path shows it, and status filters."""
    history, search = HistoryStore(engine, clock), OperationsStore(engine, clock)

    def seen(records) -> list:
        return [(e.id, e.status, e.delivery, e.owner, e.worker_id) for e in records]

    async def paged(read, **filters) -> list:
        """Every page of one execution: each id once, newest first."""
        found, key = [], None
        while True:
            page = await read(before_key=key, limit=1, **filters)
            found += [e.id for e in page.executions]
            key = page.next_key
            if key is None:
                return found

    views = {"get": seen([await history.get_execution("acme", ident) for ident in (*AHEAD, "r1")])}
    views["list"] = {ident: seen((await history.list_executions("acme", f"job_{ident}")).executions)
                     for ident in (*AHEAD, "r1")}  # fmt: skip
    views["search"] = seen((await search.search_executions()).executions)
    views["search_tenant"] = seen((await search.search_executions(tenant="acme")).executions)
    for status in ("scheduled", "running"):
        views[f"search_{status}"] = await paged(search.search_executions, statuses=[status])
        views[f"search_tenant_{status}"] = await paged(search.search_executions, tenant="acme", statuses=[status])
        views[f"list_{status}"] = {
            ident: await paged(lambda **kw: history.list_executions("acme", f"job_{ident}", **kw), statuses=[status])
            for ident in (*AHEAD, "r1")
        }
        views[f"search_job_{status}"] = await paged(search.search_executions, job_id="job_a1", statuses=[status])
    views["queues"] = [(q.tenant, q.running) for q in await search.queues(clock.now(), 10)]
    return views


async def test_a_run_started_ahead_reads_as_scheduled_until_its_instant_everywhere(
    world, migrated_engine, clock
) -> None:
    _queue, due = world
    clock.set(due - timedelta(microseconds=1))
    before = await everything_read(migrated_engine, clock)
    not_started = [(ident, "scheduled", 0, None, None) for ident in AHEAD]
    r1 = ("r1", "running", 1, "s2", None)
    assert before["get"] == [*not_started, r1]
    assert before["list"] == {**{ident: [(ident, "scheduled", 0, None, None)] for ident in AHEAD}, "r1": [r1]}
    # Newest nominal first: s1 (+30 s), the three (+2 s), ready (+1.5 s), r1.
    assert [view[0] for view in before["search"]] == ["s1", "a3", "a2", "a1", "ready", "r1"]
    assert [v for v in before["search"] if v[0] in AHEAD] == sorted(not_started, reverse=True)
    assert before["search_tenant"] == before["search"]
    assert before["search_scheduled"] == before["search_tenant_scheduled"] == ["s1", "a3", "a2", "a1", "ready"]
    assert before["search_running"] == before["search_tenant_running"] == ["r1"]
    assert before["list_scheduled"] == {"a1": ["a1"], "a2": ["a2"], "a3": ["a3"], "r1": []}
    assert before["list_running"] == {"a1": [], "a2": [], "a3": [], "r1": ["r1"]}
    assert (before["search_job_scheduled"], before["search_job_running"]) == (["a1"], [])
    assert before["queues"] == [("acme", 1)]  # r1 only

    clock.set(due)  # the send instant: started, to every reader
    after = await everything_read(migrated_engine, clock)
    running = [(ident, "running", 1, "s1", None) for ident in AHEAD]
    assert after["get"] == [*running, r1]
    assert after["list"] == {**{ident: [(ident, "running", 1, "s1", None)] for ident in AHEAD}, "r1": [r1]}
    assert [v for v in after["search"] if v[0] in AHEAD] == sorted(running, reverse=True)
    assert after["search_scheduled"] == after["search_tenant_scheduled"] == ["s1", "ready"]
    assert after["search_running"] == after["search_tenant_running"] == ["a3", "a2", "a1", "r1"]
    assert after["list_scheduled"] == {"a1": [], "a2": [], "a3": [], "r1": []}
    assert after["list_running"] == {"a1": ["a1"], "a2": ["a2"], "a3": ["a3"], "r1": ["r1"]}
    assert (after["search_job_scheduled"], after["search_job_running"]) == ([], ["a1"])
    assert after["queues"] == [("acme", 4)]


async def test_another_tenant_cannot_see_a_run_started_ahead(world, migrated_engine, clock) -> None:
    _queue, due = world
    history, search = HistoryStore(migrated_engine, clock), OperationsStore(migrated_engine, clock)
    for instant in (due - timedelta(microseconds=1), due):
        clock.set(instant)
        with pytest.raises(NotFound):
            await history.get_execution("globex", "a1")
        with pytest.raises(NotFound):
            await history.list_executions("globex", "job_a1")
        with pytest.raises(NotFound):
            await history.cancel_execution("globex", "a1")
        for status in ((), ("scheduled",), ("running",)):
            assert (await search.search_executions(tenant="globex", statuses=status)).executions == ()
            assert (await search.search_executions(tenant="globex", job_id="job_a1", statuses=status)).executions == ()
    assert row(migrated_engine, "a1") == ("running", "s1", 1, to_us(due))  # nothing written


async def test_a_cancel_before_the_instant_is_requested_as_for_a_running_run_and_answered_as_seen(
    world, migrated_engine, clock
) -> None:
    _queue, due = world
    history = HistoryStore(migrated_engine, clock)
    clock.set(due - timedelta(milliseconds=400))
    answer = await history.cancel_execution("acme", "a1", "not now")
    # What it answers follows the readers' rule; what it writes is a running row's cancel.
    assert (answer.status, answer.delivery, answer.owner, answer.finished_at) == ("scheduled", 0, None, None)
    with migrated_engine.connect() as conn:
        stored = conn.execute(
            sa.select(executions.c.status, executions.c.cancel_requested_at, executions.c.cancel_reason)
            .where(executions.c.id == "a1")
        ).one()
    assert stored == ("running", to_us(clock.now()), "canceled: not now")
    assert row(migrated_engine, "a1") == ("running", "s1", 1, to_us(due))
    again = await history.cancel_execution("acme", "a1", "other")  # a second request keeps the first
    assert again.status == "scheduled"
    clock.set(due)
    assert (await history.cancel_execution("acme", "a1")).status == "running"
    # A scheduled one is canceled at once, as before; an ended one is refused, nothing written.
    assert (await history.cancel_execution("acme", "s1")).status == "canceled"
    with pytest.raises(FailedPrecondition):
        await history.cancel_execution("acme", "s1")
