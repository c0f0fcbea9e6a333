"""The dispatcher loop: claim due occurrences of the owned partitions and
keep their due instants in the timer wheel.

Each tick (default 1 s) it runs :meth:`DispatchStore.claim_due` over all
owned partitions at once, in batches until a batch comes back short (first
what is due now, then the look-ahead), and
puts each execution's due instant in the wheel; the wheel wakes the gateway
at that instant. What is due now and needs no decision at its instant goes
out from the claim itself, with the workers' credit the gateway lends it
(:mod:`tickwheel_server.store.claim_handout`), and is dealt beside the
next claim (its SQL runs in a store thread meanwhile; the deal asks the
fence itself, and the tick ends once every deal is done).
When the owned set changes, the wheel drops the timers of partitions lost
and is rebuilt from the store for partitions gained (the store is the
authority). A claim that finds a partition's epoch moved on
stops using that partition at once, until ownership reports a change (the
new owner's key reaches this server through its etcd watch).

A wake (:meth:`Dispatcher.wake`: a write made something due before the next
tick, :mod:`~tickwheel_server.dispatcher.wakeup`) ends the wait for the next
tick early: the claim runs at once, but never sooner than ``wake_gap``
seconds after the last one began, so wakes in a flood bring at most one
claim per gap. A wake changes only when the claim runs, never what it reads:
it still claims what is due by then and fences as ever.

With ``lanes`` above 1 the owned partitions are split into that many
contiguous, disjoint sets and each set's passes run at once, one claim in
flight per lane (their SQL in store threads side by side; the claim runs at
READ COMMITTED on PostgreSQL, so claims of disjoint partitions do not roll
each other back: :mod:`tickwheel_server.store.dispatch`). The deals of
every lane's claims still run one at a time, in the order the claims
committed, each beside the next claims.

Every ``review_every`` seconds a tick also reviews the jobs left out of
claims as unreadable or uncomputable (:meth:`DispatchStore.review_quarantine`):
their alerts resolve once the job can be dispatched again.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Protocol

from tickwheel.shared.clock import Clock

from ..store.claim_handout import HandOutOffer
from ..store.dispatch import DispatchStore
from ..store.executions import HandedOut
from ..telemetry.metrics import Metrics
from ..telemetry.outages import OutageLog
from ..wheel import WheelRunner

log = logging.getLogger(__name__)

MAX_LANES = 8
"""The most claims one dispatcher has in flight at once."""


def split_lanes(owned: dict[int, int], lanes: int) -> list[dict[int, int]]:
    """``owned`` in at most ``lanes`` contiguous runs of its partitions in
    order, as even as can be, none empty (pure)."""
    ordered = sorted(owned)
    count = max(1, min(lanes, len(ordered)))
    size, extra = divmod(len(ordered), count)
    runs, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        runs.append({p: owned[p] for p in ordered[start:end]})
        start = end
    return runs


class Owned(Protocol):
    """What the dispatcher needs of partition ownership."""

    def owned(self) -> dict[int, int]:
        """Partition → the fencing epoch this server holds."""

    @property
    def generation(self) -> int:
        """Bumped on every change of the owned set."""

    async def wait_changed(self, after: int) -> int:
        """Wait until the generation is greater than ``after``."""


class Loan(Protocol):
    offer: HandOutOffer


class Lender(Protocol):
    """What the dispatcher needs of the gateway: its workers' credit lent to
    a claim, and the deal of what the claim handed out with it."""

    def lend(self, limit: int) -> Loan | None:
        """Credit for one claim of at most ``limit`` a group of workers (None: none)."""

    def keep(self, loan: Loan, handed: list[list[HandedOut]]) -> None:
        """Give back at once the credit ``handed`` (what the claim handed out) will not spend."""

    async def settle(self, loan: Loan, handed: list[list[HandedOut]]) -> int:
        """Give the credit back and deal ``handed``; how many reached a worker."""


class Dispatcher:
    def __init__(
        self,
        store: DispatchStore,
        ownership: Owned,
        runner: WheelRunner,
        clock: Clock,
        *,
        tick: float = 1.0,
        lookahead: timedelta = timedelta(seconds=60),
        batch: int = 1000,
        metrics: Metrics | None = None,
        review_every: float = 30.0,
        lender: Lender | None = None,
        wake_gap: float = 0.05,
        lanes: int = 1,
    ) -> None:
        if not 1 <= lanes <= MAX_LANES:
            raise ValueError(f"lanes must be between 1 and {MAX_LANES}, not {lanes}")
        self._store = store
        self._ownership = ownership
        self._runner = runner
        self._clock = clock
        self.outages = OutageLog(log, "dispatcher", clock)
        self.review_outages = OutageLog(log, "quarantine review", clock, then=f"again in {review_every:g} s")
        self._tick = tick
        self._lookahead = lookahead
        self._batch = batch
        self._metrics = metrics
        self._review_every = review_every
        self._lender = lender
        self._wake_gap = wake_gap
        self._woken = asyncio.Event()
        self._lanes = lanes
        self._dealing: asyncio.Task[int] | None = None
        """The deal of the last claim's hand-outs, running beside the next claim (it awaits the deal before it)."""
        self._reviewed_at: float | None = None
        self._known: set[int] = set()
        self._stale: set[int] = set()
        self._generation = -1
        self.claimed = 0
        self.ticks = 0
        self.tick_done = asyncio.Event()
        self.woken_ticks = 0
        """Ticks a wake brought forward."""

    @property
    def tick(self) -> float:
        """Seconds between claims when nothing wakes it."""
        return self._tick

    def wake(self) -> None:
        """Claim now rather than at the next tick (a hint; see the module docstring)."""
        self._woken.set()

    async def run(self) -> None:
        while True:
            began = self._clock.monotonic()
            self._woken.clear()  # a wake from here on asks for the claim after this one
            try:
                await self.tick_once()
            except Exception as error:
                self.outages.failed("the dispatch tick", error)
            else:
                self.outages.ok()
            self.ticks += 1
            self.tick_done.set()
            self.tick_done = asyncio.Event()
            sleeper = asyncio.create_task(self._clock.sleep(self._tick))
            waiter = asyncio.create_task(self._ownership.wait_changed(self._generation))
            woken = asyncio.create_task(self._woken.wait())
            try:
                done, _ = await asyncio.wait({sleeper, waiter, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (sleeper, waiter, woken):
                    task.cancel()
            if done == {woken}:
                self.woken_ticks += 1
                gap = began + self._wake_gap - self._clock.monotonic()
                if gap > 0:
                    await self._clock.sleep(gap)

    async def tick_once(self) -> int:
        """Follow ownership changes, then claim until nothing more is due now."""
        generation = self._ownership.generation
        if generation != self._generation:
            self._generation, self._stale = generation, set()
        owned = {p: epoch for p, epoch in self._ownership.owned().items() if p not in self._stale}
        await self._follow(set(owned))
        try:
            total = await self._passes(owned)
        finally:
            await self._dealt()  # every deal done before the tick is
        self.claimed += total
        await self._review(owned)
        return total

    async def _passes(self, owned: dict[int, int]) -> int:
        if self._lanes == 1 or len(owned) < 2:
            return await self._lane_passes(owned, owned)
        lanes = split_lanes(owned, self._lanes)
        # Every lane ends before the tick goes on, even when one failed.
        done = await asyncio.gather(*(self._lane_passes(owned, lane) for lane in lanes), return_exceptions=True)
        for outcome in done:
            if isinstance(outcome, BaseException):
                raise outcome
        return sum(done)

    async def _lane_passes(self, owned: dict[int, int], lane: dict[int, int]) -> int:
        """The passes of one lane (``lane``: its partitions of ``owned``; the
        same dict with one lane). A stale partition leaves both."""
        total = 0
        # What is due now first, in every owned partition, then the
        # look-ahead: a batch scans in the index's order (partition, then
        # due instant), so one pass would claim a low partition's next
        # minute before a high partition's overdue jobs when the claim
        # falls behind.
        passes = (timedelta(0), self._lookahead) if self._lookahead > timedelta(0) else (self._lookahead,)
        for lookahead in passes:
            while lane:
                started = self._clock.monotonic()
                result = await self._claim(lane, lookahead)
                claimed = len(result.executions) + sum(map(len, result.handed_out))
                if claimed and self._metrics is not None:
                    self._metrics.claimed("dispatch", claimed, self._clock.monotonic() - started)
                for execution in result.executions:
                    self._runner.insert(execution.id, execution.due_at_us, execution.partition)
                total += claimed
                if result.stale_partitions:
                    log.warning("partitions %s have a newer owner: no longer claiming them",
                                sorted(result.stale_partitions))
                    self._stale |= result.stale_partitions
                    for partition in result.stale_partitions:
                        owned.pop(partition, None)
                        lane.pop(partition, None)
                    await self._follow(set(owned))  # only losses: nothing to read, no await
                if not result.full:
                    break
        return total

    async def _claim(self, owned: dict[int, int], lookahead: timedelta):
        """One batch. What is due now is claimed with the workers' credit
        lent, so what needs no decision goes out from the claim itself (not
        the look-ahead: its rows are mostly not due, and the loan would keep
        the credit from the rounds meanwhile). Its deal is left running
        (:attr:`_dealing`): the fence is asked again at the deal, so a
        refusal meanwhile sends none of it."""
        loan = self._lender.lend(self._batch) if self._lender is not None and lookahead <= timedelta(0) else None
        if loan is None:
            return await self._store.claim_due(owned, self._clock.now(), lookahead=lookahead, batch=self._batch)
        try:
            result = await self._store.claim_due(
                owned, self._clock.now(), lookahead=lookahead, batch=self._batch, offer=loan.offer
            )
        except BaseException:
            await self._lender.settle(loan, [])
            raise
        # What it did not hand out is lent again at once; its deal runs
        # beside the next claim (whose SQL runs in a thread meanwhile), one
        # deal at a time, in the claims' order: each deal starts once the
        # one before it ended, and this lane goes on once that one did.
        self._lender.keep(loan, result.handed_out)
        previous = self._dealing
        self._dealing = asyncio.create_task(self._settle_after(previous, loan, result.handed_out))
        if previous is not None:
            await previous
        return result

    async def _settle_after(self, previous: asyncio.Task[int] | None, loan: Loan, handed) -> int:
        """Deal ``handed`` once ``previous`` (the deal before it) ended; what
        ``previous`` raised is the claim's that awaits it to raise."""
        if previous is not None:
            await asyncio.wait({previous})
        return await self._lender.settle(loan, handed)

    async def _dealt(self) -> None:
        """Wait for the last claim's deal (re-raising what it raised)."""
        task, self._dealing = self._dealing, None
        if task is not None:
            await task

    async def _review(self, owned: dict[int, int]) -> None:
        started = self._clock.monotonic()
        if self._reviewed_at is not None and started - self._reviewed_at < self._review_every:
            return
        self._reviewed_at = started
        try:
            resolved = await self._store.review_quarantine(owned)
        except Exception as error:
            self.review_outages.failed("reviewing the jobs left out of claims", error)
            return
        self.review_outages.ok()
        if resolved:
            log.info("jobs dispatchable again: %s", resolved[:20])

    async def _follow(self, owned: set[int]) -> None:
        lost = self._known - owned
        gained = sorted(owned - self._known)
        if lost:
            self._runner.drop(lambda _key, _due_us, partition: partition in lost)
        if gained:
            waiting = await self._store.scheduled_in(gained, self._clock.now() + self._lookahead * 2)
            for execution in waiting:
                self._runner.insert(execution.id, execution.due_at_us, execution.partition)
        self._known = owned
