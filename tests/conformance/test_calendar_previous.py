"""The ``previous`` calendar rule in the store, on SQLite and PostgreSQL: a
weekly Monday job whose Monday is a holiday is scanned, claimed and due on
the Friday before with its id at the Monday nominal instant (``next_run_at``
the scan key, ``next_nominal_at`` the nominal cursor), the week after runs
normally, a calendar edit moves the scan key, every cursor writer keeps the
two columns straight, and another tenant's calendar is never read.

London 2027: the clocks go forward on Sunday 28 March; Easter Monday 29
March is the holiday of calendar ``easter``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from tickwheel.v1 import calendar_pb2, job_pb2

from tickwheel.shared.ids import execution_id, to_us
from tests.conformance.test_calendar_claims import World as ClaimWorld
from tickwheel_server.policy.jobchanges import PausedSpan
from tickwheel_server.api.calendars import definition_of, normalise_calendar
from tickwheel_server.api.validate import normalise_job
from tickwheel_server.schedule import Fire
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import executions, job_cursors, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

UTC = timezone.utc
PARTITIONS = 4
OWNED = {p: 1 for p in range(PARTITIONS)}
MONDAY = datetime(2027, 3, 29, 8, 0, tzinfo=UTC)  # Easter Monday 09:00 BST
FRIDAY = datetime(2027, 3, 26, 9, 0, tzinfo=UTC)  # Friday 26 March 09:00 GMT: the same wall time
NEXT_MONDAY = MONDAY + timedelta(days=7)  # 5 April 09:00 BST, a business day
NEXT_FRIDAY = NEXT_MONDAY - timedelta(days=3)  # 2 April 09:00 BST
LOOK = timedelta(seconds=30)


def easter(*more: str) -> calendar_pb2.Calendar:
    return normalise_calendar(calendar_pb2.Calendar(
        name="easter", time_zone="Europe/London", holidays=["2027-03-29", *more]
    ))  # fmt: skip


def job_of(expression: str, rule: int = job_pb2.CALENDAR_RULE_PREVIOUS, calendar: str = "easter") -> job_pb2.Job:
    """At ``expression`` in London, exact (no jitter)."""
    job = job_pb2.Job(
        name="j",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone="Europe/London")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        calendar=job_pb2.JobCalendar(name=calendar, rule=rule),
    )
    job.jitter.exact = True
    return normalise_job(job, FRIDAY - timedelta(days=10))


WEEKLY = "0 9 * * MON"


class World(ClaimWorld):
    """The calendar claims' world, reading a cursor's two instants too."""

    def cursor(self, job_id: str) -> tuple[int | None, int | None]:
        """(``next_run_at``, ``next_nominal_at``) as stored."""
        with self.engine.connect() as conn:
            cursors = job_cursors.c
            row = conn.execute(
                sa.select(cursors.next_run_at, cursors.next_nominal_at).where(cursors.job_id == job_id)
            ).one()
        return row.next_run_at, row.next_nominal_at

    def rows(self, table) -> list[sa.Row]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(table)))

    async def edit(self, calendar: calendar_pb2.Calendar, name: str = "easter"):
        stored = await self.calendars.get("acme", name)
        return await self.calendars.update_with_runs("acme", name, stored.version, definition_of(calendar))


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    tenants = TenantStore(migrated_engine, clock)
    await tenants.create(Tenant(name="acme"))
    await tenants.create(Tenant(name="globex"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    clock.set(datetime(2027, 3, 20, tzinfo=UTC))
    w = World(migrated_engine, clock)
    await w.calendars.create("acme", "easter", definition_of(easter()), "cal-1")
    return w


async def test_a_holiday_monday_runs_on_the_friday_before_with_its_monday_id(world) -> None:
    job = await world.create(job_of(WEEKLY), MONDAY)
    # Scanned at Friday 09:00, the nominal Monday kept beside it; the job reads as its nominal cursor.
    assert world.cursor(job.id) == (to_us(FRIDAY), to_us(MONDAY))
    assert (await world.jobs.get("acme", job.id)).next_run_at == MONDAY
    assert (await world.dispatch.claim_due(OWNED, FRIDAY - timedelta(hours=1))).executions == []
    result = await world.dispatch.claim_due(OWNED, FRIDAY - LOOK)
    ident = execution_id(job.id, MONDAY)
    assert [(e.id, e.due_at_us) for e in result.executions] == [(ident, to_us(FRIDAY))]
    [row] = world.rows(executions)
    assert (row.nominal_at, row.due_at, row.ready_at) == (to_us(MONDAY), to_us(FRIDAY), to_us(FRIDAY))
    # The cursor moves on to next Monday, a business day: its nominal instant is the scan key again.
    assert world.cursor(job.id) == (to_us(NEXT_MONDAY), None)
    assert (await world.dispatch.claim_due(OWNED, MONDAY - LOOK)).executions == []
    result = await world.dispatch.claim_due(OWNED, NEXT_MONDAY - LOOK)
    assert [(e.id, e.due_at_us) for e in result.executions] == [
        (execution_id(job.id, NEXT_MONDAY), to_us(NEXT_MONDAY))
    ]
    assert world.rows(skips) == []


async def test_the_claim_that_advances_the_cursor_writes_the_next_moved_instant(world) -> None:
    # Created at the business Monday before: the claim of 22 March advances the cursor to Easter Monday.
    job = await world.create(job_of(WEEKLY), MONDAY - timedelta(days=7) + timedelta(hours=1))
    await world.dispatch.claim_due(OWNED, MONDAY - timedelta(days=7) + timedelta(hours=1) - LOOK)
    assert world.cursor(job.id) == (to_us(FRIDAY), to_us(MONDAY))


async def test_a_late_claim_judges_the_moved_run_by_its_moved_instant(world) -> None:
    job_message = job_of(WEEKLY)
    job_message.misfire_policy = job_pb2.MISFIRE_POLICY_SKIP
    job_message.misfire_threshold.FromSeconds(60)
    job = await world.create(job_message, MONDAY)
    # An outage: the claim comes on Saturday, past Friday's instant and the threshold: missed.
    result = await world.dispatch.claim_due(OWNED, FRIDAY + timedelta(days=1))
    assert result.executions == []
    [skip] = world.rows(skips)
    assert (skip.job_id, skip.reason, skip.from_at, skip.count) == (job.id, "misfire", to_us(MONDAY), 1)


async def test_a_daily_job_collides_with_its_own_runs_and_is_skipped_and_recorded(world) -> None:
    job = await world.create(job_of("0 9 * * *"), MONDAY)
    assert world.cursor(job.id) == (to_us(MONDAY), None)
    result = await world.dispatch.claim_due(OWNED, MONDAY - LOOK)
    assert result.executions == [] and result.skipped == 1
    [skip] = world.rows(skips)
    assert (skip.job_id, skip.reason, skip.from_at, skip.count) == (job.id, "calendar", to_us(MONDAY), 1)


async def test_a_calendar_edit_moves_the_scan_key_and_a_late_one_skips(world) -> None:
    job = await world.create(job_of(WEEKLY), NEXT_MONDAY)
    assert world.cursor(job.id) == (to_us(NEXT_MONDAY), None)
    # 5 April becomes a holiday before Friday 2 April: scanned then, due then.
    record, _ = await world.edit(easter("2027-04-05"))
    assert world.cursor(job.id) == (to_us(NEXT_FRIDAY), to_us(NEXT_MONDAY))
    # And a business day again: back to its nominal instant.
    await world.edit(easter())
    assert world.cursor(job.id) == (to_us(NEXT_MONDAY), None)
    await world.edit(easter("2027-04-05"))
    result = await world.dispatch.claim_due(OWNED, NEXT_FRIDAY - LOOK)
    assert [(e.id, e.due_at_us) for e in result.executions] == [
        (execution_id(job.id, NEXT_MONDAY), to_us(NEXT_FRIDAY))
    ]


async def test_a_holiday_added_after_its_previous_business_day_skips_the_run(world) -> None:
    job = await world.create(job_of(WEEKLY), NEXT_MONDAY)
    world.clock.set(NEXT_FRIDAY + timedelta(hours=2))  # Friday 2 April has passed: never moved into the past
    await world.edit(easter("2027-04-05"))
    assert world.cursor(job.id) == (to_us(NEXT_MONDAY), None)
    result = await world.dispatch.claim_due(OWNED, NEXT_MONDAY - LOOK)
    assert result.executions == []
    [skip] = world.rows(skips)
    assert (skip.job_id, skip.reason, skip.from_at) == (job.id, "calendar", to_us(NEXT_MONDAY))


async def test_an_edit_redecides_a_created_previous_run_never_into_the_past(world) -> None:
    job = await world.create(job_of(WEEKLY), MONDAY)
    world.clock.set(FRIDAY - LOOK)
    await world.dispatch.claim_due(OWNED, FRIDAY - LOOK)
    # Friday becomes a holiday too while the run waits: Thursday has passed, so the run is canceled.
    _, report = await world.edit(easter("2027-03-26"))
    assert report.changed_count == 1 and report.first[0].new_due_at_us is None
    [row] = world.rows(executions)
    assert (row.id, row.status) == (execution_id(job.id, MONDAY), "canceled")


async def test_updates_and_rule_changes_keep_the_two_columns_straight(world) -> None:
    job = await world.create(job_of(WEEKLY), MONDAY)
    assert world.cursor(job.id) == (to_us(FRIDAY), to_us(MONDAY))
    to_next = job_of(WEEKLY, job_pb2.CALENDAR_RULE_NEXT)
    updated, _ = await world.jobs.update(
        "acme", job.id, job.version, name="j", spec=to_next.SerializeToString(), time_zone="Europe/London",
        tzdata_version="2026a", payload_size=0, reschedule=None,
    )
    assert world.cursor(job.id) == (to_us(MONDAY), None) and updated.next_run_at == MONDAY
    back = job_of(WEEKLY)
    updated, _ = await world.jobs.update(
        "acme", job.id, updated.version, name="j", spec=back.SerializeToString(), time_zone="Europe/London",
        tzdata_version="2026a", payload_size=0, reschedule=None,
    )
    assert world.cursor(job.id) == (to_us(FRIDAY), to_us(MONDAY)) and updated.next_run_at == MONDAY
    # Listing reads the nominal cursor too.
    [listed] = await world.jobs.list("acme")
    assert listed.next_run_at == MONDAY


async def test_another_tenants_calendar_of_that_name_is_never_read(world) -> None:
    await world.calendars.create("globex", "theirs", definition_of(normalise_calendar(calendar_pb2.Calendar(
        name="theirs", time_zone="Europe/London", holidays=["2027-03-29"]
    ))), "cal-g")  # fmt: skip
    job = await world.create(job_of(WEEKLY, calendar="theirs"), MONDAY)
    assert world.cursor(job.id) == (to_us(MONDAY), None), "acme has no calendar 'theirs': nothing moves"
    result = await world.dispatch.claim_due(OWNED, MONDAY - LOOK)
    assert result.executions == []
    [finding] = result.unreadable
    assert finding.job_id == job.id and finding.kind == "schedule_uncomputable"


async def test_a_forged_nominal_column_is_unreadable_not_run(world) -> None:
    job = await world.create(job_of(WEEKLY), MONDAY)
    with world.engine.begin() as conn:  # the nominal instant kept beside a scan key after it
        conn.execute(
            job_cursors.update().where(job_cursors.c.job_id == job.id).values(next_nominal_at=to_us(FRIDAY - LOOK))
        )
    result = await world.dispatch.claim_due(OWNED, FRIDAY - LOOK)
    assert result.executions == []
    [finding] = result.unreadable
    assert finding.job_id == job.id and finding.kind == "job_unreadable"


async def test_a_resume_writes_the_scan_key_of_its_new_cursor(world) -> None:
    job = await world.create(job_of(WEEKLY), MONDAY - timedelta(days=7))
    paused, _ = await world.jobs.pause("acme", job.id)
    resumed, _, _ = await world.jobs.resume(
        "acme", job.id, expected_version=paused.version, span=PausedSpan(Fire(MONDAY, MONDAY, 0), None),
        tzdata_version="2026a",
    )
    assert resumed.next_run_at == MONDAY and world.cursor(job.id) == (to_us(FRIDAY), to_us(MONDAY))


async def test_a_paused_tenants_moved_run_is_skipped_when_reached_not_rescanned(world, clock) -> None:
    job = await world.create(job_of(WEEKLY), MONDAY)
    await TenantStore(world.engine, clock).pause("acme")
    result = await world.dispatch.claim_due(OWNED, FRIDAY - LOOK)
    assert result.executions == [] and result.skipped == 1
    [skip] = world.rows(skips)
    assert (skip.job_id, skip.reason, skip.from_at) == (job.id, "tenant_paused", to_us(MONDAY))
    # The cursor moved on: the row is not scanned again every tick.
    assert world.cursor(job.id) == (to_us(NEXT_MONDAY), None)


async def test_a_late_moved_run_counts_the_misses_an_earlier_claim_recorded(world) -> None:
    job = await world.create(job_of(WEEKLY), MONDAY)
    # An earlier claim left a misfire range of 5 continuing at the cursor's nominal instant.
    with world.engine.begin() as conn:
        conn.execute(skips.insert().values(
            id=f"{job.id}:skip:1", job_id=job.id, tenant="acme", from_at=to_us(MONDAY - timedelta(days=35)),
            to_at=to_us(MONDAY - timedelta(days=7)), continues_at=to_us(MONDAY), count=5, reason="misfire",
            created_at=to_us(MONDAY - timedelta(days=7)),
        ))  # fmt: skip
    # Claimed on Saturday: past the moved instant (missed, run_once), before the nominal one.
    result = await world.dispatch.claim_due(OWNED, FRIDAY + timedelta(days=1))
    [row] = world.rows(executions)
    assert (row.id, row.missed_count) == (execution_id(job.id, MONDAY), 6)
    assert [e.id for e in result.executions] == [row.id]
