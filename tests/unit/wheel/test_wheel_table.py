"""Table tests of the pure wheel at fixed instants: placement, firing, cancel,
move, cascades across levels, overflow, overdue, jumps, rebuild and drop."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tickwheel.shared.ids import to_us
from tickwheel_server.wheel import Timer, TimerWheel, WheelGeometry

T0 = to_us(datetime(2027, 1, 1, tzinfo=timezone.utc))  # a tick boundary for any tick dividing 1 s
MS = 1_000
S = 1_000_000


def keys(batch: list[Timer]) -> list[object]:
    return [key for key, _, _ in batch]


def slot_number(wheel: TimerWheel, key: object) -> int:
    """The slot holding ``key``'s live timer (white box: found by identity)."""
    timer = wheel.get(key)
    return next(number for number, slot in enumerate(wheel._slots) if any(t is timer for t in slot))


def location(wheel: TimerWheel, key: object) -> str:
    """Where a timer sits: 'level N', 'overflow' or 'overdue' (white box)."""
    geometry = wheel.geometry
    code = slot_number(wheel, key)
    top = geometry.levels * geometry.slots_per_level
    if code < top:
        return f"level {code // geometry.slots_per_level}"
    return "overflow" if code == top else "overdue"


# --------------------------------------------------------------- geometry


@pytest.mark.parametrize(
    ("tick_us", "slots", "horizon_us", "levels", "span_us"),
    [
        (10_000, 256, 60 * S, 2, 655_360_000),  # the default: 2.56 s on level 0, 655 s in all
        (10_000, 256, 2_560_000, 1, 2_560_000),
        (10_000, 256, 2_560_001, 2, 655_360_000),
        (1_000, 64, 60 * S, 3, 262_144_000),
        (1, 2, 1, 1, 2),
        (5, 4, 1_000, 4, 1_280),
    ],
)
def test_levels_cover_the_horizon(tick_us, slots, horizon_us, levels, span_us):
    geometry = WheelGeometry(tick_us=tick_us, slots_per_level=slots, horizon_us=horizon_us)
    assert (geometry.levels, geometry.span_us) == (levels, span_us)
    assert geometry.span_us >= horizon_us


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"tick_us": 0}, ValueError),
        ({"slots_per_level": 100}, ValueError),
        ({"slots_per_level": 1}, ValueError),
        ({"horizon_us": 5, "tick_us": 10}, ValueError),
        ({"tick_us": 0.01}, TypeError),
    ],
)
def test_bad_geometry_is_refused_when_built(fields, error):
    with pytest.raises(error):
        WheelGeometry(**fields)


def test_default_wheel():
    wheel = TimerWheel(T0)
    assert wheel.geometry == WheelGeometry(tick_us=10_000, slots_per_level=256, horizon_us=60 * S)
    assert len(wheel) == 0 and wheel.next_due_us() is None and wheel.next_fire_us() is None
    assert wheel.pop_due(T0 + 3600 * S) == []


# --------------------------------------------------------------- never early


@pytest.mark.parametrize(
    ("due", "not_at", "fires_at"),
    [
        (T0 + 1, [T0, T0 + 9_999], T0 + 10_000),  # rounded up to the next 10 ms boundary
        (T0 + 10_000, [T0 + 9_999], T0 + 10_000),  # on a boundary: exactly on time
        (T0 + 10_001, [T0 + 10_000, T0 + 19_999], T0 + 20_000),
        (T0 + 59_999_999, [T0 + 59_990_000, T0 + 59_999_999], T0 + 60_000_000),  # level 1, cascaded
        (T0 + 3 * 3600 * S + 5, [T0 + 3 * 3600 * S + 5], T0 + 3 * 3600 * S + 10_000),  # overflow
    ],
)
def test_a_timer_fires_at_the_first_tick_at_or_after_its_due_instant(due, not_at, fires_at):
    wheel = TimerWheel(T0)
    wheel.insert("e", due)
    for now in not_at:
        assert wheel.pop_due(now) == [], f"early at {now - due} us"
    assert wheel.pop_due(fires_at) == [("e", due, None)]
    assert len(wheel) == 0


def test_due_order_within_one_batch_and_payloads():
    wheel = TimerWheel(T0)
    dues = {"c": T0 + 3 * MS, "a": T0 + 1 * MS, "d": T0 + 25 * MS, "b": T0 + 2 * MS, "e": T0 + 2 * S}
    for key, due in dues.items():
        wheel.insert(key, due, {"id": key})
    batch = wheel.pop_due(T0 + 30 * MS)
    assert keys(batch) == ["a", "b", "c", "d"]
    assert batch[0] == ("a", T0 + MS, {"id": "a"})
    assert keys(wheel.pop_due(T0 + 2 * S)) == ["e"]


def test_now_going_backwards_hands_out_nothing_early():
    wheel = TimerWheel(T0)
    wheel.pop_due(T0 + 5 * S)
    wheel.insert("past", T0 + 4 * S)  # its tick was processed: overdue
    wheel.insert("soon", T0 + 5 * S + 10 * MS)
    assert location(wheel, "past") == "overdue"
    assert wheel.pop_due(T0 + 3 * S) == []  # a clock stepped back
    assert keys(wheel.pop_due(T0 + 4 * S)) == ["past"]
    assert wheel.pop_due(T0 + 5 * S) == []
    assert keys(wheel.pop_due(T0 + 5 * S + 10 * MS)) == ["soon"]


def test_overdue_timers_come_out_first_and_in_due_order():
    wheel = TimerWheel(T0)
    wheel.insert("now", T0 + 10 * MS)
    wheel.insert("late2", T0 - 2 * S)
    wheel.insert("late1", T0 - 3 * S)
    wheel.insert("at_start", T0)  # tick T0 is not processed yet: level 0
    assert location(wheel, "late1") == "overdue" and location(wheel, "at_start") == "level 0"
    assert wheel.next_due_us() == T0 - 3 * S and wheel.next_fire_us() == T0 - 3 * S
    assert keys(wheel.pop_due(T0 + 10 * MS)) == ["late1", "late2", "at_start", "now"]


# --------------------------------------------------------------- cancel and move


def test_cancel():
    wheel = TimerWheel(T0)
    wheel.insert("a", T0 + S)
    wheel.insert("b", T0 + S)
    wheel.insert("far", T0 + 10 * 3600 * S)
    wheel.insert("late", T0 - S)
    assert wheel.cancel("a") is True and wheel.cancel("a") is False and wheel.cancel("never") is False
    assert wheel.cancel("far") is True and wheel.cancel("late") is True
    assert "a" not in wheel and "b" in wheel and len(wheel) == 1
    assert keys(wheel.pop_due(T0 + 11 * 3600 * S)) == ["b"]
    assert wheel.cancel("b") is False  # already fired


def test_cancelling_the_only_timer_leaves_nothing_to_wake_for():
    wheel = TimerWheel(T0)
    for due in (T0 + S, T0 + 100 * S, T0 + 7 * 86400 * S, T0 - S):
        wheel.insert("x", due)
        assert wheel.next_fire_us() is not None
        wheel.cancel("x")
        assert wheel.next_fire_us() is None and wheel.next_due_us() is None


@pytest.mark.parametrize(
    ("first", "second"),
    [(5 * S, 1 * S), (1 * S, 5 * S), (100 * S, 30 * MS), (30 * MS, 3600 * S), (-S, 2 * S), (2 * S, 2 * S)],
)
def test_reinserting_a_key_moves_it(first, second):
    wheel = TimerWheel(T0)
    wheel.insert("e", T0 + first, "old")
    wheel.insert("e", T0 + second, "new")
    assert len(wheel) == 1 and wheel.get("e") == ("e", T0 + second, "new")
    if second > first:
        assert wheel.pop_due(T0 + max(first, 0)) == []
    assert wheel.pop_due(T0 + second - 1) == []
    assert wheel.pop_due(T0 + second) == [("e", T0 + second, "new")]
    assert wheel.pop_due(T0 + 10 * 3600 * S) == []


# --------------------------------------------------------------- levels and overflow

SMALL = {"tick_us": 1, "slots_per_level": 4, "horizon_us": 64}  # 3 levels: 4, 16 and 64 ticks


@pytest.mark.parametrize(
    ("due", "where"),
    [(0, "level 0"), (3, "level 0"), (4, "level 1"), (15, "level 1"), (16, "level 2"), (63, "level 2"),
     (64, "overflow"), (10_000, "overflow"), (-1, "overdue")],
)
def test_placement_by_distance(due, where):
    wheel = TimerWheel(0, **SMALL)
    wheel.insert("e", due)
    assert location(wheel, "e") == where


def test_a_timer_cascades_down_every_level_and_fires_on_its_tick():
    wheel = TimerWheel(0, **SMALL)
    wheel.insert("e", 63)  # level 2
    wheel.insert("far", 1_000)  # overflow, many top-level rotations away
    seen: dict[str, list[str]] = {"e": [], "far": []}
    for now in range(0, 1_001):
        batch = wheel.pop_due(now)
        for key in seen:
            if key in wheel:
                seen[key].append(location(wheel, key))
            elif key in keys(batch):
                assert now == {"e": 63, "far": 1_000}[key]
    moves = {key: [w for i, w in enumerate(ws) if i == 0 or ws[i - 1] != w] for key, ws in seen.items()}
    assert moves["e"] == ["level 2", "level 1", "level 0"]  # down one level at a time
    assert moves["far"] == ["overflow"]  # re-scanned in at its own tick, straight to level 0
    assert len(wheel) == 0


def test_timers_on_every_level_and_overflow_fire_in_due_order_when_drained_one_tick_at_a_time():
    wheel = TimerWheel(0, **SMALL)
    dues = [0, 1, 3, 4, 5, 15, 16, 17, 31, 63, 64, 65, 127, 128, 500, 4095, 4096, 4097]
    for due in reversed(dues):
        wheel.insert(due, due)
    fired = []
    for now in range(0, 5_000):
        for timer in wheel.pop_due(now):
            assert timer[1] == now  # tick 1 us: each fires exactly at its instant
            fired.append(timer[0])
    assert fired == dues


def test_cascade_relative_to_an_unaligned_current_tick():
    # current tick 7 is in level-1 block 1; a timer at 22 (distance 15) sits in
    # level 1's slot 22 >> 2 = 5 = 1 (mod 4): the slot of the *current* block.
    # It must wait a whole rotation (boundary 20), not go with the next one.
    wheel = TimerWheel(7, **SMALL)
    wheel.insert("a", 22)
    wheel.insert("b", 11)
    assert location(wheel, "a") == "level 1" and slot_number(wheel, "a") % 4 == (7 >> 2) % 4
    fired = {now: keys(wheel.pop_due(now)) for now in range(7, 30)}
    assert {now: k for now, k in fired.items() if k} == {11: ["b"], 22: ["a"]}


def test_the_horizon_is_no_limit_a_year_ahead_fires_on_time_and_a_jump_skips_empty_ticks(monkeypatch):
    wheel = TimerWheel(T0)
    year = 365 * 86400 * S
    dues = [T0 + year, T0 + year + 10 * MS, T0 + 2 * year + 1, T0 + 30 * S]
    for i, due in enumerate(dues):
        wheel.insert(i, due)
    assert location(wheel, 0) == "overflow" and location(wheel, 3) == "level 1"
    processed = []
    original = TimerWheel._process

    def counting(self, tick, now, out):
        processed.append(tick)
        original(self, tick, now, out)

    monkeypatch.setattr(TimerWheel, "_process", counting)
    assert keys(wheel.pop_due(T0 + year - 1)) == [3]
    assert keys(wheel.pop_due(T0 + year)) == [0]
    assert wheel.pop_due(T0 + year + 9_999) == []
    assert keys(wheel.pop_due(T0 + 3 * year)) == [1, 2]
    # a few ticks were visited per timer, not one per 10 ms of the three years
    assert len(processed) <= 4 * len(dues)


def test_next_fire_is_the_tick_the_earliest_timer_fires_at_and_next_due_a_lower_bound():
    wheel = TimerWheel(T0)
    wheel.insert("a", T0 + 1_234_567)
    assert wheel.next_fire_us() == T0 + 1_240_000  # the tick that hands it out
    assert T0 + 1_230_000 < wheel.next_due_us() <= T0 + 1_234_567
    wheel.insert("b", T0 + 40 * S + 5)  # level 1: no wake-up at its slot's cascade boundary
    assert location(wheel, "b") == "level 1"
    assert wheel.next_fire_us() == T0 + 1_240_000
    assert wheel.pop_due(T0 + 1_240_000) == [("a", T0 + 1_234_567, None)]
    assert wheel.next_fire_us() == T0 + 40 * S + 10_000
    assert T0 + 40 * S < wheel.next_due_us() <= T0 + 40 * S + 5
    assert wheel.pop_due(T0 + 40 * S + 9_999) == []  # cascades on the way, hands out nothing
    assert location(wheel, "b") == "level 0"
    assert keys(wheel.pop_due(T0 + 40 * S + 10_000)) == ["b"]


@pytest.mark.parametrize("offset", [1 * S, 40 * S, 3 * 3600 * S])  # level 0, level 1, overflow
def test_next_fire_stays_a_lower_bound_after_a_cancel_and_wastes_one_wake_up_at_most(offset):
    wheel = TimerWheel(T0)
    wheel.insert("first", T0 + offset)
    wheel.insert("second", T0 + offset + 50 * MS)
    assert slot_number(wheel, "first") == slot_number(wheel, "second") or offset < 2 * S
    wheel.cancel("first")
    stale = wheel.next_fire_us()
    assert stale <= T0 + offset + 50 * MS
    assert wheel.pop_due(stale) == []  # the one wasted wake-up...
    assert wheel.next_fire_us() == T0 + offset + 50 * MS  # ...after which it is exact
    assert keys(wheel.pop_due(T0 + offset + 50 * MS)) == ["second"]


def test_dead_timers_are_compacted_when_they_outnumber_the_live_ones():
    wheel = TimerWheel(T0)
    for i in range(5000):
        wheel.insert(i, T0 + 30 * S + i)
    for i in range(4000):
        wheel.insert(i, T0 + 50 * S + i)  # moves leave dead timers behind
    for i in range(4000, 5000):
        wheel.cancel(i)
    held = sum(len(slot) for slot in wheel._slots)
    assert held < 2 * len(wheel) + 1100  # never more than twice the live set (plus slack)
    assert len(wheel.pop_due(T0 + 60 * S)) == 4000


def test_next_fire_counts_the_overflow_list():
    wheel = TimerWheel(T0)
    wheel.insert("far", T0 + 86400 * S + 1)
    assert location(wheel, "far") == "overflow"
    assert wheel.next_fire_us() == T0 + 86400 * S + 10_000
    assert wheel.pop_due(T0 + 86400 * S + 9_999) == []
    assert keys(wheel.pop_due(wheel.next_fire_us())) == ["far"]


# --------------------------------------------------------------- rebuild and drop


def test_rebuild_replaces_everything_and_moves_time():
    wheel = TimerWheel(T0)
    wheel.insert("gone", T0 + S)
    timers = [("a", T0 + 20 * S, 1), ("b", T0 + 5 * S, 2), ("a", T0 + 10 * S, 3), ("c", T0 + 9 * S, 4)]
    wheel.rebuild(timers, now_us=T0 + 9 * S)
    assert "gone" not in wheel and len(wheel) == 3
    assert wheel.get("a") == ("a", T0 + 10 * S, 3)  # the last of a repeated key
    assert wheel.current_tick == (T0 + 9 * S) // 10_000
    assert location(wheel, "b") == "overdue" and location(wheel, "c") == "level 0"
    assert keys(wheel.pop_due(T0 + 9 * S)) == ["b", "c"]
    assert keys(wheel.pop_due(T0 + 10 * S)) == ["a"]
    wheel.rebuild([], now_us=T0)  # time never moves back
    assert wheel.current_tick == (T0 + 10 * S) // 10_000 + 1 and len(wheel) == 0


def test_drop_removes_a_lost_partitions_timers_wherever_they_sit():
    wheel = TimerWheel(T0)
    offsets = [-S, 0, 10 * MS, 3 * S, 59 * S, 700 * S, 86400 * S]
    for i, offset in enumerate(offsets):
        for partition in (1, 2):
            wheel.insert(f"{partition}:{i}", T0 + offset, {"partition": partition})
    assert wheel.drop(lambda key, due, payload: payload["partition"] == 2) == len(offsets)
    assert wheel.drop(lambda key, due, payload: payload["partition"] == 2) == 0
    assert sorted(key for key, _, _ in wheel.items()) == sorted(f"1:{i}" for i in range(len(offsets)))
    assert keys(wheel.pop_due(T0 + 86400 * S)) == [f"1:{i}" for i in range(len(offsets))]
