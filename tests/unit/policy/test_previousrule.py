"""The ``previous`` calendar rule over real schedules, at fixed instants (pure).

London 2027: the clocks go forward on Sunday 28 March at 01:00 (to 02:00).
Easter Monday 29 March is a holiday of ``EASTER``; ``EASTER_AND_FRIDAY``
adds Good Friday 26 March.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from tickwheel_server.policy.calendarplan import decide_previous_for, rule_decider
from tickwheel_server.policy.claim import PlannedExecution, plan_claim
from tickwheel_server.schedule import Fire, Schedule, due_at, next_fire
from tickwheel_server.schedule.businessdays import calendar
from tickwheel_server.schedule.calendarrule import CalendarRule, Verdict, reached_at
from tickwheel_server.jobspec import JobCalendarRef

UTC = timezone.utc
D = date.fromisoformat
EASTER = calendar("Europe/London", holidays=[D("2027-03-29")])
EASTER_AND_FRIDAY = calendar("Europe/London", holidays=[D("2027-03-26"), D("2027-03-29")])
EVERY_DAY_BUT_EASTER = calendar("Europe/London", weekdays=range(1, 8), holidays=[D("2027-03-29")])
JITTER = timedelta(seconds=23)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def cron(expression: str) -> Schedule:
    return Schedule(expression=expression, zone="Europe/London", exact=True)


@pytest.mark.parametrize(
    ("cal", "expression", "nominal", "not_before", "verdict", "moved"),
    [
        # A weekly Monday 09:00 job: Easter Monday's run (09:00 BST) moves to Friday 26 at 09:00 GMT,
        # the same wall time across the spring-forward.
        (EASTER, "0 9 * * 1", "2027-03-29T09:00:00+01:00", None, Verdict.RUN, "2027-03-26T09:00:00+00:00"),
        # Good Friday a holiday too: Thursday 25.
        (EASTER_AND_FRIDAY, "0 9 * * 1", "2027-03-29T09:00:00+01:00", None, Verdict.RUN, "2027-03-25T09:00:00+00:00"),
        # Decided after Friday 09:00: never moved into the past, skipped.
        (EASTER, "0 9 * * 1", "2027-03-29T09:00:00+01:00", "2027-03-26T09:00:01+00:00", Verdict.SKIP, None),
        # Decided before it: moved.
        (EASTER, "0 9 * * 1", "2027-03-29T09:00:00+01:00", "2027-03-26T08:59:00+00:00", Verdict.RUN,
         "2027-03-26T09:00:00+00:00"),
        # A daily job collides: Friday 09:00 is not after Sunday's occurrence. Skipped, like ``next``'s collision.
        (EASTER, "0 9 * * *", "2027-03-29T09:00:00+01:00", None, Verdict.SKIP, None),
        # A weekday job collides with Friday's own run (strictly after the previous occurrence).
        (EASTER, "0 9 * * 1-5", "2027-03-29T09:00:00+01:00", None, Verdict.SKIP, None),
        # A business day runs as it is.
        (EASTER, "0 9 * * 1", "2027-03-22T09:00:00+00:00", None, Verdict.RUN, None),
        # Monday 01:30 with Sunday a business day: Sunday 28's 01:30 is in the gap, so 02:00 BST (01:00 UTC).
        (EVERY_DAY_BUT_EASTER, "30 1 * * 1", "2027-03-29T01:30:00+01:00", None, Verdict.RUN,
         "2027-03-28T02:00:00+01:00"),
    ],
)
def test_previous_at_fixed_instants(cal, expression, nominal, not_before, verdict, moved) -> None:
    schedule = cron(expression)
    nominal_at = at(nominal)
    decision = decide_previous_for(
        cal, "uk", schedule, nominal_at, nominal_at + JITTER, None if not_before is None else at(not_before)
    )
    assert decision.verdict is verdict, decision
    if verdict is Verdict.SKIP:
        assert decision.due_at is None and "not a business day" in decision.note
        assert reached_at(decision, nominal_at, nominal_at + JITTER) == nominal_at
    elif moved is None:
        assert decision.due_at == nominal_at + JITTER and not decision.moved
        assert reached_at(decision, nominal_at, nominal_at + JITTER) == nominal_at
    else:
        # Due at the moved instant plus the job's jitter; the claim reaches it by the moved instant.
        assert decision.due_at == at(moved) + JITTER
        assert reached_at(decision, nominal_at, nominal_at + JITTER) == at(moved)
        assert "moved to" in decision.note


def test_a_move_later_is_reached_at_its_nominal_instant() -> None:
    """``next`` runs later than nominal: its scan key stays the nominal instant."""
    schedule = cron("0 9 * * 1")
    nominal = at("2027-03-29T09:00:00+01:00")
    decide = rule_decider(EASTER, JobCalendarRef("uk", CalendarRule.NEXT), schedule, None)
    decision = decide(PlannedExecution(nominal, nominal, 1), at("2027-04-05T09:00:00+01:00"))
    assert decision.due_at == at("2027-03-30T09:00:00+01:00")
    assert reached_at(decision, nominal, nominal) == nominal


def test_the_plan_reaches_a_run_moved_days_earlier_one_look_ahead_before_it() -> None:
    """With ``reach_of``, a claim on Friday 08:59 plans Monday's occurrence
    (moved to Friday 09:00); without it, the claim waits until Monday."""
    schedule = cron("0 9 * * 1")
    monday = at("2027-03-29T09:00:00+01:00")
    cursor = Fire(monday, monday, 0)
    now = at("2027-03-26T08:59:30+00:00")

    def reach(fire: Fire) -> datetime:
        decision = decide_previous_for(EASTER, "uk", schedule, fire.nominal_at, fire.due_at, now)
        return reached_at(decision, fire.nominal_at, fire.due_at)

    def following(fire: Fire, runs: int) -> Fire | None:
        return next_fire(schedule, fire.nominal_at)

    options = dict(now=now, horizon=now + timedelta(seconds=60), policy="run_once",
                   threshold=timedelta(seconds=60), run_all_limit=100)  # fmt: skip
    plan = plan_claim(cursor, following, reach_of=reach, **options)
    assert [e.nominal_at for e in plan.executions] == [monday]
    assert plan.next_fire.nominal_at == at("2027-04-05T09:00:00+01:00") and plan.runs == 1
    assert plan_claim(cursor, following, **options).executions == []


def test_the_collision_test_walks_the_schedule_with_its_jitter_and_its_start() -> None:
    """A job that starts after Friday's instant has no occurrence there to collide with."""
    schedule = Schedule(expression="0 9 * * 1-5", zone="Europe/London", job_id="job_1",
                        start_at=at("2027-03-27T00:00:00+00:00"))  # fmt: skip
    monday = at("2027-03-29T09:00:00+01:00")
    decision = decide_previous_for(EASTER, "uk", schedule, monday, due_at(schedule, monday), None)
    assert decision.verdict is Verdict.RUN
    assert decision.due_at - (due_at(schedule, monday) - monday) == at("2027-03-26T09:00:00+00:00")
