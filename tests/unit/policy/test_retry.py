"""When a job's attempt ``n`` runs again (``tickwheel_server.policy.retry``), as a table."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from tickwheel_server.policy.retry import backoff_delay

S = timedelta(seconds=1)
H = timedelta(hours=1)


class Extreme(random.Random):
    """Draws the top (or the bottom) of every range: the ceiling (or zero)."""

    def __init__(self, top: bool) -> None:
        super().__init__(0)
        self.top = top

    def uniform(self, a: float, b: float) -> float:
        return b if self.top else a


@pytest.mark.parametrize(
    "case, attempt, initial, cap, retry_after, top, expected",
    [
        ("attempt 2 waits at most initial", 2, S, H, None, True, S),
        ("attempt 3 at most twice that", 3, S, H, None, True, 2 * S),
        ("attempt 6 at most 16 x", 6, S, H, None, True, 16 * S),
        ("attempt 14: 4096 s, capped at 1 h", 14, S, H, None, True, H),
        ("attempt 10 000: capped, no overflow", 10_000, S, H, None, True, H),
        ("full jitter reaches zero", 5, S, H, None, False, timedelta(0)),
        ("sub-second initial", 3, timedelta(milliseconds=100), H, None, True, timedelta(milliseconds=200)),
        ("retry_after floors a short draw", 2, S, H, 30 * S, False, 30 * S),
        ("retry_after below the draw is moot", 4, S, H, 2 * S, True, 4 * S),
        ("retry_after is held within the cap", 2, S, H, 2 * H, False, H),
        ("retry_after zero changes nothing", 2, S, H, timedelta(0), False, timedelta(0)),
    ],
)
def test_backoff_delay(
    case: str, attempt: int, initial: timedelta, cap: timedelta, retry_after: timedelta | None, top: bool, expected: timedelta
) -> None:
    assert backoff_delay(attempt, initial, cap, Extreme(top), retry_after) == expected, case


def test_the_draw_is_uniform_below_the_ceiling() -> None:
    rng, twin = random.Random(11), random.Random(11)
    delays = [backoff_delay(4, S, H, rng) for _ in range(500)]
    assert delays == [timedelta(seconds=twin.uniform(0.0, 4.0)) for _ in range(500)]


@pytest.mark.parametrize("attempt", [1, 0, -3])
def test_a_first_attempt_never_waits_a_backoff(attempt: int) -> None:
    with pytest.raises(ValueError):
        backoff_delay(attempt, S, H, random.Random(1))
