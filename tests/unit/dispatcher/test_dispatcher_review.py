"""The dispatcher's tick: it claims what is due now before the look-ahead,
reviews the jobs left out of claims now and then, and a failed review does
not fail the tick."""

from __future__ import annotations

from datetime import timedelta

from tickwheel.shared.clock import FakeClock
from tickwheel_server.dispatcher.dispatcher import Dispatcher
from tickwheel_server.store.dispatch import ClaimResult


class Store:
    def __init__(self) -> None:
        self.reviews: list[set[int]] = []
        self.fail = False

    async def claim_due(self, owned, now, **_options) -> ClaimResult:
        return ClaimResult()

    async def scheduled_in(self, partitions, until):
        return []

    async def review_quarantine(self, owned) -> list[str]:
        self.reviews.append(set(owned))
        if self.fail:
            raise RuntimeError("store down")
        return []


class Ownership:
    generation = 1

    def owned(self) -> dict[int, int]:
        return {3: 7, 5: 7}

    async def wait_changed(self, after: int) -> int:  # pragma: no cover - tick_once does not wait
        return self.generation


class Runner:
    def insert(self, *_args) -> None:  # pragma: no cover - nothing is claimed here
        pass

    def drop(self, _predicate) -> None:  # pragma: no cover
        pass


async def test_the_review_runs_at_the_first_tick_then_every_review_period() -> None:
    clock, store = FakeClock(), Store()
    dispatcher = Dispatcher(store, Ownership(), Runner(), clock, review_every=30.0)
    await dispatcher.tick_once()
    clock.advance(29)
    await dispatcher.tick_once()
    assert store.reviews == [{3, 5}]
    clock.advance(1)
    store.fail = True
    assert await dispatcher.tick_once() == 0, "a failed review is logged, the tick goes on"
    assert len(store.reviews) == 2


class Backlog(Store):
    """Three full batches of overdue jobs, then one full batch ahead."""

    def __init__(self) -> None:
        super().__init__()
        self.lookaheads: list[float] = []
        self.overdue, self.ahead = 3, 1

    async def claim_due(self, owned, now, *, lookahead, batch) -> ClaimResult:
        self.lookaheads.append(lookahead.total_seconds())
        if lookahead.total_seconds() == 0 and self.overdue:
            self.overdue -= 1
            return ClaimResult(full=True)
        if lookahead.total_seconds() > 0 and self.ahead:
            self.ahead -= 1
            return ClaimResult(full=True)
        return ClaimResult()


async def test_a_tick_claims_what_is_due_now_in_every_partition_before_the_look_ahead() -> None:
    """A batch scans partition by partition: claimed in one pass, a low
    partition's next minute would come before a high partition's overdue
    jobs when the claim falls behind."""
    store = Backlog()
    dispatcher = Dispatcher(store, Ownership(), Runner(), FakeClock(), lookahead=timedelta(seconds=60))
    await dispatcher.tick_once()
    assert store.lookaheads == [0, 0, 0, 0, 60, 60]
