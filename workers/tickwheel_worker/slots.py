"""The worker's slots: at most ``size`` targets run at once, the waiting served in order.

Not an ``asyncio.Semaphore``: every attempt takes a slot and gives it back,
and the Semaphore's ``locked()`` and ``acquire()`` look at every waiter in
a generator each time (two of them per attempt), where taking a free slot
here is one comparison. A waiter holds a future rather than a coroutine, so
an attempt that stops waiting (cancelled, deadline passed, worker stopping)
knows at once whether a slot was handed to it meanwhile (:meth:`abandon`).
"""

from __future__ import annotations

import asyncio
from collections import deque


class Slots:
    """``size`` slots; :meth:`take` or :meth:`wait` for one, :meth:`release` it when done."""

    def __init__(self, size: int) -> None:
        self.free = size
        """Slots neither taken nor handed to a waiter. Never above 0 while anyone waits:
        :meth:`release` hands a slot to a waiter before it counts it free."""
        self._waiters: deque[asyncio.Future[None]] = deque()
        """Futures of :meth:`wait`, in order; abandoned ones stay until their turn."""

    def locked(self) -> bool:
        """True when a slot cannot be taken now."""
        return not self.free

    def take(self) -> bool:
        """Take a free slot at once; False when none is free (nobody waits while one is)."""
        if self.free:
            self.free -= 1
            return True
        return False

    def wait(self) -> asyncio.Future[None]:
        """A future done (with None) when a slot is handed to it, in order of waiting
        (call it when :meth:`take` fails).

        The slot is the caller's from then on. To stop waiting, call
        :meth:`abandon`, not ``cancel``: a slot may have been handed already.
        """
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(handed)
        return handed

    def abandon(self, handed: asyncio.Future[None]) -> None:
        """Stop waiting on ``handed``; a slot already handed to it is released."""
        if handed.done() and not handed.cancelled():
            self.release()
        else:
            handed.cancel()  # skipped when its turn comes

    def release(self) -> None:
        """Give a slot back: to the first waiter still waiting, else to the free ones."""
        while self._waiters:
            handed = self._waiters.popleft()
            if not handed.done():
                handed.set_result(None)
                return
        self.free += 1
