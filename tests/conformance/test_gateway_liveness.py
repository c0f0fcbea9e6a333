"""The gateway's watch over what its workers hold: heartbeats, timeouts,
streams that close, re-attachment, retries into the wheel, cancel requests
made on any server; with a fake clock, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random

import sqlalchemy as sa
from tickwheel.v1 import worker_pb2

from tickwheel_server.gateway import rounds as rounds_module
from tickwheel_server.gateway.connections import Connections, WorkerConnection
from tickwheel_server.gateway.gateway import Gateway
from tickwheel_server.store.credentials import WorkerCredential
from tickwheel_server.store.handout import HandoutStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.history import HistoryStore, attempt_history
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import add_execution

# Every recorded attempt: the table's rows and those plain successes keep on their execution rows.
attempts = attempt_history()

TIMEOUT = 30.0
GRACE = 10.0


def connect(connections: Connections, clock, worker_id: str = "w1", slots: int = 10) -> WorkerConnection:
    credential = WorkerCredential(
        id="c1", tenants=("acme",), handlers=(), http=True, description="", created_at=clock.now()
    )
    connection = WorkerConnection(
        worker_id=worker_id, credential=credential, handlers=frozenset({"echo"}), http=True, slots=slots,
        connected_at=clock.now(), credit=slots,
    )
    connections.add(connection)
    return connection


def drain_outbox(connection: WorkerConnection) -> list[worker_pb2.PullResponse]:
    messages = []
    while not connection.outbox.empty():
        message = connection.outbox.get_nowait()
        if message is not None:
            messages.append(message)
    return messages


def status_of(engine, ident: str) -> tuple:
    with engine.connect() as conn:
        row = conn.execute(sa.select(executions).where(executions.c.id == ident)).one()
    return row.status, row.owner, row.delivery, row.reap_count


def make_gateway(engine, clock, connections, retries=None, *, poison_cap: int = 3) -> Gateway:
    store = ExecutionQueue(engine, clock, rng=random.Random(1), poison_cap=poison_cap)
    return Gateway(store, connections, clock, owner="s1", heartbeat_timeout=TIMEOUT, reattach_grace=GRACE,
                   on_retry=None if retries is None else retries.append)


async def test_a_job_heartbeating_for_twenty_timeouts_is_never_requeued(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    connections = Connections()
    connection = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 1
    [key] = gateway.inflight.held_by(connection)
    for _ in range(20 * 6):
        clock.advance(TIMEOUT / 6)
        gateway.liveness.heartbeat(connection, [key])
        result = await gateway.liveness.requeue_expired()
        assert not result.requeued
    assert status_of(migrated_engine, "e1")[0] == "running"
    result = worker_pb2.ExecutionResult(
        execution_id=key[0], delivery=key[1], attempt=1, outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED)
    result.started_at.FromMicroseconds(1_780_000_000_123_456)  # the worker's own start, by its clock
    await gateway.intake.record(connection, [result])
    assert status_of(migrated_engine, "e1")[0] == "succeeded" and len(gateway.inflight) == 0
    with migrated_engine.connect() as conn:
        started = conn.execute(sa.select(attempts.c.worker_started_at).where(attempts.c.execution_id == "e1")).scalar()
    assert started == 1_780_000_000_123_456


async def test_silence_for_the_timeout_requeues_and_tells_the_worker_to_cancel(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "e2")
    connections = Connections()
    connection = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 2
    drain_outbox(connection)
    alive, silent = sorted(gateway.inflight.held_by(connection))
    clock.advance(TIMEOUT - 1)
    gateway.liveness.heartbeat(connection, [alive, ("unknown", 3)])
    assert not (await gateway.liveness.requeue_expired()).requeued
    clock.advance(1)
    result = await gateway.liveness.requeue_expired()
    assert [r.execution_id for r in result.requeued] == [silent[0]]
    assert status_of(migrated_engine, silent[0]) == ("scheduled", None, silent[1], 1)
    assert status_of(migrated_engine, alive[0])[0] == "running"
    [cancel] = [m.cancel for m in drain_outbox(connection) if m.WhichOneof("message") == "cancel"]
    assert [(e.execution_id, e.delivery) for e in cancel.executions] == [silent]
    # The worker's CANCELED result for the requeued delivery is rejected, the hand-out goes on.
    await gateway.intake.record(connection, [worker_pb2.ExecutionResult(
        execution_id=silent[0], delivery=silent[1], attempt=1, outcome=worker_pb2.RESULT_OUTCOME_CANCELED)])
    [ack] = [m.ack for m in drain_outbox(connection) if m.WhichOneof("message") == "ack"]
    assert not ack.acks[0].accepted
    connection.credit = 1
    assert await gateway.rounds.hand_out_round() == 1
    assert status_of(migrated_engine, silent[0])[:3] == ("running", "s1", silent[1] + 1)


async def test_a_stream_silent_for_the_timeout_is_handed_nothing_until_it_speaks(migrated_engine, clock) -> None:
    """A frozen worker keeps its stream and its credit; what it were given
    would wait another timeout. Its requeued delivery, and new work, go to
    the worker that speaks."""
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    connections = Connections()
    frozen = connect(connections, clock, "frozen", slots=2)
    frozen.last_message = clock.monotonic()
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 1
    [held] = gateway.inflight.held_by(frozen)
    clock.advance(TIMEOUT)
    assert [r.execution_id for r in (await gateway.liveness.requeue_expired()).requeued] == [held[0]]
    add_execution(migrated_engine, clock, "e2")
    assert frozen.credit == 1
    assert await gateway.rounds.hand_out_round() == 0, "a silent stream is given nothing"
    alive = connect(connections, clock, "alive", slots=2)
    alive.last_message = clock.monotonic()
    assert await gateway.rounds.hand_out_round() == 2
    assert sorted(key[0] for key in gateway.inflight.held_by(alive)) == ["e1", "e2"]
    assert gateway.inflight.held_by(frozen) == []
    frozen.last_message = clock.monotonic()  # it speaks again: eligible again
    add_execution(migrated_engine, clock, "e3")
    assert await gateway.rounds.hand_out_round() == 1


async def test_a_closed_stream_waits_the_grace_then_requeues_unless_re_attached(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "e2")
    connections = Connections()
    first = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 2
    back, gone = sorted(gateway.inflight.held_by(first))
    first.close()
    connections.remove(first)
    gateway.liveness.disconnected(first)
    clock.advance(GRACE / 2)
    assert not (await gateway.liveness.requeue_expired()).requeued
    second = connect(connections, clock)  # the same worker reconnects with one of the two
    attached, rejected = await gateway.liveness.reattach(second, [back, ("e2", gone[1] + 7)])
    assert attached == [back] and rejected == [("e2", gone[1] + 7)]
    clock.advance(GRACE / 2)
    result = await gateway.liveness.requeue_expired()
    assert [r.execution_id for r in result.requeued] == [gone[0]]
    assert status_of(migrated_engine, back[0])[:2] == ("running", "s1")
    assert gateway.inflight.held_by(second) == [back]


async def test_a_worker_killed_every_time_is_dead_lettered_as_poison(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    connections = Connections()
    gateway = make_gateway(migrated_engine, clock, connections, poison_cap=3)
    for life in range(4):
        connection = connect(connections, clock, worker_id=f"w{life}")
        assert await gateway.rounds.hand_out_round() == 1
        connection.close()
        connections.remove(connection)
        gateway.liveness.disconnected(connection)
        clock.advance(GRACE)
        result = await gateway.liveness.requeue_expired()
    assert not result.requeued and [d.execution_id for d in result.dead] == ["e1"]
    status, _, delivery, reaps = status_of(migrated_engine, "e1")
    assert (status, delivery, reaps) == ("dead", 4, 4)
    with migrated_engine.connect() as conn:
        workers = conn.execute(sa.select(attempts.c.worker_id).order_by(attempts.c.delivery)).scalars().all()
    assert workers == ["w0", "w1", "w2", "w3"]


async def test_a_retry_goes_to_the_timer_wheel_at_its_ready_instant(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    connections = Connections()
    connection = connect(connections, clock)
    retries: list = []
    gateway = make_gateway(migrated_engine, clock, connections, retries)
    assert await gateway.rounds.hand_out_round() == 1
    [key] = gateway.inflight.held_by(connection)
    await gateway.intake.record(connection, [worker_pb2.ExecutionResult(
        execution_id=key[0], delivery=key[1], attempt=1, outcome=worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE)])
    with migrated_engine.connect() as conn:
        ready_at = conn.execute(sa.select(executions.c.ready_at)).scalar()
    assert [(r.execution_id, r.ready_at_us, r.partition) for r in retries] == [("e1", ready_at, 0)]


async def test_a_cancel_requested_through_another_server_reaches_the_worker_holding_it(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "e2")
    here, there = Connections(), Connections()
    connection = connect(here, clock)
    elsewhere = connect(there, clock, worker_id="w2")
    gateway = make_gateway(migrated_engine, clock, here)
    other = Gateway(ExecutionQueue(migrated_engine, clock), there, clock, owner="s2")
    assert await gateway.rounds.hand_out_round() == 2
    drain_outbox(connection)
    # CancelExecution arrives at the other server: it records the request.
    canceled = await HistoryStore(migrated_engine, clock).cancel_execution("acme", "e1", "wrong input")
    assert canceled.status == "running"
    assert await other.liveness.signal_cancels() == 0  # not its execution
    assert drain_outbox(elsewhere) == []
    assert await gateway.liveness.signal_cancels() == 1
    [cancel] = [m.cancel for m in drain_outbox(connection) if m.WhichOneof("message") == "cancel"]
    [key] = [(e.execution_id, e.delivery) for e in cancel.executions]
    assert key[0] == "e1" and cancel.reason == "canceled: wrong input"
    assert await gateway.liveness.signal_cancels() == 0  # told once
    await gateway.intake.record(connection, [worker_pb2.ExecutionResult(
        execution_id=key[0], delivery=key[1], attempt=1, outcome=worker_pb2.RESULT_OUTCOME_CANCELED)])
    with migrated_engine.connect() as conn:
        row = conn.execute(sa.select(executions).where(executions.c.id == "e1")).one()
    assert (row.status, row.dead_reason) == ("canceled", "canceled: wrong input")
    assert status_of(migrated_engine, "e2")[0] == "running"


async def test_a_cancel_for_a_delivery_whose_stream_closed_is_told_after_it_re_attaches(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    connections = Connections()
    first = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 1
    [key] = gateway.inflight.held_by(first)
    first.close()
    connections.remove(first)
    gateway.liveness.disconnected(first)
    await HistoryStore(migrated_engine, clock).cancel_execution("acme", "e1")
    assert await gateway.liveness.signal_cancels() == 0  # nobody to tell yet
    second = connect(connections, clock)
    assert (await gateway.liveness.reattach(second, [key]))[0] == [key]
    assert await gateway.liveness.signal_cancels() == 1
    [cancel] = [m.cancel for m in drain_outbox(second) if m.WhichOneof("message") == "cancel"]
    assert [(e.execution_id, e.delivery) for e in cancel.executions] == [key]


async def test_a_skewed_clock_stops_hand_out_and_raises_an_alert_until_they_agree(migrated_engine, clock) -> None:
    from datetime import timedelta

    from tickwheel_server.alerts.catalogue import NewAlert, clock_skew_key
    from tickwheel_server.store.alerts import AlertStore

    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    alerts = AlertStore(migrated_engine, clock)
    offset = [timedelta(milliseconds=400)]

    async def db_clock():
        return clock.now() - offset[0]

    async def on_skew(skew: float, ok: bool) -> None:  # what the server does with it
        if ok:
            await alerts.resolve(clock_skew_key("s1"))
        else:
            await alerts.raise_alert(NewAlert(key=clock_skew_key("s1"), kind="clock_skew", severity="critical",
                                              summary=f"{skew:+.3f} s", server_id="s1"))

    connections = Connections()
    connect(connections, clock)
    gateway = Gateway(ExecutionQueue(migrated_engine, clock), connections, clock, owner="s1", db_clock=db_clock,
                      on_skew=on_skew)
    await gateway.fence.check_skew()
    assert not gateway.fence.handing_out and gateway.fence.clock_skew == 0.4
    assert await gateway.rounds.hand_out_round() == 0
    assert (await alerts.get(clock_skew_key("s1"))).kind == "clock_skew"
    offset[0] = timedelta(milliseconds=-200)
    await gateway.fence.check_skew()
    assert gateway.fence.handing_out and await alerts.get(clock_skew_key("s1")) is None
    assert await gateway.rounds.hand_out_round() == 1


async def test_a_slow_read_of_the_database_clock_is_not_taken_for_skew(migrated_engine, clock) -> None:
    # A read of the database's clock that took a second (a busy server or
    # store, as under load) says nothing about the clocks: the last verdict
    # holds (a first one must come from a conclusive read: see
    # test_handout_fence.py); a read that took 100 ms is judged with that
    # half-round-trip benefit of the doubt.
    from datetime import timedelta

    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    delay = [0.0]

    async def db_clock():
        read = clock.now()
        clock.advance(delay[0])  # the answer arrives this much later
        return read

    connections = Connections()
    connect(connections, clock)
    gateway = Gateway(ExecutionQueue(migrated_engine, clock), connections, clock, owner="s1", db_clock=db_clock)
    assert not gateway.fence.handing_out  # not compared yet
    assert await gateway.fence.check_skew() and gateway.fence.handing_out and gateway.fence.clock_skew == 0.0
    delay[0] = 1.0
    assert not await gateway.fence.check_skew()
    assert gateway.fence.handing_out and gateway.fence.clock_skew == 0.0
    delay[0] = 0.1
    await gateway.fence.check_skew()
    assert gateway.fence.handing_out and abs(gateway.fence.clock_skew - 0.05) < 1e-6

    async def behind():  # 400 ms behind, read at once
        return clock.now() - timedelta(milliseconds=400)

    gateway.fence._db_clock = behind
    await gateway.fence.check_skew()
    assert not gateway.fence.handing_out


class _ClaimsWatched(HandoutStore):
    """A store that records when each claim starts and ends; with
    ``hold_first``, the first claim cannot return before a second started."""

    def __init__(self, *args, hold_first: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hold_first = hold_first
        self.calls: list[str] = []
        self.starts = 0
        self.second_started = asyncio.Event()
        self.third_started = asyncio.Event()

    async def hand_out_ready(self, owner, now, capability, limit, on_taken=None, **options):
        n = self.starts
        self.starts += 1
        self.calls.append(f"start {n}")
        if self.starts == 2:
            self.second_started.set()
        if self.starts == 3:
            self.third_started.set()
        claimed = await super().hand_out_ready(owner, now, capability, limit, on_taken, **options)
        if n == 0 and self.hold_first:
            await asyncio.wait_for(self.second_started.wait(), 10)
        self.calls.append(f"end {n}")
        return claimed


async def _burst(engine, clock, monkeypatch, size: int, **options) -> tuple[Gateway, _ClaimsWatched, WorkerConnection]:
    """``size`` executions ready for one worker with as many slots, claimed two at a time."""
    monkeypatch.setattr(rounds_module, "MAX_BATCH", 2)
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    for n in range(size):
        add_execution(engine, clock, f"e{n}")
    connections = Connections()
    connection = connect(connections, clock, slots=size)
    queue = ExecutionQueue(engine, clock, rng=random.Random(1))
    queue.handout = store = _ClaimsWatched(engine, clock, **options)
    gateway = Gateway(queue, connections, clock, owner="s1", heartbeat_timeout=TIMEOUT, reattach_grace=GRACE)
    return gateway, store, connection


async def test_a_full_take_starts_the_next_claim_before_its_own_claim_ends(migrated_engine, clock, monkeypatch) -> None:
    """In a burst, the next claim starts once the current one has taken its
    rows, while it still decides their admission; the two never take one row."""
    gateway, store, connection = await _burst(migrated_engine, clock, monkeypatch, 4, hold_first=True)
    assert await gateway.rounds.hand_out_round() == 4
    # Which of the two ends first is the event loop's choice (the second's
    # rows may come back from the store's thread before the first resumes).
    assert store.calls[:2] == ["start 0", "start 1"] and "end 0" in store.calls
    sent = [a.execution_id for m in drain_outbox(connection) for a in m.assignment.assignments]
    assert sorted(sent) == ["e0", "e1", "e2", "e3"]


async def test_claims_chain_on_while_the_round_is_still_dealing(migrated_engine, clock, monkeypatch) -> None:
    """The next claim starts when the previous take came back full, even
    while the round is busy sending an earlier batch to a worker."""
    gateway, store, connection = await _burst(migrated_engine, clock, monkeypatch, 6)
    sent = []

    async def send(message) -> None:  # the first batch cannot be sent until a third claim has started
        await asyncio.wait_for(store.third_started.wait(), 10)
        sent.extend(a.execution_id for a in message.assignment.assignments)

    monkeypatch.setattr(connection, "send", send)
    assert await gateway.rounds.hand_out_round() == 6
    assert sorted(sent) == [f"e{n}" for n in range(6)] and store.starts >= 3
