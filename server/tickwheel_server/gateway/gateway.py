"""The gateway's wiring: its parts built over the state they share, driven
by one hand-out loop.

A hand-out round runs when something may be ready: the timer wheel reached a
due instant, a worker granted credit or connected, results were recorded
(they may have freed a job or a concurrency key), or the sweep interval
(default 1 s) passed; the sweep is also how this server's workers take work
of partitions other servers own (work stealing).

A *ready* wake (:meth:`Gateway.wake_ready`: a trigger, backfill or resume
through this server's API, or another server's wake put for one of this
server's partitions) is a tenant's to send as fast as its request rate
allows, on every server of the fleet. It starts a round at once, but never
sooner than ``ready_gap`` seconds after the last round a ready wake
started: ready wakes that arrive while a round runs or within the gap are
merged into one round after it, so they start at most one round per gap
whatever their number. None is lost: a ready wake that arrives during a
round (which may have read before the write committed) always brings a
round that begins after it, and any round that begins after it answers it.

How the parts fit:

- :mod:`.fence` says whether anything may be handed out now (this server's
  session surely alive, its clock agreeing with the database's); the loop
  here compares the clocks before each round when they are due.
- :mod:`.rounds` runs each round: claims ready executions per group of
  workers and deals them out, passing the fence before the round, inside
  each claim and before each deal.
- :mod:`.intake` checks, queues, records and acknowledges the workers'
  results; its queue's writer (:mod:`.results`) runs beside the rounds and
  holds back while the rounds have a backlog.
- :mod:`.claimed` lends the workers' credit to the dispatcher's claim of
  what is due now and deals what the claim handed out itself.
- :mod:`.armed` arms what is ready within a few seconds and, at the start
  of each round, starts and deals what it armed for the next second and
  sends what was started for the instant.
- :mod:`.liveness` requeues what workers lost, re-attaches what a
  reconnecting worker still holds and passes cancel requests on.

They share what this gateway builds: :attr:`Gateway.inflight` (which stream
holds each delivery), the (job id, tenant) of each delivery handed out here,
the budget of what a credential sends that none of its streams holds
(:mod:`.budget`), and the wake-up of the next round.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from ..lease.base import Session
from ..store.executions import Retry
from ..store.queue import ExecutionQueue
from ..telemetry.metrics import Metrics
from ..telemetry.outages import OutageLog
from ..telemetry.tracing import Tracing
from .armed import DEFAULT_AHEAD, ArmedQueue
from .budget import DEFAULT_BURST, DEFAULT_RATE, UnheldBudget
from .claimed import ClaimLending
from .connections import Connections, WorkerConnection
from .fence import SKEW_GRACE, Fence
from .inflight import InFlight, Key
from .intake import Intake
from .liveness import Liveness
from .rounds import Rounds

log = logging.getLogger(__name__)

DEFAULT_READY_GAP = 0.05
"""Seconds between the rounds ready wakes start (see the module docstring)."""


class Gateway:
    """Builds the parts and the state they share (see the module), and runs
    the hand-out rounds (:meth:`run`). Callers use the part they need:
    :attr:`fence`, :attr:`rounds`, :attr:`intake`, :attr:`liveness`."""

    def __init__(
        self,
        store: ExecutionQueue,
        connections: Connections,
        clock: Clock,
        *,
        owner: str,
        session: Session | None = None,
        sweep_interval: float = 1.0,
        db_clock=None,
        skew_tolerance: float = 0.25,
        skew_check_interval: float = 60.0,
        skew_max_age: float | None = None,
        skew_grace: float = SKEW_GRACE,
        on_skew: Callable[[float | None, bool], Awaitable[None]] | None = None,
        heartbeat_timeout: float = 30.0,
        reattach_grace: float = 10.0,
        on_retry: Callable[[Retry], None] | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        unheld_rate: float = DEFAULT_RATE,
        unheld_burst: float = DEFAULT_BURST,
        arm_ahead: float = DEFAULT_AHEAD,
        ready_gap: float = DEFAULT_READY_GAP,
    ) -> None:
        if not ready_gap >= 0:
            raise ValueError("ready_gap must be >= 0 seconds")
        self._clock = clock
        self.outages = OutageLog(log, "gateway", clock)
        self._sweep_interval = sweep_interval
        self._ready_gap = ready_gap
        self._wake = asyncio.Event()
        self._ready = asyncio.Event()
        """A ready wake arrived since the last round began."""
        wake = self._wake.set
        # (job id, tenant) of each delivery this gateway handed out and still tracks (metrics and logs).
        held: dict[Key, tuple[str, str]] = {}
        self.inflight: InFlight[WorkerConnection] = InFlight(timeout=heartbeat_timeout, grace=reattach_grace)
        # What each worker credential may send that none of its streams holds (:mod:`.budget`).
        budget = UnheldBudget(clock, rate=unheld_rate, burst=unheld_burst)
        self.fence = Fence(
            clock, owner=owner, session=session, db_clock=db_clock, skew_tolerance=skew_tolerance,
            skew_check_interval=skew_check_interval, skew_max_age=skew_max_age, skew_grace=skew_grace,
            on_skew=on_skew,
        )
        self.intake = Intake(
            store.outcomes, clock, self.inflight, held, budget, wake=wake, on_retry=on_retry, metrics=metrics
        )
        self.liveness = Liveness(store.requeues, clock, self.fence, self.inflight, held, budget, wake=wake, metrics=metrics)
        self.armed = ArmedQueue(
            store.arming, store.requeues, clock, self.fence, ahead=arm_ahead, heartbeat_timeout=heartbeat_timeout
        )
        self.rounds = Rounds(
            store, connections, clock, self.fence, self.inflight, held, wake=wake,
            backlog=self.intake.results.backlog, signal_cancels=self.liveness.signal_cancels,
            metrics=metrics, tracing=tracing, armed=self.armed,
        )
        self.lending = ClaimLending(self.rounds, self.fence, store, wake=wake)
        """Lends the workers' credit to the dispatcher's claim and deals what it handed out."""
        self.rounds_run = 0
        """Rounds :meth:`run` has run (failed ones too)."""
        self.round_done = asyncio.Event()
        """Set after each round :meth:`run` runs (then replaced)."""
        self.ready_wakes = 0
        """Ready wakes received (:meth:`wake_ready`)."""
        self.woken_rounds = 0
        """Rounds a ready wake started (the others answered by a round begun for another reason)."""

    def wake(self) -> None:
        """Run a hand-out round now (something may be ready)."""
        self._wake.set()

    def wake_ready(self) -> None:
        """Executions were made ready now (a trigger, a backfill, a resume,
        here or on another server): run a round at once, or, if a ready wake
        started one less than ``ready_gap`` ago, at the end of the gap (see
        the module docstring)."""
        self.ready_wakes += 1
        self._ready.set()

    def use_session(self, session: Session, owner: str) -> None:
        """Hand out under ``session`` (named ``owner`` in the store) from now
        on (:meth:`.Fence.use_session`), and run a round at once."""
        self.fence.use_session(session, owner)
        self.wake()

    async def give_back(self) -> int:
        """After :meth:`run` ended (a graceful stop): give back what this
        server armed or started and did not send (:meth:`.ArmedQueue.give_back`)."""
        return await self.armed.give_back(self.rounds)

    async def run(self) -> None:
        """Hand out at every wake-up and every sweep, and write the workers'
        results (:attr:`Intake.results <.intake.Intake.results>`) beside it, until cancelled."""
        writer = asyncio.create_task(self.intake.results.run(), name="tickwheel-results")
        try:
            await self._hand_out_forever()
        finally:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)

    async def _hand_out_forever(self) -> None:
        woken_at = -math.inf  # when the last round a ready wake started began (monotonic)
        while True:
            if self.fence.compares_clocks:
                await self.fence.check_skew_if_due()
            self._ready.clear()  # a ready wake from here on asks for a round after this one
            try:
                await self.rounds.hand_out_round()
            except Exception as error:
                self.outages.failed("the hand-out round", error)
            else:
                self.outages.ok()
            self.rounds_run += 1
            self.round_done.set()
            self.round_done = asyncio.Event()
            if await self._next_round(woken_at):
                woken_at = self._clock.monotonic()
                self.woken_rounds += 1

    async def _next_round(self, woken_at: float) -> bool:
        """Wait for the next round: a wake, the sweep, an armed instant, or
        a ready wake once ``ready_gap`` has passed since ``woken_at``.
        Whether a ready wake started it."""
        while True:
            delay = self._sweep_interval
            now_us = to_us(self._clock.now())
            armed_at = self.armed.next_instant_us(now_us)
            if armed_at is not None:  # an armed instant may be of a partition not in this server's wheel
                delay = min(delay, (armed_at - now_us) / 1e6)
            ready = self._ready.is_set()
            if ready:
                gap = woken_at + self._ready_gap - self._clock.monotonic()
                if gap <= 0:
                    self._wake.clear()  # the round answers any wake as well
                    return True
                delay = min(delay, gap)
            sleeper = asyncio.create_task(self._clock.sleep(delay))
            waiter = asyncio.create_task(self._wake.wait())
            waits = {sleeper, waiter}
            if not ready:
                waits.add(asyncio.create_task(self._ready.wait()))
            try:
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in waits:
                    task.cancel()
            if self._wake.is_set():
                self._wake.clear()
                return False
            if sleeper in done:  # the sweep, an armed instant, or the end of the ready wake's gap
                return ready and self._clock.monotonic() >= woken_at + self._ready_gap
            # A ready wake arrived: at once, or at the end of its gap.
