"""The partition shares rule: who owns which partition, and one member's plan.

Tables at fixed member sets and partition counts pin the exact shares: every
server of a cluster, whatever its release or process, must compute the same.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys

import pytest

from tickwheel_server.policy.ownership import OwnershipPlan, _member_seed, _score, assign_partitions, plan_ownership


def servers(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"srv-{rng.getrandbits(32):08x}" for _ in range(n)]


def holders_of(assignment: dict[str, frozenset[int]]) -> dict[int, str]:
    return {partition: member for member, share in assignment.items() for partition in share}


def moved(before: dict[int, str], after: dict[int, str]) -> int:
    return sum(1 for partition, member in after.items() if before.get(partition) != member)


# --------------------------------------------------------------------------- assign_partitions


@pytest.mark.parametrize(
    ("members", "partitions", "holders", "expected"),
    [
        pytest.param(["a"], 4, {}, {"a": {0, 1, 2, 3}}, id="alone: everything"),
        pytest.param(["a", "b"], 6, {}, {"a": {0, 4, 5}, "b": {1, 2, 3}}, id="two over six"),
        pytest.param(["a", "b", "c"], 8, {}, {"a": {0, 4, 6}, "b": {2, 3, 7}, "c": {1, 5}}, id="three over eight"),
        pytest.param(
            ["srv-1", "srv-2", "srv-3", "srv-4"], 10, {},
            {"srv-1": {0, 6}, "srv-2": {5, 7, 8}, "srv-3": {1, 2}, "srv-4": {3, 4, 9}},
            id="four over ten",
        ),
        pytest.param(["x", "y"], 1, {}, {"x": {0}, "y": set()}, id="fewer partitions than members"),
        pytest.param(["a", "b", "c"], 2, {}, {"a": {0}, "b": {1}, "c": set()}, id="two partitions, three members"),
        pytest.param(
            ["a", "b", "c", "d"], 12,
            {0: "a", 4: "a", 8: "a", 9: "a", 2: "b", 3: "b", 7: "b", 10: "b", 1: "c", 5: "c", 6: "c", 11: "c"},
            {"a": {4, 8, 9}, "b": {3, 7, 10}, "c": {1, 5, 11}, "d": {0, 2, 6}},
            id="d joins a, b, c: takes one from each",
        ),
        pytest.param(
            ["a", "b"], 6, {0: "a", 4: "a", 5: "a", 1: "b", 2: "b", 3: "c"},
            {"a": {0, 4, 5}, "b": {1, 2, 3}},
            id="c left: its partition goes to the member short of its quota",
        ),
    ],
)
def test_shares_table(
    members: list[str], partitions: int, holders: dict[int, str], expected: dict[str, set[int]]
) -> None:
    # Servers of different versions share one cluster during a rolling upgrade:
    # they must agree on the assignment. Changing a row is a protocol change.
    assert {member: set(share) for member, share in assign_partitions(members, partitions, holders).items()} == expected


def test_weights_are_pinned() -> None:
    # The rendezvous weight is splitmix64 of a BLAKE2b seed: the same in every
    # process and release (Python's str hash is randomised per process).
    assert _member_seed("a") == 4681665781835383343
    assert _score(_member_seed("a"), 0) == 1786339900719625571
    assert _score(_member_seed("srv-1"), 7) == 639676419825632972


def test_the_same_shares_in_another_process() -> None:
    members = servers(6, seed=3)
    probe = (
        "import sys; from tickwheel_server.policy.ownership import assign_partitions; "
        "a = assign_partitions(sys.argv[1:], 64); print(sorted((m, sorted(s)) for m, s in a.items()))"
    )
    outputs = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        result = subprocess.run(
            [sys.executable, "-c", probe, *members], capture_output=True, text=True, env=env, timeout=60, check=True
        )
        outputs.add(result.stdout)
    here = str(sorted((m, sorted(s)) for m, s in assign_partitions(members, 64).items()))
    assert outputs == {here + "\n"}


@pytest.mark.parametrize(
    ("partitions", "members"),
    [(1, 1), (1, 3), (2, 3), (32, 1), (32, 3), (32, 5), (256, 3), (256, 7), (256, 10), (1000, 13)],
)
def test_covers_every_partition_once_and_balances_within_one(partitions: int, members: int) -> None:
    assignment = assign_partitions(servers(members), partitions)
    assert len(assignment) == members
    shares = list(assignment.values())
    assert sum(len(share) for share in shares) == partitions
    assert frozenset().union(*shares) == frozenset(range(partitions))
    sizes = {len(share) for share in shares}
    assert sizes <= {partitions // members, partitions // members + 1}


def test_three_members_over_32_partitions_own_10_or_11() -> None:
    sizes = sorted(len(share) for share in assign_partitions(["a", "b", "c"], 32).values())
    assert sizes == [10, 11, 11]


def test_deterministic_whatever_the_order_or_duplicates() -> None:
    members = servers(5)
    reference = assign_partitions(members, 64)
    assert assign_partitions(list(reversed(members)), 64) == reference
    assert assign_partitions(members + members[:2], 64) == reference
    assert assign_partitions(iter(members), 64) == reference


def test_no_members_no_assignment_and_bad_count_refused() -> None:
    assert assign_partitions([], 16) == {}
    with pytest.raises(ValueError):
        assign_partitions(["a"], 0)


@pytest.mark.parametrize(("partitions", "members"), [(32, 1), (32, 2), (32, 3), (256, 3), (256, 5), (256, 9)])
@pytest.mark.parametrize("seed", range(5))
def test_a_join_moves_only_the_newcomers_share(partitions: int, members: int, seed: int) -> None:
    ids = servers(members + 1, seed)
    before = holders_of(assign_partitions(ids[:-1], partitions))
    after_assignment = assign_partitions(ids, partitions, before)
    after = holders_of(after_assignment)
    newcomer = ids[-1]
    assert moved(before, after) == len(after_assignment[newcomer])
    assert moved(before, after) <= math.ceil(partitions / (members + 1)) <= math.ceil(partitions / members)
    changed_hands = {partition for partition, member in after.items() if member != before[partition]}
    assert changed_hands == after_assignment[newcomer]


@pytest.mark.parametrize(("partitions", "members"), [(32, 2), (32, 3), (256, 4), (256, 10)])
@pytest.mark.parametrize("seed", range(5))
def test_a_leave_moves_only_the_leavers_partitions(partitions: int, members: int, seed: int) -> None:
    ids = servers(members, seed)
    before_assignment = assign_partitions(ids, partitions)
    before = holders_of(before_assignment)
    leaver = ids[seed % members]
    survivors = [member for member in ids if member != leaver]
    after = holders_of(assign_partitions(survivors, partitions, before))
    assert moved(before, after) == len(before_assignment[leaver])
    assert all(after[p] == before[p] for p in range(partitions) if before[p] != leaver)


@pytest.mark.parametrize(("partitions", "members"), [(32, 3), (256, 4), (256, 10)])
def test_without_history_a_join_still_moves_about_p_over_n(partitions: int, members: int) -> None:
    # The memoryless fallback (no holders, e.g. a cold start) is balanced
    # rendezvous hashing: not minimal, but within 2x of the ideal share.
    for seed in range(10):
        ids = servers(members + 1, seed)
        before = holders_of(assign_partitions(ids[:-1], partitions))
        after = holders_of(assign_partitions(ids, partitions))
        assert moved(before, after) <= 2 * math.ceil(partitions / (members + 1))


def test_a_balanced_state_is_a_fixed_point() -> None:
    ids = servers(4)
    assignment = assign_partitions(ids, 50)
    assert assign_partitions(ids, 50, holders_of(assignment)) == assignment


def test_sticky_from_an_arbitrary_state() -> None:
    # "a" holds 20, "b" 1, a departed "z" holds 5, 6 are free; one entry out of range.
    holders = {p: "a" for p in range(20)} | {20: "b"} | {p: "z" for p in range(21, 26)} | {99: "b"}
    assignment = assign_partitions(["a", "b", "c"], 32, holders)
    assert sorted(len(share) for share in assignment.values()) == [10, 11, 11]
    assert len(assignment["a"]) == 11 and assignment["a"] < frozenset(range(20))  # keeps 11 of its own
    assert 20 in assignment["b"]
    assert 99 not in frozenset().union(*assignment.values())


def test_members_converge_from_any_state_by_following_their_plans() -> None:
    # Every member acts on the same view, one at a time in random order: release
    # beyond its share, take free partitions of its share. No flapping, and the
    # result is balanced within a few rounds.
    rng = random.Random(7)
    for _ in range(20):
        ids = servers(rng.randint(1, 6), rng.getrandbits(16))
        partitions = rng.choice([8, 32, 64])
        holders = {p: rng.choice(ids + ["gone", "gone"]) for p in range(partitions) if rng.random() < 0.7}
        holders = {p: h for p, h in holders.items() if h != "gone"}
        for _round in range(4):
            for member in rng.sample(ids, len(ids)):
                mine = {p for p, h in holders.items() if h == member}
                plan = plan_ownership(member, ids, partitions, holders, mine)
                for partition in plan.release:
                    del holders[partition]
                for partition in plan.acquire:
                    holders[partition] = member
        sizes = [sum(1 for h in holders.values() if h == m) for m in ids]
        assert len(holders) == partitions
        assert max(sizes) - min(sizes) <= 1
        for member in ids:
            mine = {p for p, h in holders.items() if h == member}
            assert plan_ownership(member, ids, partitions, holders, mine).settled


# --------------------------------------------------------------------------- plan_ownership


def plan(me: str, members: list[str], holders: dict[int, str], mine: set[int], partitions: int = 6) -> OwnershipPlan:
    return plan_ownership(me, members, partitions, holders, mine)


SHARE_A = assign_partitions(["a", "b"], 6)["a"]
SHARE_B = assign_partitions(["a", "b"], 6)["b"]
B_HOLDS_ALL = {p: "b" for p in range(6)}


@pytest.mark.parametrize(
    ("me", "members", "holders", "mine", "acquire", "release", "waiting"),
    [
        pytest.param("a", ["a", "b"], {}, set(), SHARE_A, set(), set(), id="fresh cluster: take the share"),
        pytest.param("a", ["a"], {}, set(), set(range(6)), set(), set(), id="alone: take everything"),
        pytest.param("a", ["b"], {}, {0, 1}, set(), {0, 1}, set(), id="not a member: release all"),
        pytest.param("a", ["a", "b"], B_HOLDS_ALL, set(), set(), set(), SHARE_A, id="b holds all: a waits"),
        pytest.param("b", ["a", "b"], B_HOLDS_ALL, set(range(6)), set(), SHARE_A, set(), id="b releases a's share"),
        # try_acquire adopts a key of this session (a reply that was lost) and
        # refuses one of an earlier session: either way, trying is right.
        pytest.param("a", ["a"], {0: "a"}, set(), set(range(6)), set(), set(), id="unknown key under our id: try"),
        pytest.param("a", ["a"], {0: "x", 1: "x"}, set(), set(range(2, 6)), set(), {0, 1}, id="departed member: wait"),
        pytest.param("b", ["a", "b"], {p: "b" for p in SHARE_B}, set(SHARE_B), set(), set(), set(), id="settled"),
    ],
)
def test_plan_table(
    me: str,
    members: list[str],
    holders: dict[int, str],
    mine: set[int],
    acquire: set[int],
    release: set[int],
    waiting: set[int],
) -> None:
    result = plan(me, members, holders, mine)
    assert (set(result.acquire), set(result.release), set(result.waiting)) == (set(acquire), release, set(waiting))
    assert result.acquire | result.waiting == result.target - frozenset(mine)
    assert result.settled == (not (acquire or release or waiting))


def test_plan_trusts_mine_over_a_lagging_view() -> None:
    # We just won partition 0 and resigned 5 (b's now); the watch has not caught up yet.
    result = plan("a", ["a", "b"], {5: "a"}, {0, 1, 2}, partitions=6)
    assert result.release == frozenset() and result.target == frozenset({0, 1, 2})
    assert 5 not in result.acquire | result.waiting  # not ours to take back
