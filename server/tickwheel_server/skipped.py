"""Skipped occurrences: the ``skipped`` alert of a job whose misfire or
overlap policy skipped some of its occurrences, and its resolution.

Raised where the skip range is written, in the same transaction, so the
alert and the range commit together: by the dispatcher's claim for a misfire
(:class:`~tickwheel_server.store.dispatch.DispatchStore` with an alert
store) and by the hand-out for an overlap (:func:`overlap_alerts`, through
the ``on_skip`` hook of :class:`~tickwheel_server.store.handout.HandoutStore`).
One alert per job (``skipped:<job id>``): while it is open, each further
range bumps its count and replaces its details with the latest range. A
paused job or tenant raises nothing: pausing is asked for.

It resolves once the job ran again: an occurrence nominally after the last
one skipped reached an end (succeeded, failed or dead; canceled does not
count), or the job is gone (deleted, or completed with nothing left to
run). A job that keeps overrunning its interval under the ``skip`` overlap
policy keeps one open alert (every run it finishes is older than the latest
skip), rather than opening and resolving one per cycle. :class:`SkipWatch`
checks the open ones on one server of the cluster, the reaper's leader
(see :class:`~tickwheel_server.maintenance.reaper.Reaper`'s ``duties``), every pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import from_us

from .policy.admission import Skip
from .alerts.catalogue import NewAlert, skipped_alert
from .store.alerts import AlertStore, alert_from_row
from .store.base import SqlStore
from .store.isolation import status_in
from .store.tables import alerts, executions, jobs
from .store.timeline import TERMINAL, in_group

log = logging.getLogger(__name__)

SCAN_LIMIT = 1000
"""Open ``skipped`` alerts checked per pass (the oldest first)."""
RAN = ("succeeded", "failed", "dead")
"""Statuses of an execution that ran to an end."""


def overlap_alerts(skipped: Iterable[Skip]) -> list[NewAlert]:
    """One ``skipped`` alert per job for the occurrences a hand-out round
    skipped under their job's overlap policy (the range they extend)."""
    by_job: dict[str, list[Skip]] = {}
    for item in skipped:
        by_job.setdefault(item.candidate.job_id, []).append(item)
    raised = []
    for job_id, items in by_job.items():
        nominal = [item.candidate.nominal_at for item in items]
        raised.append(
            skipped_alert(
                job_id=job_id, tenant=items[0].candidate.tenant, reason="overlap",
                from_at=from_us(min(nominal)), to_at=from_us(max(nominal)), count=len(items),
            )
        )  # fmt: skip
    return raised


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
    state = conn.execute(sa.select(jobs.c.state).where(jobs.c.id == job_id)).scalar()
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


class SkipWatch:
    """The cluster duty: one :meth:`check_once` per reaper pass."""

    def __init__(self, store: SkipWatchStore, *, limit: int = SCAN_LIMIT) -> None:
        self._store = store
        self._limit = limit

    async def check_once(self) -> int:
        """One pass; how many ``skipped`` alerts were resolved."""
        resolved = await self._store.resolve_ran(self._limit)
        if resolved:
            log.debug("resolved %d skipped-occurrence alerts: their jobs ran again", resolved)
        return resolved
