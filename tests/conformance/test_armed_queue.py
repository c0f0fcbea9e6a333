"""The gateway's armed queue (gateway/armed.py): executions armed a few
seconds ahead by a round, started and sent at their instant and never
before, given back when no worker can take them; with a fake clock, on
SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from tickwheel.shared.ids import to_us
from tickwheel_server.gateway.armed import DEFAULT_START_AHEAD
from tickwheel_server.gateway.connections import Connections
from tickwheel_server.gateway.gateway import Gateway
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_arming import add_one_off
from .test_gateway_liveness import connect, drain_outbox, make_gateway
from .test_handout import ANY_ECHO


def rows(engine) -> dict[str, tuple]:
    with engine.connect() as conn:
        found = conn.execute(sa.select(executions.c.id, executions.c.status, executions.c.delivery,
                                       executions.c.handed_out_at, executions.c.due_at))
        return {r.id: (r.status, r.delivery, r.handed_out_at, r.due_at) for r in found}


def sent(connection) -> list[tuple[str, int]]:
    return sorted((a.execution_id, a.delivery) for m in drain_outbox(connection) for a in m.assignment.assignments)


async def served(engine, clock, *due: str, slots: int | None = None, later: tuple[str, ...] = ()):
    """Tenant acme with one-offs ``due`` two seconds ahead (``later`` three),
    and a gateway with one connected worker (``slots`` of credit, or the
    default): (gateway, connection)."""
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    for ident in due:
        add_one_off(engine, clock, ident, due_in=2)
    for ident in later:
        add_one_off(engine, clock, ident, due_in=3)
    connections = Connections()
    connection = connect(connections, clock) if slots is None else connect(connections, clock, slots=slots)
    return make_gateway(engine, clock, connections), connection


async def test_armed_by_a_round_ahead_and_sent_at_the_instant_never_before(migrated_engine, clock) -> None:
    gateway, connection = await served(migrated_engine, clock, "e1", "e2")
    assert await gateway.rounds.hand_out_round() == 0
    assert len(gateway.armed) == 2
    assert {ident: r[0] for ident, r in rows(migrated_engine).items()} == {"e1": "armed", "e2": "armed"}
    due_us = rows(migrated_engine)["e1"][3]
    ahead_us = int(DEFAULT_START_AHEAD * 1_000_000)
    assert gateway.armed.next_instant_us(0) == due_us - ahead_us  # started ahead of the instant
    clock.advance(2 - DEFAULT_START_AHEAD - 0.001)
    assert await gateway.rounds.hand_out_round() == 0
    assert {r[0] for r in rows(migrated_engine).values()} == {"armed"}
    clock.advance(0.001)
    assert await gateway.rounds.hand_out_round() == 0  # started, dealt, not sent
    after = rows(migrated_engine)
    assert all(status == "running" and delivery == 1 and at == due for status, delivery, at, due in after.values())
    assert gateway.armed.waiting_to_send == 2 and gateway.armed.next_instant_us(to_us(clock.now())) == due_us
    assert gateway.armed.bytes > 0  # its messages count against the memory bound until sent
    assert connection.credit == 8 and gateway.inflight.held_by(connection) == []  # its credit is spoken for
    clock.advance(DEFAULT_START_AHEAD - 0.001)
    assert await gateway.rounds.hand_out_round() == 0
    assert sent(connection) == []
    clock.advance(0.001)
    assert await gateway.rounds.hand_out_round() == 2
    assert sent(connection) == [("e1", 1), ("e2", 1)]
    assert len(gateway.armed) == 0 and gateway.armed.started == 2 and gateway.armed.waiting_to_send == 0
    assert gateway.armed.bytes == 0
    assert connection.credit == 8
    assert sorted(gateway.inflight.held_by(connection)) == [("e1", 1), ("e2", 1)]


async def test_what_no_worker_can_take_in_time_is_given_back_to_every_server(migrated_engine, clock) -> None:
    gateway, connection = await served(migrated_engine, clock, "e1", slots=1)
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 1
    connection.credit = 0  # busy at the instant
    clock.advance(2)
    assert await gateway.rounds.hand_out_round() == 0
    assert rows(migrated_engine)["e1"][:2] == ("armed", 1)  # still within its time to be sent
    clock.advance(gateway.armed.disarm_after + 0.001)
    assert await gateway.armed.expire(gateway.fence.lease) == 1
    assert rows(migrated_engine)["e1"][:2] == ("scheduled", 0)
    other = ExecutionQueue(migrated_engine, clock)
    handed = await other.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 10)
    assert [(h.id, h.delivery) for h in handed] == [("e1", 1)]
    assert sent(connection) == []


async def test_a_canceled_armed_execution_is_never_sent(migrated_engine, clock) -> None:
    gateway, connection = await served(migrated_engine, clock, "e1", "e2")
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 2
    await HistoryStore(migrated_engine, clock).cancel_execution("acme", "e1")
    clock.advance(2)
    assert await gateway.rounds.hand_out_round() == 1
    assert sent(connection) == [("e2", 1)]
    assert rows(migrated_engine)["e1"][:2] == ("canceled", 0)
    assert len(gateway.armed) == 0


async def test_a_fence_refusal_at_the_instant_sends_nothing(migrated_engine, clock, monkeypatch) -> None:
    gateway, connection = await served(migrated_engine, clock, "e1")
    await gateway.rounds.hand_out_round()
    clock.advance(2)
    monkeypatch.setattr(gateway.fence, "refusal", lambda lease=None: "session in doubt")
    assert await gateway.rounds.hand_out_round() == 0
    assert sent(connection) == [] and rows(migrated_engine)["e1"][:2] == ("armed", 1)
    assert len(gateway.armed) == 1  # kept: sent once the fence allows, or given back when it expires


async def test_the_instant_starts_batches_up_to_the_credit_and_keeps_the_rest(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    for n in range(5):
        add_one_off(migrated_engine, clock, f"e{n}", due_in=2)
    connections = Connections()
    connection = connect(connections, clock, slots=5)
    gateway = make_gateway(migrated_engine, clock, connections)
    gateway.armed.batch = 2
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 5  # armed in batches of 2 while they came back full
    connection.credit = 3
    clock.advance(2)
    assert await gateway.rounds.hand_out_round() == 3  # 2, then 1: the credit
    assert sent(connection) == [("e0", 1), ("e1", 1), ("e2", 1)]
    assert len(gateway.armed) == 2 and connection.credit == 0
    connection.credit = 5
    assert await gateway.rounds.hand_out_round() == 2
    assert sent(connection) == [("e3", 1), ("e4", 1)]
    assert {r[0] for r in rows(migrated_engine).values()} == {"running"}


async def test_an_idle_server_probes_for_what_to_arm_once_a_second(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    connections = Connections()
    connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    await gateway.rounds.hand_out_round()  # nothing to arm
    add_one_off(migrated_engine, clock, "e1", due_in=2.5)
    clock.advance(0.999)
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 0
    clock.advance(0.001)
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 1


async def test_a_run_disarmed_by_an_update_and_armed_again_is_sent_once_as_updated(migrated_engine, clock) -> None:
    from tickwheel_server.store.jobs import JobStore

    from .test_arming import one_off

    gateway, connection = await served(migrated_engine, clock, "e1")
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 1
    spec = one_off(clock, 2)
    spec.payload = b"new"
    await JobStore(migrated_engine, clock, partition_count=16).update(
        "acme", "job_e1", 1, name="j", spec=spec.SerializeToString(), time_zone="UTC", tzdata_version="x",
        payload_size=3, reschedule=None,
    )
    assert rows(migrated_engine)["e1"][:2] == ("scheduled", 0)
    clock.advance(0.25)
    await gateway.rounds.hand_out_round()  # armed again: the same (id, delivery), the new payload
    assert len(gateway.armed) == 1 and rows(migrated_engine)["e1"][:2] == ("armed", 1)
    clock.advance(1.75)
    assert await gateway.rounds.hand_out_round() == 1
    [message] = drain_outbox(connection)
    assert [(a.execution_id, a.delivery, a.payload) for a in message.assignment.assignments] == [("e1", 1, b"new")]
    assert len(gateway.armed) == 0


async def test_the_instant_sends_the_assignment_built_at_arming(migrated_engine, clock, monkeypatch) -> None:
    from tickwheel_server.gateway import assignments
    from tickwheel_server.jobspec import DEFAULT_TIMEOUT_US

    from tickwheel.shared.ids import to_us

    gateway, connection = await served(migrated_engine, clock, "e1", "e2")
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 2

    def built_at_the_instant(*_args, **_kw):
        raise AssertionError("an armed execution's Assignment is built when it is armed")

    monkeypatch.setattr(assignments, "assignment_bytes", built_at_the_instant)
    clock.advance(2)
    assert await gateway.rounds.hand_out_round() == 2
    [message] = drain_outbox(connection)
    sent_at = to_us(clock.now())
    by_id = {a.execution_id: a for a in message.assignment.assignments}
    assert sorted(by_id) == ["e1", "e2"]
    due_us = rows(migrated_engine)["e1"][3]
    first = by_id["e1"]
    assert (first.job_id, first.tenant, first.attempt, first.delivery, first.payload, first.missed_count) == (
        "job_e1", "acme", 1, 1, b"p", 1)
    assert first.target.handler.name == "echo" and first.traceparent == ""
    assert first.due_at.ToMicroseconds() == due_us == first.nominal_at.ToMicroseconds()
    assert first.deadline_at.ToMicroseconds() == sent_at + DEFAULT_TIMEOUT_US  # from the send, not the arming


async def test_the_armed_queue_holds_at_most_its_memory_bound(migrated_engine, clock) -> None:
    from tickwheel_server.gateway.armed import ENTRY_BYTES

    gateway, connection = await served(migrated_engine, clock, *(f"e{n}" for n in range(6)))
    with migrated_engine.begin() as conn:  # payloads of 10 000 bytes
        conn.execute(executions.update().values(payload=b"x" * 10_000))
        spec_size = len(conn.execute(sa.text("SELECT spec FROM jobs WHERE id = 'job_e0'")).scalar_one())
    one = ENTRY_BYTES + 10_000 + spec_size
    gateway.armed.max_bytes = 3 * one + one // 2
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 3 and gateway.armed.bytes == 3 * one <= gateway.armed.max_bytes
    assert {ident for ident, r in rows(migrated_engine).items() if r[0] == "armed"} == {"e0", "e1", "e2"}
    clock.advance(2)
    assert await gateway.rounds.hand_out_round() == 6  # the rest took the round's path
    assert gateway.armed.bytes == 0
    assert all(a.payload == b"x" * 10_000 for m in drain_outbox(connection) for a in m.assignment.assignments)


def test_an_armed_execution_holds_no_more_than_the_queue_counts(clock) -> None:
    """ENTRY_BYTES is an upper bound: what the queue holds, measured, is
    within what it counts; and the defaults arm a 30 000 burst of small
    one-offs (as bench_burst stores them) whole."""
    import tracemalloc

    from tickwheel_server.gateway.armed import DEFAULT_LIMIT, DEFAULT_MAX_BYTES, ArmedQueue, _Entry
    from tickwheel_server.jobspec import JobDefinition
    from tickwheel_server.store.arming import Armed
    from tickwheel_server.store.executions import HandedOut

    from .test_arming import one_off

    spec = one_off(clock, 2).SerializeToString()
    definition = JobDefinition.parse("job", 1, spec)
    queue = ArmedQueue(None, None, clock, None)
    count, at = 2000, 1_767_225_602_000_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(count):
            handed = HandedOut(f"job_{n:05}:20260101T000002Z", f"job_{n:05}", "acme", n % 256, "scheduled",
                               at + n, at + n, at + n, 1, 1, bytes(100), 1, definition, 0, "")
            queue._add(_Entry(Armed(handed, False, 100 + len(spec)), ANY_ECHO, "s1"))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(queue) == count and held <= queue.bytes
    assert DEFAULT_LIMIT >= 30_000 and DEFAULT_MAX_BYTES >= DEFAULT_LIMIT * queue.bytes // count


async def started_ahead(migrated_engine, clock, *due: str, later: tuple[str, ...] = ()):
    """``due`` armed, then started one ``DEFAULT_START_AHEAD`` before their
    instant (running, dealt, not sent), ``later`` armed: (gateway, connection)."""
    gateway, connection = await served(migrated_engine, clock, *due, later=later)
    await gateway.rounds.hand_out_round()
    clock.advance(2 - DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 0
    assert {ident: r[0] for ident, r in rows(migrated_engine).items() if ident in due} == dict.fromkeys(due, "running")
    assert sent(connection) == [] and gateway.armed.waiting_to_send == len(due)
    return gateway, connection


async def finish(gateway, connection, outcome=None) -> list[tuple[str, int]]:
    """The worker reports every assignment it was sent: the keys reported."""
    from tickwheel.v1 import worker_pb2

    keys = sent(connection)
    await gateway.intake.record(connection, [worker_pb2.ExecutionResult(
        execution_id=i, delivery=d, attempt=1, outcome=outcome or worker_pb2.RESULT_OUTCOME_SUCCEEDED) for i, d in keys])
    return keys


async def test_a_cancel_within_the_start_window_is_a_running_cancel_told_to_the_worker(migrated_engine, clock) -> None:
    """e1 is canceled once started (a second ahead): handled as running,
    its worker told; e3, due a second later and canceled then, was still
    armed: disarmed and canceled, never sent."""
    from tickwheel.v1 import worker_pb2

    gateway, connection = await started_ahead(migrated_engine, clock, "e1", "e2", later=("e3",))
    assert rows(migrated_engine)["e3"][:2] == ("armed", 1)
    assert (await HistoryStore(migrated_engine, clock).cancel_execution("acme", "e3")).status == "canceled"
    canceled = await HistoryStore(migrated_engine, clock).cancel_execution("acme", "e1", "stop")
    # A started run: its worker is told once it holds it; until it is sent it
    # reads, this answer included, as not started.
    assert (canceled.status, canceled.delivery, canceled.owner) == ("scheduled", 0, None)
    assert rows(migrated_engine)["e1"][:2] == ("running", 1)
    assert await gateway.liveness.signal_cancels() == 0  # nobody holds it yet
    clock.advance(DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 2
    messages = drain_outbox(connection)
    assert sorted(a.execution_id for m in messages for a in m.assignment.assignments) == ["e1", "e2"]
    clock.advance(DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 0  # e3's instant: nothing to send
    assert rows(migrated_engine)["e3"][:2] == ("canceled", 0)
    assert await gateway.liveness.signal_cancels() == 1
    [cancel] = [m.cancel for m in drain_outbox(connection) if m.WhichOneof("message") == "cancel"]
    assert [(e.execution_id, e.delivery) for e in cancel.executions] == [("e1", 1)]
    await gateway.intake.record(connection, [worker_pb2.ExecutionResult(
        execution_id="e1", delivery=1, attempt=1, outcome=worker_pb2.RESULT_OUTCOME_CANCELED)])
    with migrated_engine.connect() as conn:
        found = conn.execute(sa.select(executions.c.id, executions.c.status, executions.c.dead_reason)).all()
    assert sorted(found) == [("e1", "canceled", "canceled: stop"), ("e2", "running", ""),
                             ("e3", "canceled", "canceled: by request")]


async def test_a_delete_or_pause_within_the_start_window_lets_the_started_run_end_once(migrated_engine, clock) -> None:
    from tickwheel_server.store.jobs import JobStore

    gateway, connection = await started_ahead(migrated_engine, clock, "e1", "e2")
    jobs = JobStore(migrated_engine, clock, partition_count=16)
    assert await jobs.delete("acme", "job_e1") == 0  # nothing not started to cancel
    await jobs.pause("acme", "job_e2")
    clock.advance(DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 2
    assert await finish(gateway, connection) == [("e1", 1), ("e2", 1)]
    assert {ident: r[:2] for ident, r in rows(migrated_engine).items()} == {
        "e1": ("succeeded", 1), "e2": ("succeeded", 1)}


async def test_a_server_gone_between_the_start_and_the_send_loses_nothing(migrated_engine, clock) -> None:
    """s1 started e1 and died before its instant: the reaper requeues it
    (delivery 2), another server hands it out, its worker ends it once."""
    gateway, connection = await started_ahead(migrated_engine, clock, "e1")
    del gateway  # never sends
    queue = ExecutionQueue(migrated_engine, clock)
    assert await queue.requeues.running_owners() == ["s1"]
    reaped = await queue.requeues.reap_owner("s1", "session s1 expired")
    assert [r.execution_id for r in reaped.requeued] == ["e1"]
    assert rows(migrated_engine)["e1"][:2] == ("scheduled", 1)
    clock.advance(DEFAULT_START_AHEAD)
    others = Connections()
    elsewhere = connect(others, clock, worker_id="w2")
    other = Gateway(ExecutionQueue(migrated_engine, clock), others, clock, owner="s2")
    assert await other.rounds.hand_out_round() == 1
    assert await finish(other, elsewhere) == [("e1", 2)]
    assert rows(migrated_engine)["e1"][:2] == ("succeeded", 2)
    assert sent(connection) == []


async def test_a_stopping_server_gives_back_what_it_started_or_armed_and_did_not_send(migrated_engine, clock) -> None:
    """s1 stops gracefully with e1 started (not sent) and e2 armed: both go
    back to scheduled at the delivery they had, with no attempt, so the next
    server hands them out at once as delivery 1 rather than after the
    reaper's grace; nothing of s1's is left for the reaper."""
    from .test_handout import attempts_of

    gateway, connection = await started_ahead(migrated_engine, clock, "e1", later=("e2",))
    assert rows(migrated_engine)["e2"][:2] == ("armed", 1)
    assert await gateway.give_back() == 2
    assert {ident: r[:2] for ident, r in rows(migrated_engine).items()} == {"e1": ("scheduled", 0),
                                                                          "e2": ("scheduled", 0)}
    assert gateway.armed.waiting_to_send == 0 and len(gateway.armed) == 0 and connection.credit == 10
    queue = ExecutionQueue(migrated_engine, clock)
    assert await queue.requeues.running_owners() == [] and attempts_of(migrated_engine, "e1") == []
    clock.advance(DEFAULT_START_AHEAD + 1)
    others = Connections()
    elsewhere = connect(others, clock, worker_id="w2")
    other = Gateway(ExecutionQueue(migrated_engine, clock), others, clock, owner="s2", arm_ahead=0)
    assert await other.rounds.hand_out_round() == 2
    assert await finish(other, elsewhere) == [("e1", 1), ("e2", 1)]
    assert sent(connection) == []


async def test_a_fence_refusal_at_the_send_gives_the_started_batch_back(migrated_engine, clock, monkeypatch) -> None:
    gateway, connection = await started_ahead(migrated_engine, clock, "e1")
    assert connection.credit == 9
    clock.advance(DEFAULT_START_AHEAD)
    monkeypatch.setattr(gateway.fence, "refusal", lambda lease=None: "session in doubt")
    assert await gateway.armed.start_due({}, gateway.fence.lease, gateway.rounds) == 0
    assert sent(connection) == [] and connection.credit == 10 and gateway.armed.waiting_to_send == 0
    assert rows(migrated_engine)["e1"][:2] == ("scheduled", 0)


async def test_a_batch_not_sent_in_time_is_given_back_never_sent_late(migrated_engine, clock) -> None:
    """A started batch that could not be sent within half a heartbeat
    timeout of its instant (rounds held back that long) is given back: the
    safety net may requeue it soon, and its old delivery must not reach a
    worker then."""
    from .test_gateway_liveness import TIMEOUT

    gateway, connection = await started_ahead(migrated_engine, clock, "e1")
    clock.advance(DEFAULT_START_AHEAD + TIMEOUT / 2 + 0.001)
    assert await gateway.armed.start_due({}, gateway.fence.lease, gateway.rounds) == 0
    assert sent(connection) == [] and connection.credit == 10
    assert rows(migrated_engine)["e1"][:2] == ("scheduled", 0)


async def test_another_sessions_armed_row_is_neither_started_nor_sent(migrated_engine, clock) -> None:
    """Hostile: of the rows this server armed, one another session holds
    now and one armed again at another delivery are left alone by the start
    a second ahead; only the third is started, and only it is sent."""
    gateway, connection = await served(migrated_engine, clock, "e1", "e2", "e3")
    await gateway.rounds.hand_out_round()
    with migrated_engine.begin() as conn:  # e1 taken over by s2; e2's delivery moved on
        conn.execute(executions.update().where(executions.c.id == "e1").values(owner="s2"))
        conn.execute(executions.update().where(executions.c.id == "e2").values(delivery=5))
    clock.advance(2 - DEFAULT_START_AHEAD)
    await gateway.rounds.hand_out_round()
    assert gateway.armed.waiting_to_send == 1
    assert {ident: r[:2] for ident, r in rows(migrated_engine).items()} == {
        "e1": ("armed", 1), "e2": ("armed", 5), "e3": ("running", 1)}
    clock.advance(DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 1
    assert sent(connection) == [("e3", 1)] and connection.credit == 9


async def test_a_started_unsent_row_is_re_attached_only_for_its_tenant(migrated_engine, clock) -> None:
    """s1 started e1 and died before sending it: a worker re-attaching
    (e1, 1) at s2 is taken as for any running row, for a credential of
    e1's tenant only."""
    from tickwheel.v1 import worker_pb2
    from tickwheel_server.store.credentials import WorkerCredential

    _gateway, _connection = await started_ahead(migrated_engine, clock, "e1")
    await TenantStore(migrated_engine, clock).create(Tenant(name="globex"))
    others = Connections()
    other = Gateway(ExecutionQueue(migrated_engine, clock), others, clock, owner="s2")
    intruder = connect(others, clock, worker_id="w9")
    intruder.credential = WorkerCredential(id="c9", tenants=("globex",), handlers=(), http=True, description="",
                                           created_at=clock.now())
    assert await other.liveness.reattach(intruder, [("e1", 1)]) == ([], [("e1", 1)])
    mine = connect(others, clock, worker_id="w1")
    assert await other.liveness.reattach(mine, [("e1", 1)]) == ([("e1", 1)], [])
    await other.intake.record(mine, [worker_pb2.ExecutionResult(
        execution_id="e1", delivery=1, attempt=1, outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED)])
    assert rows(migrated_engine)["e1"][:2] == ("succeeded", 1)


async def test_what_is_armed_within_the_start_window_is_started_by_the_same_round(migrated_engine, clock) -> None:
    """Arming a burst can take until less than a second before its instant:
    what it armed then is started at once, not at the instant."""
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_one_off(migrated_engine, clock, "e1", due_in=DEFAULT_START_AHEAD / 2)
    connections = Connections()
    connection = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 0
    assert rows(migrated_engine)["e1"][0] == "running" and gateway.armed.waiting_to_send == 1
    clock.advance(DEFAULT_START_AHEAD / 2)
    assert await gateway.rounds.hand_out_round() == 1
    assert sent(connection) == [("e1", 1)]


async def test_a_refused_round_gives_back_what_waits_and_asks_no_wake_up(migrated_engine, clock, monkeypatch) -> None:
    """While the fence refuses, a started batch whose instant came is given
    back at the next round, so the loop is not woken for it again and
    again; before a round, the queue asks for one at once."""
    gateway, connection = await started_ahead(migrated_engine, clock, "e1")
    clock.advance(DEFAULT_START_AHEAD)
    now_us = to_us(clock.now())
    assert gateway.armed.next_instant_us(now_us) == now_us  # due to be sent: a round now
    monkeypatch.setattr(gateway.fence, "refusal", lambda lease=None: "session in doubt")
    assert await gateway.rounds.hand_out_round() == 0
    assert gateway.armed.waiting_to_send == 0 and gateway.armed.next_instant_us(now_us) is None
    assert sent(connection) == [] and connection.credit == 10
    assert rows(migrated_engine)["e1"][:2] == ("scheduled", 0)


async def test_arming_waits_while_a_started_batch_is_due(migrated_engine, clock) -> None:
    """Arming a burst's batches may take seconds: it stops while a started
    batch waits for its round, which sends it first."""
    gateway, connection = await started_ahead(migrated_engine, clock, "e1")
    clock.advance(DEFAULT_START_AHEAD)
    add_one_off(migrated_engine, clock, "e2", due_in=2)
    groups = {connection.capability: [connection]}
    assert await gateway.armed.arm_ahead(groups, gateway.fence.lease) == 0
    assert await gateway.rounds.hand_out_round() == 1  # sent, then armed
    assert sent(connection) == [("e1", 1)] and rows(migrated_engine)["e2"][:2] == ("armed", 1)


async def test_a_start_window_opening_during_a_round_calls_for_a_round_at_once(migrated_engine, clock) -> None:
    """A round looks for what to start as it begins: an execution whose
    start window opens while the rest of the round runs makes the loop run
    the next round at once, so it is started, and sent at its instant,
    rather than after the sweep interval, perhaps late."""
    gateway, connection = await served(migrated_engine, clock, "e1")
    assert await gateway.rounds.hand_out_round() == 0 and len(gateway.armed) == 1
    due_us = rows(migrated_engine)["e1"][3]
    clock.advance(2 - DEFAULT_START_AHEAD - 0.005)
    assert await gateway.rounds.hand_out_round() == 0  # the window is not open as it looks
    assert rows(migrated_engine)["e1"][0] == "armed"
    clock.advance(0.010)  # the rest of the round (expiring, arming) outlasts the window's opening
    now_us = to_us(clock.now())
    assert gateway.armed.next_instant_us(now_us) == now_us  # a round now
    assert await gateway.rounds.hand_out_round() == 0
    assert rows(migrated_engine)["e1"][:3] == ("running", 1, due_us) and gateway.armed.waiting_to_send == 1
    assert gateway.armed.next_instant_us(to_us(clock.now())) == due_us


async def test_a_refused_round_notes_an_opened_start_window_and_asks_no_wake_up(
    migrated_engine, clock, monkeypatch
) -> None:
    """While the fence refuses, an execution whose start window opened asks
    for no round again and again; the first round allowed starts it."""
    gateway, connection = await served(migrated_engine, clock, "e1")
    assert await gateway.rounds.hand_out_round() == 0 and len(gateway.armed) == 1
    clock.advance(2 - DEFAULT_START_AHEAD)
    now_us = to_us(clock.now())
    assert gateway.armed.next_instant_us(now_us) == now_us
    with monkeypatch.context() as refusing:
        refusing.setattr(gateway.fence, "refusal", lambda lease=None: "session in doubt")
        assert await gateway.rounds.hand_out_round() == 0
        assert gateway.armed.next_instant_us(now_us) is None and rows(migrated_engine)["e1"][0] == "armed"
    assert await gateway.rounds.hand_out_round() == 0
    assert rows(migrated_engine)["e1"][0] == "running" and gateway.armed.waiting_to_send == 1
    clock.advance(DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 1 and sent(connection) == [("e1", 1)]


async def test_a_quiet_tenants_run_is_in_the_first_start_of_a_bursts_instant(migrated_engine, clock) -> None:
    """The attack: tenant acme puts nine runs on the instant tenant globex's
    one run is on, each ahead of it in (ready instant, id). Armed together,
    the instant's runs are started and dealt interleaved by tenant: with
    credit for one batch of two at the instant, globex's run is in it."""
    from tickwheel_server.store.credentials import WorkerCredential
    from tickwheel_server.gateway.connections import WorkerConnection

    from .test_arming import one_off
    from .test_handout import add_execution

    store = TenantStore(migrated_engine, clock)
    await store.create(Tenant(name="acme"))
    await store.create(Tenant(name="globex"))
    for n in range(9):
        add_one_off(migrated_engine, clock, f"a{n}", due_in=2)
    add_execution(migrated_engine, clock, "z1", due_in=2, tenant="globex", spec=one_off(clock, 2))
    connections = Connections()
    credential = WorkerCredential(id="c1", tenants=("acme", "globex"), handlers=(), http=True, description="",
                                  created_at=clock.now())
    connection = WorkerConnection(worker_id="w1", credential=credential, handlers=frozenset({"echo"}), http=True,
                                  slots=10, connected_at=clock.now(), credit=10)
    connections.add(connection)
    gateway = make_gateway(migrated_engine, clock, connections)
    gateway.armed.batch = 2
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 10  # armed whole, in batches of two shared by the tenants
    connection.credit = 2
    clock.advance(2)
    assert await gateway.rounds.hand_out_round() == 2
    assert sent(connection) == [("a0", 1), ("z1", 1)]
    connection.credit = 10
    assert await gateway.rounds.hand_out_round() == 8
    assert sent(connection) == [(f"a{n}", 1) for n in range(1, 9)]
    assert {r[0] for r in rows(migrated_engine).values()} == {"running"}


async def test_a_bursts_batches_are_started_two_at_a_time(migrated_engine, clock, monkeypatch) -> None:
    """A burst's batches are started side by side (``start_depth``), not one
    after another: the second start begins while the first still waits on
    the store, so the store's cores both start the burst ahead of its
    instant."""
    clock.autojump = False  # a start's wait for the store must not move time on: only the test does
    gateway, connection = await served(migrated_engine, clock, "e1", "e2", "e3", "e4")
    gateway.armed.batch = 2
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 4
    store = gateway.armed._store
    real = store.start
    began: list[list] = []
    second = asyncio.Event()

    async def start(owner, items, *args, **kwargs):
        began.append(list(items))
        if len(began) == 1:
            await asyncio.wait_for(second.wait(), 10)  # started one after another, this never comes
        else:
            second.set()
        return await real(owner, items, *args, **kwargs)

    monkeypatch.setattr(store, "start", start)
    clock.advance(2 - DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 0
    assert [len(items) for items in began] == [2, 2] and gateway.armed.waiting_to_send == 4
    clock.advance(DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 4
    assert sent(connection) == [(f"e{n}", 1) for n in range(1, 5)]
    assert {r[0] for r in rows(migrated_engine).values()} == {"running"}


async def test_the_next_start_goes_to_the_store_before_a_batch_is_dealt(migrated_engine, clock, monkeypatch) -> None:
    """When a start ends, the start that takes its place is under way
    before its batch is dealt: a deal is the interpreter's work (tens of
    milliseconds for a batch of 2 000), and the store would otherwise idle
    through it, and through the other start's deal when that one ended
    meanwhile (a burst's starts ran in pairs, the store idle between them,
    and its last batches missed the start window)."""
    clock.autojump = False  # a start's wait for the store must not move time on: only the test does
    gateway, connection = await served(migrated_engine, clock, "e1", "e2", "e3", "e4")
    gateway.armed.batch = 1
    await gateway.rounds.hand_out_round()
    assert len(gateway.armed) == 4
    store = gateway.armed._store
    real_start, real_prepare = store.start, gateway.rounds.prepare
    calls: list[tuple[str, str]] = []

    async def start(owner, items, *args, **kwargs):
        calls.extend(("start", item[0]) for item in items)
        return await real_start(owner, items, *args, **kwargs)

    def prepare(handed, *args, **kwargs):
        calls.extend(("deal", item.id) for item in handed)
        return real_prepare(handed, *args, **kwargs)

    monkeypatch.setattr(store, "start", start)
    monkeypatch.setattr(gateway.rounds, "prepare", prepare)
    clock.advance(2 - DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 0
    assert sorted(calls) == sorted([("start", f"e{n}") for n in range(1, 5)] + [("deal", f"e{n}") for n in range(1, 5)])
    # Each deal comes after the start that replaces its batch's start (two under way) was sent to the store.
    for n in (1, 2):
        assert calls.index(("start", f"e{n + 2}")) < calls.index(("deal", f"e{n}")), calls
    assert gateway.armed.waiting_to_send == 4
    clock.advance(DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 4
    assert sent(connection) == [(f"e{n}", 1) for n in range(1, 5)]
    due_us = rows(migrated_engine)["e1"][3]
    assert all(r[0] == "running" and r[2] >= due_us for r in rows(migrated_engine).values())  # never early


async def test_a_started_batch_is_sent_at_its_instant_while_a_start_runs(migrated_engine, clock, monkeypatch) -> None:
    """A batch started for the instant is sent when the instant comes, not
    when the start under way at that moment ends (a burst's next batch, on
    a busy store, for a few tenths of a second)."""
    clock.autojump = False  # time passes only as the test says, here during the second start
    gateway, connection = await served(migrated_engine, clock, "e1", "e2")
    gateway.armed.batch = 1
    gateway.armed.start_depth = 1
    await gateway.rounds.hand_out_round()
    store = gateway.armed._store
    real = store.start
    starts = 0
    sent_at_instant = asyncio.Event()
    real_send = gateway.rounds.send

    async def send(prepared):
        count = await real_send(prepared)
        sent_at_instant.set()
        return count

    async def start(*args, **kwargs):
        nonlocal starts
        starts += 1
        if starts == 2:  # the second start outlasts the first batch's instant
            for _ in range(100):  # the round's wait for that instant begins first (none on the old loop)
                if clock._sleepers:
                    break
                await asyncio.sleep(0)
            clock.advance(DEFAULT_START_AHEAD)
            await asyncio.wait_for(sent_at_instant.wait(), 10)  # sent only after this start, never
        return await real(*args, **kwargs)

    monkeypatch.setattr(store, "start", start)
    monkeypatch.setattr(gateway.rounds, "send", send)
    clock.advance(2 - DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 2
    assert sent(connection) == [("e1", 1), ("e2", 1)]
    due_us = rows(migrated_engine)["e1"][3]
    assert all(r[2] >= due_us for r in rows(migrated_engine).values())  # never early


async def test_an_arming_pass_stops_when_its_start_window_opens(migrated_engine, clock, monkeypatch) -> None:
    """Arming a burst can take its whole window on a busy machine: a pass
    that armed some stops when their start window opens, the round starts
    them, then arms on, rather than starting the burst only once all of it
    is armed, after its instant."""
    clock.autojump = False  # time passes only as the test says, here during the first arm
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    for n in range(3):
        add_one_off(migrated_engine, clock, f"e{n}", due_in=2)
    connections = Connections()
    connection = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    gateway.armed.batch = 1
    store = gateway.armed._store
    real_arm, real_start = store.arm, store.start
    calls: list[tuple[str, int]] = []

    async def arm(*args, **kwargs):
        armed = await real_arm(*args, **kwargs)
        calls.append(("arm", len(armed)))
        if len(calls) == 1:
            clock.advance(2 - DEFAULT_START_AHEAD)  # this arm lasted until the start window opened
        return armed

    async def start(owner, items, *args, **kwargs):
        calls.append(("start", len(items)))
        return await real_start(owner, items, *args, **kwargs)

    monkeypatch.setattr(store, "arm", arm)
    monkeypatch.setattr(store, "start", start)
    assert await gateway.rounds.hand_out_round() == 0
    assert calls[:4] == [("arm", 1), ("start", 1), ("arm", 1), ("start", 1)]
    assert sorted(calls) == sorted([("arm", 1)] * 3 + [("arm", 0)] + [("start", 1)] * 3)
    assert gateway.armed.waiting_to_send == 3
    clock.advance(DEFAULT_START_AHEAD)
    assert await gateway.rounds.hand_out_round() == 3
    assert sent(connection) == [(f"e{n}", 1) for n in range(3)]
