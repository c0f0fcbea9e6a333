"""The server's circuit breakers (``tickwheel_server.circuits``) on a fake
clock: the sliding window, the minimum of calls, the ratio, open → half-open
→ closed, re-opening on a failed probe, how long retries are held, the
changes queued for alerts, and bounded memory."""

from __future__ import annotations

import itertools
import random

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.circuits import CircuitBreaker
from tickwheel_server.policy.breaker import CLOSED, HALF_OPEN, OPEN, SPREAD, BreakerSettings

SETTINGS = BreakerSettings(window=60, min_calls=20, failure_ratio=0.5, open_for=30, probes=1)
_calls = itertools.count()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def breaker(clock) -> CircuitBreaker:
    return CircuitBreaker(SETTINGS, clock, rng=random.Random(1))


def calls(breaker: CircuitBreaker, failed: int, ok: int, *, tenant: str = "acme", host: str = "a.example",
          age: float = 0.0) -> list:
    """Record ``ok`` successes then ``failed`` failures; the answers to the failures."""
    for _ in range(ok):
        breaker.record(tenant, host, next(_calls), failed=False, age=age)
    return [breaker.record(tenant, host, next(_calls), failed=True, age=age) for _ in range(failed)]


def test_fewer_calls_than_the_minimum_never_open_even_all_failing(breaker) -> None:
    assert calls(breaker, 19, 0) == [None] * 19
    assert breaker.state("acme", "a.example") == CLOSED
    assert breaker.take_changes() == []


def test_below_the_ratio_stays_closed_and_at_the_ratio_opens(breaker) -> None:
    calls(breaker, 10, 11)
    assert breaker.state("acme", "a.example") == CLOSED, "10 of 21 failed: 47.6 %"
    [held] = calls(breaker, 1, 0)
    assert breaker.state("acme", "a.example") == OPEN, "11 of 22 failed: 50 %"
    [change] = breaker.take_changes()
    assert (change.tenant, change.host, change.opened) == ("acme", "a.example", True)
    assert "11 of 22 calls" in change.reason and change.open_for == 30
    assert 30 <= held <= 30 + SPREAD * 30, "the failure that opened it is the probe: due when the pause ends"


def test_the_window_slides_old_failures_out(breaker, clock) -> None:
    calls(breaker, 15, 0)
    clock.advance(61)
    calls(breaker, 5, 10)
    assert breaker.state("acme", "a.example") == CLOSED, "5 of 15 in the window; the 15 old failures slid out"
    calls(breaker, 5, 0)
    assert breaker.state("acme", "a.example") == OPEN, "10 of 20 in the window"


def test_calls_within_the_window_all_count(breaker, clock) -> None:
    for _ in range(10):
        calls(breaker, 1, 1)
        clock.advance(5)
    assert breaker.state("acme", "a.example") == OPEN, "20 calls over 50 s, half failed"


def test_retries_are_held_until_the_pause_ends_probes_first(breaker, clock) -> None:
    calls(breaker, 20, 0)
    assert breaker.state("acme", "a.example") == OPEN
    clock.advance(10)
    later = calls(breaker, 3, 0)
    assert all(30 + 20 <= hold <= 30 + 20 + SPREAD * 30 for hold in later), (
        "the probe went to the failure that opened it; the rest wait one more pause"
    )
    assert calls(breaker, 0, 5) == [], "results while open do not count"
    assert breaker.state("acme", "a.example") == OPEN


def test_open_then_half_open_then_a_probe_success_closes(breaker, clock) -> None:
    calls(breaker, 20, 0)
    breaker.take_changes()
    clock.advance(30)
    assert breaker.state("acme", "a.example") == HALF_OPEN
    calls(breaker, 0, 1, age=31)
    assert breaker.state("acme", "a.example") == HALF_OPEN, "a call from before the pause ended decides nothing"
    calls(breaker, 0, 1, age=0)
    assert breaker.state("acme", "a.example") == CLOSED
    [change] = breaker.take_changes()
    assert not change.opened and "succeeded" in change.reason
    assert calls(breaker, 19, 0) == [None] * 19, "a fresh window after closing"


def test_a_failed_probe_opens_it_again(breaker, clock) -> None:
    calls(breaker, 20, 0)
    clock.advance(31)
    [held] = calls(breaker, 1, 0)
    assert breaker.state("acme", "a.example") == OPEN
    assert 30 <= held <= 30 + SPREAD * 30
    opened = breaker.take_changes()
    assert [c.opened for c in opened] == [True, True] and "probe call to a.example failed" in opened[1].reason
    assert breaker.opened == 2


def test_in_half_open_a_straggler_failure_takes_a_probe_slot_then_waits(clock) -> None:
    breaker = CircuitBreaker(BreakerSettings(min_calls=2, open_for=30, probes=2), clock, rng=random.Random(1))
    calls(breaker, 2, 0)  # opened; the second failure took one of the two probe slots
    clock.advance(40)
    straggler, waiter = calls(breaker, 2, 0, age=20)
    assert straggler is None, "the last probe slot: its normal backoff"
    assert 30 <= waiter <= 30 + SPREAD * 30, "no slot left: it waits for the next decision"
    assert breaker.state("acme", "a.example") == HALF_OPEN


def test_other_tenants_and_hosts_are_unaffected(breaker) -> None:
    calls(breaker, 20, 0)
    assert breaker.state("acme", "a.example") == OPEN
    assert calls(breaker, 3, 0, host="b.example") == [None] * 3
    assert calls(breaker, 3, 0, tenant="globex") == [None] * 3
    assert breaker.state("acme", "b.example") == breaker.state("globex", "a.example") == CLOSED


def test_a_call_recorded_again_gets_its_first_answer_and_counts_once(breaker) -> None:
    calls(breaker, 18, 0)
    first = breaker.record("acme", "a.example", ("e1", 1), failed=True)
    again = breaker.record("acme", "a.example", ("e1", 1), failed=True)
    assert first is None and again is None
    assert breaker.state("acme", "a.example") == CLOSED, "19 calls, not 20"
    held = breaker.record("acme", "a.example", ("e2", 1), failed=True)
    assert held is not None and breaker.record("acme", "a.example", ("e2", 1), failed=True) == held


def test_an_idle_half_open_circuit_closes(breaker, clock) -> None:
    calls(breaker, 20, 0)
    clock.advance(30 + 59)
    assert [c.opened for c in breaker.take_changes()] == [True]
    clock.advance(1)
    [closed] = breaker.take_changes()
    assert not closed.opened and "idle" in closed.reason
    assert breaker.circuits() == []


def test_circuits_shows_those_not_closed(breaker, clock) -> None:
    calls(breaker, 20, 0)
    calls(breaker, 1, 1, host="b.example")
    clock.advance(10)
    [view] = breaker.circuits()
    assert (view.tenant, view.host, view.state, view.remaining) == ("acme", "a.example", OPEN, 20)
    clock.advance(20)
    assert breaker.circuits()[0].state == HALF_OPEN


def test_memory_is_bounded_and_a_forgotten_open_circuit_is_reported_closed(clock) -> None:
    breaker = CircuitBreaker(BreakerSettings(min_calls=1, max_circuits=3), clock)
    calls(breaker, 1, 0, host="h0")
    breaker.take_changes()
    for index in range(1, 4):
        calls(breaker, 0, 1, host=f"h{index}")
    assert len(breaker) == 3
    [forgotten] = breaker.take_changes()
    assert (forgotten.host, forgotten.opened) == ("h0", False) and "forgotten" in forgotten.reason
    assert breaker.state("acme", "h0") == CLOSED


def test_a_window_keeps_at_most_sixty_buckets(breaker, clock) -> None:
    for _ in range(500):
        calls(breaker, 0, 1)
        clock.advance(0.5)
    circuit = breaker._circuits[("acme", "a.example")]
    assert len(circuit.buckets) <= 61 and circuit.calls == 120
