"""Property tests: random operations on small wheels (so cascades across levels,
overflow re-scans and wrap-arounds happen constantly) agree with the reference
model in ``model.py``: never early, never lost, never twice, in due order,
cancel, move, drop and rebuild."""

from __future__ import annotations

import random
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwheel_server.wheel import wheel as wheel_module

from .model import Harness

GEOMETRIES = [
    {"tick_us": 1, "slots_per_level": 2, "horizon_us": 8},  # 3 levels of 2 slots
    {"tick_us": 1, "slots_per_level": 4, "horizon_us": 16},  # 2 levels
    {"tick_us": 3, "slots_per_level": 4, "horizon_us": 100},  # 3 levels, ticks of 3 us
    {"tick_us": 10, "slots_per_level": 8, "horizon_us": 10},  # 1 level: everything beyond 8 ticks overflows
    {"tick_us": 7, "slots_per_level": 16, "horizon_us": 5000},  # 2 levels
]


def span_of(harness: Harness) -> int:
    return harness.wheel.geometry.span_us


def random_op(harness: Harness, draw_int, keys: int) -> None:
    """One operation chosen by ``draw_int(lo, hi)`` (hypothesis or random)."""
    span = span_of(harness)
    kind = draw_int(0, 99)
    key = draw_int(0, keys - 1)
    if kind < 45:
        # around now: overdue, this tick, every level, the overflow list
        harness.insert(key, harness.now + draw_int(-3 * harness.tick, 3 * span), payload=kind)
    elif kind < 55:
        harness.cancel(key)
    elif kind < 80:
        harness.advance(draw_int(0, span // 2 + harness.tick))
    elif kind < 85:
        harness.advance(draw_int(0, 20 * span))  # a long sleep or a clock jump
    elif kind < 90:
        harness.advance_to_just_before_fire()
    elif kind < 94:
        harness.advance(0)
    elif kind < 97:
        modulus = draw_int(2, 4)
        harness.drop(lambda key, due, payload: key % modulus == 0)
    else:
        timers = [(k, harness.now + draw_int(-span, 2 * span), None) for k in range(draw_int(0, keys))]
        harness.rebuild(timers)


def drain(harness: Harness) -> None:
    while len(harness.wheel):
        event = harness.wheel.next_fire_us()
        harness.advance(max(0, event - harness.now))
    assert harness.wheel.next_fire_us() is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    geometry=st.sampled_from(GEOMETRIES),
    start=st.integers(-(10**6), 10**15),
    compact_at=st.sampled_from([0, 1024]),  # 0: compact as soon as dead timers outnumber live ones
)
def test_random_operations_match_the_model(data, geometry, start, compact_at):
    with mock.patch.object(wheel_module, "_COMPACT_AT", compact_at):
        harness = Harness(start, **geometry)
        steps = data.draw(st.integers(1, 60), label="steps")
        for _ in range(steps):
            random_op(harness, lambda lo, hi: data.draw(st.integers(lo, hi)), keys=12)
        drain(harness)


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize(("seed", "compact_at"), [(1, 1024), (2, 0), (3, 4)])
def test_long_random_runs_match_the_model(geometry, seed, compact_at, monkeypatch):
    monkeypatch.setattr(wheel_module, "_COMPACT_AT", compact_at)
    rng = random.Random(seed)
    harness = Harness(rng.randrange(0, 10**15), **geometry)
    for _ in range(1500):
        random_op(harness, rng.randint, keys=60)
    drain(harness)
    assert harness.popped > 100
