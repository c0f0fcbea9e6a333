"""Jobs: definitions, state and the schedule cursor (``next_run_at``, in ``job_cursors``: migration 0032).

The store treats a job's definition (``spec``, the serialised
``tickwheel.v1.Job``) as opaque bytes, except that the limits of the
concurrency keys it names are recorded in ``concurrency_keys`` after a
create or update (the most recent write wins); the API layer validates it and computes
the fires (first fire, new cursor, the span a pause skipped) with the schedule
engine before calling the store, which applies them in one transaction.

The cursor ``next_run_at`` is the nominal instant of the first occurrence not
yet consumed: every earlier occurrence has an execution row (it was created)
or lies in a skip range. An occurrence the overlap policy skipped has no row;
its skip range (reason ``overlap``) accounts for it.

What a change does to the job's executions that have not started
(``scheduled`` or ``waiting``), in the transaction that changes the job (the
rules are :mod:`tickwheel_server.policy.jobchanges`'; a ``running`` execution is
never touched):

- pause holds them (``waiting`` with ``wait_key`` :data:`.isolation.PAUSED_WAIT`);
- resume releases them, except the scheduled occurrences now past their
  misfire threshold, which join the paused span's skip range;
- update re-plans the pending scheduled occurrences when the schedule
  changed, refreshes their payload when it changed and every row's handler
  when it changed, and leaves them alone otherwise;
- delete cancels them (``"canceled: job deleted"``).

Every change of a job runs at READ COMMITTED on PostgreSQL (``row_locked``):
it locks the job row and its cursor first, then reads the executions it changes locked
(or changes them with writes conditional on their status), so what it
decides from is what it writes; creating, triggering and backfilling hold
or share-lock the job row (docs/architecture.md, "Job writes at scale").
"""


from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from sqlalchemy.engine import Connection

from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import from_us, partition_of, to_us

from ..errors import NotFound, TickwheelError, VersionConflict
from ..jobspec import key_limits
from ..policy.jobchanges import PausedSpan, Reschedule, SkippedSpan
from .base import SqlStore
from .history import SkipRecord
from .isolation import set_key_limits
from .jobbatch import (
    Decide, JobChange, PauseOutcome, ResumeDecide, ResumeOutcome, UpdateOutcome, apply_resume, apply_update,
    delete_jobs, pause_jobs, payload_limit, rekey_written, resume_jobs, row_values, update_jobs,
)
from .jobcreate import CREATED, Outcome, create_jobs
from .jobpages import PAGE_SCAN, JobPage, read_page
from .jobrecords import (
    JOB_STATES, JobRecord, NewJob, NewJobs, get_job, job_record,
    select_jobs, write_cursors,
)
from .quota import SlotDry, SlotPicker
from .revisions import keep_revisions, revision_of
from .tables import jobs


Check = Callable[[Sequence], None]
"""What a batch call checks of its outcomes (one per item) inside its
transaction, before the commit: an error it raises rolls the call back
and is raised to the caller (the API's answer budget,
:class:`~tickwheel_server.api.batchview.AnswerBudget`)."""


def _checked(check: Check | None, result, *, first: bool = False):
    """``result`` of a batch's store function, after ``check`` saw its
    outcomes (``result[0]`` when ``first``)."""
    if check is not None:
        check(result[0] if first else result)
    return result

class JobStore(SqlStore):
    """Jobs of every tenant; every method is scoped to one tenant.

    A job of another tenant is indistinguishable from a missing one (NotFound).
    """

    def __init__(self, engine, clock, *, partition_count: int) -> None:
        super().__init__(engine, clock)
        if partition_count < 1:
            raise ValueError("partition_count must be >= 1")
        self.partition_count = partition_count
        self._slots = SlotPicker()

    async def create(self, job: NewJob, request_id: str) -> tuple[JobRecord, bool]:
        """Create ``job`` unless ``request_id`` was seen for this tenant.

        Returns (the job, True) when created, (the job the first request
        created, False) on a repeat; a repeat writes nothing. In one
        transaction: the request id is recorded, the tenant's quotas are
        checked (QuotaExceeded, nothing written), the job row is inserted
        (:func:`.jobcreate.create_jobs`). Committed before it returns.
        """
        (outcome,) = await self.create_many(job.tenant, [(job, request_id)])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def create_many(self, tenant: str, items: Sequence[tuple[NewJob, str]]) -> list[Outcome]:
        """Create each (job, request id) of ``tenant`` as :meth:`create`
        would, in one transaction with a fixed number of statements; one
        outcome per item in order: (the job, created) or the error that
        item alone would have raised (nothing of it written). NotFound is
        raised when the tenant does not exist (nothing written). The
        concurrency-key limits the created jobs name are applied after, in
        a transaction of their own (:meth:`_apply_key_limits`)."""
        if not items:
            return []
        batch = NewJobs.of(tenant, items, _key_limits)
        outcomes, created_at = await self.create_batch(batch)
        return [
            (batch.record(index, partition_of(batch.ids[index], self.partition_count), created_at), True)
            if outcome is CREATED else outcome
            for index, outcome in enumerate(outcomes)
        ]

    async def create_batch(
        self, batch: NewJobs, check: Check | None = None
    ) -> tuple[list[Outcome | None], datetime]:
        """:meth:`create_many` of a batch given column by column: one
        outcome per job in order, :data:`~.jobcreate.CREATED` for a job
        created as ``batch`` gives it (its record:
        ``batch.record(index, partition, created_at)``), and the instant
        the created jobs were created at. The key limits ``batch`` carries
        are applied as :meth:`create_many` applies them. ``check``, when
        given, sees the outcomes before the commit (:data:`Check`)."""
        if not batch:
            if check is not None:
                check([])
            return [], self.clock.now()
        now_us = to_us(self.clock.now())
        with self._slots.slot(batch.tenant) as slot:

            def fn(conn: Connection, deal: bool = False) -> list[Outcome | None]:
                return _checked(check, create_jobs(
                    conn, self.caps, batch, slot=slot, partition_count=self.partition_count, now_us=now_us, deal=deal
                ))  # fmt: skip

            try:
                outcomes = await self._tx(fn, row_locked=True)
            except SlotDry:  # the slot ran dry: again, dealing first (its lock let go by the rollback)
                outcomes = await self._tx(lambda conn: fn(conn, deal=True), row_locked=True)
        limits: dict[str, int] = {}
        for job_limits, outcome in zip(batch.key_limits, outcomes):
            if job_limits and outcome is CREATED:
                limits.update(job_limits)
        if limits:
            await self._apply_key_limits(batch.tenant, limits, now_us)
        return outcomes, from_us(now_us)

    async def get(self, tenant: str, job_id: str) -> JobRecord:
        """The job, or NotFound (also for another tenant's job)."""
        return await self._tx(lambda conn: get_job(conn, tenant, job_id))

    async def list(
        self, tenant: str, *, after_id: str = "", limit: int = 100, state: str = "", name_prefix: str = ""
    ) -> list[JobRecord]:
        """Up to ``limit`` of ``tenant``'s jobs with ids after ``after_id``, by id.

        A range scan on ``jobs_tenant (tenant, id)`` that stops at the page,
        each job's cursor read by its key, whatever the statistics
        (:func:`.jobpages.read_page`). A filtered page may be short (its
        scan bounded: :meth:`page` says where it stopped).
        """
        if not tenant:
            raise ValueError("tenant is required")
        return (await self.page(tenant=tenant, after_id=after_id, limit=limit, state=state,
                                name_prefix=name_prefix)).jobs

    async def search(
        self, *, tenant: str = "", after_id: str = "", limit: int = 100, state: str = "", name_prefix: str = ""
    ) -> list[JobRecord]:
        """Like :meth:`list`, across every tenant when ``tenant`` is empty (operators only)."""
        return (await self.page(tenant=tenant, after_id=after_id, limit=limit, state=state,
                                name_prefix=name_prefix)).jobs

    async def page(
        self, *, tenant: str = "", after_id: str = "", limit: int = 100, state: str = "", name_prefix: str = ""
    ) -> JobPage:
        """Like :meth:`search`, with where a filtered page's bounded scan
        stopped before it filled (:class:`.jobpages.JobPage`): the next
        page starts after it."""
        if state and state not in JOB_STATES:
            raise ValueError(f"unknown job state {state!r}")
        if not 1 <= limit <= PAGE_SCAN:
            raise ValueError(f"limit must be 1 to {PAGE_SCAN}")
        return await self._tx(lambda conn: read_page(
            conn, self.caps, tenant=tenant, after_id=after_id, limit=limit, state=state, name_prefix=name_prefix
        ))

    def _locked(self, conn: Connection, tenant: str, job_id: str) -> JobRecord:
        """The job, its row locked until the transaction ends where the engine
        has row locks (SQLite locks the whole database instead). The dispatcher
        claims with SKIP LOCKED, so it passes over a job being changed rather
        than waiting or overwriting the change."""
        query = select_jobs().where(jobs.c.id == job_id, jobs.c.tenant == tenant)
        if self.caps.row_locks:
            query = query.with_for_update()  # the job's row and its cursor's
        row = conn.execute(query).first()
        if row is None:
            raise NotFound("job", job_id)
        return job_record(row)

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
        changed_by: str = "",
        update_mask: Sequence[str] = (),
    ) -> tuple[JobRecord, int]:
        """Replace the definition of ``job_id`` (the API validated ``spec``).

        Returns (the job as stored, how many executions were canceled). In one
        transaction, nothing written when it raises:

        - NotFound when the job is not ``tenant``'s; VersionConflict
          (FAILED_PRECONDITION) when its version is not ``expected_version``;
          QuotaExceeded when ``payload_size`` is over the tenant's
          ``max_payload_bytes``.
        - ``reschedule`` None (the schedule did not change): the cursor and
          ``run_count`` stay; the pending occurrences (scheduled, claimed
          ahead, not started: see :class:`.jobrecords.CursorView`) keep
          their rows and take the new payload if it changed.
        - ``reschedule`` given: it is called with what this transaction read
          (perhaps more than once, when the transaction is retried) and its
          :class:`~tickwheel_server.policy.jobchanges.Recreation` applied: the
          pending occurrences it keeps are re-created in place (same id, the
          new due instant, payload and handler), those it cancels end
          ``canceled`` with :data:`.jobexecutions.NOT_IN_NEW_SCHEDULE`,
          those it creates are inserted (held when the job is paused); the
          cursor and ``run_count`` become its own.
        - Every execution not started takes the new handler if it changed
          (the row's handler routes the hand-out, whose target is the job's).
          Nothing else of an execution changes; a running one is never
          touched; retries, triggers and backfills keep their payload.
        - ``skipped`` (a paused job whose schedule changed): the paused span
          of the old schedule up to now, recorded as one ``job_paused`` skip
          range and added to ``run_count``. Its ``from_at`` must be the stored
          cursor and the job paused (ValueError otherwise: the caller computed
          it from another version).
        - State: a paused job stays paused (resume starts it, and what the
          update created or kept stays held); otherwise ``active`` when
          there is a cursor, ``completed`` when there is none.
        - ``version`` + 1, ``updated_at`` = now; ``name``, ``spec``,
          ``time_zone`` and ``tzdata_version`` replaced.
        - The definition replaced is kept as a revision, with ``changed_by``
          and ``update_mask`` (:mod:`.revisions`).
        """
        now_us = to_us(self.clock.now())
        change = JobChange(
            name=name, spec=spec, time_zone=time_zone, tzdata_version=tzdata_version, payload_size=payload_size,
            reschedule=reschedule, skipped=skipped, changed_by=changed_by, update_mask=tuple(update_mask),
        )

        def fn(conn: Connection) -> tuple[JobRecord, int]:
            current = self._locked(conn, tenant, job_id)
            if current.version != expected_version:
                raise VersionConflict(f"job {job_id!r}", expected_version, current.version)
            updated, canceled = apply_update(
                conn, self.caps, current, change, limit=payload_limit(conn, tenant), now_us=now_us
            )
            conn.execute(jobs.update().where(jobs.c.id == job_id).values(**row_values(updated)))
            write_cursors(conn, [updated])
            rekey_written(conn, tenant, [updated], now_us)
            keep_revisions(conn, [revision_of(current, updated, changed_by=changed_by, update_mask=update_mask)])
            return get_job(conn, tenant, job_id), canceled

        record, canceled = await self._tx(fn, row_locked=True)
        await self._apply_record_key_limits(record)
        return record, canceled

    async def update_many(
        self, tenant: str, items: Sequence[tuple[str, int, Decide]], check: Check | None = None
    ) -> list[UpdateOutcome]:
        """Apply each (job id, expected version, decision) of ``tenant`` in
        request order, each as :meth:`update` would, in one transaction
        (:func:`.jobbatch.update_jobs`); one outcome per item: (the job after
        it, executions canceled) or the error that item alone would have
        raised, nothing of it written. The concurrency-key limits of the
        changed jobs are applied after, as :meth:`update` does. ``check``:
        see :data:`Check`."""
        if not items:
            return []
        now_us = to_us(self.clock.now())
        outcomes, changed = await self._tx(
            lambda conn: _checked(check, update_jobs(conn, self.caps, tenant, items, now_us=now_us), first=True),
            row_locked=True,
        )
        if changed:
            await self._apply_record_key_limits(*changed)
        return outcomes

    async def delete_many(self, tenant: str, items: Sequence[tuple[str, int]]) -> list[int | TickwheelError]:
        """Delete each (job id, expected version; 0 for any) of ``tenant`` in
        request order, each as :meth:`delete` would, in one transaction
        (:func:`.jobbatch.delete_jobs`); one outcome per item: how many
        executions were canceled, or the error that item alone would have
        raised (NotFound for an id deleted by an earlier item)."""
        if not items:
            return []
        now_us = to_us(self.clock.now())
        return await self._tx(lambda conn: delete_jobs(conn, self.caps, tenant, items, now_us=now_us), row_locked=True)

    async def pause_many(
        self, tenant: str, items: Sequence[tuple[str, str]], check: Check | None = None
    ) -> list[PauseOutcome]:
        """Pause each (job id, reason) of ``tenant`` in request order, each as
        :meth:`pause` would, in one transaction (:func:`.jobbatch.pause_jobs`);
        one outcome per item: (the job, executions held) or NotFound.
        ``check``: see :data:`Check`."""
        if not items:
            return []
        now_us = to_us(self.clock.now())
        return await self._tx(
            lambda conn: _checked(check, pause_jobs(conn, self.caps, tenant, items, now_us=now_us)), row_locked=True
        )

    async def resume_many(
        self, tenant: str, items: Sequence[tuple[str, ResumeDecide]], *, now: datetime, tzdata_version: str,
        check: Check | None = None,
    ) -> list[ResumeOutcome]:
        """Resume each (job id, span decision) of ``tenant`` in request order,
        each as :meth:`resume` would at ``now``, in one transaction
        (:func:`.jobbatch.resume_jobs`); the span is counted under the job's
        lock, so no version can move in between. One outcome per item: (the
        job, the skip range or None, executions released) or the error that
        item alone would have raised. ``check``: see :data:`Check`."""
        if not items:
            return []
        now_us = to_us(self.clock.now())
        return await self._tx(
            lambda conn: _checked(check, resume_jobs(
                conn, self.caps, tenant, items, decided_at=now, tzdata_version=tzdata_version, now_us=now_us
            )),  # fmt: skip
            row_locked=True,
        )

    async def _apply_record_key_limits(self, *records: JobRecord) -> None:
        """:meth:`_apply_key_limits` of the keys ``records`` name (within
        ``records``, the last one's limit wins)."""
        limits: dict[str, int] = {}
        for record in records:
            limits.update(key_limits(job_pb2.Job.FromString(record.spec)))
        if limits:
            await self._apply_key_limits(
                records[0].tenant, limits, max(to_us(record.updated_at) for record in records)
            )

    async def _apply_key_limits(self, tenant: str, limits: dict[str, int], set_at: int) -> None:
        """The ``limits`` (key → limit) of concurrency keys that jobs of
        ``tenant`` written at ``set_at`` name become every job's (the most
        recent write wins), in a transaction of their own after the jobs':
        key rows are locked after executions rows by every writer, and a
        job's transaction locks its executions. Should this one not happen
        (the server died in between), the hand-out creates a missing key
        with the limit its job names; a changed limit then waits for the
        next write of a job naming the key."""
        await self._tx(lambda conn: set_key_limits(conn, self.caps, tenant, limits, set_at))

    async def delete(self, tenant: str, job_id: str, expected_version: int = 0) -> int:
        """Delete the job; returns how many executions were canceled.

        In one transaction, nothing written when it raises: NotFound when the
        job is not ``tenant``'s; VersionConflict when ``expected_version`` is
        not 0 and not the stored version. The job's executions that have not
        started are canceled (``"canceled: job deleted"``), the job row is
        deleted and its unit of the quota given back to its slot. Executions,
        attempts and skip ranges are kept (history, pruned by retention); a
        running execution finishes and its outcome is recorded. The request
        ids that created the job stay recorded: repeating that CreateJob
        finds the job gone (NotFound) rather than creating it again.
        """
        (outcome,) = await self.delete_many(tenant, [(job_id, expected_version)])
        if isinstance(outcome, TickwheelError):
            raise outcome
        return outcome

    async def pause(self, tenant: str, job_id: str, reason: str = "") -> tuple[JobRecord, int]:
        """Pause the job; returns (the job, how many executions it holds).

        In one transaction: NotFound when the job is not ``tenant``'s. A paused
        job is returned unchanged (0 held; the first reason stays).
        Otherwise the state becomes ``paused``, ``paused_at`` = now,
        ``pause_reason`` = ``reason``, ``version`` + 1, and the executions
        that have not started (claimed in the look-ahead, waiting for a
        retry, triggered or backfilled) are held: no hand-out takes them
        until :meth:`resume` releases them. A running execution finishes.
        ``next_run_at`` and ``next_due_at`` are kept as they were: they are
        where the paused span starts (:meth:`resume`). A completed job can be
        paused too, which holds a one-off already claimed but not started.
        """
        (outcome,) = await self.pause_many(tenant, [(job_id, reason)])
        if isinstance(outcome, TickwheelError):
            raise outcome
        return outcome

    async def resume(
        self,
        tenant: str,
        job_id: str,
        *,
        expected_version: int,
        span: PausedSpan,
        tzdata_version: str,
        now: datetime | None = None,
    ) -> tuple[JobRecord, SkipRecord | None, int]:
        """Resume a paused job at ``span.next_fire`` (the API computed
        ``span`` with the engine at ``now``:
        :func:`~tickwheel_server.policy.jobchanges.resume_plan`).

        Returns (the job, the skip range recorded or None, how many held
        executions were released). In one transaction, nothing written when
        it raises:

        - NotFound when the job is not ``tenant``'s. A job that is not paused
          is returned unchanged (resuming an active job changes nothing).
        - VersionConflict when the paused job's version is not
          ``expected_version`` (it changed after the API counted the span:
          count again).
        - The held executions: those
          :func:`~tickwheel_server.policy.jobchanges.expired_at_resume` says expired
          by ``now`` (default: the store's clock) under the job's misfire
          threshold are deleted and counted in the skip range; every other
          is released (``scheduled`` again, as it was before the pause) and
          handed out at its ``ready_at``.
        - ``span.skipped``, the paused span, and the expired executions become ONE
          ``job_paused`` skip range (from the earliest to the latest of their
          nominal instants, with their count); ``skipped.count`` is added to
          ``run_count`` (the expired executions were counted when claimed).
          Nothing is recorded when there is neither. ``span.skipped.from_at``
          must be the stored cursor (ValueError otherwise). The span's late
          occurrences (within the misfire threshold) beyond what the
          released executions leave room for join the range
          (:meth:`~tickwheel_server.policy.jobchanges.PausedSpan.beside`).
        - State ``active`` at the first late one or the next future
          occurrence (``completed`` when None: the schedule ended while paused); ``paused_at`` and ``pause_reason``
          cleared; ``tzdata_version`` set; ``version`` + 1.
        """
        now_us = to_us(self.clock.now())
        decided_at = now if now is not None else from_us(now_us)

        def fn(conn: Connection) -> tuple[JobRecord, SkipRecord | None, int]:
            current = self._locked(conn, tenant, job_id)
            if current.state != "paused":
                return current, None, 0
            if current.version != expected_version:
                raise VersionConflict(f"job {job_id!r}", expected_version, current.version)
            if span.skipped is not None and current.next_run_at != span.skipped.from_at:
                raise ValueError("skipped must start at the paused job's cursor")
            return apply_resume(
                conn, self.caps, current, span=span, tzdata_version=tzdata_version, decided_at=decided_at,
                now_us=now_us,
            )

        return await self._tx(fn, row_locked=True)


def _key_limits(job: NewJob) -> tuple[tuple[str, int], ...]:
    if job.key_limits is not None:
        return job.key_limits
    return key_limits(job_pb2.Job.FromString(job.spec))
