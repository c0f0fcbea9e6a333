"""A search for a business day costs a few steps whatever the calendar
holds, and finds what the day-by-day walk found.

A calendar may hold 10 000 holidays (``api/calendars.py``), and a rule's
search (``next``, ``previous``, :func:`~tickwheel_server.schedule.calendarrule.decide`)
once crossed up to ``7 × (holidays + 1)`` days, one zone conversion each:
0.6 s of CPU for one occurrence of a one-off job on a calendar whose next
business day is 170 years away, a cost set by the tenant's stored calendar
and paid again for every occurrence a preview, a claim or a calendar change
decides, not by any request. The cost is counted here in holiday lookups
(each step of the old walk made one), not timed."""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta, timezone

import pytest

from tickwheel_server.schedule import businessdays as b
from tickwheel_server.schedule.calendarrule import CalendarRule, Verdict, decide

ZONES = ["UTC", "Europe/London", "America/New_York", "Asia/Kolkata", "Pacific/Apia", "Pacific/Kiritimati",
         "Australia/Lord_Howe"]


class Counted(frozenset):
    """Holidays that count how often a search asks whether a day is one."""

    asked = 0

    def __contains__(self, day) -> bool:
        Counted.asked += 1
        return super().__contains__(day)


def walked(cal: b.BusinessCalendar, day: date, step: int) -> date | None:
    """The business day search as it was: one day at a time (the reference)."""
    candidate = day
    while True:
        if (step > 0 and candidate >= b.MAX_DATE) or (step < 0 and candidate <= b.MIN_DATE):
            return None
        candidate += timedelta(days=step)
        if b.is_business_day(cal, candidate):
            return candidate


def random_calendar(rng: random.Random, zone: str = "UTC") -> b.BusinessCalendar:
    weekdays = rng.sample(range(1, 8), rng.randint(1, 7))
    start = date(rng.choice([1900, 1990, 2026, 2190]), 1, 1)
    holidays = {start + timedelta(days=rng.randint(0, 3000)) for _ in range(rng.randint(0, 2500))}
    return b.calendar(zone, weekdays, {day for day in holidays if b.MIN_DATE <= day <= b.MAX_DATE})


def test_next_and_previous_business_day_find_what_the_walk_found() -> None:
    rng = random.Random(7)
    for _ in range(200):
        cal = random_calendar(rng)
        some = sorted(cal.holidays)[:1] or [date(2026, 1, 1)]
        for _ in range(40):
            day = some[0] + timedelta(days=rng.randint(-20, 3020))
            if b.MIN_DATE <= day <= b.MAX_DATE:
                assert b.next_business_day(cal, day) == walked(cal, day, 1), (cal.business_weekdays, day)
                assert b.previous_business_day(cal, day) == walked(cal, day, -1), (cal.business_weekdays, day)
    for edge in (b.MIN_DATE, b.MIN_DATE + timedelta(days=1), b.MAX_DATE - timedelta(days=1), b.MAX_DATE):
        for weekdays in ([1], [7], [3, 4], range(1, 8)):
            cal = b.calendar("UTC", weekdays, {edge})
            assert (b.next_business_day(cal, edge), b.previous_business_day(cal, edge)) == (
                walked(cal, edge, 1), walked(cal, edge, -1))


def _old_rule_search(cal, nominal_at, step, zone, bound):
    """calendarrule's search as it was, one candidate day at a time (the reference)."""
    day, wall = b.zone_local(zone, nominal_at)
    for offset in range(1, 7 * (len(cal.holidays) + 1) + 3):
        candidate_day = day + timedelta(days=step * offset)
        if not b.MIN_DATE <= candidate_day <= b.MAX_DATE:
            return None
        candidate = b.zone_wall_instant(zone, candidate_day, wall)
        if bound is not None and (candidate >= bound if step > 0 else candidate <= bound):
            return None
        calendar_day = b.local_day(cal, candidate)
        if b.MIN_DATE <= calendar_day <= b.MAX_DATE and b.is_business_day(cal, calendar_day):
            return candidate
    return None


@pytest.mark.parametrize("job_zone", ZONES)
def test_a_rule_moves_an_occurrence_where_the_walk_moved_it_across_zones(job_zone: str) -> None:
    from tickwheel_server.schedule import calendarrule

    rng = random.Random(job_zone)
    for _ in range(60):
        cal = random_calendar(rng, rng.choice(ZONES))
        anchor = sorted(cal.holidays)[len(cal.holidays) // 2] if cal.holidays else date(2026, 3, 1)
        at = datetime.combine(anchor, datetime.min.time(), timezone.utc) + timedelta(minutes=rng.randint(-2880, 2880))
        for step in (1, -1):
            bound = rng.choice([None, at + step * timedelta(days=rng.randint(1, 400))])
            assert calendarrule._search(cal, at, step, job_zone, bound, None) == _old_rule_search(
                cal, at, step, job_zone, bound), (cal.zone, at, step, bound)


def test_a_calendar_of_thousands_of_holidays_costs_each_decision_a_few_lookups() -> None:
    """9 000 Monday holidays in a row on a Monday-only calendar: a one-off
    job's occurrence on each of five Tuesdays (no neighbouring occurrence to
    stop the search) moves 170 years ahead. The lookups: those of finding,
    once, where each holiday's run ends, and a few a decision (before, about
    63 000 a decision)."""
    first = date(2027, 1, 4)
    holidays = Counted(first + timedelta(weeks=n) for n in range(9000))
    cal = b.BusinessCalendar("UTC", frozenset({1}), holidays)
    Counted.asked = 0
    for week in range(5):
        at = datetime(2027, 1, 5, 9, tzinfo=timezone.utc) + timedelta(weeks=week)
        decision = decide(cal, "desk", CalendarRule.NEXT, at, at, zone="Europe/London", next_nominal_at=None)
        assert decision.verdict is Verdict.RUN and decision.due_at.date() == date(2199, 7, 1), decision
    assert Counted.asked <= len(holidays) + 5 * 20, f"{Counted.asked} holiday lookups for 5 decisions"
