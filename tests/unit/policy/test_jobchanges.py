"""The rules of what a job change does to its executions not started
(``tickwheel_server.policy.jobchanges``), as tables anchored at fixed instants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
from tickwheel.v1 import job_pb2

from tickwheel_server.policy.jobchanges import (
    CursorView, PausedSpan, Pending, RowRefresh, SkippedSpan, expired_at_resume, next_cursor, paused_span,
    plan_recreation, plan_update, replan, resume_plan, row_refresh,
)
from tickwheel_server.schedule import Fire, Schedule

DAY0 = datetime(2027, 3, 1, tzinfo=timezone.utc)
TWO_AM = DAY0.replace(hour=2)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
THRESHOLD = timedelta(seconds=60)


# --- resume: which held executions a resume releases ---------------------------------------------


@pytest.mark.parametrize(
    "case, origin, attempt, delivery, resumed_at, expired",
    [
        ("resumed before the due instant", "scheduled", 1, 0, TWO_AM - 20 * SECOND, False),
        ("resumed at the due instant", "scheduled", 1, 0, TWO_AM, False),
        ("late, within the threshold", "scheduled", 1, 0, TWO_AM + 59 * SECOND, False),
        ("exactly at the threshold", "scheduled", 1, 0, TWO_AM + THRESHOLD, False),
        ("past the threshold", "scheduled", 1, 0, TWO_AM + THRESHOLD + SECOND, True),
        ("three days later", "scheduled", 1, 0, TWO_AM + timedelta(days=3), True),
        ("a retry waiting, however late", "scheduled", 2, 1, TWO_AM + timedelta(days=3), False),
        ("a re-delivery (its worker died)", "scheduled", 1, 1, TWO_AM + timedelta(days=3), False),
        ("a trigger, however late", "trigger", 1, 0, TWO_AM + timedelta(days=3), False),
        ("a backfill, however late", "backfill", 1, 0, TWO_AM + timedelta(days=3), False),
    ],
)
def test_a_resume_releases_every_held_execution_but_missed_occurrences(
    case, origin, attempt, delivery, resumed_at, expired
) -> None:
    got = expired_at_resume(
        origin=origin, attempt=attempt, delivery=delivery, due_at=TWO_AM, now=resumed_at, threshold=THRESHOLD
    )
    assert got is expired, case


# --- update: what the rows carry ----------------------------------------------------------------


def _job(**fields) -> job_pb2.Job:
    job = job_pb2.Job(
        name="nightly", payload=b"v1", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 2 * * *", time_zone="UTC")),
    )
    for name, value in fields.items():
        if isinstance(value, job_pb2.Target):
            job.target.CopyFrom(value)
        else:
            setattr(job, name, value)
    return job


@pytest.mark.parametrize(
    "case, changed, payload, handler_changed, handler",
    [
        ("a name", _job(name="renamed"), None, False, "echo"),
        ("a misfire limit, read when claiming", _job(misfire_run_all_limit=7), None, False, "echo"),
        ("an overlap policy, read at hand-out", _job(overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW), None, False, "echo"),
        ("the payload", _job(payload=b"v2"), b"v2", False, "echo"),
        ("an emptied payload", _job(payload=b""), b"", False, "echo"),
        ("the handler", _job(target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="mail"))), None, True, "mail"),
        ("handler to HTTP", _job(target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://x.test/"))), None, True,
         None),
    ],
)
def test_an_update_refreshes_the_rows_only_for_what_they_carry(
    case, changed, payload, handler_changed, handler
) -> None:
    got = row_refresh(_job(), changed)
    assert (got.payload, got.handler_changed, got.handler) == (payload, handler_changed, handler), case


def test_what_the_hand_out_reads_from_the_job_moves_no_row() -> None:
    """The URL, method and headers of an HTTP target, the timeout, the retry
    policy and labels are read from the job when used: no row changes."""
    one = _job(target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://a.test/")))
    other = _job(target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://b.test/", method="PUT")))
    other.timeout.FromSeconds(5)
    other.retry_policy.max_attempts = 9
    other.labels["team"] = "ops"
    assert row_refresh(one, other) == row_refresh(one, one) == RowRefresh(None, False, None)


# --- update: re-planning the pending occurrences --------------------------------------------------


def cron(expression: str, **fields) -> Schedule:
    return Schedule.cron(expression, "UTC", exact=True, job_id="job_x", **fields)


def pending(*instants: datetime) -> tuple[Pending, ...]:
    return tuple(Pending(at, at) for at in instants)


def fire(at: datetime, jitter: timedelta = timedelta(0)) -> Fire:
    return Fire(at, at + jitter, 0)


def test_replan_keeps_an_instant_the_new_schedule_has_and_cancels_one_it_lacks() -> None:
    """Every minute → every other minute, 00:01 and 00:02 claimed ahead at 00:00:30."""
    now = DAY0 + 30 * SECOND
    view = CursorView("active", DAY0 + 3 * MINUTE, 5, DAY0, pending(DAY0 + MINUTE, DAY0 + 2 * MINUTE))
    got = replan(cron("*/2 * * * *"), now, None, view)
    assert list(got.kept) == [DAY0 + 2 * MINUTE] and got.canceled == [DAY0 + MINUTE] and got.created == []
    assert (got.next_fire.nominal_at, got.runs) == (DAY0 + 4 * MINUTE, 6)


def test_replan_creates_the_new_schedules_instants_between_the_pending_ones() -> None:
    """A 5-minute look-ahead claimed 00:02 and 00:04 of ``*/2``; the job
    becomes every minute at 00:00:30: 00:01 and 00:03 come to be."""
    now = DAY0 + 30 * SECOND
    view = CursorView("active", DAY0 + 6 * MINUTE, 0, None, pending(DAY0 + 2 * MINUTE, DAY0 + 4 * MINUTE))
    got = replan(cron("* * * * *"), now, None, view)
    assert sorted(got.kept) == [DAY0 + 2 * MINUTE, DAY0 + 4 * MINUTE]
    assert [f.nominal_at for f in got.created] == [DAY0 + MINUTE, DAY0 + 3 * MINUTE]
    assert (got.canceled, got.next_fire.nominal_at, got.runs) == ([], DAY0 + 5 * MINUTE, 4)


def test_replan_gives_a_kept_instant_its_new_due_instant() -> None:
    """Only the jitter changes: the same instant, the new schedule's due instant."""
    view = CursorView("active", TWO_AM + timedelta(days=1), 3, None, pending(TWO_AM))
    jittered = Schedule.cron("0 2 * * *", "UTC", jitter_window=timedelta(minutes=30), job_id="job_x")
    got = replan(jittered, TWO_AM - 30 * SECOND, None, view)
    [(instant, new)] = got.kept.items()
    assert instant == TWO_AM and new.due_at > TWO_AM and new.due_at - TWO_AM < timedelta(minutes=30)
    assert (got.next_fire.nominal_at, got.runs) == (TWO_AM + timedelta(days=1), 4)  # 3 before it, and it


def test_replan_keeps_a_pending_instant_already_due_when_the_new_schedule_has_it() -> None:
    """02:00 is due but not handed out yet (the gateway is behind) at 02:00:20;
    the update changes the zone spelling only: 02:00 stays, nothing else runs."""
    view = CursorView("active", TWO_AM + timedelta(days=1), 1, None, pending(TWO_AM))
    got = replan(cron("0 2 * * *"), TWO_AM + 20 * SECOND, None, view)
    assert list(got.kept) == [TWO_AM] and got.created == got.canceled == []
    assert got.next_fire.nominal_at == TWO_AM + timedelta(days=1)


def test_replan_moves_a_one_off_and_cancels_the_old_instant() -> None:
    old, new = TWO_AM, TWO_AM - 20 * SECOND
    view = CursorView("completed", None, 0, None, pending(old))
    later = replan(Schedule.once(TWO_AM + MINUTE, job_id="job_x"), TWO_AM - 30 * SECOND, None, view)
    assert (later.canceled, later.created, later.next_fire.nominal_at) == ([old], [], TWO_AM + MINUTE)
    earlier = replan(Schedule.once(new, job_id="job_x"), TWO_AM - 30 * SECOND, None, view)
    assert ([f.nominal_at for f in earlier.created], earlier.canceled, earlier.next_fire) == ([new], [old], None)
    past = replan(Schedule.once(new, job_id="job_x"), TWO_AM - 10 * SECOND, None, view)
    # Already past: the cursor, where the dispatcher's misfire policy decides it.
    assert (past.created, past.canceled, past.next_fire.nominal_at) == ([], [old], new)


def test_replan_with_nothing_pending_is_the_cursor_rule() -> None:
    view = CursorView("active", DAY0 + MINUTE, 0, None)
    got = replan(cron("*/10 * * * *"), DAY0 + 30 * SECOND, None, view)
    assert (got.kept, got.created, got.canceled, got.next_fire.nominal_at) == ({}, [], [], DAY0 + 10 * MINUTE)


def test_replan_counts_max_runs_over_what_it_keeps() -> None:
    """Three runs allowed, two used before the pending ones: one of 00:01,
    00:02 is kept, the other canceled, and the schedule ends."""
    view = CursorView("active", DAY0 + 3 * MINUTE, 2, None, pending(DAY0 + MINUTE, DAY0 + 2 * MINUTE))
    got = plan_recreation(cron("* * * * *", max_runs=3), view.pending, fire(DAY0 + MINUTE), now=DAY0, runs_so_far=2)
    assert (list(got.kept), got.canceled, got.next_fire, got.runs) == ([DAY0 + MINUTE], [DAY0 + 2 * MINUTE], None, 3)


# --- where an updated job's cursor goes ----------------------------------------------------------

HOUR = timedelta(hours=1)
EVERY_TEN = Schedule.cron("*/10 * * * *", "UTC", exact=True, job_id="job_x")
ONE_OFF = Schedule.once(DAY0 + HOUR, job_id="job_x")


@pytest.mark.parametrize(
    "case, schedule, now, accounted_until, view, expected",
    [
        ("a one-off, past: the misfire policy decides", ONE_OFF, DAY0 + 2 * HOUR, None,
         CursorView("active", DAY0 + HOUR, 0, None), DAY0 + HOUR),
        ("a one-off, future", ONE_OFF, DAY0, None, CursorView("active", DAY0 + HOUR, 0, None), DAY0 + HOUR),
        ("a one-off whose instant already ran", ONE_OFF, DAY0, None,
         CursorView("completed", None, 1, DAY0 + HOUR), None),
        ("a one-off whose instant is recorded skipped", ONE_OFF, DAY0 + 2 * HOUR, DAY0 + HOUR,
         CursorView("paused", DAY0 + HOUR, 0, None), None),
        ("cron, on time: from now", EVERY_TEN, DAY0 + HOUR + 5 * SECOND, None,
         CursorView("active", DAY0 + HOUR + MINUTE, 0, DAY0 + HOUR), DAY0 + HOUR + 10 * MINUTE),
        ("cron, dispatcher behind: keeps the backlog", EVERY_TEN, DAY0 + HOUR + 5 * SECOND, None,
         CursorView("active", DAY0 + 5 * MINUTE, 0, DAY0), DAY0 + 10 * MINUTE),
        ("cron, behind exactly on an occurrence: keeps it", EVERY_TEN, DAY0 + HOUR, None,
         CursorView("active", DAY0 + 10 * MINUTE, 0, DAY0), DAY0 + 10 * MINUTE),
        ("cron, paused: the backlog is the span's, from after it", EVERY_TEN, DAY0 + HOUR + 5 * SECOND, DAY0 + HOUR,
         CursorView("paused", DAY0 + 5 * MINUTE, 0, DAY0), DAY0 + HOUR + 10 * MINUTE),
        ("cron, never at or before an existing execution", EVERY_TEN, DAY0 + 5 * SECOND, None,
         CursorView("active", DAY0 + 10 * MINUTE, 0, DAY0 + 20 * MINUTE), DAY0 + 30 * MINUTE),
        ("cron, an ended schedule", Schedule.cron("*/10 * * * *", "UTC", exact=True, max_runs=2, job_id="job_x"),
         DAY0, None, CursorView("active", DAY0 + 10 * MINUTE, 2, None), None),
    ],
)
def test_next_cursor(case, schedule, now, accounted_until, view, expected) -> None:
    got = next_cursor(schedule, now, accounted_until, view)
    assert (None if got is None else got.nominal_at) == expected, case


@dataclass(frozen=True)
class Stored:
    """The cursor fields of a stored job (what ``JobRecord`` carries)."""

    state: str
    next_run_at: datetime | None
    next_due_at: datetime | None = None
    run_count: int = 0
    tzdata_version: str = "2025a"


EVERY_MINUTE = cron("* * * * *")
EVERY_FIVE = cron("*/5 * * * *")


@pytest.mark.parametrize(
    "case, job, stored, changed, now, rescheduled, skipped, tzdata",
    [
        ("the same schedule: nothing moves, the tzdata version stays", Stored("active", DAY0 + MINUTE),
         EVERY_MINUTE, cron("* * * * *"), DAY0, False, None, "2025a"),
        ("a paused job, the same schedule: no span recorded", Stored("paused", DAY0 + MINUTE),
         EVERY_MINUTE, EVERY_MINUTE, DAY0 + 10 * MINUTE, False, None, "2025a"),
        ("an active job, a new schedule", Stored("active", DAY0 + MINUTE),
         EVERY_MINUTE, EVERY_FIVE, DAY0 + 30 * SECOND, True, None, "2026b"),
        ("a paused job behind now: the old schedule's span so far", Stored("paused", DAY0 + MINUTE, run_count=3),
         EVERY_MINUTE, EVERY_FIVE, DAY0 + 10 * MINUTE + 30 * SECOND, True,
         SkippedSpan(DAY0 + MINUTE, DAY0 + 10 * MINUTE, 10), "2026b"),
        ("a paused job, cursor exactly now: it is in the span", Stored("paused", DAY0 + MINUTE),
         EVERY_MINUTE, EVERY_FIVE, DAY0 + MINUTE, True, SkippedSpan(DAY0 + MINUTE, DAY0 + MINUTE, 1), "2026b"),
        ("a paused job, cursor still ahead: no span", Stored("paused", DAY0 + 2 * MINUTE),
         EVERY_MINUTE, EVERY_FIVE, DAY0 + MINUTE, True, None, "2026b"),
        ("a paused job whose schedule ended: no span", Stored("paused", None),
         EVERY_MINUTE, EVERY_FIVE, DAY0 + MINUTE, True, None, "2026b"),
        ("an active job behind now records no span (the misfire policy decides)", Stored("active", DAY0 + MINUTE),
         EVERY_MINUTE, EVERY_FIVE, DAY0 + 10 * MINUTE, True, None, "2026b"),
    ],
)
def test_plan_update(case, job, stored, changed, now, rescheduled, skipped, tzdata) -> None:
    plan = plan_update(job, stored, changed, now, tzdata="2026b")
    assert (plan.reschedule is not None, plan.skipped, plan.tzdata_version) == (rescheduled, skipped, tzdata), case


def test_an_update_reschedules_after_the_paused_span_it_records() -> None:
    """Paused at 00:01, every minute becomes every five at 00:10:30: the span
    00:01..00:10 is recorded, and the store's re-plan starts after it."""
    job = Stored("paused", DAY0 + MINUTE)
    now = DAY0 + 10 * MINUTE + 30 * SECOND
    plan = plan_update(job, EVERY_MINUTE, EVERY_FIVE, now, tzdata="2026b")
    got = plan.reschedule(CursorView("paused", DAY0 + MINUTE, 10, DAY0))
    assert (got.next_fire.nominal_at, got.kept, got.created, got.canceled) == (DAY0 + 15 * MINUTE, {}, [], [])
    active = plan_update(Stored("active", DAY0 + MINUTE), EVERY_MINUTE, EVERY_FIVE, DAY0 + 30 * SECOND, tzdata="x")
    assert active.reschedule(CursorView("active", DAY0 + MINUTE, 0, None)).next_fire.nominal_at == DAY0 + 5 * MINUTE


# --- where a resumed job's cursor goes -----------------------------------------------------------


HOUR_LATE = timedelta(hours=1)


@pytest.mark.parametrize(
    "case, schedule, job, now, threshold, late_limit, next_at, skipped",
    [
        ("a schedule that ended while running", EVERY_MINUTE, Stored("paused", None), DAY0 + HOUR, THRESHOLD, 10,
         None, None),
        ("resumed before the cursor: nothing skipped", EVERY_MINUTE,
         Stored("paused", DAY0 + MINUTE, DAY0 + MINUTE + SECOND), DAY0 + 30 * SECOND, THRESHOLD, 10,
         DAY0 + MINUTE, None),
        ("resumed exactly at the cursor: it runs (late by nothing)", EVERY_MINUTE, Stored("paused", DAY0 + MINUTE),
         DAY0 + MINUTE, THRESHOLD, 10, DAY0 + MINUTE, None),
        ("ten minutes paused: 00:10 is 30 s late and runs, the older ones are skipped", EVERY_MINUTE,
         Stored("paused", DAY0 + MINUTE), DAY0 + 10 * MINUTE + 30 * SECOND, THRESHOLD, 10,
         DAY0 + 10 * MINUTE, SkippedSpan(DAY0 + MINUTE, DAY0 + 9 * MINUTE, 9)),
        ("ten minutes paused, threshold 0: all skipped", EVERY_MINUTE, Stored("paused", DAY0 + MINUTE),
         DAY0 + 10 * MINUTE + 30 * SECOND, timedelta(0), 10, DAY0 + 11 * MINUTE,
         SkippedSpan(DAY0 + MINUTE, DAY0 + 9 * MINUTE + MINUTE, 10)),
        ("a long threshold: the most recent late_limit run, older ones skipped", EVERY_MINUTE,
         Stored("paused", DAY0 + MINUTE), DAY0 + 10 * MINUTE + 30 * SECOND, HOUR_LATE, 3,
         DAY0 + 8 * MINUTE, SkippedSpan(DAY0 + MINUTE, DAY0 + 7 * MINUTE, 7)),
        ("every occurrence within the threshold and the limit: none skipped", EVERY_MINUTE,
         Stored("paused", DAY0 + MINUTE), DAY0 + 5 * MINUTE + 30 * SECOND, HOUR_LATE, 10, DAY0 + MINUTE, None),
        ("max_runs reached while paused", cron("* * * * *", max_runs=10),
         Stored("paused", DAY0 + MINUTE, run_count=4), DAY0 + HOUR, THRESHOLD, 10, None,
         SkippedSpan(DAY0 + MINUTE, DAY0 + 6 * MINUTE, 6)),
        ("max_runs: the last run within the threshold runs", cron("* * * * *", max_runs=10),
         Stored("paused", DAY0 + MINUTE, run_count=4), DAY0 + 6 * MINUTE + 30 * SECOND, THRESHOLD, 10,
         DAY0 + 6 * MINUTE, SkippedSpan(DAY0 + MINUTE, DAY0 + 5 * MINUTE, 5)),
        ("a one-off resumed within the threshold of its instant runs late", ONE_OFF,
         Stored("paused", DAY0 + HOUR), DAY0 + HOUR + 59 * SECOND, THRESHOLD, 10, DAY0 + HOUR, None),
        ("a one-off resumed past the threshold of its instant is skipped", ONE_OFF,
         Stored("paused", DAY0 + HOUR), DAY0 + HOUR + 61 * SECOND, THRESHOLD, 10, None,
         SkippedSpan(DAY0 + HOUR, DAY0 + HOUR, 1)),
    ],
)
def test_resume_plan(case, schedule, job, now, threshold, late_limit, next_at, skipped) -> None:
    got = resume_plan(schedule, job, now, threshold=threshold, late_limit=late_limit)
    assert ((None if got.next_fire is None else got.next_fire.nominal_at), got.skipped) == (next_at, skipped), case


def test_a_late_occurrence_is_judged_by_its_due_instant() -> None:
    """Its jitter put the one-off's due instant 30 s after its nominal one:
    80 s after the nominal instant it is 50 s late and runs; 91 s after, skipped."""
    job = Stored("paused", DAY0 + HOUR, DAY0 + HOUR + 30 * SECOND)
    late = resume_plan(ONE_OFF, job, DAY0 + HOUR + 80 * SECOND, threshold=THRESHOLD, late_limit=10)
    cursor = Fire(DAY0 + HOUR, DAY0 + HOUR + 30 * SECOND, 0)
    assert late == PausedSpan(cursor, None, late=(cursor,), late_limit=10)
    missed = resume_plan(ONE_OFF, job, DAY0 + HOUR + 91 * SECOND, threshold=THRESHOLD, late_limit=10)
    assert (missed.next_fire, missed.skipped) == (None, SkippedSpan(DAY0 + HOUR, DAY0 + HOUR, 1))


def test_a_calendars_moves_decide_what_came_due_and_how_late() -> None:
    """Hourly from 01:00; the 02:00 moved a day later (``next``) or to
    00:30 (``previous``), as ``resume_instants`` would: lateness is the
    moved instant's, and a run moved before now came due though its
    nominal instant is ahead."""
    job = Stored("paused", DAY0 + HOUR)
    hourly = cron("0 * * * *")
    later = {DAY0 + 2 * HOUR: DAY0 + 26 * HOUR}

    def moved_later(fire: Fire) -> datetime:
        return later.get(fire.nominal_at, fire.due_at)

    plain = resume_plan(hourly, job, DAY0 + 2 * HOUR + 30 * MINUTE, threshold=THRESHOLD, late_limit=10)
    assert plain.skipped == SkippedSpan(DAY0 + HOUR, DAY0 + 2 * HOUR, 2)
    moved = resume_plan(hourly, job, DAY0 + 2 * HOUR + 30 * MINUTE, threshold=THRESHOLD, late_limit=10,
                        due_of=moved_later)
    assert (moved.next_fire.nominal_at, moved.skipped) == (DAY0 + 2 * HOUR, SkippedSpan(DAY0 + HOUR, DAY0 + HOUR, 1))
    # ``previous``: 03:00 moved to 02:30, reached then; resumed at 02:30:30 it runs late, at 02:32 it is skipped.
    earlier = {DAY0 + 3 * HOUR: DAY0 + 2 * HOUR + 30 * MINUTE}

    def moved_earlier(fire: Fire) -> datetime:
        return earlier.get(fire.nominal_at, fire.due_at)

    def reach(fire: Fire) -> datetime:
        return min(fire.nominal_at, moved_earlier(fire))

    cursor = Stored("paused", DAY0 + 3 * HOUR)
    late = resume_plan(hourly, cursor, DAY0 + 2 * HOUR + 30 * MINUTE + 30 * SECOND, threshold=THRESHOLD,
                       late_limit=10, due_of=moved_earlier, reach_of=reach)
    assert (late.next_fire.nominal_at, late.skipped, late.after.nominal_at) == (DAY0 + 3 * HOUR, None, DAY0 + 4 * HOUR)
    missed = resume_plan(hourly, cursor, DAY0 + 2 * HOUR + 32 * MINUTE, threshold=THRESHOLD, late_limit=10,
                         due_of=moved_earlier, reach_of=reach)
    assert (missed.next_fire.nominal_at, missed.skipped) == (
        DAY0 + 4 * HOUR, SkippedSpan(DAY0 + 3 * HOUR, DAY0 + 3 * HOUR, 1)
    )
    # Without the reach (main's rule) the cursor is ahead: nothing came due.
    nominal_only = resume_plan(hourly, cursor, DAY0 + 2 * HOUR + 32 * MINUTE, threshold=THRESHOLD, late_limit=10)
    assert nominal_only.skipped is None


def test_a_resume_before_the_cursor_keeps_the_stored_due_instant() -> None:
    job = Stored("paused", DAY0 + MINUTE, DAY0 + MINUTE + 7 * SECOND)
    got = resume_plan(EVERY_MINUTE, job, DAY0, threshold=THRESHOLD, late_limit=10)
    assert got == PausedSpan(Fire(DAY0 + MINUTE, DAY0 + MINUTE + 7 * SECOND, 0), None)


@pytest.mark.parametrize(
    "case, threshold, late_limit, next_at, to_at, count",
    [
        ("the last 5 within 10 minutes run", 10 * MINUTE, 5, DAY0 + 3 * HOUR - 4 * MINUTE,
         DAY0 + 3 * HOUR - 5 * MINUTE, 50),
        ("the 10 within 10 minutes run, under a limit of 100", 10 * MINUTE, 100, DAY0 + 3 * HOUR - 9 * MINUTE,
         DAY0 + 3 * HOUR - 10 * MINUTE, 50),
    ],
)
def test_a_capped_span_still_runs_its_late_ones(case, threshold, late_limit, next_at, to_at, count) -> None:
    now = DAY0 + 3 * HOUR + 5 * SECOND
    got = paused_span(cron("* * * * *"), fire(DAY0), now, 0, limit=50, threshold=threshold, late_limit=late_limit)
    assert (got.next_fire.nominal_at, got.skipped.to_at, got.skipped.count, got.capped) == (
        next_at, to_at, count, True
    ), case
    assert got.counted == count


@pytest.mark.parametrize(
    "case, limit, count, capped",
    [
        ("under the limit: counted one by one", 100_000, 181, False),
        ("over the limit: that many recorded, capped", 50, 50, True),
        ("exactly the limit: not capped", 181, 181, False),
    ],
)
def test_a_paused_span_is_counted_up_to_the_limit_and_still_ends_at_the_last_occurrence(
    case, limit, count, capped
) -> None:
    now = DAY0 + 3 * HOUR + 5 * SECOND
    got = paused_span(cron("* * * * *"), fire(DAY0), now, 0, limit=limit)
    assert (got.skipped.count, got.skipped.to_at, got.capped) == (count, DAY0 + 3 * HOUR, capped), case
    assert got.next_fire.nominal_at == DAY0 + 3 * HOUR + MINUTE, case


@pytest.mark.parametrize(
    "case, released, next_at, skipped, late",
    [
        ("nothing held: the four most recent run", 0, DAY0 + 7 * MINUTE,
         SkippedSpan(DAY0 + MINUTE, DAY0 + 6 * MINUTE, 6), 4),
        ("two held released: room for two more", 2, DAY0 + 9 * MINUTE,
         SkippedSpan(DAY0 + MINUTE, DAY0 + 8 * MINUTE, 8), 2),
        ("the held fill the room: none runs, the cursor after now", 5, DAY0 + 11 * MINUTE,
         SkippedSpan(DAY0 + MINUTE, DAY0 + 10 * MINUTE, 10), 0),
    ],
)
def test_late_ones_beside_the_released_held_executions(case, released, next_at, skipped, late) -> None:
    """Paused from 00:01, resumed 00:10:30 with an hour's threshold and a limit of 4 late ones in all."""
    span = resume_plan(EVERY_MINUTE, Stored("paused", DAY0 + MINUTE), DAY0 + 10 * MINUTE + 30 * SECOND,
                       threshold=HOUR_LATE, late_limit=4).beside(released)
    assert (span.next_fire.nominal_at, span.skipped, len(span.late)) == (next_at, skipped, late), case


def test_every_occurrence_late_but_beyond_the_room_starts_the_range_at_the_cursor() -> None:
    span = resume_plan(EVERY_MINUTE, Stored("paused", DAY0 + MINUTE), DAY0 + 3 * MINUTE + 30 * SECOND,
                       threshold=HOUR_LATE, late_limit=10)
    assert (span.next_fire.nominal_at, span.skipped) == (DAY0 + MINUTE, None)
    after = span.beside(9)
    expected = (DAY0 + 3 * MINUTE, SkippedSpan(DAY0 + MINUTE, DAY0 + 2 * MINUTE, 2))
    assert (after.next_fire.nominal_at, after.skipped) == expected
