"""The dispatcher's lanes: the owned partitions split into disjoint runs,
one claim in flight per lane at once, a stale partition leaving its lane,
every lane ended before the tick ends (even when one failed), and the
deals of all lanes one at a time in the order the claims committed."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.dispatcher.dispatcher import MAX_LANES, Dispatcher, split_lanes
from tickwheel_server.store.dispatch import ClaimedExecution, ClaimResult


def test_the_lanes_are_contiguous_disjoint_runs_of_the_owned_partitions_none_empty() -> None:
    owned = {p: 3 for p in (9, 1, 4, 7, 2)}
    assert split_lanes(owned, 2) == [{1: 3, 2: 3, 4: 3}, {7: 3, 9: 3}]
    assert split_lanes(owned, 8) == [{p: 3} for p in (1, 2, 4, 7, 9)], "never more lanes than partitions"
    assert split_lanes(owned, 1) == [dict(sorted(owned.items()))]
    assert split_lanes({}, 2) == [{}]


@pytest.mark.parametrize("lanes", [0, -1, MAX_LANES + 1])
def test_a_lane_count_out_of_bounds_is_refused(lanes: int) -> None:
    with pytest.raises(ValueError, match="lanes"):
        Dispatcher(object(), object(), object(), FakeClock(), lanes=lanes)


class Ownership:
    generation = 1

    def __init__(self, owned: dict[int, int]) -> None:
        self._owned = owned

    def owned(self) -> dict[int, int]:
        return dict(self._owned)

    async def wait_changed(self, after: int) -> int:  # pragma: no cover - tick_once does not wait
        return self.generation


class Runner:
    def __init__(self) -> None:
        self.inserted: list[str] = []
        self.dropped: list[int] = []

    def insert(self, key: str, _due_us: int, _partition: int) -> None:
        self.inserted.append(key)

    def drop(self, predicate) -> None:
        self.dropped.extend(p for p in range(16) if predicate("", 0, p))


class Store:
    """Each claim waits until as many claims as ``meet`` are in flight at
    once (then all go on), answers one execution per owned partition once,
    and marks ``stale`` partitions stale."""

    def __init__(self, meet: int, stale: set[int] = frozenset(), fail: set[int] = frozenset()) -> None:
        self.meet = meet
        self.stale = set(stale)
        self.fail = set(fail)
        self.in_flight = 0
        self.most = 0
        self.calls: list[tuple[int, ...]] = []
        self.claimed: set[int] = set()
        self.met = asyncio.Event()

    async def claim_due(self, owned, now, *, lookahead, batch, offer=None) -> ClaimResult:
        self.calls.append(tuple(sorted(owned)))
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight >= self.meet:
            self.met.set()
        await self.met.wait()
        self.in_flight -= 1
        if set(owned) & self.fail:
            raise RuntimeError("store down")
        result = ClaimResult(stale_partitions=set(owned) & self.stale)
        for p in sorted(set(owned) - self.stale - self.claimed):
            if lookahead == timedelta(0):
                self.claimed.add(p)
                result.executions.append(ClaimedExecution(f"e{p}", p, 0))
        return result

    async def scheduled_in(self, partitions, until):
        return []

    async def review_quarantine(self, owned) -> list[str]:
        return []


async def test_two_lanes_claim_at_once_each_its_own_partitions() -> None:
    store, runner = Store(meet=2), Runner()
    dispatcher = Dispatcher(store, Ownership({p: 1 for p in range(4)}), runner, FakeClock(), lanes=2)
    assert await asyncio.wait_for(dispatcher.tick_once(), 30) == 4
    assert store.most == 2, "two claims were in flight at once"
    assert set(store.calls) == {(0, 1), (2, 3)}, "each lane claims only its own partitions"
    assert sorted(runner.inserted) == ["e0", "e1", "e2", "e3"]


async def test_a_stale_partition_leaves_its_lane_and_the_wheel() -> None:
    store, runner = Store(meet=2, stale={1}), Runner()
    ownership = Ownership({p: 1 for p in range(4)})
    dispatcher = Dispatcher(store, ownership, runner, FakeClock(), lanes=2)
    await asyncio.wait_for(dispatcher.tick_once(), 30)
    assert 1 in runner.dropped
    store.calls.clear()
    await asyncio.wait_for(dispatcher.tick_once(), 30)
    assert all(1 not in call for call in store.calls), "not claimed again until ownership changes"


async def test_a_failed_lane_fails_the_tick_only_once_every_lane_ended() -> None:
    store, runner = Store(meet=2, fail={0}), Runner()
    dispatcher = Dispatcher(store, Ownership({p: 1 for p in range(4)}), runner, FakeClock(), lanes=2)
    with pytest.raises(RuntimeError, match="store down"):
        await asyncio.wait_for(dispatcher.tick_once(), 30)
    assert store.in_flight == 0 and sorted(runner.inserted) == ["e2", "e3"], "the other lane ended its passes"


class Loan:
    def __init__(self, name: str) -> None:
        self.name = name
        self.offer = name


class Lender:
    """Lends one loan per claim; each deal waits for its release."""

    def __init__(self) -> None:
        self.count = 0
        self.settling: list[str] = []
        self.settled: list[str] = []
        self.release: dict[str, asyncio.Event] = {}

    def lend(self, limit: int) -> Loan:
        self.count += 1
        return Loan(f"loan{self.count}")

    def keep(self, loan, handed) -> None:
        pass

    async def settle(self, loan, handed) -> int:
        self.settling.append(loan.name)
        assert len(self.settling) - len(self.settled) == 1, "one deal at a time"
        await self.release.setdefault(loan.name, asyncio.Event()).wait()
        self.settled.append(loan.name)
        return 0


class OfferStore(Store):
    """Records which loan each claim was made with, in the order they commit."""

    def __init__(self) -> None:
        super().__init__(meet=2)
        self.committed: list[str] = []

    async def claim_due(self, owned, now, *, lookahead, batch, offer=None) -> ClaimResult:
        result = await super().claim_due(owned, now, lookahead=lookahead, batch=batch, offer=offer)
        if offer is not None:
            self.committed.append(offer)
        return result


async def test_the_deals_of_both_lanes_run_one_at_a_time_in_the_order_the_claims_committed() -> None:
    store, lender = OfferStore(), Lender()
    dispatcher = Dispatcher(store, Ownership({p: 1 for p in range(4)}), Runner(), FakeClock(), lanes=2,
                            lender=lender, lookahead=timedelta(0))
    tick = asyncio.create_task(dispatcher.tick_once())
    while len(store.committed) < 2 or not lender.settling:
        await asyncio.sleep(0)
    for name in store.committed:  # release every deal, in turn, as it starts
        while name not in lender.settling:
            await asyncio.sleep(0)
        lender.release.setdefault(name, asyncio.Event()).set()
    while not tick.done():
        for name in store.committed:
            lender.release.setdefault(name, asyncio.Event()).set()
        await asyncio.sleep(0)
    await tick
    assert lender.settled == store.committed, "dealt in the order the claims committed"
    assert len(lender.settled) == lender.count, "every loan was settled before the tick ended"


def test_the_lane_count_comes_from_defaults_environment_and_flags() -> None:
    from tickwheel_server.config import load_server_config

    from ..policy.test_breaker import CONFIG_ENV, server_args

    assert load_server_config(server_args(), CONFIG_ENV).claim_lanes == 2
    assert load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_CLAIM_LANES": "1"}).claim_lanes == 1
    assert load_server_config(server_args("--claim-lanes", "4"), CONFIG_ENV).claim_lanes == 4


@pytest.mark.parametrize("value", ["0", "-2", "9", "1000000"])
def test_a_lane_count_out_of_bounds_stops_the_server_naming_it(value) -> None:
    from tickwheel_server.config import ConfigError, load_server_config

    from ..policy.test_breaker import CONFIG_ENV, server_args

    with pytest.raises(ConfigError, match=r"claim_lanes \(--claim-lanes\): must be between 1 and 8"):
        load_server_config(server_args("--claim-lanes", value), CONFIG_ENV)
    with pytest.raises(ConfigError, match=r"claim_lanes"):
        load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_CLAIM_LANES": "two"})


@pytest.mark.parametrize("value", ["a ready", "a/b", "a\tb", "x" * 301])
def test_a_server_id_that_cannot_name_a_server_stops_it_naming_the_setting(value) -> None:
    """A server id is a key's last part and starts every wake put's value
    (lease/keys.py: server_id_problem); one a wake could misread, or a
    key could not hold, is refused before anything starts."""
    from tickwheel_server.config import ConfigError, load_server_config

    from ..policy.test_breaker import CONFIG_ENV, server_args

    with pytest.raises(ConfigError, match=r"server_id \(--server-id\): "):
        load_server_config(server_args("--server-id", value), CONFIG_ENV)
    with pytest.raises(ConfigError, match=r"server_id"):
        load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_SERVER_ID": value})


def test_the_claim_batch_comes_from_defaults_environment_and_flags() -> None:
    from tickwheel_server.config import load_server_config

    from ..policy.test_breaker import CONFIG_ENV, server_args

    assert load_server_config(server_args(), CONFIG_ENV).claim_batch == 1000
    assert load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_CLAIM_BATCH": "100"}).claim_batch == 100
    assert load_server_config(server_args("--claim-batch", "5000"), CONFIG_ENV).claim_batch == 5000


@pytest.mark.parametrize("value", ["0", "-1000", "99", "5001", "1000000000"])
def test_a_claim_batch_out_of_bounds_stops_the_server_naming_it(value) -> None:
    from tickwheel_server.config import ConfigError, load_server_config

    from ..policy.test_breaker import CONFIG_ENV, server_args

    with pytest.raises(ConfigError, match=r"claim_batch \(--claim-batch\): must be between 100 and 5000"):
        load_server_config(server_args("--claim-batch", value), CONFIG_ENV)
    with pytest.raises(ConfigError, match=r"claim_batch \(--claim-batch\): must be between 100 and 5000"):
        load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_CLAIM_BATCH": value})


@pytest.mark.parametrize("value", ["two", "1e3", "2000.5", "0x7d0"])
def test_a_claim_batch_not_a_whole_number_stops_the_server_naming_it(value) -> None:
    from tickwheel_server.config import ConfigError, load_server_config

    from ..policy.test_breaker import CONFIG_ENV, server_args

    with pytest.raises(ConfigError, match=r"claim_batch"):
        load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_CLAIM_BATCH": value})
