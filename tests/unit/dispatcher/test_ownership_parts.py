"""The parts of partition ownership that need no SQL store: the holdings
record and the view of the ownership keys (on the in-process lease store)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.dispatcher.ownership_holdings import Holdings, OwnershipChange
from tickwheel_server.dispatcher.ownership_view import OwnershipView
from tickwheel_server.lease import keys
from tickwheel_server.lease.types import Ownership
from tickwheel_server.lease.memory import MemoryLeaseStore

PREFIX = "/unit/"


# --------------------------------------------------------------------------- holdings


async def test_owned_is_the_fenced_keys_of_the_current_session_and_every_change_is_announced() -> None:
    clock = FakeClock()
    async with MemoryLeaseStore(clock) as leases:
        session = await leases.open_session(10)
        holdings = Holdings("srv-a", session)
        changes: list[OwnershipChange] = []
        holdings.add_listener(changes.append)
        holdings.add_listener(lambda change: 1 / 0)  # a failing listener does not stop the others
        holdings.held = {p: Ownership(f"/k/{p}", b"srv-a", 10 + p, session) for p in range(3)}
        assert holdings.owned() == {}

        holdings.fence({0: holdings.held[0], 1: holdings.held[1]})
        assert holdings.owned() == {0: 10, 1: 11} and holdings.generation == 1
        assert dict(changes[-1].acquired) == {0: 10, 1: 11} and changes[-1].reason == "acquired"

        holdings.disown({1, 2}, "rebalance")  # 2 was held, never owned
        assert holdings.owned() == {0: 10} and set(holdings.held) == {0, 1, 2}
        assert changes[-1].lost == {1} and dict(changes[-1].owned) == {0: 10}

        holdings.disown({2}, "rebalance")  # nothing owned changes: nothing announced
        holdings.forget(2, "partition key gone")
        assert holdings.generation == 2 and set(holdings.held) == {0, 1}

        waiter = asyncio.create_task(holdings.wait_changed(2))
        await asyncio.sleep(0)
        assert not waiter.done()
        dropped = holdings.drop_all("stopped")
        assert await asyncio.wait_for(waiter, 5) == 3
        assert sorted(o.fencing_revision for o in dropped) == [10, 11]
        assert holdings.owned() == {} and changes[-1].lost == {0}


async def test_nothing_is_owned_once_the_session_is_lost_or_replaced() -> None:
    clock = FakeClock()
    async with MemoryLeaseStore(clock) as leases:
        old, new = await leases.open_session(10), await leases.open_session(10)
        holdings = Holdings("srv-a", old)
        holdings.held = {0: Ownership("/k/0", b"srv-a", 5, old)}
        holdings.fence(dict(holdings.held))
        assert holdings.owned() == {0: 5}
        holdings.session = new
        assert holdings.owned() == {}
        holdings.keep_session()
        assert holdings.held == {} and holdings.fenced == set()
        holdings.session = old
        await old.close()
        assert holdings.owned() == {}


# --------------------------------------------------------------------------- view


class Recorder:
    """The callbacks of one view, recorded; :meth:`until` waits on ``changed``."""

    def __init__(self) -> None:
        self.changed = 0
        self.snapshots: list[tuple[dict[int, int], int]] = []
        self.deleted: list[tuple[int, int]] = []
        self._event = asyncio.Event()

    def view(self, leases: MemoryLeaseStore, clock: FakeClock) -> OwnershipView:
        return OwnershipView(
            leases, clock, key_prefix=PREFIX, partition_count=4, changed=self._changed,
            holders_read=lambda created, revision: self.snapshots.append((dict(created), revision)),
            holder_deleted=lambda partition, revision: self.deleted.append((partition, revision)),
        )

    def _changed(self) -> None:
        self.changed += 1
        self._event.set()

    async def until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(5):
            while not condition():
                await self._event.wait()
                self._event.clear()


async def test_the_view_follows_members_and_holders_and_reports_what_it_sees() -> None:
    clock = FakeClock()
    async with MemoryLeaseStore(clock) as leases:
        session = await leases.open_session(10)
        await leases.put(keys.member_key("srv-a", PREFIX), "srv-a", session=session)
        ours = await leases.try_acquire(keys.partition_key(1, PREFIX), "srv-a", session)
        await leases.put(keys.partition_key(7, PREFIX), "srv-x")  # beyond the partition count: ignored
        await leases.put(PREFIX + "members", "not a member key")
        seen = Recorder()
        view = seen.view(leases, clock)
        tasks = [asyncio.create_task(view.follow_members()), asyncio.create_task(view.follow_holders())]
        try:
            await asyncio.wait_for(view.ready(), 5)
            assert view.members == {"srv-a"} and view.holders == {1: "srv-a"}
            assert seen.snapshots == [({1: ours.fencing_revision}, await leases.current_revision())]
            assert seen.changed >= 2

            await leases.put(keys.member_key("srv-b", PREFIX), "srv-b")
            await leases.put(keys.partition_key(2, PREFIX), "srv-b")
            await seen.until(lambda: view.members == {"srv-a", "srv-b"} and view.holders == {1: "srv-a", 2: "srv-b"})
            await leases.resign(ours)
            revision = await leases.current_revision()
            await leases.delete(keys.member_key("srv-a", PREFIX))
            await seen.until(lambda: view.members == {"srv-b"} and view.holders == {2: "srv-b"})
            assert seen.deleted == [(1, revision)]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize("key", ["/unit/partitions/-1", "/unit/partitions/x", "/unit/partitions/4"])
async def test_the_view_ignores_keys_that_name_no_partition(key: str) -> None:
    clock = FakeClock()
    async with MemoryLeaseStore(clock) as leases:
        await leases.put(key, "srv-x")
        seen = Recorder()
        view = seen.view(leases, clock)
        task = asyncio.create_task(view.follow_holders())
        try:
            await seen.until(lambda: bool(seen.snapshots))
            await leases.delete(key)
            await leases.put(keys.partition_key(0, PREFIX), "srv-y")
            await seen.until(lambda: view.holders == {0: "srv-y"})
            assert seen.snapshots[0][0] == {} and seen.deleted == []
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
