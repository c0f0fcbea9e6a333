"""Ready wakes (a trigger, backfill or resume made executions ready now,
here or on another server) and the gateway's hand-out loop, on a
FakeClock: a lone one starts a round at once; a flood of them starts at
most one round per ready gap, however many arrive, and the last is never
lost: a wake that arrives during a round brings a round that begins after
it, without waiting for the sweep. Other wakes (results, credit, the
wheel) are not held back by the gap. Nothing here measures time: the
clock only moves when the test moves it."""

from __future__ import annotations

import asyncio

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.gateway.connections import Connections
from tickwheel_server.gateway.gateway import Gateway
from tickwheel_server.store import create_store_engine
from tickwheel_server.store.queue import ExecutionQueue

SWEEP = 3600.0
"""The sweep, an hour: only a wake runs a round here."""
GAP = 0.05


class Rounds:
    """Stands in for the rounds' store work: counts each round, notes the
    ready wakes seen before it began, and can hold a round until released."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.begun: list[int] = []
        """Per round, how many ready wakes had arrived when it began."""
        self.hold: asyncio.Event | None = None

    async def __call__(self) -> int:
        self.begun.append(self.gateway.ready_wakes)
        if self.hold is not None:
            await self.hold.wait()
        return 0


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


@pytest.fixture
async def running(tmp_path):
    clock = FakeClock()
    engine = create_store_engine(f"sqlite:///{tmp_path / 'unused.db'}")  # never reached: the rounds are stood in for
    gateway = Gateway(ExecutionQueue(engine, clock), Connections(), clock, owner="s1", sweep_interval=SWEEP,
                      ready_gap=GAP)
    rounds = Rounds(gateway)
    gateway.rounds.hand_out_round = rounds
    task = asyncio.create_task(gateway._hand_out_forever())
    await settle()
    assert len(rounds.begun) == 1, "the first round runs at start"
    try:
        yield clock, gateway, rounds
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        engine.dispose()


async def test_a_lone_ready_wake_starts_a_round_at_once(running) -> None:
    clock, gateway, rounds = running
    gateway.wake_ready()
    await settle()
    assert rounds.begun == [0, 1] and gateway.woken_rounds == 1
    clock.advance(10)  # long after: the next lone wake starts its round at once too
    await settle()
    gateway.wake_ready()
    await settle()
    assert rounds.begun == [0, 1, 2] and gateway.woken_rounds == 2


async def test_a_burst_of_ready_wakes_starts_one_round_after_the_gap_not_one_each(running) -> None:
    clock, gateway, rounds = running
    gateway.wake_ready()
    await settle()
    assert len(rounds.begun) == 2
    for _ in range(500):  # a flood, all within the gap of the round the first began
        gateway.wake_ready()
        await asyncio.sleep(0)
    await settle()
    assert len(rounds.begun) == 2, "held back until the gap has passed"
    clock.advance(GAP)
    await settle()
    assert rounds.begun == [0, 1, 501], "one round, begun after the last wake"
    clock.advance(SWEEP / 2)
    await settle()
    assert len(rounds.begun) == 3 and gateway.woken_rounds == 2


async def test_a_ready_wake_during_a_round_brings_a_round_after_it(running) -> None:
    """The round under way may have read before the trigger committed: the
    wake that arrived during it starts another once it ends (here the gap
    has passed by then), without the sweep."""
    clock, gateway, rounds = running
    rounds.hold = asyncio.Event()
    gateway.wake_ready()
    await settle()
    assert len(rounds.begun) == 2  # the woken round, under way
    clock.advance(GAP * 2)
    for _ in range(50):
        gateway.wake_ready()
    rounds.hold.set()
    await settle()
    assert rounds.begun == [0, 1, 51]


async def test_a_steady_flood_starts_at_most_one_round_per_gap_and_answers_the_last(running) -> None:
    clock, gateway, rounds = running
    wakes = 0
    for _ in range(1000):  # one every millisecond for a second
        gateway.wake_ready()
        wakes += 1
        await settle()
        clock.advance(0.001)
    await settle()
    woken = gateway.woken_rounds
    assert woken <= 1.0 / GAP + 1, f"{woken} rounds for {wakes} ready wakes"
    assert woken >= 1.0 / GAP / 2, "the flood's work still goes out, round after round"
    clock.advance(GAP)
    await settle()
    assert rounds.begun[-1] == wakes, "a round began after the last wake"
    assert len(rounds.begun) <= 1.0 / GAP + 3


async def test_other_wakes_are_not_held_back_and_answer_a_ready_wake_pending(running) -> None:
    """A worker's credit or a result (``wake``) runs a round at once even
    within a ready wake's gap; that round began after the pending ready
    wake, so it answers it: no round more at the end of the gap."""
    clock, gateway, rounds = running
    gateway.wake_ready()
    await settle()
    gateway.wake_ready()  # within the gap: pending
    await settle()
    assert len(rounds.begun) == 2
    gateway.wake()
    await settle()
    assert rounds.begun == [0, 1, 2]
    clock.advance(GAP)
    await settle()
    assert len(rounds.begun) == 3 and gateway.woken_rounds == 1


async def test_the_sweep_still_runs_and_a_ready_gap_below_zero_is_refused(running, tmp_path) -> None:
    clock, _gateway, rounds = running
    clock.advance(SWEEP)
    await settle()
    assert len(rounds.begun) == 2
    engine = create_store_engine(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        with pytest.raises(ValueError):
            Gateway(ExecutionQueue(engine, clock), Connections(), clock, owner="s1", ready_gap=-1)
    finally:
        engine.dispose()
