"""This server's partition keys, which of them it owns, and the announcement of every change.

:class:`~tickwheel_server.dispatcher.ownership.PartitionOwnership` wins
partition keys in the lease store (``held``), raises their epochs in the SQL
store (``fenced``) and reports as owned only the fenced keys of the current
session. :class:`Holdings` is that record; every change to what is owned
goes through :meth:`Holdings.announce`, so :attr:`Holdings.generation`,
:meth:`Holdings.wait_changed` and the listeners never miss one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..lease.base import Session
from ..lease.types import Ownership

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OwnershipChange:
    """Passed to listeners whenever :meth:`PartitionOwnership.owned` changes."""

    acquired: Mapping[int, int]
    """Partitions now owned, with their epoch (rebuild their timers from the store)."""
    lost: frozenset[int]
    """Partitions no longer owned (drop their timers; stop claiming them)."""
    owned: Mapping[int, int]
    """Everything owned after the change."""
    reason: str
    generation: int


class Holdings:
    """The partition keys won, the fenced ones, and the listeners of changes.

    Contract:

    * ``held``: partition -> the :class:`Ownership` of its key, won under
      ``session`` (keys of an earlier session are dropped by
      :meth:`keep_session`); ``fenced`` is the subset whose epoch was raised.
    * :meth:`owned` is partition -> epoch of the fenced keys held under
      ``session``; empty at once when ``session`` is lost.
    * Whoever changes what :meth:`owned` returns calls :meth:`announce` (the
      methods here that do so say it): it bumps :attr:`generation`, wakes
      :meth:`wait_changed` and calls the listeners synchronously (keep them
      short; one that raises is logged, the others still run).
    """

    def __init__(self, server_id: str, session: Session) -> None:
        self.server_id = server_id
        self.session = session
        """The session ownership is held under; set by the owner on a reset."""
        self.held: dict[int, Ownership] = {}
        self.fenced: set[int] = set()
        self._generation = 0
        self._changed = asyncio.Event()
        self._listeners: list[Callable[[OwnershipChange], None]] = []

    def owned(self) -> dict[int, int]:
        """Partition -> epoch of every fenced partition held under ``session``."""
        session = self.session
        if session.lost.is_set():
            return {}
        return {
            partition: self.held[partition].fencing_revision
            for partition in sorted(self.fenced)
            if self.held[partition].session is session
        }

    @property
    def generation(self) -> int:
        """Bumped on every change of :meth:`owned`."""
        return self._generation

    async def wait_changed(self, after: int) -> int:
        """Wait until :attr:`generation` is greater than ``after``; return it."""
        while self._generation <= after:
            await self._changed.wait()
        return self._generation

    def add_listener(self, listener: Callable[[OwnershipChange], None]) -> Callable[[], None]:
        """Call ``listener`` on every change; returns a function that removes it."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def keep_session(self) -> None:
        """Drop every key not won under ``session`` (after a reset, nothing else counts)."""
        self.held = {p: o for p, o in self.held.items() if o.session is self.session}
        self.fenced &= set(self.held)

    def fence(self, raised: Mapping[int, Ownership]) -> None:
        """The epochs of ``raised`` (held keys) took effect: own them, and announce it."""
        acquired = {partition: ownership.fencing_revision for partition, ownership in raised.items()}
        self.fenced.update(acquired)
        if acquired:
            self.announce(acquired=acquired, reason="acquired")

    def disown(self, partitions: Collection[int], reason: str) -> None:
        """Stop owning ``partitions`` (their keys stay held until resigned); announce those that were owned."""
        lost = self.fenced & set(partitions)
        self.fenced -= lost
        if lost:
            self.announce(lost=lost, reason=reason)

    def forget(self, partition: int, reason: str) -> None:
        """The key of ``partition`` is gone: drop it; announce if it was owned."""
        self.held.pop(partition, None)
        self.disown((partition,), reason)

    def drop_all(self, reason: str) -> list[Ownership]:
        """Drop every key (announcing what was owned); return the ownerships that were held."""
        held = list(self.held.values())
        lost = set(self.fenced)
        self.held.clear()
        self.fenced.clear()
        if lost:
            self.announce(lost=lost, reason=reason)
        return held

    def announce(self, *, acquired: Mapping[int, int] | None = None, lost: Iterable[int] = (), reason: str) -> None:
        """Tell waiters and listeners that :meth:`owned` changed."""
        self._generation += 1
        change = OwnershipChange(
            acquired=MappingProxyType(dict(acquired or {})),
            lost=frozenset(lost),
            owned=MappingProxyType(self.owned()),
            reason=reason,
            generation=self._generation,
        )
        log.info(
            "server %s: partitions %s (acquired %s, lost %s); owns %d",
            self.server_id, reason, sorted(change.acquired), sorted(change.lost), len(change.owned),
        )
        event, self._changed = self._changed, asyncio.Event()
        event.set()
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("ownership listener failed")
