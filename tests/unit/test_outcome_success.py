"""The results path's shortcut for a plain success (``succeeded``) makes
the update ``OutcomeStore._outcome`` decides, wherever record_results takes
it: a success with no error text whose decision reads no definition (a
handler target's, or any with no circuit breaker), whatever the row says
of attempts, retries, cancel requests or waits. Where it does not apply
(an error text, an HTTP target's success the breaker counts, any other
outcome) the decision is left to ``_outcome``."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timezone

import sqlalchemy as sa
from tickwheel.v1 import worker_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.circuits import CircuitBreaker
from tickwheel_server.policy.breaker import BreakerSettings
from tickwheel_server.store.executions import ResultIn
from tickwheel_server.store.outcomes import _SUCCEEDED, OutcomeStore, _ResultRow
from tickwheel_server.store.plain_successes import plain_success, succeeded

NOW = datetime(2027, 1, 1, 12, tzinfo=timezone.utc)
NOW_US = to_us(NOW)


def rows() -> list[_ResultRow]:
    made = []
    for handler, attempt, cancel, waiting in itertools.product(("echo", None), (1, 4), (None, NOW_US - 5), (None, 7)):
        made.append(_ResultRow(
            f"job_1:{len(made)}", "job_1", "acme", 3, "running", 2, attempt, NOW_US - 90, NOW_US - 60, NOW_US - 50,
            None, waiting, cancel, "stop" if cancel else None, handler, None, None,
        ))  # fmt: skip
    return made


def results(row: _ResultRow) -> list[ResultIn]:
    outcomes = (_SUCCEEDED, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, worker_pb2.RESULT_OUTCOME_CANCELED,
                worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, worker_pb2.RESULT_OUTCOME_TIMED_OUT)
    return [ResultIn(row.id, row.delivery, row.attempt, outcome, error, "w1", ("acme",), None, NOW_US - 45, True, b"")
            for outcome in outcomes for error in ("", "boom")]


def test_the_shortcut_is_the_decision_wherever_it_is_taken() -> None:
    clock = FakeClock(NOW)
    taken = 0
    for breaker in (None, CircuitBreaker(BreakerSettings(), clock)):
        store = OutcomeStore(sa.create_engine("sqlite://"), clock, rng=random.Random(7), breaker=breaker)
        for row in rows():
            for result in results(row):
                if result.outcome != _SUCCEEDED or result.error or store._needs_definition(row, result):
                    continue  # record_results leaves these to _outcome
                taken += 1
                update, attempt_status, retry, dead = store._outcome(row, result, NOW, NOW_US)
                assert succeeded(row, NOW_US) == update, (row, result)
                assert (attempt_status, retry, dead) == ("succeeded", None, None)
                assert plain_success(update, row, NOW_US)
    # Every row with no breaker, the handler targets' rows with one.
    assert taken == 16 + 8
