"""What a worker's result does to its execution, decided at fixed instants:
each case is the row's facts, the result, the retry policy and the circuit's
hold in, the decision out."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

import pytest

from tickwheel.shared.ids import to_us
from tickwheel_server.policy.outcome import (
    CANCELED, DECIDED_WITHOUT_POLICY, FAILED_PERMANENT, FAILED_RETRYABLE, SUCCEEDED, TIMED_OUT, BreakerEvent,
    Decision, Facts, RetryPolicy, breaker_event, decide,
)

NOW = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)
NOW_US = to_us(NOW)
S = timedelta(seconds=1)
POLICY = RetryPolicy(max_attempts=3, initial_backoff=10 * S, max_backoff=60 * S)
RUNNING = Facts(attempt=1, cancel_requested=False, cancel_reason=None)
GONE = RUNNING._replace(cancel_reason="canceled: job deleted", job_deleted=True)


class FixedRng(random.Random):
    """Full jitter drawn at the top of its range: the delay is the ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Case(NamedTuple):
    name: str
    facts: Facts
    outcome: int
    expected: Decision
    retry_after: timedelta | None = None
    hold: float | None = None
    retry: RetryPolicy | str = POLICY


def at(delay: timedelta) -> int:
    return to_us(NOW + delay)


CASES = [
    Case("success", RUNNING, SUCCEEDED, Decision("succeeded", "succeeded", 1, None, "")),
    Case("success at the last attempt", RUNNING._replace(attempt=3), SUCCEEDED,
         Decision("succeeded", "succeeded", 3, None, "")),
    Case("a retryable failure retries after the first backoff", RUNNING, FAILED_RETRYABLE,
         Decision("scheduled", "failed", 2, at(10 * S), "")),
    Case("the policy's own max_attempts", RUNNING._replace(attempt=2), FAILED_RETRYABLE,
         Decision("dead", "failed", 2, None, "attempts exhausted (2 of 2)"),
         retry=RetryPolicy(2, 10 * S, 60 * S)),
    Case("the second retry waits twice as long", RUNNING._replace(attempt=2), FAILED_RETRYABLE,
         Decision("scheduled", "failed", 3, at(20 * S), "")),
    Case("the backoff is capped", RUNNING._replace(attempt=9), FAILED_RETRYABLE,
         Decision("scheduled", "failed", 10, at(60 * S), ""), retry=RetryPolicy(100, 10 * S, 60 * S)),
    Case("a timeout retries as timed out", RUNNING, TIMED_OUT, Decision("scheduled", "timed_out", 2, at(10 * S), "")),
    Case("attempts exhausted: dead", RUNNING._replace(attempt=3), FAILED_RETRYABLE,
         Decision("dead", "failed", 3, None, "attempts exhausted (3 of 3)")),
    Case("a timeout at the last attempt: dead, timed out", RUNNING._replace(attempt=3), TIMED_OUT,
         Decision("dead", "timed_out", 3, None, "attempts exhausted (3 of 3)")),
    Case("a permanent failure is dead at once", RUNNING, FAILED_PERMANENT,
         Decision("dead", "failed", 1, None, "failed permanently")),
    Case("retry_after longer than the backoff wins", RUNNING, FAILED_RETRYABLE,
         Decision("scheduled", "failed", 2, at(45 * S), ""), retry_after=45 * S),
    Case("retry_after is capped by max_backoff", RUNNING, FAILED_RETRYABLE,
         Decision("scheduled", "failed", 2, at(60 * S), ""), retry_after=timedelta(hours=2)),
    Case("retry_after shorter than the backoff changes nothing", RUNNING, FAILED_RETRYABLE,
         Decision("scheduled", "failed", 2, at(10 * S), ""), retry_after=2 * S),
    Case("canceled by its worker", RUNNING, CANCELED, Decision("canceled", "canceled", 1, None, "canceled: by its worker")),
    Case("canceled by its worker on request keeps the request's reason",
         RUNNING._replace(cancel_requested=True, cancel_reason="canceled: replaced by a newer run"), CANCELED,
         Decision("canceled", "canceled", 1, None, "canceled: replaced by a newer run")),
    Case("a failure after a cancel request is not retried", RUNNING._replace(cancel_requested=True), FAILED_RETRYABLE,
         Decision("canceled", "failed", 1, None, "canceled: by request")),
    Case("a timeout after a cancel request is not retried",
         RUNNING._replace(cancel_requested=True, cancel_reason="canceled: job deleted"), TIMED_OUT,
         Decision("canceled", "timed_out", 1, None, "canceled: job deleted")),
    Case("a success after a cancel request is a success",
         RUNNING._replace(cancel_requested=True), SUCCEEDED, Decision("succeeded", "succeeded", 1, None, "")),
    Case("a permanent failure after a cancel request is dead", RUNNING._replace(cancel_requested=True),
         FAILED_PERMANENT, Decision("dead", "failed", 1, None, "failed permanently")),
    Case("an open circuit holds the retry past its backoff", RUNNING, FAILED_RETRYABLE,
         Decision("scheduled", "failed", 2, at(30 * S), ""), hold=30.0),
    Case("a hold shorter than the backoff changes nothing", RUNNING, FAILED_RETRYABLE,
         Decision("scheduled", "failed", 2, at(10 * S), ""), hold=3.0),
    Case("an open circuit does not revive an exhausted execution", RUNNING._replace(attempt=3), TIMED_OUT,
         Decision("dead", "timed_out", 3, None, "attempts exhausted (3 of 3)"), hold=30.0),
    Case("an unknown outcome is a retryable failure", RUNNING, 99, Decision("scheduled", "failed", 2, at(10 * S), "")),
    Case("an unreadable retry policy does not matter to a success", RUNNING, SUCCEEDED,
         Decision("succeeded", "succeeded", 1, None, ""), retry="the definition does not parse"),
    Case("nor to a permanent failure", RUNNING, FAILED_PERMANENT,
         Decision("dead", "failed", 1, None, "failed permanently"), retry="the definition does not parse"),
    # Its job was deleted while it ran (the store gives the reason "canceled: job deleted").
    Case("a deleted job's permanent failure is canceled, its attempt failed", GONE, FAILED_PERMANENT,
         Decision("canceled", "failed", 1, None, "canceled: job deleted")),
    Case("a deleted job's retryable failure is not retried", GONE, FAILED_RETRYABLE,
         Decision("canceled", "failed", 1, None, "canceled: job deleted"), retry="no definition: never read"),
    Case("a deleted job's timeout is not retried", GONE._replace(attempt=2), TIMED_OUT,
         Decision("canceled", "timed_out", 2, None, "canceled: job deleted")),
    Case("a deleted job's last attempt failing is not dead", GONE._replace(attempt=3), FAILED_RETRYABLE,
         Decision("canceled", "failed", 3, None, "canceled: job deleted")),
    Case("a deleted job's run that succeeded succeeded", GONE, SUCCEEDED, Decision("succeeded", "succeeded", 1, None, "")),
    Case("a deleted job's run canceled by its worker keeps its reason", GONE._replace(cancel_reason=None), CANCELED,
         Decision("canceled", "canceled", 1, None, "canceled: by its worker")),
    Case("a deleted job's run asked to stop keeps the request's reason",
         GONE._replace(cancel_requested=True, cancel_reason="canceled: replaced by a newer run"), FAILED_PERMANENT,
         Decision("canceled", "failed", 1, None, "canceled: replaced by a newer run")),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_decide(case: Case) -> None:
    found = decide(case.facts, case.outcome, case.retry_after, case.retry, case.hold, NOW, FixedRng())
    assert found == case.expected
    assert found.dead is (case.expected.status == "dead")


def test_the_jitter_is_full_and_drawn_from_the_rng() -> None:
    delays = {
        decide(RUNNING, FAILED_RETRYABLE, None, POLICY, None, NOW, random.Random(seed)).ready_at_us - NOW_US
        for seed in range(50)
    }
    assert len(delays) > 40 and all(0 <= delay <= 10_000_000 for delay in delays)
    again = decide(RUNNING, FAILED_RETRYABLE, None, POLICY, None, NOW, random.Random(7))
    assert again == decide(RUNNING, FAILED_RETRYABLE, None, POLICY, None, NOW, random.Random(7))


def test_a_result_that_needs_an_unreadable_retry_policy_raises_its_reason() -> None:
    with pytest.raises(ValueError, match="does not parse"):
        decide(RUNNING, FAILED_RETRYABLE, None, "the definition does not parse", None, NOW, FixedRng())


@pytest.mark.parametrize("outcome", [SUCCEEDED, FAILED_RETRYABLE, FAILED_PERMANENT, TIMED_OUT, CANCELED, 99])
def test_the_outcomes_decided_without_the_policy_never_read_it(outcome: int) -> None:
    """The store passes no policy for these (it does not parse one): the
    decision must not depend on it, and every other outcome must read it."""
    unreadable = "the definition does not parse"
    if outcome in DECIDED_WITHOUT_POLICY:
        assert decide(RUNNING, outcome, None, unreadable, None, NOW, FixedRng()) == decide(
            RUNNING, outcome, None, POLICY, None, NOW, FixedRng()
        )
    else:
        with pytest.raises(ValueError, match="does not parse"):
            decide(RUNNING, outcome, None, unreadable, None, NOW, FixedRng())


@pytest.mark.parametrize(
    "outcome, host, handed_out_at_us, expected",
    [
        (SUCCEEDED, "example.com", NOW_US - 2_500_000, BreakerEvent("example.com", False, 2.5)),
        (FAILED_RETRYABLE, "example.com", NOW_US - 1_000_000, BreakerEvent("example.com", True, 1.0)),
        (TIMED_OUT, "example.com", NOW_US, BreakerEvent("example.com", True, 0.0)),
        (TIMED_OUT, "example.com", None, BreakerEvent("example.com", True, 0.0)),
        (FAILED_PERMANENT, "example.com", NOW_US, None),
        (CANCELED, "example.com", NOW_US, None),
        (FAILED_RETRYABLE, "", NOW_US, None),
    ],
    ids=["success", "retryable", "timeout", "never handed out", "permanent", "canceled", "handler target"],
)
def test_breaker_event(outcome, host, handed_out_at_us, expected) -> None:
    assert breaker_event(outcome, host, handed_out_at_us, NOW_US) == expected
