"""A one-off's next fire after an instant at or past its own is None
without reading its zone (the claim asks this of every one-off it claims),
and otherwise what the fires of the one-off say: table-tested against the
one-off's fires read one by one, as ``next_fire`` read them before."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel_server.schedule import Schedule, ScheduleError, ScheduleKind
from tickwheel_server.schedule.engine import Engine, due_at

AT = datetime(2027, 3, 28, 1, 30, 0, 250_000, tzinfo=timezone.utc)
PLUS_TWO = timezone(timedelta(hours=2))


def by_fires(engine: Engine, schedule: Schedule, after: datetime):
    """The one-off's first fire strictly after ``after`` in its window, from its fires."""
    for nominal, offset, note in engine._one_off_fires(schedule):
        if nominal <= after or (schedule.start_at is not None and nominal < schedule.start_at):
            continue
        if schedule.end_at is not None and nominal >= schedule.end_at:
            return None
        return nominal, due_at(schedule, nominal), offset, note
    return None


SCHEDULES = [
    Schedule(kind=ScheduleKind.ONCE, zone="UTC", at=AT, job_id="j1"),
    Schedule(kind=ScheduleKind.ONCE, zone="UTC", at=AT.astimezone(PLUS_TWO), job_id="j1"),  # aware, not UTC
    Schedule(kind=ScheduleKind.ONCE, zone="UTC", at=AT, jitter_window=timedelta(minutes=5), job_id="j1"),
    Schedule(kind=ScheduleKind.ONCE, zone="UTC", at=AT, start_at=AT + timedelta(seconds=1), job_id="j1"),
    Schedule(kind=ScheduleKind.ONCE, zone="UTC", at=AT, end_at=AT, job_id="j1"),
    Schedule(kind=ScheduleKind.ONCE, zone="Europe/Berlin", at=AT, max_runs=1, job_id="j1"),
    Schedule(kind=ScheduleKind.LOCAL, zone="Europe/Berlin", at=datetime(2027, 3, 28, 2, 30), job_id="j1"),  # a gap
]
AFTERS = [
    AT - timedelta(days=1), AT - timedelta(microseconds=1), AT, AT.astimezone(PLUS_TWO),
    AT + timedelta(microseconds=1), AT + timedelta(hours=3), datetime(1970, 1, 1, tzinfo=timezone.utc),
]


@pytest.mark.parametrize("schedule", range(len(SCHEDULES)))
@pytest.mark.parametrize("after", range(len(AFTERS)))
def test_a_one_offs_next_fire_is_what_its_fires_say(schedule: int, after: int) -> None:
    engine = Engine()
    found = engine.next_fire(SCHEDULES[schedule], AFTERS[after])
    expected = by_fires(engine, SCHEDULES[schedule], AFTERS[after])
    assert (None if found is None else tuple(found)) == expected


def test_a_naive_once_still_raises_whatever_the_instant_asked() -> None:
    naive = Schedule(kind=ScheduleKind.ONCE, zone="UTC", at=AT.replace(tzinfo=None), job_id="j1")
    with pytest.raises(ScheduleError):
        Engine().next_fire(naive, AT + timedelta(days=1))
    with pytest.raises(ValueError):
        Engine().next_fire(SCHEDULES[0], AT.replace(tzinfo=None))
