"""Manual runs' units of the ``max_pending_manual_runs`` quota given back as
they start or end.

A trigger or backfill takes one unit per execution it creates
(:mod:`.manual`) and names the slot in ``executions.manual_slot``. The
column is set exactly while the run holds its unit: every path that starts
a manual run (the hand-out round keeping it ``running``) or ends one not
started (a cancel, a job's delete or update, a calendar change, a skip or
replace by the overlap policy) calls :func:`give_back` in its own
transaction with the rows it moved, which clears the column and gives the
units back to their slots (:func:`.quota.give_back_all`). So the sum of a
tenant's ``manual_quota.used`` is the number of its rows with
``manual_slot`` set, which the conformance suite checks after every path.
A run waiting (behind its job or a key, or held by a pause) has not
started: it keeps its unit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from sqlalchemy.engine import Connection

from . import quota
from .base import chunks, one_of
from .engine import Capabilities
from .tables import executions

CHUNK = 1000


def give_back(conn: Connection, caps: Capabilities, held: Iterable[tuple[str, str, int | None]], *,
              deleted: bool = False) -> None:
    """``held``: (execution id, tenant, ``manual_slot``) of executions this
    transaction started or ended (rows with no slot are passed over). Their
    ``manual_slot`` is cleared (unless ``deleted``: the rows are gone) and
    their units given back, per tenant and slot in that order (the order
    a deal locks them in). Nothing is written when none held a unit."""
    counted: Counter[tuple[str, int]] = Counter()
    ids = []
    for ident, tenant, slot in held:
        if slot is None:
            continue
        ids.append(ident)
        counted[(tenant, slot)] += 1
    if not ids:
        return
    if not deleted:
        for chunk in chunks(sorted(ids), CHUNK):
            conn.execute(
                executions.update()
                .where(one_of(caps, executions.c.id, chunk), executions.c.manual_slot.is_not(None))
                .values(manual_slot=None)
            )
    quota.give_back_all(conn, {pair: counted[pair] for pair in sorted(counted)}, rows=quota.MANUAL_RUNS)

