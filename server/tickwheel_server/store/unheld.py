"""Running rows no worker holds, told apart in the store: a server started
them (armed rows, written ``running`` up to a second before their instant,
stamped with the worker they are dealt to) and died before it sent them
(docs/architecture.md, "Workers and failures", re-attachment and reaper).

- :func:`disown`, in the transaction of a worker's hello (:meth:`.requeue.
  RequeueStore.reattach`): the running rows of the hello's tenants stamped
  with its worker id under another session, handed out within ``since_us``,
  whose delivery the hello does not list, get ``unheld_delivery`` set to
  that delivery. The worker had them dealt to a stream it no longer has
  (it says hello only once that one ended, and a worker runs one stream at
  a time), so it never received them; a worker that received one lists it,
  re-attaches it and keeps it. A hello that may have been cut short (as
  many entries as a worker's hello may hold) disowns nothing.
- :func:`unheld_rows` and :meth:`.requeue.RequeueStore.release_unheld`, by the reaper as soon as a session is not alive
  (no grace): its running rows whose ``unheld_delivery`` is their delivery
  go back to ``scheduled``, the delivery taken back and their key slots
  given back, with no attempt (no worker saw them), as
  :meth:`.requeue.RequeueStore.release` does (one whose job is gone ends
  ``canceled`` instead, and is not returned to be woken: :class:`Released`);
  the rest of the session's
  rows wait the re-attach grace as before. A row of a live session is its
  server's: it sends it or gives it back itself.

The mark is set on a running row at its delivery only; every way back from
``running`` at the same delivery (:func:`.unsend.unsend`, a disarm, a start
in doubt undone) clears it, and every other hand-out counts a delivery more,
so a mark never names a later hand-out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import chunks, one_of
from .engine import Capabilities
from .executions import Retry
from .isolation import status_in
from .session_walk import running_rows
from .tables import executions


READ_BOUND = 20_000
"""Running rows a hello reads for its worker id: as many as a worker's
hello may list (``api.worker.MAX_IN_FLIGHT``, twice the most slots a worker
may have; a test holds them equal). What a worker was dealt and has not
ended is within its credit, what it still holds within its hello, so a
worker's own running rows are never more. More are only a credential's
many workers under one id: past the bound, the rows not read are not
marked and wait the re-attach grace, as every running row of a dead
session did before migration 0031."""

MARK_CHUNK = 500
"""Ids a marking statement binds on SQLite (an expanding ``IN``, within its
parameter limit); PostgreSQL and CockroachDB bind them as one array, one
statement for all."""


class Released(NamedTuple):
    """What one batch of :meth:`.requeue.RequeueStore.release_unheld` did."""

    back: list[Retry]
    """The rows put back to ``scheduled``, for the caller's wheel: only these are handed out again."""
    canceled: list[str]
    """The ids that ended ``canceled`` instead, their job gone (:func:`.unsend.unsend`): nothing to wake for."""
    picked: int
    """The rows the batch took (:func:`unheld_rows`): fewer than its limit, and it was the last."""


def disown(
    conn: Connection, caps: Capabilities, owner: str, worker_id: str, held: Sequence[tuple[str, int]], *,
    tenants: Sequence[str], since_us: int, may_serve: Callable[[str, str | None], bool] | None = None,
) -> list[tuple[str, int]]:
    """Inside a hello's transaction: mark the running rows of ``tenants``
    dealt to ``worker_id`` under a session other than ``owner`` (the hello's
    server's), handed out at or after ``since_us``, whose (id, delivery) is
    not in ``held``, as not held by that worker (see the module
    docstring); returns them. Only rows ``may_serve`` (tenant, handler)
    allows are marked: another credential of the tenant saying hello with
    this worker id disowns nothing it could not have been handed. Reads at
    most :data:`READ_BOUND` running rows of ``tenants`` stamped with
    ``worker_id``: each session's range of its tenants and worker id in
    ``executions_running (owner, tenant, worker_id)`` (migration 0040), the
    sessions walked a probe each (:func:`.session_walk.running_rows`),
    and filters them on session and hand-out instant only then, so rows of
    that worker id it does not mark count against the bound too and no
    statement reads more than it."""
    if not tenants or not worker_id:
        return []
    listed = set(held)
    dealt = running_rows(
        caps,
        [executions.c.id, executions.c.delivery, executions.c.owner, executions.c.handed_out_at,
         executions.c.tenant, executions.c.handler],
        one_of(caps, executions.c.tenant, sorted(set(tenants))), executions.c.worker_id == worker_id,
        limit=sa.literal_column(str(int(READ_BOUND))),  # a literal: a generic plan prices the read whole
    )
    found = conn.execute(
        sa.select(dealt.c.id, dealt.c.delivery, dealt.c.tenant, dealt.c.handler)
        .where(dealt.c.owner != owner, dealt.c.handed_out_at >= since_us)
    ).all()
    marked = sorted(
        (row.id, row.delivery) for row in found
        if (row.id, row.delivery) not in listed and (may_serve is None or may_serve(row.tenant, row.handler))
    )
    if not marked:
        return []
    # By id on the primary key, the read's own conditions stated again
    # rather than each row's delivery: (id, delivery) pairs as arrays were
    # planned generic as a nested loop rescanning them for every row
    # matched, and the ids on the worker's index (its ``worker_id =``) as a
    # filter searching the array for every row of the range; both quadratic
    # (loadtest/RESULTS.md, "A hello reads its worker's rows"). The status
    # and the worker id are compared through COALESCE, which no partial
    # index's predicate or key matches (a generic plan also ANDed every
    # running row of the session's index into the ids' bitmap), so the ids
    # on the primary key are the only path. A row handed out again since the read (READ
    # COMMITTED: another delivery) meets the conditions only if it was
    # dealt to this worker id by another session within the window while
    # this hello runs: the worker, in its hello, cannot have received it either.
    done: list[tuple[str, int]] = []
    for chunk in chunks(marked, MARK_CHUNK if caps.is_sqlite else READ_BOUND):
        done += [tuple(row) for row in conn.execute(
            executions.update()
            .where(
                one_of(caps, executions.c.id, [ident for ident, _ in chunk]),
                sa.func.coalesce(executions.c.status, "") == sa.literal_column("'running'"),
                sa.func.coalesce(executions.c.worker_id, "") == worker_id, executions.c.owner != owner,
                executions.c.handed_out_at >= since_us,
            )
            .values(unheld_delivery=executions.c.delivery)
            .returning(executions.c.id, executions.c.delivery)
        )]  # fmt: skip
    return sorted(done)


def unheld_rows(conn: Connection, caps: Capabilities, owner: str, limit: int) -> list:
    """Inside the reaper's transaction, ``owner`` known not alive: up to
    ``limit`` of its running rows that the worker they were dealt to said
    it does not hold (id, delivery, partition, ready_at), locked (rows
    another transaction holds are passed over), for
    :meth:`.requeue.RequeueStore.release_unheld` to give back. Reads the
    session's running rows (``executions_running``, led by the session) until it has ``limit``,
    in no order (the rows are locked SKIP LOCKED: no wait to order)."""
    picked = (
        sa.select(executions.c.id, executions.c.delivery, executions.c.partition, executions.c.ready_at)
        .where(
            executions.c.owner == owner, status_in(executions.c.status, "running"),
            executions.c.unheld_delivery == executions.c.delivery, executions.c.worker_id.is_not(None),
        )
        .limit(limit)
    )  # no ORDER BY: a generic plan walked the primary key in id order for it, past every other row
    if caps.skip_locked:
        picked = picked.with_for_update(skip_locked=True)
    return conn.execute(picked).all()
