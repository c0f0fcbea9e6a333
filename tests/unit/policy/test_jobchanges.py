"""The rules of what a job change does to its executions not started
(``tickwheel_server.policy.jobchanges``), as tables anchored at fixed instants."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from tickwheel.v1 import job_pb2

from tickwheel_server.api.scheduler import replan
from tickwheel_server.policy.jobchanges import Pending, RowRefresh, expired_at_resume, plan_recreation, row_refresh
from tickwheel_server.schedule import Fire, Schedule
from tickwheel_server.store.jobrecords import CursorView

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
