"""The claim plan, at fixed instants, over a job that fires every minute."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel_server.dispatcher.plan import RUN_ALL, RUN_ONCE, SKIP, execution_id, plan_claim, plan_paused
from tickwheel_server.schedule import Fire

T0 = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
JITTER = timedelta(seconds=7)


def fire(at: datetime) -> Fire:
    return Fire(at, at + JITTER, 0)


def every_minute(limit_runs: int | None = None):
    def following(previous: Fire, runs: int) -> Fire | None:
        if limit_runs is not None and runs >= limit_runs:
            return None
        return fire(previous.nominal_at + MINUTE)

    return following


def plan(cursor_at: datetime, now: datetime, policy: str = RUN_ONCE, **options):
    options.setdefault("threshold", timedelta(seconds=60))
    options.setdefault("run_all_limit", 100)
    following = options.pop("following", every_minute())
    return plan_claim(fire(cursor_at), following, now=now, horizon=now + timedelta(seconds=60), policy=policy, **options)


def test_on_time_claims_the_look_ahead_and_moves_the_cursor() -> None:
    result = plan(T0, now=T0 - timedelta(seconds=30))
    assert [e.nominal_at for e in result.executions] == [T0]
    assert result.executions[0].due_at == T0 + JITTER and result.executions[0].missed_count == 1
    assert result.skip is None and result.next_fire.nominal_at == T0 + MINUTE and result.runs == 1


def test_lateness_below_the_threshold_is_not_a_miss() -> None:
    result = plan(T0, now=T0 + JITTER + timedelta(seconds=59))  # 59 s late; horizon 12:02:06
    assert [e.nominal_at for e in result.executions] == [T0, T0 + MINUTE, T0 + 2 * MINUTE]
    assert result.skip is None


def test_run_once_runs_the_latest_missed_and_skips_the_rest_as_one_range() -> None:
    now = T0 + timedelta(minutes=5, seconds=30)  # 12:00..12:04 missed; 12:05 is 23 s late; 12:06 ahead
    result = plan(T0, now=now)
    assert [(e.nominal_at, e.missed_count) for e in result.executions] == [
        (T0 + 4 * MINUTE, 5),
        (T0 + 5 * MINUTE, 1),
        (T0 + 6 * MINUTE, 1),
    ]
    assert (result.skip.from_at, result.skip.to_at, result.skip.count) == (T0, T0 + 3 * MINUTE, 4)
    assert result.skip.continues_at == T0 + 4 * MINUTE
    assert result.next_fire.nominal_at == T0 + 7 * MINUTE


def test_run_all_keeps_the_most_recent_up_to_the_limit() -> None:
    now = T0 + timedelta(minutes=10, seconds=30)
    result = plan(T0, now=now, policy=RUN_ALL, run_all_limit=3)
    run = [e.nominal_at for e in result.executions]
    assert run[:3] == [T0 + 7 * MINUTE, T0 + 8 * MINUTE, T0 + 9 * MINUTE]
    assert (result.skip.from_at, result.skip.to_at, result.skip.count) == (T0, T0 + 6 * MINUTE, 7)


def test_skip_runs_none_of_the_missed() -> None:
    result = plan(T0, now=T0 + timedelta(minutes=3, seconds=30), policy=SKIP)
    assert [e.nominal_at for e in result.executions] == [T0 + 3 * MINUTE, T0 + 4 * MINUTE]
    assert (result.skip.count, result.skip.continues_at) == (3, T0 + 3 * MINUTE)


def test_a_year_of_misses_is_planned_in_bounded_steps_and_never_stuck() -> None:
    now = T0 + timedelta(days=365)
    cursor, total_skipped, claims, carried = T0, 0, 0, 0
    while True:
        claims += 1
        result = plan(cursor, now=now, scan_limit=10_000, carried_missed=carried)
        assert result.runs <= 10_000
        if result.skip is not None:
            total_skipped += result.skip.count
            carried += result.skip.count
        if result.executions:
            break
        cursor = result.next_fire.nominal_at
        assert result.skip.continues_at == cursor
    assert claims == 53
    latest = result.executions[0]
    assert latest.nominal_at == now - timedelta(minutes=2)  # 1 min past due + jitter is > 60 s late
    assert latest.missed_count == total_skipped + 1 == 365 * 24 * 60 - 1


def test_the_schedule_ending_completes_the_job() -> None:
    result = plan(T0, now=T0, following=every_minute(limit_runs=1))
    assert [e.nominal_at for e in result.executions] == [T0] and result.next_fire is None


def test_a_one_off_far_in_the_past_runs_once_with_the_default_policy() -> None:
    result = plan(T0, now=T0 + timedelta(days=3), following=lambda previous, runs: None)
    assert [(e.nominal_at, e.missed_count) for e in result.executions] == [(T0, 1)]
    assert result.skip is None and result.next_fire is None


def test_execution_ids_are_derived_from_the_nominal_instant() -> None:
    assert execution_id("job_1", T0) == "job_1:2027-03-01T12:00:00Z"
    assert execution_id("job_1", T0 + timedelta(microseconds=5)) == "job_1:2027-03-01T12:00:00.000005Z"


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError):
        plan(T0, now=T0, policy="sometimes")


# -- a paused tenant's job ---------------------------------------------------------------------------


def test_a_paused_tenants_job_skips_what_comes_due_within_the_look_ahead_and_runs_nothing() -> None:
    now = T0 + timedelta(seconds=30)
    result = plan_paused(fire(T0), every_minute(), horizon=now + timedelta(seconds=60))
    assert result.executions == []
    assert (result.skip.from_at, result.skip.to_at, result.skip.count) == (T0, T0 + MINUTE, 2)
    assert result.skip.continues_at == T0 + 2 * MINUTE == result.next_fire.nominal_at
    assert result.runs == 2


def test_a_paused_tenants_job_with_nothing_in_the_look_ahead_is_left_as_it_is() -> None:
    result = plan_paused(fire(T0), every_minute(), horizon=T0 - timedelta(seconds=1))
    assert result.skip is None and result.executions == [] and result.runs == 0
    assert result.next_fire.nominal_at == T0


def test_a_paused_tenants_long_backlog_is_scanned_in_bounded_steps() -> None:
    result = plan_paused(fire(T0), every_minute(), horizon=T0 + timedelta(days=1), scan_limit=100)
    assert (result.skip.count, result.runs, result.skip.to_at) == (100, 100, T0 + 99 * MINUTE)
    assert result.next_fire.nominal_at == result.skip.continues_at == T0 + 100 * MINUTE


def test_a_paused_tenants_job_whose_schedule_ends_completes() -> None:
    result = plan_paused(fire(T0), every_minute(limit_runs=3), horizon=T0 + timedelta(hours=1))
    assert (result.skip.count, result.skip.continues_at, result.next_fire) == (3, None, None)
