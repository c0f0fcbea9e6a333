"""Executions armed ahead of their instant (store/arming.py), on SQLite and
PostgreSQL: what may be armed, the start at the instant (never early, only
by the arming session), disarming by the owner, by the reaper and by every
write that changes a job's executions not started, and how readers see an
armed execution (scheduled, never running)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.errors import NotFound
from tickwheel_server.lease.keys import SERVERS_PREFIX, session_name
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.maintenance.reaper import Reaper
from tickwheel_server.store.errors import AmbiguousCommitError
from tickwheel_server.store.executions import Capability, ResultIn
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.manual import ManualStore
from tickwheel_server.store.operations import OperationsStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions, tenants
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import ANY_ECHO, add_execution, committed_unanswered, lost_before_commit

AHEAD = timedelta(seconds=5)


def one_off(clock, due_in: float, *, overlap: int = 0, key: str = "") -> job_pb2.Job:
    job = job_pb2.Job(name="once", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    job.schedule.once_at.FromDatetime(clock.now() + timedelta(seconds=due_in))
    job.overlap_policy = overlap
    if key:
        job.concurrency_keys.add(key=key, limit=1)
    return job


def every_minute(*, overlap: int = 0) -> job_pb2.Job:
    job = job_pb2.Job(name="tick", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    job.schedule.cron.expression = "* * * * *"
    job.schedule.cron.time_zone = "UTC"
    job.overlap_policy = overlap
    return job


@pytest.fixture
async def queue(migrated_engine, clock) -> ExecutionQueue:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await TenantStore(migrated_engine, clock).create(Tenant(name="globex"))
    return ExecutionQueue(migrated_engine, clock)


def add_one_off(engine, clock, ident: str, due_in: float = 2.0, **options) -> None:
    add_execution(engine, clock, ident, due_in=due_in, spec=one_off(clock, due_in, **options))


def row(engine, ident: str):
    with engine.connect() as conn:
        return conn.execute(
            sa.select(executions.c.status, executions.c.owner, executions.c.delivery, executions.c.handed_out_at)
            .where(executions.c.id == ident)
        ).one()


async def arm(queue, clock, owner: str = "s1", capability: Capability = ANY_ECHO, limit: int = 100):
    return await queue.arming.arm(owner, clock.now(), clock.now() + AHEAD, capability, limit)


def items(armed) -> list[tuple[str, int, bool]]:
    return [(a.handed.id, a.handed.delivery, a.beside) for a in armed]


async def test_a_ready_soon_one_off_is_armed_once_and_read_as_scheduled(queue, migrated_engine, clock) -> None:
    add_one_off(migrated_engine, clock, "e1", due_in=2)
    armed = await arm(queue, clock)
    assert [(a.handed.id, a.handed.delivery, a.handed.payload, a.beside) for a in armed] == [("e1", 1, b"p", False)]
    assert armed[0].handed.definition.target.handler.name == "echo"  # the Assignment can be built now
    assert row(migrated_engine, "e1") == ("armed", "s1", 1, None)
    assert await arm(queue, clock, owner="s2") == []  # armed is not scheduled: nobody arms it again
    # No round takes it, not even at its instant: it is its arming server's to start.
    assert await queue.handout.hand_out_ready("s2", clock.now() + timedelta(seconds=3), ANY_ECHO, 10) == []

    history = HistoryStore(migrated_engine, clock)
    seen = await history.get_execution("acme", "e1")
    assert (seen.status, seen.delivery, seen.owner) == ("scheduled", 0, None)
    listed = await history.list_executions("acme", "job_e1")
    assert [(e.id, e.status, e.delivery) for e in listed.executions] == [("e1", "scheduled", 0)]
    assert [e.id for e in (await history.list_executions("acme", "job_e1", statuses=["scheduled"])).executions] == ["e1"]
    assert (await history.list_executions("acme", "job_e1", statuses=["running"])).executions == ()
    with pytest.raises(NotFound):
        await history.get_execution("globex", "e1")  # another tenant's: not found
    search = OperationsStore(migrated_engine, clock)
    for scope in (dict(), dict(tenant="acme"), dict(job_id="job_e1"), dict(statuses=["scheduled"])):
        found = await search.search_executions(**scope)
        assert [(e.id, e.status) for e in found.executions] == [("e1", "scheduled")], scope
    assert (await search.search_executions(statuses=["running"])).executions == ()


async def test_only_what_needs_no_decision_at_its_instant_is_armed(queue, migrated_engine, clock) -> None:
    add_one_off(migrated_engine, clock, "keyed", key="db")  # a key is counted under a lock at the instant
    add_execution(migrated_engine, clock, "recurring", due_in=2, spec=every_minute())  # its predecessor may run
    add_execution(migrated_engine, clock, "beside", due_in=2, spec=every_minute(overlap=job_pb2.OVERLAP_POLICY_ALLOW))
    add_one_off(migrated_engine, clock, "now", due_in=0)  # due already: the round's
    add_one_off(migrated_engine, clock, "later", due_in=6)  # beyond the window
    add_execution(migrated_engine, clock, "globex_one", due_in=2, tenant="globex", spec=one_off(clock, 2))
    add_execution(migrated_engine, clock, "other_handler", due_in=2, handler="resize",
                  spec=one_off(clock, 2))
    add_execution(migrated_engine, clock, "triggered", due_in=2, origin="trigger", spec=one_off(clock, 2))
    add_execution(migrated_engine, clock, "unreadable", due_in=2)  # no schedule: the claim cannot read it
    armed = await arm(queue, clock)
    assert sorted(a.handed.id for a in armed) == ["beside"]
    assert [a.beside for a in armed] == [True]
    # A capped tenant and a paused one keep the round's path.
    with migrated_engine.begin() as conn:
        conn.execute(tenants.update().where(tenants.c.name == "globex").values(max_concurrency=5))
    assert await arm(queue, clock, capability=Capability(("globex",), ("echo",), True)) == []
    with migrated_engine.begin() as conn:
        conn.execute(tenants.update().where(tenants.c.name == "globex").values(max_concurrency=0, state="paused"))
    assert await arm(queue, clock, capability=Capability(("globex",), ("echo",), True)) == []
    with migrated_engine.begin() as conn:
        conn.execute(tenants.update().where(tenants.c.name == "globex").values(state="active"))
    assert [a.handed.id for a in await arm(queue, clock, capability=Capability(("globex",), ("echo",), True))] == [
        "globex_one"
    ]
    assert [a.handed.id for a in await arm(queue, clock, capability=Capability(("acme",), ("resize",), False))] == [
        "other_handler"
    ]
    assert await arm(queue, clock, limit=0) == []


async def test_the_arm_takes_at_most_its_limit_oldest_first(queue, migrated_engine, clock) -> None:
    for index in range(5):
        add_one_off(migrated_engine, clock, f"e{index}", due_in=4 - index * 0.5)
    first = await arm(queue, clock, limit=2)
    assert [a.handed.id for a in first] == ["e4", "e3"]
    assert [a.handed.id for a in await arm(queue, clock, owner="s2", limit=10)] == ["e2", "e1", "e0"]


async def test_the_start_is_never_early_and_only_by_the_arming_session(queue, migrated_engine, clock) -> None:
    add_one_off(migrated_engine, clock, "e1", due_in=2)
    armed = await arm(queue, clock)
    due = clock.now() + timedelta(seconds=2)
    # Before its instant by the server's clock: nothing, and it stays armed.
    clock.advance(1.999999)
    early = await queue.arming.start("s1", items(armed), clock.now())
    assert (early.started, early.disarmed) == ([], [])
    assert row(migrated_engine, "e1") == ("armed", "s1", 1, None)
    clock.advance(0.000001)
    # Another session can neither start nor disarm it; nor can a wrong delivery.
    assert (await queue.arming.start("s2", items(armed), clock.now())).started == []
    assert await queue.arming.disarm("s2", [("e1", 1)]) == []
    assert (await queue.arming.start("s1", [("e1", 2, False)], clock.now())).started == []
    assert (await queue.arming.start("s1", [("e1", 0, False)], clock.now())).started == []
    assert row(migrated_engine, "e1") == ("armed", "s1", 1, None)
    started = await queue.arming.start("s1", items(armed), clock.now())
    assert (started.started, started.disarmed) == (["e1"], [])
    assert started.at_us >= to_us(due)
    assert row(migrated_engine, "e1") == ("running", "s1", 1, started.at_us)
    # Started once: a second start, a disarm or another server's round does nothing.
    assert (await queue.arming.start("s1", items(armed), clock.now())).started == []
    assert await queue.arming.disarm("s1", [("e1", 1)]) == []
    assert await queue.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 10) == []
    # Its result is recorded as a hand-out's is: (id, delivery) fences it.
    acks = await queue.outcomes.record_results([ResultIn("e1", 1, 1, worker_pb2.RESULT_OUTCOME_SUCCEEDED, "",
                                                               "w1", ("acme",))])
    assert [(a.execution_id, a.accepted) for a in acks] == [("e1", True)]
    assert row(migrated_engine, "e1").status == "succeeded"


async def test_a_fenced_start_changes_nothing(queue, migrated_engine, clock) -> None:
    add_one_off(migrated_engine, clock, "e1", due_in=1)
    armed = await arm(queue, clock)
    clock.advance(1)
    refused = await queue.arming.start("s1", items(armed), clock.now(), fence=lambda: "session in doubt")
    assert (refused.started, refused.fenced) == ([], "session in doubt")
    assert row(migrated_engine, "e1") == ("armed", "s1", 1, None)


async def test_a_disarmed_execution_is_handed_out_by_any_server_with_its_delivery_back(
    queue, migrated_engine, clock
) -> None:
    add_one_off(migrated_engine, clock, "e1", due_in=2)
    armed = await arm(queue, clock)
    assert await queue.arming.disarm("s1", [("e1", 1)]) == ["e1"]
    assert row(migrated_engine, "e1") == ("scheduled", None, 0, None)
    clock.advance(2)
    assert (await queue.arming.start("s1", items(armed), clock.now())).started == []  # never sent
    handed = await queue.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 10)
    assert [(h.id, h.delivery) for h in handed] == [("e1", 1)]


async def test_a_start_yields_to_another_run_of_its_job_or_a_tenant_changed_since(
    queue, migrated_engine, clock
) -> None:
    add_one_off(migrated_engine, clock, "e1", due_in=2)
    add_one_off(migrated_engine, clock, "e2", due_in=2)
    armed = await arm(queue, clock)
    # A run of e1's job that started meanwhile (as a trigger whose disarm lost a race would).
    add_execution(migrated_engine, clock, "e1_manual", job_id="job_e1", origin="trigger", due_in=-1, nominal_in=-1)
    assert [h.id for h in await queue.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 10)] == ["e1_manual"]
    with migrated_engine.begin() as conn:  # and e2's tenant was given a cap
        conn.execute(tenants.update().where(tenants.c.name == "acme").values(max_concurrency=100))
    clock.advance(2)
    outcome = await queue.arming.start("s1", items(armed), clock.now())
    assert (outcome.started, outcome.disarmed) == ([], ["e1", "e2"])
    assert row(migrated_engine, "e1") == ("scheduled", None, 0, None)
    assert row(migrated_engine, "e2") == ("scheduled", None, 0, None)


async def test_a_run_of_an_allow_job_starts_beside_others(queue, migrated_engine, clock) -> None:
    spec = every_minute(overlap=job_pb2.OVERLAP_POLICY_ALLOW)
    add_execution(migrated_engine, clock, "busy", job_id="job_a", spec=spec, due_in=0)
    assert [h.id for h in await queue.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 10)] == ["busy"]
    add_execution(migrated_engine, clock, "next", job_id="job_a", spec=spec, due_in=2)
    armed = await arm(queue, clock)
    assert items(armed) == [("next", 1, True)]
    clock.advance(2)
    assert (await queue.arming.start("s1", items(armed), clock.now())).started == ["next"]


async def test_a_trigger_or_a_backfill_disarms_the_jobs_armed_run(queue, migrated_engine, clock) -> None:
    world_jobs = JobStore(migrated_engine, clock, partition_count=16)
    manual = ManualStore(migrated_engine, clock)
    add_one_off(migrated_engine, clock, "e1", due_in=2)
    armed = await arm(queue, clock)
    await manual.trigger("acme", "job_e1", "r1")
    assert row(migrated_engine, "e1") == ("scheduled", None, 0, None)
    clock.advance(2)
    assert (await queue.arming.start("s1", items(armed), clock.now())).started == []
    # The round decides both: the manual run (ahead) starts, the occurrence is skipped behind it.
    handed = await queue.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 10)
    assert [h.id for h in handed] == ["job_e1:trigger:r1"]
    assert world_jobs is not None

    add_one_off(migrated_engine, clock, "f1", due_in=2)
    armed = await arm(queue, clock)
    assert items(armed) == [("f1", 1, False)]
    await manual.backfill("acme", "job_f1", [clock.now() - timedelta(hours=1)], dry_run=False)
    assert row(migrated_engine, "f1") == ("scheduled", None, 0, None)


async def test_cancel_pause_update_and_delete_treat_an_armed_run_as_not_started(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    queue = ExecutionQueue(migrated_engine, clock)
    jobs = JobStore(migrated_engine, clock, partition_count=16)
    history = HistoryStore(migrated_engine, clock)
    from tickwheel_server.store.jobrecords import NewJob

    async def armed_one_off(name: str):
        spec = one_off(clock, 2)
        record, _ = await jobs.create(NewJob(
            id=f"job_{name}", tenant="acme", name=name, spec=spec.SerializeToString(), time_zone="UTC",
            next_run_at=None, next_due_at=None, tzdata_version="2026a", payload_size=0,
        ), f"req-{name}")
        due = to_us(clock.now() + timedelta(seconds=2))
        with migrated_engine.begin() as conn:
            conn.execute(executions.insert().values(
                id=name, job_id=record.id, tenant="acme", partition=record.partition, origin="scheduled",
                nominal_at=due, due_at=due, ready_at=due, attempt=1, delivery=0, status="scheduled", owner=None,
                worker_id=None, handler="echo", missed_count=1, reap_count=0, payload=b"p", error="",
                dead_reason="", created_at=0, finished_at=None))
        got = await arm(queue, clock)
        # Earlier ones disarmed as scheduled are armed again: given back, to test one at a time.
        await queue.arming.disarm("s1", [(a.handed.id, a.handed.delivery) for a in got if a.handed.id != name])
        armed = [a for a in got if a.handed.id == name]
        assert row(migrated_engine, name).status == "armed"
        return record, armed

    _, canceled = await armed_one_off("c")
    with pytest.raises(NotFound):  # another tenant's cancel finds nothing and disarms nothing
        await history.cancel_execution("globex", "c")
    assert row(migrated_engine, "c") == ("armed", "s1", 1, None)
    after = await history.cancel_execution("acme", "c")
    assert (after.status, after.delivery) == ("canceled", 0)

    paused_job, paused = await armed_one_off("p")
    _, held = await jobs.pause("acme", paused_job.id)
    assert held == 1 and row(migrated_engine, "p") == ("waiting", None, 0, None)

    updated_job, updated = await armed_one_off("u")
    spec = one_off(clock, 2)
    spec.payload = b"new"
    await jobs.update("acme", updated_job.id, updated_job.version, name="u", spec=spec.SerializeToString(),
                      time_zone="UTC", tzdata_version="2026a", payload_size=3, reschedule=None)
    assert row(migrated_engine, "u") == ("scheduled", None, 0, None)  # handed out with its new payload

    deleted_job, deleted = await armed_one_off("d")
    assert await jobs.delete("acme", deleted_job.id) == 1
    assert row(migrated_engine, "d").status == "canceled"

    clock.advance(2)
    outcome = await queue.arming.start("s1", items(canceled + paused + updated + deleted), clock.now())
    assert (outcome.started, outcome.disarmed) == ([], [])
    handed = await queue.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 10)
    assert [(h.id, h.payload) for h in handed] == [("u", b"new")]


async def test_a_dead_sessions_armed_runs_are_disarmed_at_once_and_run_once_elsewhere(migrated_engine) -> None:
    clock = FakeClock()
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    for index in range(5):
        add_one_off(migrated_engine, clock, f"e{index}", due_in=2)
    leases = MemoryLeaseStore(clock)
    alive = await leases.open_session(60)
    doomed = await leases.open_session(60)
    await leases.put(SERVERS_PREFIX + "a", "{}", session=alive)
    await leases.put(SERVERS_PREFIX + "b", "{}", session=doomed)
    queue = ExecutionQueue(migrated_engine, clock)
    mine = await arm(queue, clock, owner=session_name(alive.id), limit=2)
    theirs = await arm(queue, clock, owner=session_name(doomed.id), limit=10)
    assert len(mine) == 2 and len(theirs) == 3
    disarmed = []
    reaper = Reaper(queue.requeues, leases, lambda: alive, clock, server_id="a", grace=10.0, batch=2,
                    arming=queue.arming, on_disarmed=disarmed.extend)
    assert await reaper.reap_once() == 0  # both alive
    await doomed.close()
    assert await reaper.reap_once() == 3  # no grace: no worker holds an armed execution
    assert sorted(r.execution_id for r in disarmed) == sorted(a.handed.id for a in theirs)
    assert await reaper.reap_once() == 0
    clock.advance(2)
    # The dead server's start (had it a clock) sends nothing; the live one's starts its own.
    assert (await queue.arming.start(session_name(doomed.id), items(theirs), clock.now())).started == []
    assert len((await queue.arming.start(session_name(alive.id), items(mine), clock.now())).started) == 2
    first = await queue.handout.hand_out_ready(session_name(alive.id), clock.now(), ANY_ECHO, 10)
    assert sorted((h.id, h.delivery) for h in first) == sorted((a.handed.id, 1) for a in theirs)
    assert await queue.handout.hand_out_ready(session_name(alive.id), clock.now(), ANY_ECHO, 10) == []
    with migrated_engine.connect() as conn:
        statuses = conn.execute(sa.select(executions.c.status, sa.func.count()).group_by(executions.c.status)).all()
    assert dict(statuses) == {"running": 5}


async def test_a_calendar_change_decides_an_armed_run_again(migrated_engine, clock) -> None:
    from tickwheel.shared.ids import execution_id
    from tickwheel.v1 import calendar_pb2
    from tickwheel_server.api.calendars import definition_of, normalise_calendar
    from tickwheel_server.api.validate import normalise_job
    from tickwheel_server.store.partitions import PartitionStore

    from .test_calendar_claims import CLAIM_AT, OWNED, SATURDAY, TUESDAY, World, uk_calendar, weekly_job

    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    world = World(migrated_engine, clock)
    await world.calendars.create("acme", "uk", definition_of(uk_calendar()), "cal-1")
    spec = weekly_job(job_pb2.CALENDAR_RULE_NEXT)
    spec.overlap_policy = job_pb2.OVERLAP_POLICY_ALLOW  # a recurring job that may be armed
    job = await world.create(normalise_job(spec, SATURDAY - timedelta(days=3)), SATURDAY)
    await world.dispatch.claim_due(OWNED, CLAIM_AT)
    ident = execution_id(job.id, SATURDAY)
    queue = ExecutionQueue(migrated_engine, clock)
    armed = await queue.arming.arm("s1", TUESDAY - timedelta(seconds=2), TUESDAY, Capability(("acme",), ("echo",), False), 10)
    assert [a.handed.id for a in armed] == [ident]
    # Easter Monday is a working day after all: the run moves to it.
    stored = await world.calendars.get("acme", "uk")
    changed = calendar_pb2.Calendar(name="uk", time_zone="Europe/London", holidays=["2027-03-26"])
    await world.calendars.update("acme", "uk", stored.version, definition_of(normalise_calendar(changed)))
    with migrated_engine.connect() as conn:
        after = conn.execute(sa.select(executions.c.status, executions.c.delivery, executions.c.owner,
                                       executions.c.due_at).where(executions.c.id == ident)).one()
    assert after == ("scheduled", 0, None, to_us(TUESDAY - timedelta(days=1)))
    started = await queue.arming.start("s1", items(armed), TUESDAY)
    assert (started.started, started.disarmed) == ([], [])


BOTH = Capability(("acme", "globex"), ("echo",), True)


async def test_a_tenant_with_many_runs_on_one_instant_does_not_fill_an_arm(queue, migrated_engine, clock) -> None:
    """The attack: one tenant puts many runs on the instant another tenant's
    one run is on, ahead of it in every order the store has (ready instant,
    id). The arm's limit is shared among the tenants: the quiet run is armed
    in the first arm, the heavy tenant gets the rest."""
    for index in range(20):
        add_one_off(migrated_engine, clock, f"a{index:02d}", due_in=2)
    add_execution(migrated_engine, clock, "z1", due_in=2, tenant="globex", spec=one_off(clock, 2))
    first = await queue.arming.arm("s1", clock.now(), clock.now() + AHEAD, BOTH, 4)
    assert sorted(a.handed.id for a in first) == ["a00", "a01", "a02", "z1"]
    assert {a.handed.tenant: a.weight for a in first} == {"acme": 1, "globex": 1}
    rest = await queue.arming.arm("s1", clock.now(), clock.now() + AHEAD, BOTH, 100)
    assert sorted(a.handed.id for a in rest) == [f"a{index:02d}" for index in range(3, 20)]


async def test_an_arm_shares_its_limit_by_weight(queue, migrated_engine, clock) -> None:
    with migrated_engine.begin() as conn:
        conn.execute(tenants.update().where(tenants.c.name == "globex").values(weight=3))
    for index in range(10):
        add_one_off(migrated_engine, clock, f"a{index}", due_in=2)
        add_execution(migrated_engine, clock, f"g{index}", due_in=2, tenant="globex", spec=one_off(clock, 2))
    armed = await queue.arming.arm("s1", clock.now(), clock.now() + AHEAD, BOTH, 8)
    assert sorted(a.handed.id for a in armed) == ["a0", "a1", *(f"g{index}" for index in range(6))]
    assert {a.handed.tenant: a.weight for a in armed} == {"acme": 1, "globex": 3}


async def test_a_tenant_with_huge_payloads_does_not_take_the_whole_byte_bound(queue, migrated_engine, clock) -> None:
    """The attack: one tenant's runs, oldest, carry payloads so large that a
    few fill the arming server's memory bound. The other tenant's small run
    at the same instant is still armed; the heavy tenant's take the rest of
    the bound, oldest first, and what does not fit keeps the round's path."""
    for index in range(10):
        add_one_off(migrated_engine, clock, f"a{index}", due_in=2)
    add_execution(migrated_engine, clock, "z1", due_in=2.001, tenant="globex", spec=one_off(clock, 2.001))
    with migrated_engine.begin() as conn:
        conn.execute(executions.update().where(executions.c.tenant == "acme").values(payload=b"x" * 100_000))
        spec_size = len(conn.execute(sa.text("SELECT spec FROM jobs WHERE id = 'job_a0'")).scalar_one())
    big = 100 + 100_000 + spec_size
    armed = await queue.arming.arm("s1", clock.now(), clock.now() + AHEAD, BOTH, 100, max_bytes=3 * big + big // 2,
                                   row_bytes=100)
    assert sorted(a.handed.id for a in armed) == ["a0", "a1", "a2", "z1"]
    assert {r.status for r in (row(migrated_engine, f"a{index}") for index in range(3, 10))} == {"scheduled"}
    # Nothing of the heavy tenant fits: the light one's run is armed all the same.
    add_execution(migrated_engine, clock, "z2", due_in=2, tenant="globex", spec=one_off(clock, 2))
    again = await queue.arming.arm("s2", clock.now(), clock.now() + AHEAD, BOTH, 100, max_bytes=big - 1,
                                   row_bytes=100)
    assert [a.handed.id for a in again] == ["z2"]


async def test_an_arm_or_a_start_whose_commit_went_unanswered_is_undone_by_the_next(
    queue, migrated_engine, clock, monkeypatch
) -> None:
    """As when PostgreSQL stops during the COMMIT: the arm or start may
    have committed; its rows must not stay armed or running under the live
    session with no server holding them (only the reaper or the safety net
    would free them). The next arm, start or disarm undoes exactly what it
    did: a row another start stamped, or another session's, is not touched."""
    for ident in ("e1", "e2", "e3"):
        add_one_off(migrated_engine, clock, ident, due_in=2)
    store, real = queue.arming, queue.arming._tx

    monkeypatch.setattr(store, "_tx", committed_unanswered(real))
    with pytest.raises(AmbiguousCommitError):
        await arm(queue, clock)
    assert {row(migrated_engine, i) for i in ("e1", "e2", "e3")} == {("armed", "s1", 1, None)}
    monkeypatch.setattr(store, "_tx", real)
    armed = await arm(queue, clock)  # undone first (delivery back), then armed again and returned: held
    assert sorted(a.handed.id for a in armed) == ["e1", "e2", "e3"]
    assert {row(migrated_engine, i) for i in ("e1", "e2", "e3")} == {("armed", "s1", 1, None)}
    held = {a.handed.id: a for a in armed}

    clock.advance(2)
    known = await store.start("s1", items([held["e3"]]), clock.now())  # answered: e3 runs, stamped its instant
    assert known.started == ["e3"]
    monkeypatch.setattr(store, "_tx", committed_unanswered(real))
    with pytest.raises(AmbiguousCommitError):
        await store.start("s1", items([held["e1"]]), clock.now())
    assert row(migrated_engine, "e1").status == "running"
    monkeypatch.setattr(store, "_tx", lost_before_commit)
    with pytest.raises(AmbiguousCommitError):  # nothing committed: nothing of its own to undo
        await store.start("s1", items([held["e2"]]), clock.now())
    monkeypatch.setattr(store, "_tx", real)
    assert (await store.start("s2", items([held["e2"]]), clock.now())).started == []  # not s2's
    # The next start undoes e1's start (stamped with that start's instant
    # only), then starts e1 and e2 once; e3, started by an answered start, stays as it is.
    again = await store.start("s1", items([held["e1"], held["e2"]]), clock.now())
    assert again.started == ["e1", "e2"]
    assert row(migrated_engine, "e1") == row(migrated_engine, "e2") == ("running", "s1", 1, again.at_us)
    assert row(migrated_engine, "e3") == ("running", "s1", 1, known.at_us)
    assert store.in_doubt.entries == []

    # A start in doubt undone by the disarm of a batch not sent in time: back to scheduled, delivery 0.
    add_one_off(migrated_engine, clock, "e4", due_in=2)
    [four] = await arm(queue, clock)
    clock.advance(2)
    monkeypatch.setattr(store, "_tx", committed_unanswered(real))
    with pytest.raises(AmbiguousCommitError):
        await store.start("s1", items([four]), clock.now())
    monkeypatch.setattr(store, "_tx", real)
    assert await store.disarm("s1", [("e4", 1)]) == ["e4"]
    assert row(migrated_engine, "e4") == ("scheduled", None, 0, None)
