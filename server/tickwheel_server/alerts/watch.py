"""The alert change feed's loops in one server: number changes continually
(:meth:`AlertWatch.run`) and serve the watches of WatchAlerts
(:meth:`AlertWatch.watch`).

The rows, the numbering transaction and the in-process wake-up
(:meth:`~tickwheel_server.store.alerts.AlertStore.nudge`,
:meth:`~tickwheel_server.store.alerts.AlertStore.close`) belong to
:class:`~tickwheel_server.store.alerts.AlertStore`; every watch of one
:class:`AlertWatch` shares its one reader (:mod:`.feed`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable

from ..store.alerts import READ_BATCH, AlertStore
from ..telemetry.outages import OutageLog
from .catalogue import AlertRecord, checked_kinds
from .feed import WATCH_QUEUE, AlertFeed, matcher

log = logging.getLogger("tickwheel.alerts")


class AlertWatch:
    """The loops over one :class:`AlertStore`'s change feed. One per server
    process, over the store its raisers use, so their
    :meth:`~AlertStore.nudge` reaches these watchers at once."""

    def __init__(self, store: AlertStore, *, watch_queue: int = WATCH_QUEUE) -> None:
        self.store = store
        self.feed = AlertFeed(store, queue_size=watch_queue)
        """The one reader of the change feed that every :meth:`watch` shares."""
        self.outages = OutageLog(log, "alert numbering", store.clock, then="retrying at the next poll")

    async def run(self) -> None:
        """Number changes in the feed until cancelled or the store's
        :meth:`~AlertStore.close`: at once when :meth:`~AlertStore.nudge` is
        called, otherwise every :attr:`~AlertStore.poll_interval` seconds.
        Each server runs one, so every change is logged even while nobody
        watches."""
        store = self.store
        while not store.closed:
            changed = store.changed_event
            try:
                await store.sequence()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.outages.failed("numbering alert changes", error)
            else:
                self.outages.ok()
            await store.wait_for(changed)

    def watch(
        self, *, kinds: Iterable[str] = (), tenant: str = "", include_open: bool = False
    ) -> AsyncIterator[AlertRecord]:
        """Alerts as they change (raised, seen again, resolved), from now on,
        until the caller stops iterating or the store's
        :meth:`~AlertStore.close`; each as it is when read, so a burst of
        repeats may arrive as one. ``kinds`` and ``tenant`` filter as in
        :meth:`AlertStore.list`. With ``include_open``, first every open
        alert (newest first, read in pages), then changes; a change already
        reflected in that first listing is not sent again.

        Every watch shares one reader (:attr:`feed`, see :mod:`.feed`): range
        scans on ``alerts_seq`` with a LIMIT, at each wake-up and at least
        every poll interval while anyone watches. A watch that falls
        :data:`~.feed.WATCH_QUEUE` alerts behind ends with RateLimited
        (RESOURCE_EXHAUSTED).
        """
        wanted = frozenset(checked_kinds(kinds))
        store = self.store

        async def list_open() -> AsyncIterator[AlertRecord]:
            key = None
            while True:
                page = await store.list(kinds=wanted, tenant=tenant, before_key=key, limit=READ_BATCH)
                for alert in page.alerts:
                    yield alert
                key = page.next_key
                if key is None:
                    break

        return self.feed.watch(matcher(wanted, tenant), list_open=list_open if include_open else None)
