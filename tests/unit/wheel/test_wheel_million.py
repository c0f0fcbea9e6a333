"""A million timers inserted, some cancelled and moved, and drained on a fake
time source: every survivor handed out exactly once, never early, on its
first tick, in due order. Counts and order only, no timing assertions.

Timers arrive as the dispatcher claims them: in batches of 1000 in due
order, shuffled within each batch (the property tests cover arbitrary
orders). That is also what keeps this test within seconds here: handing
out a million timers in an order unrelated to their insertion costs a cache
miss per dictionary access, several times slower on this machine.
"""

from __future__ import annotations

import random
from operator import itemgetter

from tickwheel_server.wheel import TimerWheel

T0 = 1_798_761_600_000_000  # 2027-01-01T00:00:00Z in microseconds
S = 1_000_000
N = 1_000_000
TICK = 10_000


def test_a_million_timers_drain_exactly_once_in_due_order():
    rng = random.Random(4)
    bits = rng.getrandbits
    wheel = TimerWheel(T0)  # 10 ms ticks, 256 slots, 60 s horizon: two levels and overflow
    # the look-ahead minute, with 1 % of the timers further out, beyond the top level
    # batch b of 1000 covers [b * 60 ms, (b + 1) * 60 ms): the minute in 1000 claims
    due = [T0 + (i // 1000) * 60_000 + bits(16) % 60_000 for i in range(N)]
    for i in range(0, N, 100):
        due[i] = T0 + wheel.geometry.span_us + bits(32) % (3600 * S)
    insert = wheel.insert
    for key in range(N):
        insert(key, due[key], None)
    assert len(wheel) == N

    tail = T0 + 61 * S  # after the busy minute
    cancelled = rng.sample(range(N), N // 10)
    moved = list(set(rng.sample(range(N), N // 20)).difference(cancelled))
    dead_in_tail = sum(due[key] > tail for key in cancelled + moved)
    for key in cancelled:
        assert wheel.cancel(key)
    for key in moved:
        due[key] = T0 + bits(26) % (90 * S)
        insert(key, due[key], "moved")
    expected = N - len(cancelled)
    assert len(wheel) == expected

    got = []
    now = T0
    empty_tail_pops = 0
    while len(wheel):
        previous_tick = now // TICK
        if now < tail:
            now += 1 + bits(15)  # irregular steps up to ~33 ms through the busy minute
        else:
            now = max(now, wheel.next_fire_us())  # then sleep from one non-empty tick to the next
        batch = wheel.pop_due(now)
        if batch:
            # sorted, so the ends bound the batch: none early, none left over from an earlier pop
            assert batch[-1][1] <= now, "early"
            assert (batch[0][1] + TICK - 1) // TICK > previous_tick, "late: it was due at an earlier pop"
            got += batch
        elif now >= tail:
            empty_tail_pops += 1

    # (whole-list checks through map/itemgetter: a million timers, no Python loop)
    assert len(got) == expected
    keys = list(map(itemgetter(0), got))
    assert len(set(keys)) == expected, "handed out twice"
    assert set(cancelled).isdisjoint(keys), "a cancelled timer fired"
    dues = list(map(itemgetter(1), got))
    assert dues == sorted(dues), "not in due order"
    assert dues == list(map(due.__getitem__, keys)), "a moved timer fired at its old instant"
    assert list(map(itemgetter(2), got)).count("moved") == len(moved)
    # sleeping until next_fire_us wastes a wake-up only for a slot a cancel emptied
    assert empty_tail_pops <= dead_in_tail
