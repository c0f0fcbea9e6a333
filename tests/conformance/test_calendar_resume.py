"""A resume judges a calendar job's paused occurrence by the instant its
calendar moved it to, as the claim does, on SQLite and PostgreSQL.

The instant a user sees (GetJob's next runs, the execution's ``due_at``) is
the moved one, and the claim's misfire test uses it (``plan_claim``'s
``due_of``); a held execution's resume uses it too (its row's ``due_at``).
Before, an occurrence the dispatcher never claimed was judged at the resume
by its nominal instant: a ``next`` run moved from a holiday Monday to
Tuesday was skipped by a resume on Monday, a day before it was due; a
``previous`` run moved from Monday to the Friday before was, resumed just
after Friday's instant, skipped as ``calendar`` when the claim reached it
(never run, though within the threshold), and resumed later left to the
claim to skip as ``calendar``, not the ``job_paused`` range the span is.

London 2027: Easter Monday 29 March (09:00 BST, 08:00 UTC) is the holiday;
``next`` moves it to Tuesday 30 March 09:00, ``previous`` to Friday 26 March
09:00 GMT. Each job: weekly on Mondays at 09:00, misfire threshold 60 s,
policy ``skip``, paused on Thursday 25 March before either instant.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import execution_id, to_us
from tickwheel_server.api.scheduler import resume_span
from tickwheel_server.store.tables import skips

from tests.conformance.test_calendar_previous import (  # noqa: F401  (world: the fixture)
    FRIDAY, MONDAY, NEXT_MONDAY, OWNED, UTC, WEEKLY, World, job_of, world,
)

TUESDAY = MONDAY + timedelta(days=1)
THURSDAY = datetime(2027, 3, 25, 12, 0, tzinfo=UTC)
THRESHOLD = timedelta(seconds=60)
NEXT = job_pb2.CALENDAR_RULE_NEXT
PREVIOUS = job_pb2.CALENDAR_RULE_PREVIOUS


async def paused_job(world: World, rule: int):
    job = job_of(WEEKLY, rule)
    job.misfire_policy = job_pb2.MISFIRE_POLICY_SKIP
    job.misfire_threshold.FromTimedelta(THRESHOLD)
    record = await world.create(job, MONDAY)
    world.clock.set(THURSDAY)
    paused, held = await world.jobs.pause("acme", record.id)
    assert held == 0  # never claimed: nothing held, the resume's span decides it
    return paused


async def resumed_at(world: World, job_id: str, now: datetime, *, batch: bool = False):
    """Resume at ``now`` as ResumeJob (the calendar read by the API) or
    BatchResumeJobs (read in the store's transaction) does."""
    world.clock.set(now)
    record = await world.jobs.get("acme", job_id)
    if batch:
        [outcome] = await world.jobs.resume_many(
            "acme", [(job_id, lambda locked, cal: resume_span(locked, now, None, cal))], now=now,
            tzdata_version="2026a",
        )
        return outcome
    cal = await world.calendars.decoded("acme", "easter")
    span = resume_span(record, now, None, cal)
    return await world.jobs.resume(
        "acme", job_id, expected_version=record.version, span=span, tzdata_version="2026a", now=now
    )


def paused_skips(world: World) -> list[tuple[str, int, int, int]]:
    return [(row.reason, row.from_at, row.to_at, row.count) for row in world.rows(skips)]


@pytest.mark.parametrize("batch", [False, True])
async def test_next_resumed_after_the_nominal_instant_runs_at_the_moved_one(world, batch) -> None:
    job = await paused_job(world, NEXT)
    # An hour after Monday's nominal instant (past the threshold), a day before Tuesday's.
    resumed, skip, _ = await resumed_at(world, job.id, MONDAY + timedelta(hours=1), batch=batch)
    assert skip is None and resumed.next_run_at == MONDAY
    result = await world.dispatch.claim_due(OWNED, MONDAY + timedelta(hours=1))
    assert [(e.id, e.due_at_us) for e in result.executions] == [(execution_id(job.id, MONDAY), to_us(TUESDAY))]
    assert paused_skips(world) == []


async def test_next_resumed_past_the_moved_instant_is_one_paused_skip(world) -> None:
    job = await paused_job(world, NEXT)
    resumed, skip, _ = await resumed_at(world, job.id, TUESDAY + timedelta(minutes=5))
    assert (skip.reason, skip.from_at, skip.to_at, skip.count) == ("job_paused", MONDAY, MONDAY, 1)
    assert resumed.next_run_at == NEXT_MONDAY
    assert (await world.dispatch.claim_due(OWNED, TUESDAY + timedelta(minutes=5))).executions == []
    assert paused_skips(world) == [("job_paused", to_us(MONDAY), to_us(MONDAY), 1)]


@pytest.mark.parametrize("batch", [False, True])
async def test_previous_resumed_within_the_threshold_of_the_moved_instant_runs_late_once(world, batch) -> None:
    job = await paused_job(world, PREVIOUS)
    now = FRIDAY + timedelta(seconds=30)  # Monday's nominal instant is three days ahead
    resumed, skip, _ = await resumed_at(world, job.id, now, batch=batch)
    assert skip is None and resumed.next_run_at == MONDAY
    assert world.cursor(job.id) == (to_us(FRIDAY), to_us(MONDAY))  # scanned at Friday's instant, though past
    result = await world.dispatch.claim_due(OWNED, now)
    assert [(e.id, e.due_at_us) for e in result.executions] == [(execution_id(job.id, MONDAY), to_us(FRIDAY))]
    # Nothing more for that Monday: the next claims reach next week's.
    assert (await world.dispatch.claim_due(OWNED, MONDAY)).executions == []
    assert paused_skips(world) == []


@pytest.mark.parametrize("now", [FRIDAY + timedelta(minutes=5), MONDAY + timedelta(seconds=30)])
async def test_previous_resumed_past_the_threshold_of_the_moved_instant_is_one_paused_skip(world, now) -> None:
    """Five minutes after Friday's run (Monday still ahead), or within the
    threshold of Monday's nominal instant but three days after the run."""
    job = await paused_job(world, PREVIOUS)
    resumed, skip, _ = await resumed_at(world, job.id, now)
    assert (skip.reason, skip.from_at, skip.to_at, skip.count) == ("job_paused", MONDAY, MONDAY, 1)
    assert resumed.next_run_at == NEXT_MONDAY and resumed.run_count == job.run_count + 1
    assert (await world.dispatch.claim_due(OWNED, MONDAY)).executions == []
    assert paused_skips(world) == [("job_paused", to_us(MONDAY), to_us(MONDAY), 1)]  # no calendar skip besides


async def test_a_job_whose_calendar_is_gone_resumes_by_its_nominal_instants(world) -> None:
    job = await paused_job(world, NEXT)
    record = await world.jobs.get("acme", job.id)
    span = resume_span(record, MONDAY + timedelta(hours=1), None, None)
    assert span.skipped is not None and (span.skipped.from_at, span.skipped.count) == (MONDAY, 1)
