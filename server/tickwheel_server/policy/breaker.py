"""The circuit breaker's rule, per (tenant, target host): retries pause while a host fails. Pure.

A circuit:

- **closed**: calls are counted in a sliding window (``window`` seconds, in
  60 buckets, so a circuit holds at most 60 counters whatever the window).
  Once it holds at least ``min_calls`` calls of which at least
  ``failure_ratio`` failed, the circuit **opens** for ``open_for`` seconds.
- **open**: retries of calls failed meanwhile are held until the open period
  ends (:func:`record_call` says how long). The first ``probes`` of them come
  due right after it (spread over a tenth of ``open_for``): they are the
  probes; the others come due one more ``open_for`` later, when the probes
  have decided. First attempts are never held (retries pause, not the job's
  schedule), and results that arrive while open do not count.
- **half-open** (the open period is over): the first result of a call
  handed out after the open period ended decides: a success **closes** the
  circuit (a fresh window), a failure re-opens it for another ``open_for``.
  Results of calls started earlier do not decide. A half-open circuit that
  sees no such result within one ``window`` closes as idle
  (:func:`idle_expired`).

What counts: successes, retryable failures and time-outs; canceled calls
and permanent failures (the host answered; the request is wrong) do not.

Holding is decided when a retry is *scheduled*, not when it is handed out:
retries already waiting when a circuit opens keep their instant (each makes
at most one more call before it is held), and nothing pulls held retries
forward when the probes close the circuit early.

Every function here takes the instant it decides at (``now``, seconds of a
monotonic clock) and reads no clock; the spread of held retries comes from
the ``rng`` passed in. :class:`~tickwheel_server.circuits.CircuitBreaker`
holds one :class:`Circuit` per (tenant, host) for a server, thread-safe and
bounded, and turns the transitions into :class:`CircuitChange` alerts.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from urllib.parse import urlsplit

from tickwheel.v1 import job_pb2

BUCKETS = 60
"""Buckets of a window: one per second with the default 60 s window."""
SPREAD = 0.1
"""Held retries come due spread over this share of ``open_for``, so probes do not land at one instant."""

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


@dataclass(frozen=True)
class BreakerSettings:
    """The breaker's settings (``--breaker-*`` flags); checked when built."""

    window: float = 60.0
    """Seconds of calls a decision looks at (sliding)."""
    min_calls: int = 20
    """Calls the window must hold before it can open the circuit."""
    failure_ratio: float = 0.5
    """Share of failed calls in the window (0 < r <= 1) that opens the circuit."""
    open_for: float = 30.0
    """Seconds retries to the host pause before probes decide."""
    probes: int = 1
    """Held retries that come due first, as probes, when the pause ends."""
    max_circuits: int = 20_000
    """(tenant, host) circuits kept; the least recently used are forgotten."""

    def __post_init__(self) -> None:
        if not 1 <= self.window <= 3600:
            raise ValueError("window: between 1 and 3600 seconds")
        if not 1 <= self.min_calls <= 1_000_000:
            raise ValueError("min_calls: between 1 and 1000000")
        if not 0 < self.failure_ratio <= 1:
            raise ValueError("failure_ratio: greater than 0 and at most 1")
        if not 0 < self.open_for <= 86_400:
            raise ValueError("open_for: greater than 0 and at most 86400 seconds")
        if not 1 <= self.probes <= 1000:
            raise ValueError("probes: between 1 and 1000")
        if self.max_circuits < 1:
            raise ValueError("max_circuits: at least 1")


@dataclass(frozen=True)
class CircuitChange:
    """A circuit opened (again) or closed."""

    tenant: str
    host: str
    opened: bool
    """True: opened or re-opened; False: closed (a probe succeeded, idle, or forgotten)."""
    reason: str
    """Why, for the alert and the log: the window's counts, or what closed it."""
    at: datetime
    """When (wall clock)."""
    open_for: float = 0.0
    """Seconds retries pause (when opened)."""


@dataclass(frozen=True)
class CircuitView:
    """A circuit that is not closed, as
    :meth:`~tickwheel_server.circuits.CircuitBreaker.circuits` shows it."""

    tenant: str
    host: str
    state: str
    """``open`` or ``half_open``."""
    remaining: float
    """Seconds left of the open period (0 when half-open)."""


@dataclass(slots=True)
class Circuit:
    """One (tenant, host) circuit's state."""

    buckets: deque = field(default_factory=deque)
    """``[bucket number, calls, failures]``, oldest first."""
    calls: int = 0
    failures: int = 0
    open_until: float | None = None
    """Monotonic end of the open period; None while closed."""
    probes_left: int = 0


@dataclass(frozen=True, slots=True)
class Transition:
    """What one recorded call did to its circuit."""

    hold: float | None
    """None: the call's retry follows its normal backoff; else the seconds
    from ``now`` before which it must not start."""
    opened: bool | None = None
    """True: the circuit opened (or re-opened); False: it closed; None: neither."""
    reason: str = ""
    """Why it opened or closed, for the alert and the log."""


def state_of(circuit: Circuit | None, now: float) -> str:
    """``closed``, ``open`` or ``half_open`` at ``now``."""
    if circuit is None or circuit.open_until is None:
        return CLOSED
    return OPEN if now < circuit.open_until else HALF_OPEN


def record_call(
    circuit: Circuit, settings: BreakerSettings, host: str, *, failed: bool, started: float, now: float,
    rng: random.Random,
) -> Transition:
    """Count one call's outcome at ``now`` in ``circuit`` (updated in place)
    and say how long its retry must wait.

    ``started`` is when the call was handed out: a result of a call started
    before the open period ended does not decide a half-open circuit. One
    ``rng`` draw per failed call spreads the held retries.
    """
    if circuit.open_until is None:
        _count(circuit, settings, failed, now)
        if circuit.calls < settings.min_calls or circuit.failures < settings.failure_ratio * circuit.calls:
            return Transition(None)
        reason = (
            f"{circuit.failures} of {circuit.calls} calls in {settings.window:g} s failed "
            f"({circuit.failures / circuit.calls:.0%}; {settings.failure_ratio:.0%} opens it)"
        )
        _open(circuit, settings, now)
        return Transition(_hold(circuit, settings, now, rng) if failed else None, True, reason)
    if now < circuit.open_until or started < circuit.open_until:
        # Open, or a call from before the open period ended: it does not decide.
        return Transition(_hold(circuit, settings, now, rng) if failed else None)
    if not failed:
        close(circuit)
        return Transition(None, False, f"a probe call to {host} succeeded")
    _open(circuit, settings, now)
    return Transition(_hold(circuit, settings, now, rng), True, f"a probe call to {host} failed")


def idle_expired(circuit: Circuit, settings: BreakerSettings, now: float) -> bool:
    """True when a circuit that is not closed saw no deciding result for one
    ``window`` after its open period ended: it closes as idle."""
    return circuit.open_until is not None and now >= circuit.open_until + settings.window


def close(circuit: Circuit) -> None:
    """Close ``circuit`` (a probe succeeded, idle, or forgotten)."""
    circuit.open_until = None
    circuit.probes_left = 0


def _count(circuit: Circuit, settings: BreakerSettings, failed: bool, now: float) -> None:
    bucket = int(now / (settings.window / BUCKETS))
    buckets = circuit.buckets
    while buckets and buckets[0][0] <= bucket - BUCKETS:
        _, calls, failures = buckets.popleft()
        circuit.calls -= calls
        circuit.failures -= failures
    if not buckets or buckets[-1][0] != bucket:
        buckets.append([bucket, 0, 0])
    last = buckets[-1]
    last[1] += 1
    circuit.calls += 1
    if failed:
        last[2] += 1
        circuit.failures += 1


def _hold(circuit: Circuit, settings: BreakerSettings, now: float, rng: random.Random) -> float | None:
    """A failed call's retry: the probes come due when the pause ends, the rest one pause later."""
    spread = rng.uniform(0, SPREAD * settings.open_for)
    if circuit.probes_left > 0:
        circuit.probes_left -= 1
        return circuit.open_until - now + spread if now < circuit.open_until else None
    return max(circuit.open_until, now) - now + settings.open_for + spread


def _open(circuit: Circuit, settings: BreakerSettings, now: float) -> None:
    circuit.open_until = now + settings.open_for
    circuit.probes_left = settings.probes
    circuit.buckets.clear()
    circuit.calls = circuit.failures = 0


@lru_cache(maxsize=4096)
def _host_of_url(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def http_target_host(job: job_pb2.Job) -> str:
    """The host a job's HTTP target calls (lower case, no port), or ``''``
    for a handler target: the breaker's key beside the tenant."""
    if job.target.WhichOneof("kind") != "http":
        return ""
    return _host_of_url(job.target.http.url)
