"""The asyncio driver of a :class:`TimerWheel`: sleep until the next slot, hand out what is due.

The loop: read ``clock.now()``, pop what is due and await ``on_due(batch)``;
then park until the tick the wheel's earliest timer fires at
(``next_fire_us``), at most ``max_sleep`` seconds, or until an insert that
is earlier than the planned wake-up (or any insert while the wheel is empty)
nudges it. So it wakes once per tick that has timers (cascades between levels
happen inside ``pop_due`` and cost no wake-up), at least once every
``max_sleep`` (1 s by default: the sleep runs on monotonic time while due
instants are wall time, and the cap bounds how late a stepped wall clock can
make it), and never polls faster.

Mutate the wheel through the runner (``insert``, ``cancel``, ``rebuild``,
``drop``) so it can be woken; all of them are synchronous and O(1) except
``rebuild`` and ``drop``.

If ``on_due`` raises, the error is logged and the loop goes on: the popped
timers are not retried by the wheel, because the store stays the authority
and the gateway's sweep hands out any due execution nobody claimed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from .timer import Timer
from .wheel import TimerWheel

log = logging.getLogger(__name__)

OnDue = Callable[[list[Timer]], Awaitable[None]]


class WheelRunner:
    """Drives ``wheel`` on ``clock`` and delivers due batches to ``on_due``.

    Counters (for metrics and tests): ``parks`` (times the loop went to
    sleep), ``wakeups`` (times it woke: slept out or nudged), ``nudges`` (of
    those, woken by an insert or rebuild), ``batches`` and ``delivered``
    (timers handed to ``on_due``), ``errors`` (``on_due`` failures).
    """

    def __init__(self, wheel: TimerWheel, clock: Clock, on_due: OnDue, *, max_sleep: float = 1.0) -> None:
        if not max_sleep > 0:
            raise ValueError("WheelRunner max_sleep must be positive")
        self.wheel = wheel
        self._clock = clock
        self._on_due = on_due
        self._max_sleep_us = int(max_sleep * 1_000_000)
        self._nudge: asyncio.Future[None] | None = None  # set while parked
        self._wake_us: int | None = None  # planned wake-up while parked on a non-empty wheel
        self._park_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._running = False
        self.parks = self.wakeups = self.nudges = 0
        self.batches = self.delivered = self.errors = 0

    # ------------------------------------------------------------ the wheel

    def insert(self, key: Hashable, due_us: int, payload: Any = None) -> None:
        """``wheel.insert``, waking the loop if this timer is due before it planned to wake."""
        self.wheel.insert(key, due_us, payload)
        if self._nudge is not None and (self._wake_us is None or due_us < self._wake_us):
            self._wake()

    def cancel(self, key: Hashable) -> bool:
        """``wheel.cancel`` (the loop may wake once at a slot that emptied: harmless)."""
        return self.wheel.cancel(key)

    def rebuild(self, timers: Iterable[tuple[Hashable, int, Any]]) -> None:
        """``wheel.rebuild`` at the clock's now, and wake the loop to re-plan."""
        self.wheel.rebuild(timers, now_us=to_us(self._clock.now()))
        if self._nudge is not None:
            self._wake()

    def drop(self, predicate: Callable[[Hashable, int, Any], bool]) -> int:
        """``wheel.drop``: cancel the timers for which ``predicate(key, due_us, payload)`` is true."""
        return self.wheel.drop(predicate)

    @property
    def sleeping_until_us(self) -> int | None:
        """The planned wake-up while parked (None while running, or parked
        on an empty wheel, when any insert wakes it)."""
        return self._wake_us if self._nudge is not None else None

    async def wait_parked(self, parks: int) -> None:
        """Return once the loop has parked at least ``parks`` times: lets a
        test wait for the loop to settle without sleeping."""
        if self.parks >= parks:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._park_waiters.append((parks, waiter))
        await waiter

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Run until cancelled (one loop per runner)."""
        if self._running:
            raise RuntimeError("WheelRunner.run is already running")
        self._running = True
        try:
            await self._loop()
        finally:
            self._running = False

    async def _loop(self) -> None:
        wheel, clock = self.wheel, self._clock
        while True:
            now_us = to_us(clock.now())
            batch = wheel.pop_due(now_us)
            if batch:
                await self._deliver(batch)
                continue  # delivery took time: more may be due
            fire_us = wheel.next_fire_us()
            if fire_us is None:
                wake_us = None
                delay_us = self._max_sleep_us
            else:
                wake_us = min(fire_us, now_us + self._max_sleep_us)
                # After pop_due(now) the next fire is in the future; should it
                # not be, sleep a tick rather than spin.
                delay_us = wake_us - now_us if wake_us > now_us else wheel.geometry.tick_us
            await self._park(wake_us, delay_us)

    async def _deliver(self, batch: list[Timer]) -> None:
        self.batches += 1
        self.delivered += len(batch)
        try:
            await self._on_due(batch)
        except Exception:
            self.errors += 1
            log.exception(
                "timer wheel: on_due failed for %d timers; the store's sweep hands out those executions",
                len(batch),
            )

    async def _park(self, wake_us: int | None, delay_us: int) -> None:
        loop = asyncio.get_running_loop()
        self._nudge = nudge = loop.create_future()
        self._wake_us = wake_us
        sleeper = loop.create_task(self._clock.sleep(delay_us / 1_000_000))
        self.parks += 1
        self._release_park_waiters()
        try:
            await asyncio.wait((sleeper, nudge), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            self._nudge = None
            self._wake_us = None
        self.wakeups += 1

    def _wake(self) -> None:
        nudge = self._nudge
        if nudge is not None and not nudge.done():
            nudge.set_result(None)
            self.nudges += 1

    def _release_park_waiters(self) -> None:
        if not self._park_waiters:
            return
        still = []
        for parks, waiter in self._park_waiters:
            if self.parks >= parks:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                still.append((parks, waiter))
        self._park_waiters = still
