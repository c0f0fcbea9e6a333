""""It didn't run": an alert for every job with an occurrence that has not
started within the job's lateness threshold (default 5 minutes).

Late is measured against the instant an execution became ready
(``ready_at``: the due instant for a first attempt, the backoff's end for a
retry). One pass reads the oldest ready executions that are still waiting
to be handed out (a range scan on ``executions_ready`` with a LIMIT, joined
with their jobs for the threshold) and raises ``late:<job id>`` for each job
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
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from google.protobuf.message import DecodeError
from sqlalchemy.engine import Connection
from tickwheel.v1 import job_pb2

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import from_us, to_us

from .alerts.catalogue import NewAlert
from .store.alerts import AlertStore
from .store.base import SqlStore
from .store.isolation import not_held, status_in
from .store.tables import executions, jobs, tenants

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = timedelta(minutes=5)
MIN_THRESHOLD = timedelta(seconds=1)
"""Nothing younger than this is looked at: the start-lateness target is 1 s."""
SCAN_LIMIT = 1000


def late_key(job_id: str) -> str:
    return f"late:{job_id}"


@dataclass(frozen=True)
class Waiting:
    execution_id: str
    job_id: str
    tenant: str
    nominal_at: datetime
    ready_at: datetime
    threshold: timedelta


class LatenessStore(SqlStore):
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
            # executions_ready and executions_waiting, merged oldest first.
            for status in ("scheduled", "waiting"):
                rows += conn.execute(
                    sa.select(
                        executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.nominal_at,
                        executions.c.ready_at, jobs.c.spec,
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
                    spec = _definition(row.spec)
                    thresholds[row.job_id] = (
                        spec.lateness_threshold.ToTimedelta() if spec.HasField("lateness_threshold") else DEFAULT_THRESHOLD
                    )
                found.append(Waiting(row.id, row.job_id, row.tenant, from_us(row.nominal_at), from_us(row.ready_at),
                                     thresholds[row.job_id]))
            return found

        return await self._tx(fn)


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
            late_by = (now - oldest.ready_at).total_seconds()
            await self._alerts.raise_alert(
                NewAlert(
                    key=late_key(job_id), kind="late", severity="warning",
                    summary=f"job {job_id} did not run: execution {oldest.execution_id} has waited {late_by:.0f} s "
                    f"since it was due (threshold {oldest.threshold.total_seconds():g} s)",
                    tenant=oldest.tenant, job_id=job_id, execution_id=oldest.execution_id,
                    details={"waiting_executions": str(count), "ready_at": oldest.ready_at.isoformat(),
                             "late_by_seconds": f"{late_by:.3f}"},
                )
            )
        resolved = 0
        if len(waiting) < self._limit:  # every waiting execution old enough was seen
            page = await self._alerts.list(kinds=["late"], limit=1000)
            for alert in page.alerts:
                if alert.job_id not in late:
                    await self._alerts.resolve(alert.key)
                    resolved += 1
        return len(late), resolved


def _definition(spec: bytes | None) -> job_pb2.Job:
    """A job's definition for its lateness threshold; empty (the default
    threshold) when deleted or when this server cannot parse it, so one
    damaged row does not stop the watch for every job."""
    try:
        return job_pb2.Job.FromString(spec) if spec else job_pb2.Job()
    except DecodeError:
        return job_pb2.Job()
