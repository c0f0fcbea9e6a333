"""The dispatcher's claim of jobs that name a business-day calendar, on
SQLite and PostgreSQL: the execution keeps its nominal id and gets the moved
due instant, skips are recorded with reason ``calendar``, ``only`` drops, a
calendar of another tenant is invisible, and calendars are read per batch
and decoded once per version."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from tickwheel.v1 import calendar_pb2, job_pb2

from tickwheel.shared.ids import execution_id, new_job_id, to_us
from tickwheel_server.api.calendars import definition_of, normalise_calendar
from tickwheel_server.api.validate import normalise_job
from tickwheel_server.errors import FailedPrecondition
from tickwheel_server.store.calendars import CalendarStore
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.jobrecords import JobRecord, NewJob
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import executions, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

UTC = timezone.utc
PARTITIONS = 4
OWNED = {p: 1 for p in range(PARTITIONS)}
SATURDAY = datetime(2027, 3, 27, 9, 0, tzinfo=UTC)  # 09:00 GMT, the day before the clocks go forward
TUESDAY = datetime(2027, 3, 30, 8, 0, tzinfo=UTC)  # 09:00 BST: Monday 29 (Easter Monday) is a holiday
CLAIM_AT = SATURDAY - timedelta(seconds=30)


def uk_calendar() -> calendar_pb2.Calendar:
    return normalise_calendar(calendar_pb2.Calendar(
        name="uk", time_zone="Europe/London", holidays=["2027-03-26", "2027-03-29"]
    ))  # fmt: skip


def weekly_job(rule: int, calendar: str = "uk") -> job_pb2.Job:
    """Every Saturday at 09:00 London, exact (no jitter)."""
    job = job_pb2.Job(
        name="weekly",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 9 * * SAT", time_zone="Europe/London")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        calendar=job_pb2.JobCalendar(name=calendar, rule=rule),
    )
    job.jitter.exact = True
    return normalise_job(job, SATURDAY - timedelta(days=3))


class World:
    def __init__(self, engine: sa.Engine, clock) -> None:
        self.engine = engine
        self.clock = clock
        self.jobs = JobStore(engine, clock, partition_count=PARTITIONS)
        self.dispatch = DispatchStore(engine, clock)
        self.calendars = CalendarStore(engine, clock)

    async def create(self, job: job_pb2.Job, cursor: datetime, tenant: str = "acme") -> JobRecord:
        ident = new_job_id(self.clock.now())
        record, _ = await self.jobs.create(
            NewJob(
                id=ident, tenant=tenant, name=job.name, spec=job.SerializeToString(), time_zone="Europe/London",
                next_run_at=cursor, next_due_at=cursor, tzdata_version="2026a", payload_size=0,
            ),
            f"req-{ident}",
        )
        return record

    def rows(self, table) -> list[sa.Row]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(table)))


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    tenants = TenantStore(migrated_engine, clock)
    await tenants.create(Tenant(name="acme"))
    await tenants.create(Tenant(name="globex"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    w = World(migrated_engine, clock)
    await w.calendars.create("acme", "uk", definition_of(uk_calendar()), "cal-1")
    return w


async def test_next_moves_the_due_instant_and_keeps_the_nominal_id(world) -> None:
    job = await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY)
    result = await world.dispatch.claim_due(OWNED, CLAIM_AT)
    ident = execution_id(job.id, SATURDAY)
    assert [(e.id, e.due_at_us) for e in result.executions] == [(ident, to_us(TUESDAY))]
    [row] = world.rows(executions)
    assert (row.id, row.nominal_at, row.due_at, row.ready_at) == (ident, to_us(SATURDAY), to_us(TUESDAY), to_us(TUESDAY))
    assert world.rows(skips) == []


def weekly_skip_misfires(rule: int) -> job_pb2.Job:
    """:func:`weekly_job` whose missed runs are skipped after a minute."""
    job = weekly_job(rule)
    job.misfire_policy = job_pb2.MISFIRE_POLICY_SKIP
    job.misfire_threshold.FromSeconds(60)
    return normalise_job(job, SATURDAY - timedelta(days=3))


async def test_a_moved_run_is_missed_by_its_moved_instant_not_its_nominal_one(world) -> None:
    # Claimed on Sunday, a day after Saturday's nominal instant and well past
    # the one-minute threshold: the run is due on Tuesday, so it is not missed.
    job = await world.create(weekly_skip_misfires(job_pb2.CALENDAR_RULE_NEXT), SATURDAY)
    sunday = SATURDAY + timedelta(days=1)
    result = await world.dispatch.claim_due(OWNED, sunday)
    ident = execution_id(job.id, SATURDAY)
    assert [(e.id, e.due_at_us) for e in result.executions] == [(ident, to_us(TUESDAY))]
    assert world.rows(skips) == []


async def test_a_moved_run_past_its_moved_instant_is_missed(world) -> None:
    job = await world.create(weekly_skip_misfires(job_pb2.CALENDAR_RULE_NEXT), SATURDAY)
    result = await world.dispatch.claim_due(OWNED, TUESDAY + timedelta(minutes=5))
    assert result.executions == []
    [skip] = world.rows(skips)
    assert (skip.job_id, skip.reason, skip.from_at, skip.count) == (job.id, "misfire", to_us(SATURDAY), 1)


async def test_skip_records_a_calendar_range_and_only_drops_without_a_record(world) -> None:
    skipping = await world.create(weekly_job(job_pb2.CALENDAR_RULE_SKIP), SATURDAY)
    dropping = await world.create(weekly_job(job_pb2.CALENDAR_RULE_ONLY), SATURDAY)
    result = await world.dispatch.claim_due(OWNED, CLAIM_AT)
    assert result.executions == [] and result.jobs == 2 and result.skipped == 1
    [skip] = world.rows(skips)
    assert (skip.job_id, skip.reason, skip.from_at, skip.to_at, skip.count) == (
        skipping.id, "calendar", to_us(SATURDAY), to_us(SATURDAY), 1,
    )
    assert skip.continues_at == to_us(SATURDAY + timedelta(days=7) - timedelta(hours=1))  # 09:00 BST
    assert dropping.id not in {row.job_id for row in world.rows(skips)}


async def test_another_tenants_calendar_is_invisible_to_the_claim(world) -> None:
    theirs = await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY, tenant="globex")
    result = await world.dispatch.claim_due(OWNED, CLAIM_AT)
    assert result.executions == [] and result.jobs == 0
    [finding] = result.unreadable
    assert (finding.job_id, finding.kind) == (theirs.id, "schedule_uncomputable")
    assert "calendar 'uk' does not exist" in finding.reason
    assert world.rows(executions) == []


async def test_calendars_are_decoded_once_per_version(world) -> None:
    for _ in range(3):
        await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY)
    await world.dispatch.claim_due(OWNED, CLAIM_AT)
    assert world.dispatch.calendars.decoded == 1
    await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY + timedelta(days=7))
    await world.dispatch.claim_due(OWNED, SATURDAY + timedelta(days=7) - timedelta(seconds=30))
    assert world.dispatch.calendars.decoded == 1
    stored = await world.calendars.get("acme", "uk")
    changed = uk_calendar()
    changed.holidays.append("2027-04-05")
    await world.calendars.update("acme", "uk", stored.version, definition_of(normalise_calendar(changed)))
    await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY + timedelta(days=14))
    await world.dispatch.claim_due(OWNED, SATURDAY + timedelta(days=14) - timedelta(seconds=30))
    assert world.dispatch.calendars.decoded == 2


async def test_a_calendar_deleted_and_created_again_is_decoded_again(world) -> None:
    """Created again under its name, a calendar starts again at version 1
    with another definition: neither the claim's cache nor the API's
    (:meth:`CalendarStore.decoded`, GetJob's next runs) serves the deleted
    one's (before, the claim's cache, keyed on the version alone, did)."""
    key = ("acme", "uk")
    api = CalendarStore(world.engine, world.clock)  # decodes apart from ``world.calendars``, which writes
    with world.engine.connect() as conn:
        assert world.dispatch.calendars.load(conn, {key})[key].holidays
    await world.calendars.delete(*key)
    world.clock.advance(1.0)
    await world.calendars.create(*key, definition_of(normalise_calendar(calendar_pb2.Calendar(
        name="uk", time_zone="Europe/London"))), "cal-again")  # fmt: skip
    with world.engine.connect() as conn:
        assert not world.dispatch.calendars.load(conn, {key})[key].holidays, "the deleted calendar's holidays"
    assert not (await api.decoded(*key)).holidays
    await world.calendars.delete(*key)
    world.clock.advance(1.0)
    await world.calendars.create(*key, definition_of(uk_calendar()), "cal-third")
    assert (await api.decoded(*key)).holidays


async def test_delete_is_refused_while_the_tenants_jobs_name_the_calendar(world) -> None:
    await world.calendars.create("globex", "uk", definition_of(uk_calendar()), "cal-g")
    job = await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY)
    with pytest.raises(FailedPrecondition, match="1 job name it"):
        await world.calendars.delete("acme", "uk")
    # Another tenant's jobs never count: globex's calendar of the same name goes.
    await world.calendars.delete("globex", "uk")
    await world.jobs.delete("acme", job.id)
    await world.calendars.delete("acme", "uk")


async def test_an_update_moves_and_drops_the_created_runs_not_yet_handed_out(world) -> None:
    moved_job = await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY)
    taken_job = await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY)
    dropped_job = await world.create(weekly_job(job_pb2.CALENDAR_RULE_ONLY), SATURDAY)
    await world.dispatch.claim_due(OWNED, CLAIM_AT)
    with world.engine.begin() as conn:  # a worker took one of them already
        conn.execute(executions.update().where(executions.c.job_id == taken_job.id).values(status="running", delivery=1))
    stored = await world.calendars.get("acme", "uk")
    # Saturdays become business days, Easter Monday stays a holiday, Tuesday 30 becomes one.
    changed = uk_calendar()
    changed.business_days.extend([1, 2, 3, 4, 5, 6])
    changed.holidays.append("2027-03-30")
    record, report = await world.calendars.update_with_runs(
        "acme", "uk", stored.version, definition_of(normalise_calendar(changed))
    )
    assert record.version == stored.version + 1 and report.job_count == 3
    rows = {row.job_id: row for row in world.rows(executions)}
    # Saturday is a business day now: the moved run goes back to its nominal instant.
    assert (rows[moved_job.id].due_at, rows[moved_job.id].ready_at) == (to_us(SATURDAY), to_us(SATURDAY))
    assert rows[taken_job.id].due_at == to_us(TUESDAY), "a run a worker took is left alone"
    assert dropped_job.id not in rows, "ONLY dropped it at the claim: nothing to re-decide"
    [change] = report.first
    assert (change.execution_id, change.old_due_at_us, change.new_due_at_us) == (
        execution_id(moved_job.id, SATURDAY), to_us(TUESDAY), to_us(SATURDAY),
    )
    assert report.changed_count == 1
    # Saturdays closed again and Tuesday 30 and Wednesday 31 holidays: the run moves to Thursday 1 April,
    # still before the next nominal occurrence (Saturday 3 April).
    again = uk_calendar()
    again.holidays.extend(["2027-03-30", "2027-03-31"])
    _, report = await world.calendars.update_with_runs(
        "acme", "uk", record.version, definition_of(normalise_calendar(again))
    )
    assert report.changed_count == 1 and report.first[0].new_due_at_us == to_us(TUESDAY + timedelta(days=2))


async def test_an_update_cancels_a_created_run_its_rule_now_skips(world) -> None:
    job = await world.create(weekly_job(job_pb2.CALENDAR_RULE_SKIP), SATURDAY)
    stored = await world.calendars.get("acme", "uk")
    opened = uk_calendar()
    opened.business_days.extend([1, 2, 3, 4, 5, 6])
    record, _ = await world.calendars.update_with_runs("acme", "uk", stored.version, definition_of(normalise_calendar(opened)))
    await world.dispatch.claim_due(OWNED, CLAIM_AT)
    [row] = world.rows(executions)
    assert row.status == "scheduled" and row.due_at == to_us(SATURDAY)
    _, report = await world.calendars.update_with_runs("acme", "uk", record.version, definition_of(uk_calendar()))
    assert report.changed_count == 1 and report.first[0].new_due_at_us is None
    [row] = world.rows(executions)
    assert (row.id, row.status) == (execution_id(job.id, SATURDAY), "canceled")
    assert "calendar uk changed" in row.dead_reason


async def test_the_redecision_walks_the_jobs_page_by_page_and_reports_the_first(world, monkeypatch) -> None:
    from tickwheel_server.store import calendaruse

    monkeypatch.setattr(calendaruse, "PAGE", 1)
    monkeypatch.setattr(calendaruse, "MAX_REPORTED", 2)
    made = [await world.create(weekly_job(job_pb2.CALENDAR_RULE_NEXT), SATURDAY) for _ in range(3)]
    await world.dispatch.claim_due(OWNED, CLAIM_AT)
    stored = await world.calendars.get("acme", "uk")
    opened = uk_calendar()
    opened.business_days.extend([1, 2, 3, 4, 5, 6])
    _, report = await world.calendars.update_with_runs("acme", "uk", stored.version, definition_of(normalise_calendar(opened)))
    assert (report.job_count, report.changed_count, len(report.first)) == (3, 3, 2)
    assert [c.execution_id for c in report.first] == sorted(execution_id(j.id, SATURDAY) for j in made)[:2]
    assert {row.due_at for row in world.rows(executions)} == {to_us(SATURDAY)}


async def test_the_redecision_parses_the_definitions_of_previous_jobs_only(world, monkeypatch) -> None:
    """Only a ``previous`` job has a scan key of its own to write: the
    cursors' step parses no other job's definition (before, every job's:
    most of a calendar change's CPU a job)."""
    from tickwheel_server.store import calendarcursor

    parsed: list[str] = []
    parse = calendarcursor.JobDefinition.parse

    def counted(job_id, *args, **kwargs):
        parsed.append(job_id)
        return parse(job_id, *args, **kwargs)

    others = [await world.create(weekly_job(rule), SATURDAY)
              for rule in (job_pb2.CALENDAR_RULE_NEXT, job_pb2.CALENDAR_RULE_SKIP, job_pb2.CALENDAR_RULE_ONLY)]
    previous = await world.create(weekly_job(job_pb2.CALENDAR_RULE_PREVIOUS), SATURDAY)
    monkeypatch.setattr(calendarcursor.JobDefinition, "parse", staticmethod(counted))
    stored = await world.calendars.get("acme", "uk")
    opened = uk_calendar()
    opened.holidays.append("2027-04-05")
    _, report = await world.calendars.update_with_runs("acme", "uk", stored.version, definition_of(normalise_calendar(opened)))
    assert report.job_count == len(others) + 1
    assert parsed == [previous.id]
