"""The max-jobs quota dealt over slots (policy/quota.py), at fixed inputs and
over random histories: the allowances never let the count pass max_jobs."""

from __future__ import annotations

import random

import pytest

from tickwheel_server.policy.quota import RESERVE_CALLS, SLOTS, deal


def test_a_new_tenant_gets_its_quota_spread_over_every_slot() -> None:
    decision = deal({}, 100)
    assert decision.granted == 0
    assert sum(allowance for _, allowance in decision.slots.values()) == 100
    assert {used for used, _ in decision.slots.values()} == {0}
    assert max(a for _, a in decision.slots.values()) - min(a for _, a in decision.slots.values()) <= 1


def test_the_asking_slot_is_granted_first_and_gets_the_remainder() -> None:
    decision = deal({3: 10}, 10 + 5 + SLOTS + 1, slot=5, want=5)
    assert decision.granted == 5
    used, allowance = decision.slots[5]
    # Of the 33 left: a reserve of 16 (half, less than 8 calls of 5), then
    # 17 spread one each over slots 5 to 21 (slot 3 is not among them).
    assert used == 5 and allowance == 5 + 16 + 1
    assert decision.slots[3] == (10, 10) and decision.slots[21] == (0, 1) and decision.slots[22] == (0, 0)
    assert sum(a for _, a in decision.slots.values()) == 10 + 5 + SLOTS + 1


def test_a_dry_slot_gets_a_reserve_of_its_next_calls() -> None:
    decision = deal({3: 10}, 10 + 5 + 1000, slot=5, want=5)
    assert decision.slots[5] == (5, 5 + RESERVE_CALLS * 5 + (1000 - RESERVE_CALLS * 5) // SLOTS)
    assert decision.slots[3] == (10, 10 + (1000 - RESERVE_CALLS * 5) // SLOTS)
    assert sum(a for _, a in decision.slots.values()) == 10 + 5 + 1000
    # Near the limit the reserve is at most half of what is left.
    tight = deal({}, 1000 + 64, slot=0, want=1000)
    assert tight.granted == 1000 and tight.slots[0][1] == 1000 + 32 + 1 and tight.slots[1] == (0, 1)


@pytest.mark.parametrize(
    ("used", "max_jobs", "want", "granted"),
    [
        ({0: 7}, 10, 5, 3),  # only what is left under max_jobs
        ({0: 10}, 10, 1, 0),  # at the limit
        ({0: 12}, 10, 1, 0),  # max_jobs was lowered below the count
        ({}, 0, 1, 0),
        ({1: 1, 2: 1}, 1000, 0, 0),
    ],
)
def test_grants(used, max_jobs, want, granted) -> None:
    decision = deal(used, max_jobs, slot=4, want=want)
    assert decision.granted == granted
    total_used = sum(u for u, _ in decision.slots.values())
    assert total_used == sum(used.values()) + granted
    assert sum(a for _, a in decision.slots.values()) == max(max_jobs, total_used)
    assert all(u <= a for u, a in decision.slots.values())


def test_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        deal({}, 10, slot=SLOTS)
    with pytest.raises(ValueError):
        deal({}, 10, want=-1)
    with pytest.raises(ValueError):
        deal({}, -1)


def test_random_histories_never_count_more_than_max_jobs() -> None:
    """Creates take from a slot while its allowance covers them, else deal;
    a delete takes its unit out of the slot that counted it (used and
    allowance: the unit returns to the pool at the next deal); max_jobs moves. The count
    passes max_jobs only when max_jobs was lowered under it, and never grows
    then."""
    rng = random.Random(17)
    for _ in range(200):
        max_jobs = rng.randrange(0, 200)
        slots = {index: (used, allowance) for index, (used, allowance) in deal({}, max_jobs).slots.items()}
        jobs: list[int] = []  # the slot of each job
        for _ in range(300):
            action = rng.random()
            if action < 0.6:
                slot, want = rng.randrange(SLOTS), rng.randrange(1, 6)
                used, allowance = slots[slot]
                before = len(jobs)
                if used + want <= allowance:
                    slots[slot] = (used + want, allowance)
                    jobs += [slot] * want
                else:
                    decision = deal({i: u for i, (u, _) in slots.items()}, max_jobs, slot=slot, want=want)
                    slots = dict(decision.slots)
                    jobs += [slot] * decision.granted
                grew = len(jobs) > before
                assert not grew or len(jobs) <= max_jobs
            elif action < 0.9 and jobs:
                slot = jobs.pop(rng.randrange(len(jobs)))
                used, allowance = slots[slot]
                slots[slot] = (used - 1, allowance - 1)
            else:
                max_jobs = rng.randrange(0, 200)
                slots = dict(deal({i: u for i, (u, _) in slots.items()}, max_jobs).slots)
            assert all(0 <= u <= a for u, a in slots.values())
            assert sum(u for u, _ in slots.values()) == len(jobs)
            assert sum(a for _, a in slots.values()) <= max(max_jobs, len(jobs))
