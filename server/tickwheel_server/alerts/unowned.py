"""A partition without an owner: nothing dispatches its jobs.

Between a server's death and the takeover of its partitions (one session
TTL for its lease to expire, then an election) a partition is briefly
unowned, and that is normal. One that stays unowned longer than ``grace``
(default two session TTLs) means something is wrong: no live server can
take it (all draining, etcd refusing writes, a bug). :class:`UnownedWatch`
is a duty of the reaper's leader (see :class:`~tickwheel_server.maintenance.reaper.Reaper`'s
``duties``): every pass it reads who holds each partition's ownership key
in etcd (one range read), raises ``partition_unowned:<partition>`` (critical,
with the partition and the server that last held it) for each partition
unowned since longer than the grace, in one transaction, and resolves the
open ones whose partition is owned again.

The watch measures how long a partition has been unowned on its own
monotonic clock, from the pass that first saw it so. A server that has just
become the leader (or was not leading for longer than a grace) starts
counting afresh, so it waits a whole grace before raising; alerts a previous
leader raised are resolved by whichever leader sees the partition owned.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from tickwheel.shared.clock import Clock

from ..store.alerts import AlertStore
from ..store.partitions import PartitionStore
from .catalogue import partition_unowned_alert

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Unowned:
    since_monotonic: float
    since: datetime


class UnownedWatch:
    """Raises and resolves ``partition_unowned`` alerts; one :meth:`check_once` per reaper pass.

    ``holders`` reads partition → owning server id from etcd (absent: no
    owner), such as :meth:`~tickwheel_server.cluster.presence.Presence.partition_holders`.
    """

    def __init__(
        self,
        holders: Callable[[], Awaitable[dict[int, str]]],
        partition_count: int,
        partitions: PartitionStore,
        alerts: AlertStore,
        clock: Clock,
        *,
        grace: float,
    ) -> None:
        if not grace > 0:
            raise ValueError(f"grace must be > 0 seconds, got {grace!r}")
        self._holders = holders
        self._partition_count = partition_count
        self._partitions = partitions
        self._alerts = alerts
        self._clock = clock
        self.grace = grace
        self._unowned: dict[int, _Unowned] = {}
        self._last_pass: float | None = None

    async def check_once(self) -> tuple[int, int]:
        """One pass; returns (alerts raised or seen again, alerts resolved).
        Raises :class:`~tickwheel_server.lease.LeaseStoreError` when etcd
        cannot be read (nothing is decided on a pass that could not look)."""
        holders = await self._holders()
        now = self._clock.monotonic()
        if self._last_pass is None or now - self._last_pass > self.grace:
            self._unowned.clear()  # not leading meanwhile: what was seen then is stale
        self._last_pass = now
        wall = self._clock.now()
        owned = {p for p in holders if 0 <= p < self._partition_count}
        for partition in owned:
            self._unowned.pop(partition, None)
        for partition in range(self._partition_count):
            if partition not in owned:
                self._unowned.setdefault(partition, _Unowned(now, wall))
        overdue = sorted(p for p, seen in self._unowned.items() if now - seen.since_monotonic >= self.grace)
        if overdue:
            last_owners = {row.partition: row.owner for row in await self._partitions.rows(overdue)}
            batch = [
                partition_unowned_alert(
                    partition=p, since=self._unowned[p].since, last_owner=last_owners.get(p, "")
                )
                for p in overdue
            ]
            await self._alerts.raise_many(batch)
        resolved = 0
        page = await self._alerts.list(kinds=["partition_unowned"], limit=max(self._partition_count, 1))
        for alert in page.alerts:
            if int(alert.details.get("partition", "-1")) in owned:
                if await self._alerts.resolve(alert.key) is not None:
                    resolved += 1
        if overdue:
            log.warning("partitions without an owner for over %g s: %s", self.grace, overdue)
        return len(overdue), resolved
