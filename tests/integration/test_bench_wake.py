"""``bench_e2e.py`` stores its jobs by plain SQL, which wakes nothing; it
then wakes each server's claim as the API of a server that stored due-now
jobs does (``loadtest/_harness.wake_claims``: a put on the server's wake
key through etcd's JSON gateway). The put must be one the product's own
:class:`Wakeup` follows and reads as a claim's wake, on a real etcd."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from tickwheel.shared.clock import SystemClock
from tickwheel_server.dispatcher.wakeup import Wakeup
from tickwheel_server.lease import open_lease_store
from tickwheel_server.lease import keys

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from _harness import wake_claims  # noqa: E402

pytestmark = [pytest.mark.etcd]


class Holders:
    partition_count = 1

    def __init__(self, me: str, root: str) -> None:
        self.server_id, self._root = me, root

    def holder(self, partition: int) -> str | None:
        return self.server_id

    def wake_key(self, server_id: str) -> str:
        return keys.wake_key(server_id, self._root)

    def members(self) -> list[str]:
        return [self.server_id]


async def test_the_benchmarks_wake_is_a_claim_wake_each_server_follows(etcd_endpoint, etcd_prefix) -> None:
    clock = SystemClock()
    store = open_lease_store(etcd_endpoint, clock)
    woken: dict[str, asyncio.Event] = {}
    kinds: dict[str, list[str]] = {}
    followers = []
    try:
        for me in ("s1", "s2"):
            woken[me], kinds[me] = asyncio.Event(), []

            def claim(me: str = me) -> None:
                kinds[me].append("claim")
                woken[me].set()

            def ready(me: str = me) -> None:
                kinds[me].append("ready")

            followers.append(Wakeup(store, Holders(me, etcd_prefix), clock, local=claim, ready=ready,
                                    session=lambda: None, within=2.0))
        tasks = [asyncio.create_task(wakeup.follow()) for wakeup in followers]
        try:
            for wakeup in followers:
                await asyncio.wait_for(wakeup.following.wait(), 10)
            await asyncio.to_thread(wake_claims, etcd_endpoint, ["s1", "s2"], "bench", etcd_prefix)
            for me in ("s1", "s2"):
                await asyncio.wait_for(woken[me].wait(), 10)
            assert kinds == {"s1": ["claim"], "s2": ["claim"]}, "a claim's wake, not a hand-out round's"
            assert [wakeup.received for wakeup in followers] == [1, 1]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await store.close()
