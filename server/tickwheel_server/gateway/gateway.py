"""The gateway's wiring: its parts built over the state they share, driven
by one hand-out loop.

A hand-out round runs when something may be ready: the timer wheel reached a
due instant, a worker granted credit or connected, results were recorded
(they may have freed a job or a concurrency key), or the sweep interval
(default 1 s) passed; the sweep is also how this server's workers take work
of partitions other servers own (work stealing). How the parts fit:

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
from collections.abc import Awaitable, Callable

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from ..lease.base import Session
from ..store.executions import Retry
from ..store.queue import ExecutionQueue
from ..telemetry.metrics import Metrics
from ..telemetry.tracing import Tracing
from .armed import DEFAULT_AHEAD, ArmedQueue
from .budget import DEFAULT_BURST, DEFAULT_RATE, UnheldBudget
from .claimed import ClaimLending
from .connections import Connections, WorkerConnection
from .fence import Fence
from .inflight import InFlight, Key
from .intake import Intake
from .liveness import Liveness
from .rounds import Rounds

log = logging.getLogger(__name__)


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
        on_skew: Callable[[float | None, bool], Awaitable[None]] | None = None,
        heartbeat_timeout: float = 30.0,
        reattach_grace: float = 10.0,
        on_retry: Callable[[Retry], None] | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        unheld_rate: float = DEFAULT_RATE,
        unheld_burst: float = DEFAULT_BURST,
        arm_ahead: float = DEFAULT_AHEAD,
    ) -> None:
        self._clock = clock
        self._sweep_interval = sweep_interval
        self._wake = asyncio.Event()
        wake = self._wake.set
        # (job id, tenant) of each delivery this gateway handed out and still tracks (metrics and logs).
        held: dict[Key, tuple[str, str]] = {}
        self.inflight: InFlight[WorkerConnection] = InFlight(timeout=heartbeat_timeout, grace=reattach_grace)
        # What each worker credential may send that none of its streams holds (:mod:`.budget`).
        budget = UnheldBudget(clock, rate=unheld_rate, burst=unheld_burst)
        self.fence = Fence(
            clock, owner=owner, session=session, db_clock=db_clock, skew_tolerance=skew_tolerance,
            skew_check_interval=skew_check_interval, skew_max_age=skew_max_age, on_skew=on_skew,
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

    def wake(self) -> None:
        """Run a hand-out round now (something may be ready)."""
        self._wake.set()

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
        while True:
            if self.fence.compares_clocks:
                await self.fence.check_skew_if_due()
            try:
                await self.rounds.hand_out_round()
            except Exception:
                log.exception("hand-out round failed; retrying at the next wake-up")
            self.rounds_run += 1
            self.round_done.set()
            self.round_done = asyncio.Event()
            delay = self._sweep_interval
            now_us = to_us(self._clock.now())
            armed_at = self.armed.next_instant_us(now_us)
            if armed_at is not None:  # an armed instant may be of a partition not in this server's wheel
                delay = min(delay, (armed_at - now_us) / 1e6)
            sleeper = asyncio.create_task(self._clock.sleep(delay))
            waiter = asyncio.create_task(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waiter.cancel()
            self._wake.clear()

