"""The etcd lease store given several endpoints: it moves past a member that
is dead, stalled or cut off from the quorum (docs/architecture.md, Leases).

On a real three-member cluster (tests/support/etcd_cluster.py) and, for a
member without quorum beside a healthy one, on a stand-in: a gRPC KV service
that answers as etcd's member does when it has no leader (etcd's
interceptor: a request carrying ``hasleader: true`` is refused
``UNAVAILABLE: etcdserver: no leader``; one without it gets the member's
stale copy). ``test_a_real_member_without_quorum_refuses_at_once`` shows the
real etcd answers so. Every wait is bounded; no assertion is on elapsed time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from pyetcd.etcdrpc import kv_pb2, rpc_pb2, rpc_pb2_grpc

from tests.integration.test_etcd_restart import retrying
from tests.support.etcd_cluster import EtcdCluster
from tickwheel.shared.clock import SystemClock
from tickwheel_server.lease import LeaseStoreUnavailable, open_lease_store
from tickwheel_server.lease.etcd import EtcdLeaseStore

pytestmark = pytest.mark.etcd

REQUEST_TIMEOUT = 6.0


class LeaderlessMember(rpc_pb2_grpc.KVServicer):
    """A member cut off from the quorum: its copy is stale (``value``) and it
    has no leader. ``seen`` counts the requests that reached it."""

    def __init__(self, value: bytes) -> None:
        self.value = value
        self.seen = 0

    def _refuse_without_leader(self, context: grpc.aio.ServicerContext) -> bool:
        self.seen += 1
        return ("hasleader", "true") in tuple(context.invocation_metadata() or ())

    async def Range(self, request, context):  # noqa: N802 (gRPC's naming)
        if self._refuse_without_leader(context):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader")
        return rpc_pb2.RangeResponse(kvs=[kv_pb2.KeyValue(key=request.key, value=self.value, create_revision=1,
                                                          mod_revision=1, version=1)], count=1)  # fmt: skip

    async def Put(self, request, context):  # noqa: N802
        if self._refuse_without_leader(context):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader")
        await asyncio.Event().wait()  # a proposal that never commits, until the client's deadline


@pytest.fixture
async def leaderless() -> AsyncIterator[tuple[str, LeaderlessMember]]:
    member = LeaderlessMember(b"stale")
    server = grpc.aio.server()
    rpc_pb2_grpc.add_KVServicer_to_server(member, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}", member
    await server.stop(None)


async def test_a_member_without_quorum_is_passed_over_for_the_next(
    leaderless: tuple[str, LeaderlessMember], etcd_endpoint: str, etcd_prefix: str
) -> None:
    address, member = leaderless
    store = open_lease_store(f"{address},{etcd_endpoint}", SystemClock(), request_timeout=REQUEST_TIMEOUT)
    try:
        key = etcd_prefix + "fresh"
        await asyncio.wait_for(store.put(key, b"current"), 2 * REQUEST_TIMEOUT)  # never the stalled proposal
        assert member.seen == 1
        kv = await store.get(key)
        assert kv is not None and kv.value == b"current", "a member without quorum answered with its stale copy"
        assert member.seen == 1, "the call went back to the member without quorum"
    finally:
        await store.close()


async def test_a_real_member_without_quorum_refuses_at_once(etcd_cluster: EtcdCluster) -> None:
    store = open_lease_store(etcd_cluster.spec([0]), SystemClock(), request_timeout=REQUEST_TIMEOUT)
    try:
        await store.put("/quorum/k", b"v")
        etcd_cluster.freeze(1)
        etcd_cluster.freeze(2)
        # Member 0 notices it has no leader within an election timeout or
        # two; from then on it refuses rather than waits out the deadline.
        answers: list[str] = []

        async def until_refused() -> None:
            while True:
                try:
                    await store.get("/quorum/k")
                    answers.append("answered")
                except LeaseStoreUnavailable as exc:
                    answers.append(str(exc))
                    if "no leader" in str(exc):
                        return
                await asyncio.sleep(0.2)

        try:
            await asyncio.wait_for(until_refused(), 3 * REQUEST_TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"member 0 without quorum never answered 'no leader': {answers}") from None
        with pytest.raises(LeaseStoreUnavailable, match="no leader"):
            await store.put("/quorum/k", b"w")
    finally:
        etcd_cluster.thaw(1)
        etcd_cluster.thaw(2)
        await store.close()


async def test_a_killed_member_costs_one_try_and_the_calls_move_on(
    etcd_cluster: EtcdCluster, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_lease_store(etcd_cluster.spec(), SystemClock(), request_timeout=REQUEST_TIMEOUT)
    assert isinstance(store, EtcdLeaseStore)
    try:
        session = await store.open_session(2)
        await store.put("/killed/k", b"v", session=session)
        caplog.set_level(logging.INFO, "tickwheel_server.lease")
        etcd_cluster.kill(0)

        def switches() -> list[str]:
            return [r.getMessage() for r in caplog.records if "switching to" in r.getMessage()]

        for index in range(5):
            await store.put(f"/killed/{index}", b"v", session=session)
            assert (await store.get(f"/killed/{index}")).value == b"v"
            if index == 0:
                moved = switches()
        await asyncio.sleep(session.ttl + 0.5)  # renewals go on elsewhere
        assert not session.lost.is_set(), session.lost_reason
        # The first call moves off the dead member: once, or twice when the
        # kill took the leader and the next member timed the call out during
        # the election. Once a call is answered the calls stay (none moves
        # per call or per retry).
        assert 1 <= len(moved) <= 2, moved
        assert switches() == moved
        assert store._transport.endpoints.in_use != etcd_cluster.members[0].endpoint
        await session.close()
    finally:
        await store.close()


async def test_a_stalled_member_costs_one_slice_of_one_call_not_every_call(etcd_cluster: EtcdCluster) -> None:
    """SIGSTOP: the member accepts connections and never answers. The first
    call spends its first try's share of the timeout there, then is answered
    by the next member; later calls go there directly."""
    store = open_lease_store(etcd_cluster.spec(), SystemClock(), request_timeout=REQUEST_TIMEOUT)
    try:
        session = await store.open_session(2)
        await store.put("/stalled/k", b"v")
        etcd_cluster.freeze(0)
        try:
            for index in range(5):
                await store.put(f"/stalled/{index}", b"v", session=session)  # none raises
            await asyncio.sleep(session.ttl + 0.5)
            assert not session.lost.is_set(), session.lost_reason
        finally:
            etcd_cluster.thaw(0)
        await session.close()
    finally:
        await store.close()


async def test_a_watch_moves_with_its_revision_when_its_member_dies(etcd_cluster: EtcdCluster) -> None:
    store = open_lease_store(etcd_cluster.spec(), SystemClock(), request_timeout=REQUEST_TIMEOUT)
    writer = open_lease_store(etcd_cluster.spec([2]), SystemClock(), request_timeout=REQUEST_TIMEOUT)
    try:
        async with store.watch("/watched/", prefix=True) as events:
            await writer.put("/watched/a", b"1")
            first = await asyncio.wait_for(anext(events), 10)
            reader = asyncio.ensure_future(anext(events))
            await asyncio.sleep(0)
            etcd_cluster.kill(0)  # the member the watch stream is on (perhaps the leader)
            await retrying(lambda: writer.put("/watched/b", b"2"))  # while the watch has no stream
            await retrying(lambda: writer.delete("/watched/a"))
            second = await asyncio.wait_for(reader, 20)
            third = await asyncio.wait_for(anext(events), 10)
        assert [(e.key, e.value) for e in (first, second)] == [("/watched/a", b"1"), ("/watched/b", b"2")]
        assert third.key == "/watched/a" and first.revision < second.revision < third.revision
    finally:
        await writer.close()
        await store.close()
