"""The refusal log (``telemetry.refusals``): one WARNING a key an interval,
with a count, and a bounded map of keys however many a client rotates."""

from __future__ import annotations

import pytest

from tickwheel_server.telemetry.refusals import RefusalLog


def test_each_key_is_said_once_an_interval_with_the_refusals_since_its_last_line() -> None:
    now = [100.0]
    refusals = RefusalLog(interval=60, now=lambda: now[0])
    said = [refusals.refused("a") for _ in range(1000)]
    assert said[0] == 1 and not any(said[1:])
    assert refusals.refused("b") == 1  # another key: its own line
    now[0] += 59.9
    assert refusals.refused("a") == 0
    now[0] += 0.1
    assert refusals.refused("a") == 1001  # the 999 unsaid, the one not said at 159.9, and this one
    assert refusals.refused("a") == 0


def test_a_flood_of_distinct_keys_keeps_the_map_bounded_and_a_key_refused_throughout_quiet() -> None:
    refusals = RefusalLog(interval=60, max_keys=100, now=lambda: 5.0)
    noisy_lines = refusals.refused(("cap", "noisy"))
    for n in range(10_000):  # a client rotating credentials, tenants or worker ids
        assert refusals.refused(("cap", f"rotated{n}")) == 1  # a key it never saw: a line, never memory
        assert len(refusals) <= 100
        if n % 50 == 0:
            noisy_lines += refusals.refused(("cap", "noisy"))
    assert noisy_lines == 1  # refused again and again: remembered, and said once
    assert len(refusals) == 100
    assert refusals.refused(("cap", "rotated0")) == 1  # long forgotten: said again


@pytest.mark.parametrize(("interval", "max_keys"), [(-1, 10), (60, 0)])
def test_nonsense_bounds_are_refused(interval: float, max_keys: int) -> None:
    with pytest.raises(ValueError):
        RefusalLog(interval=interval, max_keys=max_keys)
