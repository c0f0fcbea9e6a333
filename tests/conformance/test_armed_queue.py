"""The gateway's armed queue (gateway/armed.py): executions armed a few
seconds ahead by a round, started and sent at their instant and never
before, given back when no worker can take them; with a fake clock, on
SQLite and PostgreSQL."""

from __future__ import annotations


import sqlalchemy as sa

from tickwheel_server.gateway.connections import Connections
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


async def served(engine, clock, *due: str, slots: int | None = None):
    """Tenant acme with one-offs ``due`` two seconds ahead, and a gateway with
    one connected worker (``slots`` of credit, or the default): (gateway, connection)."""
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    for ident in due:
        add_one_off(engine, clock, ident, due_in=2)
    connections = Connections()
    connection = connect(connections, clock) if slots is None else connect(connections, clock, slots=slots)
    return make_gateway(engine, clock, connections), connection


async def test_armed_by_a_round_ahead_and_sent_at_the_instant_never_before(migrated_engine, clock) -> None:
    gateway, connection = await served(migrated_engine, clock, "e1", "e2")
    assert await gateway.rounds.hand_out_round() == 0
    assert len(gateway.armed) == 2
    assert {ident: r[0] for ident, r in rows(migrated_engine).items()} == {"e1": "armed", "e2": "armed"}
    due_us = rows(migrated_engine)["e1"][3]
    assert gateway.armed.next_instant_us(0) == due_us
    clock.advance(1.999)
    assert await gateway.rounds.hand_out_round() == 0
    assert sent(connection) == []
    clock.advance(0.001)
    assert await gateway.rounds.hand_out_round() == 2
    assert sent(connection) == [("e1", 1), ("e2", 1)]
    after = rows(migrated_engine)
    assert all(status == "running" and delivery == 1 and at >= due for status, delivery, at, due in after.values())
    assert len(gateway.armed) == 0 and gateway.armed.started == 2
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
