"""This server's circuit breakers: one circuit per (tenant, target host), kept thread-safe and bounded.

Each server keeps one :class:`CircuitBreaker`, fed with the outcome of every
HTTP-target call whose result its workers return (recorded by
:meth:`OutcomeStore.record_results <tickwheel_server.store.outcomes.OutcomeStore.record_results>`).
The window is this server's: with several servers, each sees the results of
its own workers, the usual approximation (a shared window would cost a store
write per result). What a circuit does with a call is the rule in
:mod:`tickwheel_server.policy.breaker`; this holder reads the clock, keeps
the circuits and queues what changed.

Opening, re-opening and closing are queued as
:class:`~tickwheel_server.policy.breaker.CircuitChange` for
:meth:`CircuitBreaker.take_changes`, which the server drains about once a
second to raise and resolve ``circuit_open`` alerts, so no alert is written
on the results' hot path.

Memory is bounded: at most ``max_circuits`` circuits, the least recently
used forgotten first (an open one forgotten is reported closed), and the
answers to the last :data:`REMEMBERED_CALLS` calls, so a transaction that
records the same results again (a retry after a serialization failure) gets
the same answers and counts nothing twice.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from collections.abc import Hashable

from tickwheel.shared.clock import Clock

from .policy.breaker import (
    HALF_OPEN,
    OPEN,
    BreakerSettings,
    Circuit,
    CircuitChange,
    CircuitView,
    close,
    idle_expired,
    record_call,
    state_of,
)

REMEMBERED_CALLS = 20_000
"""Calls whose answers are kept for a repeated recording (above a results batch of 2 000, many times)."""


class CircuitBreaker:
    """Every (tenant, host) circuit of this server. Thread-safe: results are
    recorded in the store's worker threads."""

    def __init__(self, settings: BreakerSettings, clock: Clock, *, rng: random.Random | None = None) -> None:
        self.settings = settings
        self._clock = clock
        self._rng = rng or random.Random()
        self._circuits: OrderedDict[tuple[str, str], Circuit] = OrderedDict()
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
                circuit = self._circuits[key] = Circuit()
                if len(self._circuits) > self.settings.max_circuits:
                    self._forget_oldest()
            else:
                self._circuits.move_to_end(key)
            step = record_call(circuit, self.settings, host, failed=failed, started=now - age, now=now, rng=self._rng)
            if step.opened is True:
                self._not_closed.add(key)
                self.opened += 1
                self._changes.append(
                    CircuitChange(tenant, host, True, step.reason, self._clock.now(), self.settings.open_for)
                )
            elif step.opened is False:
                self._closed(key, step.reason)
            self._answers[call] = step.hold
            if len(self._answers) > REMEMBERED_CALLS:
                self._answers.popitem(last=False)
            return step.hold

    def take_changes(self) -> list[CircuitChange]:
        """The openings and closings since the last call, oldest first; a
        half-open circuit left without a deciding result for one window is
        closed here (as idle)."""
        now = self._clock.monotonic()
        with self._lock:
            for key in sorted(self._not_closed):
                circuit = self._circuits[key]
                if idle_expired(circuit, self.settings, now):
                    close(circuit)
                    self._closed(key, f"no call to {key[1]} decided within {self.settings.window:g} s: idle")
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
            return state_of(self._circuits.get((tenant, host)), self._clock.monotonic())

    def __len__(self) -> int:
        return len(self._circuits)

    # -- under the lock ---------------------------------------------------------------------------

    def _closed(self, key: tuple[str, str], reason: str) -> None:
        self._not_closed.discard(key)
        self._changes.append(CircuitChange(key[0], key[1], False, reason, self._clock.now()))

    def _forget_oldest(self) -> None:
        key, circuit = self._circuits.popitem(last=False)
        if circuit.open_until is not None:
            close(circuit)
            self._closed(key, f"forgotten: more than {self.settings.max_circuits} circuits")
