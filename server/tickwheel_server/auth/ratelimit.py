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

Work is charged as well as requests (:meth:`RequestRateLimiter.metered`):
a call that computes schedule fires for a client-chosen window or count
(BackfillJob, PreviewSchedule, UpdateJob's dry-run diff), or counts the
span a pause kept from running (ResumeJob, BatchResumeJobs, a schedule
change of a paused job), or decides again the created runs of every job
naming a calendar it changes (UpdateCalendar) takes one more token per :data:`FIRES_PER_TOKEN`
fires beyond the first :data:`FIRES_PER_TOKEN`, which its request's token
covers. The charge lands after the work and may take the bucket below
zero: the tenant's next requests are refused, with the wait in their
RetryInfo, until it has refilled. A tenant's metered calls run one at a
time on a server and each starts only with a bucket not in debt; a batch
starts each item only while the fires counted so far fit in what the bucket
held (:meth:`Meter.admit`). So the fires one tenant makes a server compute
are bounded by its rate, whatever its requests ask for (see
``docs/architecture.md``, "Request-rate quota").

Buckets live in a bounded LRU (a tenant not seen for a while starts again
with a full bucket, which a tenant with a full bucket would have anyway;
one evicted while in debt is forgiven it, which takes 100 000 other
tenants' calls on that server first).
Time is the injected clock's monotonic time, so tests decide every refill.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tickwheel.shared.clock import Clock

from ..errors import QuotaExceeded

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_MAX_TENANTS = 100_000
DEFAULT_REFRESH_SECONDS = 5.0
FIRES_PER_TOKEN = 100
"""Schedule fires a metered call may compute per token of its tenant's
bucket; its request's token covers the first ``FIRES_PER_TOKEN``."""


def work_tokens(fires: int) -> float:
    """Tokens a call that computed ``fires`` fires takes besides its request's (pure)."""
    return max(0, fires - FIRES_PER_TOKEN) / FIRES_PER_TOKEN


@dataclass
class Meter:
    """What a metered call computed: the work counts its fires here. A call
    made of several pieces of work (a batch's items) asks :meth:`admit`
    before each, so none starts once the fires counted would put its
    tenant's bucket in debt."""

    fires: int = 0
    allowance: float = math.inf
    """Fires the call may count before its tenant's bucket, as it held when
    the call started, is in debt (unbounded without a rate limit)."""
    refusal: Callable[[int], QuotaExceeded] | None = None
    """The refusal of a piece of work once ``fires`` exceeds the allowance."""

    def count(self, fires: int) -> None:
        """Add ``fires`` to what the call computed (a store transaction doing
        the work tells it a page at a time, from its thread)."""
        self.fires += fires

    def admit(self) -> None:
        """Raise QuotaExceeded (RESOURCE_EXHAUSTED on ``requests_per_second``,
        with the wait until the fires counted so far are paid for) when they
        already exceed :attr:`allowance`: the caller starts the next piece of
        work only when this returns. Safe from the thread doing the work."""
        if self.fires > self.allowance and self.refusal is not None:
            raise self.refusal(self.fires)


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

    def charge(self, now: float, rate: float, burst: float, tokens: float) -> None:
        """Refill, then take ``tokens`` whatever the bucket holds: it may go below zero."""
        self.tokens = min(burst, self.tokens + max(0.0, now - self.at) * rate) - tokens
        self.at = now

    def wait(self, rate: float, need: float) -> float:
        """Seconds until the bucket (as of ``at``) holds ``need`` tokens at ``rate``."""
        return max(0.0, need - self.tokens) / rate


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
        self._working: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        """Tenant -> the lock its metered calls hold (gone with the last holder or waiter)."""
        self.refused = 0

    def __len__(self) -> int:
        return len(self._buckets)

    def _bucket(self, tenant: str, burst: float, now: float) -> TokenBucket:
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = TokenBucket(burst, now)
            while len(self._buckets) > self.max_tenants:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(tenant)
        return bucket

    def allow(self, tenant: str, requests_per_second: int) -> bool:
        """Take one request of ``tenant``'s share; False when it is over it.
        A rate of 0 or less means no limit."""
        return self._take(tenant, requests_per_second) is None

    def _take(self, tenant: str, requests_per_second: int) -> float | None:
        """Take one request; None, or the seconds until one is allowed."""
        if requests_per_second <= 0:
            return None
        rate, burst = share(requests_per_second, self._servers())
        now = self._clock.monotonic()
        bucket = self._bucket(tenant, burst, now)
        if bucket.take(now, rate, burst):
            return None
        self.refused += 1
        return bucket.wait(rate, 1.0)

    def check(self, tenant: str, requests_per_second: int) -> None:
        """:meth:`allow`, or QuotaExceeded naming the limit with the wait
        (RESOURCE_EXHAUSTED with RetryInfo)."""
        wait = self._take(tenant, requests_per_second)
        if wait is not None:
            raise _over(tenant, requests_per_second, wait, "")

    def charge(self, tenant: str, requests_per_second: int, fires: int) -> None:
        """Take :func:`work_tokens` ``fires`` from ``tenant``'s bucket, into
        debt if need be (nothing without a limit)."""
        tokens = work_tokens(fires)
        if requests_per_second <= 0 or tokens <= 0:
            return
        rate, burst = share(requests_per_second, self._servers())
        now = self._clock.monotonic()
        self._bucket(tenant, burst, now).charge(now, rate, burst, tokens)

    @contextlib.asynccontextmanager
    async def metered(self, tenant: str, requests_per_second: int) -> AsyncIterator[Meter]:
        """Around a call's schedule work: waits for the tenant's metered
        calls before it on this server, refuses (QuotaExceeded with the wait)
        when its bucket is in debt, and on the way out (raising or not)
        charges the fires the work counted in the :class:`Meter` yielded."""
        lock = self._working.get(tenant)
        if lock is None:
            lock = self._working[tenant] = asyncio.Lock()
        async with lock:
            if requests_per_second > 0:
                rate, burst = share(requests_per_second, self._servers())
                now = self._clock.monotonic()
                bucket = self._bucket(tenant, burst, now)
                bucket.charge(now, rate, burst, 0.0)
                if bucket.tokens < 0:
                    self.refused += 1
                    raise _over(tenant, requests_per_second, bucket.wait(rate, 0.0),
                                f": the schedule fires of its earlier calls (one request per {FIRES_PER_TOKEN}) "
                                "are not paid back yet")  # fmt: skip
            meter = Meter()
            if requests_per_second > 0:
                meter.allowance = FIRES_PER_TOKEN * (1.0 + bucket.tokens)
                meter.refusal = functools.partial(_owing, tenant, requests_per_second, rate, bucket.tokens)
            try:
                yield meter
            finally:
                self.charge(tenant, requests_per_second, meter.fires)


async def to_thread_to_its_end(func: Callable[..., T], /, *args, **kwargs) -> T:
    """:func:`asyncio.to_thread`, but a caller cancelled meanwhile (a client
    that hung up) still waits for the thread to end before it is cancelled:
    a metered call's work is charged in full, and the tenant's next metered
    call waits for it, so hanging up does not make schedule work free."""
    return await to_its_end(asyncio.to_thread(func, *args, **kwargs))


async def to_its_end(work: Awaitable[T]) -> T:
    """Await ``work`` (a store call whose transaction does metered work, say);
    a caller cancelled meanwhile still waits for it to end, then is
    cancelled (see :func:`to_thread_to_its_end`)."""
    future = asyncio.ensure_future(work)
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return future.result()


def _owing(tenant: str, requests_per_second: int, rate: float, tokens: float, fires: int) -> QuotaExceeded:
    """The refusal of a metered call's next piece of work once it counted
    ``fires`` from a bucket that held ``tokens``."""
    return _over(tenant, requests_per_second, max(0.0, work_tokens(fires) - tokens) / rate,
                 f": the schedule fires this call counted so far (one request per {FIRES_PER_TOKEN}) "
                 "are not paid back yet")  # fmt: skip


def _over(tenant: str, requests_per_second: int, wait: float, why: str) -> QuotaExceeded:
    return QuotaExceeded(
        tenant, "requests_per_second", requests_per_second, f"API request rate over {requests_per_second}/s{why}",
        retry_after=wait,
    )


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
