"""The max_pending_manual_runs quota, on SQLite and PostgreSQL: a manual run
(trigger, backfill) takes a unit when created and gives it back when it
starts or ends, on every path; a call over the quota writes nothing.

After every step the slots are checked against the rows
(:func:`slots_hold`): the units counted are the tenant's manual runs
waiting to start (``scheduled`` or ``waiting``, first attempt or again
after a retry, a requeue, a release or a replay), each slot counting
exactly those naming it in ``manual_slot``; none counts more than its
allowance, and the allowances add up to at most the quota."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from tickwheel.v1 import admin_pb2, job_pb2, worker_pb2

from tickwheel.shared.ids import execution_id, to_us
from tickwheel_server.api.admin import AdminServicer
from tickwheel_server.errors import QuotaExceeded
from tickwheel_server.jobspec import schedule_of
from tickwheel_server.policy.jobchanges import replan
from tickwheel_server.store import manual as manual_module
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.deadletters import DeadLetterStore
from tickwheel_server.store.executions import Capability, Lost
from tickwheel_server.store.manual import ManualStore, trigger_id
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.tables import executions, job_cursors, manual_quota, tenants
from tickwheel_server.store.tenants import Tenant
from tickwheel_server.store.timeline import NOT_STARTED

from .test_handout import result
from .test_job_lifecycle import MINUTE, T0, World, every_minute, w  # noqa: F401 (the fixture)

ECHO = Capability(("acme",), ("echo",), True)


@pytest.fixture
def manual(w: World) -> ManualStore:
    return ManualStore(w.engine, w.clock)


@pytest.fixture
def queue(w: World) -> ExecutionQueue:
    return ExecutionQueue(w.engine, w.clock)


async def limited(w: World, limit: int, tenant: str = "acme") -> None:
    await w.tenants.update(tenant, max_pending_manual_runs=limit)


def slots_hold(engine, tenant: str = "acme", *, requeued_past: int = 0) -> int:
    """Check the tenant's slots against its rows; returns what they count.
    ``requeued_past``: runs requeued into a slot with no room since its last
    deal (each grew its slot's allowance by one)."""
    waiting = executions.c.status.in_(NOT_STARTED)
    with engine.connect() as conn:
        slots = conn.execute(
            sa.select(manual_quota.c.slot, manual_quota.c.used, manual_quota.c.allowance)
            .where(manual_quota.c.tenant == tenant)
        ).all()  # fmt: skip
        naming = dict(conn.execute(
            sa.select(executions.c.manual_slot, sa.func.count())
            .where(executions.c.tenant == tenant, executions.c.manual_slot.is_not(None), waiting)
            .group_by(executions.c.manual_slot)
        ).all())  # fmt: skip
        pending = conn.execute(  # the manual runs and the replays (of any origin) waiting
            sa.select(sa.func.count()).where(
                executions.c.tenant == tenant, waiting,
                sa.or_(executions.c.origin.in_(["trigger", "backfill"]), executions.c.manual_slot.is_not(None)),
            )
        ).scalar()  # fmt: skip
        limit = conn.execute(sa.select(tenants.c.max_pending_manual_runs).where(tenants.c.name == tenant)).scalar()
    assert sum(used for _, used, _ in slots) == pending, "the units are not the manual runs waiting to start"
    assert {slot: used for slot, used, _ in slots if used} == naming
    assert all(0 <= used <= allowance for _, used, allowance in slots)
    assert sum(allowance for _, _, allowance in slots) <= max(limit, sum(naming.values())) + requeued_past
    return sum(naming.values())


def snapshot(engine) -> tuple:
    with engine.connect() as conn:
        return (
            sorted(tuple(r) for r in conn.execute(
                sa.select(executions.c.id, executions.c.status, executions.c.manual_slot))),
            sorted(tuple(r) for r in conn.execute(sa.select(manual_quota))),
        )


def one_off_handler_job(overlap: str = "") -> job_pb2.Job:
    job = every_minute()
    if overlap:
        job.overlap_policy = job_pb2.OverlapPolicy.Value(f"OVERLAP_POLICY_{overlap.upper()}")
    return job


async def test_a_trigger_over_the_quota_is_refused_naming_it_and_writes_nothing(w: World, manual: ManualStore) -> None:
    await limited(w, 3)
    job = await w.create()
    for n in range(3):
        await manual.trigger("acme", job.id, f"r{n}")
    assert slots_hold(w.engine) == 3
    before = snapshot(w.engine)
    with pytest.raises(QuotaExceeded) as refused:
        await manual.trigger("acme", job.id, "one-too-many")
    assert (refused.value.quota, refused.value.limit) == ("max_pending_manual_runs", 3)
    assert snapshot(w.engine) == before
    # A repeat of a request already counted is answered, not refused.
    again, created = await manual.trigger("acme", job.id, "r1")
    assert (again.id, created) == (trigger_id(job.id, "r1"), False)
    assert snapshot(w.engine) == before and slots_hold(w.engine) == 3


async def test_a_backfill_over_the_quota_is_refused_whole_and_counts_only_what_it_creates(
    w: World, manual: ManualStore
) -> None:
    await limited(w, 5)
    job = await w.create()
    window = [T0 - MINUTE * n for n in range(10, 0, -1)]
    assert (await manual.backfill("acme", job.id, window[:3], dry_run=False)).created == 3
    before = snapshot(w.engine)
    assert (await manual.backfill("acme", job.id, window[:6], dry_run=True)).created == 3  # a dry run takes nothing
    with pytest.raises(QuotaExceeded) as refused:
        await manual.backfill("acme", job.id, window[:6], dry_run=False)  # three more: one over
    assert refused.value.quota == "max_pending_manual_runs"
    assert snapshot(w.engine) == before
    # The three that exist take nothing again: two new ones fit exactly.
    fits = await manual.backfill("acme", job.id, window[:5], dry_run=False)
    assert (fits.created, fits.existing) == (2, 3)
    assert slots_hold(w.engine) == 5
    with pytest.raises(QuotaExceeded):
        await manual.trigger("acme", job.id, "no-room")
    assert slots_hold(w.engine) == 5


async def test_a_backfill_past_the_quota_is_refused_before_it_inserts_a_row(
    w: World, manual: ManualStore, monkeypatch
) -> None:
    """A window that cannot fit takes its units before its rows are
    inserted: refused, it inserted nothing (a tenant at its quota made
    every call insert up to 10 000 rows and roll them back). What fits is
    inserted and counted once."""
    await limited(w, 5)
    job = await w.create()
    chunks: list[int] = []
    insert = manual_module._insert_backfill
    monkeypatch.setattr(manual_module, "_insert_backfill",
                        lambda conn, caps, rows: chunks.append(len(rows)) or insert(conn, caps, rows))
    window = [T0 - MINUTE * n for n in range(2500, 0, -1)]
    before = snapshot(w.engine)
    for size in (6, 70, 2500):  # a dry slot's deal, a savepoint's take, three chunks
        with pytest.raises(QuotaExceeded):
            await manual.backfill("acme", job.id, window[:size], dry_run=False)
    assert chunks == [] and snapshot(w.engine) == before
    assert (await manual.backfill("acme", job.id, window[:5], dry_run=False)).created == 5
    assert chunks == [5] and slots_hold(w.engine) == 5


async def test_runs_that_start_give_their_units_back_and_waiting_ones_keep_theirs(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    await limited(w, 2)
    job = await w.create()
    await manual.trigger("acme", job.id, "first")
    await manual.trigger("acme", job.id, "second")
    with pytest.raises(QuotaExceeded):
        await manual.trigger("acme", job.id, "third")
    # One round: the older starts, the newer queues behind it (overlap skip
    # queues manual runs), keeping its unit.
    handed = await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 10)
    assert [h.id for h in handed] == [trigger_id(job.id, "first")]
    assert slots_hold(w.engine) == 1
    await manual.trigger("acme", job.id, "third")
    assert slots_hold(w.engine) == 2
    # The first ends (its unit went back when it started: nothing more);
    # the next round starts the second.
    await queue.outcomes.record_results([result(handed[0])])
    assert slots_hold(w.engine) == 2
    w.clock.advance(1)
    second = await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 10)
    assert [h.id for h in second] == [trigger_id(job.id, "second")]
    assert slots_hold(w.engine) == 1


async def test_a_round_starting_manual_runs_writes_each_row_once(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    """The take that starts them is the only write of their rows (their
    ``manual_slot`` stays: it counts only while they wait), and their
    units go back in one statement, a parameter set per slot touched."""
    jobs = [await w.create(job=one_off_handler_job("allow")) for _ in range(2)]
    for n in range(40):
        await manual.trigger("acme", jobs[n % 2].id, f"r{n}")
    assert slots_hold(w.engine) == 40
    written: list[str] = []

    def listen(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("UPDATE"):
            written.append(statement.split()[1].strip('"'))

    sa.event.listen(w.engine, "before_cursor_execute", listen)
    try:
        assert len(await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 100)) == 40
    finally:
        sa.event.remove(w.engine, "before_cursor_execute", listen)
    assert sorted(written) == ["executions", "manual_quota"], written
    assert slots_hold(w.engine) == 0


async def test_a_canceled_run_gives_its_unit_back(w: World, manual: ManualStore) -> None:
    await limited(w, 1)
    job = await w.create()
    run, _ = await manual.trigger("acme", job.id, "r")
    with pytest.raises(QuotaExceeded):
        await manual.trigger("acme", job.id, "r2")
    await w.history.cancel_execution("acme", run.id, "changed my mind")
    assert slots_hold(w.engine) == 0
    await manual.trigger("acme", job.id, "r2")
    assert slots_hold(w.engine) == 1


async def test_deleting_the_job_gives_its_runs_units_back(w: World, manual: ManualStore) -> None:
    await limited(w, 4)
    job, other = await w.create(), await w.create()
    await manual.trigger("acme", job.id, "a")
    await manual.backfill("acme", job.id, [T0 - MINUTE * 2, T0 - MINUTE], dry_run=False)
    await manual.trigger("acme", other.id, "kept")
    assert slots_hold(w.engine) == 4
    await w.jobs.delete("acme", job.id)
    assert slots_hold(w.engine) == 1
    for n in range(3):
        await manual.trigger("acme", other.id, f"after-{n}")
    assert slots_hold(w.engine) == 4


async def test_an_update_keeps_backfilled_runs_and_their_units(w: World, manual: ManualStore) -> None:
    """An update re-plans the dispatcher's occurrences only (origin
    ``scheduled``): backfilled runs, asked for, stay and keep their units."""
    await limited(w, 2)
    job = await w.create()  # cursor at 00:01
    with w.engine.begin() as conn:  # the dispatcher's look-ahead moved it to 00:03
        cursor = to_us(T0 + 3 * MINUTE)
        conn.execute(
            job_cursors.update().where(job_cursors.c.job_id == job.id).values(next_run_at=cursor, next_due_at=cursor)
        )
    # 00:01 and 00:02 created by a backfill (their normal ids), ahead of the dispatcher.
    await manual.backfill("acme", job.id, [T0 + MINUTE, T0 + 2 * MINUTE], dry_run=False)
    assert slots_hold(w.engine) == 2
    every_other = every_minute(expression="*/2 * * * *")
    schedule = schedule_of(every_other, job.id)
    _, canceled = await w.jobs.update(
        "acme", job.id, 1, name="tick", spec=every_other.SerializeToString(), time_zone="UTC",
        tzdata_version="2026a", payload_size=0,
        reschedule=lambda view: replan(schedule, w.clock.now(), None, view),
    )
    assert canceled == 0
    assert w.statuses(job.id) == {execution_id(job.id, T0 + MINUTE): "scheduled",
                                  execution_id(job.id, T0 + 2 * MINUTE): "scheduled"}
    assert slots_hold(w.engine) == 2


async def test_runs_a_replace_cancels_give_their_units_back(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    """Manual runs queue behind a running one (they are never replaced by
    each other); a scheduled occurrence of a ``replace`` job cancels every
    older run not started, manual ones included: their units go back."""
    await limited(w, 3)
    job = await w.create(job=one_off_handler_job("replace"))
    for n in range(3):
        await manual.trigger("acme", job.id, f"r{n}")
        w.clock.advance(0.001)
    handed = await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 10)
    assert len(handed) == 1 and slots_hold(w.engine) == 2  # two wait behind the first, keeping their units
    w.clock.advance(1)
    w.execution(job, w.clock.now(), "scheduled")
    await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 10)
    statuses = {row.id: row.status for row in w.rows(executions, job_id=job.id)}
    assert [statuses[trigger_id(job.id, f"r{n}")] for n in (1, 2)] == ["canceled", "canceled"], statuses
    assert slots_hold(w.engine) == 0


async def test_retention_deletes_ended_runs_and_gives_back_nothing(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    """Ended manual runs still name their slot (the column is never
    cleared): their units went back when they started or were canceled,
    and retention deleting them gives back nothing more."""
    await limited(w, 2)
    job = await w.create()
    await manual.trigger("acme", job.id, "ran")
    handed = await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 10)
    await queue.outcomes.record_results([result(handed[0])])
    dropped, _ = await manual.trigger("acme", job.id, "dropped")
    await w.history.cancel_execution("acme", dropped.id, "changed my mind")
    kept, _ = await manual.trigger("acme", job.id, "kept")
    assert slots_hold(w.engine) == 1
    w.clock.advance(40 * 86400)
    batch = await RetentionStore(w.engine, w.clock).prune_executions(w.clock.now() - timedelta(days=30))
    assert batch.executions == 2
    assert {r.id for r in w.rows(executions, job_id=job.id)} == {kept.id}
    assert slots_hold(w.engine) == 1


async def test_lowering_the_quota_under_the_count_refuses_until_runs_start(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    job = await w.create(job=one_off_handler_job("allow"))
    for n in range(4):
        await manual.trigger("acme", job.id, f"r{n}")
    await limited(w, 2)
    with pytest.raises(QuotaExceeded):
        await manual.trigger("acme", job.id, "over")
    assert slots_hold(w.engine) == 4
    handed = await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 3)
    assert len(handed) == 3 and slots_hold(w.engine) == 1
    await manual.trigger("acme", job.id, "fits")
    with pytest.raises(QuotaExceeded):
        await manual.trigger("acme", job.id, "over-again")
    assert slots_hold(w.engine) == 2


async def test_another_tenants_runs_take_none_of_its_units(w: World, manual: ManualStore) -> None:
    await w.tenants.create(Tenant(name="globex", max_pending_manual_runs=1))
    await limited(w, 1)
    mine, theirs = await w.create(), await w.create(tenant="globex")
    await manual.trigger("globex", theirs.id, "g")
    with pytest.raises(QuotaExceeded):
        await manual.trigger("globex", theirs.id, "g2")
    await manual.trigger("acme", mine.id, "a")
    assert (slots_hold(w.engine), slots_hold(w.engine, "globex")) == (1, 1)


async def test_backfills_racing_over_one_window_count_each_run_once(w: World, manual: ManualStore) -> None:
    job = await w.create()
    window = [T0 - MINUTE * n for n in range(30, 0, -1)]
    await asyncio.gather(*(manual.backfill("acme", job.id, window[n:n + 12], dry_run=False) for n in (0, 9, 18)))
    assert slots_hold(w.engine) == len(w.rows(executions, job_id=job.id)) == 30


@pytest.mark.parametrize("batch", [1, 3])
async def test_triggers_and_backfills_racing_at_the_limit_stop_exactly_at_it(
    w: World, manual: ManualStore, batch: int
) -> None:
    """16 writers race past the quota with triggers or backfills: exactly
    the quota's runs exist after, every refusal names it, none fails."""
    await limited(w, 20)
    job = await w.create()

    async def writer(n: int) -> list:
        out = []
        for k in range(4):
            try:
                if batch == 1:
                    out.append((await manual.trigger("acme", job.id, f"w{n}-{k}"))[1])
                else:
                    nominals = [T0 - MINUTE * (1 + (n * 4 + k) * batch + i) for i in range(batch)]
                    out.append((await manual.backfill("acme", job.id, nominals, dry_run=False)).created)
            except QuotaExceeded as error:
                assert error.quota == "max_pending_manual_runs"
                out.append(0)
        return out

    created = [c for part in await asyncio.gather(*(writer(n) for n in range(16))) for c in part]
    assert sum(created) == 20 - 20 % batch  # a backfill is refused whole: 18 in threes
    assert slots_hold(w.engine) == len(w.rows(executions, job_id=job.id)) == sum(created)
    assert manual.retries.get("40P01", 0) == 0


async def test_triggers_while_runs_start_deal_again_without_conflicts(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    """8 writers trigger while rounds start what they created: each start
    takes its unit out of its slot's allowance, so slots run dry and deal
    again while the others take. No call fails, none is refused below the
    quota, and on PostgreSQL no transaction was retried for a conflict."""
    await limited(w, 64)
    jobs = [await w.create(job=one_off_handler_job("allow")) for _ in range(4)]

    async def writer(n: int) -> None:
        for k in range(24):
            await manual.trigger("acme", jobs[(n + k) % 4].id, f"w{n}-{k}")
            if k % 6 == 5:
                await queue.handout.hand_out_ready(f"s{n}", w.clock.now(), ECHO, 1000)

    await asyncio.gather(*(writer(n) for n in range(8)))
    await queue.handout.hand_out_ready("s0", w.clock.now(), ECHO, 1000)
    assert len(w.rows(executions, origin="trigger")) == 8 * 24
    assert slots_hold(w.engine) == 0
    assert manual.retries.get("40001", 0) == 0, manual.retries


async def test_a_run_waiting_for_a_concurrency_key_keeps_its_unit(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    await limited(w, 2)
    keyed = one_off_handler_job("allow")
    keyed.concurrency_keys.add(key="db", limit=1)
    job = await w.create(job=keyed)
    await manual.trigger("acme", job.id, "a")
    w.clock.advance(0.001)
    await manual.trigger("acme", job.id, "b")
    handed = await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 10)
    assert [h.id for h in handed] == [trigger_id(job.id, "a")]  # holds the key; b waits for it
    assert w.statuses(job.id)[trigger_id(job.id, "b")] == "waiting"
    assert slots_hold(w.engine) == 1


# -- runs back in the queue after they started: each takes its unit again ---------------------------


def retrying_job() -> job_pb2.Job:
    job = one_off_handler_job("allow")
    job.retry_policy.max_attempts = 3
    job.retry_policy.initial_backoff.FromSeconds(1)
    job.retry_policy.max_backoff.FromSeconds(1)
    return job


async def started(w: World, queue: ExecutionQueue, count: int) -> list:
    handed = await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 100)
    assert len(handed) == count
    return handed


async def test_a_run_requeued_after_its_worker_was_lost_takes_its_unit_again(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    await limited(w, 2)
    job = await w.create(job=one_off_handler_job("allow"))
    await manual.trigger("acme", job.id, "a")
    await manual.trigger("acme", job.id, "b")
    handed = await started(w, queue, 2)
    assert slots_hold(w.engine) == 0
    lost = await queue.requeues.requeue("s1", [Lost(handed[0].id, handed[0].delivery, "worker lost")], counts=True)
    assert [r.execution_id for r in lost.requeued] == [handed[0].id]
    assert slots_hold(w.engine, requeued_past=1) == 1
    await manual.trigger("acme", job.id, "c")
    with pytest.raises(QuotaExceeded):  # the requeued run counts: two waiting to start
        await manual.trigger("acme", job.id, "d")
    assert slots_hold(w.engine, requeued_past=1) == 2
    await started(w, queue, 2)
    assert slots_hold(w.engine, requeued_past=1) == 0


async def test_a_retry_scheduled_takes_its_unit_again_and_a_final_failure_none(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    await limited(w, 1)
    job = await w.create(job=retrying_job())
    await manual.trigger("acme", job.id, "a")
    for attempt in (1, 2):
        handed = await started(w, queue, 1)
        assert slots_hold(w.engine) == 0
        await manual.trigger("acme", job.id, f"fills-{attempt}")  # the unit the start gave back
        await started(w, queue, 1)
        await queue.outcomes.record_results([result(handed[0], worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE)])
        assert w.statuses(job.id)[handed[0].id] == "scheduled"
        assert slots_hold(w.engine, requeued_past=attempt) == 1  # its retry waits to start: counted, never refused
        with pytest.raises(QuotaExceeded):
            await manual.trigger("acme", job.id, f"over-{attempt}")
        w.clock.advance(2)
    handed = await started(w, queue, 1)
    await queue.outcomes.record_results([result(handed[0], worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE)])
    assert w.statuses(job.id)[handed[0].id] == "dead"  # its last attempt: nothing waits to start
    assert slots_hold(w.engine, requeued_past=2) == 0


async def test_a_hand_out_released_unsent_takes_its_unit_again(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    await limited(w, 3)
    job = await w.create(job=one_off_handler_job("allow"))
    for name in ("a", "b", "c"):
        await manual.trigger("acme", job.id, name)
    handed = await started(w, queue, 3)
    await queue.requeues.release([(h.id, h.delivery) for h in handed[:2]])
    assert slots_hold(w.engine) == 2
    await started(w, queue, 2)
    assert slots_hold(w.engine) == 0


async def test_a_replayed_dead_run_takes_its_unit_again(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    await limited(w, 1)
    job = await w.create(job=one_off_handler_job("allow"))
    await manual.trigger("acme", job.id, "a")
    handed = await started(w, queue, 1)
    await queue.outcomes.record_results([result(handed[0], worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT)])
    assert w.statuses(job.id)[handed[0].id] == "dead" and slots_hold(w.engine) == 0
    letters = DeadLetterStore(w.engine, w.clock, AlertStore(w.engine, w.clock))
    await letters.replay("acme", handed[0].id)
    assert slots_hold(w.engine) == 1
    with pytest.raises(QuotaExceeded):
        await manual.trigger("acme", job.id, "b")
    await started(w, queue, 1)
    assert slots_hold(w.engine) == 0


async def test_requeues_past_the_quota_lose_no_run_and_count_every_one(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    """The quota full of new runs, four started ones come back: none is
    refused or dropped, all are counted, and new runs are refused until
    the count is back under the quota."""
    await limited(w, 4)
    job = await w.create(job=one_off_handler_job("allow"))
    for n in range(4):
        await manual.trigger("acme", job.id, f"first-{n}")
    handed = await started(w, queue, 4)
    for n in range(4):
        await manual.trigger("acme", job.id, f"then-{n}")
    requeued = await queue.requeues.requeue("s1", [Lost(h.id, h.delivery, "lost") for h in handed], counts=True)
    assert len(requeued.requeued) == 4
    assert slots_hold(w.engine, requeued_past=4) == 8
    with pytest.raises(QuotaExceeded):
        await manual.trigger("acme", job.id, "over")
    await started(w, queue, 8)
    assert slots_hold(w.engine, requeued_past=4) == 0
    for n in range(4):
        await manual.trigger("acme", job.id, f"after-{n}")
    assert slots_hold(w.engine, requeued_past=4) == 4


async def test_get_tenant_reads_the_tenant_and_its_counts_in_one_transaction(w: World, manual: ManualStore) -> None:
    """GetTenant's counts are of the tenant it returns: one transaction."""
    job = await w.create()
    await manual.trigger("acme", job.id, "a")
    transactions = []
    inner = w.tenants._tx

    async def counting(fn, **kwargs):
        transactions.append(fn)
        return await inner(fn, **kwargs)

    w.tenants._tx = counting

    async def admin() -> None:
        pass

    servicer = SimpleNamespace(_auth=SimpleNamespace(admin=lambda context: admin()), _tenants=w.tenants)
    reply = await AdminServicer.GetTenant(servicer, admin_pb2.GetTenantRequest(name="acme"), None)
    assert (reply.tenant.name, reply.job_count, reply.pending_manual_runs) == ("acme", 1, 1)
    assert len(transactions) == 1


async def test_units_follow_the_runs_through_pauses_a_lost_worker_and_a_cancel_racing_the_start(
    w: World, manual: ManualStore, queue: ExecutionQueue
) -> None:
    """The paths a hostile tenant can drive around its own runs, the
    invariant checked after each: a pause of the job or of the tenant holds
    the runs with their units (the quota still refuses), a resume releases
    them with their units, a lost worker's requeue of a started run takes
    its unit back, and a cancel racing the round that starts the run gives the
    unit back exactly once, whichever wins."""
    await limited(w, 4)
    job = await w.create(job=one_off_handler_job("allow"))
    for n in range(3):
        await manual.trigger("acme", job.id, f"r{n}")
    paused, held = await w.jobs.pause("acme", job.id)
    assert held >= 3 and slots_hold(w.engine) == 3
    await manual.trigger("acme", job.id, "while-paused")
    with pytest.raises(QuotaExceeded):
        await manual.trigger("acme", job.id, "over")
    await w.resume(paused)
    assert slots_hold(w.engine) == 4
    await w.tenants.pause("acme")
    assert await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 10) == []
    assert slots_hold(w.engine) == 4
    await w.tenants.resume("acme")
    w.clock.advance(1)
    started = await queue.handout.hand_out_ready("s1", w.clock.now(), ECHO, 2)
    assert len(started) == 2 and slots_hold(w.engine) == 2
    lost = await queue.requeues.reap_owner("s1", "session s1 expired")
    assert len(lost.requeued) == 2 and slots_hold(w.engine) == 4  # waiting to start again: their units back
    waiting = [row.id for row in w.rows(executions, job_id=job.id) if row.status in NOT_STARTED]
    assert len(waiting) == 4
    w.clock.advance(1)
    canceled, handed = await asyncio.gather(
        asyncio.gather(*(w.history.cancel_execution("acme", ident) for ident in waiting), return_exceptions=True),
        queue.handout.hand_out_ready("s2", w.clock.now(), ECHO, 10),
    )
    assert all(not isinstance(c, Exception) for c in canceled), canceled
    assert slots_hold(w.engine) == 0
    ended = {row.id for row in w.rows(executions, job_id=job.id) if row.status == "canceled"}
    assert {h.id for h in handed} | ended >= set(waiting)
    for n in range(4):
        await manual.trigger("acme", job.id, f"after-{n}")
    assert slots_hold(w.engine) == 4
