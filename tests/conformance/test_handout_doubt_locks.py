"""The undo of a hand-out in doubt keeps the lock order (executions, then
``tenant_gates``, then ``concurrency_keys``) against another server's
round and results, on real PostgreSQL (issue 17, session 17): no
transaction is retried for a deadlock (SQLSTATE 40P01), and every
execution ends in exactly one state.

The race is forced, not hoped for: the other server's round is held inside
its transaction just after it wrote the tenant's gate and took its rows
(its ``on_taken``, in the store's thread), before it locks the key rows;
the undo's server then starts its round, and once it waits on a lock, the
other round goes on to the keys."""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel_server.store.errors import AmbiguousCommitError
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import concurrency_keys, executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import add_execution, committed_unanswered, result

pytestmark = pytest.mark.postgres

ECHO = Capability(("acme",), ("echo",), True)
WAIT_FOR = 60.0
"""Seconds a step may take before the test gives up (a deadline for a hang, not a measure)."""


@pytest.fixture
def engine(migrated_engine):
    if migrated_engine.dialect.name != "postgresql":
        pytest.skip("row locks: PostgreSQL (SQLite serialises its writers)")
    return migrated_engine


def keyed(name: str = "k") -> job_pb2.Job:
    spec = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    spec.concurrency_keys.add(key=name, limit=100)
    return spec


async def setup(engine, clock) -> None:
    """A capped tenant (its hand-outs write its gate) whose jobs all name one key."""
    await TenantStore(engine, clock).create(Tenant(name="acme", max_concurrency=100))
    with engine.begin() as conn:
        conn.execute(concurrency_keys.insert().values(tenant="acme", name="k", max_running=100, running=0,
                                                      limit_set_at=0))


async def waiting_on_a_lock(engine) -> None:
    """Until a backend of this database waits on a row lock."""
    deadline = asyncio.get_running_loop().time() + WAIT_FOR
    while True:
        with engine.connect() as conn:
            if conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )).scalar():
                return
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail("no transaction ever waited on the held round's locks")
        await asyncio.sleep(0.02)


def held_after_take() -> tuple[threading.Event, threading.Event, Callable[[int], None]]:
    """An ``on_taken`` that holds its round's first attempt (in the store's
    thread) until ``go`` is set, having set ``taken``."""
    taken, go = threading.Event(), threading.Event()

    def on_taken(_count: int) -> None:
        if not taken.is_set():
            taken.set()
            go.wait(WAIT_FOR)

    return taken, go, on_taken


async def in_doubt(engine, clock, monkeypatch, *idents: str) -> ExecutionQueue:
    """Server s1's queue, with a round in doubt that took ``idents`` (and their key slots)."""
    mine = ExecutionQueue(engine, clock, rng=random.Random(1))
    real = mine.handout._tx
    monkeypatch.setattr(mine.handout, "_tx", committed_unanswered(real))
    with pytest.raises(AmbiguousCommitError):
        await mine.handout.hand_out_ready("s1", clock.now(), ECHO, len(idents))
    monkeypatch.setattr(mine.handout, "_tx", real)
    assert len(mine.handout.in_doubt.entries) == 1
    return mine


def states(engine) -> tuple[dict[str, tuple[str, str | None, int]], int]:
    with engine.connect() as conn:
        rows = {r.id: (r.status, r.owner, r.delivery) for r in conn.execute(
            sa.select(executions.c.id, executions.c.status, executions.c.owner, executions.c.delivery))}
        running = conn.execute(sa.select(concurrency_keys.c.running).where(concurrency_keys.c.name == "k")).scalar_one()
    return rows, running


async def test_an_undo_racing_another_servers_round_on_the_same_gate_and_key_never_deadlocks(
    engine, clock, monkeypatch
) -> None:
    """s1's round in doubt holds a slot of key ``k``; s2's round has
    written acme's gate and taken its row, and is about to lock ``k``; s1's
    next round then undoes its doubt and writes acme's gate. Undone inside
    that round's transaction, the undo held ``k`` while the round waited
    for the gate s2 held, and s2 waited for ``k``: a deadlock, one of them
    retried. Undone in a transaction of its own first, it holds nothing
    when the round waits for the gate."""
    await setup(engine, clock)
    for ident in ("d1", "d2"):
        add_execution(engine, clock, ident, job_id=f"job_{ident}", spec=keyed())
    mine = await in_doubt(engine, clock, monkeypatch, "d1", "d2")
    for ident in ("r1", "r2"):
        add_execution(engine, clock, ident, job_id=f"job_{ident}", spec=keyed())
    theirs = ExecutionQueue(engine, clock, rng=random.Random(2))

    taken, go, on_taken = held_after_take()
    other = asyncio.ensure_future(theirs.handout.hand_out_ready("s2", clock.now(), ECHO, 2, on_taken=on_taken))
    try:
        assert await asyncio.to_thread(taken.wait, WAIT_FOR), "s2's round never took its rows"
        own = asyncio.ensure_future(mine.handout.hand_out_ready("s1", clock.now(), ECHO, 10))
        await waiting_on_a_lock(engine)  # s1's round waits for acme's gate, which s2 holds
    finally:
        go.set()
    handed_theirs, handed_mine = await other, await own

    retried = mine.handout.retries + theirs.handout.retries
    assert retried["40P01"] == 0, f"transactions retried: {dict(retried)}"
    assert sorted(h.id for h in handed_theirs) == ["r1", "r2"]
    assert sorted(h.id for h in handed_mine) == ["d1", "d2"]  # undone, then handed out again once
    assert mine.handout.in_doubt.entries == []
    rows, running = states(engine)
    assert rows == {"d1": ("running", "s1", 1), "d2": ("running", "s1", 1),
                    "r1": ("running", "s2", 1), "r2": ("running", "s2", 1)}
    assert running == 4  # one slot per running execution: none lost, none counted twice


async def test_an_undo_racing_results_and_a_round_on_the_same_key_never_deadlocks(engine, clock, monkeypatch) -> None:
    """The same, with s2's results of executions holding ``k`` recorded
    meanwhile (executions, then ``k``, then the waiters woken): every
    execution ends once, succeeded or handed out again, and ``k`` counts
    exactly what runs."""
    await setup(engine, clock)
    for ident in ("d1", "d2"):
        add_execution(engine, clock, ident, job_id=f"job_{ident}", spec=keyed())
    mine = await in_doubt(engine, clock, monkeypatch, "d1", "d2")
    theirs = ExecutionQueue(engine, clock, rng=random.Random(2))
    for ident in ("f1", "f2"):
        add_execution(engine, clock, ident, job_id=f"job_{ident}", spec=keyed())
    finishing = await theirs.handout.hand_out_ready("s2", clock.now(), ECHO, 2)
    assert sorted(h.id for h in finishing) == ["f1", "f2"]
    for ident in ("r1", "r2"):
        add_execution(engine, clock, ident, job_id=f"job_{ident}", spec=keyed())

    taken, go, on_taken = held_after_take()
    other = asyncio.ensure_future(theirs.handout.hand_out_ready("s2", clock.now(), ECHO, 2, on_taken=on_taken))
    try:
        assert await asyncio.to_thread(taken.wait, WAIT_FOR), "s2's round never took its rows"
        own = asyncio.ensure_future(mine.handout.hand_out_ready("s1", clock.now(), ECHO, 10))
        results = asyncio.ensure_future(theirs.outcomes.record_results(
            [result(h, worker_pb2.RESULT_OUTCOME_SUCCEEDED) for h in finishing]))
        await waiting_on_a_lock(engine)
    finally:
        go.set()
    handed_theirs, handed_mine, acks = await other, await own, await results

    retried = mine.handout.retries + theirs.handout.retries + theirs.outcomes.retries
    assert retried["40P01"] == 0, f"transactions retried: {dict(retried)}"
    assert [a.accepted for a in acks] == [True, True]
    assert sorted(h.id for h in handed_theirs) == ["r1", "r2"] and sorted(h.id for h in handed_mine) == ["d1", "d2"]
    rows, running = states(engine)
    assert Counter(status for status, _, _ in rows.values()) == Counter(running=4, succeeded=2)
    assert {i: rows[i][0] for i in ("f1", "f2")} == {"f1": "succeeded", "f2": "succeeded"}
    assert running == 4
