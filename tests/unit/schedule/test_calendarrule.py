"""The calendar rule of a job: table tests at fixed instants, DST days included.

London 2027: the clocks go forward on Sunday 28 March at 01:00 (to 02:00)
and back on Sunday 31 October at 02:00 (to 01:00). Easter Monday 29 March
and Good Friday 26 March are holidays of the test calendar.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from tickwheel_server.schedule.businessdays import calendar
from tickwheel_server.schedule.calendarrule import CalendarRule, Verdict, decide

UTC = timezone.utc
D = date.fromisoformat
UK = calendar("Europe/London", holidays=[D("2027-03-26"), D("2027-03-29"), D("2027-12-27"), D("2027-12-28")])
# Weekends only closed, judged in New York, for a job that runs in Tokyo.
NY = calendar("America/New_York")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


JITTER = timedelta(seconds=17)


@pytest.mark.parametrize(
    ("rule", "nominal", "next_nominal", "zone", "verdict", "due"),
    [
        # A business day runs as it is, whatever the rule.
        (CalendarRule.NEXT, "2027-03-24T09:00:00+00:00", None, "Europe/London", Verdict.RUN, "2027-03-24T09:00:00+00:00"),
        (CalendarRule.ONLY, "2027-03-24T09:00:00+00:00", None, "Europe/London", Verdict.RUN, "2027-03-24T09:00:00+00:00"),
        (CalendarRule.SKIP, "2027-03-24T09:00:00+00:00", None, "Europe/London", Verdict.RUN, "2027-03-24T09:00:00+00:00"),
        # Good Friday 01:30 GMT: next business day is Tuesday 30 March (weekend, Easter Monday), across the
        # spring-forward: the same wall time 01:30 is now BST, so the UTC instant is an hour earlier.
        (CalendarRule.NEXT, "2027-03-26T01:30:00+00:00", None, "Europe/London", Verdict.RUN, "2027-03-30T01:30:00+01:00"),
        # Saturday 27 March at 01:30: moved to Tuesday 30 at 01:30 BST.
        (CalendarRule.NEXT, "2027-03-27T01:30:00+00:00", None, "Europe/London", Verdict.RUN, "2027-03-30T01:30:00+01:00"),
        # ... unless the schedule's next occurrence comes first: skipped, never collapsed.
        (CalendarRule.NEXT, "2027-03-27T01:30:00+00:00", "2027-03-30T01:30:00+01:00", "Europe/London", Verdict.SKIP, None),
        (CalendarRule.NEXT, "2027-03-27T01:30:00+00:00", "2027-03-29T01:30:00+01:00", "Europe/London", Verdict.SKIP, None),
        # A weekly Saturday job: the move lands before next Saturday.
        (CalendarRule.NEXT, "2027-03-27T01:30:00+00:00", "2027-04-03T01:30:00+01:00", "Europe/London", Verdict.RUN, "2027-03-30T01:30:00+01:00"),
        (CalendarRule.ONLY, "2027-03-27T01:30:00+00:00", None, "Europe/London", Verdict.DROP, None),
        (CalendarRule.SKIP, "2027-03-27T01:30:00+00:00", None, "Europe/London", Verdict.SKIP, None),
        # Christmas week: Saturday 25 Dec to Wednesday 29 (27 and 28 are holidays), GMT.
        (CalendarRule.NEXT, "2027-12-25T17:00:00+00:00", None, "Europe/London", Verdict.RUN, "2027-12-29T17:00:00+00:00"),
        # The day is judged in the calendar's zone: Friday 20:00 in New York is Saturday 10:00 in Tokyo.
        (CalendarRule.ONLY, "2027-03-06T10:00:00+09:00", None, "Asia/Tokyo", Verdict.RUN, "2027-03-06T10:00:00+09:00"),
        # Saturday 10:00 Tokyo is Friday 21:00 New York... in March 2027 (EST, before 14 March): still Friday.
        (CalendarRule.SKIP, "2027-03-07T10:00:00+09:00", None, "Asia/Tokyo", Verdict.SKIP, None),
        # Sunday 10:00 Tokyo = Saturday 20:00 New York: moved, in Tokyo's wall time, to Tuesday 10:00 Tokyo
        # (Monday 10:00 Tokyo is Sunday in New York).
        (CalendarRule.NEXT, "2027-03-07T10:00:00+09:00", None, "Asia/Tokyo", Verdict.RUN, "2027-03-09T10:00:00+09:00"),
    ],
)
def test_the_rule_at_fixed_instants(rule, nominal, next_nominal, zone, verdict, due) -> None:
    cal = NY if zone == "Asia/Tokyo" else UK
    nominal_at = at(nominal)
    decision = decide(
        cal, "cal", rule, nominal_at, nominal_at + JITTER, zone=zone,
        next_nominal_at=None if next_nominal is None else at(next_nominal),
    )
    assert decision.verdict is verdict, decision
    if due is None:
        assert decision.due_at is None
    else:
        # The moved instant plus the job's jitter: never earlier than the moved instant.
        assert decision.due_at == at(due) + JITTER


def test_a_wall_time_in_the_gap_runs_at_the_first_instant_after_it() -> None:
    every_day = calendar("Europe/London", weekdays=range(1, 8), holidays=[D("2027-03-27")])
    nominal = at("2027-03-27T01:30:00+00:00")  # Saturday, a holiday: next day is Sunday 28, 01:30 does not exist
    decision = decide(every_day, "all", CalendarRule.NEXT, nominal, nominal, zone="Europe/London", next_nominal_at=None)
    assert decision.verdict is Verdict.RUN
    assert decision.due_at == at("2027-03-28T02:00:00+01:00")  # 01:00 UTC: the first instant after the gap
    assert "moved to 2027-03-28T02:00:00+01:00" in decision.note


def test_a_repeated_wall_time_runs_at_the_earlier_instant() -> None:
    every_day = calendar("Europe/London", weekdays=range(1, 8), holidays=[D("2027-10-30")])
    nominal = at("2027-10-30T01:30:00+01:00")  # Saturday, a holiday: Sunday 31 shows 01:30 twice
    decision = decide(every_day, "all", CalendarRule.NEXT, nominal, nominal, zone="Europe/London", next_nominal_at=None)
    assert decision.due_at == at("2027-10-31T01:30:00+01:00")


def test_previous_mirrors_next_and_never_reaches_the_previous_occurrence() -> None:
    nominal = at("2027-03-29T09:00:00+01:00")  # Easter Monday: previous business day Thursday 25 (Friday a holiday)
    moved = decide(UK, "uk", CalendarRule.PREVIOUS, nominal, nominal, zone="Europe/London", next_nominal_at=None,
                   previous_nominal_at=at("2027-03-22T09:00:00+00:00"))
    assert moved.due_at == at("2027-03-25T09:00:00+00:00")
    collided = decide(UK, "uk", CalendarRule.PREVIOUS, nominal, nominal, zone="Europe/London", next_nominal_at=None,
                      previous_nominal_at=at("2027-03-25T09:00:00+00:00"))
    assert collided.verdict is Verdict.SKIP
    too_late = decide(UK, "uk", CalendarRule.PREVIOUS, nominal, nominal, zone="Europe/London", next_nominal_at=None,
                      not_before=at("2027-03-26T00:00:00+00:00"))
    assert too_late.verdict is Verdict.SKIP


def test_a_calendar_with_no_business_day_left_skips() -> None:
    # Every weekday left before the calendar's last date (2200-12-31) is a holiday: the search stops there.
    last = calendar("UTC", holidays=[D("2200-12-29"), D("2200-12-30"), D("2200-12-31")])
    nominal = at("2200-12-27T12:00:00+00:00")
    assert decide(last, "x", CalendarRule.NEXT, nominal, nominal, zone="UTC", next_nominal_at=None).verdict is Verdict.SKIP
