"""Rows a server started ahead and died before sending: told apart in the
store by the hello of the worker they were dealt to, and given back by the
reaper as soon as their session is dead, without the re-attach grace
(docs/architecture.md, "Workers and failures"; store/unheld.py). On SQLite
and PostgreSQL, with the in-process lease store and a fake clock.

The reaper's grace here is far longer than anything the tests wait: what
it gives back, it gave back without waiting for it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from tickwheel.shared.clock import FakeClock
from tickwheel.v1 import worker_pb2

from tickwheel_server.api.worker import MAX_IN_FLIGHT
from tickwheel_server.gateway.armed import DEFAULT_START_AHEAD
from tickwheel_server.gateway.connections import Connections
from tickwheel_server.gateway.gateway import Gateway
from tickwheel_server.lease.keys import SERVERS_PREFIX, session_name
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.maintenance.reaper import Reaper
from tickwheel_server.store.credentials import WorkerCredential
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store import unheld
from tickwheel_server.store.requeue import StreamGone
from tickwheel_server.store.tables import attempts, executions, jobs
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_armed_queue import finish, rows, sent, started_ahead
from .test_arming import add_one_off
from .test_gateway_liveness import connect

@pytest.fixture
def clock() -> FakeClock:
    """Time moves only when a test moves it (the lease sessions' renewals
    sleep: an autojumping clock would run ahead while the store works)."""
    return FakeClock()


LONG_GRACE = 3600.0
"""Never reached by these tests: a row given back was given back without it."""


def state(engine) -> dict[str, tuple]:
    """id -> (status, delivery, owner, worker_id, unheld_delivery)."""
    with engine.connect() as conn:
        found = conn.execute(sa.select(executions.c.id, executions.c.status, executions.c.delivery,
                                       executions.c.owner, executions.c.worker_id, executions.c.unheld_delivery))
        return {r.id: (r.status, r.delivery, r.owner, r.worker_id, r.unheld_delivery) for r in found}


def attempt_rows(engine) -> list[tuple]:
    with engine.connect() as conn:
        return sorted(tuple(r) for r in conn.execute(
            sa.select(attempts.c.execution_id, attempts.c.delivery, attempts.c.status, attempts.c.worker_id)))


async def survivor(engine, clock):
    """Server s2, alive in the lease store, with its own gateway and a
    reaper whose grace is :data:`LONG_GRACE`; s1 (the tests' ``started_ahead``
    gateway, owner "s1") has no live key: dead. (leases, s2 gateway, its
    connections, reaper)."""
    leases = MemoryLeaseStore(clock)
    session = await leases.open_session(60)
    await leases.put(SERVERS_PREFIX + "s2", "{}", session=session)
    owner = session_name(session.id)
    connections = Connections()
    queue = ExecutionQueue(engine, clock)
    gateway = Gateway(queue, connections, clock, owner=owner)
    reaper = Reaper(queue.requeues, leases, lambda: session, clock, server_id="s2", grace=LONG_GRACE)
    return leases, gateway, connections, reaper


async def test_a_started_row_its_worker_does_not_list_goes_back_at_once_when_its_server_is_dead(
    migrated_engine, clock
) -> None:
    """s1 started e1 and e2 for w1 and died before its instant. The reaper
    leaves them while nothing says no worker holds them; w1's hello at s2
    lists neither: they are marked, and the reaper's next pass gives them
    back (delivery 0, no attempt), long before its grace; s2 then hands
    them out as delivery 1 and their results count once."""
    _dead, _old = await started_ahead(migrated_engine, clock, "e1", "e2")
    assert {i: r[3] for i, r in state(migrated_engine).items()} == {"e1": "w1", "e2": "w1"}  # the start recorded w1
    leases, s2, connections, reaper = await survivor(migrated_engine, clock)
    assert await reaper.reap_once() == 0  # dead, but its worker may hold them: the grace applies
    assert {i: r[0] for i, r in state(migrated_engine).items()} == {"e1": "running", "e2": "running"}
    w1 = connect(connections, clock)
    assert await s2.liveness.reattach(w1, []) == ([], [])
    assert {i: r[4] for i, r in state(migrated_engine).items()} == {"e1": 1, "e2": 1}
    assert await reaper.reap_once() == 2 and reaper.released == 2
    assert {i: r[:3] for i, r in state(migrated_engine).items()} == {
        "e1": ("scheduled", 0, None), "e2": ("scheduled", 0, None)}
    assert attempt_rows(migrated_engine) == []  # no worker saw them: no attempt
    clock.advance(DEFAULT_START_AHEAD)
    assert await s2.rounds.hand_out_round() == 2
    assert await finish(s2, w1) == [("e1", 1), ("e2", 1)]
    assert {i: r[:2] for i, r in rows(migrated_engine).items()} == {"e1": ("succeeded", 1), "e2": ("succeeded", 1)}
    await leases.close()


async def test_a_worker_that_received_the_batch_keeps_it_and_only_the_unsent_go_back(migrated_engine, clock) -> None:
    """s1 sent e1 to w1 at its instant, then started e3 (a second later)
    and died before sending it. w1's hello at s2 lists e1: re-attached, its
    result counts, nothing runs twice; e3, not listed, goes back at once."""
    dead, old = await started_ahead(migrated_engine, clock, "e1", later=("e3",))
    clock.advance(DEFAULT_START_AHEAD)
    assert await dead.rounds.hand_out_round() == 1  # e1 sent; e3 started, to be sent in a second
    assert sent(old) == [("e1", 1)]
    assert state(migrated_engine)["e3"][:4] == ("running", 1, "s1", "w1")
    leases, s2, connections, reaper = await survivor(migrated_engine, clock)
    w1 = connect(connections, clock)
    assert await s2.liveness.reattach(w1, [("e1", 1)]) == ([("e1", 1)], [])
    now = state(migrated_engine)
    assert now["e1"][2:] == (s2.fence.owner, "w1", None) and now["e3"][4] == 1
    assert await reaper.reap_once() == 1
    await s2.intake.record(w1, [worker_pb2.ExecutionResult(
        execution_id="e1", delivery=1, attempt=1, outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED)])
    assert rows(migrated_engine)["e1"][:2] == ("succeeded", 1)
    assert state(migrated_engine)["e3"][:3] == ("scheduled", 0, None)
    clock.advance(DEFAULT_START_AHEAD)
    assert await s2.rounds.hand_out_round() == 1
    assert await finish(s2, w1) == [("e3", 1)]
    assert {i: r[:2] for i, r in rows(migrated_engine).items()} == {"e1": ("succeeded", 1), "e3": ("succeeded", 1)}
    assert [a[2] for a in attempt_rows(migrated_engine)] == []  # plain successes, on their rows; none lost
    await leases.close()


async def test_hostile_hellos_neither_take_nor_give_back_what_is_not_theirs(migrated_engine, clock) -> None:
    """Another tenant's worker with w1's id, a worker of the tenant with
    another id, another credential of the tenant with w1's id allowed only
    another handler, unknown ids, and a hello as long as one may be (it could
    have been cut) mark nothing and take nothing; a hello whose stream
    ended before its transaction committed writes nothing; what a worker
    disowned it cannot take back later."""
    _dead, _old = await started_ahead(migrated_engine, clock, "e1")
    await TenantStore(migrated_engine, clock).create(Tenant(name="globex"))
    leases, s2, connections, reaper = await survivor(migrated_engine, clock)

    impostor = connect(connections, clock, worker_id="w1")
    impostor.credential = WorkerCredential(id="c9", tenants=("globex",), handlers=(), http=True, description="",
                                           created_at=clock.now())
    assert await s2.liveness.reattach(impostor, [("e1", 1), ("nope:1", 1)]) == ([], [("e1", 1), ("nope:1", 1)])
    other = connect(connections, clock, worker_id="w2")
    assert await s2.liveness.reattach(other, [("e1", 1)]) == ([], [("e1", 1)])  # dealt to w1, not w2
    assert await s2.liveness.reattach(other, [("unknown:1", 3)]) == ([], [("unknown:1", 3)])
    # Another credential of acme, allowed only another handler, with w1's id.
    narrow = connect(connections, clock, worker_id="w1")
    narrow.credential = WorkerCredential(id="c8", tenants=("acme",), handlers=("report",), http=False,
                                         description="", created_at=clock.now())
    assert await s2.liveness.reattach(narrow, []) == ([], [])  # lists nothing: marks nothing it may not run
    assert state(migrated_engine)["e1"][4] is None
    assert await s2.liveness.reattach(narrow, [("e1", 1)]) == ([], [("e1", 1)])
    w1 = connect(connections, clock)
    # A hello of MAX_IN_FLIGHT entries may have been cut (api/worker.py passes listed_all=False for it).
    assert MAX_IN_FLIGHT == 20_000
    assert await s2.liveness.reattach(w1, [("x:1", 1)], listed_all=False) == ([], [("x:1", 1)])
    assert await s2.liveness.reattach(w1, [], listed_all=False) == ([], [])
    assert state(migrated_engine)["e1"][:5] == ("running", 1, "s1", "w1", None)
    assert await reaper.reap_once() == 0

    # The stream ends while the hello's transaction runs: rolled back.
    with pytest.raises(StreamGone):
        await ExecutionQueue(migrated_engine, clock).requeues.reattach(s2.fence.owner, "w1", [], tenants=("acme",),
                                         disown_since_us=0, still_open=lambda: False)
    assert state(migrated_engine)["e1"][4] is None

    assert await s2.liveness.reattach(w1, [("e2", 1)]) == ([], [("e2", 1)])  # does not list e1: disowned
    assert state(migrated_engine)["e1"][4] == 1
    later = connect(connections, clock)
    assert await s2.liveness.reattach(later, [("e1", 1)]) == ([], [("e1", 1)])  # said it had none: not taken
    assert await reaper.reap_once() == 1
    assert state(migrated_engine)["e1"][:5] == ("scheduled", 0, None, None, None)
    await leases.close()


async def test_a_hello_reads_at_most_its_bound_and_the_rows_past_it_wait_the_grace(
    migrated_engine, clock, monkeypatch
) -> None:
    """More running rows under one worker id than a hello may hold (a
    credential's many workers sharing the id; the bound lowered to 2 here):
    a hello reads at most the bound, in one statement, and marks only what
    it read; the rest are not marked, so the reaper leaves them to the
    re-attach grace. Nothing is lost and none goes back early; the next
    hello reads the next ones."""
    assert unheld.READ_BOUND == MAX_IN_FLIGHT  # a worker's own running rows are never more
    monkeypatch.setattr(unheld, "READ_BOUND", 2)
    _dead, _old = await started_ahead(migrated_engine, clock, "e1", "e2", "e3", "e4", "e5")
    leases, s2, connections, reaper = await survivor(migrated_engine, clock)
    w1 = connect(connections, clock)
    reads = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")) and "unheld_delivery" not in statement:
            reads.append(statement)

    sa.event.listen(migrated_engine, "before_cursor_execute", capture)
    try:
        assert await s2.liveness.reattach(w1, []) == ([], [])
    finally:
        sa.event.remove(migrated_engine, "before_cursor_execute", capture)
    assert [statement for statement in reads if "worker_id" in statement and "LIMIT" in statement.upper()], reads
    marked = sorted(i for i, r in state(migrated_engine).items() if r[4] == 1)
    assert len(marked) == 2
    assert await reaper.reap_once() == 2
    now = state(migrated_engine)
    assert sorted(i for i, r in now.items() if r[0] == "scheduled") == marked
    assert sorted(i for i, r in now.items() if r[:4] == ("running", 1, "s1", "w1")) == sorted(
        set(now) - set(marked))  # not read: left to the grace, still theirs
    assert await reaper.reap_once() == 0
    assert await s2.liveness.reattach(connect(connections, clock), []) == ([], [])
    assert sum(r[4] == 1 and r[0] == "running" for r in state(migrated_engine).values()) == 2
    await leases.close()


async def test_a_live_servers_rows_are_its_own_even_when_disowned(migrated_engine, clock) -> None:
    """s1 lives; w1's stream to it closed and w1 said hello at s2 without
    e1: the reaper leaves e1 to s1, which gives it back at its instant (the
    stream is closed) and clears the mark; handed out again, delivery 1,
    it carries none."""
    leases = MemoryLeaseStore(clock)
    alive = await leases.open_session(60)
    await leases.put(SERVERS_PREFIX + "s1", "{}", session=alive)
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_one_off(migrated_engine, clock, "e1", due_in=2)
    connections = Connections()
    connection = connect(connections, clock)
    gateway = Gateway(ExecutionQueue(migrated_engine, clock), connections, clock, owner=session_name(alive.id))
    await gateway.rounds.hand_out_round()
    clock.advance(2 - DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 0 and gateway.armed.waiting_to_send == 1
    connection.close()
    queue = ExecutionQueue(migrated_engine, clock)
    s2 = Gateway(queue, Connections(), clock, owner="s2")
    w1 = connect(Connections(), clock)
    assert await s2.liveness.reattach(w1, []) == ([], [])
    assert state(migrated_engine)["e1"][4] == 1
    reaper = Reaper(queue.requeues, leases, lambda: alive, clock, server_id="s2", grace=LONG_GRACE)
    assert await reaper.reap_once() == 0
    clock.advance(DEFAULT_START_AHEAD)
    await gateway.rounds.hand_out_round()
    assert state(migrated_engine)["e1"] == ("scheduled", 0, None, None, None)
    await leases.close()


async def test_a_credential_saying_hello_in_a_loop_marks_only_within_its_budget(migrated_engine, clock) -> None:
    """Each marking hello reads the credential's tenants' running rows: a
    credential reconnecting in a loop marks at most its budget's worth
    (MARKING_RATE a second, bursts of MARKING_BURST; 1 and 2 here); past
    it its hellos go on, marking nothing, until the bucket refills."""
    from tickwheel_server.gateway.budget import UnheldBudget
    from tickwheel_server.gateway.liveness import MARKING_BURST, MARKING_RATE

    assert (MARKING_RATE, MARKING_BURST) == (20.0, 200.0)
    _dead, _old = await started_ahead(migrated_engine, clock, "e1")
    leases, s2, connections, reaper = await survivor(migrated_engine, clock)
    s2.liveness._marking = UnheldBudget(clock, rate=1, burst=2)
    idle = connect(connections, clock, worker_id="w7")
    for _ in range(2):
        assert await s2.liveness.reattach(idle, []) == ([], [])  # nothing dealt to w7: marks nothing, spends a token
    w1 = connect(connections, clock)
    assert await s2.liveness.reattach(w1, []) == ([], [])  # the hello goes on
    assert state(migrated_engine)["e1"][4] is None and await reaper.reap_once() == 0
    clock.advance(1)
    assert await s2.liveness.reattach(w1, []) == ([], [])
    assert state(migrated_engine)["e1"][4] == 1 and await reaper.reap_once() == 1
    await leases.close()


async def test_a_given_back_run_whose_job_is_gone_ends_canceled_and_wakes_no_wheel(migrated_engine, clock) -> None:
    """s1 started e1 and e2 for w1 and died; e2's job was deleted while it
    ran. w1's hello at s2 lists neither. The reaper's give-back puts e1
    back and ends e2 ``canceled: job deleted`` (store/unsend.py), and only
    e1 goes to the wheel: a wheel entry for e2 would only wake the gateway
    for a row no round can hand out."""
    from tickwheel_server.store.timeline import DELETED_REASON

    _dead, _old = await started_ahead(migrated_engine, clock, "e1", "e2")
    with migrated_engine.begin() as conn:
        conn.execute(sa.delete(jobs).where(jobs.c.id == sa.select(executions.c.job_id).where(
            executions.c.id == "e2").scalar_subquery()))
    leases, s2, connections, reaper = await survivor(migrated_engine, clock)
    woken: list[list[str]] = []
    reaper._on_disarmed = lambda back: woken.append(sorted(r.execution_id for r in back))
    assert await s2.liveness.reattach(connect(connections, clock), []) == ([], [])
    assert await reaper.reap_once() == 2 and reaper.released == 2  # both ended, at once
    assert woken == [["e1"]]
    now = state(migrated_engine)
    assert now["e1"][:3] == ("scheduled", 0, None) and now["e2"][:3] == ("canceled", 0, None)
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(executions.c.dead_reason).where(executions.c.id == "e2")).scalar() \
            == DELETED_REASON
    assert attempt_rows(migrated_engine) == []
    await leases.close()
