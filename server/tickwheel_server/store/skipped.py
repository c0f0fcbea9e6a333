"""The SQL of the ``skipped`` alerts' resolution: the open ones whose job ran
again, resolved in one transaction.

A job ran again when an occurrence nominally after the last one skipped
reached an end (succeeded, failed or dead; canceled does not count), or the
job is gone (deleted, or completed with nothing left to run). The watch
that calls this every reaper pass, and what raises the alerts, is
:mod:`tickwheel_server.alerts.skipped`.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.clock import Clock

from .alerts import AlertStore, alert_from_row
from .base import SqlStore
from .isolation import status_in
from .tables import alerts, executions, job_cursors
from .timeline import TERMINAL, in_group

SCAN_LIMIT = 1000
"""Open ``skipped`` alerts checked per pass (the oldest first)."""
RAN = ("succeeded", "failed", "dead")
"""Statuses of an execution that ran to an end."""


class SkipWatchStore(SqlStore):
    """Finds the open ``skipped`` alerts whose job ran again, and resolves them."""

    def __init__(self, engine, clock: Clock, alert_store: AlertStore) -> None:
        super().__init__(engine, clock)
        self._alerts = alert_store

    async def resolve_ran(self, limit: int = SCAN_LIMIT) -> int:
        """Resolve up to ``limit`` open ``skipped`` alerts (oldest first)
        whose job ran again; how many were resolved. One transaction: the
        alerts' rows are locked (where the engine has row locks) while their
        jobs are looked at, so a skip raised meanwhile waits and then opens a
        new alert instead of being resolved unseen."""
        now = self.clock.now()

        def fn(conn: Connection) -> list[str]:
            query = (
                sa.select(alerts)
                .where(alerts.c.kind == "skipped", alerts.c.resolved_at.is_(None))
                .order_by(alerts.c.raised_at, alerts.c.id)
                .limit(limit)
            )
            if self.caps.row_locks:
                query = query.with_for_update()
            ran = []
            for alert in (alert_from_row(row) for row in conn.execute(query)):
                if _ran_again(conn, alert.job_id, int(alert.details.get("to_us", "0"))):
                    ran.append(alert.key)
            return [resolved.key for resolved in self._alerts.resolve_many_in(conn, ran, now=now)]

        resolved = await self._tx(fn)
        if resolved:
            await self._alerts.sequence_after_commit()
        return len(resolved)


def _ran_again(conn: Connection, job_id: str, skipped_to_us: int) -> bool:
    """The job is gone or completed, or an occurrence after ``skipped_to_us``
    ran to an end (a range scan on ``executions_ended_job``)."""
    state = conn.execute(sa.select(job_cursors.c.state).where(job_cursors.c.job_id == job_id)).scalar()
    if state is None or state == "completed":
        return True
    later = conn.execute(
        sa.select(executions.c.id)
        .where(
            executions.c.job_id == job_id,
            *in_group(TERMINAL),
            status_in(executions.c.status, *RAN),
            executions.c.nominal_at > skipped_to_us,
        )
        .limit(1)
    ).first()
    return later is not None
