"""The backlog cap, at fixed instants: what a claim keeps of a plan beside
the executions a job already has not started, and what it records skipped."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel_server import jobspec
from tickwheel_server.policy.backlog import (
    MAX_NOT_STARTED_CAP, MAX_RUN_ALL_LIMIT, NOT_STARTED_CAP, cap_plan, not_started_cap,
)  # fmt: skip
from tickwheel_server.policy.claim import Plan, PlannedExecution, PlannedSkip, plan_claim
from tickwheel_server.policy.misfire import RUN_ALL, RUN_ONCE, SKIP
from tickwheel_server.schedule import Fire

T0 = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


def planned(*minutes: int) -> list[PlannedExecution]:
    return [PlannedExecution(T0 + m * MINUTE, T0 + m * MINUTE, 1) for m in minutes]


def plan(*minutes: int, cursor: int | None = None, skip: PlannedSkip | None = None) -> Plan:
    following = None if cursor is None else Fire(T0 + cursor * MINUTE, T0 + cursor * MINUTE, 0)
    return Plan(planned(*minutes), skip, following, len(minutes))


@pytest.mark.parametrize(
    "waiting, minutes, cap, kept, skipped",
    [
        (0, (1,), 10, (1,), None),  # a healthy job: room to spare
        (9, (1,), 10, (1,), None),  # the last place
        (10, (1,), 10, (), (1, 1, 1)),  # full: the occurrence is skipped
        (10_000, (1, 2), 10, (), (1, 2, 2)),  # far over (rows from before the cap): nothing more
        (8, (1, 2, 3, 4), 10, (1, 2), (3, 4, 2)),  # the oldest of the plan kept, the newest skipped
        (0, tuple(range(1, 101)), 100, tuple(range(1, 101)), None),  # a run_all catch-up of its limit
    ],
)
def test_a_plan_keeps_what_the_cap_leaves_room_for_and_skips_the_rest(waiting, minutes, cap, kept, skipped) -> None:
    original = plan(*minutes, cursor=minutes[-1] + 1)
    capped, skip = cap_plan(original, waiting, cap)
    assert capped.executions == planned(*kept)
    assert (capped.next_fire, capped.runs, capped.skip) == (original.next_fire, original.runs, original.skip), (
        "the cursor moves as planned and every occurrence counts as a run"
    )
    if skipped is None:
        assert skip is None and capped is original
    else:
        first, last, count = skipped
        assert skip == PlannedSkip(T0 + first * MINUTE, T0 + last * MINUTE, count, T0 + (minutes[-1] + 1) * MINUTE)


def test_the_backlog_range_continues_at_the_cursor_so_the_next_claim_extends_it() -> None:
    _, first = cap_plan(plan(1, cursor=2), 10, 10)
    _, second = cap_plan(plan(2, cursor=3), 10, 10)
    assert first.continues_at == second.from_at


def test_a_plan_whose_schedule_ended_leaves_a_range_that_continues_nowhere() -> None:
    _, skip = cap_plan(plan(1), 10, 10)
    assert skip == PlannedSkip(T0 + MINUTE, T0 + MINUTE, 1, None)


def test_a_misfire_skip_stays_beside_the_backlog_one() -> None:
    misfire = PlannedSkip(T0 - 10 * MINUTE, T0 - MINUTE, 10, T0)
    capped, skip = cap_plan(plan(0, 1, cursor=2, skip=misfire), 10, 10)
    assert capped.skip == misfire and capped.executions == [] and skip.count == 2


def test_a_run_once_catch_up_on_a_full_job_is_one_backlog_occurrence() -> None:
    """Ten missed under ``run_once`` plan one execution standing for ten; on
    a full job it is skipped as one occurrence (the other nine are the
    misfire range's)."""

    def following(previous: Fire, runs: int) -> Fire:
        return Fire(previous.nominal_at + MINUTE, previous.due_at + MINUTE, 0)

    now = T0 + 10 * MINUTE
    original = plan_claim(
        Fire(T0, T0, 0), following, now=now, horizon=now, policy=RUN_ONCE, threshold=MINUTE, run_all_limit=100
    )
    capped, skip = cap_plan(original, NOT_STARTED_CAP, NOT_STARTED_CAP)
    assert (original.skip.count, len(original.executions)) == (8, 3)  # 8 missed skipped, 1 for them, 2 on time
    assert capped.executions == [] and skip.count == 3
    assert original.skip.count + skip.count == original.runs, "every occurrence consumed is accounted once"


@pytest.mark.parametrize(
    "policy, run_all_limit, cap",
    [
        (RUN_ONCE, 100, NOT_STARTED_CAP),
        (SKIP, 5_000, NOT_STARTED_CAP),
        (RUN_ALL, 3, NOT_STARTED_CAP + 3),
        (RUN_ALL, 100, NOT_STARTED_CAP + 100),
        (RUN_ALL, MAX_RUN_ALL_LIMIT, MAX_NOT_STARTED_CAP),
        (RUN_ALL, MAX_RUN_ALL_LIMIT + 1, MAX_NOT_STARTED_CAP),
    ],
)
def test_a_job_s_cap_is_the_constant_and_its_run_all_limit(policy, run_all_limit, cap) -> None:
    assert not_started_cap(policy, run_all_limit) == cap


def test_the_largest_cap_follows_the_api_s_bound_on_the_run_all_limit() -> None:
    assert MAX_RUN_ALL_LIMIT == jobspec.MAX_RUN_ALL_LIMIT


def test_a_cap_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        cap_plan(plan(1), 0, 0)
