"""Servers compacting etcd's history themselves, on real PostgreSQL and etcd
(hardening of the wake-ups of issue 17): with a retention of 2 s, one server of two is the compactor and
compacts; the other, cut off from etcd (through a TCP proxy) while the
history its watches stood at is compacted, reads again on reconnection and
carries on: its ownership view settles and a wake put by the other server
still reaches it. Every wait is bounded; nothing here measures time."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc
import pytest
from tickwheel.v1 import job_pb2, scheduler_pb2_grpc

from tests.integration.test_dispatch_flow import history, wait_for_status
from tests.integration.test_wakeup import PARTITIONS, WAIT, create_on, settled, without_ticks
from tests.support.etcd_proxy import EtcdProxy
from tests.support.server import running_server
from tests.support.workers import builtin_handlers, running_worker
from tickwheel_server.lease import WatchCompacted

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]

RETENTION = 2.0  # seconds: a pass every second
A_SESSION_TTL = 30
"""a's session outlives the cut and gRPC's reconnection backoff after it:
its watches (not a new session's fresh reads) are what meets the compaction."""


async def until(condition, what: str, within: float = WAIT) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.05)


async def following_again(a, b) -> None:
    """Until a sees a put on its wake key: its wake watch, compacted under
    it, is followed again (a put before that is a wake lost: the tick's)."""
    key, seen = a.server.ownership.wake_key(a.server.server_id), a.server.wakeup.received
    deadline = asyncio.get_running_loop().time() + WAIT
    while a.server.wakeup.received == seen:
        assert asyncio.get_running_loop().time() < deadline, "a's wake key is not followed again"
        await b.server._lease_store.put(key, b.server.server_id, session=b.server._session)
        await asyncio.sleep(0.2)


async def test_a_server_behind_a_compaction_reads_again_and_its_wakes_still_arrive(
    migrated_postgres_url: str, etcd_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwheel_server.dispatcher.ownership_view")
    proxy = EtcdProxy(etcd_endpoint)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(proxy.close)
        b = await stack.enter_async_context(running_server(
            migrated_postgres_url, etcd_endpoint, server_id="compact-b", partition_count=PARTITIONS,
            etcd_compaction_retention=RETENTION))  # fmt: skip
        await until(lambda: b.server.compaction.leading, "b becomes the compactor")
        a = await stack.enter_async_context(running_server(
            migrated_postgres_url, proxy.endpoint, server_id="compact-a", partition_count=PARTITIONS,
            etcd_compaction_retention=RETENTION, session_ttl=A_SESSION_TTL))  # fmt: skip
        await settled(a, b)
        assert not a.server.compaction.leading, "one compactor per cluster"
        await until(lambda: b.server.compaction.compactions >= 1, "b compacts")

        # a is cut off; the history its watches stand at is compacted meanwhile
        leases = b.server._lease_store
        proxy.cut()
        cut_at = await leases.put("/compaction-test/busy", "x")
        await until(lambda: b.server.compaction.compacted_revision > cut_at, "b compacts past the cut")
        with pytest.raises(WatchCompacted):  # etcd: created, then cancelled for the compaction
            async with leases.watch("/compaction-test/busy", start_revision=cut_at) as events:
                await asyncio.wait_for(anext(events), WAIT)
        proxy.restore()

        # (gRPC's reconnection backoff after the cut may take a while to try again)
        await until(lambda: "compacted; reading it again" in caplog.text, "a's ownership view reads again", 60)
        assert not a.server._session.lost.is_set(), "a kept its session: its own watches read again"
        await settled(a, b)
        key = await a.create_tenant("compacted")
        credential = await a.issue_worker_credential(["compacted"], http=True)
        await stack.enter_async_context(
            running_worker(a.address, credential, builtin_handlers(), worker_id="compact-w", slots=4)
        )
        channel = await stack.enter_async_context(grpc.aio.insecure_channel(b.address))
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        await without_ticks(a, b)
        await following_again(a, b)
        received = a.server.wakeup.received
        puts = b.server.wakeup.puts
        job_id = await create_on(scheduler, key, a, "after-compaction")
        await until(lambda: b.server.wakeup.puts > puts, "b puts a's wake")
        await until(lambda: a.server.wakeup.received > received, f"a sees its wake ({a.server.wakeup.received})")
        await wait_for_status(scheduler, key, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
        assert a.server.wakeup.received > received, "the wake reached a after the compaction"
        assert len(await history(scheduler, key, job_id)) == 1
        assert b.server.compaction.compactions >= 2 and a.server.compaction.compactions == 0
        samples = {
            line.split()[0]: float(line.split()[-1])
            for line in (await b.server.metrics.scrape()).splitlines() if line.startswith("tickwheel_etcd_compact")
        }  # fmt: skip
        assert samples["tickwheel_etcd_compactions_total"] >= 2, samples
        assert samples["tickwheel_etcd_compacted_revision"] > cut_at, samples
