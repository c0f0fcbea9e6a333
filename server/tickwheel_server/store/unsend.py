"""Hand-outs no worker ever saw, put back: their executions ``scheduled``
again with the delivery taken back (a stream closed before sending them,
a hand-out whose COMMIT went unanswered, rows a worker saying hello again
does not hold), or ``canceled`` when their job is gone; and the by-id
conditions every write to a running row shares with :mod:`.requeue`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import manualslots
from .base import driver_sql, execute_arrays, one_of
from .engine import Capabilities
from .isolation import release_slots, status_by_key, status_in
from .tables import executions, jobs
from .timeline import DELETED_REASON

JOB_EXISTS = sa.exists().where(jobs.c.id == executions.c.job_id).label("job_exists")
"""Whether the row's job still exists (a column of the read that locks the rows: no statement of its own)."""


def running_by_id(caps: Capabilities, ids: Sequence[str]):
    """The rows of ``ids`` that are ``running``, found by id on the primary
    key alone: the status compared through COALESCE, which no partial
    index's predicate matches. Stated plainly, a generic plan read every
    running row on ``executions_running_worker`` and searched the ids'
    array for each (rows times ids; loadtest/RESULTS.md, "Statements over
    arrays: no quadratic plan")."""
    return sa.and_(one_of(caps, executions.c.id, ids), status_by_key(executions.c.status, "running"))


def running_at_delivery():
    """An update of the rows still ``running`` at (``b_id``, ``b_delivery``), one per parameter set."""
    return executions.update().where(
        executions.c.id == sa.bindparam("b_id"), executions.c.delivery == sa.bindparam("b_delivery"),
        status_in(executions.c.status, "running"),
    )


# A give-back and a re-attachment write the same values to every row: by id
# on the primary key alone, no array joined. Each row's delivery, tenant and
# worker were checked by the read that locked it (FOR UPDATE) in the same
# transaction; the status is stated again, through COALESCE, which no
# partial index's predicate matches. Joined to the (id, delivery) arrays, a
# generic plan read the ids (or every running row, on
# ``executions_running_worker``) and rescanned the arrays for each row: a
# nested loop, quadratic in the batch (loadtest/RESULTS.md, "Statements over
# arrays: no quadratic plan").
RUNNING_BY_ID = "WHERE executions.id = ANY (CAST(:ids AS TEXT[])) AND COALESCE(executions.status, '') = 'running'"
_UNSEND_BY_ID = driver_sql(
    "UPDATE executions SET status = 'scheduled', owner = NULL, worker_id = NULL, handed_out_at = NULL, "
    f"held_keys = NULL, unheld_delivery = NULL, delivery = executions.delivery - 1 {RUNNING_BY_ID}"
)
_UNSEND_GONE_BY_ID = driver_sql(
    "UPDATE executions SET status = 'canceled', finished_at = CAST(:at AS BIGINT), dead_reason = CAST(:reason AS TEXT), "
    "owner = NULL, worker_id = NULL, handed_out_at = NULL, held_keys = NULL, unheld_delivery = NULL, "
    f"delivery = executions.delivery - 1 {RUNNING_BY_ID}"
)


class Unsent(NamedTuple):
    """What :func:`unsend` ended."""

    slots: list[tuple[str, str | None]]
    """(tenant, ``held_keys``) of every row it ended, for :func:`.isolation.release_slots`."""
    back: frozenset[str]
    """The ids put back to ``scheduled``: to be handed out again."""
    canceled: frozenset[str]
    """The ids that ended ``canceled``, their job gone."""


def release_unsent(
    conn: Connection, caps: Capabilities, handed: Sequence[tuple[str, int]], *, now_us: int,
    owner: str | None = None, at_us: int | None = None,
) -> None:
    """Inside the caller's transaction: ``handed`` (execution id, delivery) still ``running``
    at that delivery (and, if given, under ``owner`` with hand-out instant ``at_us``) back to
    ``scheduled``, the delivery and their key slots given back: no worker ever saw them.
    One whose job is gone ends ``canceled`` at ``now_us`` instead (:func:`unsend`)."""
    release_slots(conn, caps, unsend(conn, caps, handed, now_us=now_us, owner=owner, at_us=at_us).slots)


def unsend(
    conn: Connection, caps: Capabilities, handed: Sequence[tuple[str, int]], *, now_us: int,
    owner: str | None = None, at_us: int | None = None,
) -> Unsent:
    """The executions' part of :func:`release_unsent`: the rows back to ``scheduled``,
    returning the (tenant, ``held_keys``) whose slots the caller gives back
    (:func:`.isolation.release_slots`) once every row of its transaction is locked
    (executions before keys: the lock order), and the ids put back. Manual runs take
    their quota units back.

    A row whose job was deleted (DeleteJob let it run: it was ``running``) is not put
    back but ends ``canceled`` (:data:`.timeline.DELETED_REASON`) at ``now_us``, its
    delivery given back too; the same read that locks the rows says whether each job
    exists. A DeleteJob committing after that read (PostgreSQL, READ COMMITTED) leaves
    the row ``scheduled`` with its job gone, and the next hand-out cancels it
    (:mod:`.handout`): either way it ends canceled, once, and is never sent."""
    wanted = dict(handed)
    query = sa.select(
        executions.c.id, executions.c.tenant, executions.c.delivery, executions.c.held_keys, executions.c.manual_slot,
        JOB_EXISTS,
    ).where(running_by_id(caps, sorted(wanted)))
    if owner is not None:
        query = query.where(executions.c.owner == owner)
    if at_us is not None:
        query = query.where(executions.c.handed_out_at == at_us)
    if caps.row_locks:
        query = query.with_for_update()
    rows = [row for row in conn.execute(query) if wanted[row.id] == row.delivery]
    back = [row for row in rows if row.job_exists]
    gone = [row for row in rows if not row.job_exists]
    given_back = dict(owner=None, worker_id=None, handed_out_at=None, held_keys=None, unheld_delivery=None,
                      delivery=executions.c.delivery - 1)
    if caps.is_sqlite:  # no arrays, no network: one statement per row
        for kept, ends in ((back, dict(status="scheduled")),
                           (gone, dict(status="canceled", finished_at=now_us, dead_reason=DELETED_REASON))):
            if kept:
                conn.execute(running_at_delivery().values(**ends, **given_back),
                             [dict(b_id=row.id, b_delivery=row.delivery) for row in kept])
    else:
        if back:
            execute_arrays(conn, _UNSEND_BY_ID, {"ids": [row.id for row in back]})
        if gone:
            execute_arrays(conn, _UNSEND_GONE_BY_ID, {"ids": [row.id for row in gone], "at": now_us,
                                                      "reason": DELETED_REASON})
    manualslots.take_back(conn, [(row.tenant, row.manual_slot) for row in back])  # waiting to start again
    return Unsent([(row.tenant, row.held_keys) for row in rows], frozenset(row.id for row in back),
                  frozenset(row.id for row in gone))
