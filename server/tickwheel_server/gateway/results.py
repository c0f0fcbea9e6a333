"""Workers' results, written in few large transactions, after the starts.

Every result message of every worker connected to this server goes into one
bounded queue, and one task writes the queue: up to ``batch`` results per
transaction, one transaction at a time. Four workers answering at once cost
one transaction, not four competing ones, and the statements per result
shrink with the batch.

Starts come first. While the hand-out has a backlog (its last claim was a
full batch: a burst is being handed out), writing waits, for at most
``defer`` seconds from the oldest result waiting, so the store's time goes
to lateness, which is what the schedule promises; results then go in large
batches. A backlog that outlasts the queue's half (a flood, not a burst)
does not hold results back: they are written as they come, ``batch`` at a
time. A result is only delayed, never dropped: it stays queued until
a transaction that recorded it commits, and the worker keeps it until it
is acknowledged.

A failed write is one of two things. A retryable one (the store is
unavailable, SQLSTATE 40001 on every attempt, a commit of unknown outcome:
``retryable``) is retried, the whole batch, after ``retry_delay``: late,
not lost. Any other says something in the batch cannot be written, and
retrying it would fail forever and hold everyone's results back: the batch
is split in halves, each written on its own, down to the one result that
fails, which alone is refused (``refuse``: its worker is told why); every
other result is recorded.

Backpressure: a worker whose result arrives while ``max_pending`` are
queued waits (its stream is not read meanwhile) until the writer catches up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from tickwheel.shared.clock import Clock

from ..store.errors import AmbiguousCommitError, RetryableStoreError
from ..telemetry.outages import OutageLog

log = logging.getLogger(__name__)

C = TypeVar("C")
R = TypeVar("R")

DEFAULT_BATCH = 2000
DEFAULT_MAX_PENDING = 20_000
DEFAULT_DEFER = 1.0
DEFAULT_RETRY_DELAY = 1.0

Apply = Callable[[list[tuple[C, R]]], Awaitable[None]]
"""Records a batch of (connection, result) pairs and acknowledges them; raises if nothing was recorded."""
Refuse = Callable[[tuple[C, R], Exception], Awaitable[None]]
"""Tells the worker that one (connection, result) could not be recorded (``Exception``: why); must not raise."""


def store_retryable(error: Exception) -> bool:
    """Whether a failed write may succeed if tried again later (see :mod:`..store.errors`).
    A commit of unknown outcome is retried too: recording results is idempotent."""
    return isinstance(error, (RetryableStoreError, AmbiguousCommitError))


class ResultQueue(Generic[C, R]):
    def __init__(
        self,
        apply: Apply,
        clock: Clock,
        *,
        refuse: Refuse,
        retryable: Callable[[Exception], bool] = store_retryable,
        batch: int = DEFAULT_BATCH,
        max_pending: int = DEFAULT_MAX_PENDING,
        defer: float = DEFAULT_DEFER,
        retry_delay: float = DEFAULT_RETRY_DELAY,
    ) -> None:
        if batch < 1 or max_pending < batch or defer < 0 or retry_delay <= 0:
            raise ValueError("need batch >= 1, max_pending >= batch, defer >= 0 and retry_delay > 0")
        self._apply = apply
        self._refuse = refuse
        self._retryable = retryable
        self._clock = clock
        self.outages = OutageLog(log, "result recording", clock, then=f"retrying in {retry_delay:g} s")
        self.batch = batch
        self.max_pending = max_pending
        self.defer = defer
        self.retry_delay = retry_delay
        self._pending: list[tuple[C, R]] = []
        self._oldest: float | None = None
        """Monotonic instant the oldest queued result arrived."""
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._backlog = False
        self._backlog_over = asyncio.Event()
        self._backlog_over.set()
        self._half_full = asyncio.Event()
        self.written = 0
        self.transactions = 0
        self.refused = 0
        """Results refused because writing them failed for a reason retrying cannot fix."""

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def submit(self, connection: C, results: Sequence[R]) -> None:
        """Queue a worker's results; waits while the queue is full."""
        while len(self._pending) >= self.max_pending:
            self._room.clear()
            await self._room.wait()
        if not self._pending:
            self._oldest = self._clock.monotonic()
        self._pending.extend((connection, result) for result in results)
        self._arrived.set()
        if len(self._pending) * 2 >= self.max_pending:
            self._half_full.set()

    def backlog(self, busy: bool) -> None:
        """The hand-out says whether it has a backlog (its last claim was full)."""
        self._backlog = busy
        if busy:
            self._backlog_over.clear()
        else:
            self._backlog_over.set()

    async def run(self) -> None:
        while True:
            await self._arrived.wait()
            await self._wait_for_the_hand_out()
            items = self._pending[: self.batch]
            finished, stopped = await self._write(items)
            del self._pending[:finished]
            if stopped is not None:
                self.outages.failed(f"recording {len(items) - finished} results", stopped, retryable=True)
                await self._clock.sleep(self.retry_delay)
            elif finished:
                self.outages.ok()
            if self._pending:
                self._oldest = self._clock.monotonic()
            else:
                self._oldest = None
                self._arrived.clear()
            if len(self._pending) < self.max_pending:
                self._room.set()
            if len(self._pending) * 2 < self.max_pending:
                self._half_full.clear()

    async def _write(self, items: list[tuple[C, R]]) -> tuple[int, Exception | None]:
        """Record ``items``, splitting around what cannot be written; returns
        how many of them, from the first, are finished (recorded or refused),
        and the retryable error that stopped it before the rest, if one did."""
        try:
            await self._apply(items)
        except Exception as error:  # noqa: BLE001 - classified: retried, split or refused, never dropped
            if self._retryable(error):
                return 0, error
            if len(items) == 1:
                log.error("a result cannot be recorded and is refused: %s: %s", type(error).__name__, error)
                self.refused += 1
                await self._refuse(items[0], error)
                return 1, None
            log.warning("recording %d results failed (%s: %s); splitting the batch to find the one that fails",
                        len(items), type(error).__name__, error)
        else:
            self.written += len(items)
            self.transactions += 1
            return len(items), None
        half = len(items) // 2
        finished, stopped = await self._write(items[:half])
        if stopped is not None or finished < half:
            return finished, stopped
        more, stopped = await self._write(items[half:])
        return half + more, stopped

    async def _wait_for_the_hand_out(self) -> None:
        """While the hand-out has a backlog, wait until it ends or the oldest
        queued result has waited ``defer`` seconds; not while the queue is
        half full (a long backlog: results are then written as they come,
        in full batches, and the queue never blocks a worker's stream)."""
        if not self._backlog or self._oldest is None or len(self._pending) * 2 >= self.max_pending:
            return
        left = self._oldest + self.defer - self._clock.monotonic()
        if left <= 0:
            return
        waits = {
            asyncio.ensure_future(self._clock.sleep(left)),
            asyncio.ensure_future(self._backlog_over.wait()),
            asyncio.ensure_future(self._half_full.wait()),
        }
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
