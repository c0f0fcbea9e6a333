"""A session rides out a cut between it and etcd shorter than its TTL (less
a margin; docs/operations.md, "etcd"), and loses its lease on a longer one:
a lease store on a real etcd reached through a TCP proxy the test cuts.

Two kinds of cut: a blackhole (nothing gets through, nothing is closed: the
connections open then never answer again, as when a middlebox loses their
state) and a reset (every connection closed, new ones refused). Each short
cut starts at the worst moment, just before the session's next renewal,
so that the lease has the least time left. Before the session abandoned a
silent connection and renewed every TTL/10, a blackhole of half the TTL
and a reset of 0.7 TTL lost the session.

Every wait is bounded; the proxy and the stores are closed in ``finally``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

import pytest

from tests.integration.test_dispatch_faults import engine
from tests.support.etcd_proxy import EtcdProxy
from tests.support.faults import eventually
from tests.support.server import start_cluster_server
from tickwheel.shared.clock import SystemClock
from tickwheel_server.lease import LeaseStore, LeaseStoreUnavailable, SessionLost, open_lease_store

pytestmark = [pytest.mark.etcd]
__all__ = ["engine"]  # the fixture (a migrated store), for the server's test

TTL = 10  # the servers' default session TTL


@asynccontextmanager
async def behind_a_proxy(etcd_endpoint: str) -> AsyncIterator[tuple[EtcdProxy, LeaseStore, LeaseStore]]:
    """A proxy to etcd, a store through it and one straight to etcd."""
    proxy = EtcdProxy(etcd_endpoint)
    through = open_lease_store(proxy.endpoint, SystemClock(), request_timeout=2)
    direct = open_lease_store(etcd_endpoint, SystemClock())
    try:
        yield proxy, through, direct
    finally:
        proxy.close()
        await through.close()
        await direct.close()


async def until(condition, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {seconds}s: {what}")


async def next_renewal(session, seconds: float) -> float:  # type: ignore[no-untyped-def]
    """Wait for the session's next successful renewal; when it was seen."""
    seen = session.renewals
    await until(lambda: session.renewals > seen or session.lost.is_set(), seconds, "a renewal")
    assert not session.lost.is_set(), session.lost_reason
    return time.monotonic()


@pytest.mark.parametrize(("kind", "fraction"), [("blackhole", 0.5), ("blackhole", 0.7), ("cut", 0.7)])
async def test_a_cut_shorter_than_the_ttl_keeps_the_session(
    etcd_endpoint: str, etcd_prefix: str, kind: str, fraction: float
) -> None:
    clock = SystemClock()
    key = etcd_prefix + "held"
    async with behind_a_proxy(etcd_endpoint) as (proxy, through, direct):
        session = await through.open_session(TTL)
        await through.put(key, b"mine", session=session)
        # the renewals' period, measured (so the cut starts just before one)
        first = await next_renewal(session, TTL)
        period = await next_renewal(session, TTL) - first
        await next_renewal(session, TTL)
        await asyncio.sleep(0.9 * period)
        left = session.alive_until - clock.monotonic()
        getattr(proxy, kind)()
        await asyncio.sleep(fraction * TTL)
        proxy.restore()
        await next_renewal(session, TTL)
        # etcd kept the lease past when it would have expired unrenewed
        await asyncio.sleep(max(0.0, left - fraction * TTL) + 1)
        held = await direct.get(key)
        assert held is not None and held.lease == session.id and not session.lost.is_set()
        await through.put(key, b"still mine", session=session)


async def test_a_silent_cut_longer_than_the_ttl_loses_the_session(etcd_endpoint: str, etcd_prefix: str) -> None:
    """The session is lost by its own clock no later than etcd expires it;
    once lost it stays lost and nothing is written under it.

    "No later" is what every write checks (``surely_alive``: a comparison
    of the clock with ``alive_until``, true of any thread at any load),
    not when the watchdog task gets to set ``lost``: on a loaded machine
    (a full suite at load 7) the test's event loop once ran that task more
    than 2 TTLs after the cut. So the watchdog is given a generous bound,
    and the property asserted is that no write could have passed the
    check once the lease might have expired."""
    ttl = 3
    clock = SystemClock()
    key = etcd_prefix + "held"
    async with behind_a_proxy(etcd_endpoint) as (proxy, through, direct):
        session = await through.open_session(ttl)
        await through.put(key, b"mine", session=session)
        proxy.blackhole()
        await until(lambda: clock.monotonic() > session.alive_until, 10 * ttl, "the lease's TTL has passed")
        assert not session.surely_alive(), "a write could still pass after the lease might have expired"
        await until(session.lost.is_set, 10 * ttl, "the session is lost")
        assert clock.monotonic() >= session.alive_until  # not before its lease could expire
        await asyncio.sleep(1)
        proxy.restore()
        await asyncio.sleep(2)
        assert session.lost.is_set()
        with pytest.raises(SessionLost):
            await through.put(etcd_prefix + "after", b"x", session=session)
        await until_gone(direct, key, ttl)
        assert await direct.get(etcd_prefix + "after") is None


async def test_a_call_that_runs_out_its_deadline_dials_etcd_again(etcd_endpoint: str, etcd_prefix: str) -> None:
    """No session to notice the silent cut: the put that times out has the
    store dial again, so the next put after the cut succeeds (instead of
    going to the silent connection until gRPC's keepalive notices)."""
    async with behind_a_proxy(etcd_endpoint) as (proxy, through, direct):
        await through.put(etcd_prefix + "before", b"1")
        proxy.blackhole()
        with pytest.raises(LeaseStoreUnavailable):
            await through.put(etcd_prefix + "during", b"2")
        proxy.restore()
        await through.put(etcd_prefix + "after", b"3")  # within the store's 2 s deadline
        assert (await direct.get(etcd_prefix + "after")).value == b"3"


async def until_gone(store, key: str, seconds: float) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(seconds / 0.1)):
        if await store.get(key) is None:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{key} still held {seconds}s after the session was lost")


@pytest.mark.postgres
@pytest.mark.slow
def test_a_server_keeps_its_session_through_a_silent_cut_of_0_7_ttl(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: object
) -> None:
    """A real `tickwheel server` (session TTL 10 s) reaching etcd through the
    proxy, blackholed for 7 s: it notices, dials again, and never loses its
    session (so its partitions never move)."""
    proxy = EtcdProxy(etcd_endpoint)
    with ExitStack() as stack:
        stack.callback(proxy.close)
        server = start_cluster_server(stack, tmp_path, postgres_url, proxy.endpoint, f"cut-{os.getpid()}",
                                      "--partition-count", "8", session_ttl=TTL)
        eventually(lambda: "etcd session" in server.log() and " open (ttl 10 s)" in server.log(), 30,
                   "the server opens its session")
        time.sleep(2)
        proxy.blackhole()
        time.sleep(0.7 * TTL)
        proxy.restore()
        time.sleep(TTL)  # past when the lease would have expired unrenewed
        log = server.log()
        assert " lost: " not in log and log.count(" open (ttl ") == 1, log[-4000:]
        assert "dialling again" in log, "the cut was not noticed"
        assert server.process.poll() is None
