"""A store outage does not make the dispatcher back off: it claims every
tick while the store refuses, so what fell due during the outage is claimed
by the first tick after the store answers again, at most one tick after
(the mechanism behind "late, not lost", and what bounds that lateness)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.dispatcher.dispatcher import Dispatcher
from tickwheel_server.store.dispatch import ClaimedExecution, ClaimResult
from tickwheel_server.store.errors import StoreUnavailableError
from tests.unit.dispatcher.test_dispatcher_wake import Ownership, Runner, settle

TICK = 1.0
STEP = 0.05


class Store:
    """Rows due at given instants; refuses every claim while ``down``."""

    def __init__(self) -> None:
        self.down = False
        self.refused = 0
        self.rows: dict[str, int] = {}
        self.claimed: list[tuple[str, float]] = []
        """(id, the fake monotonic instant of the claim that took it)."""
        self.clock: FakeClock | None = None

    async def claim_due(self, owned, now, *, lookahead, batch, **_options) -> ClaimResult:
        if self.down:
            self.refused += 1
            raise StoreUnavailableError("store refusing writes (read-only) after 10 attempts: InternalError",
                                        attempts=10, sqlstate="25006")
        due = sorted((at, key) for key, at in self.rows.items() if at <= to_us(now + lookahead))
        for _at, key in due:
            del self.rows[key]
            self.claimed.append((key, self.clock.monotonic()))
        return ClaimResult(executions=[ClaimedExecution(key, 3, at) for at, key in due])

    async def scheduled_in(self, partitions, until):
        return []

    async def review_quarantine(self, owned) -> list[str]:
        return []


async def run_for(clock: FakeClock, seconds: float) -> None:
    for _ in range(round(seconds / STEP)):
        clock.advance(STEP)
        await settle()


async def test_what_fell_due_in_an_outage_is_claimed_within_a_tick_of_its_end() -> None:
    clock, store = FakeClock(), Store()
    store.clock = clock
    dispatcher = Dispatcher(store, Ownership(), Runner(), clock, tick=TICK, lookahead=timedelta(0))
    task = asyncio.create_task(dispatcher.run())
    try:
        await settle()
        store.down = True
        store.rows["due-in-outage"] = to_us(clock.now()) + 2_000_000
        outage = 120.0  # two minutes refused: long enough for any backoff to have grown
        await run_for(clock, outage)
        # A claim a tick (a step of the fake clock each), however long it lasted: no backoff to sleep out.
        assert store.refused >= outage / (TICK + STEP) - 1, store.refused
        assert "due-in-outage" in store.rows
        store.down = False
        ended = clock.monotonic()
        await run_for(clock, TICK + STEP)
        assert [key for key, _at in store.claimed] == ["due-in-outage"]
        assert store.claimed[0][1] - ended <= TICK + STEP
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
