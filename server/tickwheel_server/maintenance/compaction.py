"""The etcd compactor: keeps etcd's key-value history bounded, on the one
server of the cluster elected under :data:`COMPACTION_KEY`.

Every put (wake keys, presence records, elections) is an etcd revision, and
etcd keeps every revision until it is compacted. An etcd left to grow reaches
its space quota, raises the NOSPACE alarm and refuses every write: every
session's keep-alive and every election, the whole scheduler. So the servers
compact it themselves rather than rely on etcd's
``--auto-compaction-*`` flags (which may still be set; the two agree).

While elected, every ``period`` the compactor reads etcd's revision and keeps
it with the instant read (a bounded list: one ``retention`` of samples); it
then compacts to the newest revision read at least ``retention`` ago, so the
history kept always covers the last ``retention`` (and at most one
``period`` more). A newly elected compactor has no samples yet: it first
compacts one ``retention`` after its election. Compacting to a revision
already compacted (by etcd's own compactor, or by a deposed leader) is not
a failure. Each pass also asks etcd for its alarms and raises the
``etcd_nospace`` alert while the NOSPACE alarm is on (resolved once it is
disarmed), so the operator learns before the writes stop.

Watches behind a compaction end with
:class:`~tickwheel_server.lease.types.WatchCompacted`; every watcher of the
server reads again and watches from now on that (docs/architecture.md,
"etcd's history").
"""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from tickwheel.shared.clock import Clock

from ..alerts.catalogue import ETCD_NOSPACE_KEY, etcd_nospace_alert
from ..lease import LeaseStore, Session
from ..lease.keys import COMPACTION_KEY
from ..store.alerts import AlertStore
from ..telemetry.outages import OutageLog
from .election import campaign, sleep_or

log = logging.getLogger(__name__)

MIN_RETENTION = timedelta(seconds=1)
MAX_RETENTION = timedelta(days=7)
MIN_PERIOD = 1.0
MAX_PERIOD = 60.0


@dataclass(frozen=True)
class CompactionConfig:
    """How much of etcd's history is kept."""

    retention: timedelta = timedelta(hours=1)
    """History younger than this is kept (from 1 second to 7 days). A watch
    that falls further behind (a server cut off from etcd longer than this)
    reads its keys again when it reconnects."""

    def __post_init__(self) -> None:
        if not isinstance(self.retention, timedelta):
            raise ValueError(f"etcd compaction retention must be a timedelta, got {self.retention!r}")
        if not MIN_RETENTION <= self.retention <= MAX_RETENTION:
            raise ValueError(
                f"etcd compaction retention must be between {MIN_RETENTION} and {MAX_RETENTION}, got {self.retention}"
            )

    @property
    def period(self) -> float:
        """Seconds between two passes: a tenth of the retention, from 1 s to 1 min."""
        return min(max(self.retention.total_seconds() / 10, MIN_PERIOD), MAX_PERIOD)

    @property
    def samples(self) -> int:
        """The most (instant, revision) samples kept: one retention's, and two more."""
        return math.ceil(self.retention.total_seconds() / self.period) + 2


class EtcdCompaction:
    """Compacts etcd's history past ``retention`` and watches its alarms,
    on the server elected under :data:`COMPACTION_KEY` (any server may win;
    the next takes over when its session ends).

    ``run_pass`` is also callable directly (tests): one sample, the
    compaction it makes due, and the alarm check."""

    def __init__(
        self,
        leases: LeaseStore,
        session: Callable[[], Session],
        clock: Clock,
        alerts: AlertStore | None,
        *,
        server_id: str,
        config: CompactionConfig | None = None,
    ) -> None:
        self._leases = leases
        self._session = session
        self._clock = clock
        self.outages = OutageLog(log, "etcd compaction", clock)
        self._alerts = alerts
        self._server_id = server_id
        self.config = config or CompactionConfig()
        self._samples: collections.deque[tuple[float, int]] = collections.deque(maxlen=self.config.samples)
        self.leading = False
        self.compactions = 0
        """Compactions this server made (a revision already compacted not counted)."""
        self.compacted_revision = 0
        """The revision etcd's history was last compacted to, as this server knows it (0: not yet)."""
        self.alarms: list[str] = []
        """etcd's alarms at the last pass."""

    async def run(self) -> None:
        """Campaign for :data:`COMPACTION_KEY`; while leading, a pass every ``period``."""
        while True:
            ownership = await campaign(self._leases, COMPACTION_KEY, self._server_id, self._session, self._clock)
            self.leading = True
            self._samples.clear()  # samples of an earlier term may predate a compaction by another server
            log.info("this server compacts etcd's history (keeping %s)", self.config.retention)
            try:
                while not ownership.lost.is_set():
                    try:
                        await self.run_pass()
                    except Exception as error:
                        self.outages.failed("the compaction pass", error)
                    else:
                        self.outages.ok()
                    await sleep_or(self._clock, self.config.period, ownership.lost)
            finally:
                self.leading = False
            log.info("this server no longer compacts etcd's history")

    async def run_pass(self) -> None:
        """Sample etcd's revision, compact to the newest sample at least
        ``retention`` old, then check etcd's alarms (both even if the other
        fails; the first error is raised after)."""
        failure: Exception | None = None
        try:
            await self._compact()
        except Exception as error:
            failure = error
        try:
            await self._check_alarms()
        except Exception as error:
            failure = failure or error
        if failure is not None:
            raise failure

    async def _compact(self) -> None:
        now = self._clock.monotonic()
        revision = await self._leases.current_revision()
        if revision < self.compacted_revision:  # an etcd emptied and started again: its revisions restart
            self._samples.clear()
            self.compacted_revision = 0
        self._samples.append((now, revision))
        due = None
        horizon = now - self.config.retention.total_seconds()
        while self._samples and self._samples[0][0] <= horizon:
            due = self._samples.popleft()[1]
        if due is None or due <= self.compacted_revision:
            return
        if await self._leases.compact(due):
            self.compactions += 1
            log.debug("etcd history compacted to revision %d", due)
        self.compacted_revision = due

    async def _check_alarms(self) -> None:
        self.alarms = await self._leases.alarms()
        if self._alerts is None:
            return
        if "NOSPACE" in self.alarms:
            log.error("etcd raised its NOSPACE alarm (%s): it refuses every write", ",".join(self.alarms))
            await self._alerts.raise_alert(etcd_nospace_alert(self.alarms, self._server_id))
        elif await self._alerts.get(ETCD_NOSPACE_KEY) is not None:
            await self._alerts.resolve(ETCD_NOSPACE_KEY)
            log.info("etcd's NOSPACE alarm is disarmed")
