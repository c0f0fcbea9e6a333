"""Weighted fair share across tenants (``tickwheel_server.policy.fairness``):
tables of one round's allocation, and the shares over many rounds."""

from __future__ import annotations

import heapq
import random

import pytest

from tickwheel_server.policy.fairness import Demand, Shares


@pytest.mark.parametrize(
    "case, budget, demands, grants",
    [
        ("one tenant takes the whole budget", 10, [Demand("a", 1)], {"a": 10}),
        ("one tenant, capped", 10, [Demand("a", 7, room=3)], {"a": 3}),
        ("one tenant at its cap", 10, [Demand("a", 1, room=0)], {"a": 0}),
        ("equal weights split evenly", 10, [Demand("a", 1), Demand("b", 1)], {"a": 5, "b": 5}),
        ("weights 1:3", 8, [Demand("a", 1), Demand("b", 3)], {"a": 2, "b": 6}),
        ("weights 1:1:2", 4, [Demand("a", 1), Demand("b", 1), Demand("c", 2)], {"a": 1, "b": 1, "c": 2}),
        ("a tie goes by name", 1, [Demand("b", 1), Demand("a", 1)], {"a": 1, "b": 0}),
        ("a capped tenant's rest goes to the others", 10,
         [Demand("a", 5, room=2), Demand("b", 1), Demand("c", 1, room=0)], {"a": 2, "b": 8, "c": 0}),
        ("every tenant capped: the budget is not all used", 10,
         [Demand("a", 1, room=2), Demand("b", 1, room=3)], {"a": 2, "b": 3}),
        ("no budget", 0, [Demand("a", 1), Demand("b", 9)], {"a": 0, "b": 0}),
        ("no budget, one tenant", 0, [Demand("a", 1)], {"a": 0}),
        ("no demand", 10, [], {}),
        ("the heaviest weight, 1000 to 1", 1001, [Demand("a", 1000), Demand("b", 1)], {"a": 1000, "b": 1}),
    ],
)
def test_one_round_from_fresh_shares(case: str, budget: int, demands: list[Demand], grants: dict[str, int]) -> None:
    assert Shares().allocate(budget, demands) == grants, case


@pytest.mark.parametrize("weight", [0, -1])
def test_a_weight_below_one_is_refused(weight: int) -> None:
    with pytest.raises(ValueError, match="weight"):
        Demand("a", weight)


def test_stride_shares_follow_the_weights_over_many_small_rounds() -> None:
    shares = Shares()
    got = {"a": 0, "b": 0}
    for _ in range(10):
        for name, n in shares.allocate(4, [Demand("a", 1), Demand("b", 3)]).items():
            got[name] += n
    assert got == {"a": 10, "b": 30}


def test_a_capped_tenant_gets_no_more_than_its_room_and_the_rest_goes_to_others() -> None:
    grants = Shares().allocate(10, [Demand("a", 5, room=2), Demand("b", 1), Demand("c", 1, room=0)])
    assert grants == {"a": 2, "b": 8, "c": 0}


def test_an_idle_tenant_does_not_bank_credit() -> None:
    shares = Shares()
    for _ in range(100):  # b was idle while a was served alone
        shares.allocate(10, [Demand("a", 1)])
    grants = shares.allocate(10, [Demand("a", 1), Demand("b", 1)])
    assert grants == {"a": 5, "b": 5}


def test_refunded_slots_are_not_charged() -> None:
    charged, refunded = Shares(), Shares()
    for shares in (charged, refunded):
        assert shares.allocate(2, [Demand("a", 1), Demand("b", 1)]) == {"a": 1, "b": 1}
    refunded.refund("b", 1, 1)  # b had nothing for these workers after all
    assert charged.allocate(1, [Demand("a", 1), Demand("b", 1)]) == {"a": 1, "b": 0}  # a tie: by name
    assert refunded.allocate(1, [Demand("a", 1), Demand("b", 1)]) == {"a": 0, "b": 1}


def test_one_tenant_alone_is_served_as_slot_by_slot_stride_would() -> None:
    """The one-tenant short cut grants and advances the passes exactly as the
    per-slot stride loop (a reference copy here) would, up to float rounding."""
    def stride(shares: Shares, budget: int, demand: Demand) -> int:
        start = max(shares.passes.get(demand.tenant, shares.virtual), shares.virtual)
        shares.passes[demand.tenant] = start
        heap, granted = [(start + 1.0 / demand.weight, demand.tenant)], 0
        while budget > 0 and heap:
            finish, _ = heapq.heappop(heap)
            granted, budget = granted + 1, budget - 1
            shares.virtual = max(shares.virtual, finish - 1.0 / demand.weight)
            shares.passes[demand.tenant] = finish
            if demand.room is None or granted < demand.room:
                heapq.heappush(heap, (finish + 1.0 / demand.weight, demand.tenant))
        return granted

    rng = random.Random(7)
    fast, reference = Shares(), Shares()
    for _ in range(200):
        demand = Demand(rng.choice("ab"), rng.choice((1, 3, 7)), rng.choice((None, 1, 5, 500)))
        budget = rng.randint(1, 2000)
        assert fast.allocate(budget, [demand, Demand("c", 1, room=0)]) == {
            demand.tenant: stride(reference, budget, demand), "c": 0}
        assert fast.virtual == pytest.approx(reference.virtual)
        assert fast.passes == pytest.approx(reference.passes)


@pytest.mark.parametrize(
    "case, counts, order",
    [
        ("one tenant keeps its count", {"a": (1, 3)}, ["a", "a", "a"]),
        ("equal weights alternate, ties by name", {"b": (1, 2), "a": (1, 2)}, ["a", "b", "a", "b"]),
        ("a quiet tenant's one run is second, not last", {"flood": (1, 5), "quiet": (1, 1)},
         ["flood", "quiet", "flood", "flood", "flood", "flood"]),
        ("weights 1:2, ties by name", {"a": (1, 2), "b": (2, 4)}, ["b", "a", "b", "b", "a", "b"]),
        ("weights 1:4", {"a": (1, 2), "b": (4, 8)}, ["b", "b", "b", "a", "b", "b", "b", "b", "a", "b"]),
        ("a heavier tenant first", {"a": (1, 1), "b": (2, 1)}, ["b", "a"]),
        ("the heaviest weight keeps a light tenant in its first thousand", {"a": (1, 1), "b": (1000, 1500)},
         ["b"] * 999 + ["a"] + ["b"] * 501),
        ("nothing to order", {}, []),
        ("a tenant with none", {"a": (1, 0), "b": (1, 2)}, ["b", "b"]),
    ],
)
def test_the_order_of_one_instant(case: str, counts: dict[str, tuple[int, int]], order: list[str]) -> None:
    assert Shares().order(counts) == order, case


def test_the_order_is_the_allocation_slot_by_slot() -> None:
    """order() serves as allocate() would, one slot at a time: any prefix
    has the grants allocate() gives that budget, and the passes agree."""
    rng = random.Random(7)
    for _ in range(200):
        counts = {name: (rng.randint(1, 5), rng.randint(0, 12)) for name in "abcd"[: rng.randint(1, 4)]}
        ordered, shares = Shares(), Shares()
        served = ordered.order(counts)
        assert sorted(served) == sorted(name for name, (_w, n) in counts.items() for _ in range(n))
        budget = rng.randint(0, len(served))
        grants = Shares().allocate(budget, [Demand(name, w, n) for name, (w, n) in counts.items()])
        assert {name: served[:budget].count(name) for name in counts} == grants
        shares.allocate(len(served), [Demand(name, w, n) for name, (w, n) in counts.items()])
        assert (ordered.passes, ordered.virtual) == (shares.passes, shares.virtual)


def test_an_order_goes_on_from_the_passes_before() -> None:
    """A tenant served in one instant comes after one that was not, in the next."""
    shares = Shares()
    assert shares.order({"a": (1, 2)}) == ["a", "a"]
    assert shares.order({"a": (1, 2), "b": (1, 2)}) == ["b", "a", "b", "a"]
