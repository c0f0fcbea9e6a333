"""The per-tenant API request rate, across the whole cluster.

A tenant's ``requests_per_second`` holds for the cluster, with no shared
counter: each server runs a token bucket per tenant refilled at
``requests_per_second / live servers``, holding at most one second's worth
(never less than one request). Clients spread over servers (any load
balancer, or the SDKs' round robin) thus get about the tenant's rate in
total; one client pinned to one server gets its share of it. The number of
live servers comes from presence (the leased server records in etcd), read
every few seconds; 1 until the first read and while etcd cannot be read, so a
lone server or a partitioned one never refuses more than the rate allows.

Buckets live in a bounded LRU (a tenant not seen for a while starts again
with a full bucket, which a tenant with a full bucket would have anyway).
Time is the injected clock's monotonic time, so tests decide every refill.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tickwheel.shared.clock import Clock

from ..errors import QuotaExceeded

log = logging.getLogger(__name__)

DEFAULT_MAX_TENANTS = 100_000
DEFAULT_REFRESH_SECONDS = 5.0


@dataclass
class TokenBucket:
    """Tokens refill at ``rate`` per second up to ``burst``; a request takes one."""

    tokens: float
    at: float
    """The monotonic instant ``tokens`` was computed at."""

    def take(self, now: float, rate: float, burst: float) -> bool:
        """Refill for the time since the last call, then take a token if there
        is one. False (and nothing taken) when the bucket is empty."""
        self.tokens = min(burst, self.tokens + max(0.0, now - self.at) * rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


def share(requests_per_second: int, servers: int) -> tuple[float, float]:
    """(rate, burst) of one server's bucket for a tenant allowed
    ``requests_per_second`` across ``servers`` live servers (pure)."""
    rate = requests_per_second / max(1, servers)
    return rate, max(1.0, rate)


class RequestRateLimiter:
    """Token buckets by tenant; :meth:`check` raises QuotaExceeded when the
    tenant is over its share of the rate on this server."""

    def __init__(
        self, clock: Clock, *, servers: Callable[[], int] = lambda: 1, max_tenants: int = DEFAULT_MAX_TENANTS
    ) -> None:
        if max_tenants < 1:
            raise ValueError("max_tenants must be >= 1")
        self._clock = clock
        self._servers = servers
        self.max_tenants = max_tenants
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self.refused = 0

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, tenant: str, requests_per_second: int) -> bool:
        """Take one request of ``tenant``'s share; False when it is over it.
        A rate of 0 or less means no limit."""
        if requests_per_second <= 0:
            return True
        rate, burst = share(requests_per_second, self._servers())
        now = self._clock.monotonic()
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = TokenBucket(burst, now)
            while len(self._buckets) > self.max_tenants:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(tenant)
        if bucket.take(now, rate, burst):
            return True
        self.refused += 1
        return False

    def check(self, tenant: str, requests_per_second: int) -> None:
        """:meth:`allow`, or QuotaExceeded naming the limit (RESOURCE_EXHAUSTED)."""
        if not self.allow(tenant, requests_per_second):
            raise QuotaExceeded(
                tenant, "requests_per_second", requests_per_second,
                f"API request rate over {requests_per_second}/s",
            )  # fmt: skip


class LiveServers:
    """How many servers are alive, read from presence every ``interval``
    seconds: ``count`` is 1 until the first read and after a failed one."""

    def __init__(self, read: Callable[[], Awaitable[list]], clock: Clock, *, interval: float = DEFAULT_REFRESH_SECONDS) -> None:
        self._read = read
        self._clock = clock
        self._interval = interval
        self.count = 1

    async def refresh(self) -> int:
        try:
            self.count = max(1, len(await self._read()))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.debug("live servers cannot be read (%s); dividing request rates by 1", error)
            self.count = 1
        return self.count

    async def run(self) -> None:
        while True:
            await self.refresh()
            await self._clock.sleep(self._interval)
