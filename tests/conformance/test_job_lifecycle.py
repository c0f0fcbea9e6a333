"""Update, pause, resume and delete of jobs, and the history reads, on
SQLite and PostgreSQL.

Executions are inserted directly with SQL to stand for occurrences the
dispatcher claimed in its look-ahead (and for finished history), so these
tests need no dispatcher. The pure plans (the paused span, an updated job's
cursor) are table-tested in tests/unit/policy/test_jobchanges.py; the same
changes with the real claim and hand-out are in test_job_changes.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2

from tickwheel_server.api.scheduler import resume_span, update_plan
from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import execution_id, new_job_id, to_us
from tickwheel_server.errors import FailedPrecondition, NotFound, QuotaExceeded, VersionConflict
from tickwheel_server.jobspec import schedule_of
from tickwheel_server.schedule import Fire
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.isolation import PAUSED_WAIT
from tickwheel_server.policy.jobchanges import PausedSpan, replan
from tickwheel_server.store.jobexecutions import NOT_IN_NEW_SCHEDULE
from tickwheel_server.store.jobrecords import JobRecord, NewJob
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.tables import attempts, executions, job_cursors, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

T0 = datetime(2027, 1, 1, tzinfo=timezone.utc)  # FakeClock's start
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


def every_minute(name: str = "tick", payload: bytes = b"", expression: str = "* * * * *") -> job_pb2.Job:
    job = job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone="UTC")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        payload=payload,
    )
    job.jitter.exact = True
    return job


@dataclass
class World:
    """The stores over one migrated database, tenant ``acme`` created, and helpers."""

    engine: sa.Engine
    clock: FakeClock
    tenants: TenantStore
    jobs: JobStore
    history: HistoryStore

    async def create(self, tenant: str = "acme", job: job_pb2.Job | None = None) -> JobRecord:
        """A job (every minute by default) whose cursor is the next minute."""
        job = job or every_minute()
        now = self.clock.now()
        first = now.replace(second=0, microsecond=0) + MINUTE
        ident = new_job_id(now)
        record, _ = await self.jobs.create(
            NewJob(
                id=ident, tenant=tenant, name=job.name, spec=job.SerializeToString(), time_zone="UTC",
                next_run_at=first, next_due_at=first, tzdata_version="2026a", payload_size=len(job.payload),
            ),
            f"req-{ident}",
        )
        return record

    def execution(self, job: JobRecord, nominal: datetime, status: str, *, tries: int = 0) -> str:
        """An execution row and ``tries`` attempt rows, as the dispatcher and gateway leave them."""
        ident = execution_id(job.id, nominal)
        ended = status in ("succeeded", "dead", "canceled")
        with self.engine.begin() as conn:
            conn.execute(
                executions.insert().values(
                    id=ident, job_id=job.id, tenant=job.tenant, partition=job.partition, origin="scheduled",
                    nominal_at=to_us(nominal), due_at=to_us(nominal), ready_at=to_us(nominal),
                    attempt=max(1, tries), delivery=1 if status == "running" else 0, status=status,
                    owner="session-1" if status == "running" else None, worker_id=None, handler="echo",
                    missed_count=1, reap_count=0, payload=b"p", error="boom" if tries > 1 else "", dead_reason="",
                    created_at=to_us(nominal - MINUTE), finished_at=to_us(nominal + MINUTE) if ended else None,
                )
            )
            for number in range(1, tries + 1):
                last_succeeded = number == tries and status == "succeeded"
                conn.execute(
                    attempts.insert().values(
                        execution_id=ident, attempt=number, delivery=1,
                        status="succeeded" if last_succeeded else "failed",
                        started_at=to_us(nominal + timedelta(seconds=number)),
                        finished_at=to_us(nominal + timedelta(seconds=number, milliseconds=500)),
                        lateness_us=number * 1000, worker_id="w1", error="" if last_succeeded else "boom",
                    )
                )
        return ident

    def skip(self, job: JobRecord, ident: str, first: datetime, last: datetime, count: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                skips.insert().values(
                    id=ident, job_id=job.id, tenant=job.tenant, from_at=to_us(first), to_at=to_us(last),
                    continues_at=None, count=count, reason="misfire", created_at=to_us(T0),
                )
            )

    def rows(self, table, **where) -> list:
        with self.engine.connect() as conn:
            query = sa.select(table)
            for column, value in where.items():
                query = query.where(table.c[column] == value)
            return conn.execute(query).all()

    def statuses(self, job_id: str) -> dict[str, str]:
        return {row.id: row.status for row in self.rows(executions, job_id=job_id)}

    async def resume(self, paused: JobRecord, *, version: int | None = None):
        """Resume as ResumeJob does: count the span with the engine, then one
        store call. Returns (job, skip range, released)."""
        now = self.clock.now()
        span = resume_span(paused, now)
        return await self.jobs.resume(
            paused.tenant, paused.id, expected_version=paused.version if version is None else version,
            span=span, tzdata_version="2026b", now=now,
        )

    async def history_pages(self, job_id: str, limit: int) -> list:
        pages, key = [], None
        while True:
            pages.append(await self.history.list_executions("acme", job_id, before_key=key, limit=limit))
            key = pages[-1].next_key
            if key is None:
                return pages


@pytest.fixture
async def w(migrated_engine, clock) -> World:
    world = World(
        migrated_engine, clock, TenantStore(migrated_engine, clock),
        JobStore(migrated_engine, clock, partition_count=16), HistoryStore(migrated_engine, clock),
    )
    await world.tenants.create(Tenant(name="acme", max_payload_bytes=100))
    return world


# --- update ----------------------------------------------------------------------------------


async def test_update_with_a_stale_version_conflicts_and_writes_nothing(w: World) -> None:
    job = await w.create()
    claimed = w.execution(job, job.next_run_at - MINUTE, "scheduled")
    changed = every_minute("renamed", payload=b"new")
    arguments = dict(
        name="renamed", spec=changed.SerializeToString(), time_zone="UTC", tzdata_version="2026b",
        payload_size=3, reschedule=None,
    )
    with pytest.raises(VersionConflict) as stale:
        await w.jobs.update("acme", job.id, 2, **arguments)
    assert (stale.value.expected, stale.value.actual) == (2, 1)
    with pytest.raises(QuotaExceeded):
        await w.jobs.update("acme", job.id, 1, **{**arguments, "payload_size": 101})
    assert await w.jobs.get("acme", job.id) == job
    assert w.statuses(job.id) == {claimed: "scheduled"}

    w.clock.advance(1)
    updated, canceled = await w.jobs.update("acme", job.id, 1, **arguments)
    assert canceled == 0  # neither what nor when it runs changed: the claimed run stays, with the new payload
    assert (updated.version, updated.name, updated.spec) == (2, "renamed", changed.SerializeToString())
    assert (updated.state, updated.next_run_at, updated.updated_at) == ("active", job.next_run_at, w.clock.now())
    assert updated.tzdata_version == "2026b"
    [row] = w.rows(executions, id=claimed)
    assert (row.status, row.payload, row.dead_reason, row.finished_at) == ("scheduled", b"new", "", None)
    assert w.rows(skips) == []


async def test_update_re_creates_claimed_occurrences_under_the_new_schedule(w: World) -> None:
    """The claimed look-ahead occurrences are planned again: one the new
    schedule keeps keeps its id, one it lacks is canceled; the cursor goes
    past them (their ids exist)."""
    job = await w.create()
    # The dispatcher claimed 00:01 and 00:02 in its look-ahead and moved the cursor to 00:03.
    with w.engine.begin() as conn:
        cursor = to_us(T0 + 3 * MINUTE)
        conn.execute(
            job_cursors.update().where(job_cursors.c.job_id == job.id).values(next_run_at=cursor, next_due_at=cursor)
        )
    for minute in (1, 2):
        w.execution(job, T0 + minute * MINUTE, "scheduled")
    every_other = every_minute(expression="*/2 * * * *")
    schedule = schedule_of(every_other, job.id)
    updated, canceled = await w.jobs.update(
        "acme", job.id, 1, name="tick", spec=every_other.SerializeToString(), time_zone="UTC",
        tzdata_version="2026a", payload_size=0,
        reschedule=lambda view: replan(schedule, w.clock.now(), None, view),
    )
    assert canceled == 1
    assert updated.next_run_at == T0 + 4 * MINUTE  # 00:02 fits the new schedule and is already created
    kept, dropped = execution_id(job.id, T0 + 2 * MINUTE), execution_id(job.id, T0 + MINUTE)
    assert w.statuses(job.id) == {kept: "scheduled", dropped: "canceled"}
    assert w.rows(executions, id=dropped)[0].dead_reason == NOT_IN_NEW_SCHEDULE


async def test_a_paused_job_whose_schedule_changes_records_each_schedules_span(w: World) -> None:
    """The old schedule's paused span is recorded at the update, the new
    schedule's at the resume: every occurrence is accounted for once."""
    job = await w.create()  # cursor 00:01
    paused, _ = await w.jobs.pause("acme", job.id)
    w.clock.set(T0 + timedelta(minutes=10, seconds=30))
    stored = job_pb2.Job.FromString(paused.spec)
    changed = every_minute(expression="*/5 * * * *")
    plan = update_plan(paused, stored, changed, w.clock.now())
    updated, _ = await w.jobs.update(
        "acme", job.id, paused.version, name="tick", spec=changed.SerializeToString(), time_zone="UTC",
        tzdata_version=plan.tzdata_version, payload_size=0, reschedule=plan.reschedule, skipped=plan.skipped,
    )
    assert (updated.state, updated.next_run_at, updated.run_count) == ("paused", T0 + 15 * MINUTE, 10)
    [first] = w.rows(skips)
    assert (first.from_at, first.to_at) == (to_us(T0 + MINUTE), to_us(T0 + 10 * MINUTE))
    assert (first.count, first.reason) == (10, "job_paused")

    w.clock.set(T0 + timedelta(minutes=20, seconds=30))
    resumed, second, _ = await w.resume(updated)
    assert (second.from_at, second.to_at, second.count) == (T0 + 15 * MINUTE, T0 + 20 * MINUTE, 2)
    assert (resumed.state, resumed.next_run_at, resumed.run_count) == ("active", T0 + 25 * MINUTE, 12)


# --- pause and resume ------------------------------------------------------------------------


async def test_pause_holds_only_executions_not_started_and_records_nothing_else(w: World) -> None:
    job = await w.create()
    ids = {
        status: w.execution(job, T0 - index * MINUTE, status, tries=0 if status == "scheduled" else 1)
        for index, status in enumerate(("scheduled", "waiting", "running", "succeeded"))
    }
    before = {row.id: row for row in w.rows(executions)}
    w.clock.advance(2)
    paused, held = await w.jobs.pause("acme", job.id, "maintenance")
    assert held == 2
    assert (paused.state, paused.pause_reason, paused.version) == ("paused", "maintenance", 2)
    assert paused.paused_at == w.clock.now()
    assert (paused.next_run_at, paused.next_due_at, paused.run_count) == (job.next_run_at, job.next_due_at, 0)
    assert w.statuses(job.id) == {
        ids["scheduled"]: "waiting", ids["waiting"]: "waiting",
        ids["running"]: "running", ids["succeeded"]: "succeeded",
    }
    for status in ("scheduled", "waiting"):
        [row] = w.rows(executions, id=ids[status])
        assert {**row._asdict(), "status": status, "wait_key": None} == before[ids[status]]._asdict()  # nothing else
        assert (row.wait_key, row.dead_reason, row.finished_at) == (PAUSED_WAIT, "", None)
    assert w.rows(skips) == []
    assert len(w.rows(attempts)) == 3

    again, held_again = await w.jobs.pause("acme", job.id, "other reason")
    assert (again, held_again) == (paused, 0)


async def test_resume_records_one_skip_range_and_moves_the_cursor_to_the_future(w: World) -> None:
    job = await w.create()  # cursor 00:01
    paused, _ = await w.jobs.pause("acme", job.id)
    w.clock.set(T0 + HOUR + timedelta(seconds=30))  # 00:01 … 01:00 passed while paused: 60 occurrences
    with pytest.raises(VersionConflict):
        await w.resume(paused, version=1)
    assert w.rows(skips) == [] and await w.jobs.get("acme", job.id) == paused

    resumed, skip, released = await w.resume(paused)
    assert released == 0
    assert (resumed.state, resumed.next_run_at, resumed.run_count) == ("active", T0 + HOUR + MINUTE, 60)
    assert resumed.version == 3
    assert resumed.next_run_at > w.clock.now() and (resumed.paused_at, resumed.pause_reason) == (None, "")
    assert (skip.from_at, skip.to_at, skip.count, skip.reason) == (T0 + MINUTE, T0 + HOUR, 60, "job_paused")
    [row] = w.rows(skips)
    assert (row.id, row.count, row.continues_at) == (skip.id, 60, None)

    again, nothing, none_released = await w.resume(resumed)
    assert (again, nothing, none_released) == (resumed, None, 0)
    assert len(w.rows(skips)) == 1


async def test_resume_before_the_cursor_comes_due_records_nothing(w: World) -> None:
    job = await w.create()
    paused, _ = await w.jobs.pause("acme", job.id)
    w.clock.advance(10)
    resumed, skip, _ = await w.resume(paused)
    assert skip is None and (resumed.state, resumed.next_run_at) == ("active", job.next_run_at)
    assert w.rows(skips) == []


async def test_a_completed_job_can_be_paused_and_resumes_completed_with_its_run(w: World) -> None:
    """A one-off claimed in the look-ahead leaves its job completed before it
    runs: pausing holds it, resuming before its instant releases it."""
    job = await w.create()
    with w.engine.begin() as conn:
        ended = dict(state="completed", next_run_at=None, next_due_at=None)  # as the claim leaves it: the cursor only
        conn.execute(job_cursors.update().where(job_cursors.c.job_id == job.id).values(**ended))
    claimed = w.execution(job, T0 + MINUTE, "scheduled")
    paused, held = await w.jobs.pause("acme", job.id)
    assert (paused.state, held) == ("paused", 1) and w.statuses(job.id) == {claimed: "waiting"}
    resumed, skip, released = await w.resume(paused)
    assert (resumed.state, resumed.next_run_at, skip, released) == ("completed", None, None, 1)
    [row] = w.rows(executions, id=claimed)
    assert (row.status, row.wait_key, row.ready_at) == ("scheduled", None, to_us(T0 + MINUTE))


# --- delete ----------------------------------------------------------------------------------


async def test_delete_cancels_removes_the_job_and_keeps_history(w: World) -> None:
    job = await w.create()
    other = await w.create()
    done = w.execution(job, T0 - 2 * MINUTE, "succeeded", tries=2)
    waiting = w.execution(job, T0 - MINUTE, "scheduled")
    running = w.execution(job, T0 - 3 * MINUTE, "running", tries=1)
    assert await w.tenants.job_count("acme") == 2
    with pytest.raises(VersionConflict):
        await w.jobs.delete("acme", job.id, expected_version=5)
    assert w.statuses(job.id)[waiting] == "scheduled" and await w.tenants.job_count("acme") == 2

    assert await w.jobs.delete("acme", job.id, expected_version=1) == 1
    with pytest.raises(NotFound):
        await w.jobs.get("acme", job.id)
    assert await w.tenants.job_count("acme") == 1
    assert [j.id for j in await w.jobs.list("acme")] == [other.id]
    assert w.statuses(job.id) == {done: "succeeded", waiting: "canceled", running: "running"}
    assert w.rows(executions, id=waiting)[0].dead_reason == "canceled: job deleted"
    assert len(w.rows(attempts)) == 3
    page = await w.history.list_executions("acme", job.id)  # history outlives the job
    assert [e.id for e in page.executions] == [waiting, done, running]
    with pytest.raises(NotFound):
        await w.jobs.delete("acme", job.id)


# --- history ---------------------------------------------------------------------------------


async def test_list_executions_pages_newest_first_with_attempts_from_one_query(w: World) -> None:
    job = await w.create()
    history = [(1, "succeeded", 1), (2, "dead", 3), (4, "succeeded", 2), (6, "running", 1), (7, "scheduled", 0)]
    made = [w.execution(job, T0 + minute * MINUTE, status, tries=tries) for minute, status, tries in history]
    for ident, first, last, count in [("s-old", 0, 0, 1), ("s-mid", 3, 3, 1), ("s-new", 8, 9, 2)]:
        w.skip(job, ident, T0 + first * MINUTE, T0 + last * MINUTE, count)
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(statement)

    sa.event.listen(w.engine, "before_cursor_execute", record)
    try:
        pages = await w.history_pages(job.id, limit=2)
    finally:
        sa.event.remove(w.engine, "before_cursor_execute", record)
    assert len([s for s in statements if "FROM attempts" in s]) == len(pages) == 3  # one attempts query per page
    assert [[e.id for e in p.executions] for p in pages] == [made[4:2:-1], made[2:0:-1], made[:1]]
    dead = pages[1].executions[1]
    assert dead.status == "dead" and [(a.attempt, a.status) for a in dead.attempts] == [(n, "failed") for n in (1, 2, 3)]
    assert pages[0].executions[0].attempts == ()
    assert pages[0].executions[1].attempts[0].lateness == timedelta(milliseconds=1)
    # Each page's span reaches from its oldest execution up to where the previous page stopped.
    assert [[s.id for s in p.skips] for p in pages] == [["s-new"], ["s-mid"], ["s-old"]]

    filtered = await w.history.list_executions(
        "acme", job.id, statuses=["succeeded"], from_at=T0 + 2 * MINUTE, to_at=T0 + 6 * MINUTE
    )
    assert [e.id for e in filtered.executions] == [made[2]] and not filtered.more
    assert [s.id for s in filtered.skips] == ["s-mid"]
    fetched = await w.history.get_execution("acme", made[1])
    assert [a.attempt for a in fetched.attempts] == [1, 2, 3] and fetched.error == "boom"
    assert (await w.history.list_executions("acme", (await w.create()).id)).executions == ()


async def test_pages_end_in_key_order_when_executions_share_an_instant(w: World) -> None:
    job = await w.create()
    newest = w.execution(job, T0 + 5 * MINUTE, "succeeded")
    scheduled = w.execution(job, T0 + 4 * MINUTE, "succeeded")
    oldest = w.execution(job, T0 + 3 * MINUTE, "succeeded")
    trigger = f"{job.id}:trigger:r1"
    twin = {**w.rows(executions, id=scheduled)[0]._asdict(), "id": trigger, "origin": "trigger"}
    with w.engine.begin() as conn:  # a manual trigger at the very instant of an occurrence
        conn.execute(executions.insert().values(twin))
    for limit in (1, 2, 3):
        seen = [e.id for page in await w.history_pages(job.id, limit) for e in page.executions]
        assert seen == [newest, trigger, scheduled, oldest], limit  # by (nominal_at, id), descending


async def test_cancel_execution_by_status(w: World) -> None:
    job = await w.create()
    waiting = w.execution(job, T0 + MINUTE, "waiting")
    running = w.execution(job, T0 + 2 * MINUTE, "running", tries=1)
    done = w.execution(job, T0 + 3 * MINUTE, "succeeded", tries=1)
    canceled = await w.history.cancel_execution("acme", waiting, "no longer needed")
    assert (canceled.status, canceled.dead_reason) == ("canceled", "canceled: no longer needed")
    assert canceled.finished_at == w.clock.now()
    still = await w.history.cancel_execution("acme", running)
    assert still.status == "running" and len(still.attempts) == 1
    for ended in (done, waiting):
        with pytest.raises(FailedPrecondition):
            await w.history.cancel_execution("acme", ended)
    assert w.statuses(job.id) == {waiting: "canceled", running: "running", done: "succeeded"}


async def test_another_tenants_job_and_executions_are_not_found(w: World) -> None:
    await w.tenants.create(Tenant(name="globex"))
    job = await w.create()
    claimed = w.execution(job, T0 + MINUTE, "scheduled")
    fire = Fire(T0 + MINUTE, T0 + MINUTE, 0)
    calls = [
        w.jobs.update(
            "globex", job.id, 1, name="x", spec=b"", time_zone="UTC", tzdata_version="", payload_size=0, reschedule=None
        ),
        w.jobs.delete("globex", job.id),
        w.jobs.pause("globex", job.id),
        w.jobs.resume("globex", job.id, expected_version=1, span=PausedSpan(fire, None), tzdata_version=""),
        w.history.get_execution("globex", claimed),
        w.history.list_executions("globex", job.id),
        w.history.cancel_execution("globex", claimed),
    ]
    for call in calls:
        with pytest.raises(NotFound):
            await call
    assert await w.jobs.get("acme", job.id) == job
    assert w.statuses(job.id) == {claimed: "scheduled"}
    assert await w.tenants.job_count("acme") == 1 and await w.tenants.job_count("globex") == 0
