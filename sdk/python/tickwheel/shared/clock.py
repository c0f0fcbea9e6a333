"""The clock as a dependency.

Every component that reads time takes a :class:`Clock`. Production code uses
:class:`SystemClock`; tests use :class:`FakeClock` and advance it explicitly, so
no test sleeps to wait for time to pass.

Wall time (``now``) is an aware UTC ``datetime``; it decides every comparison
with a due instant. Monotonic time (``monotonic``) measures intervals (timeouts,
heartbeats) and never goes backwards.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import datetime, timedelta, timezone
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, an aware datetime in UTC."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never decreases."""

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds`` of this clock's time."""


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that moves only when told to.

    ``sleep`` suspends until :meth:`advance` moves the clock past the wake-up
    time. Monotonic time and wall time advance together. With ``autojump``,
    ``sleep`` instead moves the clock forward by the requested time at once
    (for tests where only the order of events matters, such as retries).
    """

    def __init__(self, start: datetime | None = None, *, autojump: bool = False) -> None:
        self.autojump = autojump
        self._now = start or datetime(2027, 1, 1, tzinfo=timezone.utc)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock start must be timezone-aware")
        self._mono = 1000.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0 or self.autojump:
            if seconds > 0:
                self.advance(seconds)
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    def set(self, instant: datetime) -> None:
        """Jump wall time to ``instant`` (forward only) and wake due sleepers."""
        delta = (instant - self._now).total_seconds()
        if delta < 0:
            raise ValueError("FakeClock only moves forward")
        self.advance(delta)

    def freeze(self, seconds: float) -> None:
        """Move both clocks forward *without* waking anyone: what a process
        frozen that long (SIGSTOP, a GC pause) finds on waking, before any of
        its tasks ran. The sleepers now due wake at the next :meth:`advance`."""
        if seconds < 0:
            raise ValueError("FakeClock only moves forward")
        self._now += timedelta(seconds=seconds)
        self._mono += seconds

    def step_wall(self, seconds: float) -> None:
        """Step the wall clock by ``seconds`` (negative: back) and leave
        monotonic time alone, as setting the system clock does."""
        self._now += timedelta(seconds=seconds)

    def advance(self, seconds: float) -> None:
        """Move both clocks forward and wake every sleeper now due."""
        if seconds < 0:
            raise ValueError("FakeClock only moves forward")
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
