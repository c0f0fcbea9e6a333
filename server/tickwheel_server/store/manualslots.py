"""Manual runs' units of the ``max_pending_manual_runs`` quota: given back
as they start or end, taken again as they return to the queue.

The quota counts a tenant's manual runs not started: those a trigger or
backfill created (:mod:`.manual`) that are ``scheduled`` or ``waiting``,
whether they never ran or are due to run again (a retry, a requeue after a
lost worker, a hand-out never sent, a replayed dead letter). Each such
execution names in ``executions.manual_slot`` the slot that counts it, for
its whole life: the column is written once, by the insert, and never
cleared, so starting a run writes its row once (the hand-out's take) and
nothing more. A run holds its slot's unit exactly while it is not started:

- every path that starts a manual run (the hand-out round keeping it
  ``running``) or ends one not started (a cancel, a job's delete or update,
  a calendar change, a skip or replace by the overlap policy) calls
  :func:`give_back` in its own transaction with the rows it moved;
- every path that puts a started one back in the queue (a retry scheduled,
  a requeue, a release of a hand-out never sent, a replay) calls
  :func:`take_back` with the rows it moved. A requeue is never refused:
  a run already accepted is never dropped, so its unit is taken even when
  its slot has no room left (the slot's allowance grows to cover it, see
  :func:`take_back`); triggers and backfills are then refused until the
  count is back under the limit.

So the sum of a tenant's ``manual_quota.used`` is the number of its rows
with ``manual_slot`` set that are ``scheduled`` or ``waiting``, which the
conformance suite checks after every path. A run waiting (behind its job or
a key, or held by a pause) has not started: it keeps its unit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import quota
from .tables import manual_quota

Held = Iterable[tuple[str, int | None]]
"""(tenant, ``manual_slot``) of executions a transaction moved; rows with no slot are passed over."""


def _per_slot(held: Held) -> dict[tuple[str, int], int]:
    """Units per (tenant, slot), in that order (the order a deal locks them in)."""
    counted: Counter[tuple[str, int]] = Counter((tenant, slot) for tenant, slot in held if slot is not None)
    return {pair: counted[pair] for pair in sorted(counted)}


def give_back(conn: Connection, held: Held) -> None:
    """Manual runs this transaction started or ended before they started:
    their units given back to their slots, one statement (a parameter set
    per slot touched) whatever the batch; the rows are not written."""
    quota.give_back_all(conn, _per_slot(held), rows=quota.MANUAL_RUNS)


# Never refused: the unit is taken from the slot's room, and where the slot
# has none its allowance grows to cover it (the allowances then add up to
# more than the limit by the runs requeued past it, until the next deal).
_TAKE_BACK = (
    manual_quota.update()
    .where(manual_quota.c.tenant == sa.bindparam("b_tenant"), manual_quota.c.slot == sa.bindparam("b_slot"))
    .values(
        used=manual_quota.c.used + sa.bindparam("b_count"),
        allowance=sa.case(
            (manual_quota.c.used + sa.bindparam("b_count") > manual_quota.c.allowance,
             manual_quota.c.used + sa.bindparam("b_count")),
            else_=manual_quota.c.allowance,
        ),
    )
)


def take_back(conn: Connection, held: Held) -> None:
    """Manual runs this transaction put back in the queue after they
    started (``scheduled`` again): each takes a unit of its slot again,
    even past the tenant's limit (a requeue is never refused: the run was
    accepted). One statement, a parameter set per slot touched, in (tenant,
    slot) order."""
    parameters = [
        dict(b_tenant=tenant, b_slot=slot, b_count=count) for (tenant, slot), count in _per_slot(held).items()
    ]
    if parameters:
        conn.execute(_TAKE_BACK, parameters)
