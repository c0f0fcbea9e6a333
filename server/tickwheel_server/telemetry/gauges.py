"""The metrics that only the store knows: ready queue depth per tenant and
dead-letter depth, read before a scrape and cached, so a scrape costs at
most two bounded reads every ``ttl`` seconds however often it comes.

Queue depth is what ClusterStatus reads (:meth:`OperationsStore.queues`:
the top tenants by ready executions, each counted up to a cap); dead
letters are counted on the ``executions_dead`` partial index, up to the same
cap (a deeper pile reads as the cap).
"""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..store.base import SqlStore
from ..store.isolation import status_in
from ..store.operations import READY_COUNT_CAP, OperationsStore
from ..store.tables import executions
from .metrics import Metrics


class StoreGauges(SqlStore):
    def __init__(self, engine, clock, *, top: int = 20, ttl: float = 5.0) -> None:
        super().__init__(engine, clock)
        self._operations = OperationsStore(engine, clock)
        self._top = max(1, top)
        self._ttl = ttl
        self._read_at: float | None = None
        self._lock = asyncio.Lock()
        self.queues: list[tuple[dict[str, str], float]] = []
        self.dead_letters = 0

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

    async def refresh(self) -> None:
        """Read both figures again unless they are younger than ``ttl``."""
        async with self._lock:
            now = self.clock.monotonic()
            if self._read_at is not None and now - self._read_at < self._ttl:
                return
            queues = await self._operations.queues(self.clock.now(), self._top)
            self.dead_letters = await self._tx(_count_dead, idempotent=True)
            self.queues = [({"tenant": q.tenant}, float(q.ready)) for q in queues]
            self._read_at = self.clock.monotonic()


def _count_dead(conn: Connection) -> int:
    capped = sa.select(sa.literal(1)).where(status_in(executions.c.status, "dead")).limit(READY_COUNT_CAP).subquery()
    return conn.execute(sa.select(sa.func.count()).select_from(capped)).scalar_one()
