"""Two claims of disjoint partitions at once (two servers on one database,
or two lanes of one dispatcher) on PostgreSQL under SERIALIZABLE: neither
rolls the other back, and a trigger racing a claim still keeps the overlap
policy exact (docs/architecture.md, Dispatch, "Claims side by side")."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tickwheel.shared.ids import execution_id, new_job_id
from tickwheel_server.policy.jobchanges import PausedSpan
from tickwheel_server.store.claim_handout import HandOutOffer
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.fairshare import FairShare
from tickwheel_server.store.jobrecords import NewJob
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.manual import ManualStore, trigger_id
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_dispatch_claim import NOW, cron_job, once_job

pytestmark = pytest.mark.postgres

PARTITIONS = 16
LANES = ({p: 1 for p in range(0, 8)}, {p: 1 for p in range(8, 16)})
SERVED = Capability(("acme",), ("echo",), True)
NOW_PASS = dict(lookahead=timedelta(0))


@pytest.fixture
def engine(migrated_postgres_url):
    from tickwheel_server.store import create_store_engine

    engine = create_store_engine(migrated_postgres_url)
    yield engine
    engine.dispose()


@pytest.fixture
async def jobs(engine, clock) -> JobStore:
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    await PartitionStore(engine, clock).raise_epochs({p: 1 for p in range(PARTITIONS)}, "claimer")
    return JobStore(engine, clock, partition_count=PARTITIONS)


async def create(jobs: JobStore, clock, job, count: int) -> list:
    items = []
    for n in range(count):
        ident = new_job_id(clock.now())
        items.append((NewJob(id=ident, tenant="acme", name=job.name, spec=job.SerializeToString(), time_zone="UTC",
                             next_run_at=NOW, next_due_at=NOW, tzdata_version="2026a",
                             payload_size=len(job.payload)), f"req-{ident}"))
    return [record for record, _ in await jobs.create_many("acme", items)]


class Meeting:
    """Holds each claim just before its commit until the other got there
    too (once: a retried claim goes through), so the two transactions are
    open together with all their reads and writes done."""

    def __init__(self, parties: int = 2) -> None:
        self.barrier = threading.Barrier(parties, timeout=20)
        self.met: set[int] = set()

    def fence(self, lane: int):
        calls = [0]

        def check() -> None:
            calls[0] += 1
            if calls[0] == 2 and lane not in self.met:  # the second call is the one before the commit
                self.met.add(lane)
                try:
                    self.barrier.wait()
                except threading.BrokenBarrierError:
                    pass
            return None

        return check


def offer(fence) -> HandOutOffer:
    return HandOutOffer("s1", ((SERVED, 10_000),), FairShare(), fence, lambda at_us: at_us)


def wait_for_a_lock_waiter(engine) -> None:
    """Return once a session of this database waits on a lock (bounded: a
    store call that never came to wait fails the test)."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    for _ in range(3000):
        with engine.connect() as conn:
            if conn.execute(query).scalar():
                return
        threading.Event().wait(0.01)
    raise AssertionError("nothing came to wait on the claim's locks")


def statuses(engine, job_id: str) -> dict[str, tuple]:
    with engine.connect() as conn:
        return {
            r.id: (r.status, r.origin)
            for r in conn.execute(
                sa.select(executions.c.id, executions.c.status, executions.c.origin).where(executions.c.job_id == job_id)
            )
        }


def held_at_the_commit(then):
    """A fence that runs ``then`` (in the claim's thread, its transaction
    open with every read and write done) at the check before the commit."""
    calls = [0]

    def check() -> None:
        calls[0] += 1
        if calls[0] == 2:
            then()
        return None

    return check


async def test_two_claims_of_disjoint_partitions_at_once_commit_without_a_serialization_failure(
    engine, jobs, clock
) -> None:
    made = await create(jobs, clock, once_job(NOW), 200) + await create(jobs, clock, cron_job(), 200)
    assert {record.partition for record in made} == set(range(PARTITIONS))
    meeting = Meeting()
    stores = [DispatchStore(engine, clock), DispatchStore(engine, clock)]
    results = await asyncio.gather(*(
        store.claim_due(lane, NOW, offer=offer(meeting.fence(n)), **NOW_PASS)
        for n, (store, lane) in enumerate(zip(stores, LANES))
    ))  # fmt: skip
    assert meeting.met == {0, 1}, "both claims were open together"
    assert [dict(store.retries) for store in stores] == [{}, {}], "no claim was rolled back and retried"
    assert sum(result.jobs for result in results) == len(made)
    assert sum(len(group) for result in results for group in result.handed_out) == 200, "every one-off went out"
    with engine.connect() as conn:
        rows = conn.execute(sa.select(executions.c.job_id, executions.c.status)).all()
    assert len(rows) == len(made) and {job_id for job_id, _ in rows} == {record.id for record in made}


async def test_a_trigger_racing_a_claim_waits_for_it_and_its_run_takes_the_rounds_path(engine, jobs, clock) -> None:
    [job] = await create(jobs, clock, once_job(NOW), 1)
    manual = ManualStore(engine, clock)
    loop = asyncio.get_running_loop()
    trigger = []

    def trigger_now() -> None:  # the claim holds the job's row: the trigger waits for the claim
        trigger.append(asyncio.run_coroutine_threadsafe(manual.trigger("acme", job.id, "click"), loop))
        wait_for_a_lock_waiter(engine)

    claim = await DispatchStore(engine, clock).claim_due(
        LANES[0] | LANES[1], NOW, offer=offer(held_at_the_commit(trigger_now)), **NOW_PASS
    )
    await asyncio.wrap_future(trigger[0])
    occurrence = execution_id(job.id, NOW)
    assert [[h.id for h in group] for group in claim.handed_out] == [[occurrence]]
    assert statuses(engine, job.id) == {
        occurrence: ("running", "scheduled"),
        trigger_id(job.id, "click"): ("scheduled", "trigger"),  # the round's overlap decision rules it
    }


async def test_a_claim_passes_over_a_job_a_trigger_holds_and_then_sees_its_run(engine, jobs, clock, monkeypatch) -> None:
    from tickwheel_server.store import manual as manual_module

    [job] = await create(jobs, clock, once_job(NOW), 1)
    holding, release = threading.Event(), threading.Event()
    disarm = manual_module.disarm_jobs

    def held_disarm(conn, job_ids):  # the trigger has read its job FOR SHARE; hold it there
        holding.set()
        release.wait(30)
        return disarm(conn, job_ids)

    monkeypatch.setattr(manual_module, "disarm_jobs", held_disarm)
    trigger = asyncio.ensure_future(ManualStore(engine, clock).trigger("acme", job.id, "click"))
    await asyncio.to_thread(holding.wait, 30)
    dispatch = DispatchStore(engine, clock)
    passed = await dispatch.claim_due(LANES[0] | LANES[1], NOW, offer=offer(lambda: None), **NOW_PASS)
    assert (passed.jobs, passed.executions, passed.handed_out) == (0, [], []), "its row is the trigger's"
    release.set()
    await trigger
    claimed = await dispatch.claim_due(LANES[0] | LANES[1], NOW, offer=offer(lambda: None), **NOW_PASS)
    occurrence = execution_id(job.id, NOW)
    assert claimed.jobs == 1 and [e.id for e in claimed.executions] == [occurrence]
    assert all(group == [] for group in claimed.handed_out), "another run of its job is out: the round decides"
    assert statuses(engine, job.id) == {
        occurrence: ("scheduled", "scheduled"), trigger_id(job.id, "click"): ("scheduled", "trigger"),
    }


async def test_a_tenant_paused_while_a_claim_holds_its_row_waits_for_it(engine, jobs, clock) -> None:
    [job] = await create(jobs, clock, once_job(NOW), 1)
    tenants = TenantStore(engine, clock)
    loop = asyncio.get_running_loop()
    pause = []

    def pause_now() -> None:  # the claim read the tenant's row FOR SHARE before handing out
        pause.append(asyncio.run_coroutine_threadsafe(tenants.pause("acme"), loop))
        wait_for_a_lock_waiter(engine)

    claim = await DispatchStore(engine, clock).claim_due(
        LANES[0] | LANES[1], NOW, offer=offer(held_at_the_commit(pause_now)), **NOW_PASS
    )
    paused = await asyncio.wrap_future(pause[0])
    assert paused.state == "paused"
    assert [[h.id for h in group] for group in claim.handed_out] == [[execution_id(job.id, NOW)]], (
        "handed out before the pause, which waited for it"
    )


async def test_a_tenant_paused_after_the_claims_scan_gets_nothing_handed_out(engine, jobs, clock) -> None:
    [job] = await create(jobs, clock, once_job(NOW), 1)
    tenants = TenantStore(engine, clock)
    loop = asyncio.get_running_loop()
    calls = [0]

    def pause_first() -> None:  # the first check: after the scan, before the tenants are read
        calls[0] += 1
        if calls[0] == 1:
            asyncio.run_coroutine_threadsafe(tenants.pause("acme"), loop).result(30)
        return None

    claim = await DispatchStore(engine, clock).claim_due(
        LANES[0] | LANES[1], NOW, offer=offer(pause_first), **NOW_PASS
    )
    occurrence = execution_id(job.id, NOW)
    assert claim.handed_out == [] and [e.id for e in claim.executions] == [occurrence]
    assert statuses(engine, job.id) == {occurrence: ("scheduled", "scheduled")}, "the hand-out holds it back"


async def test_a_pause_racing_a_claim_waits_for_it_and_keeps_the_cursor_it_advanced(engine, jobs, clock) -> None:
    """The claim locks and advances the job's cursor (``job_cursors``,
    migration 0032) and nothing of its row; a job write locks the row and
    the cursor together. A pause that comes while the claim holds the
    cursor waits for the claim's commit and then reads the cursor it
    wrote: it does not write the cursor back to where it was before the
    claim (which would claim the same occurrence again)."""
    [job] = await create(jobs, clock, once_job(NOW), 1)
    loop = asyncio.get_running_loop()
    pausing = []

    def pause_now() -> None:  # the claim holds the cursor: the pause waits for the claim
        pausing.append(asyncio.run_coroutine_threadsafe(jobs.pause("acme", job.id, "racing"), loop))
        wait_for_a_lock_waiter(engine)

    dispatch = DispatchStore(engine, clock)
    claim = await dispatch.claim_due(
        LANES[0] | LANES[1], NOW, offer=offer(held_at_the_commit(pause_now)), **NOW_PASS
    )
    paused, _ = await asyncio.wrap_future(pausing[0])
    assert [[h.id for h in group] for group in claim.handed_out] == [[execution_id(job.id, NOW)]]
    # The one-off's only run was claimed: the pause finds it completed in its
    # cursor (no next run, one run counted), and holds the run it created.
    assert (paused.state, paused.run_count, paused.next_run_at) == ("paused", 1, None)
    assert statuses(engine, job.id) == {execution_id(job.id, NOW): ("running", "scheduled")}
    resumed, _, _ = await jobs.resume("acme", job.id, expected_version=paused.version, span=PausedSpan(None, None),
                                      tzdata_version="2026a")
    assert (resumed.state, resumed.run_count, resumed.next_run_at) == ("completed", 1, None)
    again = await dispatch.claim_due(LANES[0] | LANES[1], NOW + timedelta(minutes=5), **NOW_PASS)
    assert again.jobs == 0 and again.executions == [], "its occurrence is not claimed twice"
