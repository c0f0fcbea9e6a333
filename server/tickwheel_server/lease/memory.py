"""The in-process lease store: ``tickwheel dev`` and unit tests.

Same contract as etcd (see :mod:`tickwheel_server.lease.base`), held in one
process: a revision counter that every change advances by one, keys with create
and mod revisions, leases with a TTL, watches with a bounded history.

Time comes from the injected :class:`~tickwheel.shared.clock.Clock`. A lease
expires when the clock reaches its last renewal plus its TTL; expiry is checked
before every operation and every renewal, and each session's background task
wakes at its next renewal (or, without keepalive, at its expiry). With a
:class:`~tickwheel.shared.clock.FakeClock` this means:

* ``clock.advance(ttl + 0.1)`` in one step expires the lease (as it would for a
  process frozen that long): its keys are deleted, watchers see the deletes,
  ``session.lost`` fires. Advance in steps smaller than ``ttl / 3``, letting the
  event loop run between steps, to keep it alive across long spans of fake time.
* Nothing happens until the loop runs: after ``advance`` await the event you
  expect (``session.lost.wait()``, a watch event) rather than checking at once.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from dataclasses import dataclass, field, replace

from tickwheel_server.lease.base import DEFAULT_SESSION_TTL, LeaseStore, Session, Watch
from tickwheel_server.lease.types import (
    EventType,
    KeyValue,
    LeaseStoreClosed,
    Ownership,
    WatchCompacted,
    WatchEvent,
    to_bytes,
    validate_key,
    validate_revision,
    validate_ttl,
)

from tickwheel.shared.clock import Clock

_CLOSED = object()


@dataclass(slots=True)
class _Lease:
    id: int
    ttl: int
    expires_at: float  # clock.monotonic()
    session: "MemorySession"
    keys: set[str] = field(default_factory=set)


class MemorySession(Session):
    """A lease in a :class:`MemoryLeaseStore`; see :class:`Session`."""

    def __init__(self, store: "MemoryLeaseStore", lease_id: int, ttl: int, keepalive: bool) -> None:
        super().__init__()
        self.id = lease_id
        self.ttl = ttl
        self._store = store
        self._keepalive = keepalive
        self._task: asyncio.Task[None] | None = None
        self._revoked = False
        """True once a close revoked the lease (a close cancelled before leaves it owed)."""

    @property
    def alive_until(self) -> float:
        # In one process the holder's view is the store's: the lease's expiry.
        lease = self._store._leases.get(self.id)
        return lease.expires_at if lease is not None and lease.session is self else float("-inf")

    def _monotonic(self) -> float:
        return self._store._clock.monotonic()

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"lease-session-{self.id:x}"
        )

    async def _run(self) -> None:
        clock = self._store._clock
        while not self.lost.is_set():
            if self._keepalive:
                await clock.sleep(self.ttl / 3)
                self._store._renew(self.id)
            else:
                lease = self._store._leases.get(self.id)
                if lease is None:
                    return
                await clock.sleep(lease.expires_at - clock.monotonic())
                self._store._expire_due()

    async def close(self) -> None:
        if self._revoked:
            return
        self.closed = True
        self._mark_lost("closed")
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        # A close cancelled above leaves the revoke owed: the next close does it.
        self._store._revoke(self.id, "closed")
        self._revoked = True


class _MemoryWatch(Watch):
    def __init__(self, store: "MemoryLeaseStore", key: str, prefix: bool, start_revision: int | None) -> None:
        self._store = store
        self._key = key
        self._prefix = prefix
        self._start_revision = start_revision
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._started = False
        self._closed = False

    def matches(self, key: str) -> bool:
        return key.startswith(self._key) if self._prefix else key == self._key

    async def start(self) -> None:
        if self._started:
            return
        if self._closed:
            raise LeaseStoreClosed("watch is closed")
        store = self._store
        store._check_open()
        store._expire_due()
        if self._start_revision is not None:
            if self._start_revision <= store._compact_revision:
                raise WatchCompacted(
                    f"revision {self._start_revision} is compacted (history kept from "
                    f"{store._compact_revision + 1})",
                    store._compact_revision + 1,
                )
            for event in store._history:
                if event.revision >= self._start_revision and self.matches(event.key):
                    self._queue.put_nowait(event)
        self._started = True
        store._watches.add(self)

    def deliver(self, event: WatchEvent) -> None:
        if self._start_revision is None or event.revision >= self._start_revision:
            self._queue.put_nowait(event)

    async def __anext__(self) -> WatchEvent:
        if self._closed:
            raise StopAsyncIteration
        await self.start()
        item = await self._queue.get()
        if item is _CLOSED:
            self._closed = True
            raise LeaseStoreClosed("lease store closed")
        assert isinstance(item, WatchEvent)
        return item

    async def aclose(self) -> None:
        self._closed = True
        self._store._watches.discard(self)


class MemoryLeaseStore(LeaseStore):
    """In-process lease store; see the module docstring for how time works.

    ``history_limit`` bounds the events kept for watches with a
    ``start_revision``; older revisions raise :class:`WatchCompacted`.
    """

    def __init__(self, clock: Clock, *, history_limit: int = 10_000, start_revision: int = 1) -> None:
        self._clock = clock
        # An empty etcd cluster is at revision 1 too. ``start_revision`` lets a
        # restarted `tickwheel dev` continue above the fencing epochs its
        # SQLite file recorded, as a real etcd's revisions would.
        if start_revision < 1:
            raise ValueError("start_revision must be >= 1")
        self._revision = start_revision
        self._compact_revision = start_revision - 1
        self._kvs: dict[str, KeyValue] = {}
        self._leases: dict[int, _Lease] = {}
        self._lease_ids = itertools.count(0x7A11_0001)
        self._watches: set[_MemoryWatch] = set()
        self._history: collections.deque[WatchEvent] = collections.deque()
        self._history_limit = history_limit
        self._closed = False
        self.raised_alarms: set[str] = set()
        """The alarms :meth:`alarms` reports (tests raise ``"NOSPACE"`` here)."""

    # -- internals ----------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LeaseStoreClosed("lease store closed")

    def _emit(self, events: list[WatchEvent]) -> None:
        for event in events:
            self._history.append(event)
            for watch in list(self._watches):
                if watch.matches(event.key):
                    watch.deliver(event)
        while len(self._history) > self._history_limit:
            self._compact_revision = self._history.popleft().revision

    def _detach(self, kv: KeyValue) -> None:
        if kv.lease:
            lease = self._leases.get(kv.lease)
            if lease is not None:
                lease.keys.discard(kv.key)

    def _expire_due(self) -> None:
        now = self._clock.monotonic()
        for lease in [lease for lease in self._leases.values() if lease.expires_at <= now]:
            self._revoke(lease.id, f"lease expired (ttl {lease.ttl}s)")

    def _revoke(self, lease_id: int, reason: str) -> None:
        lease = self._leases.pop(lease_id, None)
        if lease is None:
            return
        lease.session._mark_lost(reason)
        doomed = sorted(key for key in lease.keys if key in self._kvs)
        if doomed:
            self._revision += 1  # one revision for all of the lease's keys, as in etcd
            for key in doomed:
                del self._kvs[key]
            self._emit([WatchEvent(EventType.DELETE, key, b"", self._revision) for key in doomed])

    def _renew(self, lease_id: int) -> None:
        self._expire_due()
        lease = self._leases.get(lease_id)
        if lease is not None:
            lease.expires_at = self._clock.monotonic() + lease.ttl

    def _live_lease(self, session: Session) -> _Lease:
        self._expire_due()
        lease = self._leases.get(session.id)
        if lease is None or lease.session is not session:
            session._mark_lost("lease not found")
        session.raise_if_lost()
        assert lease is not None
        return lease

    def _put(self, key: str, value: bytes, lease: _Lease | None) -> KeyValue:
        self._revision += 1
        old = self._kvs.get(key)
        if old is not None:
            self._detach(old)
            kv = replace(
                old,
                value=value,
                mod_revision=self._revision,
                version=old.version + 1,
                lease=lease.id if lease else 0,
            )
        else:
            kv = KeyValue(key, value, self._revision, self._revision, 1, lease.id if lease else 0)
        self._kvs[key] = kv
        if lease is not None:
            lease.keys.add(key)
        self._emit([WatchEvent(EventType.PUT, key, value, self._revision, kv.create_revision)])
        return kv

    def _delete(self, key: str) -> bool:
        kv = self._kvs.pop(key, None)
        if kv is None:
            return False
        self._detach(kv)
        self._revision += 1
        self._emit([WatchEvent(EventType.DELETE, key, b"", self._revision)])
        return True

    # -- LeaseStore -----------------------------------------------------------------

    async def open_session(self, ttl: int = DEFAULT_SESSION_TTL, *, keepalive: bool = True) -> MemorySession:
        validate_ttl(ttl)
        self._check_open()
        self._expire_due()
        session = MemorySession(self, next(self._lease_ids), ttl, keepalive)
        self._leases[session.id] = _Lease(session.id, ttl, self._clock.monotonic() + ttl, session)
        session._start()
        return session

    async def put(self, key: str, value: bytes | str, *, session: Session | None = None) -> int:
        validate_key(key)
        data = to_bytes(value)
        self._check_open()
        self._expire_due()
        lease = self._live_lease(session) if session is not None else None
        return self._put(key, data, lease).mod_revision

    async def get(self, key: str) -> KeyValue | None:
        validate_key(key)
        self._check_open()
        self._expire_due()
        return self._kvs.get(key)

    async def get_prefix(self, prefix: str) -> list[KeyValue]:
        self._check_open()
        self._expire_due()
        return [self._kvs[key] for key in sorted(self._kvs) if key.startswith(prefix)]

    async def delete(self, key: str) -> bool:
        validate_key(key)
        self._check_open()
        self._expire_due()
        return self._delete(key)

    async def current_revision(self) -> int:
        self._check_open()
        self._expire_due()
        return self._revision

    async def compact(self, revision: int) -> bool:
        validate_revision(revision)
        self._check_open()
        self._expire_due()
        if revision > self._revision:
            raise ValueError(f"cannot compact to revision {revision}: the store is at {self._revision}")
        if revision - 1 <= self._compact_revision:
            return False
        while self._history and self._history[0].revision < revision:
            self._history.popleft()
        self._compact_revision = revision - 1
        return True

    async def alarms(self) -> list[str]:
        self._check_open()
        return sorted(self.raised_alarms)

    def watch(self, key: str, *, prefix: bool = False, start_revision: int | None = None) -> Watch:
        self._check_open()
        if not prefix:
            validate_key(key)
        return _MemoryWatch(self, key, prefix, start_revision)

    async def _acquire_once(self, key: str, value: bytes, session: Session) -> tuple[Ownership | None, int]:
        validate_key(key)
        self._check_open()
        lease = self._live_lease(session)
        existing = self._kvs.get(key)
        if existing is None:
            kv = self._put(key, value, lease)
            return Ownership(key, value, kv.create_revision, session), self._revision
        if existing.lease == session.id:
            return Ownership(key, existing.value, existing.create_revision, session), self._revision
        return None, self._revision

    async def _delete_if_created_at(self, key: str, create_revision: int) -> bool:
        self._check_open()
        self._expire_due()
        existing = self._kvs.get(key)
        if existing is None or existing.create_revision != create_revision:
            return False
        return self._delete(key)

    async def close(self) -> None:
        if self._closed:
            return
        for watch in list(self._watches):  # watches end first, as on etcd
            watch._queue.put_nowait(_CLOSED)
        self._watches.clear()
        for lease in list(self._leases.values()):
            await lease.session.close()
        self._closed = True
