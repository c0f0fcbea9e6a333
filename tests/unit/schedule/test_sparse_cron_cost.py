"""A cron that fires once in decades, in a zone with DST, costs a few
matcher searches a fire, not one per DST transition between its fires.

The engine's slow path (``CompiledCron._next_slow``) stepped one segment
of the zone at a time when the match it found lay past the segment's end,
searching again from each: the fifth Monday of February (every 28 years or
so) crossed 56 transitions a fire in Europe/London, and GetJob's 100 next
runs (PreviewSchedule's 1 000) cost 8 419 searches (83 a fire), where UTC
cost 102. The segments that end two days or more before the match found
hold no matching wall time, nor do the gaps that open them, so they are
passed in one bisection. The fires are checked against the brute-force
reference (``reference.py``) and against wall times computed directly."""

from __future__ import annotations

from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from tickwheel_server.schedule.engine import Engine
from tickwheel_server.schedule.model import Schedule, ScheduleKind

from .reference import Rule, brute_force

AFTER = datetime(2027, 1, 4, tzinfo=timezone.utc)
COUNT = 101
"""GetJob's most: 100 next runs, one more read for a calendar's moves."""


def counted(engine: Engine, schedule: Schedule) -> list[int]:
    """The compiled schedule's matcher searches, counted in the list returned."""
    calls = [0]
    compiled = engine.compile(schedule)
    real = compiled.matcher.next_match

    def counting(minute: int):
        calls[0] += 1
        return real(minute)

    compiled.next_match = compiled.matcher.next_match = counting
    return calls


def cron(expression: str, zone: str) -> Schedule:
    return Schedule(ScheduleKind.CRON, expression=expression, zone=zone)


def fifth_mondays_of_february(first: int, count: int) -> list[date]:
    """February 29ths that are Mondays (the only Februaries with five), from ``first``."""
    found = []
    year = first
    while len(found) < count:
        try:
            day = date(year, 2, 29)
        except ValueError:
            day = None
        if day is not None and day.isoweekday() == 1:
            found.append(day)
        year += 1
    return found


@pytest.mark.parametrize("zone, wall", [
    ("Europe/London", (0, 0)), ("Australia/Sydney", (2, 30)), ("America/Santiago", (23, 59)), ("UTC", (0, 0)),
])
def test_a_fire_every_28_years_costs_a_few_searches_a_fire(zone: str, wall: tuple[int, int]) -> None:
    engine = Engine()
    schedule = cron(f"{wall[1]} {wall[0]} * 2 1#5", zone)
    calls = counted(engine, schedule)
    fires = engine.preview(schedule, AFTER, COUNT)
    expected = [datetime(d.year, 2, 29, *wall, tzinfo=ZoneInfo(zone)).astimezone(timezone.utc)
                for d in fifth_mondays_of_february(2027, COUNT)]
    assert [f.nominal_at for f in fires] == expected
    assert calls[0] <= 10 * COUNT, calls[0]  # 83 a fire in London before


@pytest.mark.parametrize("expression", ["30 1 * 3 0#5", "30 1 29 2 *", "30 0 * 10 0#5"])
def test_rare_fires_across_gaps_and_repeats_match_the_reference(expression: str) -> None:
    """London's gap (01:00-02:00 on March's last Sunday) and repeat (01:00-02:00
    on October's): a rare fire in them, or near them, is found as the
    brute-force walk finds it, with the DST rule applied."""
    engine = Engine()
    schedule = cron(expression, "Europe/London")
    until = datetime(2075, 1, 1, tzinfo=timezone.utc)
    fires = [f.nominal_at for f in engine.preview(schedule, AFTER, 1000) if f.nominal_at <= until]
    minute, hour, dom, month, dow = expression.split()
    rule = Rule(minutes=frozenset({int(minute)}), hours=frozenset({int(hour)}),
                days=frozenset(range(1, 32)) if dom == "*" else frozenset({int(dom)}),
                months=frozenset({int(month)}), weekdays=frozenset(range(7)) if dow == "*" else frozenset(),
                dom_star=dom == "*",
                dow_star=dow == "*", wild=False,
                dow_terms=() if dow == "*" else (("#", int(dow.split("#")[0]), int(dow.split("#")[1])),))
    assert fires == brute_force(rule, ZoneInfo("Europe/London"), AFTER, until)
