"""Where a ``previous`` job's cursor is scanned: its scan key written after a cursor or its calendar changes.

A job whose calendar rule is ``previous`` may run on an earlier day than its
nominal instant, and the claim reaches an occurrence only one look-ahead
before ``job_cursors.next_run_at``. So for such a job, whenever the cursor is
written outside the claim (create, update, resume, a tzdata recompute) or
its calendar changes, :func:`rekey_previous` decides the rule for the
cursor's occurrence and, when the rule moves it earlier, writes the moved
instant to ``next_run_at`` (the scan key) and the nominal one to
``next_nominal_at`` (migration 0026); otherwise ``next_run_at`` is the
nominal cursor and ``next_nominal_at`` NULL, as for every other job. The
claim does the same for the cursors it advances
(:class:`~.claim_calendars.PreviousClaim`). Everything runs in the caller's
transaction, which has just written the rows.

The run is never moved before ``now`` (the write's instant): a holiday added
once its previous business day has passed skips the occurrence (recorded
as a ``calendar`` skip when the claim reaches it), as the rule says.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..jobspec import JobDefinition, calendar_ref
from ..policy.calendarplan import decide_previous_for
from ..schedule import ScheduleError
from ..schedule.businessdays import BusinessCalendar
from ..schedule.calendarrule import CalendarRule, reached_at
from .base import chunks, one_of
from .engine import capabilities
from .claim_calendars import CalendarCache
from .isolation import status_in
from .jobrecords import JOB_WITH_CURSOR
from .tables import job_cursors, jobs

CHUNK = 500


def names_calendar():
    """``jobs.calendar <> ''``, ``jobs_calendar``'s predicate, with the
    empty name a literal: a statement that states it uses the index in any
    plan (a generic plan of a prepared statement cannot prove a bound
    calendar name non-empty, and reads the tenant's every job instead)."""
    return jobs.c.calendar != sa.literal_column("''")

_REKEY = (
    job_cursors.update()
    .where(job_cursors.c.job_id == sa.bindparam("b_id"), job_cursors.c.tenant == sa.bindparam("b_tenant"))
    .values(next_run_at=sa.bindparam("b_run"), next_nominal_at=sa.bindparam("b_nominal"))
)


def rekey_previous(
    conn: Connection,
    job_ids: Sequence[str],
    now: datetime,
    *,
    tenant: str | None,
    calendar: tuple[str, BusinessCalendar] | None = None,
) -> int:
    """Write the scan key of each active job of ``job_ids`` (``tenant``'s
    only, unless None for a server-wide duty) whose definition names a
    calendar with rule ``previous``; how many rows changed.

    Reads only the jobs naming a calendar (``jobs.calendar``), and parses
    the definitions of those whose rule is ``previous`` only; the cursor's
    nominal instant is ``next_nominal_at`` when set, else ``next_run_at``.
    The calendars are read in this transaction (one SELECT), except
    ``calendar`` (name, definition), the definition the caller is storing.
    A job whose calendar is gone or whose rule cannot be computed keeps its
    nominal cursor: its claim quarantines it."""
    changed: list[dict] = []
    for chunk in chunks(sorted(set(job_ids)), CHUNK):
        query = (
            sa.select(
                jobs.c.id, jobs.c.tenant, jobs.c.version, jobs.c.spec, job_cursors.c.next_run_at,
                job_cursors.c.next_due_at, job_cursors.c.next_nominal_at,
            )
            .select_from(JOB_WITH_CURSOR)
            .where(
                one_of(capabilities(conn), jobs.c.id, chunk), status_in(job_cursors.c.state, "active"), names_calendar()
            )
        )
        if tenant is not None:
            query = query.where(jobs.c.tenant == tenant)
        wanted = []
        for row in conn.execute(query):
            if not calendar_ref(bytes(row.spec))[1]:
                continue  # not ``previous`` (a look at its calendar field alone): a nominal scan key, as it is
            spec = JobDefinition.parse(row.id, row.version, bytes(row.spec))
            ref = spec.calendar
            if spec.problem is None and ref is not None and ref.rule is CalendarRule.PREVIOUS:
                wanted.append((row, spec))
        if not wanted:
            continue
        given = {} if calendar is None else {(row.tenant, calendar[0]): calendar[1] for row, _ in wanted}
        loaded = CalendarCache().load(
            conn, {(row.tenant, spec.calendar.name) for row, spec in wanted} - set(given)
        )
        loaded.update(given)
        for row, spec in wanted:
            key = _scan_key(row, spec, loaded.get((row.tenant, spec.calendar.name)), now)
            if key is not None and key != (row.next_run_at, row.next_nominal_at):
                changed.append(dict(b_id=row.id, b_tenant=row.tenant, b_run=key[0], b_nominal=key[1]))
    if changed:
        conn.execute(_REKEY, changed)
    return len(changed)


def _scan_key(row, spec: JobDefinition, cal: BusinessCalendar | None, now: datetime) -> tuple[int, int | None] | None:
    """(``next_run_at``, ``next_nominal_at``) for ``row``'s cursor under ``cal``; None to leave it (pure)."""
    nominal_us = row.next_nominal_at if row.next_nominal_at is not None else row.next_run_at
    if cal is None or nominal_us is None or row.next_due_at is None:
        return None
    nominal, due = from_us(nominal_us), from_us(row.next_due_at)
    try:
        decision = decide_previous_for(cal, spec.calendar.name, spec.schedule, nominal, due, now)
        reached = reached_at(decision, nominal, due)
    except (ScheduleError, LookupError, ValueError, OverflowError):
        return None
    if reached < nominal:
        return to_us(reached), nominal_us
    return nominal_us, None


def calendars_named(conn: Connection, tenant: str, specs: Iterable[bytes]) -> dict[str, BusinessCalendar]:
    """The calendars of ``tenant`` the stored definitions ``specs`` name, by
    name, read in this transaction (nothing read when none names one; one
    SELECT of their versions and one of their definitions otherwise). A
    calendar that is gone or does not decode is left out."""
    names = {calendar_ref(spec)[0] for spec in specs} - {""}
    if not names:
        return {}
    loaded = CalendarCache().load(conn, {(tenant, name) for name in names})
    return {name: cal for (_, name), cal in loaded.items()}
