"""A revoked worker credential's open streams: re-verified in one store read
per pass, ended at once, handed nothing more, and what they held requeued
after the grace (the lost-worker rule); with a fake clock, on SQLite and
PostgreSQL."""

from __future__ import annotations

import random

import sqlalchemy as sa
from tickwheel.v1 import worker_pb2

from tickwheel_server.errors import Unauthenticated
from tickwheel_server.gateway.connections import Connections, WorkerConnection
from tickwheel_server.gateway.gateway import Gateway
from tickwheel_server.gateway.revocation import CredentialWatch, end_streams, revoked_streams
from tickwheel_server.store.credentials import LIVE_BATCH, WorkerCredential, WorkerCredentialStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import add_execution

GRACE = 10.0


def connect(connections: Connections, clock, credential: WorkerCredential, worker_id: str, credit: int) -> WorkerConnection:
    connection = WorkerConnection(
        worker_id=worker_id, credential=credential, handlers=frozenset({"echo"}), http=True, slots=4,
        connected_at=clock.now(), credit=credit,
    )
    connections.add(connection)
    return connection


def queued(connection: WorkerConnection) -> list[worker_pb2.PullResponse | None]:
    messages = []
    while not connection.outbox.empty():
        messages.append(connection.outbox.get_nowait())
    return messages


def status_of(engine, ident: str) -> tuple[str, int]:
    with engine.connect() as conn:
        row = conn.execute(sa.select(executions).where(executions.c.id == ident)).one()
    return row.status, row.delivery


async def test_a_revoked_credentials_streams_end_get_nothing_more_and_their_work_is_requeued(
    migrated_engine, clock
) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    credentials = WorkerCredentialStore(migrated_engine, clock)
    revoked = (await credentials.issue(["acme"], [], True)).credential
    kept = (await credentials.issue(["acme"], [], True)).credential
    connections = Connections()
    first = connect(connections, clock, revoked, "w1", credit=1)
    second = connect(connections, clock, revoked, "w2", credit=1)
    keeper = connect(connections, clock, kept, "w3", credit=0)
    gateway = Gateway(ExecutionQueue(migrated_engine, clock, rng=random.Random(1)), connections, clock, owner="s1",
                      heartbeat_timeout=30.0, reattach_grace=GRACE)  # fmt: skip
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "e2")
    assert await gateway.rounds.hand_out_round() == 2  # one to each stream of the credential, still in their outboxes

    reads: list[set[str]] = []
    forgotten: set[str] = set()

    async def live(ids):
        reads.append(set(ids))
        return await credentials.live(ids)

    watch = CredentialWatch(connections, live, clock, on_revoked=forgotten.update)
    assert await watch.check_once() == 0 and not first.closed.is_set()

    await credentials.revoke(revoked.id)
    add_execution(migrated_engine, clock, "e3")
    first.credit = second.credit = 5  # they ask for more meanwhile
    assert await watch.check_once() == 2
    assert reads == [{revoked.id, kept.id}] * 2, "one read per pass for every open stream's credential"
    assert forgotten == {revoked.id}
    for connection in (first, second):
        assert connection.closed.is_set()
        assert isinstance(connection.ended_by, Unauthenticated) and "revoked" in str(connection.ended_by)
        assert queued(connection) == [None], "the assignment not yet written is dropped with the stream"
    assert not keeper.closed.is_set() and keeper.ended_by is None

    # Between the end and the stream's teardown, nothing more goes to it.
    assert await gateway.rounds.hand_out_round() == 0
    assert status_of(migrated_engine, "e3")[0] == "scheduled"
    for connection in (first, second):  # the Pull's teardown
        connections.remove(connection)
        gateway.liveness.disconnected(connection)

    # The lost-worker rule: held for the grace, then requeued (delivery 2).
    clock.advance(GRACE - 1)
    assert not (await gateway.liveness.requeue_expired()).requeued
    assert status_of(migrated_engine, "e1") == ("running", 1)
    clock.advance(1)
    assert sorted(item.execution_id for item in (await gateway.liveness.requeue_expired()).requeued) == ["e1", "e2"]
    keeper.credit = 3
    assert await gateway.rounds.hand_out_round() == 3
    assignments = [a for m in queued(keeper) if m is not None for a in m.assignment.assignments]
    assert sorted((a.execution_id, a.delivery) for a in assignments) == [("e1", 2), ("e2", 2), ("e3", 1)]
    results = [
        worker_pb2.ExecutionResult(execution_id=a.execution_id, delivery=a.delivery, attempt=a.attempt,
                                   outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED)
        for a in assignments
    ]  # fmt: skip
    await gateway.intake.record(keeper, results)
    assert [status_of(migrated_engine, e) for e in ("e1", "e2", "e3")] == [
        ("succeeded", 2), ("succeeded", 2), ("succeeded", 1)]  # fmt: skip


async def test_the_revoking_server_ends_the_streams_at_once_and_a_quiet_server_reads_nothing(
    migrated_engine, clock
) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    credentials = WorkerCredentialStore(migrated_engine, clock)
    revoked = (await credentials.issue(["acme"], [], True)).credential
    kept = (await credentials.issue(["acme"], [], True)).credential
    connections = Connections()
    reads: list[set[str]] = []

    async def live(ids):
        reads.append(set(ids))
        return await credentials.live(ids)

    watch = CredentialWatch(connections, live, clock)
    assert await watch.check_once() == 0 and reads == [], "no stream open: nothing read"
    streams = [connect(connections, clock, c, f"w{n}", credit=1) for n, c in enumerate([revoked, kept, revoked])]
    assert end_streams(connections.all(), {revoked.id}) == 2
    assert [s.ended_by is not None for s in streams] == [True, False, True]
    assert end_streams(connections.all(), {revoked.id}) == 0, "an ended stream is not ended twice"
    assert revoked_streams(streams, {kept.id}) == [], "ended streams are closed already"


async def test_live_reads_many_credentials_in_one_transaction(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    credentials = WorkerCredentialStore(migrated_engine, clock)
    issued = [(await credentials.issue(["acme"], [], True)).credential.id for _ in range(3)]
    await credentials.revoke(issued[1])
    unknown = [f"nope{n}" for n in range(LIVE_BATCH + 5)]  # more than one IN list
    assert await credentials.live([*issued, *unknown, "", "x\x00"]) == {issued[0], issued[2]}
    assert await credentials.live([]) == set()
