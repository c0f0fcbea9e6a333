"""Partition ownership across several servers, on the in-process lease store
(FakeClock, SQLite) and on real etcd (system clock, PostgreSQL).

Each server is a PartitionOwnership with its own session over one shared lease
store and one SQL store, under a per-test key prefix. Tests wait for the
ownership changes they expect (``wait_changed``) with bounds in store time; on
the fake clock, time moves only while nothing else is happening.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from tickwheel.shared.clock import Clock, FakeClock, SystemClock
from tickwheel_server.dispatcher.ownership import OwnershipConfig, PartitionOwnership
from tickwheel_server.dispatcher.ownership_holdings import OwnershipChange
from tickwheel_server.lease import LeaseStore, Session, open_lease_store
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.partitions import PartitionStore

PARTITIONS = 32
ALL = set(range(PARTITIONS))


@dataclass
class Server:
    id: str
    session: Session
    ownership: PartitionOwnership
    changes: list[OwnershipChange] = field(default_factory=list)

    def owned(self) -> dict[int, int]:
        return self.ownership.owned()


class CountingPartitionStore(PartitionStore):
    """A PartitionStore that counts its transactions in flight (each runs in
    a thread): on the fake clock, store time must not pass while one is
    running, however slowly a loaded machine runs it."""

    busy = 0

    async def _tx(self, fn, **options):
        self.busy += 1
        try:
            return await super()._tx(fn, **options)
        finally:
            self.busy -= 1


QUIET = 0.05
"""Real seconds without an ownership change (and no transaction in flight)
before the fake clock moves."""
STUCK = 5.0
"""Real seconds a transaction may stay in flight before the fake clock moves
anyway (one retrying waits on that clock)."""


@dataclass
class Cluster:
    backend: str
    leases: LeaseStore
    clock: Clock
    store: CountingPartitionStore
    config: OwnershipConfig
    ttl: int
    servers: list[Server] = field(default_factory=list)

    @property
    def fake(self) -> FakeClock | None:
        return self.clock if isinstance(self.clock, FakeClock) else None

    @property
    def slack(self) -> float:
        """Store time beyond TTL + tick that a takeover may take: etcd sweeps
        expired leases every 500 ms; the fake clock moves in 0.1 s steps while
        SQLite works in a thread."""
        return 1.0 if self.fake is None else 0.3

    async def add(self, server_id: str, *, ttl: int | None = None, keepalive: bool = True) -> Server:
        session = await self.leases.open_session(ttl or self.ttl, keepalive=keepalive)
        ownership = PartitionOwnership(
            self.leases, session, self.store,
            server_id=server_id, partition_count=PARTITIONS, clock=self.clock, config=self.config,
        )  # fmt: skip
        server = Server(server_id, session, ownership)
        ownership.add_listener(server.changes.append)
        self.servers.append(server)
        await ownership.start()
        return server

    async def _any_change(self, timeout: float) -> bool:
        waiters = [asyncio.ensure_future(s.ownership.wait_changed(s.ownership.generation)) for s in self.servers]
        try:
            done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return bool(done)

    async def until(self, condition: Callable[[], bool], within: float, what: str) -> float:
        """Wait until ``condition()`` holds; return the store time it took.
        Fails after ``within`` seconds of store time. Wakes on every ownership
        change (and every 0.1 s, for conditions on anything else); on the fake
        clock, time advances by 0.1 s only when nothing changed for a moment
        and no store transaction is in flight (a loaded machine slows the
        work, never adds store time to it)."""
        start = self.clock.monotonic()
        loop = asyncio.get_running_loop()
        busy_since: float | None = None
        while not condition():
            elapsed = self.clock.monotonic() - start
            if elapsed > within:
                raise AssertionError(f"not within {within}s: {what}; owned: {self.describe()}")
            if self.fake is not None:
                if await self._any_change(timeout=QUIET):
                    busy_since = None
                elif not self.store.busy or loop.time() - (busy_since or loop.time()) > STUCK:
                    self.fake.advance(0.1)
                    busy_since = None
                elif busy_since is None:
                    busy_since = loop.time()
            else:
                await self._any_change(timeout=min(0.1, within - elapsed))
        return self.clock.monotonic() - start

    def describe(self) -> dict[str, list[int]]:
        return {s.id: sorted(s.owned()) for s in self.servers}

    def covered_by(self, servers: list[Server], sizes: set[int] | None = None) -> bool:
        """Every partition owned by exactly one of ``servers`` (and nobody
        else), each owning a number in ``sizes``."""
        owned = [set(s.owned()) for s in servers]
        others = [set(s.owned()) for s in self.servers if s not in servers]
        return (
            set().union(*owned) == ALL
            and sum(len(o) for o in owned) == PARTITIONS
            and not any(others)
            and (sizes is None or all(len(o) in sizes for o in owned))
        )

    async def check_store(self, servers: list[Server]) -> None:
        """The store's epochs are exactly those the owners hold."""
        held = {p: e for s in servers for p, e in s.owned().items()}
        assert await self.store.epochs(ALL) == held


@pytest.fixture(params=["memory", pytest.param("etcd", marks=pytest.mark.etcd)])
async def cluster(request: pytest.FixtureRequest, etcd_prefix: str, tmp_path) -> AsyncIterator[Cluster]:
    clock: Clock
    if request.param == "memory":
        clock = FakeClock()
        leases: LeaseStore = MemoryLeaseStore(clock)
        engine = create_store_engine(f"sqlite:///{tmp_path / 'store.db'}")
        config, ttl = OwnershipConfig(key_prefix=etcd_prefix, tick=1.0), 2
    else:
        clock = SystemClock()
        leases = open_lease_store(request.getfixturevalue("etcd_endpoint"), clock)
        engine = create_store_engine(request.getfixturevalue("postgres_url"))
        config, ttl = OwnershipConfig(key_prefix=etcd_prefix, tick=0.5), 2
    await asyncio.to_thread(migrate, engine)
    result = Cluster(request.param, leases, clock, CountingPartitionStore(engine, clock), config, ttl)
    try:
        yield result
    finally:
        for server in result.servers:
            await server.ownership.stop(release=False)
            await server.session.close()
        await leases.close()
        engine.dispose()
    await asyncio.sleep(0)
    leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done() and _ours(t)]
    assert not leftovers, f"tasks left running: {leftovers}"


def _ours(task: asyncio.Task[object]) -> bool:
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and "tickwheel_server" in code.co_filename


async def three_balanced(cluster: Cluster) -> list[Server]:
    servers = [await cluster.add(name) for name in ("srv-a", "srv-b", "srv-c")]
    await cluster.until(lambda: cluster.covered_by(servers, {10, 11}), within=10, what="3 servers own 10-11 each")
    return servers


# --------------------------------------------------------------------------- tests


async def test_three_servers_share_32_partitions(cluster: Cluster) -> None:
    servers = await three_balanced(cluster)
    assert sorted(len(s.owned()) for s in servers) == [10, 11, 11]
    await cluster.check_store(servers)
    # Each server re-plans after the last change it sees; then nothing is left to do.
    await cluster.until(
        lambda: all(s.ownership.plan is not None and s.ownership.plan.settled for s in servers),
        within=cluster.config.tick * 2,
        what="every plan settled",
    )
    assert all(s.ownership.members() == ["srv-a", "srv-b", "srv-c"] for s in servers)


async def test_a_closed_session_hands_its_partitions_over(cluster: Cluster) -> None:
    a, b, c = await three_balanced(cluster)
    before = {**a.owned(), **b.owned(), **c.owned()}
    moving = set(b.owned())
    seen = len(b.changes)  # b may have held others while the three were starting

    await b.session.close()
    assert b.owned() == {}  # at once, before any task has run

    took = await cluster.until(
        lambda: cluster.covered_by([a, c], {16}), within=cluster.ttl + cluster.config.tick, what="a and c own all"
    )
    assert took <= cluster.ttl + cluster.config.tick
    after = {**a.owned(), **c.owned()}
    assert all(after[p] > before[p] for p in moving)  # a new owner, a higher epoch
    assert all(after[p] == before[p] for p in ALL - moving)  # the others kept theirs
    await cluster.check_store([a, c])
    assert set().union(*(change.lost for change in b.changes[seen:])) == moving


async def test_a_crashed_server_is_replaced_within_ttl_plus_a_tick(cluster: Cluster) -> None:
    a = await cluster.add("srv-a")
    c = await cluster.add("srv-c")
    # srv-b stops renewing from the start: its session expires after its TTL,
    # as a crashed process's would.
    b = await cluster.add("srv-b", ttl=3, keepalive=False)
    expires_at = cluster.clock.monotonic() + b.session.ttl
    await cluster.until(lambda: cluster.covered_by([a, b, c], {10, 11}), within=b.session.ttl, what="balanced")
    before = {**a.owned(), **b.owned(), **c.owned()}
    moving = set(b.owned())

    await cluster.until(lambda: cluster.covered_by([a, c], {16}), within=b.session.ttl + 5, what="a and c own all")
    late = cluster.clock.monotonic() - expires_at
    assert late <= cluster.config.tick + cluster.slack, f"took {late:.2f}s beyond the TTL"
    after = {**a.owned(), **c.owned()}
    assert all(after[p] > before[p] for p in moving)
    await cluster.check_store([a, c])


async def test_a_joining_server_takes_its_share_from_the_others(cluster: Cluster) -> None:
    a = await cluster.add("srv-a")
    b = await cluster.add("srv-b")
    await cluster.until(lambda: cluster.covered_by([a, b], {16}), within=10, what="a and b own 16 each")
    before = {**a.owned(), **b.owned()}

    c = await cluster.add("srv-c")
    await cluster.until(lambda: cluster.covered_by([a, b, c], {10, 11}), within=10, what="balanced after the join")
    after = {**a.owned(), **b.owned(), **c.owned()}
    moved = {p for p in ALL if after[p] != before[p]}
    history = {s.id: [(ch.reason, sorted(ch.acquired), sorted(ch.lost)) for ch in s.changes] for s in (a, b, c)}
    assert moved == set(c.owned()), f"only the newcomer's share moves; history: {history}"
    assert all(after[p] > before[p] for p in moved)
    assert set(a.owned()) | set(b.owned()) == ALL - moved  # a and b kept the rest, at the same epochs
    await cluster.check_store([a, b, c])


async def test_a_graceful_stop_hands_over_without_waiting_for_the_ttl(cluster: Cluster) -> None:
    a, b, c = await three_balanced(cluster)
    await b.ownership.stop()
    assert b.owned() == {}
    took = await cluster.until(lambda: cluster.covered_by([a, c], {16}), within=cluster.ttl, what="a and c own all")
    if cluster.fake is not None:
        assert took <= 0.3  # no expiry involved: the watch saw the resignations
    assert await cluster.leases.get(cluster.config.member_key("srv-b")) is None


async def test_a_lost_session_empties_ownership_at_once_and_a_new_one_recovers(cluster: Cluster) -> None:
    a = await cluster.add("srv-a")
    await cluster.until(lambda: set(a.owned()) == ALL, within=5, what="a owns everything")
    before = a.owned()
    seen = len(a.changes)

    await a.session.close()
    assert a.owned() == {}

    def announced() -> set[int]:
        return set().union(*(change.lost for change in a.changes[seen:]))

    await cluster.until(lambda: announced() == ALL, within=1, what="the loss is announced")
    assert a.changes[-1].owned == {}

    new_session = await cluster.leases.open_session(cluster.ttl)
    a.session = new_session
    await a.ownership.reset_session(new_session)
    await cluster.until(lambda: set(a.owned()) == ALL, within=5, what="a owns everything again")
    assert all(epoch > before[p] for p, epoch in a.owned().items())
    await cluster.check_store([a])


async def test_a_refused_raise_is_never_reported_as_owned(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    # Partition 0's stored epoch is ahead of anything the lease store has
    # issued (as after the lease store's revisions started again).
    await cluster.store.raise_epoch(0, 10**12, "srv-from-another-life")
    caplog.set_level(logging.ERROR, logger="tickwheel_server.dispatcher.ownership_fence")
    a = await cluster.add("srv-a")
    await cluster.until(lambda: set(a.owned()) == ALL - {0}, within=5, what="a owns all but partition 0")

    def refusals() -> int:
        return sum("revisions started again" in record.getMessage() for record in caplog.records)

    await cluster.until(lambda: refusals() >= 2, within=3 * cluster.config.tick, what="a retry a tick later")
    assert set(a.owned()) == ALL - {0}
    assert all(0 not in change.acquired for change in a.changes)
    assert (await cluster.store.epochs([0]))[0] == 10**12
    kv = await cluster.leases.get(cluster.config.partition_key(0))
    assert kv is None or kv.create_revision not in a.owned().values()
