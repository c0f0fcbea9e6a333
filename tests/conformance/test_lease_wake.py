"""Wake-ups through the lease store (:mod:`tickwheel_server.dispatcher.wakeup`),
on the in-process store and on a real etcd: a write on one server wakes the
dispatcher of the partition's holder on another through the holder's wake
key, only that holder, with one put however many jobs; and a wake key
followed across the store's unavailability keeps working."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tickwheel.shared.ids import partition_of, to_us
from tickwheel_server.dispatcher.wakeup import Wakeup
from tickwheel_server.lease import keys

from tests.conformance import test_lease_store as lease_suite
from tests.conformance.test_lease_store import Backend

backend = lease_suite.backend
"""The lease store suite's fixture: the in-process store on a FakeClock, and etcd."""

PARTITIONS = 12


JOB_IN = {partition_of(f"job-{i}", PARTITIONS): f"job-{i}" for i in range(400)}
"""A job id of each partition (400 ids leave none of 12 out)."""
assert len(JOB_IN) == PARTITIONS


class Holders:
    partition_count = PARTITIONS

    def __init__(self, me: str, root: str, servers: list[str]) -> None:
        self.server_id = me
        self._root = root
        self._servers = servers

    def holder(self, partition: int) -> str | None:
        return self._servers[partition % len(self._servers)]

    def wake_key(self, server_id: str) -> str:
        return keys.wake_key(server_id, self._root)

    def members(self) -> list[str]:
        return self._servers


class Server:
    def __init__(self, backend: Backend, me: str, servers: list[str], session) -> None:
        self.woken = asyncio.Event()
        self.wakes = 0
        self.wakeup = Wakeup(
            backend.store, Holders(me, backend.prefix, servers), backend.clock, local=self._woken,
            session=lambda: session, within=2.0, spacing=0.02,
        )

    def _woken(self) -> None:
        self.wakes += 1
        self.woken.set()


@asynccontextmanager
async def servers(backend: Backend, names: list[str]) -> AsyncIterator[list[Server]]:
    sessions = [await backend.store.open_session(30) for _ in names]
    started = [Server(backend, name, names, session) for name, session in zip(names, sessions)]
    tasks = [asyncio.create_task(server.wakeup.run()) for server in started]
    try:
        for server in started:
            await backend.until(server.wakeup.following.wait(), 5)
        yield started
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for session in sessions:
            await session.close()


async def test_a_write_on_one_server_wakes_the_holder_on_another(backend: Backend) -> None:
    async with servers(backend, ["a", "b", "c"]) as (a, b, c):
        now = to_us(backend.clock.now())
        a.wakeup.due([(JOB_IN[1], now)])  # partition 1 is b's
        await backend.until(b.woken.wait(), 5)
        assert await backend.still_pending(asyncio.ensure_future(c.woken.wait()))
        assert not a.woken.is_set() and b.wakes == 1 and a.wakeup.puts == 1 and b.wakeup.received == 1
        kv = await backend.store.get(keys.wake_key("b", backend.prefix))
        assert kv is not None and kv.value == b"a", "the wake key names the writer, under its session"


async def test_a_batch_over_every_partition_is_one_put_per_holder(backend: Backend) -> None:
    async with servers(backend, ["a", "b", "c"]) as (a, b, c):
        before = await backend.store.current_revision()
        now = to_us(backend.clock.now())
        a.wakeup.due([(JOB_IN[p % PARTITIONS], now) for p in range(1000)])
        await backend.until(b.woken.wait(), 5)
        await backend.until(c.woken.wait(), 5)
        assert a.wakes == 1 and a.wakeup.puts == 2
        assert await backend.store.current_revision() == before + 2, "two puts, nothing else written"


async def test_a_job_due_later_wakes_nobody(backend: Backend) -> None:
    async with servers(backend, ["a", "b"]) as (a, b):
        a.wakeup.due([(JOB_IN[1], to_us(backend.clock.now()) + 10_000_000)])
        assert await backend.still_pending(asyncio.ensure_future(b.woken.wait()))
        assert a.wakeup.puts == 0


async def test_the_wake_keys_go_with_the_writers_session(backend: Backend) -> None:
    """A wake key is put under the writer's session: once every writer's
    session ended, no wake key is left (they never pile up)."""
    async with servers(backend, ["a", "b"]) as (a, b):
        a.wakeup.due([(JOB_IN[1], to_us(backend.clock.now()))])
        await backend.until(b.woken.wait(), 5)
    assert await backend.store.get_prefix(keys.wakes_prefix(backend.prefix)) == []
