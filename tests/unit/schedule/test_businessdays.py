"""Business-day arithmetic: table tests at fixed dates and instants, DST days included."""

from __future__ import annotations

from datetime import date, datetime, time, timezone

import pytest

from tickwheel_server.schedule.businessdays import (
    MAX_DATE,
    MIN_DATE,
    BusinessCalendar,
    DayKind,
    Direction,
    calendar,
    day_kind,
    is_business_day,
    local_day,
    move_to_business_day,
    next_business_day,
    previous_business_day,
    wall_instant,
)

UTC = timezone.utc
D = date.fromisoformat
# London 2026: Christmas Friday 25 Dec, Boxing Day Saturday 26 (observed Monday 28); Christmas Eve a half-day.
LONDON = calendar("Europe/London", holidays=[D("2026-12-25"), D("2026-12-28"), D("2026-03-30")],
                  half_days=[D("2026-12-24")])
# A Sunday-to-Thursday week (Israel).
JERUSALEM = calendar("Asia/Jerusalem", weekdays=[7, 1, 2, 3, 4])


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@pytest.mark.parametrize(
    ("cal", "day", "kind"),
    [
        (LONDON, "2026-12-23", DayKind.BUSINESS),  # Wednesday
        (LONDON, "2026-12-24", DayKind.HALF_DAY),  # Thursday, half-day
        (LONDON, "2026-12-25", DayKind.HOLIDAY),  # Friday, holiday
        (LONDON, "2026-12-26", DayKind.CLOSED),  # Saturday
        (LONDON, "2026-12-27", DayKind.CLOSED),  # Sunday
        (LONDON, "2026-12-28", DayKind.HOLIDAY),  # Monday, observed Boxing Day
        (JERUSALEM, "2026-12-25", DayKind.CLOSED),  # Friday
        (JERUSALEM, "2026-12-27", DayKind.BUSINESS),  # Sunday
    ],
)
def test_day_kind(cal: BusinessCalendar, day: str, kind: DayKind) -> None:
    assert day_kind(cal, D(day)) is kind
    assert is_business_day(cal, D(day)) == (kind in (DayKind.BUSINESS, DayKind.HALF_DAY))


def test_a_holiday_on_a_closed_weekday_is_a_holiday() -> None:
    cal = calendar("UTC", holidays=[D("2026-12-26")])
    assert day_kind(cal, D("2026-12-26")) is DayKind.HOLIDAY


@pytest.mark.parametrize(
    ("day", "after", "before"),
    [
        ("2026-12-23", "2026-12-24", "2026-12-22"),  # the half-day counts as a business day
        ("2026-12-24", "2026-12-29", "2026-12-23"),  # Fri holiday, weekend, Mon holiday
        ("2026-12-25", "2026-12-29", "2026-12-24"),
        ("2026-12-29", "2026-12-30", "2026-12-24"),
        ("2026-03-27", "2026-03-31", "2026-03-26"),  # Friday; Monday 30 March a holiday
    ],
)
def test_next_and_previous_business_day_are_strict(day: str, after: str, before: str) -> None:
    assert next_business_day(LONDON, D(day)) == D(after)
    assert previous_business_day(LONDON, D(day)) == D(before)


def test_searches_stop_at_the_bounds() -> None:
    assert next_business_day(LONDON, MAX_DATE) is None
    assert previous_business_day(LONDON, MIN_DATE) is None
    # 2200-12-31 is a Wednesday: the last business day of the range, none after it.
    assert next_business_day(LONDON, D("2200-12-30")) == D("2200-12-31")
    only_monday = calendar("UTC", weekdays=[1], holidays=[D("2200-12-29")])
    assert next_business_day(only_monday, D("2200-12-28")) is None


def test_a_long_run_of_holidays_is_crossed() -> None:
    # Every Monday of 2027 to 2030 a holiday in a Monday-only calendar: the next business Monday is in 2031.
    mondays = [d for d in (date.fromordinal(o) for o in range(D("2027-01-01").toordinal(), D("2031-01-01").toordinal()))
               if d.isoweekday() == 1]
    cal = calendar("UTC", weekdays=[1], holidays=mondays)
    assert next_business_day(cal, D("2026-12-31")) == D("2031-01-06")
    assert previous_business_day(cal, D("2031-01-06")) == D("2026-12-28")


@pytest.mark.parametrize(
    ("instant", "direction", "expected"),
    [
        # A business day: unchanged, whichever the direction.
        ("2026-12-23T09:30:00+00:00", Direction.NEXT, "2026-12-23T09:30:00+00:00"),
        ("2026-12-24T09:30:00+00:00", Direction.PREVIOUS, "2026-12-24T09:30:00+00:00"),
        # Christmas: next is Tuesday 29th, previous the half-day, same wall time.
        ("2026-12-25T09:30:00+00:00", Direction.NEXT, "2026-12-29T09:30:00+00:00"),
        ("2026-12-25T09:30:00+00:00", Direction.PREVIOUS, "2026-12-24T09:30:00+00:00"),
        # A UTC instant whose London day is Saturday (00:30 BST on Saturday = 23:30 UTC Friday, in summer).
        ("2026-07-03T23:30:00+00:00", Direction.NEXT, "2026-07-05T23:30:00+00:00"),
        # Across the spring change: Saturday 28 March 09:00 GMT -> Tuesday 31 March 09:00 BST (08:00 UTC).
        ("2026-03-28T09:00:00+00:00", Direction.NEXT, "2026-03-31T08:00:00+00:00"),
        # Across the autumn change: Sunday 25 October 09:00 GMT -> Friday 23 October 09:00 BST.
        ("2026-10-25T09:00:00+00:00", Direction.PREVIOUS, "2026-10-23T08:00:00+00:00"),
    ],
)
def test_move_keeps_the_wall_time_in_the_zone(instant: str, direction: Direction, expected: str) -> None:
    assert move_to_business_day(LONDON, at(instant), direction) == at(expected)


def test_a_wall_time_in_a_gap_becomes_the_first_instant_after_it() -> None:
    # New York springs forward on Sunday 8 March 2026 at 02:00 EST: 02:30 does not exist.
    sundays = calendar("America/New_York", weekdays=[7])
    assert wall_instant(sundays, D("2026-03-08"), time(2, 30)) == at("2026-03-08T07:00:00+00:00")
    # Moving Saturday 02:30 EST to the next business day (that Sunday) lands on 03:00 EDT.
    assert move_to_business_day(sundays, at("2026-03-07T02:30:00-05:00"), Direction.NEXT) == at(
        "2026-03-08T03:00:00-04:00"
    )


def test_a_repeated_wall_time_becomes_the_earlier_instant() -> None:
    # New York falls back on Sunday 1 November 2026: 01:30 happens at -04:00 then at -05:00.
    sundays = calendar("America/New_York", weekdays=[7])
    assert wall_instant(sundays, D("2026-11-01"), time(1, 30)) == at("2026-11-01T01:30:00-04:00")
    # A Saturday 01:30 (not a business day) moves to the first of Sunday's two 01:30s.
    assert move_to_business_day(sundays, at("2026-10-31T01:30:00-04:00"), Direction.NEXT) == at(
        "2026-11-01T01:30:00-04:00"
    )


def test_microseconds_are_kept() -> None:
    moved = move_to_business_day(LONDON, at("2026-12-25T09:30:00.123456+00:00"), Direction.NEXT)
    assert moved == at("2026-12-29T09:30:00.123456+00:00")


def test_local_day_is_the_zones() -> None:
    assert local_day(LONDON, at("2026-07-03T23:30:00+00:00")) == D("2026-07-04")
    assert local_day(JERUSALEM, at("2026-12-25T22:30:00+00:00")) == D("2026-12-26")


def test_instants_outside_the_range_move_nowhere() -> None:
    assert move_to_business_day(LONDON, at("2201-01-01T12:00:00+00:00"), Direction.PREVIOUS) is None
    assert move_to_business_day(LONDON, at("1899-12-31T12:00:00+00:00"), Direction.NEXT) is None


def test_a_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        move_to_business_day(LONDON, datetime(2026, 12, 25, 9, 30), Direction.NEXT)


@pytest.mark.parametrize(
    ("weekdays", "holidays", "half_days", "message"),
    [
        ([8], [], [], "subset of 1..7"),
        ([0], [], [], "subset of 1..7"),
        ([1], [D("1899-12-31")], [], "outside"),
        ([1], [], [D("2201-01-01")], "outside"),
        ([1, 2, 3, 4, 5], [D("2026-12-25")], [D("2026-12-25")], "not a business day"),
        ([1, 2, 3, 4, 5], [], [D("2026-12-26")], "not a business day"),
    ],
)
def test_a_calendar_whose_searches_could_not_end_is_refused(weekdays, holidays, half_days, message) -> None:
    with pytest.raises(ValueError, match=message):
        BusinessCalendar("UTC", frozenset(weekdays), frozenset(holidays), frozenset(half_days))


def test_no_weekdays_means_monday_to_friday() -> None:
    assert calendar("UTC").business_weekdays == frozenset({1, 2, 3, 4, 5})
