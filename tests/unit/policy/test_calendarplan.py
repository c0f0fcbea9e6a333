"""A claim's plan under a job's calendar: runs moved, skips folded into ranges, drops counted (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tickwheel_server.policy.calendarplan import apply_calendar
from tickwheel_server.policy.claim import Plan, PlannedExecution, PlannedSkip
from tickwheel_server.schedule import Fire
from tickwheel_server.schedule.calendarrule import Decision, Verdict

UTC = timezone.utc
DAY = timedelta(days=1)
MON = datetime(2027, 3, 22, 9, tzinfo=UTC)


def days(*offsets: int) -> list[PlannedExecution]:
    return [PlannedExecution(MON + n * DAY, MON + n * DAY + timedelta(seconds=5), 1) for n in offsets]


def rule(verdicts: dict[int, Verdict], moved: dict[int, timedelta] | None = None):
    seen: list[tuple[datetime, datetime | None]] = []

    def decide(execution: PlannedExecution, following: datetime | None) -> Decision:
        seen.append((execution.nominal_at, following))
        n = (execution.nominal_at - MON).days
        verdict = verdicts.get(n, Verdict.RUN)
        due = execution.due_at + (moved or {}).get(n, timedelta(0)) if verdict is Verdict.RUN else None
        return Decision(verdict, due, "moved" if moved and n in moved else "")

    return decide, seen


def test_skipped_neighbours_fold_into_one_range_that_continues_at_the_next_occurrence() -> None:
    plan = Plan(days(4, 5, 6, 7), None, Fire(MON + 8 * DAY, MON + 8 * DAY, 0), 4)
    decide, seen = rule({5: Verdict.SKIP, 6: Verdict.SKIP})
    applied = apply_calendar(plan, decide)
    assert [e.nominal_at for e in applied.plan.executions] == [MON + 4 * DAY, MON + 7 * DAY]
    assert applied.skips == [PlannedSkip(MON + 5 * DAY, MON + 6 * DAY, 2, MON + 7 * DAY)]
    assert applied.dropped == 0
    # Each occurrence is decided knowing the next nominal one; the last knows the cursor.
    assert seen[-1] == (MON + 7 * DAY, MON + 8 * DAY)
    # The cursor and what max_runs counts are the plan's own.
    assert applied.plan.next_fire == plan.next_fire and applied.plan.runs == 4


def test_a_skip_at_the_end_continues_at_the_cursor_and_drops_are_counted_not_recorded() -> None:
    plan = Plan(days(0, 5, 6), None, None, 3)
    applied = apply_calendar(plan, rule({0: Verdict.DROP, 5: Verdict.DROP, 6: Verdict.SKIP})[0])
    assert applied.plan.executions == []
    assert applied.dropped == 2
    assert applied.skips == [PlannedSkip(MON + 6 * DAY, MON + 6 * DAY, 1, None)]


def test_a_moved_run_keeps_its_nominal_instant_and_gets_the_moved_due() -> None:
    plan = Plan(days(5), None, Fire(MON + 12 * DAY, MON + 12 * DAY, 0), 1)
    applied = apply_calendar(plan, rule({}, {5: 3 * DAY})[0])
    (run,) = applied.plan.executions
    assert run.nominal_at == MON + 5 * DAY
    assert run.due_at == MON + 8 * DAY + timedelta(seconds=5)
