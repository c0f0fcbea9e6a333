"""The metrics that only the store knows: ready queue depth per tenant,
dead-letter depth and open alerts by kind, read before a scrape and cached,
so a scrape costs at most three bounded reads every ``ttl`` seconds however
often it comes.

The reads are :class:`~tickwheel_server.store.gauges.GaugeStore`'s (each
counted up to a cap).
"""

from __future__ import annotations

import asyncio

from tickwheel.shared.clock import Clock

from ..alerts.catalogue import ALERT_KINDS
from ..store.errors import StoreUnavailableError
from ..store.gauges import GaugeStore
from ..store.operations import READY_COUNT_CAP
from .metrics import Metrics


class StoreGauges:
    """The store's gauges for one server's metrics, read at most every ``ttl`` seconds."""

    def __init__(self, engine, clock: Clock, *, top: int = 20, ttl: float = 5.0, wait: float = 2.0) -> None:
        self.clock = clock
        self._store = GaugeStore(engine, clock)
        self._top = max(1, top)
        self._ttl = ttl
        self._read_at: float | None = None
        self._wait = wait
        self._reading: asyncio.Future[None] | None = None
        self.queues: list[tuple[dict[str, str], float]] = []
        self.dead_letters = 0
        self.open_alerts: list[tuple[dict[str, str], float]] = []

    def install(self, metrics: Metrics) -> None:
        metrics.before_scrape(self.refresh)
        metrics.observe(
            "tickwheel_queue_depth",
            f"Ready executions (scheduled, ready_at passed) of the {self._top} tenants with the most, "
            f"each counted up to {READY_COUNT_CAP}; read from the store at most every {self._ttl:g} s",
            lambda: self.queues,
        )
        metrics.observe(
            "tickwheel_dead_letters",
            f"Dead-lettered executions kept (all tenants, counted up to {READY_COUNT_CAP})",
            lambda: self.dead_letters,
        )
        metrics.observe(
            "tickwheel_alerts_open",
            f"Open alerts by kind, every kind shown (0 when none; counted up to {READY_COUNT_CAP} in all); "
            f"read from the store at most every {self._ttl:g} s",
            lambda: self.open_alerts,
        )

    async def refresh(self) -> None:
        """Read the figures again unless they are younger than ``ttl``,
        waiting at most ``wait`` seconds: a read the store holds up (a table
        locked by an operator, say) goes on alone, one at a time, and the
        scrape answers with the last figures meanwhile (the wait raised as
        the store's outage, which :meth:`Metrics.refresh` logs once) rather
        than hanging with it."""
        if self._read_at is not None and self.clock.monotonic() - self._read_at < self._ttl:
            return
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read())
        reading = self._reading
        try:
            await asyncio.wait_for(asyncio.shield(reading), self._wait)
        except TimeoutError:
            raise StoreUnavailableError(
                f"the store has not answered the gauges' reads in {self._wait:g} s; the last figures are shown",
                attempts=1,
            ) from None
        finally:
            if reading.done():  # its failure, if any, was raised here: the next scrape reads again
                self._reading = None

    async def _read(self) -> None:
        queues = await self._store.queues(self.clock.now(), self._top)
        self.dead_letters = await self._store.dead_letters()
        open_alerts = await self._store.open_alerts()
        self.open_alerts = [({"kind": kind}, float(open_alerts.get(kind, 0))) for kind in ALERT_KINDS]
        self.queues = [({"tenant": q.tenant}, float(q.ready)) for q in queues]
        self._read_at = self.clock.monotonic()
