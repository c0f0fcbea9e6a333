"""The claim's direct hand-out (``store/claim_handout.py``,
``gateway/claimed.py``) on SQLite and PostgreSQL: what is due by the
claim's instant and needs no decision at it is inserted already handed out
to this server's workers, within the credit the gateway lends, shared by
weighted fair share; everything else takes the round's path."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import execution_id, new_job_id, to_us
from tickwheel_server.dispatcher.dispatcher import Dispatcher
from tickwheel_server.gateway.connections import Connections
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.store.claim_handout import HandOutOffer
from tickwheel_server.store.errors import AmbiguousCommitError
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.fairshare import FairShare
from tickwheel_server.store.jobrecords import NewJob
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_dispatch_claim import NOW, OWNED, World, cron_job, once_job
from .test_gateway_liveness import connect, drain_outbox, make_gateway
from .test_handout import add_execution, committed_unanswered
from .test_handout_fence import TTL, gateway_for, settle

SERVED = Capability(("acme", "beta", "capped"), ("echo",), True)
NOW_PASS = dict(lookahead=timedelta(0))


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    return World(migrated_engine, clock)


def offer(credit: int = 100, *, fence=lambda: None, fair: FairShare | None = None,
          capability: Capability = SERVED) -> HandOutOffer:
    return HandOutOffer("s1", ((capability, credit),), fair or FairShare(), fence, lambda at_us: at_us)


async def create(world, job: job_pb2.Job, cursor, tenant: str = "acme") -> str:
    ident = new_job_id(world.clock.now())
    await world.jobs.create(
        NewJob(id=ident, tenant=tenant, name=job.name, spec=job.SerializeToString(), time_zone="UTC",
               next_run_at=cursor, next_due_at=cursor, tzdata_version="2026a", payload_size=len(job.payload)),
        f"req-{ident}",
    )
    return ident


def statuses(engine) -> dict[str, tuple]:
    with engine.connect() as conn:
        return {r.id: (r.status, r.owner, r.delivery) for r in conn.execute(
            sa.select(executions.c.id, executions.c.status, executions.c.owner, executions.c.delivery))}


def sent(connection) -> list[tuple[str, int]]:
    return sorted((a.execution_id, a.delivery) for m in drain_outbox(connection) for a in m.assignment.assignments)


async def test_a_due_one_off_goes_out_from_the_claim_and_its_result_is_recorded(world, migrated_engine, clock) -> None:
    connections = Connections()
    connection = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    job_id = await create(world, once_job(NOW), NOW)
    loan = gateway.lending.lend(1000)
    assert connection.credit == 0, "the lent credit is not the rounds' meanwhile"
    result = await world.dispatch.claim_due(OWNED, NOW, offer=loan.offer, **NOW_PASS)
    ident = execution_id(job_id, NOW)
    assert result.executions == [], "nothing for the wheel: it is out already"
    [[handed]] = result.handed_out
    assert (handed.id, handed.delivery, handed.attempt, handed.payload) == (ident, 1, 1, b"once")
    assert await gateway.lending.settle(loan, result.handed_out) == 1
    assert sent(connection) == [(ident, 1)] and connection.credit == 9
    row = world.execution_rows()[ident]
    assert (row.status, row.owner, row.delivery, row.attempt) == ("running", "s1", 1, 1)
    assert row.handed_out_at >= row.due_at == to_us(NOW), "never early by the server's clock"
    assert world.job_row(job_id).state == "completed"
    done = worker_pb2.ExecutionResult(execution_id=ident, delivery=1, attempt=1,
                                      outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED)
    await gateway.intake.record(connection, [done])
    assert statuses(migrated_engine)[ident][0] == "succeeded" and len(gateway.inflight) == 0


async def test_what_needs_a_decision_or_is_not_yet_due_takes_the_rounds_path(world, migrated_engine, clock) -> None:
    tenants = TenantStore(migrated_engine, clock)
    await tenants.create(Tenant(name="capped", max_concurrency=5))
    await tenants.create(Tenant(name="other"))
    keyed = once_job(NOW)
    keyed.concurrency_keys.add(key="k", limit=5)
    beside = cron_job()
    beside.overlap_policy = job_pb2.OVERLAP_POLICY_ALLOW
    unrun = once_job(NOW)
    unrun.target.handler.name = "unrun"
    jobs = {
        "handed": await create(world, once_job(NOW), NOW),
        "beside": await create(world, beside, NOW),
        "recurring, overlap skip": await create(world, cron_job(), NOW),
        "keyed": await create(world, keyed, NOW),
        "capped tenant": await create(world, once_job(NOW), NOW, tenant="capped"),
        "a tenant these workers do not serve": await create(world, once_job(NOW), NOW, tenant="other"),
        "a handler they do not run": await create(world, unrun, NOW),
        "an HTTP target (they take none)": await create(world, once_job(NOW, http=True), NOW),
        "another run of its job not ended": await create(world, once_job(NOW), NOW),
        "due a second later": await create(world, once_job(NOW + timedelta(seconds=1)), NOW + timedelta(seconds=1)),
    }
    add_execution(migrated_engine, clock, "trigger-1", job_id=jobs["another run of its job not ended"],
                  origin="trigger")
    capability = Capability(("acme", "capped"), ("echo",), False)
    result = await world.dispatch.claim_due(
        OWNED, NOW, lookahead=timedelta(seconds=30), offer=offer(capability=capability)
    )
    handed = {h.job_id for group in result.handed_out for h in group}
    assert handed == {jobs["handed"], jobs["beside"]}
    rows = statuses(migrated_engine)
    for name, job_id in jobs.items():
        ident = execution_id(job_id, NOW + timedelta(seconds=1) if name == "due a second later" else NOW)
        expected = ("running", "s1", 1) if job_id in handed else ("scheduled", None, 0)
        assert rows.get(ident) == expected, name
    assert {e.id for e in result.executions} == {
        execution_id(job_id, NOW + timedelta(seconds=1) if name == "due a second later" else NOW)
        for name, job_id in jobs.items() if job_id not in handed
    }, "the rest goes to the wheel"


async def test_the_credit_is_shared_by_weight_and_the_rest_is_scheduled(world, migrated_engine, clock) -> None:
    tenants = TenantStore(migrated_engine, clock)
    await tenants.create(Tenant(name="beta", weight=3))
    for tenant in ("acme", "beta"):
        for _ in range(6):
            await create(world, once_job(NOW), NOW, tenant=tenant)
    fair = FairShare()
    result = await world.dispatch.claim_due(OWNED, NOW, offer=offer(4, fair=fair), **NOW_PASS)
    [group] = result.handed_out
    assert sorted(h.tenant for h in group) == ["acme", "beta", "beta", "beta"], "weights 1 and 3"
    assert len(result.executions) == 8
    assert sorted(status for status, _, _ in statuses(migrated_engine).values()) == ["running"] * 4 + ["scheduled"] * 8
    assert set(fair.passes()) == {"acme", "beta"}, "the rounds' passes are charged for what the claim handed out"


async def test_a_fence_refusing_hands_nothing_out_and_the_claim_still_commits(world, migrated_engine) -> None:
    first = await create(world, once_job(NOW), NOW)
    result = await world.dispatch.claim_due(OWNED, NOW, offer=offer(fence=lambda: "session in doubt"), **NOW_PASS)
    assert result.handed_out == [] and [e.id for e in result.executions] == [execution_id(first, NOW)]
    answers = iter([None, "session lost"])  # fine before the writes, refused just before the commit
    second = await create(world, once_job(NOW), NOW)
    result = await world.dispatch.claim_due(OWNED, NOW, offer=offer(fence=lambda: next(answers)), **NOW_PASS)
    assert result.handed_out == [] and [e.id for e in result.executions] == [execution_id(second, NOW)]
    assert {status for status, _, _ in statuses(migrated_engine).values()} == {"scheduled"}
    assert world.job_row(second).state == "completed", "claimed again without the offer"


async def test_an_occurrence_that_already_existed_is_not_handed_out(world, migrated_engine, clock) -> None:
    beside = cron_job()
    beside.overlap_policy = job_pb2.OVERLAP_POLICY_ALLOW  # no probe of its other runs: the insert decides
    job_id = await create(world, beside, NOW)
    ident = execution_id(job_id, NOW)
    add_execution(migrated_engine, clock, ident, job_id=job_id)
    with migrated_engine.begin() as conn:
        conn.execute(sa.update(executions).where(executions.c.id == ident).values(status="succeeded"))
    result = await world.dispatch.claim_due(OWNED, NOW, offer=offer(), **NOW_PASS)
    assert result.handed_out == [[]] and [e.id for e in result.executions] == [ident]
    assert statuses(migrated_engine)[ident] == ("succeeded", None, 0)


async def test_nothing_is_lent_while_the_rounds_may_have_left_ready_work(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    for ident in ("e1", "e2"):
        add_execution(migrated_engine, clock, ident)
    connections = Connections()
    connection = connect(connections, clock, slots=2)
    gateway = make_gateway(migrated_engine, clock, connections)
    assert await gateway.rounds.hand_out_round() == 2
    assert gateway.rounds.ready_left, "its claim came back full"
    connection.credit = 5
    assert gateway.lending.lend(1000) is None and connection.credit == 5
    assert await gateway.rounds.hand_out_round() == 0
    assert not gateway.rounds.ready_left
    loan = gateway.lending.lend(1000)
    assert loan is not None and connection.credit == 0
    assert await gateway.lending.settle(loan, []) == 0 and connection.credit == 5


async def test_a_round_that_found_the_credit_lent_is_run_again_when_it_comes_back(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e1")
    connections = Connections()
    connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    loan = gateway.lending.lend(1000)
    assert await gateway.rounds.hand_out_round() == 0, "no credit while it is lent"
    gateway._wake.clear()
    await gateway.lending.settle(loan, [])
    assert gateway._wake.is_set(), "e1 is not left for the next sweep"
    assert await gateway.rounds.hand_out_round() == 1
    loan = gateway.lending.lend(1000)
    gateway._wake.clear()
    await gateway.lending.settle(loan, [])
    assert not gateway._wake.is_set(), "no round began meanwhile: none is woken"


async def test_a_session_in_doubt_at_the_deal_gives_the_claims_hand_outs_back(migrated_engine) -> None:
    clock = FakeClock()  # not autojump: the lease store's keep-alive would run time away
    leases = MemoryLeaseStore(clock)
    try:
        await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
        await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
        connections = Connections()
        connection = connect(connections, clock)
        session = await leases.open_session(TTL, keepalive=False)
        gateway = gateway_for(migrated_engine, clock, connections, session)
        dispatch = DispatchStore(migrated_engine, clock)
        spec = once_job(clock.now())
        add_execution(migrated_engine, clock, "gone")  # a job row to claim from: give it a cursor due now
        with migrated_engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE jobs SET spec = :spec WHERE id = 'job_gone'"), dict(spec=spec.SerializeToString())
            )
            conn.execute(
                sa.text("UPDATE job_cursors SET next_run_at = :at, next_due_at = :at WHERE job_id = 'job_gone'"),
                dict(at=to_us(clock.now())),
            )
            conn.execute(sa.delete(executions))
        loan = gateway.lending.lend(1000)
        result = await dispatch.claim_due(OWNED, clock.now(), offer=loan.offer, **NOW_PASS)
        [[handed]] = result.handed_out
        clock.advance(TTL * 0.8)  # the lease still exists, but not surely for a quarter TTL more
        await settle()
        assert await gateway.lending.settle(loan, result.handed_out) == 0
        assert sent(connection) == [] and connection.credit == 10
        assert statuses(migrated_engine)[handed.id] == ("scheduled", None, 0), "given back, the delivery with it"
    finally:
        await leases.close()


# --------------------------------------------------------------------------- the deal beside the next claim


class _Owned:
    generation = 1

    def owned(self) -> dict[int, int]:
        return dict(OWNED)

    async def wait_changed(self, after: int) -> int:  # pragma: no cover - tick_once does not wait
        return self.generation


class _Wheel:
    def __init__(self) -> None:
        self.timers: list[str] = []

    def insert(self, key: str, _due_us: int, _partition: int) -> None:
        self.timers.append(key)

    def drop(self, _predicate) -> None:  # pragma: no cover - ownership does not change here
        pass


class _SecondClaimHeld:
    """The store's claims; the second stops at its start (after
    ``meanwhile``) until :attr:`go` is set, so what the dispatcher does
    beside a claim in flight can be seen."""

    def __init__(self, dispatch: DispatchStore, meanwhile=lambda: None) -> None:
        self._dispatch = dispatch
        self._meanwhile = meanwhile
        self.calls = 0
        self.waiting = asyncio.Event()
        self.go = asyncio.Event()

    async def claim_due(self, *args, **kwargs):
        self.calls += 1
        if self.calls == 2:
            self._meanwhile()
            self.waiting.set()
            await self.go.wait()
        return await self._dispatch.claim_due(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._dispatch, name)


async def _tick_with_second_claim_held(dispatcher: Dispatcher, held: _SecondClaimHeld) -> int:
    """Run one tick, letting the second claim go once the loop has run
    everything else it could; returns what the tick claimed."""
    tick = asyncio.create_task(dispatcher.tick_once())
    await held.waiting.wait()
    await asyncio.wait({dispatcher._dealing})  # the first claim's deal, done beside the held claim
    held.go.set()
    return await tick


async def test_a_claims_deal_reaches_the_worker_while_the_next_claim_is_in_flight(world, migrated_engine, clock) -> None:
    connections = Connections()
    connection = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    at = clock.now()
    jobs = [await create(world, once_job(at), at) for _ in range(2)]
    at_second_claim: list[int] = []
    held = _SecondClaimHeld(world.dispatch, meanwhile=lambda: at_second_claim.append(connection.outbox.qsize()))
    dispatcher = Dispatcher(held, _Owned(), _Wheel(), clock, batch=1, lender=gateway.lending)
    tick = asyncio.create_task(dispatcher.tick_once())
    await held.waiting.wait()
    await asyncio.wait({dispatcher._dealing})
    first = sent(connection)
    assert at_second_claim == [0], "the second claim began before the first's deal"
    assert len(first) == 1, "the first claim's hand-out went out while the second claim was held"
    assert connection.credit == 8, "one spent on the first claim's delivery, one lent to the second claim"
    held.go.set()
    assert await tick == 2
    assert sorted(first + sent(connection)) == sorted((execution_id(j, at), 1) for j in jobs)
    assert dispatcher._dealing is None, "the tick ends with every deal done"
    assert connection.credit == 8 and len(gateway.inflight) == 2


async def test_a_stream_closing_while_the_next_claim_is_in_flight_gets_none_of_the_deal(
    world, migrated_engine, clock
) -> None:
    connections = Connections()
    connection = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    at = clock.now()
    jobs = [await create(world, once_job(at), at) for _ in range(2)]
    held = _SecondClaimHeld(world.dispatch, meanwhile=connection.closed.set)
    dispatcher = Dispatcher(held, _Owned(), _Wheel(), clock, batch=1, lender=gateway.lending)
    await _tick_with_second_claim_held(dispatcher, held)
    assert sent(connection) == [] and len(gateway.inflight) == 0
    rows = statuses(migrated_engine)
    for job_id in jobs:
        assert rows[execution_id(job_id, at)] == ("scheduled", None, 0), "given back for a round"


async def test_a_fence_refusing_while_the_next_claim_is_in_flight_sends_none_of_either(migrated_engine) -> None:
    clock = FakeClock()  # not autojump: the lease store's keep-alive would run time away
    leases = MemoryLeaseStore(clock)
    try:
        await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
        await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
        world = World(migrated_engine, clock)
        connections = Connections()
        connection = connect(connections, clock)
        session = await leases.open_session(TTL, keepalive=False)
        gateway = gateway_for(migrated_engine, clock, connections, session)
        at = clock.now()
        jobs = [await create(world, once_job(at), at) for _ in range(2)]
        # The session falls in doubt after the first claim committed, before its deal runs.
        held = _SecondClaimHeld(world.dispatch, meanwhile=lambda: clock.advance(TTL * 0.8))
        wheel = _Wheel()
        dispatcher = Dispatcher(held, _Owned(), wheel, clock, batch=1, lender=gateway.lending)
        await _tick_with_second_claim_held(dispatcher, held)
        assert sent(connection) == [] and len(gateway.inflight) == 0
        assert connection.credit == 10, "every loan given back"
        rows = statuses(migrated_engine)
        for job_id in jobs:
            assert rows[execution_id(job_id, at)] == ("scheduled", None, 0)
    finally:
        await leases.close()


async def test_what_a_claim_did_not_hand_out_is_lent_again_before_its_deal(world, migrated_engine, clock) -> None:
    connections = Connections()
    workers = [connect(connections, clock, "w1"), connect(connections, clock, "w2")]
    gateway = make_gateway(migrated_engine, clock, connections)
    await create(world, once_job(NOW), NOW)
    loan = gateway.lending.lend(15)
    assert sum(w.credit for w in workers) == 5
    result = await world.dispatch.claim_due(OWNED, NOW, offer=loan.offer, **NOW_PASS)
    gateway.lending.keep(loan, result.handed_out)
    assert sum(w.credit for w in workers) == 19, "all but the one handed out is back at once"
    again = gateway.lending.lend(1000)
    assert again is not None and sum(w.credit for w in workers) == 0, "the next claim may borrow it"
    await gateway.lending.settle(again, [])
    assert await gateway.lending.settle(loan, result.handed_out) == 1
    assert sum(w.credit for w in workers) == 19 and sum(len(sent(w)) for w in workers) == 1, "never overspent"


async def test_what_a_claim_in_doubt_handed_out_is_undone_by_the_hand_out_store(
    world, migrated_engine, clock, monkeypatch
) -> None:
    """The claim's COMMIT went unanswered (PostgreSQL stopped during it): it
    may have committed, its job's cursor moved on, and the run it inserted
    handed out is sent by no one. The hand-out store of the offer keeps it
    in doubt; its next transaction puts it back to ``scheduled`` (delivery
    0), for the next round, and touches nothing else."""
    from tickwheel_server.store.queue import ExecutionQueue

    queue = ExecutionQueue(migrated_engine, clock)
    job_id = await create(world, once_job(NOW), NOW)
    ident = execution_id(job_id, NOW)
    real = world.dispatch._tx

    monkeypatch.setattr(world.dispatch, "_tx", committed_unanswered(real))
    in_doubt = HandOutOffer("s1", ((SERVED, 10),), FairShare(), lambda: None, queue.handout.unique_instant,
                            queue.handout.in_doubt)
    with pytest.raises(AmbiguousCommitError):
        await world.dispatch.claim_due(OWNED, NOW, offer=in_doubt, **NOW_PASS)
    monkeypatch.setattr(world.dispatch, "_tx", real)
    assert statuses(migrated_engine) == {ident: ("running", "s1", 1)}
    assert world.job_row(job_id).state == "completed", "committed: the claim will not plan it again"
    await queue.handout.in_doubt.settle()
    assert statuses(migrated_engine) == {ident: ("scheduled", None, 0)}
    [handed] = await queue.handout.hand_out_ready("s1", NOW, SERVED, 10)
    assert (handed.id, handed.delivery) == (ident, 1)


async def test_a_round_under_way_when_credit_is_lent_is_followed_by_another(
    world, migrated_engine, clock, monkeypatch
) -> None:
    """A claim and a round woken at one instant: the round began (its
    groups read) before the loan, reads the credit after it, finds it lent
    and skips its workers. The loan's settle then wakes the next round, so
    the ready execution does not wait for the sweep."""
    connections = Connections()
    connection = connect(connections, clock)
    gateway = make_gateway(migrated_engine, clock, connections)
    add_execution(migrated_engine, clock, "ready-now")
    gate = asyncio.Event()
    armed, real = gateway.rounds._armed, gateway.rounds._armed.start_due

    async def held(*args, **kwargs):
        await gate.wait()
        return await real(*args, **kwargs)

    monkeypatch.setattr(armed, "start_due", held)
    under_way = asyncio.create_task(gateway.rounds.hand_out_round())
    for _ in range(5):
        await asyncio.sleep(0)
    loan = gateway.lending.lend(1000)
    assert loan is not None and connection.credit == 0
    gate.set()
    assert await under_way == 0, "its workers' credit was lent"
    gateway._wake.clear()
    assert await gateway.lending.settle(loan, []) == 0
    assert gateway._wake.is_set(), "the next round runs at once"
    monkeypatch.undo()
    assert await gateway.rounds.hand_out_round() == 1
    assert sent(connection) == [("ready-now", 1)]
