"""Arms, starts and hand-outs whose COMMIT went unanswered
(:class:`.errors.AmbiguousCommitError`, as when PostgreSQL stops during it),
undone, in a transaction of its own, before the next transaction of the store
that made them
(docs/architecture.md, "Hand-outs decided ahead" and "Hand-outs in doubt").

Such a write may have committed, and its server holds what it did nowhere
(the store call raised): armed rows would stay armed under the live
session until it ends, started or handed-out ones ``running`` and sent by
no one until the safety net's heartbeat timeout. Undone, each only if its
owner's and as the write left it:

- an arm (:data:`ARM`): the rows it armed back to ``scheduled`` (the
  delivery taken back);
- a start (:data:`START`): the rows stamped with its instant (unique to
  it) back to ``armed``, which the server's armed queue still holds and
  starts again;
- a hand-out (:data:`HAND_OUT`: a round's, or what a claim inserted handed
  out): the rows still ``running`` at the delivery it gave them, under its
  owner, stamped with its instant, back to ``scheduled`` with the delivery
  taken back and their key slots given back
  (:func:`.unsend.release_unsent`), as for a hand-out whose stream closed
  (one whose job was deleted meanwhile ends canceled instead).

The undo is a transaction of its own, committed before the store's next
one begins, and takes its locks in the order every writer keeps
(:mod:`.isolation`): every row of every entry first, then the key rows of
the slots given back (one pass, in key order), then the waiters woken. Run
inside the next transaction instead, it held key rows when a hand-out
round then wrote its tenants' ``tenant_gates`` rows, which another
server's round takes before the same keys: the two deadlocked (SQLSTATE
40P01), and one was retried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple, TypeVar

from sqlalchemy.engine import Connection

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from .base import chunks, one_of, pairs_in
from .engine import capabilities
from .errors import AmbiguousCommitError
from .executions import HandedOut
from .isolation import release_slots, status_by_key
from .unsend import unsend
from .tables import executions

T = TypeVar("T")

LIMIT = 64
"""Writes in doubt kept to undo; past it the oldest is left to the reaper and the safety net."""
_CHUNK = 500

ARM, START, HAND_OUT = "arm", "start", "hand-out"


class Doubt(NamedTuple):
    """A write whose COMMIT went unanswered: what it may have done."""

    kind: str
    """:data:`ARM`, :data:`START` or :data:`HAND_OUT`."""
    owner: str
    items: list[tuple[str, int]]
    """(execution id, delivery): an arm's with delivery 0 (the delivery is
    not known before it), a start's and a hand-out's as it gave them."""
    at_us: int = 0
    """The instant a start or a hand-out stamped (unique among its server's)."""


def undo(conn: Connection, in_doubt: list[Doubt], now_us: int) -> None:
    """Undo what the writes in doubt did, if they committed: the rows of
    every entry, then the key slots of the hand-outs given back in one pass
    (executions before keys: the lock order). A hand-out's row whose job is
    gone ends canceled at ``now_us`` instead (:func:`.unsend.unsend`)."""
    caps = capabilities(conn)
    held: list[tuple[str, str | None]] = []
    for entry in in_doubt:
        for chunk in chunks(entry.items, _CHUNK):
            if entry.kind == HAND_OUT:
                held += unsend(conn, caps, chunk, now_us=now_us, owner=entry.owner, at_us=entry.at_us).slots
            elif entry.kind == ARM:
                conn.execute(executions.update().where(
                    one_of(caps, executions.c.id, [ident for ident, _ in chunk]),
                    status_by_key(executions.c.status, "armed"),
                    executions.c.owner == entry.owner,
                ).values(status="scheduled", owner=None, delivery=executions.c.delivery - 1))
            else:
                conn.execute(executions.update().where(
                    pairs_in(caps, (executions.c.id, executions.c.delivery), chunk, ("TEXT", "INTEGER")),
                    status_by_key(executions.c.status, "running"), executions.c.owner == entry.owner,
                    executions.c.handed_out_at == entry.at_us,
                ).values(status="armed", handed_out_at=None, worker_id=None, unheld_delivery=None))
    release_slots(conn, caps, held)


def handed_out(owner: str, handed: list[HandedOut]) -> Doubt | None:
    """What a hand-out of ``handed`` under ``owner`` (one instant) may have done."""
    return Doubt(HAND_OUT, owner, [(h.id, h.delivery) for h in handed], handed[0].handed_out_at_us) if handed else None


class InDoubt:
    """The writes of one store still in doubt, undone in a transaction of
    their own (through ``tx``, a function of the transaction function)
    before the next transaction that passes through :meth:`run`."""

    def __init__(self, tx: Callable[[Callable[[Connection], T]], Awaitable[T]], clock: Clock) -> None:
        self._tx = tx
        self._clock = clock
        self.entries: list[Doubt] = []

    def add(self, entry: Doubt | None) -> None:
        """Keep ``entry`` (None: nothing to undo) to undo, the newest :data:`LIMIT` at most."""
        if entry is not None and entry.items:
            self.entries = (self.entries + [entry])[-LIMIT:]

    async def run(self, fn: Callable[[Connection], T], doubt: Callable[[], Doubt | None]) -> T:
        """``fn`` in a transaction, once what is in doubt is undone
        (:meth:`settle`; if that fails, ``fn`` does not run); if its own
        COMMIT goes unanswered, ``doubt()`` says what it may have done,
        undone next time."""
        await self.settle()
        try:
            return await self._tx(fn)
        except AmbiguousCommitError:
            self.add(doubt())
            raise

    async def settle(self) -> None:
        """Undo what is in doubt now, in a transaction of its own (none when
        nothing is); no longer in doubt once that commits. A COMMIT of the
        undo that goes unanswered leaves it in doubt: undoing again changes
        only what is still as the write left it."""
        undoing = list(self.entries)
        if not undoing:
            return
        now_us = to_us(self._clock.now())
        await self._tx(lambda conn: undo(conn, undoing, now_us))
        self.entries = [entry for entry in self.entries if not any(entry is done for done in undoing)]
