"""Runs held back while their calendar's change is walked: not handed out or armed before the walk decides them again.

A calendar change commits its definition at once and re-decides the created
runs of the jobs naming it a page of jobs at a time (:mod:`.calendarwalk`,
whose ``calendar_walks`` row says how far it got, in job id order). Until
the walk passes a job, that job's created runs (never handed out: attempt
1, delivery 0) carry the instants the old definition gave them.

- The hand-out (:func:`hold_unwalked`, after its take, where the
  candidates' job definitions are already read) asks which of its
  candidates' jobs the walk has not passed, in one statement comparing job
  ids in the database (so in the order the walk's pages follow, whatever
  the collation), and gives those runs back ``scheduled``, ready again
  :data:`HOLD_US` later: the walk decides them when it gets there.
- The arming (:class:`Unwalked`, in its ``accept``) arms no created run of
  a job naming a calendar being walked at all: arming is only a head start,
  and such a run is handed out by a round, which holds it or not as above.

A round none of whose candidates' jobs names a calendar sends no statement
for this; any other, one read (and one write if it holds some back).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import one_of
from .engine import Capabilities
from .isolation import status_in
from .tables import calendar_walks, executions, jobs

HOLD_US = 1_000_000
"""How far a held-back run's ready instant is pushed (µs): the next hand-out
of it, if the walk has not reached its job by then, holds it again."""


def _created_naming_calendar(definition, *, origin: str, attempt: int, delivery: int) -> str | None:
    """The calendar a created run's job names, if it is one a change re-decides
    (origin ``scheduled``, attempt 1, ``delivery`` 0 before this hand-out)."""
    calendar = getattr(definition, "calendar", None)
    if calendar is None or origin != "scheduled" or attempt != 1 or delivery != 0:
        return None
    return calendar.name


class Unwalked:
    """For the arming: whether a run's job names a calendar whose change is
    being walked. Reads the walks of a round's tenant once, at its first
    candidate whose job names a calendar."""

    def __init__(self, conn: Connection, caps: Capabilities) -> None:
        self._conn = conn
        self._caps = caps
        self._walking: dict[str, set[str]] = {}

    def holds(self, row, definition) -> bool:
        """Whether the ``scheduled`` ``row`` (read with its tenant, origin,
        attempt and delivery) is a created run of a job naming a calendar
        being walked."""
        name = _created_naming_calendar(definition, origin=row.origin, attempt=row.attempt, delivery=row.delivery)
        if name is None:
            return False
        if row.tenant not in self._walking:
            self._walking[row.tenant] = set(self._conn.execute(
                sa.select(calendar_walks.c.calendar).where(calendar_walks.c.tenant == row.tenant)
            ).scalars())  # fmt: skip
        return name in self._walking[row.tenant]


def hold_back(conn: Connection, caps: Capabilities, ids: list[str], at_us: int) -> None:
    """Give back runs a round took (``running`` under it, never sent) that
    a walk has not reached: ``scheduled`` again, their delivery taken
    back, ready no sooner than :data:`HOLD_US` after ``at_us``."""
    if not ids:
        return
    later = at_us + HOLD_US
    conn.execute(
        executions.update()
        .where(one_of(caps, executions.c.id, sorted(ids)), status_in(executions.c.status, "running"))
        .values(status="scheduled", owner=None, delivery=executions.c.delivery - 1, handed_out_at=None,
                ready_at=sa.case((executions.c.ready_at < later, later), else_=executions.c.ready_at))
    )  # fmt: skip


def hold_unwalked(conn: Connection, caps: Capabilities, rows: list, definition_of: Callable[[str], object],
                  at_us: int) -> set[str]:
    """Of the rows a hand-out round took (``delivery`` already counting
    it), give back those whose job's calendar is being walked and the walk
    has not passed the job (:func:`hold_back`), and return their ids."""
    named = [r for r in rows if _created_naming_calendar(definition_of(r.job_id), origin=r.origin,
                                                         attempt=r.attempt, delivery=r.delivery - 1)]  # fmt: skip
    if not named:
        return set()
    walked_to = sa.and_(calendar_walks.c.tenant == jobs.c.tenant, calendar_walks.c.calendar == jobs.c.calendar)
    behind = set(conn.execute(
        sa.select(jobs.c.id).select_from(jobs.join(calendar_walks, walked_to))
        .where(one_of(caps, jobs.c.id, sorted({r.job_id for r in named})), jobs.c.id > calendar_walks.c.after_job)
    ).scalars())  # fmt: skip
    held = [r.id for r in named if r.job_id in behind]
    hold_back(conn, caps, held, at_us)
    return set(held)
