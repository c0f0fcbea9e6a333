"""Arms and starts whose COMMIT went unanswered (:class:`.errors.AmbiguousCommitError`,
as when PostgreSQL stops during it), undone first thing in the arming
store's next transaction (docs/architecture.md, "Hand-outs decided ahead").

Such an arm or start may have committed, and its server holds what it did
nowhere (the store call raised): armed rows would stay armed under the live
session until it ends, started ones ``running`` and sent by no one until the
safety net's heartbeat timeout. Undone, each only if its owner's and as the
arm or start left it: rows the arm armed back to ``scheduled`` (the delivery
taken back), rows the start stamped with its instant (unique to it) back to
``armed``, which the server's armed queue still holds and starts again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import chunks
from .errors import AmbiguousCommitError
from .isolation import status_in
from .tables import executions

T = TypeVar("T")

LIMIT = 64
"""Arms and starts in doubt kept to undo; past it the oldest is left to the reaper and the safety net."""
_CHUNK = 500

Doubt = tuple[str, list[tuple[str, int]], int | None]
"""An arm (owner, its execution ids with delivery 0, None) or a start (owner,
(id, delivery) pairs, the instant it stamped)."""


def undo(conn: Connection, in_doubt: list[Doubt]) -> None:
    """Undo what the arms and starts in doubt did, if they committed."""
    for owner, items, at_us in in_doubt:
        for chunk in chunks(items, _CHUNK):
            if at_us is None:
                conn.execute(executions.update().where(
                    executions.c.id.in_([ident for ident, _ in chunk]), status_in(executions.c.status, "armed"),
                    executions.c.owner == owner,
                ).values(status="scheduled", owner=None, delivery=executions.c.delivery - 1))
            else:
                conn.execute(executions.update().where(
                    sa.tuple_(executions.c.id, executions.c.delivery).in_(chunk),
                    status_in(executions.c.status, "running"), executions.c.owner == owner,
                    executions.c.handed_out_at == at_us,
                ).values(status="armed", handed_out_at=None))


class InDoubt:
    """The arms and starts of one arming store still in doubt."""

    def __init__(self) -> None:
        self.entries: list[Doubt] = []

    async def run(self, tx: Callable[[Callable[[Connection], T]], Awaitable[T]], fn: Callable[[Connection], T],
                  doubt: Callable[[], Doubt | None]) -> T:
        """``fn`` in ``tx``, after undoing what is in doubt (no longer, once
        that commits); if its own COMMIT goes unanswered, ``doubt()`` says
        what it may have done, undone next time."""
        undoing = list(self.entries)

        def undo_then(conn: Connection) -> T:
            undo(conn, undoing)
            return fn(conn)

        try:
            result = await tx(undo_then)
        except AmbiguousCommitError:
            entry = doubt()
            if entry is not None:
                self.entries = (self.entries + [entry])[-LIMIT:]
            raise
        self.entries = [entry for entry in self.entries if not any(entry is done for done in undoing)]
        return result
