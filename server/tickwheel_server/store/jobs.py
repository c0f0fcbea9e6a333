"""Jobs: definitions, state and the schedule cursor (``next_run_at``).

The store treats a job's definition (``spec``, the serialised
``tickwheel.v1.Job``) as opaque bytes, except that the limits of the
concurrency keys it names are recorded in ``concurrency_keys`` after a
create or update (the most recent write wins); the API layer validates it and computes
the fires (first fire, new cursor, the span a pause skipped) with the schedule
engine before calling the store, which applies them in one transaction.

The cursor ``next_run_at`` is the nominal instant of the first occurrence not
yet consumed: every earlier occurrence has an execution row (it was created)
or lies in a skip range. Pause, update and delete cancel the job's executions
that have not started (``scheduled`` or ``waiting``) in the transaction that
changes the job, recording why in their ``dead_reason`` (``"canceled: job
paused"``, ``"canceled: job updated"``, ``"canceled: job deleted"``); a
``running`` execution is left to finish. An occurrence the overlap policy
skipped has no row; its skip range (reason ``overlap``) accounts for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.v1 import job_pb2

from ..errors import NotFound, QuotaExceeded, VersionConflict
from ..ids import from_us, partition_of, to_us
from ..schedule import Fire
from .base import SqlStore
from .engine import Capabilities
from .history import SkipRecord
from .isolation import set_key_limits, wake_keys
from .timeline import NOT_STARTED, in_group, newest, scans
from .tables import executions, job_requests, jobs, skips, tenants

JOB_STATES = ("active", "paused", "completed")
PAUSED_REASON = "job_paused"
OVERLAP_REASON = "overlap"


@dataclass(frozen=True)
class NewJob:
    """What the API decided for a job about to be created."""

    id: str
    tenant: str
    name: str
    spec: bytes
    time_zone: str
    next_run_at: datetime | None
    next_due_at: datetime | None
    tzdata_version: str
    payload_size: int


@dataclass(frozen=True)
class JobRecord:
    id: str
    tenant: str
    partition: int
    name: str
    state: str
    spec: bytes
    time_zone: str
    next_run_at: datetime | None
    next_due_at: datetime | None
    run_count: int
    tzdata_version: str
    pause_reason: str
    version: int
    created_at: datetime
    updated_at: datetime
    paused_at: datetime | None = None


@dataclass(frozen=True)
class CursorView:
    """What an update's reschedule decision sees, read in the update's
    transaction (so it includes whatever the dispatcher committed before)."""

    state: str
    next_run_at: datetime | None
    """The cursor before the update: the first occurrence not yet consumed."""
    run_count: int
    """Occurrences consumed so far, including any ``skipped`` the update records."""
    last_created_at: datetime | None
    """Nominal instant of the job's latest scheduled or backfilled execution
    (any status), or None. A new cursor must lie after it: those ids exist."""


Reschedule = Callable[[CursorView], Fire | None]
"""A pure decision: the job's new cursor (None: the schedule has ended)."""


@dataclass(frozen=True)
class SkippedSpan:
    """Occurrences a pause kept from running, as the API counted them with the
    engine: the first (the stored cursor), the last, and how many."""

    from_at: datetime
    to_at: datetime
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or self.to_at < self.from_at:
            raise ValueError("a skipped span holds at least one occurrence, from_at <= to_at")


def _opt(micros: int | None) -> datetime | None:
    return None if micros is None else from_us(micros)


def _from_row(row) -> JobRecord:
    return JobRecord(
        id=row.id,
        tenant=row.tenant,
        partition=row.partition,
        name=row.name,
        state=row.state,
        spec=bytes(row.spec),
        time_zone=row.time_zone,
        next_run_at=_opt(row.next_run_at),
        next_due_at=_opt(row.next_due_at),
        run_count=row.run_count,
        tzdata_version=row.tzdata_version,
        pause_reason=row.pause_reason,
        version=row.version,
        created_at=from_us(row.created_at),
        updated_at=from_us(row.updated_at),
        paused_at=_opt(row.paused_at),
    )


def _get(conn: Connection, tenant: str, job_id: str) -> JobRecord:
    row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id, jobs.c.tenant == tenant)).first()
    if row is None:
        raise NotFound("job", job_id)
    return _from_row(row)


def _cancel_not_started(conn: Connection, caps: Capabilities, job_id: str, reason: str, now_us: int) -> int:
    """Cancel the job's executions no worker holds; returns how many.

    The status condition is the fence against a gateway handing one out at
    the same moment: a row already ``running`` is not touched. A range scan on
    ``executions_not_started_job``. A concurrency key whose freed slot had
    woken one of them hands its turn on to the next waiter.
    """
    canceled = conn.execute(
        executions.update()
        .where(executions.c.job_id == job_id, *in_group(NOT_STARTED))
        .values(status="canceled", finished_at=now_us, dead_reason=reason)
        .returning(executions.c.job_id, executions.c.tenant, executions.c.wait_key)
    ).all()
    wake_keys(conn, caps, {(row.tenant, row.wait_key) for row in canceled if row.wait_key})
    return len(canceled)


def _last_created_at(conn: Connection, job_id: str) -> datetime | None:
    """Nominal instant of the job's latest occurrence that was created: it
    has an execution row, or the overlap policy skipped it (its row was
    deleted, and the skip range accounts for it).

    Triggers are left out: their ids do not derive from a nominal instant, so
    they can never collide with an occurrence the dispatcher creates. A
    backward range scan on each status group's job index (see
    :mod:`.timeline`) and one on ``skips_job``, each stopping at the first
    row.
    """
    columns = [executions.c.nominal_at, executions.c.id]
    latest = newest(conn, scans(columns, job_id=job_id, where=[executions.c.origin != "trigger"]), 1)
    last = latest[0].nominal_at if latest else None
    skipped = conn.execute(
        sa.select(skips.c.to_at)
        .where(skips.c.job_id == job_id, skips.c.reason == OVERLAP_REASON)
        .order_by(skips.c.to_at.desc())
        .limit(1)
    ).scalar()
    found = [t for t in (last, skipped) if t is not None]
    return _opt(max(found)) if found else None


def _record_paused_span(conn: Connection, job: JobRecord, span: SkippedSpan, now_us: int) -> SkipRecord:
    """Insert one ``job_paused`` skip range for ``span``.

    Its id derives from the job and the span's first occurrence (which is
    the cursor the pause kept, so one span is never recorded twice).
    ``continues_at`` stays NULL: a paused span is complete when recorded and
    is never extended by a later claim (the dispatcher extends only misfire
    ranges).
    """
    from_us_ = to_us(span.from_at)
    record = SkipRecord(
        id=f"{job.id}:paused:{from_us_}", job_id=job.id, tenant=job.tenant, from_at=from_us(from_us_),
        to_at=from_us(to_us(span.to_at)), count=span.count, reason=PAUSED_REASON, created_at=from_us(now_us),
    )
    conn.execute(
        skips.insert().values(
            id=record.id, job_id=job.id, tenant=job.tenant, from_at=from_us_, to_at=to_us(span.to_at),
            continues_at=None, count=span.count, reason=PAUSED_REASON, created_at=now_us,
        )
    )
    return record


def _reason_text(what: str, reason: str) -> str:
    return f"canceled: {what}: {reason}" if reason else f"canceled: {what}"


class JobStore(SqlStore):
    """Jobs of every tenant; every method is scoped to one tenant.

    A job of another tenant is indistinguishable from a missing one (NotFound).
    """

    def __init__(self, engine, clock, *, partition_count: int) -> None:
        super().__init__(engine, clock)
        if partition_count < 1:
            raise ValueError("partition_count must be >= 1")
        self.partition_count = partition_count

    async def create(self, job: NewJob, request_id: str) -> tuple[JobRecord, bool]:
        """Create ``job`` unless ``request_id`` was seen for this tenant.

        Returns (the job, True) when created, (the job the first request
        created, False) on a repeat; a repeat writes nothing. In one
        transaction: the request id is recorded, the tenant's job count and
        payload quotas are checked (QuotaExceeded, nothing written), the job
        row is inserted. Committed before it returns.
        """
        now_us = to_us(self.clock.now())
        partition = partition_of(job.id, self.partition_count)

        def fn(conn: Connection) -> tuple[JobRecord, bool]:
            seen = conn.execute(
                sa.select(job_requests.c.job_id).where(
                    job_requests.c.tenant == job.tenant, job_requests.c.request_id == request_id
                )
            ).scalar()
            if seen is not None:
                return _get(conn, job.tenant, seen), False
            tenant = conn.execute(
                sa.select(tenants.c.job_count, tenants.c.max_jobs, tenants.c.max_payload_bytes).where(
                    tenants.c.name == job.tenant
                )
            ).first()
            if tenant is None:
                raise NotFound("tenant", job.tenant)
            if job.payload_size > tenant.max_payload_bytes:
                raise QuotaExceeded(
                    job.tenant,
                    "max_payload_bytes",
                    tenant.max_payload_bytes,
                    f"payload of {job.payload_size} bytes is over the limit",
                )
            if tenant.job_count >= tenant.max_jobs:
                raise QuotaExceeded(job.tenant, "max_jobs", tenant.max_jobs, "the tenant has as many jobs as it may")
            conn.execute(
                tenants.update()
                .where(tenants.c.name == job.tenant)
                .values(job_count=tenants.c.job_count + 1)
            )
            conn.execute(
                jobs.insert().values(
                    id=job.id,
                    tenant=job.tenant,
                    partition=partition,
                    name=job.name,
                    state="active" if job.next_run_at is not None else "completed",
                    spec=job.spec,
                    time_zone=job.time_zone,
                    next_run_at=None if job.next_run_at is None else to_us(job.next_run_at),
                    next_due_at=None if job.next_due_at is None else to_us(job.next_due_at),
                    run_count=0,
                    tzdata_version=job.tzdata_version,
                    pause_reason="",
                    paused_at=None,
                    version=1,
                    created_at=now_us,
                    updated_at=now_us,
                )
            )
            conn.execute(
                job_requests.insert().values(
                    tenant=job.tenant, request_id=request_id, job_id=job.id, created_at=now_us
                )
            )
            return _get(conn, job.tenant, job.id), True

        record, created = await self._tx(fn)
        if created:
            await self._apply_key_limits(record)
        return record, created

    async def get(self, tenant: str, job_id: str) -> JobRecord:
        """The job, or NotFound (also for another tenant's job)."""
        return await self._tx(lambda conn: _get(conn, tenant, job_id))

    async def list(
        self, tenant: str, *, after_id: str = "", limit: int = 100, state: str = "", name_prefix: str = ""
    ) -> list[JobRecord]:
        """Up to ``limit`` of ``tenant``'s jobs with ids after ``after_id``, by id.

        A range scan on ``jobs_tenant (tenant, id)`` with a LIMIT.
        """
        if not tenant:
            raise ValueError("tenant is required")
        return await self.search(tenant=tenant, after_id=after_id, limit=limit, state=state, name_prefix=name_prefix)

    async def search(
        self, *, tenant: str = "", after_id: str = "", limit: int = 100, state: str = "", name_prefix: str = ""
    ) -> list[JobRecord]:
        """Like :meth:`list`, across every tenant when ``tenant`` is empty (operators only)."""
        if state and state not in JOB_STATES:
            raise ValueError(f"unknown job state {state!r}")

        def fn(conn: Connection) -> list[JobRecord]:
            query = sa.select(jobs).where(jobs.c.id > after_id)
            if tenant:
                query = query.where(jobs.c.tenant == tenant)
            if state:
                query = query.where(jobs.c.state == state)
            if name_prefix:
                query = query.where(jobs.c.name.startswith(name_prefix, autoescape=True))
            query = query.order_by(jobs.c.id).limit(limit)
            return [_from_row(row) for row in conn.execute(query)]

        return await self._tx(fn)

    def _locked(self, conn: Connection, tenant: str, job_id: str) -> JobRecord:
        """The job, its row locked until the transaction ends where the engine
        has row locks (SQLite locks the whole database instead). The dispatcher
        claims with SKIP LOCKED, so it passes over a job being changed rather
        than waiting or overwriting the change."""
        query = sa.select(jobs).where(jobs.c.id == job_id, jobs.c.tenant == tenant)
        if self.caps.row_locks:
            query = query.with_for_update()
        row = conn.execute(query).first()
        if row is None:
            raise NotFound("job", job_id)
        return _from_row(row)

    async def update(
        self,
        tenant: str,
        job_id: str,
        expected_version: int,
        *,
        name: str,
        spec: bytes,
        time_zone: str,
        tzdata_version: str,
        payload_size: int,
        reschedule: Reschedule | None,
        skipped: SkippedSpan | None = None,
    ) -> tuple[JobRecord, int]:
        """Replace the definition of ``job_id`` (the API validated ``spec``).

        Returns (the job as stored, how many executions were canceled). In one
        transaction, nothing written when it raises:

        - NotFound when the job is not ``tenant``'s; VersionConflict
          (FAILED_PRECONDITION) when its version is not ``expected_version``;
          QuotaExceeded when ``payload_size`` is over the tenant's
          ``max_payload_bytes``.
        - The job's executions that have not started are canceled
          (``"canceled: job updated"``): they carry the old definition.
        - The cursor: ``reschedule`` None keeps ``next_run_at`` and
          ``next_due_at``; otherwise they become ``reschedule(view)``, a pure
          decision called with what this transaction read (perhaps more than
          once, when the transaction is retried).
        - ``skipped`` (a paused job whose schedule changed): the paused span
          of the old schedule up to now, recorded as one ``job_paused`` skip
          range and added to ``run_count``. Its ``from_at`` must be the stored
          cursor and the job paused (ValueError otherwise: the caller computed
          it from another version).
        - State: a paused job stays paused (resume starts it); otherwise
          ``active`` when there is a cursor, ``completed`` when there is none.
        - ``version`` + 1, ``updated_at`` = now; ``name``, ``spec``,
          ``time_zone`` and ``tzdata_version`` replaced.
        """
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> tuple[JobRecord, int]:
            current = self._locked(conn, tenant, job_id)
            if current.version != expected_version:
                raise VersionConflict(f"job {job_id!r}", expected_version, current.version)
            quota = conn.execute(sa.select(tenants.c.max_payload_bytes).where(tenants.c.name == tenant)).scalar()
            if quota is not None and payload_size > quota:
                raise QuotaExceeded(
                    tenant, "max_payload_bytes", quota, f"payload of {payload_size} bytes is over the limit"
                )
            run_count = current.run_count
            if skipped is not None:
                if current.state != "paused" or current.next_run_at != skipped.from_at:
                    raise ValueError("skipped must start at the cursor of a paused job")
                run_count += skipped.count
            next_run_at, next_due_at = current.next_run_at, current.next_due_at
            if reschedule is not None:
                view = CursorView(current.state, current.next_run_at, run_count, _last_created_at(conn, job_id))
                fire = reschedule(view)
                next_run_at, next_due_at = (None, None) if fire is None else (fire.nominal_at, fire.due_at)
            if current.state == "paused":
                state = "paused"
            else:
                state = "active" if next_run_at is not None else "completed"
            canceled = _cancel_not_started(conn, self.caps, job_id, "canceled: job updated", now_us)
            if skipped is not None:
                _record_paused_span(conn, current, skipped, now_us)
            conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id)
                .values(
                    name=name, spec=spec, time_zone=time_zone, tzdata_version=tzdata_version, state=state,
                    next_run_at=None if next_run_at is None else to_us(next_run_at),
                    next_due_at=None if next_due_at is None else to_us(next_due_at),
                    run_count=run_count, version=current.version + 1, updated_at=now_us,
                )
            )
            return _get(conn, tenant, job_id), canceled

        record, canceled = await self._tx(fn)
        await self._apply_key_limits(record)
        return record, canceled

    async def _apply_key_limits(self, record: JobRecord) -> None:
        """The limits of the concurrency keys ``record`` names become every
        job's (the most recent write wins), in a transaction of their own
        after the job's: key rows are locked after executions rows by every
        writer, and the job's transaction locks its executions. Should this
        one not happen (the server died in between), the hand-out creates a
        missing key with the limit its job names; a changed limit then waits
        for the next write of a job naming the key."""
        limits = {key.key: max(1, key.limit) for key in job_pb2.Job.FromString(record.spec).concurrency_keys}
        if not limits:
            return
        set_at = to_us(record.updated_at)
        await self._tx(lambda conn: set_key_limits(conn, self.caps, record.tenant, limits, set_at))

    async def delete(self, tenant: str, job_id: str, expected_version: int = 0) -> int:
        """Delete the job; returns how many executions were canceled.

        In one transaction, nothing written when it raises: NotFound when the
        job is not ``tenant``'s; VersionConflict when ``expected_version`` is
        not 0 and not the stored version. The job's executions that have not
        started are canceled (``"canceled: job deleted"``), the job row is
        deleted and the tenant's ``job_count`` decremented. Executions,
        attempts and skip ranges are kept (history, pruned by retention); a
        running execution finishes and its outcome is recorded. The request
        ids that created the job stay recorded: repeating that CreateJob
        finds the job gone (NotFound) rather than creating it again.
        """
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> int:
            current = self._locked(conn, tenant, job_id)
            if expected_version and current.version != expected_version:
                raise VersionConflict(f"job {job_id!r}", expected_version, current.version)
            canceled = _cancel_not_started(conn, self.caps, job_id, "canceled: job deleted", now_us)
            conn.execute(jobs.delete().where(jobs.c.id == job_id))
            conn.execute(
                tenants.update().where(tenants.c.name == tenant).values(job_count=tenants.c.job_count - 1)
            )
            return canceled

        return await self._tx(fn)

    async def pause(self, tenant: str, job_id: str, reason: str = "") -> tuple[JobRecord, int]:
        """Pause the job; returns (the job, how many executions were canceled).

        In one transaction: NotFound when the job is not ``tenant``'s. A paused
        job is returned unchanged (0 canceled; the first reason stays).
        Otherwise the state becomes ``paused``, ``paused_at`` = now,
        ``pause_reason`` = ``reason``, ``version`` + 1, and the executions
        that have not started (claimed in the look-ahead, or waiting for a
        retry) are canceled with ``"canceled: job paused[: reason]"``.
        ``next_run_at`` and ``next_due_at`` are kept as they were: they are
        where the paused span starts (:meth:`resume`). A completed job can be
        paused too, which cancels a one-off already claimed but not started.
        """
        now_us = to_us(self.clock.now())
        text = _reason_text("job paused", reason)

        def fn(conn: Connection) -> tuple[JobRecord, int]:
            current = self._locked(conn, tenant, job_id)
            if current.state == "paused":
                return current, 0
            canceled = _cancel_not_started(conn, self.caps, job_id, text, now_us)
            conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id)
                .values(
                    state="paused", paused_at=now_us, pause_reason=reason, version=current.version + 1,
                    updated_at=now_us,
                )
            )
            return _get(conn, tenant, job_id), canceled

        return await self._tx(fn)

    async def resume(
        self,
        tenant: str,
        job_id: str,
        *,
        expected_version: int,
        next_fire: Fire | None,
        skipped: SkippedSpan | None,
        tzdata_version: str,
    ) -> tuple[JobRecord, SkipRecord | None]:
        """Resume a paused job at ``next_fire`` (the API computed it with the
        engine: the next future occurrence, or the stored cursor when that is
        still in the future).

        Returns (the job, the skip range recorded or None). In one
        transaction, nothing written when it raises:

        - NotFound when the job is not ``tenant``'s. A job that is not paused
          is returned unchanged (resuming an active job changes nothing).
        - VersionConflict when the paused job's version is not
          ``expected_version`` (it changed after the API counted the span:
          count again).
        - ``skipped``, the paused span, becomes ONE ``job_paused`` skip range
          (from the stored cursor to the last occurrence before
          ``next_fire``, with its count) and is added to ``run_count``; None
          records nothing. Its ``from_at`` must be the stored cursor
          (ValueError otherwise).
        - State ``active`` at ``next_fire`` (``completed`` when None: the
          schedule ended while paused); ``paused_at`` and ``pause_reason``
          cleared; ``tzdata_version`` set; ``version`` + 1.
        """
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> tuple[JobRecord, SkipRecord | None]:
            current = self._locked(conn, tenant, job_id)
            if current.state != "paused":
                return current, None
            if current.version != expected_version:
                raise VersionConflict(f"job {job_id!r}", expected_version, current.version)
            skip = None
            run_count = current.run_count
            if skipped is not None:
                if current.next_run_at != skipped.from_at:
                    raise ValueError("skipped must start at the paused job's cursor")
                skip = _record_paused_span(conn, current, skipped, now_us)
                run_count += skipped.count
            conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id)
                .values(
                    state="active" if next_fire is not None else "completed",
                    next_run_at=None if next_fire is None else to_us(next_fire.nominal_at),
                    next_due_at=None if next_fire is None else to_us(next_fire.due_at),
                    run_count=run_count, paused_at=None, pause_reason="", tzdata_version=tzdata_version,
                    version=current.version + 1, updated_at=now_us,
                )
            )
            return _get(conn, tenant, job_id), skip

        return await self._tx(fn)
