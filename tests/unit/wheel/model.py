"""A reference model of the timer wheel's contract, and a harness that runs
the same operations on a :class:`TimerWheel` and on the model and compares.

The contract, with ``now_us`` never decreasing from the wheel's start: a
timer is handed out by the first ``pop_due(now_us)`` with
``now_us // tick_us >= ceil(due_us / tick_us)`` (so never before its due
instant, and less than one tick after it), exactly once, in due order.
"""

from __future__ import annotations

from tickwheel_server.wheel import Timer, TimerWheel


def fire_tick(due_us: int, tick_us: int) -> int:
    return -(-due_us // tick_us)


class Harness:
    """Drives a wheel and the model side by side; every method checks agreement."""

    def __init__(self, start_us: int, **geometry: int) -> None:
        self.wheel = TimerWheel(start_us, **geometry)
        self.tick = self.wheel.geometry.tick_us
        self.now = start_us
        self.live: dict[object, tuple[int, object]] = {}
        self.popped = 0

    def insert(self, key: object, due_us: int, payload: object = None) -> None:
        self.wheel.insert(key, due_us, payload)
        self.live[key] = (due_us, payload)
        self.check()

    def cancel(self, key: object) -> None:
        assert self.wheel.cancel(key) is (key in self.live)
        self.live.pop(key, None)
        self.check()

    def drop(self, predicate) -> None:
        expected = [k for k, (d, p) in self.live.items() if predicate(k, d, p)]
        assert self.wheel.drop(predicate) == len(expected)
        for key in expected:
            del self.live[key]
        self.check()

    def rebuild(self, timers: list[tuple[object, int, object]]) -> None:
        self.wheel.rebuild(timers, now_us=self.now)
        self.live = {key: (due, payload) for key, due, payload in timers}
        self.check()

    def advance(self, delta_us: int) -> list[Timer]:
        assert delta_us >= 0
        self.now += delta_us
        return self.pop()

    def advance_to_just_before_fire(self) -> None:
        """``pop_due`` just before ``next_fire_us`` hands out nothing."""
        event = self.wheel.next_fire_us()
        if event is not None and event - 1 >= self.now:
            self.now = event - 1
            assert self.pop() == []

    def pop(self) -> list[Timer]:
        now, tick = self.now, self.tick
        got = self.wheel.pop_due(now)
        expected = {k for k, (d, _) in self.live.items() if fire_tick(d, tick) <= now // tick}
        assert {key for key, _, _ in got} == expected, "lost, early or extra timers"
        assert len(got) == len(expected), "a timer handed out twice"
        dues = [due for _, due, _ in got]
        assert dues == sorted(dues), "not in due order"
        for key, due, payload in got:
            assert due <= now, "early"
            assert (due, payload) == self.live.pop(key)
        self.popped += len(got)
        self.check()
        return got

    def check(self) -> None:
        wheel, live = self.wheel, self.live
        assert len(wheel) == len(live)
        for key in list(live)[:8]:
            assert key in wheel and wheel.get(key) == (key, *live[key])
        if not live:
            assert wheel.next_due_us() is None and wheel.next_fire_us() is None
            return
        earliest = min(d for d, _ in live.values())
        assert wheel.next_due_us() <= earliest, "next_due_us later than the earliest timer"
        assert wheel.next_fire_us() <= fire_tick(earliest, self.tick) * self.tick, "would oversleep"
