"""Dead letters: listing a tenant's dead executions and replaying them, on
SQLite and PostgreSQL.

Dead executions are made the way the server makes them, through the stores:
a one-off job is created (JobStore), claimed into an execution
(DispatchStore, partition 0 at epoch 1), handed out (ExecutionQueue) and its
attempt fails permanently (``record_results``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel_server.errors import FailedPrecondition, NotFound, QuotaExceeded
from tickwheel.shared.ids import new_job_id
from tickwheel_server.alerts.catalogue import dead_letter_alert, poison_alert
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.deadletters import DeadLetterStore
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.executions import Capability, ResultIn
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.jobrecords import NewJob
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import attempts, executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_manual_quota import slots_hold

OWNER = "session-1"


@dataclass
class World:
    engine: sa.Engine
    clock: FakeClock
    jobs: JobStore
    dispatch: DispatchStore
    queue: ExecutionQueue
    history: HistoryStore
    alerts: AlertStore
    dead: DeadLetterStore

    async def job(self, tenant: str = "acme", name: str = "charge", payload: bytes = b'{"amount": 7}') -> str:
        """A one-off ``echo`` job due now (no jitter), claimed into its execution; the execution id."""
        job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")), payload=payload)
        job.jitter.exact = True
        now = self.clock.now()
        job.schedule.once_at.FromDatetime(now)
        ident = new_job_id(now)
        await self.jobs.create(
            NewJob(id=ident, tenant=tenant, name=name, spec=job.SerializeToString(), time_zone="UTC",
                   next_run_at=now, next_due_at=now, tzdata_version="2026a", payload_size=len(payload)),
            f"req-{ident}",
        )  # fmt: skip
        claimed = await self.dispatch.claim_due({0: 1}, now)
        [execution] = [e for e in claimed.executions if e.id.startswith(ident)]
        return execution.id

    async def hand_out(self, tenant: str = "acme"):
        return await self.queue.handout.hand_out_ready(
            OWNER, self.clock.now(), Capability((tenant,), ("echo",), False), 100
        )

    async def fail(self, handed, error: str = "card declined", outcome=worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT):
        acks = await self.queue.outcomes.record_results(
            [ResultIn(execution_id=h.id, delivery=h.delivery, attempt=h.attempt, outcome=outcome, error=error,
                      worker_id="w1", tenants=("acme", "globex")) for h in handed]
        )  # fmt: skip
        assert all(ack.accepted for ack in acks), acks

    async def dead_execution(self, tenant: str = "acme", error: str = "card declined", **job) -> str:
        """An execution that failed permanently at its first attempt."""
        ident = await self.job(tenant, **job)
        handed = [h for h in await self.hand_out(tenant) if h.id == ident]
        await self.fail(handed, error)
        return ident

    def row(self, execution_id: str):
        with self.engine.connect() as conn:
            return conn.execute(sa.select(executions).where(executions.c.id == execution_id)).one()


@pytest.fixture
async def w(migrated_engine, clock) -> World:
    for name in ("acme", "globex"):
        await TenantStore(migrated_engine, clock).create(Tenant(name=name))
    assert await PartitionStore(migrated_engine, clock).raise_epoch(0, 1, OWNER)
    alerts = AlertStore(migrated_engine, clock)
    return World(
        migrated_engine, clock, JobStore(migrated_engine, clock, partition_count=1),
        DispatchStore(migrated_engine, clock), ExecutionQueue(migrated_engine, clock),
        HistoryStore(migrated_engine, clock), alerts, DeadLetterStore(migrated_engine, clock, alerts),
    )  # fmt: skip


async def test_dead_letters_are_listed_newest_first_with_every_attempt(w: World) -> None:
    first = await w.dead_execution(error="card declined")
    w.clock.advance(5)
    second = await w.dead_execution(error="account closed", payload=b"second")
    await w.job()  # scheduled, not dead: not listed
    page = await w.dead.list("acme")
    assert [e.id for e in page.executions] == [second, first]
    assert not page.more and page.next_key is None
    newest = page.executions[0]
    assert (newest.status, newest.dead_reason, newest.error, newest.payload) == (
        "dead", "failed permanently", "account closed", b"second")  # fmt: skip
    assert [(a.attempt, a.delivery, a.status, a.error) for a in newest.attempts] == [(1, 1, "failed", "account closed")]
    assert newest.finished_at == w.clock.now()


async def test_retries_exhausted_end_as_a_dead_letter_with_every_error(w: World) -> None:
    ident = await w.job()
    for attempt in (1, 2, 3, 4, 5):  # the default policy: 5 attempts
        w.clock.advance(3600)  # past any backoff
        handed = [h for h in await w.hand_out() if h.id == ident]
        assert [h.attempt for h in handed] == [attempt]
        await w.fail(handed, f"timeout {attempt}", worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE)
    [dead] = (await w.dead.list("acme")).executions
    assert dead.id == ident and dead.dead_reason.startswith("attempts exhausted")
    assert [a.error for a in dead.attempts] == [f"timeout {n}" for n in (1, 2, 3, 4, 5)]


async def test_pages_cover_every_dead_letter_once_even_with_equal_instants(w: World) -> None:
    made = []
    for index in range(7):
        made.append(await w.dead_execution(payload=str(index).encode()))
        if index % 3 == 2:
            w.clock.advance(1)  # groups of three share their finished_at
    seen, key = [], None
    while True:
        page = await w.dead.list("acme", before_key=key, limit=2)
        assert len(page.executions) <= 2
        seen.extend(e.id for e in page.executions)
        key = page.next_key
        if key is None:
            break
    assert sorted(seen) == sorted(made) and len(seen) == len(set(seen))
    ordered = [(w.row(i).finished_at, i) for i in seen]
    assert ordered == sorted(ordered, reverse=True)


async def test_dead_letters_are_scoped_to_the_tenant_and_filtered_by_job(w: World) -> None:
    acme = await w.dead_execution()
    other_job = await w.dead_execution(name="other")
    globex = await w.dead_execution(tenant="globex")
    acme_job = w.row(acme).job_id
    assert [e.id for e in (await w.dead.list("acme", job_id=acme_job)).executions] == [acme]
    assert {e.id for e in (await w.dead.list("acme")).executions} == {acme, other_job}
    assert [e.id for e in (await w.dead.list("globex")).executions] == [globex]
    assert (await w.dead.list("globex", job_id=acme_job)).executions == ()
    assert (await w.dead.list("acme", job_id="job_nonexistent")).executions == ()


async def test_replay_starts_a_fresh_series_with_the_same_id_keeping_delivery(w: World) -> None:
    ident = await w.dead_execution(error="card declined")
    before = w.row(ident)
    w.clock.advance(60)
    replayed = await w.dead.replay("acme", ident)
    assert (replayed.id, replayed.status, replayed.attempt, replayed.ready_at) == (ident, "scheduled", 1, w.clock.now())
    assert (replayed.owner, replayed.worker_id, replayed.reap_count, replayed.dead_reason, replayed.finished_at) == (
        None, None, 0, "", None)  # fmt: skip
    assert replayed.delivery == before.delivery == 1  # deliveries only grow: never reset
    assert (replayed.payload, replayed.error) == (bytes(before.payload), "card declined")
    assert [(a.attempt, a.delivery) for a in replayed.attempts] == [(1, 1)]  # the first series stays
    assert (await w.dead.list("acme")).executions == ()

    [again] = await w.hand_out()
    assert (again.id, again.attempt, again.delivery) == (ident, 1, 2)
    acks = await w.queue.outcomes.record_results(
        [ResultIn(ident, again.delivery, 1, worker_pb2.RESULT_OUTCOME_SUCCEEDED, "", "w2", ("acme",))]
    )
    assert acks[0].accepted
    execution = await w.history.get_execution("acme", ident)
    assert execution.status == "succeeded"
    assert [(a.attempt, a.delivery, a.status) for a in execution.attempts] == [(1, 1, "failed"), (1, 2, "succeeded")]


async def test_a_replay_takes_a_manual_run_unit_and_is_refused_at_the_quota(w: World) -> None:
    """A replay queues a run the tenant asked for, as a trigger does: it
    takes a unit of max_pending_manual_runs until it starts, and past the
    quota it is refused naming it, nothing written (the execution stays
    dead). Without it a tenant at its quota queued a run per dead
    execution it had."""
    first, second = await w.dead_execution(), await w.dead_execution(name="other")
    await TenantStore(w.engine, w.clock).update("acme", max_pending_manual_runs=1)
    await w.dead.replay("acme", first)
    assert slots_hold(w.engine) == 1
    before = w.row(second)
    with pytest.raises(QuotaExceeded) as refused:
        await w.dead.replay("acme", second)
    assert (refused.value.quota, refused.value.limit) == ("max_pending_manual_runs", 1)
    assert w.row(second) == before and slots_hold(w.engine) == 1
    [started] = await w.hand_out()
    assert started.id == first and slots_hold(w.engine) == 0
    replayed = await w.dead.replay("acme", second)
    assert replayed.status == "scheduled" and slots_hold(w.engine) == 1
    await w.history.cancel_execution("acme", second)
    assert slots_hold(w.engine) == 0


async def test_a_result_of_the_first_series_cannot_touch_the_replay(w: World) -> None:
    ident = await w.job()
    [handed] = await w.hand_out()
    await w.fail([handed])
    await w.dead.replay("acme", ident)
    stale = ResultIn(ident, handed.delivery, handed.attempt, worker_pb2.RESULT_OUTCOME_SUCCEEDED, "", "w1", ("acme",))
    await w.queue.outcomes.record_results([stale])
    row = w.row(ident)
    assert (row.status, row.attempt, row.delivery) == ("scheduled", 1, 1)
    with w.engine.connect() as conn:
        assert conn.execute(sa.select(attempts.c.status).where(attempts.c.execution_id == ident)).scalars().all() == [
            "failed"]  # fmt: skip


async def test_replay_refuses_what_is_not_dead_and_writes_nothing(w: World) -> None:
    scheduled = await w.job()
    with pytest.raises(FailedPrecondition, match="scheduled, not dead"):
        await w.dead.replay("acme", scheduled)
    assert w.row(scheduled).status == "scheduled"
    dead = await w.dead_execution()
    await w.dead.replay("acme", dead)
    with pytest.raises(FailedPrecondition):  # replayed once already
        await w.dead.replay("acme", dead)


async def test_replay_of_another_tenants_or_a_missing_execution_is_not_found(w: World) -> None:
    theirs = await w.dead_execution(tenant="globex")
    before = w.row(theirs)
    with pytest.raises(NotFound) as error:
        await w.dead.replay("acme", theirs)
    assert "globex" not in str(error.value)
    assert w.row(theirs) == before
    with pytest.raises(NotFound):
        await w.dead.replay("acme", "job_missing:2027-01-01T00:00:00Z")


async def test_replay_resolves_the_executions_dead_letter_and_poison_alerts_only(w: World) -> None:
    ident = await w.dead_execution()
    other = await w.dead_execution()
    for execution_id in (ident, other):
        row = w.row(execution_id)
        await w.alerts.raise_alert(dead_letter_alert(
            execution_id=execution_id, job_id=row.job_id, tenant="acme", reason=row.dead_reason))  # fmt: skip
    await w.alerts.raise_alert(poison_alert(execution_id=ident, job_id=w.row(ident).job_id, tenant="acme", reason="x"))
    w.clock.advance(1)
    await w.dead.replay("acme", ident)
    open_keys = {a.key for a in (await w.alerts.list()).alerts}
    assert open_keys == {f"dead_letter:{other}"}
    resolved = {a.key: a for a in (await w.alerts.list(include_resolved=True)).alerts if not a.open}
    assert set(resolved) == {f"dead_letter:{ident}", f"poison:{ident}"}
    assert all(a.resolved_at == w.clock.now() for a in resolved.values())


async def test_concurrent_replays_of_one_execution_start_one_series(w: World) -> None:
    ident = await w.dead_execution()
    outcomes = await asyncio.gather(*(w.dead.replay("acme", ident) for _ in range(4)), return_exceptions=True)
    assert sum(1 for o in outcomes if not isinstance(o, Exception)) == 1
    assert all(isinstance(o, FailedPrecondition) for o in outcomes if isinstance(o, Exception))


async def test_the_listing_is_a_backwards_index_range_scan_with_a_limit(w: World) -> None:
    if w.engine.dialect.name != "postgresql":
        pytest.skip("EXPLAIN is PostgreSQL's")
    dead = [await w.dead_execution() for _ in range(3)]
    # Volume for the planner, copied from a real dead row in one batched
    # insert (10 000 dead letters through the stores would take minutes):
    # finished executions of both tenants, a third of them dead. With a
    # handful of dead rows the planner rightly sorts them instead.
    template = w.row(dead[0])._asdict()
    rows = []
    for index in range(6000):
        status, tenant = ("dead", "succeeded", "canceled")[index % 3], ("acme", "globex")[index % 2]
        rows.append({**template, "id": f"bulk-{index}", "status": status, "tenant": tenant,
                     "finished_at": template["finished_at"] - index})  # fmt: skip
    with w.engine.begin() as conn:
        conn.execute(executions.insert(), rows)
        conn.exec_driver_sql("ANALYZE executions")
    sent = []

    def capture(_conn, _cursor, statement, parameters, _context, _many):
        if "FROM executions" in statement and "ORDER BY" in statement:
            sent.append((statement, parameters))

    event.listen(w.engine, "before_cursor_execute", capture)
    try:
        page = await w.dead.list("acme", limit=2)
        await w.dead.list("acme", job_id=w.row(dead[0]).job_id, before_key=page.next_key, limit=2)
    finally:
        event.remove(w.engine, "before_cursor_execute", capture)
    assert len(sent) == 2
    for (statement, parameters), index in zip(sent, ("executions_dead", "executions_dead_job")):
        with w.engine.connect() as conn:
            plan = "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + statement, parameters))
        assert index in plan and "Limit" in plan, plan
        assert "Sort" not in plan and "Seq Scan" not in plan, plan
