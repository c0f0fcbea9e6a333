"""The misfire rule (``tickwheel_server.policy.misfire``), as tables at fixed instants."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel_server.policy.misfire import RUN_ALL, RUN_ONCE, SKIP, decide_missed, is_missed
from tickwheel_server.schedule import Fire

T0 = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)
DUE = T0 + timedelta(seconds=7)  # nominal 12:00:00, jitter 7 s
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
TICK = timedelta(microseconds=1)


@pytest.mark.parametrize(
    "case, now, threshold, missed",
    [
        ("an hour before its due instant (never early)", DUE - timedelta(hours=1), 60 * SECOND, False),
        ("a tick before its due instant", DUE - TICK, 60 * SECOND, False),
        ("at its due instant", DUE, 60 * SECOND, False),
        ("59 s late", DUE + 59 * SECOND, 60 * SECOND, False),
        ("exactly the threshold late: still on time", DUE + 60 * SECOND, 60 * SECOND, False),
        ("a tick past the threshold", DUE + 60 * SECOND + TICK, 60 * SECOND, True),
        ("three days late", DUE + timedelta(days=3), 60 * SECOND, True),
        ("threshold 0, at the due instant", DUE, timedelta(0), False),
        ("threshold 0, a tick late", DUE + TICK, timedelta(0), True),
        ("a 30-day threshold, 29 days late", DUE + timedelta(days=29), timedelta(days=30), False),
        ("late by the nominal instant but not by the due instant", T0 + 61 * SECOND, 60 * SECOND, False),
    ],
)
def test_is_missed(case: str, now: datetime, threshold: timedelta, missed: bool) -> None:
    assert is_missed(DUE, now=now, threshold=threshold) is missed, case


def fires(*minutes: int) -> list[Fire]:
    return [Fire(T0 + m * MINUTE, T0 + m * MINUTE + 7 * SECOND, 0) for m in minutes]


FIVE = fires(0, 1, 2, 3, 4)


@pytest.mark.parametrize(
    "case, policy, missed, limit, carried, run, skipped",
    [
        ("run_once: the latest, standing for all", RUN_ONCE, FIVE, 100, 0, [(4, 5)], [0, 1, 2, 3]),
        ("run_once: earlier claims' skips counted", RUN_ONCE, FIVE, 100, 10_000, [(4, 10_005)], [0, 1, 2, 3]),
        ("run_once: a single miss runs", RUN_ONCE, fires(0), 100, 0, [(0, 1)], []),
        ("run_all: the most recent up to the limit", RUN_ALL, FIVE, 3, 0, [(2, 1), (3, 1), (4, 1)], [0, 1]),
        ("run_all: exactly the limit, all run", RUN_ALL, FIVE, 5, 0, [(m, 1) for m in range(5)], []),
        ("run_all: under the limit, all run", RUN_ALL, FIVE, 100, 0, [(m, 1) for m in range(5)], []),
        ("run_all: limit 1 is the latest", RUN_ALL, FIVE, 1, 7, [(4, 1)], [0, 1, 2, 3]),
        ("skip: none runs", SKIP, FIVE, 100, 0, [], [0, 1, 2, 3, 4]),
        ("nothing missed, nothing decided", RUN_ONCE, [], 100, 0, [], []),
        ("nothing missed under skip", SKIP, [], 100, 0, [], []),
    ],
)
def test_decide_missed(case: str, policy: str, missed: list[Fire], limit: int, carried: int, run, skipped) -> None:
    got = decide_missed(policy, missed, run_all_limit=limit, carried_missed=carried)
    by_minute = {f.nominal_at: m for m, f in zip(range(5), FIVE)}
    assert [(by_minute[f.nominal_at], count) for f, count in got.run] == run, case
    assert [by_minute[f.nominal_at] for f in got.skipped] == skipped, case
    assert got.skipped + [f for f, _ in got.run] == list(missed), "every missed one is run or skipped, oldest skipped"


@pytest.mark.parametrize("policy, limit", [("sometimes", 100), ("", 100), (RUN_ALL, 0), (RUN_ONCE, -1)])
def test_an_unknown_policy_or_a_limit_below_one_is_refused(policy: str, limit: int) -> None:
    with pytest.raises(ValueError):
        decide_missed(policy, FIVE, run_all_limit=limit)
