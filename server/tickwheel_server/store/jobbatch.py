"""Changing jobs, one or a batch: updates, deletes, pauses and resumes applied in request order under locks taken in id order.

:func:`update_jobs`, :func:`delete_jobs`, :func:`pause_jobs` and
:func:`resume_jobs` are the transaction bodies of
:meth:`~tickwheel_server.store.jobs.JobStore.update_many`, ``delete_many``,
``pause_many`` and ``resume_many``; :func:`apply_update` (what one update
writes beside the job row) and :func:`apply_resume` are shared with the
single :meth:`~tickwheel_server.store.jobs.JobStore.update` and ``resume``.

Both read the batch's jobs with one ``SELECT … WHERE tenant = :tenant AND id
IN (…) ORDER BY id FOR UPDATE`` per :data:`CHUNK` ids, the ids sorted first:
two batches over overlapping jobs take their row locks in the same order,
so one waits for the other instead of deadlocking. Then each item is applied
in request order against the records as the earlier items left them (an id
repeated in a batch sees its earlier items). Another tenant's id reads as
missing (NotFound), like an id that never existed.

A delete batch costs a fixed number of statements per :data:`CHUNK` jobs
(the locked read, one cancel of the executions not started, one delete of
the rows) plus one quota write per slot its jobs were counted in, and the
key wake-ups its cancels need. An update batch writes the job rows with
one executemany and reads the tenant's payload limit once; per job, only
what the job's own executions need: an update that changes when a job runs
re-plans its pending occurrences (a locked read of them and the writes the
plan asks for: they differ per job), one that changes the payload or the
handler rewrites its executions not started. An update of anything else
(name, labels, policies) writes nothing but the job row. A pause batch
holds every paused job's executions with one locked read and one update per
:data:`CHUNK` jobs and writes the job rows with one executemany. A resume is
per job (its held executions are read locked, those past the job's own
misfire threshold deleted into its skip range, the rest released, its row
written): the thresholds and spans differ per job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import from_us, to_us

from ..errors import NotFound, QuotaExceeded, TickwheelError, VersionConflict
from ..jobspec import calendar_column, calendar_ref
from ..policy.jobchanges import (
    CursorView, PausedSpan, Pending, Reschedule, SkippedSpan, expired_at_resume, row_refresh,
)
from ..schedule.businessdays import BusinessCalendar
from . import manualslots, quota
from .arming import disarm_jobs
from .base import chunks, one_of
from .calendarcursor import calendars_named, rekey_previous
from .engine import Capabilities
from .isolation import wake_keys
from .history import SkipRecord
from .jobexecutions import (
    CHUNK, held_by_pause, hold_not_started_of, last_created_at, not_started_ids, paged, pending_occurrences,
    range_between, record_paused_span, recreate_pending, span_with,
)
from .jobrecords import JobRecord, get_job, job_record, select_jobs, write_cursors
from .peertext import escaped_text
from .revisions import delete_revisions, keep_revisions, revision_of
from .tables import executions, job_cursors, jobs, tenants
from .timeline import DELETED_REASON, NOT_STARTED, in_group


@dataclass(frozen=True)
class JobChange:
    """What the API decided one update writes (see
    :meth:`~tickwheel_server.store.jobs.JobStore.update` for each field)."""

    name: str
    spec: bytes
    time_zone: str
    tzdata_version: str
    payload_size: int
    reschedule: Reschedule | None
    skipped: SkippedSpan | None = None
    changed_by: str = ""
    """Who asked for the change (the revision it keeps records it)."""
    update_mask: tuple[str, ...] = ()
    """The request's update mask as given (empty: every mutable field)."""


Decide = Callable[[JobRecord], "JobChange | None"]
"""One update item's decision, given the job as the transaction sees it
(after the batch's earlier items): the change, None when the item changes
nothing, or a raised TickwheelError (the item's answer; nothing of it is
written). Called under the job's row lock, perhaps more than once when the
transaction is retried: it must decide from its argument alone."""

UpdateOutcome = tuple[JobRecord, int] | TickwheelError
"""(the job as stored after the item, executions canceled), or why nothing was written for it."""

PauseOutcome = tuple[JobRecord, int] | TickwheelError
"""(the job after the item, executions it held), or NotFound."""

ResumeDecide = Callable[[JobRecord, BusinessCalendar | None], PausedSpan]
"""A paused job's span, counted with the schedule engine from the job as the
transaction sees it and the calendar it names (None: none, or gone), read
in the transaction (a raised TickwheelError is the item's answer). Called
under the job's lock, perhaps more than once: it decides from its arguments."""

ResumeOutcome = tuple[JobRecord, SkipRecord | None, int] | TickwheelError
"""(the job after the item, the skip range recorded or None, executions released), or the item's error."""


def lock_jobs(conn: Connection, caps: Capabilities, tenant: str, ids: Sequence[str]) -> dict[str, JobRecord]:
    """``tenant``'s jobs among ``ids``, their rows locked in id order until
    the transaction ends where the engine has row locks (SQLite locks the
    whole database instead). Missing ids, and other tenants', are absent."""
    found: dict[str, JobRecord] = {}
    for chunk in chunks(sorted(set(ids)), CHUNK):
        # The ids on both tables' keys: on the jobs' alone, a generic plan
        # hashed the cursors whole to join them.
        query = select_jobs().where(
            jobs.c.tenant == tenant, one_of(caps, jobs.c.id, chunk), one_of(caps, job_cursors.c.job_id, chunk)
        ).order_by(jobs.c.id)
        if caps.row_locks:
            query = query.with_for_update()  # the job's row and its cursor's
        found.update((row.id, job_record(row)) for row in conn.execute(query))
    return found


def payload_limit(conn: Connection, tenant: str) -> int | None:
    """The tenant's ``max_payload_bytes`` (None when the tenant is gone)."""
    return conn.execute(sa.select(tenants.c.max_payload_bytes).where(tenants.c.name == tenant)).scalar()


def apply_update(
    conn: Connection, caps: Capabilities, current: JobRecord, change: JobChange, *, limit: int | None, now_us: int
) -> tuple[JobRecord, int]:
    """Apply ``change`` to ``current`` (locked, its version checked by the
    caller): QuotaExceeded when the payload is over ``limit``; otherwise
    the executions are changed as :meth:`JobStore.update` states and the
    returned record (with how many executions were canceled) is what the
    job row must become. The job row itself is not written here."""
    if limit is not None and change.payload_size > limit:
        raise QuotaExceeded(
            current.tenant, "max_payload_bytes", limit, f"payload of {change.payload_size} bytes is over the limit"
        )
    skipped, job_id = change.skipped, current.id
    # An armed execution carries the old definition and is not started: back
    # to scheduled, it is kept, changed or re-created below like the rest.
    disarm_jobs(conn, [job_id])
    run_count = current.run_count
    if skipped is not None:
        if current.state != "paused" or current.next_run_at != skipped.from_at:
            raise ValueError("skipped must start at the cursor of a paused job")
        run_count += skipped.count
    changed = job_pb2.Job.FromString(change.spec)
    refresh = row_refresh(job_pb2.Job.FromString(current.spec), changed)
    next_run_at, next_due_at = current.next_run_at, current.next_due_at
    canceled = 0
    if change.reschedule is not None:
        pending = pending_occurrences(conn, caps, job_id)
        view = CursorView(
            current.state, current.next_run_at, max(0, run_count - len(pending)),
            last_created_at(conn, job_id, frozenset(row.id for row in pending)),
            tuple(Pending(from_us(row.nominal_at), from_us(row.due_at)) for row in pending),
        )
        plan = change.reschedule(view)
        canceled = recreate_pending(
            conn, caps, current, pending, plan, payload=changed.payload, handler=refresh.handler,
            held=current.state == "paused", now_us=now_us,
        )
        run_count = plan.runs
        fire = plan.next_fire
        next_run_at, next_due_at = (None, None) if fire is None else (fire.nominal_at, fire.due_at)
    elif refresh.payload is not None:
        ids = [row.id for row in pending_occurrences(conn, caps, job_id)]
        for chunk in chunks(ids, CHUNK):
            conn.execute(
                executions.update()
                .where(one_of(caps, executions.c.id, chunk), *in_group(NOT_STARTED))
                .values(payload=refresh.payload)
            )
    if refresh.handler_changed:
        for chunk in chunks(not_started_ids(conn, caps, job_id), CHUNK):
            conn.execute(
                executions.update()
                .where(one_of(caps, executions.c.id, chunk), *in_group(NOT_STARTED))
                .values(handler=refresh.handler)
            )
    if current.state == "paused":
        state = "paused"
    else:
        state = "active" if next_run_at is not None else "completed"
    if skipped is not None:
        record_paused_span(conn, current, skipped, now_us)
    updated = dataclasses.replace(
        current, name=change.name, spec=change.spec, time_zone=change.time_zone,
        tzdata_version=change.tzdata_version, state=state,
        next_run_at=None if next_run_at is None else from_us(to_us(next_run_at)),
        next_due_at=None if next_due_at is None else from_us(to_us(next_due_at)),
        run_count=run_count, version=current.version + 1, updated_at=from_us(now_us),
    )
    return updated, canceled


def row_values(record: JobRecord) -> dict:
    """The ``jobs`` columns an update writes (:data:`_ROW_COLUMNS`), from the
    record it leaves; its cursor goes with :func:`.jobrecords.write_cursors`."""
    return dict(
        name=record.name, spec=record.spec, time_zone=record.time_zone, tzdata_version=record.tzdata_version,
        state=record.state, version=record.version, updated_at=to_us(record.updated_at),
        calendar=calendar_column(record.spec),
    )


_ROW_COLUMNS = ("name", "spec", "time_zone", "tzdata_version", "state", "version", "updated_at", "calendar")
_WRITE_JOB = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("b_id"))
    .values({name: sa.bindparam(f"b_{name}") for name in _ROW_COLUMNS})
)


def update_jobs(
    conn: Connection, caps: Capabilities, tenant: str, items: Sequence[tuple[str, int, Decide]], *, now_us: int
) -> tuple[list[UpdateOutcome], list[JobRecord]]:
    """Apply each (job id, expected version, decision) of ``tenant`` in
    order; one outcome per item: (the job after it, canceled executions),
    or the error that item alone would have raised, nothing of it written;
    and the jobs changed, as the batch left them, by id.

    Per item: NotFound when the id is not ``tenant``'s job; VersionConflict
    when the job's version (as the batch's earlier items left it) is not
    the expected one; then the decision (its error is the item's); None
    answers the job as it is; a change is applied (:func:`apply_update`,
    QuotaExceeded over the payload limit). Each changed job's row is
    written once, with the last change of it; each applied change keeps
    the definition it replaced as a revision (:func:`.revisions.keep_revisions`).
    """
    current = lock_jobs(conn, caps, tenant, [job_id for job_id, _, _ in items])
    limit = payload_limit(conn, tenant) if current else None
    written: dict[str, JobRecord] = {}
    kept = []
    outcomes: list[UpdateOutcome] = []
    for job_id, expected_version, decide in items:
        try:
            record = current.get(job_id)
            if record is None:
                raise NotFound("job", job_id)
            if record.version != expected_version:
                raise VersionConflict(f"job {job_id!r}", expected_version, record.version)
            change = decide(record)
            if change is None:
                outcomes.append((record, 0))
                continue
            updated, canceled = apply_update(conn, caps, record, change, limit=limit, now_us=now_us)
        except TickwheelError as error:
            outcomes.append(error)
            continue
        kept.append(revision_of(record, updated, changed_by=change.changed_by, update_mask=change.update_mask))
        current[job_id] = written[job_id] = updated
        outcomes.append((updated, canceled))
    if written:
        conn.execute(
            _WRITE_JOB,
            [{"b_id": job_id, **{f"b_{k}": v for k, v in row_values(record).items()}}
             for job_id, record in sorted(written.items())],
        )
        write_cursors(conn, [record for _, record in sorted(written.items())])
        rekey_written(conn, tenant, written.values(), now_us)
    keep_revisions(conn, kept)
    return outcomes, [record for _, record in sorted(written.items())]


def delete_jobs(
    conn: Connection, caps: Capabilities, tenant: str, items: Sequence[tuple[str, int]], *, now_us: int
) -> list[int | TickwheelError]:
    """Delete each (job id, expected version; 0 for any) of ``tenant`` in
    order; one outcome per item: how many of its executions not started
    were canceled, or the error that item alone would have raised (NotFound
    when the id is not ``tenant``'s job or an earlier item deleted it;
    VersionConflict), nothing of it written.

    What each delete does is :meth:`JobStore.delete`'s: executions not
    started canceled with :data:`DELETED_REASON` (a running one finishes),
    the row deleted with its revisions, its quota unit given back to its
    slot (the slots in slot order). History and request ids stay.
    """
    current = lock_jobs(conn, caps, tenant, [job_id for job_id, _ in items])
    deleted: dict[str, JobRecord] = {}
    outcomes: list[int | TickwheelError] = []
    for job_id, expected_version in items:
        record = current.get(job_id)
        if record is None or job_id in deleted:
            outcomes.append(NotFound("job", job_id))
        elif expected_version and record.version != expected_version:
            outcomes.append(VersionConflict(f"job {job_id!r}", expected_version, record.version))
        else:
            deleted[job_id] = record
            outcomes.append(0)
    if not deleted:
        return outcomes
    ids = sorted(deleted)
    disarm_jobs(conn, ids)  # armed ones are not started: canceled below like the rest
    canceled_rows = []
    slots: dict[int, int] = {}
    for chunk in chunks(ids, CHUNK):
        canceled_rows += conn.execute(
            executions.update()
            .where(one_of(caps, executions.c.job_id, chunk), *in_group(NOT_STARTED))
            .values(status="canceled", finished_at=now_us, dead_reason=DELETED_REASON)
            .returning(executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.wait_key,
                       executions.c.manual_slot)
        ).all()
        conn.execute(
            job_cursors.delete().where(job_cursors.c.tenant == tenant, one_of(caps, job_cursors.c.job_id, chunk))
        )
        for slot in conn.execute(
            sa.delete(jobs).where(jobs.c.tenant == tenant, one_of(caps, jobs.c.id, chunk)).returning(jobs.c.quota_slot)
        ).scalars():
            slots[slot] = slots.get(slot, 0) + 1
        delete_revisions(conn, tenant, chunk)
    wake_keys(conn, caps, {(row.tenant, row.wait_key) for row in canceled_rows if row.wait_key})
    manualslots.give_back(conn, [(row.tenant, row.manual_slot) for row in canceled_rows])
    quota.give_back(conn, tenant, dict(sorted(slots.items())))
    per_job: dict[str, int] = {}
    for row in canceled_rows:
        per_job[row.job_id] = per_job.get(row.job_id, 0) + 1
    return [
        per_job.get(job_id, 0) if isinstance(outcome, int) else outcome
        for (job_id, _), outcome in zip(items, outcomes)
    ]


_WRITE_PAUSE = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("b_id"))
    .values(
        state="paused", paused_at=sa.bindparam("b_at"), pause_reason=sa.bindparam("b_reason"),
        version=sa.bindparam("b_version"), updated_at=sa.bindparam("b_at"),
    )
)


def rekey_written(
    conn: Connection, tenant: str, records: Iterable[JobRecord], now_us: int, *, not_before: datetime | None = None
) -> None:
    """After their rows were written with nominal cursors: the scan keys of
    those of ``records`` naming a calendar whose rule is ``previous``
    (:func:`.calendarcursor.rekey_previous`, never moved before
    ``not_before``, default the write's instant; nothing read for the others)."""
    previous = [record.id for record in records if calendar_ref(record.spec)[1]]
    if previous:
        rekey_previous(conn, previous, from_us(now_us) if not_before is None else not_before, tenant=tenant)


def pause_jobs(
    conn: Connection, caps: Capabilities, tenant: str, items: Sequence[tuple[str, str]], *, now_us: int
) -> list[PauseOutcome]:
    """Pause each (job id, reason) of ``tenant`` in order, as
    :meth:`JobStore.pause` does: NotFound when the id is not ``tenant``'s
    job; a paused job (an earlier item's included) answered unchanged with
    0 held; otherwise paused at ``now_us`` with ``reason``, ``version`` + 1,
    its executions not started held (:func:`.jobexecutions.hold_not_started_of`)."""
    current = lock_jobs(conn, caps, tenant, [job_id for job_id, _ in items])
    paused: dict[str, JobRecord] = {}
    decided: list[tuple[str, JobRecord] | TickwheelError] = []
    for job_id, reason in items:
        record = current.get(job_id)
        if record is None:
            decided.append(NotFound("job", job_id))
            continue
        if record.state != "paused":
            record = current[job_id] = paused[job_id] = dataclasses.replace(
                record, state="paused", paused_at=from_us(now_us), pause_reason=escaped_text(reason), version=record.version + 1,
                updated_at=from_us(now_us),
            )
            decided.append(("held", record))
        else:
            decided.append(("kept", record))
    if paused:
        disarm_jobs(conn, list(paused))  # armed ones are not started: held below like the rest
    held = hold_not_started_of(conn, caps, list(paused)) if paused else {}
    if paused:
        conn.execute(_WRITE_PAUSE, [
            {"b_id": job_id, "b_at": now_us, "b_reason": record.pause_reason, "b_version": record.version}
            for job_id, record in sorted(paused.items())
        ])  # fmt: skip
        write_cursors(conn, [record for _, record in sorted(paused.items())])
    return [
        outcome if isinstance(outcome, TickwheelError)
        else (outcome[1], held.get(outcome[1].id, 0) if outcome[0] == "held" else 0)
        for outcome in decided
    ]


def apply_resume(
    conn: Connection, caps: Capabilities, current: JobRecord, *, span: PausedSpan, tzdata_version: str,
    decided_at: datetime, now_us: int,
) -> tuple[JobRecord, SkipRecord | None, int]:
    """Resume ``current`` (paused, locked, ``span`` counted from it) as
    :meth:`JobStore.resume` states: the held executions past the job's
    misfire threshold at ``decided_at`` deleted into the paused span's one
    skip range, the others released, the span's late ones kept beside
    them (:meth:`PausedSpan.beside`); the row written. Returns (the job as
    stored, the skip range or None, how many were released)."""
    job_id = current.id
    skipped = span.skipped
    if skipped is not None and current.next_run_at != skipped.from_at:
        raise ValueError("skipped must start at the paused job's cursor")
    threshold = job_pb2.Job.FromString(current.spec).misfire_threshold.ToTimedelta()
    query = sa.select(
        executions.c.id, executions.c.origin, executions.c.nominal_at, executions.c.due_at,
        executions.c.attempt, executions.c.delivery,
    ).where(*held_by_pause(job_id))
    if caps.row_locks:
        query = query.with_for_update()  # what is read is what is released or expired
    held = paged(conn, query)
    expired = [
        row for row in held
        if expired_at_resume(origin=row.origin, attempt=row.attempt, delivery=row.delivery,
                             due_at=from_us(row.due_at), now=decided_at, threshold=threshold)
    ]  # fmt: skip
    for chunk in chunks([row.id for row in expired], CHUNK):
        conn.execute(executions.delete().where(one_of(caps, executions.c.id, chunk), *held_by_pause(job_id)))
    gone = {row.id for row in expired}
    released = 0
    for chunk in chunks([row.id for row in held if row.id not in gone], CHUNK):
        released += conn.execute(
            executions.update()
            .where(one_of(caps, executions.c.id, chunk), *held_by_pause(job_id))
            .values(status="scheduled", wait_key=None)
        ).rowcount
    released_with = span.beside(released)
    next_fire, skipped = released_with.next_fire, released_with.skipped
    expired_at = [from_us(row.nominal_at) for row in expired]
    if expired_at and skipped is not None and range_between(conn, job_id, max(expired_at), skipped.from_at):
        # The held ones are the oldest of a backlog (policy.backlog): the
        # range the claims skipped lies between them and the paused span, so
        # they are a range of their own (a range counts every occurrence in it).
        record_paused_span(conn, current, span_with(None, expired_at), now_us)
        one = skipped
    else:
        one = span_with(skipped, expired_at)
    skip = None if one is None else record_paused_span(conn, current, one, now_us)
    run_count = current.run_count + (skipped.count if skipped is not None else 0)
    state = "active" if next_fire is not None else "completed"
    conn.execute(
        jobs.update()
        .where(jobs.c.id == job_id, jobs.c.tenant == current.tenant)
        .values(
            state=state, paused_at=None, pause_reason="", tzdata_version=tzdata_version,
            version=current.version + 1, updated_at=now_us,
        )
    )
    write_cursors(conn, [dataclasses.replace(
        current, state=state, next_run_at=None if next_fire is None else next_fire.nominal_at,
        next_due_at=None if next_fire is None else next_fire.due_at, run_count=run_count,
        version=current.version + 1,
    )])  # fmt: skip
    # A late one runs at the instant its calendar moved it to, though past (the span's rule, not the write's).
    rekey_written(conn, current.tenant, [current], now_us, not_before=decided_at - threshold)
    return get_job(conn, current.tenant, job_id), skip, released


def resume_jobs(
    conn: Connection, caps: Capabilities, tenant: str, items: Sequence[tuple[str, ResumeDecide]], *,
    decided_at: datetime, tzdata_version: str, now_us: int,
) -> list[ResumeOutcome]:
    """Resume each (job id, span decision) of ``tenant`` in order, as
    :meth:`JobStore.resume` does: NotFound when the id is not ``tenant``'s
    job; a job that is not paused (an earlier item resumed it, say)
    answered unchanged; otherwise its span decided from the locked record
    and :func:`apply_resume` applied."""
    current = lock_jobs(conn, caps, tenant, [job_id for job_id, _ in items])
    named = calendars_named(conn, tenant, [record.spec for record in current.values() if record.state == "paused"])
    outcomes: list[ResumeOutcome] = []
    for job_id, decide in items:
        record = current.get(job_id)
        if record is None:
            outcomes.append(NotFound("job", job_id))
            continue
        if record.state != "paused":
            outcomes.append((record, None, 0))
            continue
        try:
            span = decide(record, named.get(calendar_column(record.spec)))
        except TickwheelError as error:
            outcomes.append(error)
            continue
        resumed, skip, released = apply_resume(
            conn, caps, record, span=span, tzdata_version=tzdata_version, decided_at=decided_at, now_us=now_us,
        )
        current[job_id] = resumed
        outcomes.append((resumed, skip, released))
    return outcomes
