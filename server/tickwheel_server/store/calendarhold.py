"""Runs held back while their calendar's change is walked: not handed out or armed before the walk decides them again.

A calendar change commits its definition at once and re-decides the created
runs of the jobs naming it a page of jobs at a time (:mod:`.calendarwalk`,
whose ``calendar_walks`` row says how far it got, in job id order). Until
the walk passes a job, that job's created runs (never handed out: attempt
1, delivery 0) carry the instants the old definition gave them. The
hand-out (:func:`hold_unwalked`, after its take, where the candidates' job
definitions are already read) and the arming (:class:`Unwalked`, in its
``accept``) leave such runs alone: the hand-out gives them back
``scheduled``, ready again :data:`HOLD_US` later, and the walk decides them
when it gets there. A round none of whose candidates' jobs names a calendar
sends no statement for this; others read the walks of their tenants once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import one_of
from .engine import Capabilities
from .isolation import status_in
from .tables import calendar_walks, executions

HOLD_US = 1_000_000
"""How far a held-back run's ready instant is pushed (µs): the next hand-out
of it, if the walk has not reached its job by then, holds it again."""


class Unwalked:
    """Which runs a round must not hand out or arm yet: those of jobs a
    calendar's walk has not passed. Reads the walks of a round's tenants
    once, at its first candidate whose job names a calendar."""

    def __init__(self, conn: Connection, caps: Capabilities) -> None:
        self._conn = conn
        self._caps = caps
        self._after: dict[tuple[str, str], str] | None = None

    def load(self, tenants: Iterable[str]) -> None:
        """Read the walks of ``tenants`` (one statement) before asking :meth:`held`."""
        wanted = sorted(set(tenants))
        self._after = {} if not wanted else {
            (r.tenant, r.calendar): r.after_job for r in self._conn.execute(
                sa.select(calendar_walks.c.tenant, calendar_walks.c.calendar, calendar_walks.c.after_job)
                .where(one_of(self._caps, calendar_walks.c.tenant, wanted)))
        }  # fmt: skip

    def holds(self, row, definition) -> bool:
        """:meth:`held` for a ``scheduled`` row read with its tenant, job, origin, attempt and delivery."""
        return self.held(row.tenant, row.job_id, definition, origin=row.origin, attempt=row.attempt,
                         delivery=row.delivery)

    def held(self, tenant: str, job_id: str, definition, *, origin: str, attempt: int, delivery: int) -> bool:
        """Whether the run (before its hand-out: ``delivery`` its number
        then) is a created one of a job naming a calendar whose walk has not
        reached it. Reads the walks of ``tenant`` alone if :meth:`load` was not called."""
        calendar = getattr(definition, "calendar", None)
        if calendar is None or origin != "scheduled" or attempt != 1 or delivery != 0:
            return False
        if self._after is None:
            self.load([tenant])
        after = self._after.get((tenant, calendar.name))
        return after is not None and job_id > after


def hold_back(conn: Connection, caps: Capabilities, ids: list[str], at_us: int) -> None:
    """Give back runs a round took (``running`` under it, never sent) that
    :class:`Unwalked` holds: ``scheduled`` again, their delivery taken
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
    it), give back those :class:`Unwalked` holds (:func:`hold_back`) and
    return their ids. No statement at all unless a created run's job names a
    calendar; one read of walks, and one write if any is held, otherwise."""
    named = [r for r in rows if r.origin == "scheduled" and r.attempt == 1 and r.delivery == 1
             and getattr(definition_of(r.job_id), "calendar", None) is not None]  # fmt: skip
    if not named:
        return set()
    unwalked = Unwalked(conn, caps)
    unwalked.load(r.tenant for r in named)
    held = [r.id for r in named if unwalked.held(r.tenant, r.job_id, definition_of(r.job_id), origin=r.origin,
                                                 attempt=r.attempt, delivery=r.delivery - 1)]  # fmt: skip
    hold_back(conn, caps, held, at_us)
    return set(held)
