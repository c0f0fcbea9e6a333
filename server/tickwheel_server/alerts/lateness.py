""""It didn't run": an alert for every job with an occurrence that has not
started within the job's lateness threshold (default 5 minutes).

Late is measured against the instant an execution became ready
(``ready_at``: the due instant for a first attempt, the backoff's end for a
retry). One pass reads the oldest ready executions that are still waiting
to be handed out (:meth:`~tickwheel_server.store.lateness.LatenessStore.oldest_waiting`,
a range scan with a LIMIT) and raises ``late:<job id>`` for each job
one of them is late for: one alert per job, however many of its occurrences
wait, with the oldest one in its details. A job's open alert is resolved by
the first pass that sees none of its executions late, provided that pass saw
every waiting execution old enough to matter (its scan was not cut by the
LIMIT); so an alert raised during an outage resolves once the backlog has
run.

Executions of a paused tenant (``tenants.state = 'paused'``) are not late:
the hand-out holds them back on purpose. The scans leave them out (a probe
of the tenants' key per row read), so pausing a tenant resolves its open
alerts at the next pass; once it is resumed its executions are measured
from their ``ready_at`` again, and the next hand-out sweep (every second)
takes them, well before a threshold's worth of passes. Nor are the
executions a paused job holds (``wait_key`` ``PAUSED_WAIT``): its resume
releases or records them by its own rule (``docs/architecture.md``, "Job
changes").

A pass runs every few seconds on one server of the cluster: the reaper's
leader (see :class:`~tickwheel_server.maintenance.reaper.Reaper`'s ``duties``).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from tickwheel.shared.clock import Clock

from ..store.alerts import AlertStore
from ..store.lateness import SCAN_LIMIT, LatenessStore, Waiting
from .catalogue import late_alert

log = logging.getLogger(__name__)

MIN_THRESHOLD = timedelta(seconds=1)
"""Nothing younger than this is looked at: the start-lateness target is 1 s."""


class LatenessWatch:
    def __init__(self, store: LatenessStore, alerts: AlertStore, clock: Clock, *, limit: int = SCAN_LIMIT) -> None:
        self._store = store
        self._alerts = alerts
        self._clock = clock
        self._limit = limit

    async def check_once(self) -> tuple[int, int]:
        """One pass; returns (alerts raised or seen again, alerts resolved)."""
        now = self._clock.now()
        waiting = await self._store.oldest_waiting(now - MIN_THRESHOLD, self._limit)
        late: dict[str, tuple[Waiting, int]] = {}
        for item in waiting:
            if item.threshold > timedelta(0) and now - item.ready_at > item.threshold:
                oldest, count = late.get(item.job_id, (item, 0))
                late[item.job_id] = (oldest, count + 1)
        for job_id, (oldest, count) in late.items():
            await self._alerts.raise_alert(
                late_alert(
                    job_id=job_id, tenant=oldest.tenant, execution_id=oldest.execution_id, waiting=count,
                    ready_at=oldest.ready_at, late_by=now - oldest.ready_at, threshold=oldest.threshold,
                )
            )  # fmt: skip
        resolved = 0
        if len(waiting) < self._limit:  # every waiting execution old enough was seen
            page = await self._alerts.list(kinds=["late"], limit=1000)
            for alert in page.alerts:
                if alert.job_id not in late:
                    await self._alerts.resolve(alert.key)
                    resolved += 1
        return len(late), resolved
