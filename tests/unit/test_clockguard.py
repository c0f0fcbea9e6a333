"""The clock guard's rules (gateway/clockguard.py), table-tested at fixed instants."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel_server.gateway import clockguard
from tickwheel_server.gateway.clockguard import NOT_CHECKED, SKEWED, STALE, STEPPED, ClockCheck, judge, refusal

T0 = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)
M0 = 5000.0
LIMITS = dict(tolerance=0.25, max_age=120.0, step=0.1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "case, read_took, wall_moved, db_behind, expected",
    [
        ("agreeing, read at once", 0.0, 0.0, 0.0, (0.0, 0.0)),
        ("400 ms ahead", 0.0, 0.0, 0.4, (0.4, 0.0)),
        ("100 ms read: half of it is the benefit of the doubt", 0.1, 0.1, 0.0, (0.05, 0.05)),
        ("a read of 600 ms decides nothing", 0.6, 0.6, 0.0, None),
        ("the wall clock stepped 5 s during the read", 0.01, 5.01, 0.0, None),
    ],
)
def test_judge(case, read_took, wall_moved, db_behind, expected) -> None:
    db_now = T0 - timedelta(seconds=db_behind)
    check = judge(T0, M0, at(wall_moved), M0 + read_took, db_now, tolerance=0.25)
    if expected is None:
        assert check is None, case
    else:
        assert check is not None, case
        assert (round(check.skew, 6), round(check.uncertainty, 6)) == expected, case
        assert check.monotonic == pytest.approx(M0 + read_took / 2)


GOOD = ClockCheck(T0, M0, 0.05, 0.01)
BAD = ClockCheck(T0, M0, 0.4, 0.01)


@pytest.mark.parametrize(
    "case, check, elapsed, wall_step, expected",
    [
        ("never compared: fail closed", None, 0.0, 0.0, NOT_CHECKED),
        ("a good comparison", GOOD, 0.0, 0.0, None),
        ("a good comparison, 119 s old", GOOD, 119.0, 0.0, None),
        ("a good comparison, 121 s old", GOOD, 121.0, 0.0, STALE),
        ("clocks apart", BAD, 0.0, 0.0, SKEWED),
        ("NTP slewing of 60 ms", GOOD, 100.0, 0.06, None),
        ("stepped forward 10 s", GOOD, 3.0, 10.0, STEPPED),
        ("stepped back 1 h", GOOD, 3.0, -3600.0, STEPPED),
        ("a step under the threshold that takes the skew past the tolerance", ClockCheck(T0, M0, 0.2, 0.0), 1.0,
         0.09, SKEWED),
    ],
)
def test_refusal(case, check, elapsed, wall_step, expected) -> None:
    wall = at(elapsed + wall_step)
    assert refusal(check, wall, M0 + elapsed, **LIMITS) == expected, case


def test_drift_is_how_far_the_wall_clock_moved_beyond_the_monotonic_one() -> None:
    assert clockguard.drift(GOOD, at(10), M0 + 10) == 0
    assert clockguard.drift(GOOD, at(10), M0 + 12) == -2


def test_best_keeps_the_conclusive_check_with_the_smallest_round_trip() -> None:
    slow, fast = ClockCheck(T0, M0, 0.15, 0.15), ClockCheck(at(1), M0 + 1, 0.0, 0.01)
    assert clockguard.best([slow, None, fast]) is fast
    assert clockguard.best([fast, ClockCheck(at(2), M0 + 2, 0.3, 0.01)]) is fast  # a tie: the earliest
    assert clockguard.best([None, None]) is None
    assert clockguard.best([]) is None


@pytest.mark.parametrize(
    "case, refused, undecided_for, expected",
    [
        ("handing out", None, None, False),
        ("not compared, no comparison made yet", NOT_CHECKED, None, False),
        ("not compared, inconclusive for 1 s", NOT_CHECKED, 1.0, False),
        ("not compared, inconclusive for the grace", NOT_CHECKED, 10.0, True),
        ("stale, inconclusive for 60 s", STALE, 60.0, True),
        ("stale, no comparison made since", STALE, None, False),
        ("a skew found: at once", SKEWED, None, True),
        ("a step: at once", STEPPED, 0.0, True),
        ("the session in doubt: at once", "session 1 is lost or in doubt (expired)", None, True),
    ],
)
def test_alarming(case, refused, undecided_for, expected) -> None:
    assert clockguard.alarming(refused, undecided_for, grace=10.0) == expected, case
