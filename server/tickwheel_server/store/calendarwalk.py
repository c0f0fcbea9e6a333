"""A calendar change's walk: its progress kept in ``calendar_walks``, a page of jobs per transaction.

UpdateCalendar commits the new definition and :func:`begin_walk` in one
short transaction; :func:`walk_page` then re-decides the created runs of
the next page of jobs naming the calendar (:func:`.calendaruse.redecide_page`)
and records how far it got, each page its own transaction, until a page
finds no more jobs and the row goes (:func:`walk_page` returns the walk's
report then). So no transaction holds more than a page of jobs and their
runs, and a walk whose walker died (its ``held_until`` past) is resumed from
its last page by whoever calls :func:`walk_page` next (the reaper's duty,
:meth:`.calendars.CalendarStore.resume_walks`).

**Exactly once.** Every page starts by writing the walk's row on the
condition that it is still at the ``version`` and ``after_job`` the walker
read: two walkers of one walk (a slow one and the duty that thought it
dead) queue on that row and the second finds it moved and stops, its
transaction having done nothing. A newer update overwrites ``version`` and
``after_job``: the older walk stops at its next page and the newer starts
from the first job (supersede).

**While a walk is in progress** a created run of a job past ``after_job`` is
decided under the old definition. The hand-out holds such runs back rather
than hand them out at an instant the new calendar may drop or move, and the
arming arms no created run of a calendar being walked (:mod:`.calendarhold`:
one statement a round, sent only when a candidate's job names a calendar).
Armed runs of the calendar's jobs are disarmed when the walk begins
(:func:`begin_walk`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..jobspec import DefinitionCache
from ..schedule.businessdays import BusinessCalendar
from .arming import ARMED, disarm_ids
from .calendarcursor import names_calendar
from .calendaruse import Page, Redecided, RunChange, first_reported, jobs_naming, redecide_page
from .engine import Capabilities
from .isolation import status_in
from .tables import calendar_walks, executions, jobs

@dataclass(frozen=True)
class Walk:
    """A walk not finished: which calendar, at which version, from which job."""

    tenant: str
    calendar: str
    version: int
    after_job: str


def _encode(changes: list[RunChange]) -> str:
    return json.dumps([[c.execution_id, c.job_id, c.nominal_at_us, c.old_due_at_us, c.new_due_at_us] for c in changes])


def _decode(text: str) -> list[RunChange]:
    return [RunChange(*item) for item in json.loads(text or "[]")]


def _report(row, *, finished: bool) -> Redecided:
    return Redecided(job_count=row.job_count, changed_count=row.changed_count, first=_decode(row.reported),
                     finished=finished)


def begin_walk(
    conn: Connection, tenant: str, name: str, version: int, now_us: int, hold_us: int
) -> tuple[int, Redecided] | None:
    """In the transaction that stores ``version`` of ``tenant``'s calendar
    ``name``: its walk, from the first job, held by the caller for
    ``hold_us``. Returns the version and the report so far of the walk it
    supersedes (an older version's not finished), None when there was none. The armed runs
    of the jobs naming the calendar go back to ``scheduled`` (armed rows are
    those due within seconds: few), so none starts at an old instant; the
    arming leaves the calendar's runs alone until the walk passes their job."""
    where = (calendar_walks.c.tenant == tenant, calendar_walks.c.calendar == name)
    old = conn.execute(sa.select(calendar_walks).where(*where)).first()
    fresh = dict(version=version, after_job="", job_count=jobs_naming(conn, tenant, name), changed_count=0,
                 reported="[]", started_at=now_us, held_until=now_us + hold_us)
    if old is None:
        conn.execute(calendar_walks.insert().values(tenant=tenant, calendar=name, **fresh))
    else:
        conn.execute(calendar_walks.update().where(*where).values(**fresh))
    naming = sa.exists().where(jobs.c.id == executions.c.job_id, jobs.c.tenant == tenant, names_calendar(),
                               jobs.c.calendar == name)  # fmt: skip
    armed = conn.execute(
        sa.select(executions.c.id).where(status_in(executions.c.status, ARMED), executions.c.tenant == tenant, naming)
    ).scalars().all()
    if armed:
        disarm_ids(conn, armed, tenant=tenant)
    return None if old is None else (old.version, _report(old, finished=False))


def walk_page(
    conn: Connection, caps: Capabilities, walk: Walk, calendar: Callable[[], BusinessCalendar], now_us: int,
    hold_us: int, definitions: DefinitionCache | None = None, counted: Callable[[int], None] | None = None,
) -> tuple[Walk | None, Redecided]:
    """One page of ``walk``, in the caller's transaction: the next walk
    (None when this one is over) and the report so far. Over: the row is
    deleted and the report ``finished``; taken over (the row is no longer at
    ``walk.version`` and ``walk.after_job``: superseded, or another walker
    went on): nothing written, an empty report not ``finished``."""
    where = (calendar_walks.c.tenant == walk.tenant, calendar_walks.c.calendar == walk.calendar)
    held = conn.execute(
        calendar_walks.update()
        .where(*where, calendar_walks.c.version == walk.version, calendar_walks.c.after_job == walk.after_job)
        .values(held_until=now_us + hold_us)
    ).rowcount  # fmt: skip
    if not held:
        return None, Redecided(finished=False)
    page: Page = redecide_page(conn, caps, walk.tenant, walk.calendar, calendar, now_us, walk.after_job,
                               definitions, counted)  # fmt: skip
    row = conn.execute(sa.select(calendar_walks).where(*where)).one()
    if page.last_job is None:
        conn.execute(calendar_walks.delete().where(*where))
        return None, _report(row, finished=True)
    first = first_reported(_decode(row.reported), page.changes)
    conn.execute(calendar_walks.update().where(*where).values(
        after_job=page.last_job, changed_count=row.changed_count + len(page.changes), reported=_encode(first)))
    report = Redecided(job_count=row.job_count, changed_count=row.changed_count + len(page.changes), first=first,
                       finished=False)  # fmt: skip
    return Walk(walk.tenant, walk.calendar, walk.version, page.last_job), report


def stale_walks(conn: Connection, now_us: int, limit: int) -> list[Walk]:
    """Up to ``limit`` walks whose walker has not written them for its hold: presumed dead."""
    return [Walk(r.tenant, r.calendar, r.version, r.after_job) for r in conn.execute(
        sa.select(calendar_walks.c.tenant, calendar_walks.c.calendar, calendar_walks.c.version,
                  calendar_walks.c.after_job)
        .where(calendar_walks.c.held_until < now_us)
        .order_by(calendar_walks.c.held_until).limit(limit)
    )]  # fmt: skip


def release_walk(conn: Connection, walk: Walk) -> None:
    """Let the next :func:`stale_walks` find ``walk`` at once (its walker
    stops here, alive: the reaper's duty walks a bounded number of pages a pass)."""
    conn.execute(calendar_walks.update().where(
        calendar_walks.c.tenant == walk.tenant, calendar_walks.c.calendar == walk.calendar,
        calendar_walks.c.version == walk.version, calendar_walks.c.after_job == walk.after_job,
    ).values(held_until=0))  # fmt: skip


def end_walk(conn: Connection, tenant: str, name: str) -> None:
    """The calendar is gone (DeleteCalendar): so is its walk."""
    conn.execute(calendar_walks.delete().where(calendar_walks.c.tenant == tenant, calendar_walks.c.calendar == name))
