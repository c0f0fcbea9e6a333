"""The SQL behind the store's gauges: ready queue depth per tenant,
dead-letter depth and open alerts by kind, each a bounded read.

Queue depth is what ClusterStatus reads (:meth:`OperationsStore.queues`:
the top tenants by ready executions, each counted up to a cap); dead
letters are counted on the ``executions_dead`` partial index, up to the same
cap (a deeper pile reads as the cap); open alerts are read on the
``alerts_open`` partial index, up to the same cap in all. Caching and publishing them is
:mod:`tickwheel_server.telemetry.gauges`.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import SqlStore
from .isolation import status_in
from .operations import READY_COUNT_CAP, OperationsStore, TenantQueue
from .tables import alerts, executions


class GaugeStore(SqlStore):
    """The reads of :class:`~tickwheel_server.telemetry.gauges.StoreGauges`."""

    def __init__(self, engine, clock) -> None:
        super().__init__(engine, clock)
        self._operations = OperationsStore(engine, clock)

    async def queues(self, now: datetime, top: int) -> list[TenantQueue]:
        """The ``top`` tenants by ready executions as of ``now``, each counted up to :data:`READY_COUNT_CAP`."""
        return await self._operations.queues(now, top)

    async def dead_letters(self) -> int:
        """Dead-lettered executions kept (all tenants), counted up to :data:`READY_COUNT_CAP`."""
        return await self._tx(_count_dead, idempotent=True)

    async def open_alerts(self) -> dict[str, int]:
        """Open alerts by kind (kinds with none left out), :data:`READY_COUNT_CAP` counted in all."""
        return await self._tx(_count_open_alerts, idempotent=True)


def _count_dead(conn: Connection) -> int:
    capped = sa.select(sa.literal(1)).where(status_in(executions.c.status, "dead")).limit(READY_COUNT_CAP).subquery()
    return conn.execute(sa.select(sa.func.count()).select_from(capped)).scalar_one()


def _count_open_alerts(conn: Connection) -> dict[str, int]:
    capped = sa.select(alerts.c.kind).where(alerts.c.resolved_at.is_(None)).limit(READY_COUNT_CAP).subquery()
    rows = conn.execute(sa.select(capped.c.kind, sa.func.count()).group_by(capped.c.kind))
    return {kind: count for kind, count in rows}
