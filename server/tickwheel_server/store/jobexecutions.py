"""What changing a job writes beside its row: its executions that have not
started (held, released, canceled, re-planned) and the skip ranges a pause
leaves.

Each function runs inside the caller's transaction
(:class:`~tickwheel_server.store.jobs.JobStore`, whose docstrings state what
each change does); none commits. A ``running`` execution is never touched:
every write is conditional on the row not having started.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import execution_id, from_us, to_us

from ..policy.backlog import NOT_STARTED_CAP
from ..policy.jobchanges import Recreation, SkippedSpan
from .base import chunks, one_of
from .engine import Capabilities
from .history import SkipRecord
from .isolation import PAUSED_WAIT, after_not_started_canceled, insert_for, not_held, status_in, wake_keys
from .jobrecords import JobRecord
from .skiptally import counted
from .tables import executions, skips
from .timeline import NOT_STARTED, in_group, newest, scans

PAUSED_REASON = "job_paused"
OVERLAP_REASON = "overlap"
NOT_IN_NEW_SCHEDULE = "canceled: job updated: not an occurrence of the new schedule"
CHUNK = 500
"""Ids per statement when rows are named one by one (SQLite binds at most 999 parameters)."""


def hold_not_started_of(conn: Connection, caps: Capabilities, job_ids: Sequence[str]) -> dict[str, int]:
    """Hold the executions no worker holds of each job of ``job_ids`` (a
    pause); returns how many per job (jobs with none absent).

    They become ``waiting`` on :data:`PAUSED_WAIT`, keeping everything else
    (``ready_at``, attempt, delivery, payload), so a resume can release them
    as they were. The status condition is the fence against a hand-out at
    the same moment, as for a cancel. A key whose freed slot had woken one
    of them hands its turn on to the next waiter. One locked read and one
    update per :data:`CHUNK` jobs' executions, whatever the number of jobs.
    """
    keys = []
    for chunk in chunks(sorted(set(job_ids)), CHUNK):
        query = sa.select(executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.wait_key).where(
            one_of(caps, executions.c.job_id, chunk), *in_group(NOT_STARTED), not_held()
        )
        if caps.row_locks:
            query = query.with_for_update()  # what is read is what is held (as pending_occurrences)
        keys += conn.execute(query).all()
    if not keys:
        return {}
    for chunk in chunks([row.id for row in keys], CHUNK):
        conn.execute(
            executions.update()
            .where(one_of(caps, executions.c.id, chunk), *in_group(NOT_STARTED), not_held())
            .values(status="waiting", wait_key=PAUSED_WAIT)
        )
    wake_keys(conn, caps, {(row.tenant, row.wait_key) for row in keys if row.wait_key})
    held: dict[str, int] = {}
    for row in keys:
        held[row.job_id] = held.get(row.job_id, 0) + 1
    return held


def held_by_pause(job_id: str) -> list:
    """The conditions naming the job's executions its pause holds."""
    return [
        executions.c.job_id == job_id, status_in(executions.c.status, "waiting"), executions.c.wait_key == PAUSED_WAIT,
    ]


PAGE = NOT_STARTED_CAP + 1
"""Rows per read of one job's executions not started: the claim keeps at
most :data:`~..policy.backlog.NOT_STARTED_CAP` of them (a ``run_all`` job
more), so one page nearly always holds them all and says so by coming back
short; a longer queue (a large ``run_all`` limit, a backfill, rows from
before the cap) is read on, page after page, each a LIMITed range scan."""


def paged(conn: Connection, query: sa.Select, *, by_instant_only: bool = False) -> list:
    """Every row of ``query`` (one job's executions, a range of
    ``executions_not_started_job``; its rows carry ``nominal_at`` and
    ``id``), read in (``nominal_at``, ``id``) order, :data:`PAGE` rows a
    statement, each page continuing after the last row of the one before.
    ``by_instant_only``: the rows' nominal instants are unique (a job's
    scheduled occurrences: the id derives from it), so the instant alone
    continues the walk."""
    if by_instant_only:
        order = [executions.c.nominal_at]
    else:
        order = [executions.c.nominal_at, executions.c.id]
    found: list = []
    page = query.order_by(*order).limit(PAGE)
    while True:
        rows = conn.execute(page).all()
        found += rows
        if len(rows) < PAGE:
            return found
        last = rows[-1]
        if by_instant_only:
            after = executions.c.nominal_at > last.nominal_at
        else:
            after = sa.or_(
                executions.c.nominal_at > last.nominal_at,
                sa.and_(executions.c.nominal_at == last.nominal_at, executions.c.id > last.id),
            )
        page = query.where(after).order_by(*order).limit(PAGE)


def pending_occurrences(conn: Connection, caps: Capabilities, job_id: str) -> list:
    """The job's scheduled occurrences claimed ahead that have not started:
    first attempt, never handed out, ``scheduled`` or ``waiting`` (held or
    not), in schedule order. Range scans on ``executions_not_started_job``,
    :data:`PAGE` rows each (:func:`paged`). Locked where the engine has row
    locks: a hand-out (which picks ``SKIP LOCKED``) then passes over them
    until the caller commits, and one it picked first is read after it
    started, so not at all."""
    query = sa.select(executions.c.id, executions.c.nominal_at, executions.c.due_at).where(
        executions.c.job_id == job_id,
        *in_group(NOT_STARTED),
        executions.c.origin == "scheduled",
        executions.c.attempt == 1,
        executions.c.delivery == 0,
    )
    if caps.row_locks:
        query = query.with_for_update()
    return paged(conn, query, by_instant_only=True)


def not_started_ids(conn: Connection, caps: Capabilities, job_id: str) -> list[str]:
    """The ids of the job's executions not started (any origin):
    :func:`paged` range scans, locked where the engine has row locks (what
    is read is what the caller writes)."""
    query = sa.select(executions.c.id, executions.c.nominal_at).where(
        executions.c.job_id == job_id, *in_group(NOT_STARTED)
    )
    if caps.row_locks:
        query = query.with_for_update()
    return [row.id for row in paged(conn, query)]


def recreate_pending(
    conn: Connection, caps: Capabilities, job: JobRecord, pending: list, plan: Recreation, *, payload: bytes,
    handler: str | None, held: bool, now_us: int,
) -> int:
    """Apply an update's re-plan of the pending occurrences; returns how many were canceled.

    Kept rows are re-created in place: same id, the new due instant (and
    ``ready_at``), payload and handler, their status (held or not) as it
    was. Created ones are inserted with their derived ids (held when the
    job is paused). Every write is conditional on the row not having
    started meanwhile.
    """
    by_instant = {from_us(row.nominal_at): row.id for row in pending}
    not_started = in_group(NOT_STARTED)
    if plan.kept:
        conn.execute(
            executions.update()
            .where(executions.c.id == sa.bindparam("b_id"), *not_started)
            .values(due_at=sa.bindparam("b_due"), ready_at=sa.bindparam("b_due"), payload=payload, handler=handler),
            [dict(b_id=by_instant[nominal], b_due=to_us(fire.due_at)) for nominal, fire in sorted(plan.kept.items())],
        )
    canceled = []
    for chunk in chunks([by_instant[nominal] for nominal in plan.canceled], CHUNK):
        canceled += conn.execute(
            executions.update()
            .where(one_of(caps, executions.c.id, chunk), *not_started)
            .values(status="canceled", finished_at=now_us, dead_reason=NOT_IN_NEW_SCHEDULE)
            .returning(executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.wait_key,
                       executions.c.manual_slot)
        ).all()
    after_not_started_canceled(conn, caps, canceled)
    if plan.created:
        conn.execute(
            insert_for(conn, executions).on_conflict_do_nothing(index_elements=["id"]),
            [
                dict(
                    id=execution_id(job.id, fire.nominal_at), job_id=job.id, tenant=job.tenant,
                    partition=job.partition, origin="scheduled", nominal_at=to_us(fire.nominal_at),
                    due_at=to_us(fire.due_at), ready_at=to_us(fire.due_at), attempt=1, delivery=0,
                    status="waiting" if held else "scheduled", wait_key=PAUSED_WAIT if held else None,
                    owner=None, worker_id=None, handler=handler, missed_count=1, reap_count=0, payload=payload,
                    error="", dead_reason="", created_at=now_us, finished_at=None, allow_overlap=False,
                )
                for fire in plan.created
            ],
        )
    return len(canceled)


def last_created_at(conn: Connection, job_id: str, excluding: frozenset[str] = frozenset()) -> datetime | None:
    """Nominal instant of the job's latest occurrence that was created: it
    has an execution row, or the overlap policy skipped it (its row was
    deleted, and the skip range accounts for it).

    Triggers are left out: their ids do not derive from a nominal instant, so
    they can never collide with an occurrence the dispatcher creates; so are
    the executions ``excluding`` names (an update's pending occurrences). A
    backward range scan on each status group's job index (see
    :mod:`.timeline`) and one on ``skips_job``, each stopping after
    ``len(excluding) + 1`` rows.
    """
    columns = [executions.c.nominal_at, executions.c.id]
    scanned = scans(columns, job_id=job_id, where=[executions.c.origin != "trigger"])
    latest = [row for row in newest(conn, scanned, len(excluding) + 1) if row.id not in excluding]
    last = latest[0].nominal_at if latest else None
    skipped = conn.execute(
        sa.select(skips.c.to_at)
        .where(skips.c.job_id == job_id, skips.c.reason == OVERLAP_REASON)
        .order_by(skips.c.to_at.desc())
        .limit(1)
    ).scalar()
    found = [t for t in (last, skipped) if t is not None]
    return from_us(max(found)) if found else None


def record_paused_span(conn: Connection, job: JobRecord, span: SkippedSpan, now_us: int) -> SkipRecord:
    """Insert one ``job_paused`` skip range for ``span``.

    Its id derives from the job and the span's first occurrence (the cursor
    the pause kept, or the earliest held occurrence that expired), which no
    other span counts: one span is never recorded twice.
    ``continues_at`` stays NULL: a paused span is complete when recorded and
    is never extended by a later claim (the dispatcher extends only misfire
    ranges).
    """
    from_us_ = to_us(span.from_at)
    record = SkipRecord(
        id=f"{job.id}:paused:{from_us_}", job_id=job.id, tenant=job.tenant, from_at=from_us(from_us_),
        to_at=from_us(to_us(span.to_at)), count=span.count, reason=PAUSED_REASON, created_at=from_us(now_us),
    )
    counted(PAUSED_REASON, span.count)
    conn.execute(
        skips.insert().values(
            id=record.id, job_id=job.id, tenant=job.tenant, from_at=from_us_, to_at=to_us(span.to_at),
            continues_at=None, count=span.count, reason=PAUSED_REASON, created_at=now_us,
        )
    )
    return record


def range_between(conn: Connection, job_id: str, after: datetime, before: datetime) -> bool:
    """Whether a skip range of the job lies nominally between ``after`` and
    ``before`` (both excluded): one probe of ``skips_job``, stopping at the first."""
    return conn.execute(
        sa.select(skips.c.id)
        .where(skips.c.job_id == job_id, skips.c.from_at > to_us(after), skips.c.to_at < to_us(before))
        .limit(1)
    ).first() is not None


def span_with(span: SkippedSpan | None, expired: list[datetime]) -> SkippedSpan | None:
    """The paused span widened to the held occurrences that expired: one range."""
    if not expired:
        return span
    instants = expired if span is None else [*expired, span.from_at, span.to_at]
    return SkippedSpan(min(instants), max(instants), len(expired) + (span.count if span is not None else 0))
