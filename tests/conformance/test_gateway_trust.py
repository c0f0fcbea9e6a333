"""What the gateway accepts from a worker (issue 15, items 1, 2, 3, 5, 6 and
the worker half of 18): only results and re-attachments of deliveries its
stream holds, of its credential's tenants, each field checked; a result
that cannot be written is refused alone; a result waiting for the store
keeps its execution alive; what a credential sends that none of its
streams holds is budgeted. With a fake clock and real stores, on SQLite
and PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest
import sqlalchemy as sa
from tickwheel.v1 import worker_pb2

from tickwheel_server.gateway.budget import OverBudget
from tickwheel_server.gateway.connections import Connections, WorkerConnection
from tickwheel_server.gateway.gateway import Gateway
from tickwheel_server.store.credentials import WorkerCredential
from tickwheel_server.store.errors import StoreUnavailableError
from tickwheel_server.store.outcomes import OutcomeStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions, jobs
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import add_execution
from tickwheel_server.store.history import attempt_history

# Every recorded attempt: the table's rows and those plain successes keep on their execution rows.
attempts = attempt_history()

TIMEOUT = 30.0
GRACE = 10.0
UNKNOWN = "no such execution held by this worker"
SUCCEEDED = worker_pb2.RESULT_OUTCOME_SUCCEEDED


def connect(connections: Connections, clock, tenant: str, worker_id: str, credential_id: str | None = None,
            slots: int = 10) -> WorkerConnection:
    credential = WorkerCredential(id=credential_id or f"cred-{tenant}", tenants=(tenant,), handlers=(), http=True,
                                  description="", created_at=clock.now())
    connection = WorkerConnection(worker_id=worker_id, credential=credential, handlers=frozenset({"echo"}), http=True,
                                  slots=slots, connected_at=clock.now(), credit=slots)
    connections.add(connection)
    return connection


def acks_of(connection: WorkerConnection) -> list[tuple[str, int, bool, str]]:
    found = []
    while not connection.outbox.empty():
        message = connection.outbox.get_nowait()
        if message is not None and message.WhichOneof("message") == "ack":
            found += [(a.execution_id, a.delivery, a.accepted, a.reason) for a in message.ack.acks]
    return found


def row(engine, ident: str):
    with engine.connect() as conn:
        return conn.execute(sa.select(executions).where(executions.c.id == ident)).one()


def history(engine, ident: str) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(
            sa.select(attempts.c.delivery, attempts.c.status, attempts.c.worker_id, attempts.c.error)
            .where(attempts.c.execution_id == ident).order_by(attempts.c.delivery)
        )]


def result(key, outcome=SUCCEEDED, **fields) -> worker_pb2.ExecutionResult:
    return worker_pb2.ExecutionResult(execution_id=key[0], delivery=key[1], attempt=1, outcome=outcome, **fields)


class Outage(OutcomeStore):
    """A store whose result writes fail as an unavailable store's do while ``down``."""

    down = False

    async def record_results(self, results):
        if self.down:
            raise StoreUnavailableError("connection refused", attempts=3)
        return await super().record_results(results)


@pytest.fixture
async def tenants(migrated_engine, clock) -> None:
    for name in ("acme", "globex"):
        await TenantStore(migrated_engine, clock).create(Tenant(name=name))


def make_gateway(engine, clock, connections, outcomes_class=None, **options) -> Gateway:
    store = ExecutionQueue(engine, clock, rng=random.Random(1))
    if outcomes_class is not None:
        store.outcomes = outcomes_class(engine, clock, rng=random.Random(1))
    return Gateway(store, connections, clock, owner="s1", heartbeat_timeout=TIMEOUT, reattach_grace=GRACE, **options)


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def wait_for(predicate, what: str) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), 10)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


async def test_another_tenants_worker_can_neither_end_nor_re_attach_its_execution(
    tenants, migrated_engine, clock
) -> None:
    add_execution(migrated_engine, clock, "g1", tenant="globex")
    connections = Connections()
    globex = connect(connections, clock, "globex", "g-worker")
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 1
    [key] = gateway.inflight.held_by(globex)
    hostile = connect(connections, clock, "acme", "a-worker")
    forged = [result(key), result(key, worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error="forged"),
              result(("no-such-execution", 1))]
    await gateway.intake.record(hostile, forged)
    assert acks_of(hostile) == [(key[0], key[1], False, UNKNOWN), (key[0], key[1], False, UNKNOWN),
                                ("no-such-execution", 1, False, UNKNOWN)]
    # A worker of another credential, claiming globex's worker's id, takes nothing either.
    impostor = connect(connections, clock, "acme", "g-worker")
    assert not globex.closed.is_set()
    unknown = ("no-such-execution", 1)
    assert await gateway.liveness.reattach(impostor, [key, unknown]) == ([], [key, unknown])
    assert gateway.inflight.holder(key) is globex
    assert (row(migrated_engine, "g1").status, history(migrated_engine, "g1")) == ("running", [])
    clock.advance(TIMEOUT - 1)  # globex's worker still heartbeats it: nobody took it over
    gateway.liveness.heartbeat(globex, [key])
    clock.advance(TIMEOUT - 1)
    assert not (await gateway.liveness.requeue_expired()).requeued
    await gateway.intake.record(globex, [result(key)])
    assert acks_of(globex)[-1] == (key[0], key[1], True, "")
    assert row(migrated_engine, "g1").status == "succeeded"
    assert history(migrated_engine, "g1") == [(key[1], "succeeded", "g-worker", "")]


async def test_a_live_delivery_of_another_worker_of_the_tenant_is_not_re_attached(tenants, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    connections = Connections()
    owner = connect(connections, clock, "acme", "w1")
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 1
    [key] = gateway.inflight.held_by(owner)
    other = connect(connections, clock, "acme", "w2")
    assert await gateway.liveness.reattach(other, [key]) == ([], [key])
    assert gateway.inflight.holder(key) is owner
    again = connect(connections, clock, "acme", "w1")  # the holder itself reconnecting takes it back
    assert owner.closed.is_set()
    assert await gateway.liveness.reattach(again, [key]) == ([key], [])


async def test_a_result_waiting_for_the_store_keeps_its_execution_alive(tenants, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    connections = Connections()
    connection = connect(connections, clock, "acme", "w1")
    gateway = make_gateway(migrated_engine, clock, connections, outcomes_class=Outage)
    assert await gateway.rounds.hand_out_round() == 1
    [key] = gateway.inflight.held_by(connection)
    writer = asyncio.create_task(gateway.intake.results.run())
    try:
        gateway.intake._store.down = True
        await gateway.intake.submit_results(connection, [result(key)])
        await settle()
        assert gateway.intake.results.pending == 1
        for _ in range(int(TIMEOUT)):  # the worker lists a finished attempt no more
            clock.advance(1)
            await settle()
            assert not (await gateway.liveness.requeue_expired()).requeued
        connection.close()  # and then its stream drops: past the grace, still not requeued
        connections.remove(connection)
        gateway.liveness.disconnected(connection)
        clock.advance(GRACE + 1)
        await settle()
        assert not (await gateway.liveness.requeue_expired()).requeued
        assert row(migrated_engine, "e1").status == "running"
        gateway.intake._store.down = False  # late, not lost
        clock.advance(1)
        await wait_for(lambda: gateway.intake.results.pending == 0, "the result is recorded")
    finally:
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
    done = row(migrated_engine, "e1")
    assert (done.status, done.delivery, done.reap_count) == ("succeeded", 1, 0)
    assert history(migrated_engine, "e1") == [(1, "succeeded", "w1", "")]
    assert len(gateway.inflight) == 0


async def test_malformed_results_are_refused_by_field_and_the_others_recorded(tenants, migrated_engine, clock) -> None:
    for ident in ("e1", "e2", "e3", "e4", "e5"):
        add_execution(migrated_engine, clock, ident)
    connections = Connections()
    connection = connect(connections, clock, "acme", "w1")
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 5
    keys = dict(gateway.inflight.held_by(connection))
    far = worker_pb2.ExecutionResult()
    far.started_at.seconds = 2**62
    late = worker_pb2.ExecutionResult()
    late.retry_after.seconds = 2**62
    message = [
        result(("e1", keys["e1"]), started_at=far.started_at),
        result(("e2", keys["e2"]), worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, retry_after=late.retry_after),
        result(("e3", keys["e3"]), worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error="HTTP 500: \x00\x00boom\x00"),
        result(("e4", keys["e4"]), outcome=99),
        result(("e5", keys["e5"])),
        result(("e\n" + "x" * 10_000, 1)),
    ]
    await gateway.intake.record(connection, message)
    acks = {a[0]: a[2:] for a in acks_of(connection)}
    assert acks["e1"] == (False, "invalid result: started_at: a valid timestamp (0001-01-01 to 9999-12-31)")
    assert acks["e2"] == (False, "invalid result: retry_after: a valid duration of at least 0")
    assert acks["e4"][0] is False and acks["e4"][1].startswith("invalid result: outcome: ")
    assert acks["e\n" + "x" * 10_000][1].startswith("invalid result: execution_id: ")
    assert acks["e3"] == acks["e5"] == (True, "")
    assert [row(migrated_engine, i).status for i in ("e1", "e2", "e3", "e4", "e5")] == [
        "running", "running", "dead", "running", "succeeded",
    ]
    assert row(migrated_engine, "e3").error == history(migrated_engine, "e3")[0][3] == "HTTP 500: \ufffd\ufffdboom\ufffd"
    # What was refused is the worker's to send again, right: it is still held.
    await gateway.intake.record(connection, [result(("e1", keys["e1"]))])
    assert row(migrated_engine, "e1").status == "succeeded"


async def test_a_result_the_store_cannot_write_is_refused_alone(tenants, migrated_engine, clock) -> None:
    for ident in ("e1", "e2", "e3"):
        add_execution(migrated_engine, clock, ident)
    connections = Connections()
    connection = connect(connections, clock, "acme", "w1")
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 3
    keys = dict(gateway.inflight.held_by(connection))
    with migrated_engine.begin() as conn:  # e2's job definition cannot be read any more (a new version)
        conn.execute(jobs.update().where(jobs.c.id == "job_e2").values(spec=b"\x0a\xff", version=jobs.c.version + 1))
    writer = asyncio.create_task(gateway.intake.results.run())
    try:
        await gateway.intake.submit_results(connection, [
            result((i, keys[i]), worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="boom") for i in ("e1", "e2", "e3")
        ])
        await wait_for(lambda: gateway.intake.results.pending == 0, "the batch is settled")
    finally:
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
    acks = {a[0]: a[2:] for a in acks_of(connection)}
    assert acks["e1"] == acks["e3"] == (True, "")
    assert acks["e2"][0] is False and "cannot record" in acks["e2"][1]
    assert [row(migrated_engine, i).status for i in ("e1", "e2", "e3")] == ["scheduled", "running", "scheduled"]
    assert gateway.intake.results.refused == 1
    clock.advance(TIMEOUT)  # its worker forgot it: the lost-worker rule takes it back
    requeued = await gateway.liveness.requeue_expired()
    assert [r.execution_id for r in requeued.requeued] == ["e2"]


async def test_malformed_results_are_each_answered_and_logged_once_a_minute_a_credential(
    tenants, migrated_engine, clock, caplog
) -> None:
    """Every malformed result is refused in its ack (and costs the budget);
    the INFO line that names the field is one a minute a credential, so a
    worker sending them a message at a time cannot fill the log."""
    connections = Connections()
    mine, theirs = connect(connections, clock, "acme", "w1"), connect(connections, clock, "globex", "g1")
    gateway = make_gateway(migrated_engine, clock, connections)
    caplog.set_level(logging.INFO, logger="tickwheel_server.gateway.intake")
    for n in range(30):
        await gateway.intake.record(mine, [result(("bad id", n + 1))])
        await gateway.intake.record(theirs, [result(("bad id", n + 1))])
    for connection in (mine, theirs):
        acks = acks_of(connection)
        assert [a[1] for a in acks] == list(range(1, 31)) and not any(a[2] for a in acks)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and "malformed" in r.getMessage()]
    assert [line.split(";")[0] for line in said] == [
        "refused 1 malformed results from worker w1 (credential cred-acme)",
        "refused 1 malformed results from worker g1 (credential cred-globex)",
    ]
    clock.advance(60)
    await gateway.intake.record(mine, [result(("bad id", 31))])
    assert len([r for r in caplog.records if r.levelno >= logging.INFO and "malformed" in r.getMessage()]) == 3


async def test_what_a_credential_sends_that_it_does_not_hold_is_budgeted(tenants, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "g1", tenant="globex")
    connections = Connections()
    mine = connect(connections, clock, "acme", "w1", slots=1)
    gateway = make_gateway(migrated_engine, clock, connections, unheld_rate=2.0, unheld_burst=4.0)
    assert await gateway.rounds.hand_out_round() == 1
    [key] = gateway.inflight.held_by(mine)
    await gateway.intake.record(mine, [result(("g1", 1)), result(("g1", 1)), result(("bad id", 1))])
    assert sorted(a[2:] for a in acks_of(mine)) == [
        (False, "invalid result: execution_id: 1 to 256 characters of [A-Za-z0-9_.:-], as the assignment gave it"),
        (False, UNKNOWN), (False, UNKNOWN),
    ]  # the malformed one is answered at once, before the store is asked about the others
    with pytest.raises(OverBudget, match="worker credential cred-acme sent more than 2 per second"):
        await gateway.intake.record(mine, [result(key), result(("g1", 1)), result(("g1", 2))])
    # Its own held result went through; the one past the budget got no answer.
    assert [a[:3] for a in acks_of(mine)] == [(key[0], key[1], True), ("g1", 1, False)]
    assert row(migrated_engine, "e1").status == "succeeded"
    other = connect(connections, clock, "acme", "w2")
    with pytest.raises(OverBudget):  # a new stream's re-attachments are refused while the bucket is empty
        await gateway.liveness.reattach(other, [("g1", 1)])
    clock.advance(1)  # two tokens later
    assert await gateway.liveness.reattach(other, [("g1", 1)]) == ([], [("g1", 1)])
    globex = connect(connections, clock, "globex", "g1-worker")  # another credential has its own budget
    await gateway.intake.record(globex, [result(("e1", 1))])
    assert acks_of(globex) == [("e1", 1, False, UNKNOWN)]
