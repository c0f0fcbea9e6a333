"""The retention runner: prunes history past the retention window, one pass
every interval, on the one server of the cluster elected under
:data:`RETENTION_KEY`.

A pass first keeps the day partitions of ``attempts`` where there are some
(PostgreSQL): today's and the next ``partitions_ahead`` days' are made,
every day partition wholly before the cutoff is detached, rolled up and
dropped, and the default partition's old rows are rolled up and deleted.
Only then are executions pruned (their attempts rolled up with them), then
skip ranges, resolved alerts, old rollups and create request ids past their
24 hours, each in bounded batches with a pause between two. What each step keeps and deletes, and why several runners
would still be safe, is the store's contract
(:mod:`tickwheel_server.store.retention`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from ..lease import LeaseStore, Session
from ..lease.keys import RETENTION_KEY
from ..policy.rollups import plan_partitions
from ..store.alerts import AlertStore
from ..store.retention import RetentionStore
from ..telemetry.outages import OutageLog
from .election import campaign, sleep_or

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class RetentionConfig:
    """How long history is kept and how pruning paces itself."""

    retention: timedelta = timedelta(days=30)
    """Executions, their attempts, skip ranges and resolved alerts older than
    this are pruned (attempts into the daily rollups). Also how far back a
    backfill deduplicates."""
    rollup_retention: timedelta = timedelta(days=400)
    """Daily rollups older than this are pruned."""
    batch: int = 1000
    """Rows per pruning transaction."""
    interval: float = 60.0
    """Seconds between passes (a pass runs until nothing is left to prune)."""
    pause: float = 0.01
    """Seconds between two batches of a pass, so pruning yields to dispatch."""
    partitions_ahead: int = 3
    """Where attempts are partitioned by day (PostgreSQL): days after today
    that have their partition made ahead of time."""
    partition_lock_timeout: float = 1.0
    """Seconds a partition's attach or detach waits for its lock before
    giving up until the next pass (results being recorded wait behind it at
    most this long)."""

    def __post_init__(self) -> None:
        if self.retention < timedelta(hours=1):
            raise ValueError(f"retention must be at least 1 hour, got {self.retention}")
        if self.rollup_retention < self.retention:
            raise ValueError("rollup_retention must not be shorter than retention")
        if not 1 <= self.batch <= 100_000:
            raise ValueError(f"batch must be between 1 and 100000, got {self.batch}")
        if not self.interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {self.interval}")
        if self.pause < 0:
            raise ValueError(f"pause must be >= 0 seconds, got {self.pause}")
        if not 1 <= self.partitions_ahead <= 60:
            raise ValueError(f"partitions_ahead must be between 1 and 60 days, got {self.partitions_ahead}")
        if not self.partition_lock_timeout > 0:
            raise ValueError(f"partition_lock_timeout must be > 0 seconds, got {self.partition_lock_timeout}")


@dataclass(frozen=True)
class PassResult:
    """What one pass pruned."""

    cutoff: datetime
    executions: int = 0
    attempts: int = 0
    resolved: int = 0
    """Open alerts of pruned dead letters, resolved."""
    skips: int = 0
    alerts: int = 0
    rollups: int = 0
    request_ids: int = 0
    """Create request ids past their 24 hours (a window of their own, not ``retention``)."""
    batches: int = 0
    partitions_created: int = 0
    """Day partitions of attempts made ahead (PostgreSQL)."""
    partitions_dropped: int = 0
    """Day partitions of attempts rolled up and dropped (their rows are in ``attempts``)."""


class Retention:
    """Prunes history past the retention window, one pass every ``interval``,
    on the server elected under :data:`RETENTION_KEY` (any server may win;
    the next takes over when its session ends).

    ``run_pass`` is also callable directly (tests, a one-off from a shell):
    it prunes everything past the window as of the clock's ``now``, batch by
    batch, and returns what it pruned. ``stop_when`` is checked between
    batches; the runner passes its leadership's loss, so a deposed runner
    stops after at most one batch."""

    def __init__(
        self,
        store: RetentionStore,
        alerts: AlertStore,
        leases: LeaseStore,
        session: Callable[[], Session],
        clock: Clock,
        *,
        server_id: str,
        config: RetentionConfig | None = None,
    ) -> None:
        self._store = store
        self._alerts = alerts
        self._leases = leases
        self._session = session
        self._clock = clock
        self.outages = OutageLog(log, "retention", clock)
        self._server_id = server_id
        self.config = config or RetentionConfig()
        self.leading = False
        self.passes = 0
        self.last_pass: PassResult | None = None

    async def run(self) -> None:
        """Campaign for :data:`RETENTION_KEY`; while leading, a pass every ``interval``."""
        while True:
            ownership = await campaign(self._leases, RETENTION_KEY, self._server_id, self._session, self._clock)
            self.leading = True
            log.info("this server runs retention (window %s)", self.config.retention)
            try:
                while not ownership.lost.is_set():
                    try:
                        await self.run_pass(stop_when=ownership.lost.is_set)
                    except Exception as error:
                        self.outages.failed("the retention pass", error)
                    else:
                        self.outages.ok()
                    await sleep_or(self._clock, self.config.interval, ownership.lost)
            finally:
                self.leading = False
            log.info("this server no longer runs retention")

    async def run_pass(self, *, stop_when: Callable[[], bool] = lambda: False) -> PassResult:
        now = self._clock.now()
        config = self.config
        cutoff = now - config.retention
        totals = dict(
            executions=0, attempts=0, resolved=0, skips=0, alerts=0, rollups=0, request_ids=0, batches=0,
            partitions_created=0, partitions_dropped=0,
        )  # fmt: skip

        async def between() -> bool:
            totals["batches"] += 1
            if stop_when():
                return False
            if config.pause:
                await self._clock.sleep(config.pause)
            return True

        if not await self._partitions(now, cutoff, totals, between):
            return self._finish(cutoff, totals)
        after = None
        while True:
            batch = await self._store.prune_executions(cutoff, after=after, limit=config.batch)
            totals["executions"] += batch.executions
            totals["attempts"] += batch.attempts
            if batch.resolved:
                totals["resolved"] += batch.resolved
                await self._alerts.sequence_after_commit()
            after = batch.next_key
            if not await between() or after is None:
                break
        for name, prune in (
            ("skips", lambda: self._store.prune_skips(cutoff, limit=config.batch)),
            ("alerts", lambda: self._alerts.prune(cutoff, limit=config.batch)),
            ("rollups", lambda: self._store.prune_rollups(now - config.rollup_retention, limit=config.batch)),
            ("request_ids", lambda: self._store.prune_request_ids(now, limit=config.batch)),
        ):
            while not stop_when():
                pruned = await prune()
                totals[name] += pruned
                if not await between() or pruned < config.batch:
                    break
        return self._finish(cutoff, totals)

    async def _partitions(
        self, now: datetime, cutoff: datetime, totals: dict[str, int], between: Callable[[], Awaitable[bool]]
    ) -> bool:
        """Keep the day partitions of attempts where there are some: make
        the coming days', take out (detach, roll up, drop) the days wholly
        before ``cutoff``, and prune the default partition's old rows.
        False when ``between`` ended the pass (leadership lost)."""
        store, config = self._store, self.config
        layout = await store.attempt_partitions()
        if layout is None:
            return True
        create, detach = plan_partitions(layout, to_us(now), to_us(cutoff), config.partitions_ahead)
        for day in create:
            if await store.create_partition(day, lock_timeout=config.partition_lock_timeout):
                totals["partitions_created"] += 1
        for day in detach:
            await store.detach_partition(day, lock_timeout=config.partition_lock_timeout)
        for name in (await store.attempt_partitions() or layout).detached:
            while True:
                batch = await store.roll_up_detached(name, limit=config.batch)
                totals["attempts"] += batch.rows
                totals["partitions_dropped"] += batch.dropped
                if batch.dropped:
                    log.info("retention: attempt partition %s rolled up (%d rows) and dropped", name, batch.total)
                if not await between():
                    return False
                if batch.done:
                    break
        while True:
            pruned = await store.prune_default_partition(cutoff, limit=config.batch)
            totals["attempts"] += pruned
            if not await between():
                return False
            if pruned < config.batch:
                return True

    def _finish(self, cutoff: datetime, totals: dict[str, int]) -> PassResult:
        result = PassResult(cutoff=cutoff, **totals)
        self.passes += 1
        self.last_pass = result
        pruned = (result.executions, result.attempts, result.skips, result.alerts, result.rollups, result.request_ids)
        if any(pruned):
            log.info(
                "retention: pruned %d executions, %d attempts (rolled up; %d day partitions dropped), "
                "%d skip ranges, %d alerts, %d rollups older than %s, %d request ids, in %d batches",
                result.executions, result.attempts, result.partitions_dropped, result.skips, result.alerts,
                result.rollups, cutoff.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), result.request_ids,
                result.batches,
            )
        return result

