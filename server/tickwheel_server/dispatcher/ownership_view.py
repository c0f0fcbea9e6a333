"""The ownership keys as one member sees them: live members and partition holders, followed by watch.

:class:`OwnershipView` keeps, for one session's work of
:class:`~tickwheel_server.dispatcher.ownership.PartitionOwnership`, the set
of ``<key_prefix>members/`` and the holder of each ``<key_prefix>partitions/<n>``
(``n`` below the partition count; other keys are ignored). Each prefix is
read as a snapshot, then followed by a watch from the revision read before
it, so no change is missed; events already in the snapshot are delivered
again and applied in order, which converges to the same state. A compacted
watch reads its prefix again; a retryable lease store error is retried with
backoff; anything else ends the follow with that error.

The view only reports what it sees. Its owner hears, through the callbacks
given at construction, that something changed (re-plan), which create
revision each partition key had in a snapshot (a key we won at or before the
snapshot's revision must be in it), and each deletion of a partition key with
its revision (a deletion after our key's creation can only be of our key).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from tickwheel.shared.backoff import BackoffSleeper
from tickwheel.shared.clock import Clock

from ..lease import keys
from ..lease.base import LeaseStore
from ..lease.types import EventType, KeyValue, LeaseStoreError, WatchCompacted, WatchEvent
from ..telemetry.outages import OutageLog

log = logging.getLogger(__name__)

RETRY_INITIAL = 0.05
RETRY_CAP = 2.0
"""Waits between tries of the ownership work and its watches after a lease
store error: full jitter, from ``RETRY_INITIAL`` seconds, doubling, at most
``RETRY_CAP``."""


class OwnershipView:
    """The member set and the partition holders under ``key_prefix``, as last seen.

    ``members`` and ``holders`` (partition -> holder's server id) are read by
    the owner between awaits; :meth:`ready` returns once both prefixes were
    read at least once. Callbacks run synchronously in the event loop:

    * ``changed()`` after every snapshot and every event applied;
    * ``holders_read(created, revision)`` after each snapshot of the
      partition keys: ``created`` is partition -> create revision of every
      key in it, ``revision`` the store revision read before the snapshot;
    * ``holder_deleted(partition, revision)`` for each deletion of a
      partition key, with the revision of the deletion.
    """

    def __init__(
        self,
        leases: LeaseStore,
        clock: Clock,
        *,
        key_prefix: str,
        partition_count: int,
        changed: Callable[[], None],
        holders_read: Callable[[Mapping[int, int], int], None],
        holder_deleted: Callable[[int, int], None],
    ) -> None:
        self.members: set[str] = set()
        self.holders: dict[int, str] = {}
        self._leases = leases
        self._clock = clock
        self._key_prefix = key_prefix
        self._partition_count = partition_count
        self._changed = changed
        self._holders_read = holders_read
        self._holder_deleted = holder_deleted
        self._members_ready = asyncio.Event()
        self._holders_ready = asyncio.Event()

    async def ready(self) -> None:
        """Return once both prefixes were read."""
        await self._members_ready.wait()
        await self._holders_ready.wait()

    async def follow_members(self) -> None:
        """Follow ``<key_prefix>members/`` until cancelled or a fatal error."""
        await self._follow(
            keys.members_prefix(self._key_prefix), self._load_members, self._apply_member, self._members_ready
        )

    async def follow_holders(self) -> None:
        """Follow ``<key_prefix>partitions/`` until cancelled or a fatal error."""
        await self._follow(
            keys.partitions_prefix(self._key_prefix), self._load_holders, self._apply_holder, self._holders_ready
        )

    async def _follow(
        self,
        prefix: str,
        load: Callable[[list[KeyValue], int], None],
        apply: Callable[[WatchEvent], None],
        ready: asyncio.Event,
    ) -> None:
        """Keep a view of ``prefix``: a snapshot, then every change after it.
        Events between the revision read and the snapshot are delivered again
        by the watch; applying them in order converges to the same state."""
        backoff = BackoffSleeper(self._clock, initial=RETRY_INITIAL, cap=RETRY_CAP)
        outages = OutageLog(log, f"ownership view of {prefix}", self._clock)
        while True:
            try:
                revision = await self._leases.current_revision()
                load(await self._leases.get_prefix(prefix), revision)
                ready.set()
                self._changed()
                backoff.reset()
                outages.ok()
                async with self._leases.watch(prefix, prefix=True, start_revision=revision + 1) as events:
                    async for event in events:
                        apply(event)
                        self._changed()
            except WatchCompacted:
                log.info("watch on %s compacted; reading it again", prefix)
            except LeaseStoreError as error:
                if not error.retryable:
                    raise
                outages.failed("following it", error)
                await backoff.sleep()

    def _member_id(self, key: str) -> str | None:
        return keys.member_of(key, self._key_prefix)

    def _partition_of(self, key: str) -> int | None:
        partition = keys.partition_of(key, self._key_prefix)
        return partition if partition is not None and partition < self._partition_count else None

    def _load_members(self, kvs: list[KeyValue], revision: int) -> None:
        self.members = {m for m in (self._member_id(kv.key) for kv in kvs) if m is not None}

    def _apply_member(self, event: WatchEvent) -> None:
        member = self._member_id(event.key)
        if member is None:
            return
        if event.type is EventType.PUT:
            self.members.add(member)
        else:
            self.members.discard(member)

    def _load_holders(self, kvs: list[KeyValue], revision: int) -> None:
        holders: dict[int, str] = {}
        created: dict[int, int] = {}
        for kv in kvs:
            partition = self._partition_of(kv.key)
            if partition is not None:
                holders[partition] = kv.value.decode(errors="replace")
                created[partition] = kv.create_revision
        self.holders = holders
        self._holders_read(created, revision)

    def _apply_holder(self, event: WatchEvent) -> None:
        partition = self._partition_of(event.key)
        if partition is None:
            return
        if event.type is EventType.PUT:
            self.holders[partition] = event.value.decode(errors="replace")
            return
        self.holders.pop(partition, None)
        self._holder_deleted(partition, event.revision)
