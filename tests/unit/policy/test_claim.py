"""The claim plan, at fixed instants: over a job that fires every minute, and
over the engine's own cron and one-off schedules when many were missed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel.shared.ids import execution_id
from tickwheel_server.policy.claim import plan_claim, plan_paused
from tickwheel_server.policy.misfire import RUN_ALL, RUN_ONCE, SKIP
from tickwheel_server.schedule import Fire, Schedule, first_fire, iter_fires, next_fire

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


def test_an_occurrence_is_missed_by_the_instant_it_is_moved_to_not_its_own() -> None:
    # Something after the plan (a calendar) moves 12:00 and 12:01 an hour on:
    # at 12:05 they are not missed, 12:02..12:04 (not moved) are.
    moved = {T0, T0 + MINUTE}

    def due_of(f: Fire) -> datetime:
        return f.due_at + timedelta(hours=1) if f.nominal_at in moved else f.due_at

    now = T0 + timedelta(minutes=5, seconds=30)
    result = plan(T0, now=now, policy=SKIP, due_of=due_of)
    assert [(e.nominal_at, e.due_at) for e in result.executions] == [
        (T0, T0 + JITTER), (T0 + MINUTE, T0 + MINUTE + JITTER),  # their own due: the mover moves them
        (T0 + 5 * MINUTE, T0 + 5 * MINUTE + JITTER), (T0 + 6 * MINUTE, T0 + 6 * MINUTE + JITTER),
    ]  # fmt: skip
    assert (result.skip.from_at, result.skip.to_at, result.skip.count) == (T0 + 2 * MINUTE, T0 + 4 * MINUTE, 3)
    assert result.skip.continues_at == T0 + 5 * MINUTE  # the occurrence after the range, not the first planned
    assert plan(T0, now=now, policy=SKIP).executions[0].nominal_at == T0 + 5 * MINUTE  # without: missed


def test_a_moved_occurrence_is_kept_when_a_long_run_all_backlog_moves_the_cursor() -> None:
    # run_all over more misses than one claim walks: the cursor goes back to
    # the first missed one it must see again; the moved, not missed,
    # occurrence before it runs rather than being passed over.
    def due_of(f: Fire) -> datetime:
        return f.due_at + timedelta(days=1) if f.nominal_at == T0 else f.due_at

    now = T0 + timedelta(hours=2)
    result = plan(T0, now=now, policy=RUN_ALL, run_all_limit=3, scan_limit=10, due_of=due_of)
    assert [e.nominal_at for e in result.executions] == [T0]
    # 13 walked (10 + 3): T0 not missed, 12 missed; all but the last 3 of those are skipped.
    assert (result.skip.from_at, result.skip.to_at, result.skip.count) == (T0 + MINUTE, T0 + 9 * MINUTE, 9)
    assert result.next_fire.nominal_at == T0 + 10 * MINUTE and result.runs == 10


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


# -- many missed, planned over as many claims as the scan limit needs --------------------------------

THRESHOLD = timedelta(seconds=60)
LOOKAHEAD = timedelta(seconds=60)
MISSED_10051 = T0 + timedelta(minutes=10_051, seconds=30)
"""The claim instant at which a minutely job with its cursor at T0 has missed
10 051 occurrences (T0 … T0 + 10 050 min are over 60 s late; + 10 051 min is
30 s late, within the threshold, and + 10 052 min is in the look-ahead)."""


def catch_up(schedule: Schedule, now: datetime, policy: str, *, scan_limit: int, run_all_limit: int = 100):
    """Claim at ``now`` as the store does, again and again, until the cursor
    is past the look-ahead: each plan sees the job's run count and the count
    of its open misfire range (``carried``), and a skip range continuing the
    open one extends it. Returns the executions and the ranges."""
    cursor = first_fire(schedule, T0 - timedelta(seconds=1))
    runs_so_far, carried = 0, 0
    executions: list = []
    ranges: list[list] = []  # [from, to, count, continues_at]
    claims = 0
    while cursor is not None and cursor.nominal_at <= now + LOOKAHEAD:
        claims += 1
        calls = 0

        def following(previous: Fire, runs: int, base: int = runs_so_far) -> Fire | None:
            nonlocal calls
            calls += 1
            return next_fire(schedule, previous.nominal_at, runs_so_far=base + runs)

        open_range = ranges[-1] if ranges and ranges[-1][3] == cursor.nominal_at else None
        carried = open_range[2] if open_range is not None and now - cursor.due_at > THRESHOLD else 0
        result = plan_claim(
            cursor, following, now=now, horizon=now + LOOKAHEAD, policy=policy, threshold=THRESHOLD,
            run_all_limit=run_all_limit, carried_missed=carried, scan_limit=scan_limit,
        )
        keep = run_all_limit if policy == RUN_ALL else 0
        assert calls <= scan_limit + keep, "a claim's work is bounded"
        executions += result.executions
        if result.skip is not None:
            skip = result.skip
            if open_range is not None and skip.from_at == cursor.nominal_at:
                open_range[1:] = [skip.to_at, open_range[2] + skip.count, skip.continues_at]
            else:
                ranges.append([skip.from_at, skip.to_at, skip.count, skip.continues_at])
        runs_so_far += result.runs
        assert result.runs > 0 or result.next_fire is None or result.next_fire.nominal_at > now + LOOKAHEAD
        cursor = result.next_fire
    return executions, [tuple(r[:3]) for r in ranges], claims


MINUTELY = Schedule.cron("* * * * *", "UTC", exact=True)


@pytest.mark.parametrize("scan_limit", [7, 100, 10_000, 20_000])
def test_run_all_runs_exactly_the_limit_of_the_most_recent_however_many_were_missed(scan_limit: int) -> None:
    executions, ranges, _ = catch_up(MINUTELY, MISSED_10051, RUN_ALL, scan_limit=scan_limit)
    missed = [e for e in executions if MISSED_10051 - e.due_at > THRESHOLD]
    assert [e.nominal_at for e in missed] == [T0 + k * MINUTE for k in range(9_951, 10_051)]
    assert all(e.missed_count == 1 for e in executions)
    assert ranges == [(T0, T0 + 9_950 * MINUTE, 9_951)], "the older ones are one skip range"
    upcoming = [e.nominal_at for e in executions if e not in missed]
    assert upcoming == [T0 + 10_051 * MINUTE, T0 + 10_052 * MINUTE]


@pytest.mark.parametrize("scan_limit", [7, 10_000])
def test_run_once_runs_the_latest_for_all_10051_however_many_were_missed(scan_limit: int) -> None:
    executions, ranges, _ = catch_up(MINUTELY, MISSED_10051, RUN_ONCE, scan_limit=scan_limit)
    assert [(e.nominal_at, e.missed_count) for e in executions] == [
        (T0 + 10_050 * MINUTE, 10_051), (T0 + 10_051 * MINUTE, 1), (T0 + 10_052 * MINUTE, 1),
    ]
    assert ranges == [(T0, T0 + 10_049 * MINUTE, 10_050)]


@pytest.mark.parametrize("scan_limit", [7, 10_000])
def test_skip_skips_all_10051_however_many_were_missed(scan_limit: int) -> None:
    executions, ranges, _ = catch_up(MINUTELY, MISSED_10051, SKIP, scan_limit=scan_limit)
    assert [e.nominal_at for e in executions] == [T0 + 10_051 * MINUTE, T0 + 10_052 * MINUTE]
    assert ranges == [(T0, T0 + 10_050 * MINUTE, 10_051)]


@pytest.mark.parametrize("scan_limit", [3, 10_000])
def test_run_all_over_years_of_a_daily_job_across_dst_keeps_the_most_recent(scan_limit: int) -> None:
    daily = Schedule.cron("30 2 * * *", "Europe/Berlin", exact=True)  # 02:30 is skipped each spring: shifted
    now = T0 + timedelta(days=3_000)
    expected = []
    for fire_ in iter_fires(daily, T0 - timedelta(seconds=1)):
        if now - fire_.due_at <= THRESHOLD:
            break
        expected.append(fire_.nominal_at)
    executions, ranges, _ = catch_up(daily, now, RUN_ALL, scan_limit=scan_limit, run_all_limit=250)
    assert [e.nominal_at for e in executions if now - e.due_at > THRESHOLD] == expected[-250:]
    assert ranges == [(expected[0], expected[-251], len(expected) - 250)]


@pytest.mark.parametrize(
    ("policy", "runs", "skipped"), [(RUN_ALL, [(T0, 1)], []), (RUN_ONCE, [(T0, 1)], []), (SKIP, [], [(T0, T0, 1)])]
)
def test_a_missed_one_off_under_each_policy(policy: str, runs: list, skipped: list) -> None:
    one_off = Schedule.once(T0, exact=True)
    executions, ranges, claims = catch_up(one_off, T0 + timedelta(days=3), policy, scan_limit=1, run_all_limit=1)
    assert [(e.nominal_at, e.missed_count) for e in executions] == runs
    assert ranges == skipped and claims == 1


def test_a_run_all_job_whose_max_runs_end_inside_the_backlog_runs_its_last_occurrences() -> None:
    limited = Schedule.cron("* * * * *", "UTC", exact=True, max_runs=5_000)
    executions, ranges, _ = catch_up(limited, MISSED_10051, RUN_ALL, scan_limit=1_000)
    assert [e.nominal_at for e in executions] == [T0 + k * MINUTE for k in range(4_900, 5_000)]
    assert ranges == [(T0, T0 + 4_899 * MINUTE, 4_900)]


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError):
        plan(T0, now=T0, scan_limit=0)
    with pytest.raises(ValueError):
        plan(T0, now=T0, policy=RUN_ALL, run_all_limit=0)
