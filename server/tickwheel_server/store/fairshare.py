"""One server's fair-share passes between hand-out rounds, thread-safe.

The share each tenant gets in a round is the rule in
:mod:`tickwheel_server.policy.fairness`; this holder keeps its state for the
hand-out store (:class:`~tickwheel_server.store.handout.HandoutStore`), whose
rounds run their transactions in executor threads. A round works on a copy
(:meth:`FairShare.begin`) and stores it only when its transaction committed
(:meth:`FairShare.commit`), so a retried transaction decides the same way.
No SQL: it lives beside its one user.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from ..policy.fairness import Shares

MAX_TRACKED = 10_000
"""Passes kept for idle tenants beyond this many are dropped (they would
restart at the virtual time anyway)."""


class FairShare:
    """One server's fair-share state between rounds (thread-safe: rounds run
    their transactions in executor threads)."""

    def __init__(self) -> None:
        self._shares = Shares()
        self._lock = threading.Lock()

    def begin(self) -> Shares:
        """A copy for one round to work on."""
        with self._lock:
            return self._shares.copy()

    def commit(self, shares: Shares, active: Iterable[str] = ()) -> None:
        """Keep what a committed round decided. ``active``: the tenants it
        saw with ready work; passes of others may be dropped when too many
        are tracked (their next round restarts them at the virtual time)."""
        with self._lock:
            merged = self._shares
            merged.virtual = max(merged.virtual, shares.virtual)
            merged.passes.update(shares.passes)
            if len(merged.passes) > MAX_TRACKED:
                keep = set(active)
                merged.passes = {
                    name: value for name, value in merged.passes.items() if name in keep or value > merged.virtual
                }

    def passes(self) -> Mapping[str, float]:
        with self._lock:
            return dict(self._shares.passes)
