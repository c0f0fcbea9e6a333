"""The lease store protocol: sessions, keys, elections with fencing, watches.

The lease store is what Tickwheel uses for ownership, never for job data. Every
server holds one :class:`Session` (a lease with a TTL, renewed in the
background); keys written with that session vanish when the session ends, and
partition ownership is a key created under it. Two implementations honour the
same contract and are checked by one conformance suite
(``tests/conformance/test_lease_store.py``):

* :mod:`tickwheel_server.lease.memory`: in-process, for ``tickwheel dev`` and
  unit tests; time comes from an injected :class:`~tickwheel.shared.clock.Clock`.
* :mod:`tickwheel_server.lease.etcd`: a real etcd cluster.

Ownership = identity + fence. :meth:`LeaseStore.try_acquire` creates a key only
if it does not exist (etcd: ``create_revision == 0``) and returns an
:class:`Ownership` whose ``fencing_revision`` is the key's create revision. The
store's revision counter only grows, so successive owners of one key always
hold strictly increasing fencing revisions; a deposed owner's revision is lower
than its successor's and any write it makes elsewhere can be refused on that.

A session is liveness. ``session.lost`` is set as soon as the lease can no
longer be trusted; work done as owner runs inside :meth:`Session.scope` (or
:meth:`Session.run_bound`) so that it is cancelled, not left running, when the
lease goes. A lost session is final: open a new one. ``lost`` is an event, and
a process that was frozen (SIGSTOP, a long GC pause, a suspended VM) may act
before the task that sets it runs again: a write that must not outlive the
lease asks :meth:`Session.surely_alive` at the last moment, which compares the
holder's own monotonic clock with :attr:`Session.alive_until`.

The errors raised and the records returned (keys, events, ownerships) are
in :mod:`tickwheel_server.lease.types`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from tickwheel_server.lease.types import (
    EventType,
    KeyValue,
    Ownership,
    SessionLost,
    WatchCompacted,
    WatchEvent,
    to_bytes,
)

T = TypeVar("T")

DEFAULT_SESSION_TTL = 10
"""Seconds; each server holds one session with a 10 s TTL (docs/architecture.md, Semantics: Sessions)."""


# --------------------------------------------------------------------------- session


class Session(abc.ABC):
    """A lease with a TTL that the store keeps alive in the background.

    Contract:

    * ``id`` is the lease id (non-zero); keys put with this session carry it.
    * ``ttl`` is the TTL in whole seconds the store granted (etcd may round a
      request up to its minimum). While the session is healthy, a renewal is
      sent at least every ``ttl / 3`` seconds of the store's clock (etcd's
      sessions: every ``ttl / 10``).
    * ``lost`` is set exactly once, when any of these happens: the store
      reports the lease expired or unknown; the lease was not renewed for
      ``ttl`` seconds measured from when the last successful renewal was sent
      (so ``lost`` fires no later than the store can expire it, never after);
      the session is closed. After ``lost`` every key attached to the session
      is gone or will be gone within ``ttl``; every ownership under it is void.
      ``lost`` is never cleared: open a new session.
    * ``lost_reason`` says why, once ``lost`` is set.
    * :attr:`alive_until` is the instant of the store's monotonic clock until
      which the lease surely exists: when the last successful renewal (or the
      grant) was *sent*, plus the TTL the store granted with it. The store
      cannot expire the lease before then (it counts the TTL from when it
      received the request, later). It only grows while the session lives.
      :meth:`surely_alive` is the check to make just before a write that must
      not outlive the lease; it answers False once ``lost`` is set, and also
      before that when the holder has not renewed in time (keep-alives that
      stop, or a process that was frozen and has not yet run the task that
      would set ``lost``).
    * :meth:`close` sets ``lost``, cancels the bound work, stops the renewals
      and revokes the lease, which deletes its keys at once. A close cancelled
      before its revoke was done leaves the revoke owed: closing again sends
      it (a revoke that cannot be sent is logged, never dropped in silence).
    """

    id: int
    ttl: int

    def __init__(self) -> None:
        self.lost = asyncio.Event()
        self.lost_reason: str | None = None
        self.closed = False
        self._on_lost: list[Callable[[], None]] = []

    # -- liveness ---------------------------------------------------------------

    @property
    @abc.abstractmethod
    def alive_until(self) -> float:
        """Monotonic instant (of the store's clock) until which the lease
        surely exists; see the class docstring."""

    @abc.abstractmethod
    def _monotonic(self) -> float:
        """The store clock's monotonic time now."""

    def alive_for(self) -> float:
        """Seconds the lease surely exists from now (0 once ``lost`` is set or
        the instant has passed). Safe to call from any thread."""
        if self.lost.is_set():
            return 0.0
        return max(0.0, self.alive_until - self._monotonic())

    def surely_alive(self, margin: float = 0.0) -> bool:
        """True if ``lost`` is not set and the lease surely exists for more
        than ``margin`` seconds from now. Safe to call from any thread (a
        store's transaction checks it just before committing)."""
        return self.alive_for() > margin

    def _mark_lost(self, reason: str) -> None:
        """Record the loss (first reason wins) and cancel every bound scope."""
        if self.lost.is_set():
            return
        self.lost_reason = reason
        self.lost.set()
        callbacks, self._on_lost = self._on_lost, []
        for callback in callbacks:
            callback()

    def _lost_error(self) -> SessionLost:
        return SessionLost(f"session {self.id:x} lost: {self.lost_reason}")

    def raise_if_lost(self) -> None:
        """Raise :class:`SessionLost` if ``lost`` is set."""
        if self.lost.is_set():
            raise self._lost_error()

    @contextlib.asynccontextmanager
    async def scope(self) -> AsyncIterator["Session"]:
        """Run the body as work bound to this session.

        When ``lost`` fires, the task running the body is cancelled (so an
        ``asyncio.TaskGroup`` inside it cancels all its children) and the scope
        raises :class:`SessionLost` instead of ``CancelledError``. Entering a
        scope of a session already lost raises :class:`SessionLost` at once. A
        cancellation from anywhere else propagates unchanged. Scopes nest.
        """
        self.raise_if_lost()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Session.scope() needs a running task")
        fired = False

        def on_lost() -> None:
            nonlocal fired
            fired = True
            task.cancel(msg="lease session lost")

        self._on_lost.append(on_lost)
        try:
            yield self
        except (Exception, asyncio.CancelledError) as exc:
            if not fired:
                raise
            if isinstance(exc, asyncio.CancelledError):
                if task.uncancel() > 0:
                    raise  # cancelled from elsewhere as well: that wins
                raise self._lost_error() from None
            # The body failed (often with SessionLost, when it noticed the loss
            # itself) before our cancellation reached it.
            await _absorb_cancellation(task)
            raise self._lost_error() from exc
        else:
            if fired:
                # The body finished without reaching an await after the loss.
                await _absorb_cancellation(task)
                raise self._lost_error()
        finally:
            with contextlib.suppress(ValueError):
                self._on_lost.remove(on_lost)

    async def run_bound(self, work: Awaitable[T]) -> T:
        """Await ``work`` inside :meth:`scope`: its result, or
        :class:`SessionLost` if the session is lost first (``work`` is then
        cancelled)."""
        if self.lost.is_set():
            if asyncio.iscoroutine(work):
                work.close()
            raise self._lost_error()
        async with self.scope():
            return await work

    # -- lifecycle --------------------------------------------------------------

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session: set ``lost`` (reason ``"closed"`` unless already
        lost), stop renewing and revoke the lease, deleting its keys.

        Idempotent. Also called on a session already lost, to revoke a lease
        that may have survived (an etcd that restarts extends its leases). If
        the store is unreachable the revoke is abandoned silently; the keys then
        vanish when the TTL runs out."""

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


# --------------------------------------------------------------------------- watch


class Watch(abc.ABC):
    """An async iterator of :class:`WatchEvent` for one key or one prefix.

    Contract: once established (``async with`` has entered, or the first
    ``__anext__`` has begun), the watch delivers every change with a revision
    greater than the store's revision at establishment, or from
    ``start_revision`` if one was given, in revision order, each exactly once,
    across reconnections to the store. It never ends by itself: it raises
    :class:`WatchCompacted` if the history it needs is gone,
    :class:`LeaseStoreClosed` once the store is closed. While the store is
    unreachable it waits (and reconnects); bound it with a timeout or a session
    scope. Always close it (``async with`` or :meth:`aclose`).
    """

    def __aiter__(self) -> "Watch":
        return self

    @abc.abstractmethod
    async def __anext__(self) -> WatchEvent: ...

    @abc.abstractmethod
    async def start(self) -> None:
        """Establish the watch (idempotent)."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Stop watching (idempotent)."""

    async def __aenter__(self) -> "Watch":
        try:
            await self.start()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


# --------------------------------------------------------------------------- store


class LeaseStore(abc.ABC):
    """Sessions, leased keys, compare-and-create elections and watches.

    Every operation may raise :class:`LeaseStoreUnavailable` (retryable) and
    :class:`LeaseStoreClosed` after :meth:`close`; operations taking a session
    raise :class:`SessionLost` if it is lost (and set its ``lost`` if the store
    is the one that noticed).
    """

    # -- sessions ---------------------------------------------------------------

    @abc.abstractmethod
    async def open_session(self, ttl: int = DEFAULT_SESSION_TTL, *, keepalive: bool = True) -> Session:
        """Grant a lease of ``ttl`` whole seconds (>= 1) and, unless
        ``keepalive`` is False, renew it every ``ttl / 3`` seconds until it is
        closed or lost. ``keepalive=False`` grants a lease that simply expires
        after its TTL (one-shot TTL keys, and fault tests)."""

    # -- keys -------------------------------------------------------------------

    @abc.abstractmethod
    async def put(self, key: str, value: bytes | str, *, session: Session | None = None) -> int:
        """Create or overwrite ``key``; with ``session``, attach it to that
        lease so it is deleted when the session ends (a later put without a
        session detaches it). Returns the new store revision."""

    @abc.abstractmethod
    async def get(self, key: str) -> KeyValue | None:
        """The key as stored now, or None if it does not exist."""

    @abc.abstractmethod
    async def get_prefix(self, prefix: str) -> list[KeyValue]:
        """Every key starting with ``prefix``, in ascending key order."""

    @abc.abstractmethod
    async def delete(self, key: str) -> bool:
        """Delete ``key``; True if it existed."""

    @abc.abstractmethod
    async def current_revision(self) -> int:
        """The store's revision now (the revision of the latest change; it only
        grows). Also a cheap liveness probe."""

    @abc.abstractmethod
    async def compact(self, revision: int) -> bool:
        """Drop the history of changes before ``revision`` (etcd's KV Compact):
        from then on a watch from a revision below it raises
        :class:`WatchCompacted`; the keys as they are now are untouched.
        True if this call compacted, False if the history was already
        compacted at or past ``revision`` (not a failure). ``revision`` must
        be a whole number from 1 to :meth:`current_revision`, or ValueError."""

    @abc.abstractmethod
    async def alarms(self) -> list[str]:
        """The alarms the store raises now, by name (etcd's Maintenance
        Alarm: ``"NOSPACE"`` once its database reached its space quota and it
        refuses every write; ``"CORRUPT"``), one per kind, sorted; empty
        when all is well."""

    @abc.abstractmethod
    def watch(self, key: str, *, prefix: bool = False, start_revision: int | None = None) -> Watch:
        """Watch ``key`` (or every key starting with it when ``prefix``).
        See :class:`Watch` for what is delivered."""

    # -- elections --------------------------------------------------------------

    @abc.abstractmethod
    async def _acquire_once(self, key: str, value: bytes, session: Session) -> tuple[Ownership | None, int]:
        """Atomically: if ``key`` does not exist, create it with ``value``
        under ``session`` and return its ownership; if it exists under this
        same session, adopt it (its existing create revision, value
        unchanged); otherwise return None. Also return the store revision at
        which the decision was made."""

    async def try_acquire(self, key: str, value: bytes | str, session: Session) -> Ownership | None:
        """Compare-and-create: become the owner of ``key`` if nobody holds it.

        Returns the :class:`Ownership` (``fencing_revision`` = the key's create
        revision) or None if another session holds the key. A key already held
        under ``session`` is adopted rather than refused, so retrying after an
        ambiguous :class:`LeaseStoreUnavailable` is safe. Raises
        :class:`SessionLost` if ``session`` is lost."""
        session.raise_if_lost()
        ownership, _ = await self._acquire_once(key, to_bytes(value), session)
        return ownership

    async def wait_acquire(self, key: str, value: bytes | str, session: Session) -> Ownership:
        """Block until ``key`` is ours: try to acquire it; while another
        session holds it, wait for its deletion (by watch, no polling) and try
        again. Candidates are not queued: whichever tries first after the
        deletion wins.

        Raises :class:`SessionLost` if ``session`` is lost while waiting, and
        :class:`LeaseStoreUnavailable` if an acquisition attempt cannot reach the
        store (the wait itself rides out reconnections). Bound it with
        ``asyncio.timeout`` if the caller must give up."""
        data = to_bytes(value)
        async with session.scope():
            while True:
                ownership, seen_revision = await self._acquire_once(key, data, session)
                if ownership is not None:
                    return ownership
                try:
                    async with self.watch(key, start_revision=seen_revision + 1) as events:
                        async for event in events:
                            if event.type is EventType.DELETE:
                                break
                except WatchCompacted:
                    continue  # history gone: just try again

    async def resign(self, ownership: Ownership) -> bool:
        """Give up ``ownership``: delete the key only if it still has
        ``ownership.fencing_revision`` as create revision (so a stale owner can
        never delete its successor's key). True if this call deleted it. The
        session stays open."""
        return await self._delete_if_created_at(ownership.key, ownership.fencing_revision)

    @abc.abstractmethod
    async def _delete_if_created_at(self, key: str, create_revision: int) -> bool:
        """Delete ``key`` iff its create revision is ``create_revision``."""

    async def is_owner(self, ownership: Ownership) -> bool:
        """True if the session is not lost and the key still exists with
        ``ownership.fencing_revision`` as create revision (one read)."""
        if ownership.session.lost.is_set():
            return False
        current = await self.get(ownership.key)
        return current is not None and current.create_revision == ownership.fencing_revision

    # -- lifecycle --------------------------------------------------------------

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every session opened through this store (revoking their
        leases, best effort), end every watch and release connections.
        Idempotent."""

    async def __aenter__(self) -> "LeaseStore":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _absorb_cancellation(task: asyncio.Task[object]) -> None:
    """Consume one cancellation we requested of ``task`` (the current task)
    that its code never received, so it does not strike later outside the
    scope. Re-raise CancelledError if someone else asked to cancel it too."""
    try:
        await asyncio.sleep(0)
    except asyncio.CancelledError:
        pass
    if task.uncancel() > 0:
        raise asyncio.CancelledError()
