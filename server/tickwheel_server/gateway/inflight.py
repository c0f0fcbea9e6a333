"""The executions this server's workers hold, and whether they are alive.

Nothing is written per heartbeat: each delivery handed out (or re-attached)
here is an entry in memory with the monotonic instant of its last sign of
life. A worker's heartbeat lists the deliveries it still runs; each listed
one is renewed. :meth:`InFlight.expired` returns the deliveries to requeue:

- attached to a live stream, but not renewed for ``timeout`` (the worker is
  stuck, or lost the execution): it is requeued even though the stream is up;
- orphaned (their stream closed) and not re-attached within ``grace``: the
  worker died, or reconnected elsewhere and re-attached there (then the
  requeue, conditional on this server's session, changes nothing).

A delivery whose result this server holds but has not recorded yet
(:meth:`hold_result`: queued behind a slow or unavailable store) is alive
whatever its heartbeats and its stream say: the worker no longer lists a
finished attempt, and requeuing it would run it twice. It is never
returned by :meth:`expired` until the result is recorded (:meth:`done`) or
refused (:meth:`result_refused`): late, not lost, not duplicated.

A delivery someone asked to stop (CancelExecution, an overlap ``replace``)
is told to its worker once per attachment (:meth:`to_cancel`).

All operations are O(1) per delivery except :meth:`expired`, which scans
every entry; it runs about once a second.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

Key = tuple[str, int]
"""(execution id, delivery)."""

C = TypeVar("C")


@dataclass(slots=True)
class Entry(Generic[C]):
    key: Key
    partition: int
    connection: C | None
    """The stream holding it; None once that stream closed (orphaned)."""
    worker_id: str
    last_seen: float
    """Monotonic instant of the hand-out, re-attachment or latest heartbeat."""
    orphaned_at: float | None = None
    cancel_sent: bool = False
    """The worker holding it was told to cancel it (a cancel request)."""
    result_pending: bool = False
    """Its worker's result is queued here and not yet recorded: never expired."""


@dataclass(frozen=True)
class Expired(Generic[C]):
    key: Key
    partition: int
    connection: C | None
    """Still attached here (stuck): the worker is told to cancel it."""
    worker_id: str
    reason: str


class Holding(Enum):
    """What :meth:`InFlight.hold_result` found for a result a stream sent."""

    HELD = "held"
    """The stream holds the delivery: its result is now pending."""
    DUPLICATE = "duplicate"
    """The stream holds it and a result for it is pending already."""
    NOT_HELD = "not held"
    """Unknown here, or held by another stream (or by none: orphaned)."""


class InFlight(Generic[C]):
    def __init__(self, *, timeout: float, grace: float) -> None:
        self.timeout = timeout
        self.grace = grace
        self._entries: dict[Key, Entry[C]] = {}
        self._by_connection: dict[int, set[Key]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def held_by(self, connection: C) -> list[Key]:
        return sorted(self._by_connection.get(id(connection), ()))

    def holder(self, key: Key) -> C | None:
        """The live stream holding ``key`` here, or None (unknown or orphaned)."""
        entry = self._entries.get(key)
        return entry.connection if entry is not None else None

    def attach(self, connection: C, key: Key, partition: int, worker_id: str, now: float) -> None:
        """``connection`` holds ``key`` from now on (a hand-out or a re-attachment).
        A result pending for it stays pending."""
        previous = self._entries.get(key)
        self._forget_connection_of(key)
        self._entries[key] = Entry(key, partition, connection, worker_id, now,
                                   result_pending=previous is not None and previous.result_pending)
        self._by_connection.setdefault(id(connection), set()).add(key)

    def attach_many(self, connection: C, items: Sequence[tuple[Key, int]], worker_id: str, now: float) -> None:
        """:meth:`attach` of each (key, partition) of ``items`` to ``connection``
        (a batch sent to one stream): one call, and for a key not held yet
        (a new hand-out) only its new entry."""
        if not items:
            return
        entries = self._entries
        held = self._by_connection.setdefault(id(connection), set())
        for key, partition in items:
            if key in entries:  # held before (by this stream or another): the general case
                self.attach(connection, key, partition, worker_id, now)
                held = self._by_connection[id(connection)]  # that may have replaced the set
                continue
            entries[key] = Entry(key, partition, connection, worker_id, now)
            held.add(key)

    def hold_result(self, connection: C, key: Key) -> Holding:
        """A result for ``key`` arrived on ``connection``: HELD (now pending,
        so never expired until :meth:`done` or :meth:`result_refused`) only
        when that stream holds it."""
        entry = self._entries.get(key)
        if entry is None or entry.connection is not connection:
            return Holding.NOT_HELD
        if entry.result_pending:
            return Holding.DUPLICATE
        entry.result_pending = True
        return Holding.HELD

    def result_refused(self, key: Key) -> None:
        """The pending result for ``key`` could not be recorded and was refused:
        the delivery is watched again (its worker forgot it, so it expires)."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.result_pending = False

    def beat(self, connection: C, keys: Iterable[Key], now: float) -> int:
        """Renew the deliveries ``connection`` says it runs; returns how many it holds here."""
        renewed = 0
        for key in keys:
            entry = self._entries.get(key)
            if entry is not None and entry.connection is connection:
                entry.last_seen = now
                renewed += 1
        return renewed

    def done(self, key: Key) -> None:
        """The delivery ended (result recorded, requeued, released). One
        lookup of its entry (a result batch ends thousands)."""
        self._unhold(self._entries.pop(key, None), key)

    def detach(self, connection: C, now: float) -> int:
        """``connection`` closed: what it held waits ``grace`` for a re-attachment."""
        keys = self._by_connection.pop(id(connection), set())
        for key in keys:
            entry = self._entries[key]
            entry.connection = None
            entry.orphaned_at = now
        return len(keys)

    def expired(self, now: float) -> list[Expired[C]]:
        """Deliveries to requeue now. They stay tracked until :meth:`done`."""
        due: list[Expired[C]] = []
        for entry in self._entries.values():
            if entry.result_pending:
                continue
            if entry.connection is None:
                if entry.orphaned_at is not None and now - entry.orphaned_at >= self.grace:
                    due.append(Expired(entry.key, entry.partition, None, entry.worker_id,
                                       f"worker {entry.worker_id} disconnected and did not re-attach "
                                       f"within {self.grace:g} s"))
            elif now - entry.last_seen >= self.timeout:
                due.append(Expired(entry.key, entry.partition, entry.connection, entry.worker_id,
                                   f"no heartbeat from worker {entry.worker_id} for {self.timeout:g} s"))
        return due

    def to_cancel(self, keys: Iterable[Key]) -> dict[int, tuple[C, list[Key]]]:
        """Of ``keys`` (deliveries someone asked to stop), those held by a live
        stream here that was not told yet, by stream (``id(connection)`` →
        (connection, keys)); each is marked told. An orphaned delivery is
        told once a worker re-attaches it (that makes a new entry)."""
        found: dict[int, tuple[C, list[Key]]] = {}
        for key in keys:
            entry = self._entries.get(key)
            if entry is None or entry.connection is None or entry.cancel_sent:
                continue
            entry.cancel_sent = True
            found.setdefault(id(entry.connection), (entry.connection, []))[1].append(key)
        return found

    def _forget_connection_of(self, key: Key) -> None:
        self._unhold(self._entries.get(key), key)

    def _unhold(self, entry: Entry[C] | None, key: Key) -> None:
        """``key`` (of ``entry``) no longer held by ``entry``'s stream."""
        if entry is not None and entry.connection is not None:
            held = self._by_connection.get(id(entry.connection))
            if held is not None:
                held.discard(key)
                if not held:
                    del self._by_connection[id(entry.connection)]
