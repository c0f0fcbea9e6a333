"""One reader of the alert change feed per server, shared by every watcher.

Every WatchAlerts stream used to poll the store on its own; with a few
hundred idle streams the polls alone kept a core busy. An
:class:`AlertFeed` (one per :class:`~.alerts.AlertStore`, so one per server)
runs a single reader while at least one watcher is registered: at each
wake-up (a change this process numbered, a new watcher) and at least every
poll interval, it numbers pending changes and reads those after its cursor,
a range scan with a LIMIT, and hands each to every watcher whose filter it
matches. With no watcher, the reader stops and reads nothing.

Each watcher has a bounded queue (:data:`WATCH_QUEUE` alerts). A watcher
that does not keep up (its client stopped reading) is ended with
RESOURCE_EXHAUSTED once its queue is full, instead of holding the reader
back or growing memory; it may watch again with ``include_open`` to catch up.

A watcher starts at the reader's cursor after the reader's first poll that
began after it registered and caught up: every change committed before the
watch began is at or below that cursor, every later one above it, exactly as
when each watcher read the feed position itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING

from ..errors import RateLimited
from ..store.errors import RetryableStoreError
from ..telemetry.outages import OutageLog

if TYPE_CHECKING:
    from ..store.alerts import AlertStore
    from .catalogue import AlertRecord

log = logging.getLogger("tickwheel.alerts")

WATCH_QUEUE = 1000
"""Alerts a watcher may have waiting before it is ended as too slow."""

_CAUGHT_UP = object()
"""Queue marker: every change reflected in the watcher's first listing is behind it."""


class _Watcher:
    def __init__(self, matches: Callable[["AlertRecord"], bool], size: int) -> None:
        self.matches = matches
        self.size = size
        self.items: deque = deque()
        self.ready = asyncio.Event()
        self.started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        """The cursor it starts after (set by the reader), or the reader's error."""
        self.start = 0
        self.ended: BaseException | None = None
        """Why the watch ends: ``StopAsyncIteration`` (the store closed) or an error."""
        self.listed_at: int | None = None
        """The poll count when its first listing ended, until the marker is queued."""

    def offer(self, seq: int, alert: "AlertRecord") -> bool:
        """Queue ``alert`` if it matches; False when the queue overflowed (the watcher is ended)."""
        if seq <= self.start or not self.matches(alert):
            return True
        if len(self.items) >= self.size:
            self.end(RateLimited(
                "WatchAlerts stream",
                f"this watch fell more than {self.size} alerts behind and was ended; "
                "watch again (with include_open to catch up)",
            ))  # fmt: skip
            return False
        self.items.append(alert)
        self.ready.set()
        return True

    def mark(self) -> None:
        self.items.append(_CAUGHT_UP)
        self.ready.set()

    def end(self, reason: BaseException) -> None:
        if self.ended is None:
            self.ended = reason
        if not self.started.done():
            self.started.set_exception(reason)
            self.started.exception()  # retrieved: a watcher gone meanwhile leaves no "never retrieved" warning
        self.ready.set()


class AlertFeed:
    """The shared reader of one :class:`~.alerts.AlertStore`'s change feed."""

    def __init__(self, store: "AlertStore", *, queue_size: int = WATCH_QUEUE) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be >= 1")
        self._store = store
        self.queue_size = queue_size
        self._watchers: set[_Watcher] = set()
        self._task: asyncio.Task | None = None
        self._joined = asyncio.Event()
        self.polls = 0
        """Polls the reader began (each one sequencing and one read)."""
        self.polled = asyncio.Event()
        """Set, and replaced, after each poll."""
        self.outages = OutageLog(log, "alert feed", store.clock, then="reading again at the next poll")

    @property
    def watchers(self) -> int:
        return len(self._watchers)

    async def watch(
        self, matches: Callable[["AlertRecord"], bool], *, list_open: Callable[[], AsyncIterator["AlertRecord"]] | None
    ) -> AsyncIterator["AlertRecord"]:
        """The alerts matching ``matches`` as they change, from now on (see
        :meth:`AlertStore.watch`); ``list_open`` lists the open ones first."""
        if self._store.closed:
            return
        watcher = _Watcher(matches, self.queue_size)
        self._watchers.add(watcher)
        self._run_reader()
        try:
            try:
                watcher.start = await watcher.started
            except StopAsyncIteration:  # the store closed before the watch started
                return
            shown: dict[str, AlertRecord] = {}
            if list_open is not None:
                async for alert in list_open():
                    shown[alert.id] = alert
                    yield alert
                watcher.listed_at = self.polls
            while True:
                while watcher.items:
                    item = watcher.items.popleft()
                    if item is _CAUGHT_UP:
                        # A change of an alert in the first listing is news from here on.
                        shown.clear()
                    elif shown.get(item.id) != item:
                        yield item
                if watcher.ended is not None:
                    if isinstance(watcher.ended, StopAsyncIteration):
                        return
                    raise watcher.ended
                watcher.ready.clear()
                await watcher.ready.wait()
        finally:
            self._watchers.discard(watcher)
            self._joined.set()  # the reader stops if it was the last

    def _run_reader(self) -> None:
        self._joined.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._read(), name="tickwheel-alert-feed")

    async def _read(self) -> None:
        store = self._store
        cursor: int | None = None
        try:
            while self._watchers and not store.closed:
                changed = store.changed_event
                self._joined.clear()
                starting = [w for w in self._watchers if not w.started.done()]
                self.polls += 1
                try:
                    await store.sequence()
                    if cursor is None:
                        cursor, found = await store.feed_position(), []
                    else:
                        found = await store.changes_after(cursor)
                except RetryableStoreError as error:
                    # The cursor is kept: nothing is missed once the store answers again.
                    self.outages.failed("reading the changes for WatchAlerts", error, retryable=True)
                    await self._wait(changed)
                    continue
                self.outages.ok()
                for seq, alert in found:
                    cursor = seq
                    for watcher in [w for w in self._watchers if w.started.done() and w.ended is None]:
                        if not watcher.offer(seq, alert):
                            self._watchers.discard(watcher)
                            log.warning("a WatchAlerts stream fell %d alerts behind and was ended", self.queue_size)
                self._done_polling()
                if len(found) >= store.read_batch:
                    continue
                for watcher in starting:
                    if not watcher.started.done():
                        watcher.started.set_result(cursor)
                for watcher in self._watchers:
                    if watcher.listed_at is not None and self.polls > watcher.listed_at:
                        watcher.listed_at = None
                        watcher.mark()
                await self._wait(changed)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.exception("reading the alert feed failed; its watches end")
            for watcher in list(self._watchers):
                watcher.end(error)
        finally:
            if store.closed:
                for watcher in list(self._watchers):
                    watcher.end(StopAsyncIteration())

    def _done_polling(self) -> None:
        self.polled.set()
        self.polled = asyncio.Event()

    async def _wait(self, changed: asyncio.Event) -> None:
        """Until this process changes an alert, a watcher comes or goes, or a poll interval passes."""
        if changed.is_set() or self._joined.is_set():
            return
        waits = {
            asyncio.ensure_future(self._store.clock.sleep(self._store.poll_interval)),
            asyncio.ensure_future(changed.wait()),
            asyncio.ensure_future(self._joined.wait()),
        }
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()


def matcher(kinds: Iterable[str], tenant: str) -> Callable[["AlertRecord"], bool]:
    """The filter of a watch: ``kinds`` (empty: any) and ``tenant`` (empty: any), as :meth:`AlertStore.list`."""
    wanted = frozenset(kinds)

    def matches(alert: "AlertRecord") -> bool:
        return (not wanted or alert.kind in wanted) and (not tenant or alert.tenant == tenant)

    return matches
