"""Hand-out fenced by the session and by the clock guard, and the safety net
under hand-outs that reached no worker; with fake clocks and the in-process
lease store, on SQLite and PostgreSQL (issue 15, items 10 and 12).

A frozen process is modelled by :meth:`FakeClock.freeze`: both clocks jump
and no task has run yet, which is what a server finds on waking from
SIGSTOP or a long pause. A stepped wall clock by :meth:`FakeClock.step_wall`.
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import worker_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel_server.errors import Unavailable
from tickwheel_server.gateway.connections import Connections
from tickwheel_server.gateway.gateway import Gateway
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.lease.keys import session_name
from tickwheel_server.store.errors import AmbiguousCommitError
from tickwheel_server.store.executions import HandOutRound
from tickwheel_server.store.handout import HandoutStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions, tenant_gates
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_gateway_liveness import connect, drain_outbox, status_of
from .test_handout import ANY_ECHO, add_execution, committed_unanswered
from tickwheel_server.store.history import attempt_history

# Every recorded attempt: the table's rows and those plain successes keep on their execution rows.
attempts = attempt_history()

TTL = 10
TIMEOUT = 30.0


@pytest.fixture
def clock() -> FakeClock:
    # Not autojump: a lease store's keep-alive task would run time away.
    return FakeClock()


@pytest.fixture
async def leases(clock):
    store = MemoryLeaseStore(clock)
    yield store
    await store.close()


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def elapse(clock: FakeClock, seconds: float, step: float = 1.0) -> None:
    """Let ``seconds`` pass in steps, the session's keep-alive renewing as it would."""
    while seconds > 0:
        clock.advance(min(step, seconds))
        seconds -= step
        await settle()


async def setup(engine, clock, *idents: str) -> Connections:
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    for ident in idents:
        add_execution(engine, clock, ident)
    return Connections()


def gateway_for(engine, clock, connections, session, store: ExecutionQueue | None = None, **options) -> Gateway:
    store = store or ExecutionQueue(engine, clock, rng=random.Random(1))
    return Gateway(store, connections, clock, owner=session_name(session.id), session=session,
                   heartbeat_timeout=TIMEOUT, reattach_grace=TTL, **options)


def sent(connection) -> list[tuple[str, int]]:
    return [(a.execution_id, a.delivery) for m in drain_outbox(connection) for a in m.assignment.assignments]


# --------------------------------------------------------------------------- the session fence


async def test_a_session_whose_renewals_stop_hands_out_nothing_before_it_is_even_lost(
    migrated_engine, clock, leases
) -> None:
    connections = await setup(migrated_engine, clock, "e1")
    connection = connect(connections, clock)
    session = await leases.open_session(TTL, keepalive=False)  # renewals that do not happen
    gateway = gateway_for(migrated_engine, clock, connections, session)
    assert await gateway.rounds.hand_out_round() == 1
    add_execution(migrated_engine, clock, "e2")
    clock.advance(TTL * 0.8)  # 2 s left: the lease still exists, but not surely for a quarter TTL more
    await settle()
    assert not session.lost.is_set()
    assert await gateway.rounds.hand_out_round() == 0
    assert status_of(migrated_engine, "e2")[:3] == ("scheduled", None, 0)
    assert sent(connection) == [("e1", 1)]


async def test_a_session_in_doubt_re_attaches_nothing(migrated_engine, clock, leases) -> None:
    # A re-attachment stamps the row with this server's session: under a
    # session about to be reaped the work would be taken back and run twice.
    connections = await setup(migrated_engine, clock, "e1")
    first = connect(connections, clock)
    session = await leases.open_session(TTL, keepalive=False)
    gateway = gateway_for(migrated_engine, clock, connections, session)
    assert await gateway.rounds.hand_out_round() == 1
    gateway.liveness.disconnected(first)
    connections.remove(first)
    with migrated_engine.begin() as conn:  # as if handed out by a server since gone
        conn.execute(sa.update(executions).where(executions.c.id == "e1").values(owner="session-gone"))
    clock.advance(TTL * 0.8)
    await settle()
    again = connect(connections, clock)
    with pytest.raises(Unavailable, match="in doubt"):
        await gateway.liveness.reattach(again, [("e1", 1)])
    assert status_of(migrated_engine, "e1")[:3] == ("running", "session-gone", 1)
    assert ("e1", 1) not in gateway.inflight.held_by(again)


async def test_a_server_frozen_past_its_ttl_hands_nothing_out_under_the_dead_session(
    migrated_engine, clock, leases
) -> None:
    connections = await setup(migrated_engine, clock, "e1")
    connection = connect(connections, clock)
    session = await leases.open_session(TTL)
    old = session_name(session.id)
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(1))
    gateway = gateway_for(migrated_engine, clock, connections, session, store)
    assert await gateway.rounds.hand_out_round() == 1
    add_execution(migrated_engine, clock, "e2")
    clock.freeze(TTL + 1)  # SIGSTOP past the TTL, then SIGCONT: the hand-out runs before anything else
    assert not session.lost.is_set()
    assert await gateway.rounds.hand_out_round() == 0
    assert status_of(migrated_engine, "e2")[:3] == ("scheduled", None, 0)
    clock.advance(0)  # the lease store's own task runs: the lease is gone
    await asyncio.wait_for(session.lost.wait(), 1)
    assert await gateway.rounds.hand_out_round() == 0
    # What the server does: a new session, its running executions re-stamped, then hand-out under it.
    fresh = await leases.open_session(TTL)
    new = session_name(fresh.id)
    assert await store.requeues.restamp(old, new) == 1
    gateway.use_session(fresh, new)
    assert await gateway.rounds.hand_out_round() == 1
    assert status_of(migrated_engine, "e1")[:2] == ("running", new)
    assert status_of(migrated_engine, "e2")[:3] == ("running", new, 1)
    assert sent(connection) == [("e1", 1), ("e2", 1)]


class _FrozenBeforeCommit(HandoutStore):
    """A store whose claim transaction is frozen past the TTL after it took
    its rows and before it commits (``freeze`` seconds, once)."""

    freeze = 0.0

    def _round(self, *args, **kwargs):
        claimed = super()._round(*args, **kwargs)
        if self.freeze:
            self.clock.freeze(self.freeze)
            self.freeze = 0.0
        return claimed


async def test_a_claim_frozen_past_the_ttl_before_it_commits_is_rolled_back(migrated_engine, clock, leases) -> None:
    connections = await setup(migrated_engine, clock, "e1")
    connection = connect(connections, clock)
    session = await leases.open_session(TTL)
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(1))
    store.handout = _FrozenBeforeCommit(migrated_engine, clock)
    store.handout.freeze = TTL + 1
    gateway = gateway_for(migrated_engine, clock, connections, session, store)
    await TenantStore(migrated_engine, clock).update("acme", max_concurrency=5)  # a gate row is written too
    assert await gateway.rounds.hand_out_round() == 0
    assert status_of(migrated_engine, "e1")[:3] == ("scheduled", None, 0)
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(tenant_gates)).scalar() == 0
    assert sent(connection) == []


async def test_the_store_rolls_back_a_claim_its_fence_refuses(migrated_engine, clock) -> None:
    await setup(migrated_engine, clock, "e1")
    store = ExecutionQueue(migrated_engine, clock)
    claimed = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10, fence=lambda: "session in doubt")
    assert claimed == [] and claimed.fenced == "session in doubt"
    assert status_of(migrated_engine, "e1")[:3] == ("scheduled", None, 0)
    claimed = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10, fence=lambda: None)
    assert [h.id for h in claimed] == ["e1"] and claimed.fenced is None


class _FrozenAfterCommit(HandoutStore):
    """A store whose claim commits, and then the process is frozen past the TTL before the deal."""

    freeze = 0.0

    async def hand_out_ready(self, *args, **kwargs) -> HandOutRound:
        claimed = await super().hand_out_ready(*args, **kwargs)
        if self.freeze and claimed:
            self.clock.freeze(self.freeze)
            self.freeze = 0.0
        return claimed


async def test_claimed_executions_are_given_back_when_the_session_is_in_doubt_at_the_deal(
    migrated_engine, clock, leases
) -> None:
    connections = await setup(migrated_engine, clock, "e1", "e2")
    connection = connect(connections, clock)
    session = await leases.open_session(TTL)
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(1))
    store.handout = _FrozenAfterCommit(migrated_engine, clock)
    store.handout.freeze = TTL + 1
    gateway = gateway_for(migrated_engine, clock, connections, session, store)
    assert await gateway.rounds.hand_out_round() == 0
    for ident in ("e1", "e2"):
        assert status_of(migrated_engine, ident)[:3] == ("scheduled", None, 0)
    assert sent(connection) == [] and len(gateway.inflight) == 0
    assert connection.credit == 10


async def test_results_of_a_delivery_reaped_while_its_server_was_frozen_are_stale(
    migrated_engine, clock, leases
) -> None:
    connections = await setup(migrated_engine, clock, "e1")
    here = connect(connections, clock, worker_id="w1")
    session = await leases.open_session(TTL)
    old = session_name(session.id)
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(1))
    gateway = gateway_for(migrated_engine, clock, connections, session, store)
    assert await gateway.rounds.hand_out_round() == 1
    [key] = gateway.inflight.held_by(here)
    clock.freeze(3 * TTL)  # frozen: the session expired and another server's reaper took e1 ...
    reaped = await store.requeues.reap_owner(old, "server session expired")
    assert [r.execution_id for r in reaped.requeued] == ["e1"]
    elsewhere = Connections()
    there = connect(elsewhere, clock, worker_id="w2")
    other = Gateway(ExecutionQueue(migrated_engine, clock), elsewhere, clock, owner="s2")
    assert await other.rounds.hand_out_round() == 1  # ... and handed it out again
    assert status_of(migrated_engine, "e1")[:3] == ("running", "s2", 2)
    # The frozen server wakes: its worker heartbeats and reports the reaped delivery.
    gateway.liveness.heartbeat(here, [key])
    await gateway.intake.record(here, [worker_pb2.ExecutionResult(
        execution_id=key[0], delivery=key[1], attempt=1, outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED)])
    [ack] = [m.ack for m in drain_outbox(here) if m.WhichOneof("message") == "ack"]
    assert not ack.acks[0].accepted and "stale delivery" in ack.acks[0].reason
    assert status_of(migrated_engine, "e1")[:3] == ("running", "s2", 2)
    clock.advance(0)
    await asyncio.wait_for(session.lost.wait(), 1)
    fresh = await leases.open_session(TTL)
    assert await store.requeues.restamp(old, session_name(fresh.id)) == 0  # what the reaper took stays taken
    [delivery] = [(a.execution_id, a.delivery) for m in drain_outbox(there) for a in m.assignment.assignments]
    await other.intake.record(there, [worker_pb2.ExecutionResult(
        execution_id="e1", delivery=delivery[1], attempt=1, outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED)])
    with migrated_engine.connect() as conn:
        rows = conn.execute(sa.select(attempts.c.delivery, attempts.c.status).order_by(attempts.c.delivery)).all()
    assert [tuple(r) for r in rows] == [(1, "lost"), (2, "succeeded")]
    assert status_of(migrated_engine, "e1")[0] == "succeeded"


# --------------------------------------------------------------------------- the safety net


async def test_a_running_execution_nothing_holds_is_requeued_by_the_safety_net(migrated_engine, clock, leases) -> None:
    connections = await setup(migrated_engine, clock, "held")
    connection = connect(connections, clock, slots=1)
    session = await leases.open_session(TTL)
    owner = session_name(session.id)
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(1))
    gateway = gateway_for(migrated_engine, clock, connections, session, store)
    assert await gateway.rounds.hand_out_round() == 1
    # A claim whose commit the gateway never learnt of (its connection broke while committing).
    add_execution(migrated_engine, clock, "orphan")
    assert [h.id for h in await store.handout.hand_out_ready(owner, clock.now(), ANY_ECHO, 10)] == ["orphan"]
    passes = 0
    while status_of(migrated_engine, "orphan")[0] == "running":
        await gateway.liveness.requeue_orphans()
        passes += 1
        assert passes <= TIMEOUT / 5 + 3, "not requeued within the timeout and two passes"
        await elapse(clock, 5)  # the liveness loop's pace
        gateway.liveness.heartbeat(connection, gateway.inflight.held_by(connection))
    assert passes > TIMEOUT / 5  # not before it was handed out a heartbeat timeout ago
    status, owner_now, delivery, reaps = status_of(migrated_engine, "orphan")
    assert (status, owner_now, delivery, reaps) == ("scheduled", None, 1, 0)  # not counted towards poison
    assert status_of(migrated_engine, "held")[:2] == ("running", owner)
    assert gateway.liveness.orphans_requeued == 1
    with migrated_engine.connect() as conn:
        lost = conn.execute(sa.select(attempts.c.execution_id, attempts.c.status, attempts.c.error)).all()
    assert [(r.execution_id, r.status) for r in lost] == [("orphan", "lost")]
    assert "no worker of this server holding it" in lost[0].error


async def test_the_safety_net_spares_what_is_re_attached_between_two_passes(migrated_engine, clock, leases) -> None:
    connections = await setup(migrated_engine, clock, "e1")
    session = await leases.open_session(TTL)
    owner = session_name(session.id)
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(1))
    gateway = gateway_for(migrated_engine, clock, connections, session, store)
    # Handed out by a server that died; its worker reconnects here.
    [handed] = await store.handout.hand_out_ready("dead", clock.now(), ANY_ECHO, 10)
    await elapse(clock, TIMEOUT + 1)
    await store.requeues.reattach(owner, "w1", [(handed.id, handed.delivery)], tenants=("acme",))  # committed, not yet entered in memory
    await gateway.liveness.requeue_orphans()  # sees it unheld: a suspect only
    worker = connect(connections, clock)
    attached, _ = await gateway.liveness.reattach(worker, [(handed.id, handed.delivery)])
    assert attached == [(handed.id, handed.delivery)]
    await elapse(clock, 5)
    result = await gateway.liveness.requeue_orphans()
    assert not result.requeued and status_of(migrated_engine, "e1")[:2] == ("running", owner)


async def test_the_safety_net_reads_a_page_at_a_time_and_still_finds_every_orphan(
    migrated_engine, clock, leases
) -> None:
    connections = await setup(migrated_engine, clock, *(f"e{n}" for n in range(5)))
    session = await leases.open_session(TTL)
    owner = session_name(session.id)
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(1))
    gateway = gateway_for(migrated_engine, clock, connections, session, store)
    assert len(await store.handout.hand_out_ready(owner, clock.now(), ANY_ECHO, 10)) == 5
    for _ in range(7):  # a page of 2: three passes a cycle, each orphan seen twice in two cycles
        await elapse(clock, TIMEOUT / 2)
        await gateway.liveness.requeue_orphans(page=2)
    with migrated_engine.connect() as conn:
        statuses = conn.execute(sa.select(executions.c.status).distinct()).scalars().all()
    assert statuses == ["scheduled"] and gateway.liveness.orphans_requeued == 5


# --------------------------------------------------------------------------- the clock guard


async def _clock_setup(engine, clock, db_clock, **options) -> tuple[Gateway, list]:
    connections = await setup(engine, clock, "e1")
    connect(connections, clock)
    reported: list = []

    async def on_skew(skew, ok) -> None:
        reported.append((skew, ok))

    gateway = Gateway(ExecutionQueue(engine, clock), connections, clock, owner="s1", db_clock=db_clock,
                      on_skew=on_skew, **options)
    return gateway, reported


async def test_no_hand_out_while_the_database_clock_cannot_be_read(migrated_engine, clock) -> None:
    async def failing():
        raise ConnectionError("database unreachable")

    gateway, reported = await _clock_setup(migrated_engine, clock, failing, skew_grace=2)
    for _ in range(3):
        await gateway.fence.check_skew_if_due()
        assert await gateway.rounds.hand_out_round() == 0
        clock.advance(1)
    assert status_of(migrated_engine, "e1")[0] == "scheduled"
    assert reported == [(None, False)]  # the alert, once the grace is over: the clocks cannot be compared


async def test_no_hand_out_while_every_read_of_the_database_clock_is_too_slow(migrated_engine, clock) -> None:
    async def slow():
        read = clock.now()
        clock.advance(0.6)  # the answer arrives 600 ms later: says nothing within 250 ms
        return read

    gateway, _ = await _clock_setup(migrated_engine, clock, slow)
    for _ in range(5):
        await gateway.fence.check_skew_if_due()
        assert await gateway.rounds.hand_out_round() == 0
        clock.advance(1)
    assert status_of(migrated_engine, "e1")[0] == "scheduled"


async def test_a_failed_check_is_tried_again_within_a_second_not_a_minute(migrated_engine, clock) -> None:
    fails = [True]

    async def db_clock():
        if fails[0]:
            raise ConnectionError("not yet")
        return clock.now()

    gateway, reported = await _clock_setup(migrated_engine, clock, db_clock)
    await gateway.fence.check_skew_if_due()
    assert await gateway.rounds.hand_out_round() == 0
    fails[0] = False
    clock.advance(1)
    await gateway.fence.check_skew_if_due()
    assert await gateway.rounds.hand_out_round() == 1
    assert reported == [(0.0, True)]  # one failed read within the grace raised nothing


async def test_an_old_verdict_stops_counting_once_checks_keep_failing(migrated_engine, clock) -> None:
    fails = [False]

    async def db_clock():
        if fails[0]:
            raise ConnectionError("down")
        return clock.now()

    gateway, reported = await _clock_setup(migrated_engine, clock, db_clock, skew_check_interval=60)
    await gateway.fence.check_skew_if_due()
    assert gateway.fence.handing_out
    fails[0] = True
    for _ in range(119):  # two minutes of failed checks, one a second after the first: the verdict holds
        clock.advance(1)
        await gateway.fence.check_skew_if_due()
    assert gateway.fence.handing_out
    clock.advance(1.5)
    await gateway.fence.check_skew_if_due()
    assert not gateway.fence.handing_out and await gateway.rounds.hand_out_round() == 0
    assert reported == [(0.0, True), (None, False)]


async def test_a_wall_clock_stepped_forward_stops_hand_out_until_checked_again(migrated_engine, clock) -> None:
    async def database():  # the database keeps the true time: the server's clock before the step
        return clock.now() - step[0]

    step = [timedelta(0)]
    gateway, reported = await _clock_setup(migrated_engine, clock, database)
    await gateway.fence.check_skew_if_due()
    assert await gateway.rounds.hand_out_round() == 1
    add_execution(migrated_engine, clock, "e2", due_in=5)
    clock.step_wall(10)
    step[0] = timedelta(seconds=10)
    assert not gateway.fence.handing_out  # at once, before any check
    assert await gateway.rounds.hand_out_round() == 0  # e2 is due in 5 s by the true time: it would be early
    await gateway.fence.check_skew_if_due()  # checked again at once, not a minute later
    assert reported[-1] == (10.0, False)
    assert await gateway.rounds.hand_out_round() == 0
    assert status_of(migrated_engine, "e2")[0] == "scheduled"


async def test_a_wall_clock_stepped_back_hands_out_by_the_new_reading(migrated_engine, clock) -> None:
    async def database():  # the database agrees with the server before and after the step
        return clock.now()

    gateway, _ = await _clock_setup(migrated_engine, clock, database)
    await gateway.fence.check_skew_if_due()
    assert await gateway.rounds.hand_out_round() == 1
    clock.step_wall(-3600)
    add_execution(migrated_engine, clock, "soon", due_in=1800)  # due in 30 min by the clock it now reads
    add_execution(migrated_engine, clock, "now")
    assert not gateway.fence.handing_out
    await gateway.fence.check_skew_if_due()
    assert gateway.fence.handing_out
    assert await gateway.rounds.hand_out_round() == 1
    assert status_of(migrated_engine, "soon")[0] == "scheduled"
    assert status_of(migrated_engine, "now")[0] == "running"


async def test_the_claim_never_judges_by_an_instant_from_before_the_clock_stepped_back(migrated_engine, clock) -> None:
    await setup(migrated_engine, clock, "e1")
    store = ExecutionQueue(migrated_engine, clock)
    assert [h.id for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)] == ["e1"]
    clock.step_wall(-3600)
    add_execution(migrated_engine, clock, "e2", due_in=1800)
    assert await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10) == []
    clock.advance(1800)
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)
    assert handed.id == "e2" and handed.handed_out_at_us >= handed.due_at_us


async def test_a_round_whose_commit_went_unanswered_is_sent_by_the_next_round_not_the_safety_net(
    migrated_engine, clock, leases, monkeypatch
) -> None:
    """PostgreSQL stops during a round's COMMIT, which did commit: the round
    fails, and its rows are ``running`` under this live session, sent by no
    one. The next round takes them back and sends them, at once, not at the
    safety net's heartbeat timeout; the worker gets each once."""
    connections = await setup(migrated_engine, clock, "e1", "e2")
    connection = connect(connections, clock)
    session = await leases.open_session(TTL)
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(1))
    gateway = gateway_for(migrated_engine, clock, connections, session, store)
    monkeypatch.setattr(store.handout, "_tx", committed_unanswered(store.handout._tx))
    with pytest.raises(AmbiguousCommitError):
        await gateway.rounds.hand_out_round()
    assert {status_of(migrated_engine, i)[0] for i in ("e1", "e2")} == {"running"}
    assert sent(connection) == [] and connection.credit == 10
    monkeypatch.undo()
    assert await gateway.rounds.hand_out_round() == 2
    assert sorted(sent(connection)) == [("e1", 1), ("e2", 1)]
    assert store.handout.in_doubt.entries == []
