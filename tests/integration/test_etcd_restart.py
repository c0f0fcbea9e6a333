"""The etcd lease store across etcd restarts and outages.

etcd keeps leases across a restart and extends them when it comes back, so a
session either survives a quick restart (keep-alives resume within its TTL) or
reports ``lost``; it never hangs and never silently pretends. After an outage a
new session can always be opened. Every wait here is bounded.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest

from tickwheel.shared.clock import SystemClock
from tests.support.etcd import EtcdServer
from tickwheel_server.lease import EventType, LeaseStore, LeaseStoreUnavailable, open_lease_store

pytestmark = pytest.mark.etcd

T = TypeVar("T")


async def retrying(operation: Callable[[], Awaitable[T]], within: float = 15) -> T:
    """What a real caller does: retry LeaseStoreUnavailable with backoff."""

    async def loop() -> T:
        delay = 0.05
        while True:
            try:
                return await operation()
            except LeaseStoreUnavailable:
                await asyncio.sleep(delay)
                delay = min(0.5, delay * 2)

    return await asyncio.wait_for(loop(), within)


@pytest.fixture
async def store(etcd_server: EtcdServer) -> AsyncIterator[LeaseStore]:
    lease_store = open_lease_store(etcd_server.endpoint, SystemClock())
    yield lease_store
    await asyncio.wait_for(lease_store.close(), 15)


async def test_session_survives_a_quick_restart_or_reports_lost(store: LeaseStore, etcd_server: EtcdServer, etcd_prefix: str) -> None:
    key = etcd_prefix + "held"
    session = await store.open_session(2)
    await store.put(key, b"v", session=session)

    await asyncio.to_thread(etcd_server.restart, signal.SIGKILL)

    # Either a write under the session succeeds again (the lease survived), or
    # the session says it is lost; whichever comes first, within bounds.
    survived = asyncio.ensure_future(retrying(lambda: store.put(etcd_prefix + "after", b"v", session=session)))
    lost = asyncio.ensure_future(session.lost.wait())
    done, pending = await asyncio.wait({survived, lost}, timeout=session.ttl + 15, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    assert done, "neither survived nor reported lost"
    if survived in done and survived.exception() is None:
        # Survival must be real: the keep-alive keeps it going past its TTL.
        await asyncio.sleep(session.ttl + 0.5)
        if not session.lost.is_set():
            kv = await store.get(key)
            assert kv is not None and kv.lease == session.id
    else:
        assert session.lost.is_set()

    await session.close()
    assert await retrying(lambda: store.get(key)) is None  # revoked, whatever happened before
    fresh = await retrying(lambda: store.open_session(2))
    await store.put(key, b"fresh", session=fresh)
    await fresh.close()


async def test_session_is_lost_when_etcd_is_down_longer_than_its_ttl(store: LeaseStore, etcd_server: EtcdServer, etcd_prefix: str) -> None:
    key = etcd_prefix + "held"
    session = await store.open_session(1)
    await store.put(key, b"v", session=session)
    bound_cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            bound_cancelled.set()
            raise

    holder = asyncio.ensure_future(session.run_bound(work()))
    await asyncio.sleep(0)
    etcd_server.stop(signal.SIGKILL)
    try:
        await asyncio.wait_for(session.lost.wait(), session.ttl + 3)
        assert bound_cancelled.is_set() or await asyncio.wait_for(bound_cancelled.wait(), 1)
        with pytest.raises(LeaseStoreUnavailable):
            await asyncio.wait_for(store.get(key), 10)  # fails fast, does not hang
    finally:
        await asyncio.to_thread(etcd_server.start)
    await asyncio.gather(holder, return_exceptions=True)

    # etcd extended the lease when it came back; closing the lost session
    # revokes it so the key does not linger for another TTL.
    await retrying(store.current_revision)
    await session.close()
    assert await store.get(key) is None
    fresh = await store.open_session(1)
    ownership = await store.try_acquire(key, b"fresh", fresh)
    assert ownership is not None
    await fresh.close()


async def test_watch_resumes_across_a_restart_without_losing_events(store: LeaseStore, etcd_server: EtcdServer, etcd_prefix: str) -> None:
    async with store.watch(etcd_prefix, prefix=True) as events:
        await store.put(etcd_prefix + "a", b"1")
        first = await asyncio.wait_for(anext(events), 5)
        reader = asyncio.ensure_future(anext(events))  # blocked on the stream when etcd dies
        await asyncio.sleep(0)
        etcd_server.stop(signal.SIGKILL)
        await asyncio.to_thread(etcd_server.start)
        await retrying(lambda: store.put(etcd_prefix + "b", b"2"))
        await retrying(lambda: store.delete(etcd_prefix + "a"))
        second = await asyncio.wait_for(reader, 15)
        third = await asyncio.wait_for(anext(events), 5)
    assert (first.key, first.value) == (etcd_prefix + "a", b"1")
    assert (second.type, second.key, second.value) == (EventType.PUT, etcd_prefix + "b", b"2")
    assert (third.type, third.key) == (EventType.DELETE, etcd_prefix + "a")
    assert first.revision < second.revision < third.revision


async def test_sigterm_restart_keeps_data(store: LeaseStore, etcd_server: EtcdServer, etcd_prefix: str) -> None:
    await store.put(etcd_prefix + "durable", b"v")
    await asyncio.to_thread(etcd_server.restart, signal.SIGTERM)
    kv = await retrying(lambda: store.get(etcd_prefix + "durable"))
    assert kv is not None and kv.value == b"v"
