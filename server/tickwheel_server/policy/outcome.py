"""What a worker's result does to its execution: succeed, retry at an instant,
dead-letter with a reason, or cancel (docs/architecture.md, Semantics:
Retries). Pure: the row's facts, the result, the retry policy, the circuit's
hold and ``now`` in; the decision out; the store writes it.

The circuit breaker is consulted in two steps because counting a result and
answering how long its retry must wait are one call of the breaker
(:meth:`~tickwheel_server.circuits.CircuitBreaker.record`, whose answer
already counts this result): :func:`breaker_event` says what to report (or
nothing), the store reports it and passes the answer to :func:`decide` as
``hold``.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import NamedTuple

from tickwheel.v1 import worker_pb2

from tickwheel.shared.ids import to_us

from .retry import backoff_delay

SUCCEEDED = worker_pb2.RESULT_OUTCOME_SUCCEEDED
FAILED_RETRYABLE = worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE
FAILED_PERMANENT = worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT
TIMED_OUT = worker_pb2.RESULT_OUTCOME_TIMED_OUT
CANCELED = worker_pb2.RESULT_OUTCOME_CANCELED

BREAKER_OUTCOMES = frozenset((SUCCEEDED, FAILED_RETRYABLE, TIMED_OUT))
"""Outcomes the circuit breaker counts: a permanent failure says the request
is wrong, not that the host is down; a cancel says nothing of the host."""

DECIDED_WITHOUT_POLICY = frozenset((SUCCEEDED, CANCELED, FAILED_PERMANENT))
"""Outcomes :func:`decide` settles without reading the retry policy: the
caller need not read (or parse) the policy for them."""

DECIDED_WITHOUT_JOB = frozenset((SUCCEEDED, CANCELED))
"""Outcomes :func:`decide` settles alike whether the job still exists: the
caller need not read the job for them (:attr:`Facts.job_deleted`)."""


class RetryPolicy(NamedTuple):
    """A definition's retry policy, its defaults filled in (:mod:`tickwheel_server.jobspec`)."""

    max_attempts: int
    initial_backoff: timedelta
    max_backoff: timedelta


class Facts(NamedTuple):
    """What the decision reads of the execution row the result ends."""

    attempt: int
    cancel_requested: bool
    """Someone asked it to stop (``cancel_requested_at`` is set)."""
    cancel_reason: str | None
    job_deleted: bool = False
    """Its job was deleted while it ran (read for outcomes not in :data:`DECIDED_WITHOUT_JOB`)."""


class BreakerEvent(NamedTuple):
    """One HTTP call's outcome for the circuit of (tenant, ``host``)."""

    host: str
    failed: bool
    age: float
    """Seconds since the call was handed out (a call older than an open period does not decide a half-open circuit)."""


class Decision(NamedTuple):
    """What to write for one result."""

    status: str
    """The execution's new status: ``succeeded``, ``scheduled`` (a retry), ``dead`` or ``canceled``."""
    attempt_status: str
    """The ended attempt's row: ``succeeded``, ``failed``, ``timed_out`` or ``canceled``."""
    attempt: int
    """The execution's attempt after: the next one for a retry, else unchanged."""
    ready_at_us: int | None
    """When the retry becomes ready; None unless ``status`` is ``scheduled``."""
    reason: str
    """The dead or cancel reason written (``dead_reason``); '' otherwise."""

    @property
    def dead(self) -> bool:
        """The execution is dead-lettered (its alert is raised)."""
        return self.status == "dead"


def breaker_event(outcome: int, host: str, handed_out_at_us: int | None, now_us: int) -> BreakerEvent | None:
    """The event to report to the circuit breaker for a result with
    ``outcome`` of a call to ``host`` ('' for a handler target: none), or
    None when the breaker does not count it."""
    if not host or outcome not in BREAKER_OUTCOMES:
        return None
    age = (now_us - (handed_out_at_us if handed_out_at_us is not None else now_us)) / 1e6
    return BreakerEvent(host, outcome != SUCCEEDED, age)


def decide(
    facts: Facts,
    outcome: int,
    retry_after: timedelta | None,
    retry: RetryPolicy | str,
    hold: float | None,
    now: datetime,
    rng: random.Random,
) -> Decision:
    """The decision for a result with ``outcome`` (a ``tickwheel.v1.ResultOutcome``):

    - succeeded: ``succeeded``;
    - canceled by its worker: ``canceled`` (the cancel request's reason, else
      "canceled: by its worker");
    - any other outcome of a run whose job was deleted while it ran
      (failed, permanently or not, timed out): ``canceled`` (the cancel
      request's reason, which the caller gives as "canceled: job deleted"
      when there was none), the attempt ``failed`` or ``timed_out`` as it
      ended: not retried (a retry would have no target) and not dead (a dead
      letter and its alert ask someone to fix or replay a job that no longer
      exists);
    - failed permanently: ``dead`` ("failed permanently"), not retried;
    - any other failure (retryable, timed out, unknown), when a cancel was
      requested: ``canceled`` (its reason, else "canceled: by request"), not
      retried;
    - else, at the last attempt of ``retry``: ``dead`` ("attempts exhausted
      (n of max)");
    - else ``scheduled`` for the next attempt, ready after the full-jitter
      backoff (:func:`~.retry.backoff_delay`, at least the target's
      ``retry_after`` within the cap), and no earlier than ``hold`` seconds
      when the circuit of its target is open.

    ``retry`` as a string says why the retry policy cannot be read (its
    definition is damaged); a result that needs it raises ValueError with
    that reason, and the store refuses it alone. ``retry`` is not read for
    an outcome in :data:`DECIDED_WITHOUT_POLICY`. ``rng`` is drawn from only
    for a retry."""
    attempt_status = "timed_out" if outcome == TIMED_OUT else "failed"
    if outcome == SUCCEEDED:
        return Decision("succeeded", "succeeded", facts.attempt, None, "")
    if outcome == CANCELED:
        return Decision("canceled", "canceled", facts.attempt, None, facts.cancel_reason or "canceled: by its worker")
    if facts.job_deleted:  # nothing to retry, no one to alert
        return Decision("canceled", attempt_status, facts.attempt, None, facts.cancel_reason or "canceled: by request")
    if outcome == FAILED_PERMANENT:
        return Decision("dead", "failed", facts.attempt, None, "failed permanently")
    if facts.cancel_requested:  # asked to stop: not retried
        return Decision("canceled", attempt_status, facts.attempt, None, facts.cancel_reason or "canceled: by request")
    if isinstance(retry, str):
        raise ValueError(retry)
    if facts.attempt >= retry.max_attempts:
        reason = f"attempts exhausted ({facts.attempt} of {retry.max_attempts})"
        return Decision("dead", attempt_status, facts.attempt, None, reason)
    delay = backoff_delay(facts.attempt + 1, retry.initial_backoff, retry.max_backoff, rng, retry_after)
    if hold is not None:  # the circuit of its (tenant, host) is open: the retry waits for it
        delay = max(delay, timedelta(seconds=hold))
    return Decision("scheduled", attempt_status, facts.attempt + 1, to_us(now + delay), "")
