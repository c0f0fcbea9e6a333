"""Compaction of the lease store's history, on the in-process store and a real
etcd: what a watch from before it sees, what compacting twice or too far
does, and that a watch behind a compaction (its stream broken while etcd
compacted) raises WatchCompacted and the watchers read again and carry on.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.conformance.test_lease_store import Backend, backend, next_event  # noqa: F401  (the fixture)
from tickwheel.shared.clock import FakeClock, SystemClock
from tickwheel_server.lease import EventType, WatchCompacted, open_lease_store
from tickwheel_server.lease.memory import MemoryLeaseStore

__all__ = ["backend"]  # the fixture, imported for the tests below


async def test_compact_drops_history_before_the_revision_only(backend: Backend) -> None:
    store, key = backend.store, backend.key("c")
    first = await store.put(key, b"1")
    kept = await store.put(key, b"2")
    await store.put(key, b"3")
    assert await store.compact(kept) is True
    with pytest.raises(WatchCompacted) as raised:
        async with store.watch(key, start_revision=first) as events:
            await next_event(events)
    assert raised.value.compact_revision == kept
    async with store.watch(key, start_revision=kept + 1) as events:
        assert (await next_event(events)).value == b"3"
    kv = await store.get(key)  # the keys as they are now are untouched
    assert kv is not None and kv.value == b"3"


async def test_compacting_again_or_lower_is_not_a_failure(backend: Backend) -> None:
    store = backend.store
    await store.put(backend.key("c"), b"1")
    revision = await store.put(backend.key("c"), b"2")
    assert await store.compact(revision) is True
    assert await store.compact(revision) is False
    assert await store.compact(revision - 1) is False


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3", None])
async def test_bad_compaction_revisions_are_refused_and_nothing_compacted(backend: Backend, bad: object) -> None:
    store, key = backend.store, backend.key("c")
    first = await store.put(key, b"1")
    await store.put(key, b"2")
    with pytest.raises(ValueError):
        await store.compact(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await store.compact(await store.current_revision() + 1000)  # a future revision
    async with store.watch(key, start_revision=first) as events:
        assert (await next_event(events)).value == b"1"


async def test_no_alarm_on_a_healthy_store(backend: Backend) -> None:
    assert await backend.store.alarms() == []


async def test_wait_acquire_survives_a_compaction_of_what_it_watched() -> None:
    # The candidate's watch starts behind a compaction made between its try
    # and its watch: it must try again, then wait, and win once the holder goes.
    clock = FakeClock()
    store = MemoryLeaseStore(clock)
    holder = await store.open_session(10)
    candidate = await store.open_session(10)
    assert await store.try_acquire("/e", "holder", holder) is not None
    original = store.watch
    compactions: list[int] = []

    def watch_after_compaction(key: str, **kwargs: object):
        watch = original(key, **kwargs)  # type: ignore[arg-type]
        store.watch = original  # type: ignore[method-assign]
        revision = store._revision

        async def start() -> None:
            await store.put("/other", "x")
            await store.put("/other", "y")
            assert await store.compact(revision + 2)
            compactions.append(revision + 2)
            await type(watch).start(watch)

        watch.start = start  # type: ignore[method-assign]
        return watch

    store.watch = watch_after_compaction  # type: ignore[method-assign]
    waiting = asyncio.ensure_future(store.wait_acquire("/e", "candidate", candidate))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()
    await holder.close()
    ownership = await asyncio.wait_for(waiting, 5)
    assert ownership.value == b"candidate" and len(compactions) == 1
    await store.close()


@pytest.mark.etcd
async def test_etcd_watch_behind_a_compaction_raises_watch_compacted(etcd_endpoint: str, etcd_prefix: str) -> None:
    """The watch's stream is cut; meanwhile keys change and etcd compacts
    past them; on reconnection the watch cannot resume: WatchCompacted."""
    from tests.support.etcd_proxy import EtcdProxy

    proxy = EtcdProxy(etcd_endpoint)
    clock = SystemClock()
    behind = open_lease_store(proxy.endpoint, clock, request_timeout=2)
    direct = open_lease_store(etcd_endpoint, clock)
    key = etcd_prefix + "behind"
    try:
        async with behind.watch(key) as events:
            await direct.put(key, b"seen")
            assert (await next_event(events)).value == b"seen"
            proxy.cut()
            await direct.put(key, b"missed")
            revision = await direct.put(key, b"missed too")
            assert await direct.compact(revision) is True
            proxy.restore()
            with pytest.raises(WatchCompacted):
                await next_event(events, timeout=15)
        # what a watcher does then: read the key as it is, and watch from there
        now = await behind.current_revision()
        assert (await behind.get(key)).value == b"missed too"
        async with behind.watch(key, start_revision=now + 1) as events:
            await direct.put(key, b"after")
            event = await next_event(events)
        assert (event.type, event.value) == (EventType.PUT, b"after")
    finally:
        proxy.close()
        await behind.close()
        await direct.close()



@pytest.mark.etcd
async def test_etcd_nospace_alarm_is_reported_and_compaction_still_accepted(
    etcd_endpoint: str, etcd_prefix: str
) -> None:
    """The alarm raised by hand (Maintenance Alarm ACTIVATE, as etcd does at
    its quota): alarms() reports it, writes are refused, compaction is not."""
    from pyetcd.etcdrpc import rpc_pb2

    from tickwheel_server.lease import LeaseStoreError

    store = open_lease_store(etcd_endpoint, SystemClock())
    transport = store._transport  # type: ignore[attr-defined]

    async def alarm(action: int, member: int) -> None:
        request = rpc_pb2.AlarmRequest(action=action, memberID=member, alarm=rpc_pb2.NOSPACE)
        await transport.call(lambda s: s.maintenance.Alarm, request, "alarm")

    status = await transport.call(lambda s: s.maintenance.Status, rpc_pb2.StatusRequest(), "status")
    member = status.header.member_id
    revision = await store.put(etcd_prefix + "before", b"x")
    try:
        await alarm(rpc_pb2.AlarmRequest.ACTIVATE, member)
        assert await store.alarms() == ["NOSPACE"]
        with pytest.raises(LeaseStoreError):
            await store.put(etcd_prefix + "refused", b"x")
        assert await store.compact(revision) is True
    finally:
        await alarm(rpc_pb2.AlarmRequest.DEACTIVATE, member)
    assert await store.alarms() == []
    await store.put(etcd_prefix + "after", b"x")
    await store.close()


@pytest.mark.parametrize("answered", [True, False])
async def test_a_drain_request_whose_watch_is_compacted_reads_its_key_again(answered: bool) -> None:
    """The asker's watch on its request starts behind a compaction made while
    the target answered (or the request vanished): it reads the key instead."""
    import json
    from datetime import timedelta

    from tickwheel_server.cluster.drain import Drainer, DrainUnanswered
    from tickwheel_server.lease.keys import server_key

    clock = FakeClock()
    store = MemoryLeaseStore(clock)
    asker, target = await store.open_session(10), await store.open_session(10)
    await store.put(server_key("target"), "{}", session=target)
    drainer = Drainer(
        None, None, store, lambda: asker, clock, server_id="asker", answer_timeout=5  # type: ignore[arg-type]
    )
    original = store.watch

    def watch_after_answer(key: str, **kwargs: object):
        watch = original(key, **kwargs)  # type: ignore[arg-type]

        async def start() -> None:
            if answered:
                await store.put(key, json.dumps({"result": {"partitions_released": 3, "workers_drained": 1}}))
            else:
                await store.delete(key)
            revision = await store.put("/other", "x")
            assert await store.compact(revision)
            await type(watch).start(watch)

        watch.start = start  # type: ignore[method-assign]
        return watch

    store.watch = watch_after_answer  # type: ignore[method-assign]
    if answered:
        result = await drainer.request("target", timedelta(seconds=1))
        assert (result.partitions_released, result.workers_drained) == (3, 1)
    else:
        with pytest.raises(DrainUnanswered, match="vanished"):
            await drainer.request("target", timedelta(seconds=1))
    await store.close()
