"""The per-tenant request rate: token buckets on a fake clock, the rate
shared out among live servers, bounded memory, and the error it gives."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.errors import QuotaExceeded
from tickwheel_server.auth.ratelimit import (
    FIRES_PER_TOKEN, LiveServers, RequestRateLimiter, TokenBucket, share, to_thread_to_its_end, work_tokens,
)


def burst(limiter: RequestRateLimiter, tenant: str, rate: int, calls: int) -> int:
    return sum(limiter.allow(tenant, rate) for _ in range(calls))


def test_a_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = TokenBucket(tokens=2.0, at=0.0)
    assert [bucket.take(0.0, 2.0, 2.0) for _ in range(3)] == [True, True, False]
    assert not bucket.take(0.25, 2.0, 2.0), "half a token after 0.25 s at 2/s"
    assert bucket.take(0.5, 2.0, 2.0), "one token after 0.5 s"
    assert [bucket.take(100.0, 2.0, 2.0) for _ in range(3)] == [True, True, False], "never more than the burst"
    assert not bucket.take(50.0, 2.0, 2.0), "time going back refills nothing"
    assert bucket.at == 50.0 and bucket.tokens == 0.0
    assert not bucket.take(50.25, 2.0, 2.0) and bucket.take(50.5, 2.0, 2.0), "and refills from the new instant on"


@pytest.mark.parametrize(
    ("per_second", "servers", "rate", "burst_"),
    [(50, 1, 50.0, 50.0), (50, 5, 10.0, 10.0), (5, 3, 5 / 3, 5 / 3), (5, 10, 0.5, 1.0), (5, 0, 5.0, 5.0)],
)
def test_the_rate_is_shared_among_live_servers_with_a_burst_of_one_second_at_least_one(
    per_second: int, servers: int, rate: float, burst_: float
) -> None:
    assert share(per_second, servers) == pytest.approx((rate, burst_))
    clock = FakeClock()
    limiter = RequestRateLimiter(clock, servers=lambda: servers)
    assert burst(limiter, "acme", per_second, 100) == int(burst_), "a new bucket holds share()'s burst"
    clock.advance(3.5 / rate)
    assert burst(limiter, "acme", per_second, 100) == min(3, int(burst_)), "and refills at share()'s rate"


def test_a_tenant_gets_its_share_per_second_on_each_server_and_others_are_unaffected() -> None:
    clock = FakeClock()
    servers = 1
    limiter = RequestRateLimiter(clock, servers=lambda: servers)
    assert burst(limiter, "acme", 5, 20) == 5, "a burst of one second's worth"
    assert burst(limiter, "globex", 5, 5) == 5, "a bucket per tenant"
    clock.advance(0.5)
    assert burst(limiter, "acme", 5, 20) == 2, "2.5 tokens after 0.5 s"
    clock.advance(10)
    servers = 5  # the rate is now 1/s on this server
    assert burst(limiter, "acme", 5, 20) == 1
    clock.advance(3)
    assert burst(limiter, "acme", 5, 20) == 1, "the burst is one second's worth of the share"
    assert limiter.refused == 15 + 18 + 19 + 19
    assert burst(limiter, "unlimited", 0, 1000) == 1000, "0 means no limit"


def test_check_names_the_limit_and_buckets_are_bounded() -> None:
    clock = FakeClock()
    limiter = RequestRateLimiter(clock, max_tenants=3)
    limiter.check("acme", 1)
    with pytest.raises(QuotaExceeded) as over:
        limiter.check("acme", 1)
    assert (over.value.tenant, over.value.quota, over.value.limit) == ("acme", "requests_per_second", 1)
    assert "API request rate over 1/s" in str(over.value)
    for tenant in ("b", "c", "d"):
        limiter.allow(tenant, 1)
    assert len(limiter) == 3
    limiter.check("acme", 1)  # evicted as least recently used: a full bucket again


async def test_live_servers_counts_presence_and_falls_back_to_one() -> None:
    records: list[object] = ["a", "b", "c"]

    async def read() -> list:
        if records is None:
            raise ConnectionError("etcd unavailable")
        return records

    live = LiveServers(read, FakeClock())
    assert live.count == 1
    assert await live.refresh() == 3
    records = []
    assert await live.refresh() == 1
    records = None
    assert await live.refresh() == 1


def test_work_beyond_a_requests_fires_is_charged_into_debt_and_refused_with_the_wait() -> None:
    assert work_tokens(0) == work_tokens(FIRES_PER_TOKEN) == 0, "a request's token covers its first fires"
    assert work_tokens(10 * FIRES_PER_TOKEN + 1) == pytest.approx(9.01)
    clock = FakeClock()
    limiter = RequestRateLimiter(clock)
    limiter.check("acme", 10)
    limiter.charge("acme", 10, 20 * FIRES_PER_TOKEN)  # 19 more: 10 - 1 - 19 = -10
    with pytest.raises(QuotaExceeded) as refused:
        limiter.check("acme", 10)
    assert refused.value.quota == "requests_per_second" and refused.value.retry_after == pytest.approx(1.1)
    clock.advance(1.0)
    assert not limiter.allow("acme", 10), "still in debt after a second at 10/s"
    clock.advance(0.1)
    assert limiter.allow("acme", 10), "one token after 1.1 s"
    limiter.charge("acme", 0, 10**9)
    assert limiter.allow("other", 10) and len(limiter) == 2, "no limit, no charge, no bucket"


async def test_a_tenants_metered_calls_run_one_at_a_time_and_none_starts_in_debt() -> None:
    """The fires a tenant makes a server compute are bounded by its rate: a
    metered call waits for the one before it, and is refused when that one
    left the bucket in debt; another tenant is not held up."""
    clock = FakeClock()
    limiter = RequestRateLimiter(clock)
    gate = asyncio.Event()
    order: list[str] = []

    async def work(tenant: str, name: str, fires: int) -> None:
        async with limiter.metered(tenant, 10) as meter:
            order.append(name)
            if name == "first":
                await gate.wait()
            meter.fires = fires

    first = asyncio.create_task(work("acme", "first", 5 * FIRES_PER_TOKEN))
    await asyncio.sleep(0)
    second = asyncio.create_task(work("acme", "second", 15 * FIRES_PER_TOKEN))
    third = asyncio.create_task(work("acme", "third", 0))
    await work("globex", "other", 0)
    assert order == ["first", "other"], "acme's second call waits for its first; globex does not"
    gate.set()
    await first
    await second  # 10 - 4 = 6 tokens left: it starts, and leaves 6 - 14 = -8
    with pytest.raises(QuotaExceeded) as refused:
        await third
    assert order == ["first", "other", "second"]
    assert refused.value.retry_after == pytest.approx(0.8) and "not paid back" in str(refused.value)

    clock.advance(0.9)
    with pytest.raises(RuntimeError):
        async with limiter.metered("acme", 10) as meter:
            meter.fires = 11 * FIRES_PER_TOKEN
            raise RuntimeError("the work failed after computing its fires")
    assert not limiter.allow("acme", 10), "a call that raised pays for its fires all the same"


async def test_a_metered_call_whose_client_hangs_up_pays_for_its_work_all_the_same() -> None:
    """A cancelled call (the client hung up) keeps the tenant's turn until
    its thread has ended, then is cancelled: its fires are all charged and
    the tenant's next metered call neither overlaps it nor starts in debt."""
    clock = FakeClock()
    limiter = RequestRateLimiter(clock)
    release = threading.Event()

    def work(meter) -> None:
        release.wait(10)
        meter.fires = 21 * FIRES_PER_TOKEN

    async def call() -> None:
        async with limiter.metered("acme", 10) as meter:
            await to_thread_to_its_end(work, meter)

    first = asyncio.create_task(call())
    await asyncio.sleep(0.05)
    first.cancel()
    second = asyncio.create_task(limiter.metered("acme", 10).__aenter__())
    await asyncio.sleep(0.05)
    assert not first.done() and not second.done(), "the hung-up call holds the tenant's turn while it computes"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await first
    with pytest.raises(QuotaExceeded):
        await second


async def test_a_metered_batch_starts_no_item_once_its_fires_would_put_the_tenant_in_debt() -> None:
    """A call made of pieces (a batch resume's jobs, each counting its
    paused span) asks the meter before each: the first always starts (the
    bucket is not in debt), the next only while the fires counted so far fit
    in what the bucket held; the refusal names the rate and the wait until
    those fires are paid for. Without a limit nothing is refused."""
    clock = FakeClock()
    limiter = RequestRateLimiter(clock)
    limiter.check("acme", 10)  # the batch's request: 9 tokens left
    started: list[int] = []
    refused: list[QuotaExceeded] = []
    async with limiter.metered("acme", 10) as meter:
        for item, fires in enumerate([5 * FIRES_PER_TOKEN, 5 * FIRES_PER_TOKEN, 1, 1]):
            try:
                meter.admit()
            except QuotaExceeded as error:
                refused.append(error)
                continue
            started.append(item)
            meter.fires += fires
    assert started == [0, 1, 2], "10 requests' fires (the bucket's 9 and the request's own) leave it at 0, not in debt"
    [over] = refused
    assert over.quota == "requests_per_second" and "counted so far" in str(over)
    assert over.retry_after == pytest.approx(0.001), "9.01 tokens owed by a bucket that held 9, at 10/s"
    assert not limiter.allow("acme", 10), "the fires of the items started are charged: in debt"

    async with limiter.metered("globex", 0) as meter:
        meter.fires = 10**9
        meter.admit()
