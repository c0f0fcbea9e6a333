"""Which jobs name a tenant's calendar, and what a calendar change does to their created runs.

Jobs name a calendar in ``jobs.calendar`` (migration 0023; index
``jobs_calendar (tenant, calendar)`` over the jobs that name one), so every
query here is scoped to one tenant and reads only the jobs naming the
calendar, and :func:`redecide_page` decides a page of them again, in id
order. Everything runs inside the caller's transaction:
:func:`jobs_naming` before a delete, :func:`present_calendars` before a job
write, :func:`redecide_page` in each transaction of a calendar change's
walk (:mod:`.calendarwalk`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..jobspec import DefinitionCache, JobDefinition
from ..schedule import ScheduleError, due_at, next_fire
from ..schedule.businessdays import BusinessCalendar
from ..policy.calendarplan import decide_previous_for
from ..schedule.calendarrule import CalendarRule, Verdict, decide
from .arming import disarm_jobs
from .calendarcursor import names_calendar, rekey_previous
from .base import one_of
from .engine import Capabilities, capabilities
from .isolation import after_not_started_canceled, status_in
from .tables import calendars, executions, jobs

MAX_REPORTED = 100
"""The most changed runs an UpdateCalendar response and its alert list (all are counted)."""
PAGE = 1000
"""Runs read (and rewritten) per statement while re-deciding."""
FIRES_PER_JOB = 10
"""What walking one job naming the calendar counts on the caller's meter,
in schedule fires (a created run decided counts one): its cursor and
definition read and decided again, its armed runs disarmed, weighted so
that a request's worth buys about the CPU a resume's span fires do
(``loadtest/RESULTS.md``, "Calendar changes pay for the jobs they walk")."""


def calendar_changed_reason(name: str) -> str:
    """The ``dead_reason`` of a created run a calendar change dropped."""
    return f"canceled: calendar {name} changed and the job's rule drops this occurrence"


@dataclass(frozen=True)
class RunChange:
    """A created run that a calendar change moved (``new_due_at_us`` set) or dropped (None)."""

    execution_id: str
    job_id: str
    nominal_at_us: int
    old_due_at_us: int
    new_due_at_us: int | None


@dataclass
class Redecided:
    """What a calendar change did to the created runs of the jobs naming it."""

    job_count: int = 0
    changed_count: int = 0
    first: list[RunChange] = field(default_factory=list)
    """The first :data:`MAX_REPORTED` changes, by due instant then id."""
    finished: bool = True
    """False when this walk was superseded by a newer version's (or taken
    over by another walker): the counts are those made so far."""


def jobs_naming(conn: Connection, tenant: str, name: str) -> int:
    """How many of ``tenant``'s jobs (any state) name the calendar ``name``."""
    return conn.execute(
        sa.select(sa.func.count())
        .select_from(jobs)
        .where(jobs.c.tenant == tenant, names_calendar(), jobs.c.calendar == name)
    ).scalar_one()


def present_calendars(conn: Connection, tenant: str, names: Iterable[str]) -> set[str]:
    """Those of ``names`` that are calendars of ``tenant`` (another tenant's are not)."""
    wanted = sorted(set(names))
    if not wanted:
        return set()
    return set(
        conn.execute(
            sa.select(calendars.c.name)
            .where(calendars.c.tenant == tenant, one_of(capabilities(conn), calendars.c.name, wanted))
        ).scalars()
    )


@dataclass
class Page:
    """One page of the walk: the jobs it read (in id order) and the changes it wrote."""

    job_ids: list[str]
    changes: list[RunChange]

    @property
    def last_job(self) -> str | None:
        """Where the next page starts after (None: the walk is over)."""
        return self.job_ids[-1] if self.job_ids else None


def redecide_page(
    conn: Connection, caps: Capabilities, tenant: str, name: str, calendar: Callable[[], BusinessCalendar],
    now_us: int, after: str, definitions: DefinitionCache | None = None,
    counted: Callable[[int], None] | None = None,
) -> Page:
    """Decide again, under ``calendar()`` (the calendar's new definition,
    decoded only when a run needs it), every run created by the dispatcher
    for the next :data:`PAGE` of ``tenant``'s jobs naming ``name`` after
    job id ``after`` (id order, index ``jobs_calendar``) that was never
    handed out (status ``scheduled``, attempt 1, delivery 0): a run whose
    due instant changes gets the new one (``due_at`` and ``ready_at``; its
    id, the nominal instant, stays), a run the rule now drops or skips is
    canceled with :func:`calendar_changed_reason`. Runs a worker already
    took, retries and manual or backfilled runs are left as they are; runs
    not yet created follow the new calendar when the claim creates them,
    and the cursors of the page's jobs whose rule is ``previous`` get the
    scan key the new calendar gives them
    (:func:`.calendarcursor.rekey_previous`: never before now). Their armed
    runs are disarmed first (never handed out: decided again here).

    Only the definitions of jobs with such runs are read. A job whose
    definition cannot be read here keeps its runs (its claim quarantines
    it). The work is one page's, in the caller's transaction
    (:mod:`.calendarwalk` runs one page per transaction): ``counted`` (the
    caller's meter) is told :data:`FIRES_PER_JOB` per job walked and one per
    created run decided."""
    definitions = definitions if definitions is not None else DefinitionCache(max_entries=PAGE)
    ids = list(conn.execute(
        sa.select(jobs.c.id)
        .where(jobs.c.tenant == tenant, names_calendar(), jobs.c.calendar == name, jobs.c.id > after)
        .order_by(jobs.c.id).limit(PAGE)
    ).scalars())  # fmt: skip
    if not ids:
        return Page([], [])
    if counted is not None:
        counted(FIRES_PER_JOB * len(ids))
    cal = calendar()
    # Cursors of ``previous`` jobs: scanned where the new calendar moves them.
    rekey_previous(conn, ids, from_us(now_us), tenant=tenant, calendar=(name, cal))
    disarm_jobs(conn, ids)  # an armed run is one never handed out: decided again below
    runs = conn.execute(
        sa.select(executions.c.id, executions.c.job_id, executions.c.nominal_at, executions.c.due_at)
        .where(
            one_of(caps, executions.c.job_id, ids), executions.c.tenant == tenant,
            executions.c.origin == "scheduled",
            status_in(executions.c.status, "scheduled"), executions.c.attempt == 1, executions.c.delivery == 0,
        )
    ).all()
    if not runs:
        return Page(ids, [])
    if counted is not None:
        counted(len(runs))
    specs: dict[str, JobDefinition] = {}
    for row in conn.execute(
        sa.select(jobs.c.id, jobs.c.version, jobs.c.spec)
        .where(one_of(caps, jobs.c.id, sorted({r.job_id for r in runs})))
    ):
        spec = definitions.get(row.id, row.version, row.spec)
        if spec.problem is None and spec.calendar is not None and spec.calendar.name == name:
            specs[row.id] = spec
    changes = [
        change for run in runs if run.job_id in specs
        for change in [_redecide(specs[run.job_id], name, cal, run, from_us(now_us))] if change is not None
    ]  # fmt: skip
    _apply(conn, caps, name, changes, now_us)
    return Page(ids, changes)


def first_reported(kept: list[RunChange], more: list[RunChange]) -> list[RunChange]:
    """The first :data:`MAX_REPORTED` of ``kept`` and ``more``, by due instant then id."""
    return heapq.nsmallest(MAX_REPORTED, [*kept, *more], key=_report_order)


def _report_order(change: RunChange) -> tuple[int, str]:
    return change.old_due_at_us, change.execution_id


def _apply(conn: Connection, caps: Capabilities, name: str, changes: list[RunChange], now_us: int) -> None:
    """Write one page's changes: new due instants, cancellations (waking what waits behind them)."""
    moved = [c for c in changes if c.new_due_at_us is not None]
    dropped = [c.execution_id for c in changes if c.new_due_at_us is None]
    if moved:
        conn.execute(
            executions.update()
            .where(executions.c.id == sa.bindparam("b_id"), status_in(executions.c.status, "scheduled"))
            .values(due_at=sa.bindparam("b_due"), ready_at=sa.bindparam("b_due")),
            [dict(b_id=c.execution_id, b_due=c.new_due_at_us) for c in moved],
        )
    if dropped:
        canceled = conn.execute(
            executions.update()
            .where(one_of(caps, executions.c.id, dropped), status_in(executions.c.status, "scheduled"))
            .values(status="canceled", finished_at=now_us, dead_reason=calendar_changed_reason(name))
            .returning(executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.wait_key,
                       executions.c.manual_slot)
        ).all()
        after_not_started_canceled(conn, caps, canceled)


def _redecide(spec: JobDefinition, name: str, cal: BusinessCalendar, run, now: datetime) -> RunChange | None:
    """The change the new calendar makes to one created run, None when none
    (pure); a ``previous`` run is never moved before ``now``."""
    schedule = spec.schedule
    nominal = from_us(run.nominal_at)
    try:
        if spec.calendar.rule is CalendarRule.PREVIOUS:
            decision = decide_previous_for(cal, name, schedule, nominal, due_at(schedule, nominal), now)
        else:
            following = next_fire(schedule, nominal)
            decision = decide(
                cal, name, spec.calendar.rule, nominal, due_at(schedule, nominal), zone=schedule.zone,
                next_nominal_at=None if following is None else following.nominal_at,
            )
    except (ScheduleError, LookupError, ValueError, OverflowError):
        return None
    new_due = to_us(decision.due_at) if decision.verdict is Verdict.RUN else None
    if new_due == run.due_at:
        return None
    return RunChange(run.id, run.job_id, run.nominal_at, run.due_at, new_due)
