"""A calendar change's walk, on SQLite and PostgreSQL: the definition commits
at once, the created runs are decided again a page of jobs per transaction,
a walk cut between pages (its server died) is finished by the reaper's duty
with every run decided once, a newer change supersedes a walk, and a run the
walk has not reached is neither handed out nor armed at the instant the old
definition gave it (store/calendarwalk.py, store/calendarhold.py)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import event
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import execution_id, to_us
from tickwheel_server.api.calendars import definition_of, normalise_calendar
from tickwheel_server.api.validate import normalise_job
from tickwheel_server.store import calendaruse, calendarwalk
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.calendars import CalendarStore
from tickwheel_server.store.calendarwalk import Walk
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import alerts, calendar_walks, executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_calendar_claims import CLAIM_AT, OWNED, SATURDAY, TUESDAY, World, uk_calendar, weekly_job
from .test_handout import ANY_ECHO

HOLD = 30.0


class ServerDied(Exception):
    """The walker's server stopped in the middle of a page's transaction."""


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    tenants = TenantStore(migrated_engine, clock)
    await tenants.create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    w = World(migrated_engine, clock)
    w.calendars = CalendarStore(migrated_engine, clock, alerts=AlertStore(migrated_engine, clock), walk_hold=HOLD)
    await w.calendars.create("acme", "uk", definition_of(uk_calendar()), "cal-1")
    return w


def opened() -> bytes:
    """``uk`` with Saturdays business days: a Saturday run is due at its nominal instant."""
    calendar = uk_calendar()
    calendar.business_days.extend([1, 2, 3, 4, 5, 6])
    return normalise_calendar(calendar)


async def change(world: World, calendar) -> tuple:
    stored = await world.calendars.get("acme", "uk")
    return await world.calendars.update_with_runs("acme", "uk", stored.version, definition_of(calendar))


def cut_after(monkeypatch, pages: int) -> None:
    """The walker's server dies in the page after ``pages`` pages, once
    that page's work is done but before it commits (rolled back)."""
    walked = [0]
    page = calendarwalk.redecide_page

    def dying(*args, **kwargs):
        done = page(*args, **kwargs)
        walked[0] += 1
        if walked[0] > pages:
            monkeypatch.setattr(calendarwalk, "redecide_page", page)  # a restarted server walks on
            raise ServerDied
        return done

    monkeypatch.setattr(calendarwalk, "redecide_page", dying)


def changed_alerts(world: World) -> dict[str, int]:
    return {row.dedup_key: int(json.loads(row.details)["changed"]) for row in world.rows(alerts)
            if row.kind == "calendar_runs_changed"}  # fmt: skip


async def weekly_runs(world: World, count: int, rule: int = job_pb2.CALENDAR_RULE_NEXT) -> list[str]:
    """``count`` weekly jobs, each with its Saturday run created (moved to
    Tuesday); the runs' ids, in job order. Overlap ``allow``: armed ahead."""
    job = weekly_job(rule)
    job.overlap_policy = job_pb2.OVERLAP_POLICY_ALLOW
    made = [await world.create(job, SATURDAY) for _ in range(count)]
    await world.dispatch.claim_due(OWNED, CLAIM_AT)
    return [execution_id(job.id, SATURDAY) for job in sorted(made, key=lambda job: job.id)]


async def test_a_walk_cut_between_pages_is_finished_by_the_duty_each_run_decided_once(
    world, monkeypatch
) -> None:
    monkeypatch.setattr(calendaruse, "PAGE", 2)
    runs = await weekly_runs(world, 5)
    cut_after(monkeypatch, 1)
    with pytest.raises(ServerDied):
        await change(world, opened())
    record = await world.calendars.get("acme", "uk")
    assert record.version == 2, "the definition committed before the walk"
    due = {row.id: row.due_at for row in world.rows(executions)}
    assert [due[r] for r in runs] == [to_us(SATURDAY)] * 2 + [to_us(TUESDAY)] * 3, "the first page only"
    [walk] = world.rows(calendar_walks)
    assert (walk.version, walk.changed_count) == (2, 2)
    # The walker is presumed alive for its hold: the duty leaves its walk alone.
    assert await world.calendars.resume_walks() == 0
    world.clock.advance(HOLD + 1)
    assert await world.calendars.resume_walks() == 1
    assert world.rows(calendar_walks) == []
    assert {row.due_at for row in world.rows(executions)} == {to_us(SATURDAY)}
    assert changed_alerts(world) == {"calendar_runs_changed:acme/uk@2": 5}, "one alert, every run counted once"


async def test_no_page_transaction_writes_more_than_its_page(world, migrated_engine, monkeypatch) -> None:
    monkeypatch.setattr(calendaruse, "PAGE", 2)
    await weekly_runs(world, 5)
    written: list[int] = [0]
    per_transaction: list[int] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("UPDATE EXECUTIONS") and cursor.rowcount > 0:
            written[0] += cursor.rowcount

    def ended(conn) -> None:
        per_transaction.append(written[0])
        written[0] = 0

    event.listen(migrated_engine, "after_cursor_execute", count)
    event.listen(migrated_engine, "commit", ended)
    try:
        _, report = await change(world, opened())
    finally:
        event.remove(migrated_engine, "after_cursor_execute", count)
        event.remove(migrated_engine, "commit", ended)
    assert (report.changed_count, report.finished) == (5, True)
    assert sum(per_transaction) == 5 and max(per_transaction) <= 2, per_transaction
    assert world.calendars.pages == 4  # three pages of jobs, one finding none


async def test_a_newer_change_supersedes_a_walk_in_progress(world, monkeypatch) -> None:
    monkeypatch.setattr(calendaruse, "PAGE", 1)
    runs = await weekly_runs(world, 3)
    cut_after(monkeypatch, 1)
    with pytest.raises(ServerDied):
        await change(world, opened())  # version 2: the first job's run moved to Saturday
    [walk] = world.rows(calendar_walks)
    left = Walk("acme", "uk", walk.version, walk.after_job)
    again = uk_calendar()
    again.holidays.extend(["2027-03-30", "2027-03-31"])  # version 3: every run to Thursday 1 April
    record, report = await change(world, normalise_calendar(again))
    assert (record.version, report.finished, report.job_count, report.changed_count) == (3, True, 3, 3)
    thursday = to_us(TUESDAY + timedelta(days=2))
    assert {row.id: row.due_at for row in world.rows(executions)} == {r: thursday for r in runs}
    # The walker of version 2, alive after all, finds its walk gone and writes nothing.
    stale = await world.calendars.walk(left)
    assert (stale.finished, stale.changed_count) == (False, 0)
    assert {row.due_at for row in world.rows(executions)} == {thursday}
    assert world.rows(calendar_walks) == []
    assert changed_alerts(world) == {"calendar_runs_changed:acme/uk@2": 1, "calendar_runs_changed:acme/uk@3": 3}


async def test_two_walkers_of_one_walk_decide_each_page_once(world, monkeypatch) -> None:
    monkeypatch.setattr(calendaruse, "PAGE", 1)
    await weekly_runs(world, 3)
    cut_after(monkeypatch, 0)
    with pytest.raises(ServerDied):
        await change(world, opened())
    [walk] = world.rows(calendar_walks)
    first = Walk("acme", "uk", walk.version, walk.after_job)
    world.clock.advance(HOLD + 1)
    assert await world.calendars.resume_walks() == 1  # the duty walks it to its end
    late = await world.calendars.walk(first)  # the first walker wakes up
    assert (late.finished, late.changed_count) == (False, 0)
    assert changed_alerts(world) == {"calendar_runs_changed:acme/uk@2": 3}


async def test_a_run_the_walk_has_not_reached_is_never_handed_out_or_armed_at_its_old_instant(
    world, migrated_engine, monkeypatch
) -> None:
    """Saturday opened, each job's Saturday run is due at 09:00; the change
    closes Saturday again under rule ``skip``, so the runs are dropped. The
    walk dies after its first page: the second job's run, not decided
    again, is due (by the old definition) but never handed out nor armed;
    the duty's walk then cancels it."""
    monkeypatch.setattr(calendaruse, "PAGE", 1)
    await change(world, opened())
    runs = await weekly_runs(world, 2, rule=job_pb2.CALENDAR_RULE_SKIP)
    assert {row.due_at for row in world.rows(executions)} == {to_us(SATURDAY)}
    queue = ExecutionQueue(migrated_engine, world.clock)
    world.clock.advance((SATURDAY - timedelta(seconds=3) - world.clock.now()).total_seconds())

    async def arm() -> list:
        return await queue.arming.arm("s1", world.clock.now(), world.clock.now() + timedelta(seconds=5), ANY_ECHO, 10)

    assert sorted(a.handed.id for a in await arm()) == runs, "armed before the change"
    cut_after(monkeypatch, 1)
    with pytest.raises(ServerDied):
        await change(world, uk_calendar())
    status = {row.id: (row.status, row.delivery) for row in world.rows(executions)}
    assert status == {runs[0]: ("canceled", 0), runs[1]: ("scheduled", 0)}, "the change disarmed both"
    world.clock.advance(1)
    assert await arm() == []
    world.clock.advance(3)  # past the old instant
    assert await queue.handout.hand_out_ready("s1", world.clock.now(), ANY_ECHO, 10) == []
    [held] = [row for row in world.rows(executions) if row.id == runs[1]]
    assert (held.status, held.delivery, held.owner) == ("scheduled", 0, None)
    world.clock.advance(HOLD)
    assert await world.calendars.resume_walks() == 1
    assert {row.status for row in world.rows(executions)} == {"canceled"}
    assert await queue.handout.hand_out_ready("s1", world.clock.now(), ANY_ECHO, 10) == []


async def test_the_hand_out_reads_walks_once_a_round_and_only_for_jobs_naming_a_calendar(
    world, migrated_engine
) -> None:
    """The hold's cost on the hot path: a round none of whose candidates'
    jobs names a calendar sends no statement for it; a round with several
    such candidates, one read of the walks (never one a row)."""
    from tests.support.plans import captured

    from .test_arming import every_minute

    plain = every_minute()
    plain.overlap_policy = job_pb2.OVERLAP_POLICY_ALLOW
    for _ in range(3):
        await world.create(normalise_job(plain, SATURDAY - timedelta(days=3)), SATURDAY)
    await weekly_runs(world, 3)
    queue = ExecutionQueue(migrated_engine, world.clock)
    world.clock.advance((SATURDAY + timedelta(seconds=1) - world.clock.now()).total_seconds())
    with captured(migrated_engine) as sent:
        first = await queue.handout.hand_out_ready("s1", world.clock.now(), ANY_ECHO, 3)
    assert {h.job_id for h in first} and not [s for s in sent if "calendar_walks" in s.statement]
    world.clock.advance((TUESDAY + timedelta(seconds=1) - world.clock.now()).total_seconds())
    with captured(migrated_engine) as sent:
        handed = await queue.handout.hand_out_ready("s1", world.clock.now(), ANY_ECHO, 10)
    assert len([h for h in handed if h.nominal_at_us == to_us(SATURDAY)]) == 3
    assert len([s for s in sent if "calendar_walks" in s.statement]) == 1


async def test_another_tenants_walk_of_a_calendar_of_the_same_name_holds_nothing(world, migrated_engine) -> None:
    """Tenant ``beta`` has a calendar named ``uk`` too, its change still being
    walked: ``acme``'s runs of jobs naming its own ``uk`` are handed
    out at their instant as if no walk were in progress (the hold's statement
    is scoped by tenant and calendar)."""
    await change(world, opened())
    runs = await weekly_runs(world, 2, rule=job_pb2.CALENDAR_RULE_SKIP)
    await TenantStore(migrated_engine, world.clock).create(Tenant(name="beta"))
    await world.calendars.create("beta", "uk", definition_of(uk_calendar()), "cal-b")
    with migrated_engine.begin() as conn:
        conn.execute(calendar_walks.insert().values(
            tenant="beta", calendar="uk", version=1, after_job="", job_count=0, changed_count=0, reported="[]",
            started_at=0, held_until=to_us(world.clock.now()) + 3_600_000_000))  # fmt: skip
    queue = ExecutionQueue(migrated_engine, world.clock)
    world.clock.advance((SATURDAY - timedelta(seconds=3) - world.clock.now()).total_seconds())
    world.clock.advance(4)  # past the instant, never armed: the hand-out's path, with its hold
    handed = await queue.handout.hand_out_ready("s1", world.clock.now(), ANY_ECHO, 10)
    assert sorted(h.id for h in handed) == runs, "another tenant's walk held acme's runs"
    assert {row.tenant for row in world.rows(calendar_walks)} == {"beta"}
