"""Circuit breakers per (tenant, target host): retries pause while a host fails.

Each server keeps one :class:`CircuitBreaker`, fed with the outcome of every
HTTP-target call whose result its workers return (recorded by
:meth:`HandoutStore.record_results <tickwheel_server.store.handout.HandoutStore.record_results>`).
The window is this server's: with several servers, each sees the results of
its own workers, the usual approximation (a shared window would cost a store
write per result).

A circuit, per (tenant, host):

- **closed**: calls are counted in a sliding window (``window`` seconds, in
  60 buckets, so a circuit holds at most 60 counters whatever the window).
  Once it holds at least ``min_calls`` calls of which at least
  ``failure_ratio`` failed, the circuit **opens** for ``open_for`` seconds.
- **open**: retries of calls failed meanwhile are held until the open period
  ends (:meth:`CircuitBreaker.record` says how long). The first ``probes``
  of them come due right after it (spread over a tenth of ``open_for``):
  they are the probes; the others come due one more ``open_for`` later,
  when the probes have decided. First attempts are never held (retries
  pause, not the job's schedule), and results that arrive while open do not
  count.
- **half-open** (the open period is over): the first result of a call
  handed out after the open period ended decides: a success **closes** the
  circuit (a fresh window), a failure re-opens it for another ``open_for``.
  Results of calls started earlier do not decide. A half-open circuit that
  sees no such result within one ``window`` closes as idle.

What counts: successes, retryable failures and time-outs; canceled calls
and permanent failures (the host answered; the request is wrong) do not.

Opening, re-opening and closing are queued as :class:`CircuitChange` for
:meth:`CircuitBreaker.take_changes`, which the server drains about once a
second to raise and resolve ``circuit_open`` alerts, so no alert is written
on the results' hot path.

Holding is decided when a retry is *scheduled*, not when it is handed out:
retries already waiting when a circuit opens keep their instant (each makes
at most one more call before it is held), and nothing pulls held retries
forward when the probes close the circuit early.

Memory is bounded: at most ``max_circuits`` circuits, the least recently
used forgotten first (an open one forgotten is reported closed), and the
answers to the last :data:`REMEMBERED_CALLS` calls, so a transaction that
records the same results again (a retry after a serialization failure) gets
the same answers and counts nothing twice.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict, deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from urllib.parse import urlsplit

from tickwheel.v1 import job_pb2

from tickwheel.shared.clock import Clock


BUCKETS = 60
"""Buckets of a window: one per second with the default 60 s window."""
REMEMBERED_CALLS = 20_000
"""Calls whose answers are kept for a repeated recording (above a results batch of 2 000, many times)."""
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
    """A circuit that is not closed, as :meth:`CircuitBreaker.circuits` shows it."""

    tenant: str
    host: str
    state: str
    """``open`` or ``half_open``."""
    remaining: float
    """Seconds left of the open period (0 when half-open)."""


@dataclass(slots=True)
class _Circuit:
    buckets: deque = field(default_factory=deque)
    """``[bucket number, calls, failures]``, oldest first."""
    calls: int = 0
    failures: int = 0
    open_until: float | None = None
    """Monotonic end of the open period; None while closed."""
    probes_left: int = 0


class CircuitBreaker:
    """Every (tenant, host) circuit of this server. Thread-safe: results are
    recorded in the store's worker threads."""

    def __init__(self, settings: BreakerSettings, clock: Clock, *, rng: random.Random | None = None) -> None:
        self.settings = settings
        self._clock = clock
        self._rng = rng or random.Random()
        self._width = settings.window / BUCKETS
        self._circuits: OrderedDict[tuple[str, str], _Circuit] = OrderedDict()
        self._not_closed: set[tuple[str, str]] = set()
        self._answers: OrderedDict[Hashable, float | None] = OrderedDict()
        self._changes: list[CircuitChange] = []
        self._lock = threading.Lock()
        self.opened = 0
        """Circuits opened or re-opened so far (a metric)."""

    def record(self, tenant: str, host: str, call: Hashable, *, failed: bool, age: float = 0.0) -> float | None:
        """Count one call's outcome and say how long its retry must wait.

        ``call`` names the call (execution id and delivery): recording it
        again returns the first answer and counts nothing. ``age`` is how
        long ago the call was handed out (seconds), so a result of a call
        started before an open period ended does not decide the half-open
        circuit. Returns None when a retry may follow its normal backoff,
        else the seconds from now before which it must not start.
        """
        now = self._clock.monotonic()
        with self._lock:
            if call in self._answers:
                self._answers.move_to_end(call)
                return self._answers[call]
            key = (tenant, host)
            circuit = self._circuits.get(key)
            if circuit is None:
                circuit = self._circuits[key] = _Circuit()
                if len(self._circuits) > self.settings.max_circuits:
                    self._forget_oldest()
            else:
                self._circuits.move_to_end(key)
            answer = self._record(key, circuit, failed, now - age, now)
            self._answers[call] = answer
            if len(self._answers) > REMEMBERED_CALLS:
                self._answers.popitem(last=False)
            return answer

    def take_changes(self) -> list[CircuitChange]:
        """The openings and closings since the last call, oldest first; a
        half-open circuit left without a deciding result for one window is
        closed here (as idle)."""
        now = self._clock.monotonic()
        with self._lock:
            for key in sorted(self._not_closed):
                circuit = self._circuits[key]
                if now >= circuit.open_until + self.settings.window:
                    self._close(key, circuit, f"no call to {key[1]} decided within {self.settings.window:g} s: idle")
            changes, self._changes = self._changes, []
            return changes

    def circuits(self) -> list[CircuitView]:
        """The circuits that are not closed, by (tenant, host)."""
        now = self._clock.monotonic()
        with self._lock:
            views = []
            for key in sorted(self._not_closed):
                remaining = max(0.0, self._circuits[key].open_until - now)
                views.append(CircuitView(key[0], key[1], OPEN if remaining > 0 else HALF_OPEN, remaining))
            return views

    def state(self, tenant: str, host: str) -> str:
        """``closed``, ``open`` or ``half_open``."""
        with self._lock:
            circuit = self._circuits.get((tenant, host))
            if circuit is None or circuit.open_until is None:
                return CLOSED
            return OPEN if self._clock.monotonic() < circuit.open_until else HALF_OPEN

    def __len__(self) -> int:
        return len(self._circuits)

    # -- under the lock ---------------------------------------------------------------------------

    def _record(self, key, circuit: _Circuit, failed: bool, started: float, now: float) -> float | None:
        settings = self.settings
        if circuit.open_until is None:
            self._count(circuit, failed, now)
            if circuit.calls < settings.min_calls or circuit.failures < settings.failure_ratio * circuit.calls:
                return None
            self._open(
                key, circuit, now,
                f"{circuit.failures} of {circuit.calls} calls in {settings.window:g} s failed "
                f"({circuit.failures / circuit.calls:.0%}; {settings.failure_ratio:.0%} opens it)",
            )  # fmt: skip
        elif now < circuit.open_until or started < circuit.open_until:
            pass  # open, or a call from before the open period ended: it does not decide
        elif not failed:
            self._close(key, circuit, f"a probe call to {key[1]} succeeded")
            return None
        else:
            self._open(key, circuit, now, f"a probe call to {key[1]} failed")
        return self._hold(circuit, now) if failed else None

    def _count(self, circuit: _Circuit, failed: bool, now: float) -> None:
        bucket = int(now / self._width)
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

    def _hold(self, circuit: _Circuit, now: float) -> float | None:
        """A failed call's retry: the probes come due when the pause ends, the rest one pause later."""
        spread = self._rng.uniform(0, SPREAD * self.settings.open_for)
        if circuit.probes_left > 0:
            circuit.probes_left -= 1
            return circuit.open_until - now + spread if now < circuit.open_until else None
        return max(circuit.open_until, now) - now + self.settings.open_for + spread

    def _open(self, key, circuit: _Circuit, now: float, reason: str) -> None:
        circuit.open_until = now + self.settings.open_for
        circuit.probes_left = self.settings.probes
        circuit.buckets.clear()
        circuit.calls = circuit.failures = 0
        self._not_closed.add(key)
        self.opened += 1
        self._changes.append(CircuitChange(key[0], key[1], True, reason, self._clock.now(), self.settings.open_for))

    def _close(self, key, circuit: _Circuit, reason: str) -> None:
        circuit.open_until = None
        circuit.probes_left = 0
        self._not_closed.discard(key)
        self._changes.append(CircuitChange(key[0], key[1], False, reason, self._clock.now()))

    def _forget_oldest(self) -> None:
        key, circuit = self._circuits.popitem(last=False)
        if circuit.open_until is not None:
            self._close(key, circuit, f"forgotten: more than {self.settings.max_circuits} circuits")


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
