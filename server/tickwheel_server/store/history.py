"""History: what happened to a job's occurrences.

Executions (one row per occurrence, also the queue), their attempts (one row
per hand-out that reached a worker, but a plain success's recorded on its
execution row: read back merged, as if it were a row) and skip ranges (occurrences not run,
one row per range), read as a tenant sees them, plus the one write a tenant
makes here: canceling an execution.

Every method is scoped to one tenant: another tenant's execution or job is
indistinguishable from a missing one (NotFound). History outlives its job: a
deleted job's executions and skips stay readable for the retention window.

The reason an execution was canceled is recorded in ``dead_reason`` (the
column that says why an execution ended without succeeding); ``error`` keeps
the error of its last failed attempt, if any.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..errors import FailedPrecondition, NotFound
from .arming import as_scheduled, disarm_ids
from .base import SqlStore, one_of
from .engine import Capabilities, capabilities
from .isolation import after_not_started_canceled, request_cancel
from .peertext import escaped_text, readable_error
from .tables import attempts, executions, jobs, skips
from .timeline import NOT_STARTED, TERMINAL, in_group, is_ahead, newest, scans

EXECUTION_STATUSES = ("scheduled", "waiting", "running", "succeeded", "dead", "canceled")
SKIP_REASONS = ("overlap", "misfire", "job_paused", "tenant_paused", "calendar", "backlog")
MAX_SKIPS_PER_PAGE = 1000
"""At most this many skip ranges accompany one page of executions (newest first)."""


@dataclass(frozen=True)
class AttemptRecord:
    """One hand-out of an execution that reached a worker."""

    execution_id: str
    attempt: int
    delivery: int
    status: str
    """``running``, ``succeeded``, ``failed``, ``timed_out``, ``lost`` or ``canceled``."""
    started_at: datetime
    finished_at: datetime | None
    lateness: timedelta
    """``started_at`` minus the due instant (or the retry's ready instant); never negative."""
    worker_id: str
    error: str
    output: bytes = b""
    """The first 4 KiB of the output the worker reported; read for one
    execution only (:meth:`HistoryStore.get_execution`), empty in lists."""


@dataclass(frozen=True)
class ExecutionRecord:
    """One occurrence of a job (or a manual trigger) and where it is in its life."""

    id: str
    job_id: str
    tenant: str
    partition: int
    origin: str
    """``scheduled``, ``trigger`` or ``backfill``."""
    nominal_at: datetime
    due_at: datetime
    ready_at: datetime
    attempt: int
    delivery: int
    status: str
    """One of :data:`EXECUTION_STATUSES`."""
    owner: str | None
    worker_id: str | None
    missed_count: int
    reap_count: int
    payload: bytes
    error: str
    dead_reason: str
    """Why it ended without succeeding: the dead-letter reason, or ``canceled: …``."""
    created_at: datetime
    finished_at: datetime | None
    attempts: tuple[AttemptRecord, ...] = ()
    """Oldest first (by attempt, then delivery). Empty unless the read says it fills them."""


@dataclass(frozen=True)
class SkipRecord:
    """A range of a job's occurrences that were not run."""

    id: str
    job_id: str
    tenant: str
    from_at: datetime
    """Nominal instant of the first skipped occurrence."""
    to_at: datetime
    """Nominal instant of the last skipped occurrence (inclusive)."""
    count: int
    reason: str
    """One of :data:`SKIP_REASONS`."""
    created_at: datetime


@dataclass(frozen=True)
class ExecutionPage:
    """One page of a job's history, newest nominal instant first."""

    executions: tuple[ExecutionRecord, ...]
    skips: tuple[SkipRecord, ...]
    """Skip ranges overlapping the page's span (see :meth:`HistoryStore.list_executions`), newest first."""
    more: bool
    """True when older executions match: continue with :attr:`next_key`."""

    @property
    def next_key(self) -> tuple[datetime, str] | None:
        """``before_key`` for the next page, or None on the last page."""
        if not self.more or not self.executions:
            return None
        last = self.executions[-1]
        return last.nominal_at, last.id


def _opt(micros: int | None) -> datetime | None:
    return None if micros is None else from_us(micros)


def attempt_from_row(row) -> AttemptRecord:
    return AttemptRecord(
        execution_id=row.execution_id,
        attempt=row.attempt,
        delivery=row.delivery,
        status=row.status,
        started_at=from_us(row.started_at),
        finished_at=_opt(row.finished_at),
        lateness=timedelta(microseconds=max(0, row.lateness_us)),
        worker_id=row.worker_id,
        error=readable_error(row.error),
        output=bytes(getattr(row, "output", None) or b""),
    )


def execution_from_row(row, attempt_records: Iterable[AttemptRecord] = (), *, now_us: int) -> ExecutionRecord:
    """The record of a stored row as a reader at ``now_us`` sees it: an
    armed execution (:mod:`.arming`), and a running one started ahead of a
    send instant after ``now_us`` (:func:`.timeline.is_ahead`: no worker
    has it yet), is ``scheduled``, at the delivery it had before, owned and
    held by no one. ``now_us`` is the clock the read's status filter used."""
    worker_id = row.worker_id
    if is_ahead(row.status, row.handed_out_at, now_us):
        # Armed (delivery + 1) then started: it reads as it did while armed.
        status, delivery, owner, worker_id = "scheduled", row.delivery - 1, None, None
    else:
        status, delivery, owner = as_scheduled(row.status, row.delivery, row.owner)
    return ExecutionRecord(
        id=row.id,
        job_id=row.job_id,
        tenant=row.tenant,
        partition=row.partition,
        origin=row.origin,
        nominal_at=from_us(row.nominal_at),
        due_at=from_us(row.due_at),
        ready_at=from_us(row.ready_at),
        attempt=row.attempt,
        delivery=delivery,
        status=status,
        owner=owner,
        worker_id=worker_id,
        missed_count=row.missed_count,
        reap_count=row.reap_count,
        payload=bytes(row.payload),
        error=readable_error(row.error),
        dead_reason=escaped_text(row.dead_reason),
        created_at=from_us(row.created_at),
        finished_at=_opt(row.finished_at),
        attempts=tuple(attempt_records),
    )


def skip_from_row(row) -> SkipRecord:
    return SkipRecord(
        id=row.id,
        job_id=row.job_id,
        tenant=row.tenant,
        from_at=from_us(row.from_at),
        to_at=from_us(row.to_at),
        count=row.count,
        reason=row.reason,
        created_at=from_us(row.created_at),
    )


_LISTED_ATTEMPT_COLUMNS = [column for column in attempts.c if column.name != "output"]


def _attempts_on_rows(execution_ids: list[str] | None, *, output: bool, caps: Capabilities | None = None):
    """The attempts recorded on execution rows (a plain success's, migration
    0025), shaped as rows of ``attempts``: status ``succeeded``, no error,
    the lateness an attempt row would have had (from the later of the due
    and ready instants)."""
    later = sa.case((executions.c.due_at > executions.c.ready_at, executions.c.due_at), else_=executions.c.ready_at)
    columns = [
        executions.c.id.label("execution_id"), executions.c.attempt, executions.c.delivery,
        sa.literal_column("'succeeded'").label("status"), executions.c.attempt_started_at.label("started_at"),
        executions.c.finished_at,
        sa.case((executions.c.attempt_started_at > later, executions.c.attempt_started_at - later), else_=0)
        .label("lateness_us"),
        executions.c.attempt_worker_id.label("worker_id"), sa.literal_column("''").label("error"),
        executions.c.attempt_waited_us.label("waited_us"),
        executions.c.attempt_worker_started_at.label("worker_started_at"),
    ]
    if output:
        columns.append(executions.c.attempt_output.label("output"))
    query = sa.select(*columns).where(executions.c.attempt_started_at.is_not(None))
    return query if execution_ids is None else query.where(one_of(caps, executions.c.id, execution_ids))


def attempt_history(*, output: bool = True):
    """Every recorded attempt, as a subquery named ``attempts`` with the
    columns of the ``attempts`` table (``output`` only when asked): its rows
    and the attempts plain successes keep on their execution rows. For
    audits and tests; the store's own reads filter each branch by key
    (:func:`_attempts_of`)."""
    columns = attempts.c if output else _LISTED_ATTEMPT_COLUMNS
    on_rows = _attempts_on_rows(None, output=output)
    return sa.union_all(sa.select(*columns), on_rows).subquery("attempts")


def _attempts_of(conn: Connection, execution_ids: list[str], *, output: bool = False) -> dict[str, list[AttemptRecord]]:
    """The attempts of ``execution_ids``, oldest first (by attempt, then
    delivery), in ONE query (primary-key ranges of ``attempts`` and of
    ``executions``, for the attempt a plain success keeps on its row); with
    their output only when ``output`` (one execution: a page of them could
    carry 4 KiB per attempt)."""
    found: dict[str, list[AttemptRecord]] = {ident: [] for ident in execution_ids}
    if not execution_ids:
        return found
    caps = capabilities(conn)
    query = sa.union_all(
        sa.select(*(attempts.c if output else _LISTED_ATTEMPT_COLUMNS))
        .where(one_of(caps, attempts.c.execution_id, execution_ids)),
        _attempts_on_rows(execution_ids, output=output, caps=caps),
    )
    for row in sorted(conn.execute(query), key=lambda r: (r.execution_id, r.attempt, r.delivery)):
        found[row.execution_id].append(attempt_from_row(row))
    return found


def _get_row(conn: Connection, tenant: str, execution_id: str):
    row = conn.execute(
        sa.select(executions).where(executions.c.id == execution_id, executions.c.tenant == tenant)
    ).first()
    if row is None:
        raise NotFound("execution", execution_id)
    return row


def _job_visible(conn: Connection, tenant: str, job_id: str) -> bool:
    """The job exists for ``tenant``, or did: its history is still retained."""
    if conn.execute(sa.select(jobs.c.id).where(jobs.c.id == job_id, jobs.c.tenant == tenant)).first():
        return True
    for scan in scans([executions.c.id], job_id=job_id, tenant=tenant):
        if conn.execute(scan.query.limit(1)).first() is not None:
            return True
    skipped = sa.select(skips.c.id).where(skips.c.job_id == job_id, skips.c.tenant == tenant).limit(1)
    return conn.execute(skipped).first() is not None


class HistoryStore(SqlStore):
    """Executions, attempts and skip ranges, as a tenant reads them.

    Reads never block dispatch: they are range scans with a LIMIT on a job's
    indexes of each status group (``executions_ended_job``,
    ``executions_not_started_job``, ``executions_busy``: see
    :mod:`.timeline`), the attempts primary key and ``skips_job (job_id,
    to_at)``.
    """

    async def last_run(self, tenant: str, job_id: str, scan: int = 1000) -> ExecutionRecord | None:
        """The job's most recently finished execution (succeeded, dead or
        canceled) with its attempts, or None: why the last run failed is its
        last attempt's error. A backward range scan on
        ``executions_ended_job``: of the ``scan`` ended most recently by
        nominal instant, the one that ended last."""

        def fn(conn: Connection) -> ExecutionRecord | None:
            recent = (
                sa.select(executions)
                .where(executions.c.job_id == job_id, executions.c.tenant == tenant, *in_group(TERMINAL))
                .order_by(executions.c.nominal_at.desc(), executions.c.id.desc())
                .limit(scan)
                .subquery()
            )
            row = conn.execute(
                sa.select(recent)
                .where(recent.c.finished_at.is_not(None))
                .order_by(recent.c.finished_at.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            return execution_from_row(row, _attempts_of(conn, [row.id])[row.id], now_us=to_us(self.clock.now()))

        return await self._tx(fn)

    async def get_execution(self, tenant: str, execution_id: str) -> ExecutionRecord:
        """The execution with its attempts (oldest first, with their output);
        NotFound when missing or another tenant's. Two statements, one transaction."""

        def fn(conn: Connection) -> ExecutionRecord:
            row = _get_row(conn, tenant, execution_id)
            found = _attempts_of(conn, [row.id], output=True)
            return execution_from_row(row, found[row.id], now_us=to_us(self.clock.now()))

        return await self._tx(fn)

    async def list_executions(
        self,
        tenant: str,
        job_id: str,
        *,
        before_key: tuple[datetime, str] | None = None,
        limit: int = 50,
        statuses: Iterable[str] = (),
        from_at: datetime | None = None,
        to_at: datetime | None = None,
    ) -> ExecutionPage:
        """One page of ``job_id``'s executions, newest nominal instant first.

        - Paged by the key ``(nominal_at, id)``, descending: ``before_key`` is
          the previous page's :attr:`ExecutionPage.next_key` (None for the
          first page); a page holds at most ``limit`` executions.
        - ``statuses`` (empty: all), ``from_at`` (inclusive) and ``to_at``
          (exclusive) filter on status and nominal instant; the status is
          the one shown at this store's clock, read once for the filter
          and the page (:func:`execution_from_row`: a run started ahead is
          ``scheduled`` until its send instant).
        - Each execution carries its attempts, oldest first, fetched for the
          whole page in ONE query.
        - ``skips``: the skip ranges (whatever the status filter) that overlap
          the page's span, newest first, at most :data:`MAX_SKIPS_PER_PAGE`.
          The span runs from the page's oldest execution (or ``from_at``, or
          the beginning of time on the last page) to ``before_key``'s instant
          (or ``to_at``, or the end of time on the first page), both
          inclusive, so consecutive pages cover the whole timeline and every
          range appears on at least one page; a range crossing a page
          boundary appears on both.
        - NotFound when the job is not ``tenant``'s and has no retained
          history under ``tenant`` (a deleted job's history stays readable).

        Statements in one transaction, each a bounded range scan: the job
        check (primary key), the page (per status group the filter wants,
        backwards on the group's job index from ``before_key`` with LIMIT
        ``limit`` + 1, merged: see :mod:`.timeline`), its attempts (primary
        key), the skips (``skips_job``, with a LIMIT).
        """
        if limit < 1:
            raise ValueError("limit must be >= 1")
        wanted = tuple(statuses)
        unknown = set(wanted) - set(EXECUTION_STATUSES)
        if unknown:
            raise ValueError(f"unknown execution statuses {sorted(unknown)}")
        from_us_ = None if from_at is None else to_us(from_at)
        to_us_ = None if to_at is None else to_us(to_at)
        key = None if before_key is None else (to_us(before_key[0]), before_key[1])

        def fn(conn: Connection) -> ExecutionPage:
            if not _job_visible(conn, tenant, job_id):
                raise NotFound("job", job_id)
            span = []
            if from_us_ is not None:
                span.append(executions.c.nominal_at >= from_us_)
            if to_us_ is not None:
                span.append(executions.c.nominal_at < to_us_)
            now_us = to_us(self.clock.now())  # one reader's clock: for the filter and what is shown
            group_scans = scans([executions], job_id=job_id, tenant=tenant, statuses=wanted, now_us=now_us,
                                where=span, before=key)
            rows = newest(conn, group_scans, limit + 1)
            more = len(rows) > limit
            rows = rows[:limit]
            found = _attempts_of(conn, [row.id for row in rows])
            page = tuple(execution_from_row(row, found[row.id], now_us=now_us) for row in rows)

            upper = key[0] if key is not None else None
            lower = to_us(page[-1].nominal_at) if more else from_us_
            skip_query = sa.select(skips).where(skips.c.job_id == job_id, skips.c.tenant == tenant)
            if lower is not None:
                skip_query = skip_query.where(skips.c.to_at >= lower)
            if upper is not None:
                skip_query = skip_query.where(skips.c.from_at <= upper)
            if to_us_ is not None:
                skip_query = skip_query.where(skips.c.from_at < to_us_)
            skip_query = skip_query.order_by(skips.c.to_at.desc(), skips.c.from_at.desc()).limit(MAX_SKIPS_PER_PAGE)
            ranges = tuple(skip_from_row(row) for row in conn.execute(skip_query))
            return ExecutionPage(executions=page, skips=ranges, more=more)

        return await self._tx(fn)

    async def cancel_execution(self, tenant: str, execution_id: str, reason: str = "") -> ExecutionRecord:
        """Cancel one execution; returns it as it is afterwards, with its attempts.

        - ``scheduled`` (armed for its instant included) or ``waiting``
          (no worker holds it): becomes
          ``canceled`` at once, ``finished_at`` = now, ``dead_reason`` =
          ``"canceled: <reason>"`` (``"canceled: by request"`` without one),
          escaped (:func:`.peertext.escaped_text`) as every reason stored.
          Its attempts so far stay as they are.
        - ``running``: a cancel request is recorded (``cancel_requested_at``,
          with the reason) and it is returned still ``running``. The server
          that owns it tells the worker holding it; the worker's CANCELED
          result ends it ``canceled`` with the reason (so does a retryable
          failure, or its requeue after the worker died). A second request
          keeps the first reason. A row started ahead of its send instant
          (:func:`.timeline.is_ahead`) is running to this write, so its
          cancel is requested and signalled once it is sent; the answer
          shows it as every reader does until then: ``scheduled``.
        - ``succeeded``, ``dead`` or ``canceled``: FailedPrecondition, nothing
          written.
        - NotFound when missing or another tenant's.
        """
        now_us = to_us(self.clock.now())
        text = escaped_text(f"canceled: {reason}") if reason else "canceled: by request"

        def fn(conn: Connection) -> ExecutionRecord:
            # Armed for its instant, it is not started: disarmed first, it is
            # canceled like any scheduled one, and its server's start finds it
            # no longer armed, so it is never sent.
            disarm_ids(conn, [execution_id], tenant=tenant)
            # The status condition in the UPDATE is the fence: a row a gateway
            # moved to running meanwhile is not touched, at any isolation level.
            moved = conn.execute(
                executions.update()
                .where(
                    executions.c.id == execution_id,
                    executions.c.tenant == tenant,
                    *in_group(NOT_STARTED),
                )
                .values(status="canceled", finished_at=now_us, dead_reason=text)
            ).rowcount
            row = _get_row(conn, tenant, execution_id)
            if not moved and row.status in TERMINAL:
                raise FailedPrecondition(f"execution {execution_id!r}", f"it already ended ({row.status})")
            if moved:
                after_not_started_canceled(conn, self.caps, [row])
            elif row.status == "running":
                request_cancel(conn, [(row.id, text)], now_us)
            # Started ahead of its send instant, it is canceled as a running
            # one (through its worker, once sent) but answered as readers see it.
            return execution_from_row(row, _attempts_of(conn, [row.id])[row.id], now_us=now_us)

        return await self._tx(fn)
