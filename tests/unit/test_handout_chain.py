"""One worker group's chain of hand-out claims (gateway/rounds.py's
``_Chain``), on its own: the room its members' credit leaves, a full take
starting the next claim at once, at most two claims under way, none after a
failed one or after the round ended, and at most ``MAX_FULL_BATCHES`` per
round."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from tickwheel_server.gateway.rounds import MAX_BATCH, MAX_FULL_BATCHES, _Chain


@dataclass
class Member:
    """What the chain reads of a worker's stream."""

    credit: int
    closed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Started:
    want: int
    on_taken: Callable[[int], None]
    claiming: asyncio.Future

    def take(self, count: int | None = None) -> None:
        """The store took ``count`` rows (all it was asked for by default)."""
        self.on_taken(self.want if count is None else count)


class Claims:
    """The chain's claim function: records each claim; the test ends them."""

    def __init__(self) -> None:
        self.started: list[Started] = []

    def __call__(self, want: int, on_taken: Callable[[int], None]) -> asyncio.Future:
        claiming = asyncio.get_running_loop().create_future()
        self.started.append(Started(want, on_taken, claiming))
        return claiming

    @property
    def wants(self) -> list[int]:
        return [claim.want for claim in self.started]


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_room_is_the_open_members_credit_not_yet_claimed_at_most_a_batch() -> None:
    closed = Member(credit=10)
    closed.closed.set()
    chain = _Chain([Member(credit=3), Member(credit=4), closed], Claims())
    assert chain.room() == 7
    chain.start(5)
    assert chain.room() == 2 and chain.undealt == 5 and len(chain.pending) == 1
    assert _Chain([Member(credit=MAX_BATCH + 5)], Claims()).room() == MAX_BATCH


async def test_a_full_take_starts_the_next_claim_at_once_for_the_room_left() -> None:
    claims = Claims()
    chain = _Chain([Member(credit=10)], claims)
    chain.start(4)
    claims.started[0].take()
    await settle()
    assert claims.wants == [4, 6]  # the first is still under way
    claims.started[1].take()
    claims.started[0].claiming.set_result([])
    await settle()
    assert claims.wants == [4, 6]  # no credit left


async def test_a_take_short_of_its_want_starts_nothing() -> None:
    claims = Claims()
    chain = _Chain([Member(credit=10)], claims)
    chain.start(4)
    claims.started[0].take(3)
    claims.started[0].claiming.set_result([])
    await settle()
    assert claims.wants == [4]


async def test_at_most_two_claims_are_under_way() -> None:
    claims = Claims()
    chain = _Chain([Member(credit=3000)], claims)
    chain.start(10)
    claims.started[0].take()
    await settle()
    claims.started[1].take()
    await settle()
    assert claims.wants == [10, MAX_BATCH]  # a third waits for one of the two to end
    claims.started[0].claiming.set_result([])
    await settle()
    assert claims.wants == [10, MAX_BATCH, 3000 - 10 - MAX_BATCH]


async def test_a_failed_claim_starts_nothing_after_it() -> None:
    claims = Claims()
    chain = _Chain([Member(credit=3000)], claims)
    chain.start(10)
    claims.started[0].take()
    await settle()
    claims.started[1].take()  # full, but two are under way
    claims.started[1].claiming.set_exception(RuntimeError("the store failed"))
    await settle()
    assert len(claims.started) == 2
    claims.started[0].claiming.set_result([])
    await settle()
    assert len(claims.started) == 2


async def test_nothing_starts_after_the_round_ended() -> None:
    claims = Claims()
    chain = _Chain([Member(credit=100)], claims)
    chain.start(10)
    chain.closed = True
    claims.started[0].take()
    claims.started[0].claiming.set_result([])
    await settle()
    assert len(claims.started) == 1


async def test_a_round_starts_at_most_max_full_batches_claims() -> None:
    claims = Claims()
    chain = _Chain([Member(credit=10 * MAX_BATCH * MAX_FULL_BATCHES)], claims)
    chain.start(1)
    for _ in range(MAX_FULL_BATCHES + 5):
        newest = claims.started[-1]
        newest.take()
        await settle()
        if not newest.claiming.done():
            newest.claiming.set_result([])
        for claim in claims.started:
            if not claim.claiming.done():
                claim.claiming.set_result([])
        await settle()
    assert len(claims.started) == MAX_FULL_BATCHES
