"""Pause, resume, update and delete never lose an occurrence, on SQLite and
PostgreSQL, through the real claim (``DispatchStore``), hand-out
(``ExecutionQueue``) and job store, at fixed instants of a fake clock.

Each change is made as the API makes it (the pure plan with the engine, then
one store call). After each scenario an audit accounts for every occurrence
of the job's schedule in the window: exactly one execution row (its id
derived from the instant) or a place in exactly one skip range, never both.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from google.protobuf import duration_pb2
from tickwheel.v1 import job_pb2

from tickwheel_server.api.scheduler import resume_span, update_plan
from tickwheel_server.api.validate import normalise_job
from tickwheel.shared.ids import execution_id, from_us, new_job_id, to_us
from tickwheel_server.jobspec import schedule_of
from tickwheel_server.store.lateness import LatenessStore
from tickwheel_server.schedule import first_fire, next_fire
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.isolation import PAUSED_WAIT
from tickwheel_server.store.jobexecutions import NOT_IN_NEW_SCHEDULE
from tickwheel_server.store.jobrecords import JobRecord, NewJob
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.manual import ManualStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import executions, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

DAY = datetime(2027, 3, 1, tzinfo=timezone.utc)
TWO_AM = DAY.replace(hour=2)
SECOND, MINUTE, ONE_DAY = timedelta(seconds=1), timedelta(minutes=1), timedelta(days=1)
PARTITIONS = 4
OWNED = {p: 1 for p in range(PARTITIONS)}
WORKERS = Capability(("acme",), ("echo", "mail"), True)


def daily(expression: str = "0 2 * * *", **fields) -> job_pb2.Job:
    job = job_pb2.Job(
        name="nightly", payload=b"v1", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone="UTC")), **fields,
    )
    job.jitter.exact = True
    return normalise_job(job, DAY - ONE_DAY)  # as the API stores it: the misfire threshold is 60 s


def one_off(at: datetime) -> job_pb2.Job:
    job = daily()
    job.schedule.once_at.FromDatetime(at)
    return job


@dataclass
class World:
    engine: sa.Engine
    clock: object
    jobs: JobStore
    dispatch: DispatchStore
    queue: ExecutionQueue
    manual: ManualStore

    async def create(self, job: job_pb2.Job, at: datetime) -> JobRecord:
        self.clock.set(at)
        ident = new_job_id(at)
        fire = first_fire(schedule_of(job, ident), at)
        record, _ = await self.jobs.create(
            NewJob(
                id=ident, tenant="acme", name=job.name, spec=job.SerializeToString(), time_zone="UTC",
                next_run_at=fire.nominal_at, next_due_at=fire.due_at, tzdata_version="2026a",
                payload_size=len(job.payload),
            ),
            f"req-{ident}",
        )
        return record

    async def claim(self, at: datetime) -> None:
        self.clock.set(at)
        await self.dispatch.claim_due(OWNED, at)

    async def hand_out(self, at: datetime) -> list[str]:
        self.clock.set(at)
        return [h.id for h in await self.queue.handout.hand_out_ready("s1", at, WORKERS, 100)]

    async def pause(self, job_id: str, at: datetime) -> int:
        self.clock.set(at)
        return (await self.jobs.pause("acme", job_id))[1]

    async def resume(self, job_id: str, at: datetime):
        """As ResumeJob does; returns (job, skip range, released)."""
        self.clock.set(at)
        record = await self.jobs.get("acme", job_id)
        span = resume_span(record, at)
        return await self.jobs.resume(
            "acme", job_id, expected_version=record.version, span=span, tzdata_version="2026a", now=at,
        )

    async def update(self, job_id: str, at: datetime, change) -> tuple[JobRecord, int]:
        """As UpdateJob does: ``change`` edits a copy of the stored definition."""
        self.clock.set(at)
        record = await self.jobs.get("acme", job_id)
        stored = job_pb2.Job.FromString(record.spec)
        job = job_pb2.Job()
        job.CopyFrom(stored)
        change(job)
        job = normalise_job(job, at)
        plan = update_plan(record, stored, job, at)
        return await self.jobs.update(
            "acme", job_id, record.version, name=job.name, spec=job.SerializeToString(), time_zone="UTC",
            tzdata_version=plan.tzdata_version, payload_size=len(job.payload), reschedule=plan.reschedule,
            skipped=plan.skipped,
        )

    def rows(self, job_id: str) -> dict[str, sa.Row]:
        with self.engine.connect() as conn:
            return {r.id: r for r in conn.execute(sa.select(executions).where(executions.c.job_id == job_id))}

    def skips(self, job_id: str) -> list[sa.Row]:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(skips).where(skips.c.job_id == job_id).order_by(skips.c.from_at)).all()

    def audit(self, job: JobRecord, start: datetime, end: datetime) -> None:
        """Every occurrence of the job's schedule nominally in ``[start, end]``
        is one execution row or in one skip range; none is both, none neither;
        every execution in the window is an occurrence, and none was canceled."""
        schedule = schedule_of(job_pb2.Job.FromString(job.spec), job.id)
        expected, fire = [], next_fire(schedule, start - timedelta(microseconds=1))
        while fire is not None and fire.nominal_at <= end:
            expected.append(fire.nominal_at)
            fire = next_fire(schedule, fire.nominal_at)
        found = [
            r for r in self.rows(job.id).values() if r.origin == "scheduled" and start <= from_us(r.nominal_at) <= end
        ]
        assert not [r.id for r in found if r.status == "canceled"], "nothing here asked for a cancel"
        rows = {from_us(r.nominal_at) for r in found}
        assert rows <= set(expected), sorted(rows - set(expected))
        for skip in self.skips(job.id):
            inside = [t for t in expected if to_us(t) >= skip.from_at and to_us(t) <= skip.to_at]
            assert not rows & set(inside), f"{skip.id} covers executions {sorted(rows & set(inside))}"
            assert len(inside) == skip.count, (skip.id, inside, skip.count)
        skipped = {t for s in self.skips(job.id) for t in expected if s.from_at <= to_us(t) <= s.to_at}
        missing = [t for t in expected if t not in rows and t not in skipped]
        assert not missing, f"lost occurrences: {missing}"


@pytest.fixture
async def w(migrated_engine, clock) -> World:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    return World(
        migrated_engine, clock, JobStore(migrated_engine, clock, partition_count=PARTITIONS),
        DispatchStore(migrated_engine, clock), ExecutionQueue(migrated_engine, clock, rng=random.Random(7)),
        ManualStore(migrated_engine, clock),
    )


# --- pause and resume inside the look-ahead --------------------------------------------------------


CLAIMED_AT = TWO_AM - 50 * SECOND  # 02:00 is inside the 60 s look-ahead from here
PAUSED_AT = TWO_AM - 30 * SECOND


@pytest.mark.parametrize("kind", ["daily 02:00", "one-off at 02:00"])
@pytest.mark.parametrize(
    "case, resumed_at, runs",
    [
        ("resumed before its instant", TWO_AM - 20 * SECOND, True),
        ("resumed late, within the misfire threshold", TWO_AM + 59 * SECOND, True),
        ("resumed past the misfire threshold", TWO_AM + 61 * SECOND, False),
    ],
)
async def test_a_run_claimed_ahead_survives_a_pause(w: World, kind, case, resumed_at, runs) -> None:
    job = await w.create(daily() if kind.startswith("daily") else one_off(TWO_AM), TWO_AM - 10 * MINUTE)
    await w.claim(CLAIMED_AT)
    occurrence = execution_id(job.id, TWO_AM)
    assert w.rows(job.id)[occurrence].status == "scheduled"
    assert await w.pause(job.id, PAUSED_AT) == 1
    # Just before the resume (past the due instant in the late cases): a held run never starts.
    assert await w.hand_out(max(PAUSED_AT, resumed_at - SECOND)) == []

    resumed, skip, released = await w.resume(job.id, resumed_at)
    tomorrow = TWO_AM + ONE_DAY if kind.startswith("daily") else None
    assert resumed.next_run_at == tomorrow
    assert resumed.state == ("active" if tomorrow else "completed")
    if runs:
        assert (released, skip) == (1, None), case
        if resumed_at < TWO_AM:
            assert await w.hand_out(TWO_AM - SECOND) == [], "never early"
        assert await w.hand_out(max(TWO_AM, resumed_at)) == [occurrence], case
    else:
        assert released == 0 and occurrence not in w.rows(job.id), case
        assert (skip.from_at, skip.to_at, skip.count, skip.reason) == (TWO_AM, TWO_AM, 1, "job_paused")
        assert await w.hand_out(resumed_at + SECOND) == []
    await w.claim(resumed_at + ONE_DAY)  # the next day's claim: tomorrow's run, nothing twice
    w.audit(resumed, TWO_AM, TWO_AM + ONE_DAY)


@pytest.mark.parametrize(
    "case, late_by, skipped, runs",
    [
        # The held 02:00 and the three 02:00s that came while paused: one range.
        ("resumed past the threshold of the last 02:00", 90 * SECOND, 4, False),
        # The held 02:00 and the next two: one range; the third day's, 30 s late, runs.
        ("resumed within the threshold of the last 02:00", 30 * SECOND, 3, True),
    ],
)
async def test_a_long_pause_is_one_skip_range_not_a_catch_up_burst(w: World, case, late_by, skipped, runs) -> None:
    job = await w.create(daily(), TWO_AM - 10 * MINUTE)
    await w.claim(CLAIMED_AT)
    await w.pause(job.id, PAUSED_AT)
    last = TWO_AM + 3 * ONE_DAY
    resumed_at = last + late_by
    resumed, skip, released = await w.resume(job.id, resumed_at)
    assert (skip.from_at, skip.to_at, skip.count, released) == (
        TWO_AM, TWO_AM + (skipped - 1) * ONE_DAY, skipped, 0
    ), case
    assert resumed.next_run_at == (last if runs else last + ONE_DAY), case
    await w.claim(resumed_at)
    assert await w.hand_out(resumed_at) == ([execution_id(job.id, last)] if runs else []), case
    await w.claim(resumed_at + SECOND)
    assert await w.hand_out(resumed_at + SECOND) == [], "nothing twice"
    w.audit(await w.jobs.get("acme", job.id), TWO_AM, resumed_at)


@pytest.mark.parametrize("kind", ["daily 02:00", "one-off at 02:00"])
@pytest.mark.parametrize(
    "case, resumed_at, runs",
    [
        ("resumed late, within the misfire threshold", TWO_AM + 59 * SECOND, True),
        ("resumed past the misfire threshold", TWO_AM + 61 * SECOND, False),
    ],
)
async def test_a_run_never_claimed_follows_the_held_run_rule(w: World, kind, case, resumed_at, runs) -> None:
    """Paused at 01:00, an hour before the look-ahead reaches 02:00: the
    occurrence was never claimed, and its resume decides it as it decides a
    held one (test_a_run_claimed_ahead_survives_a_pause): late within the
    misfire threshold it runs, once; past it, it is the skip range."""
    daily_job = kind.startswith("daily")
    job = await w.create(daily() if daily_job else one_off(TWO_AM), TWO_AM - 70 * MINUTE)
    await w.claim(TWO_AM - 61 * MINUTE)
    assert w.rows(job.id) == {}
    assert await w.pause(job.id, TWO_AM - 60 * MINUTE) == 0
    await w.claim(TWO_AM - 30 * SECOND)  # the paused job's 02:00 is not claimed
    assert w.rows(job.id) == {}

    resumed, skip, released = await w.resume(job.id, resumed_at)
    occurrence = execution_id(job.id, TWO_AM)
    tomorrow = TWO_AM + ONE_DAY if daily_job else None
    assert released == 0
    if runs:
        assert (resumed.state, resumed.next_run_at, skip) == ("active", TWO_AM, None), case
        await w.claim(resumed_at)
        assert await w.hand_out(resumed_at) == [occurrence], case
        after = await w.jobs.get("acme", job.id)
        assert (after.state, after.next_run_at) == ("active" if daily_job else "completed", tomorrow), case
    else:
        assert (resumed.state, resumed.next_run_at) == ("active" if daily_job else "completed", tomorrow), case
        assert (skip.from_at, skip.to_at, skip.count, skip.reason) == (TWO_AM, TWO_AM, 1, "job_paused")
        await w.claim(resumed_at)
        assert await w.hand_out(resumed_at) == []
        assert occurrence not in w.rows(job.id)
    await w.claim(resumed_at + SECOND)
    assert await w.hand_out(resumed_at + SECOND) == [], "nothing twice"
    await w.claim(resumed_at + ONE_DAY)  # the next day's claim: tomorrow's run, nothing twice
    w.audit(await w.jobs.get("acme", job.id), TWO_AM, TWO_AM + ONE_DAY)


async def test_a_long_threshold_releases_a_bounded_few_never_a_burst(w: World) -> None:
    """Every minute, a threshold of an hour, paused for half an hour: of
    the late ones, the held 02:00 and the eight most recent run (one less
    than the backlog cap in all, leaving room for the next on time), the
    22 between them are the skip range."""
    job = await w.create(
        daily("* * * * *", overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW,
              misfire_threshold=duration_pb2.Duration(seconds=3600)),
        TWO_AM - 10 * SECOND,
    )
    await w.claim(TWO_AM - 5 * SECOND)  # 02:00 claimed ahead
    await w.pause(job.id, TWO_AM - 4 * SECOND)  # held: 02:00
    resumed_at = TWO_AM + 30 * MINUTE + 30 * SECOND
    resumed, skip, released = await w.resume(job.id, resumed_at)
    # 02:00 (held, 30 min late: within the threshold) is released; of 02:01..02:30 the last eight run.
    assert released == 1
    assert (skip.from_at, skip.to_at, skip.count) == (TWO_AM + MINUTE, TWO_AM + 22 * MINUTE, 22)
    assert resumed.next_run_at == TWO_AM + 23 * MINUTE
    await w.claim(resumed_at)
    handed = await w.hand_out(resumed_at)
    assert len(handed) == 9 and execution_id(job.id, TWO_AM) in handed
    assert execution_id(job.id, TWO_AM + 31 * MINUTE) in w.rows(job.id), "the next on time is claimed"
    w.audit(await w.jobs.get("acme", job.id), TWO_AM, TWO_AM + 31 * MINUTE)


async def test_held_runs_block_nothing_and_delete_cancels_them(w: World) -> None:
    """A trigger made while paused runs (it is asked for), not queued behind
    the held run; deleting the paused job cancels the held run with its reason."""
    job = await w.create(daily(), TWO_AM - 10 * MINUTE)
    await w.claim(CLAIMED_AT)
    await w.pause(job.id, PAUSED_AT)
    w.clock.set(TWO_AM + 5 * SECOND)
    trigger, _ = await w.manual.trigger("acme", job.id, "now")
    assert await w.hand_out(TWO_AM + 5 * SECOND) == [trigger.id]
    assert await w.jobs.delete("acme", job.id) == 1
    rows = w.rows(job.id)
    held = rows[execution_id(job.id, TWO_AM)]
    assert (held.status, held.dead_reason) == ("canceled", "canceled: job deleted")
    assert rows[trigger.id].status == "running"


async def test_a_held_run_is_not_late_while_its_job_is_paused(w: World) -> None:
    """The lateness watch measures runs waiting to be handed out; a paused
    job's held run is not one (its resume decides it), a released one is."""
    lateness = LatenessStore(w.engine, w.clock)
    job = await w.create(daily(), TWO_AM - 10 * MINUTE)
    await w.claim(CLAIMED_AT)
    await w.pause(job.id, PAUSED_AT)
    w.clock.set(TWO_AM + 10 * MINUTE)
    assert await lateness.oldest_waiting(TWO_AM + 10 * MINUTE) == []
    await w.resume(job.id, TWO_AM + 10 * MINUTE)  # past the threshold: recorded as skipped, not late
    assert await lateness.oldest_waiting(TWO_AM + 10 * MINUTE) == []
    other = await w.create(one_off(TWO_AM + 20 * MINUTE), TWO_AM + 19 * MINUTE + 30 * SECOND)
    await w.claim(TWO_AM + 19 * MINUTE + 30 * SECOND)
    await w.pause(other.id, TWO_AM + 19 * MINUTE + 40 * SECOND)
    await w.resume(other.id, TWO_AM + 20 * MINUTE + 30 * SECOND)  # within the threshold: released, late
    assert [x.execution_id for x in await lateness.oldest_waiting(TWO_AM + 20 * MINUTE + 30 * SECOND)] == [
        execution_id(other.id, TWO_AM + 20 * MINUTE)
    ]


async def test_repeated_pause_and_resume_account_for_every_minute(w: World) -> None:
    # Overlap allowed: nothing records the runs' ends here, and no occurrence may be skipped for overlap.
    job = await w.create(daily("* * * * *", overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW), TWO_AM - SECOND)
    at = TWO_AM
    for step, (paused_for, ran) in enumerate([(20, True), (70, True), (5, True), (200, True), (45, True)]):
        await w.claim(at)
        await w.hand_out(at)
        await w.pause(job.id, at + 10 * SECOND)
        at += (10 + paused_for) * SECOND
        await w.resume(job.id, at)
        await w.claim(at)
        handed = await w.hand_out(at)
        assert len(handed) <= 2, f"step {step}: a burst {handed}"
    final = await w.jobs.get("acme", job.id)
    w.audit(final, TWO_AM, at)


async def test_resume_racing_the_claim_keeps_each_occurrence_once(w: World) -> None:
    job = await w.create(daily("* * * * *", overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW), TWO_AM - SECOND)
    at = TWO_AM
    for _ in range(6):
        await w.claim(at)
        await w.pause(job.id, at + 5 * SECOND)
        at += 50 * SECOND
        w.clock.set(at)
        await asyncio.gather(w.resume(job.id, at), w.dispatch.claim_due(OWNED, at), w.dispatch.claim_due(OWNED, at))
        await w.claim(at)
    w.audit(await w.jobs.get("acme", job.id), TWO_AM, at)


# --- update ------------------------------------------------------------------------------------------


def _retry_waiting(w: World, job: JobRecord, nominal: datetime) -> str:
    """An execution of ``nominal`` whose first attempt failed and whose retry waits until 03:00."""
    ident = execution_id(job.id, nominal)
    with w.engine.begin() as conn:
        conn.execute(executions.insert().values(
            id=ident, job_id=job.id, tenant="acme", partition=job.partition, origin="scheduled",
            nominal_at=to_us(nominal), due_at=to_us(nominal), ready_at=to_us(TWO_AM + 60 * MINUTE), attempt=2,
            delivery=1, status="scheduled", handler="echo", missed_count=1, reap_count=0, payload=b"v1", error="boom",
            dead_reason="", created_at=to_us(nominal), allow_overlap=False,
        ))
    return ident


async def test_an_update_of_neither_what_nor_when_leaves_claimed_runs_and_retries_alone(w: World) -> None:
    job = await w.create(daily(), TWO_AM - 10 * MINUTE)
    await w.claim(CLAIMED_AT)
    retry = _retry_waiting(w, job, TWO_AM - ONE_DAY)
    before = w.rows(job.id)

    def relabel(j: job_pb2.Job) -> None:
        j.name = "renamed"
        j.labels["team"] = "ops"
        j.timeout.FromSeconds(30)
        j.retry_policy.max_attempts = 9
        j.overlap_policy = job_pb2.OVERLAP_POLICY_ALLOW
        j.target.handler.name = "echo"

    updated, canceled = await w.update(job.id, PAUSED_AT, relabel)
    assert canceled == 0 and updated.next_run_at == job.next_run_at + ONE_DAY
    assert w.rows(job.id) == before
    assert await w.hand_out(TWO_AM) == [execution_id(job.id, TWO_AM)]
    assert retry in w.rows(job.id)


async def test_a_payload_or_target_update_reaches_the_claimed_run_and_no_started_one(w: World) -> None:
    job = await w.create(daily("*/2 * * * *"), TWO_AM - 3 * MINUTE)
    await w.claim(TWO_AM - 2 * MINUTE - 30 * SECOND)  # claims 01:58
    await w.hand_out(TWO_AM - 2 * MINUTE)  # 01:58 runs
    await w.claim(TWO_AM - MINUTE)  # claims 02:00
    running = execution_id(job.id, TWO_AM - 2 * MINUTE)
    retry = _retry_waiting(w, job, TWO_AM - ONE_DAY)
    w.clock.set(TWO_AM - 30 * SECOND)
    trigger, _ = await w.manual.trigger("acme", job.id, "t1")

    def change(j: job_pb2.Job) -> None:
        j.payload = b"v2"
        j.target.handler.name = "mail"

    _, canceled = await w.update(job.id, TWO_AM - 30 * SECOND, change)
    rows = w.rows(job.id)
    claimed = rows[execution_id(job.id, TWO_AM)]
    assert canceled == 0 and (claimed.status, claimed.payload, claimed.handler) == ("scheduled", b"v2", "mail")
    assert (rows[retry].payload, rows[retry].handler) == (b"v1", "mail")  # a retry keeps its payload
    assert (rows[trigger.id].payload, rows[trigger.id].handler) == (b"v1", "mail")
    assert (rows[running].status, rows[running].handler) == ("running", "echo")


async def test_a_schedule_update_re_creates_claimed_runs_by_the_id_rule(w: World) -> None:
    """Every 2 minutes with 02:00 claimed, then every minute at 30 s
    jitter: 02:00 keeps its id and takes its new due instant; then an
    hourly schedule drops it (canceled, with the reason)."""
    job = await w.create(daily("*/2 * * * *"), TWO_AM - 90 * SECOND)
    await w.claim(CLAIMED_AT)
    occurrence = execution_id(job.id, TWO_AM)

    def every_minute_jittered(j: job_pb2.Job) -> None:
        j.schedule.cron.expression = "* * * * *"
        j.jitter.exact = False
        j.jitter.window.FromSeconds(30)

    updated, canceled = await w.update(job.id, PAUSED_AT, every_minute_jittered)
    row = w.rows(job.id)[occurrence]
    assert canceled == 0 and row.status == "scheduled" and row.due_at == row.ready_at
    due = from_us(row.due_at)
    assert TWO_AM <= due < TWO_AM + 30 * SECOND and updated.next_run_at == TWO_AM + MINUTE
    await w.claim(TWO_AM - 10 * SECOND)
    assert len(w.rows(job.id)) == 1  # the claim after it creates 02:00 nothing twice

    def hourly(j: job_pb2.Job) -> None:
        j.schedule.cron.expression = "30 * * * *"

    updated, canceled = await w.update(job.id, TWO_AM - 5 * SECOND, hourly)
    row = w.rows(job.id)[occurrence]
    assert canceled == 1 and (row.status, row.dead_reason) == ("canceled", NOT_IN_NEW_SCHEDULE)
    assert updated.next_run_at == TWO_AM + 30 * MINUTE
    assert await w.hand_out(TWO_AM + MINUTE) == []


async def test_a_schedule_update_of_a_paused_job_keeps_its_runs_held(w: World) -> None:
    job = await w.create(daily(), TWO_AM - 10 * MINUTE)
    await w.claim(CLAIMED_AT)
    await w.pause(job.id, PAUSED_AT)

    def later_end(j: job_pb2.Job) -> None:
        j.end_at.FromDatetime(TWO_AM + 10 * ONE_DAY)

    updated, canceled = await w.update(job.id, PAUSED_AT + SECOND, later_end)
    row = w.rows(job.id)[execution_id(job.id, TWO_AM)]
    assert (canceled, updated.state, row.status, row.wait_key) == (0, "paused", "waiting", PAUSED_WAIT)
    _, _, released = await w.resume(job.id, TWO_AM - 10 * SECOND)
    assert released == 1 and await w.hand_out(TWO_AM) == [execution_id(job.id, TWO_AM)]
    w.audit(await w.jobs.get("acme", job.id), TWO_AM, TWO_AM)
