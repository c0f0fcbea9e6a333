"""Callbacks at instants of a :class:`Clock`'s monotonic time, all served by one task.

An attempt needs two timers: its deadline, and the grace after a cancel.
Nearly every attempt ends long before either, so what matters is what a timer
costs to set and to drop. A task per timer (``await clock.sleep(left)``)
costs a task, its steps and its cancellation per attempt; ``loop.call_at``
would be cheap but ignores the injected clock, so a test could not move time.
Here a timer is an entry in one heap; dropping it only marks it, and marked
entries are swept out when they outnumber the live ones (as asyncio does with
its own timer heap), so the heap stays within twice what is live.

One task (:meth:`Timers.run`) sleeps on the clock until the earliest entry
and runs every callback that is due, in order of instant. It is woken early
only when a new entry becomes the earliest.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable
from typing import Any

from tickwheel.shared.clock import Clock


log = logging.getLogger(__name__)

SWEEP_MIN = 64
"""Below this many dropped entries the heap is not swept: popping them when due is cheaper."""


class Timer:
    """One pending callback; :meth:`cancel` drops it."""

    __slots__ = ("callback", "args", "done", "_timers")

    def __init__(self, timers: Timers, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.callback: Callable[..., Any] | None = callback
        self.args = args
        self.done = False
        """Fired or cancelled."""
        self._timers = timers

    def cancel(self) -> None:
        """The callback will not run. No effect once it ran or was cancelled."""
        if not self.done:
            self.done = True
            self.callback = None  # let go of what it holds (an attempt and its payload) before the sweep
            self.args = ()
            self._timers._dropped()


class Timers:
    """A heap of :class:`Timer` on ``clock``'s monotonic time; :meth:`run` fires them.

    Callbacks run on the event loop, one at a time, inside :meth:`run`'s task
    (one that raises is logged). Timers set while :meth:`run` is not running
    fire once it runs.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int, Timer]] = []
        """``(when, sequence, timer)``: equal instants fire in the order they were set."""
        self._cancelled = 0
        """Entries of ``_heap`` whose timer was cancelled."""
        self._seq = itertools.count()
        self._sleep: asyncio.Future[Any] | None = None
        """What :meth:`run` waits on; cancelled to make it look at the heap again."""

    def __len__(self) -> int:
        """Timers set and neither fired nor cancelled."""
        return len(self._heap) - self._cancelled

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any) -> Timer:
        """Run ``callback(*args)`` once ``clock.monotonic()`` reaches ``when``."""
        timer = Timer(self, callback, args)
        entry = (when, next(self._seq), timer)
        heapq.heappush(self._heap, entry)
        if self._heap[0] is entry and self._sleep is not None:
            self._sleep.cancel()  # no effect once done
        return timer

    def call_later(self, seconds: float, callback: Callable[..., Any], *args: Any) -> Timer:
        """Run ``callback(*args)`` in ``seconds`` of the clock's time."""
        return self.call_at(self._clock.monotonic() + seconds, callback, *args)

    async def run(self) -> None:
        """Fire timers as they fall due, until cancelled."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                self._fire_due()
                if self._heap:
                    self._sleep = loop.create_task(self._clock.sleep(self._heap[0][0] - self._clock.monotonic()))
                else:
                    self._sleep = loop.create_future()  # until a timer is set
                await asyncio.wait((self._sleep,))
        finally:
            if self._sleep is not None:
                self._sleep.cancel()
                self._sleep = None

    def _fire_due(self) -> None:
        now = self._clock.monotonic()
        while self._heap and self._heap[0][0] <= now:  # re-read: a callback's cancel may sweep the heap
            timer = heapq.heappop(self._heap)[2]
            if timer.done:
                self._cancelled -= 1
                continue
            timer.done = True
            callback, args = timer.callback, timer.args
            timer.callback, timer.args = None, ()
            try:
                callback(*args)  # type: ignore[misc]
            except Exception:  # noqa: BLE001 - one faulty callback must not stop every other timer
                log.exception("timer callback %r failed", callback)

    def _dropped(self) -> None:
        self._cancelled += 1
        if self._cancelled >= SWEEP_MIN and self._cancelled * 2 > len(self._heap):
            self._heap = [entry for entry in self._heap if not entry[2].done]
            heapq.heapify(self._heap)
            self._cancelled = 0
