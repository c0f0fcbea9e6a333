"""Credit lent to the dispatcher's claim, and the deal of what the claim
handed out with it (see :mod:`tickwheel_server.store.claim_handout`).

Before a claim of what is due now, the dispatcher borrows the credit of
this server's workers (:meth:`ClaimLending.lend`), per group of what they
may run, at most ``limit`` a group. The credit is taken off the
connections while the claim runs, so the rounds do not count it meanwhile
(as a round's own claims under way are not counted twice). Nothing is lent
while the fence refuses, nor while the rounds may have left ready work
behind (:attr:`.rounds.Rounds.ready_left`): rows already waiting, shared by
the round's fair share, go first.

Once the claim has committed, what it did not hand out is given back at once
(:meth:`ClaimLending.keep`: the next claim may borrow it). Then
(:meth:`ClaimLending.settle`, which the dispatcher runs beside its next
claim) each group's credit is given back and what the claim handed out for
it dealt to its workers, as a round
deals what it claimed: the fence is asked first (a refusal gives every
row back, none reaches a worker), and what finds no credit (a stream closed
meanwhile) is given back and handed out again by a round. A round that
began while the credit was out is followed by another at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..store.claim_handout import HandOutOffer
from ..store.executions import HandedOut
from ..store.queue import ExecutionQueue
from .connections import WorkerConnection
from .fence import Fence, Lease
from .rounds import Rounds

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Loan:
    """Credit lent to one claim: the offer it is made with and, per group of
    the offer, the members and what was taken from each."""

    offer: HandOutOffer
    lease: Lease
    groups: list[tuple[list[WorkerConnection], dict[WorkerConnection, int]]]
    rounds_started: int
    """:attr:`.rounds.Rounds.started` when lent, less the rounds then under
    way (:attr:`.rounds.Rounds.running`): a round that began before the loan
    may read the credit during it, find it lent and skip its workers, so
    it counts as one begun while the credit was lent."""


def _give_back(taken: dict[WorkerConnection, int]) -> None:
    for connection, credit in taken.items():
        connection.credit += credit


class ClaimLending:
    """Lends the workers' credit to the dispatcher's claim and deals what it
    handed out (see the module). ``wake`` runs a round at once."""

    def __init__(self, rounds: Rounds, fence: Fence, queue: ExecutionQueue, *, wake: Callable[[], None]) -> None:
        self._rounds = rounds
        self._fence = fence
        self._release = queue.requeues.release
        self._fair = queue.handout.fair
        self._unique_instant = queue.handout.unique_instant
        self._in_doubt = queue.handout.in_doubt
        self._wake = wake

    def lend(self, limit: int) -> Loan | None:
        """Take up to ``limit`` credit per group of workers for one claim;
        None when nothing may be lent (no credit, the fence refuses, the
        rounds may have left ready work). Every loan must be settled."""
        lease = self._fence.lease
        if limit <= 0 or self._rounds.ready_left or self._fence.refusal(lease) is not None:
            return None
        groups: list[tuple[list[WorkerConnection], dict[WorkerConnection, int]]] = []
        offered = []
        for capability, members in self._rounds.groups().items():
            taken: dict[WorkerConnection, int] = {}
            want = limit
            for connection in members:
                credit = min(connection.credit, want)
                if credit > 0:
                    connection.credit -= credit
                    taken[connection] = credit
                    want -= credit
                if want == 0:
                    break
            if taken:
                groups.append((members, taken))
                offered.append((capability, limit - want))
        if not groups:
            return None
        fence = self._fence
        offer = HandOutOffer(
            lease.owner, tuple(offered), self._fair, lambda: fence.refusal(lease), self._unique_instant,
            self._in_doubt,
        )
        return Loan(offer, lease, groups, self._rounds.started - self._rounds.running)

    def keep(self, loan: Loan, handed: list[list[HandedOut]]) -> None:
        """Give back now the credit of ``loan`` that ``handed`` (what its
        claim handed out, per group) will not spend: each group keeps as
        much as its claim handed out, until :meth:`settle` deals it. The
        next claim may borrow the rest while this one's deal waits."""
        for index, (_members, taken) in enumerate(loan.groups):
            surplus = sum(taken.values()) - (len(handed[index]) if index < len(handed) else 0)
            for connection in list(taken):
                if surplus <= 0:
                    break
                back = min(taken[connection], surplus)
                connection.credit += back
                surplus -= back
                if back == taken[connection]:
                    del taken[connection]
                else:
                    taken[connection] -= back

    async def settle(self, loan: Loan, handed: list[list[HandedOut]]) -> int:
        """Give ``loan``'s credit back and deal ``handed`` (per group of its
        offer: what the claim inserted handed out; empty when the claim
        failed or handed nothing out). How many reached a worker.

        A round that began while the credit was lent, or was under way when
        it was lent, found less of it than there is: the next round runs at
        once, so ready work does not wait for the next sweep."""
        if self._rounds.started != loan.rounds_started:
            self._wake()
        if not any(handed):
            for _, taken in loan.groups:
                _give_back(taken)
            return 0
        refused = self._fence.refusal(loan.lease)
        if refused is not None:
            for _, taken in loan.groups:
                _give_back(taken)
            self._fence.note_refusal(refused)
            await self._release([(item.id, item.delivery) for group in handed for item in group])
            self._wake()
            return 0
        sent = 0
        for (members, taken), group in zip(loan.groups, handed):
            # Given back just before its deal spends it (no await between the two).
            _give_back(taken)
            if group:
                sent += await self._rounds.deal(group, members)
        return sent
