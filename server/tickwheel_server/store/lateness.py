"""The SQL of the lateness watch: the oldest executions still waiting for a
hand-out, each with its job's lateness threshold.

Late is measured against the instant an execution became ready
(``ready_at``: the due instant for a first attempt, the backoff's end for a
retry). :meth:`LatenessStore.oldest_waiting` is a range scan on
``executions_scheduled_tenant`` (and on ``executions_waiting``) with a LIMIT, joined
with their jobs for the threshold. Executions of a paused tenant
(``tenants.state = 'paused'``) and those a paused job holds (``wait_key``
``PAUSED_WAIT``) are left out: they are held back on purpose. The watch that
raises and resolves the alerts is :mod:`tickwheel_server.alerts.lateness`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..jobspec import DefinitionCache
from .base import SqlStore
from .isolation import not_held, status_in
from .tables import executions, jobs, tenants

SCAN_LIMIT = 1000


@dataclass(frozen=True)
class Waiting:
    execution_id: str
    job_id: str
    tenant: str
    nominal_at: datetime
    ready_at: datetime
    threshold: timedelta


class LatenessStore(SqlStore):
    def __init__(self, engine, clock, *, definitions: DefinitionCache | None = None) -> None:
        super().__init__(engine, clock)
        self.definitions = definitions if definitions is not None else DefinitionCache()
        """Parsed definitions by (job id, version): the server's own, so what the claim parsed is not parsed again."""

    async def oldest_waiting(self, older_than: datetime, limit: int = SCAN_LIMIT) -> list[Waiting]:
        """Up to ``limit`` executions waiting for a hand-out since before
        ``older_than``, oldest first, each with its job's lateness threshold;
        those of paused tenants and those paused jobs hold are left out."""
        cutoff = to_us(older_than)
        paused = sa.select(tenants.c.name).where(tenants.c.state == "paused")

        def fn(conn: Connection) -> list[Waiting]:
            rows = []
            # Ready for a hand-out, and held back by their job's overlap policy
            # or a concurrency key: one range scan with a LIMIT on each of
            # executions_scheduled_tenant and executions_waiting, merged oldest first.
            for status in ("scheduled", "waiting"):
                rows += conn.execute(
                    sa.select(
                        executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.nominal_at,
                        executions.c.ready_at, jobs.c.spec, jobs.c.version,
                    )
                    .select_from(executions.outerjoin(jobs, jobs.c.id == executions.c.job_id))
                    .where(
                        status_in(executions.c.status, status),
                        executions.c.ready_at <= cutoff,
                        executions.c.tenant.not_in(paused),
                        *([not_held()] if status == "waiting" else []),
                    )
                    .order_by(executions.c.ready_at)
                    .limit(limit)
                ).all()
            rows = sorted(rows, key=lambda row: row.ready_at)[:limit]
            found = []
            thresholds: dict[str, timedelta] = {}
            for row in rows:
                if row.job_id not in thresholds:
                    # Deleted, or unreadable here: the default threshold, so one
                    # damaged row does not stop the watch for every job.
                    version = row.version if row.version is not None else -1
                    thresholds[row.job_id] = self.definitions.get(row.job_id, version, row.spec).lateness_threshold
                found.append(Waiting(row.id, row.job_id, row.tenant, from_us(row.nominal_at), from_us(row.ready_at),
                                     thresholds[row.job_id]))
            return found

        return await self._tx(fn)
