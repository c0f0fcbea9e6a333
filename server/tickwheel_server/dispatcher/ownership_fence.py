"""The ownership's calls to the SQL store: raising partition epochs, the fence every claim checks.

A partition won in the lease store is owned only once its epoch in the SQL
store (:class:`~tickwheel_server.store.partitions.PartitionStore`) was raised
to the key's create revision; every claim transaction checks it
(:func:`~tickwheel_server.store.partitions.check_epochs`), which is what stops
a deposed owner that has not noticed yet. A raise is refused when the store
already holds a higher epoch: a later owner raised it, or the lease store's
revisions started again (a fresh etcd or in-process store) and no epoch can
be raised until they pass the stored one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection, Mapping
from typing import TypeVar

from tickwheel.shared.clock import Clock

from ..lease.base import LeaseStore
from ..lease.types import Ownership
from ..store.partitions import PartitionStore
from ..telemetry.outages import OutageLog

log = logging.getLogger(__name__)

T = TypeVar("T")


class EpochFence:
    """Raises the epochs of partitions ``server_id`` won, and says why a raise was refused.

    A store call whose caller is cancelled goes on (its transaction may be in
    a thread already); :meth:`settle` waits for every such call, so no
    connection outlives the ownership.
    """

    def __init__(self, store: PartitionStore, leases: LeaseStore, server_id: str, clock: Clock) -> None:
        self._store = store
        self._leases = leases
        self._server_id = server_id
        self.outages = OutageLog(log, "partition epochs", clock, then="raising again next tick")
        self._calls: set[asyncio.Future[object]] = set()

    async def raise_epochs(self, won: Mapping[int, Ownership]) -> Collection[int] | None:
        """Raise each partition of ``won`` to its ownership's fencing revision.
        Returns the partitions whose raise took effect (the others were
        refused as stale), or None if the store could not be reached or
        conflicted (logged; nothing to undo, try again later)."""
        try:
            took = await self._call(
                self._store.raise_epochs(
                    {partition: ownership.fencing_revision for partition, ownership in won.items()}, self._server_id
                )
            )
        except Exception as error:  # the store is down or conflicting: keep the keys, try again
            self.outages.failed(f"raising the epochs of partitions {_span(won)}", error, retryable=True)
            return None
        self.outages.ok()
        return took

    async def explain_refused(self, partitions: list[int]) -> None:
        """Log why the raise of ``partitions`` was refused: an error if the
        stored epochs are above the lease store's revision (it started again),
        a warning if a later owner raised them."""
        try:
            highest = max((await self._call(self._store.epochs(partitions))).values(), default=0)
            revision = await self._leases.current_revision()
        except Exception as error:
            log.warning("partitions %s: epoch raise refused (%s while reading why)", partitions, error)
            return
        if highest > revision:
            log.error(
                "partition epochs in the store (up to %d) are above the lease store's revision (%d): its "
                "revisions started again (a fresh etcd or in-process store). No epoch can be raised until "
                "its revision passes %d.",
                highest, revision, highest,
            )
        else:
            log.warning("partitions %s: a later owner already raised the epoch; resigning", partitions)

    async def settle(self) -> None:
        """Wait for the store calls still running after their caller was cancelled."""
        await asyncio.gather(*self._calls, return_exceptions=True)

    async def _call(self, call: Awaitable[T]) -> T:
        """Await a store call; if we are cancelled meanwhile, the call goes on
        and :meth:`settle` waits for it."""
        future = asyncio.ensure_future(call)
        self._calls.add(future)
        future.add_done_callback(self._calls.discard)
        return await asyncio.shield(future)


def _span(partitions: Collection[int]) -> str:
    """A bounded naming of ``partitions`` for a log line (a server may hold thousands)."""
    shown = sorted(partitions)
    return str(shown) if len(shown) <= 8 else f"{shown[:8]}... ({len(shown)} in all)"
