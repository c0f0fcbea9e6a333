"""Executions a tenant asks for: run now (trigger) and backfill a window.

A trigger's execution id is ``<job id>:trigger:<request id>``: a retried call
(the same request id) finds the execution the first call created and
creates nothing, while two distinct requests in the same second are two
executions. A backfill creates the occurrences the schedule had in
``[from, to)`` with their normal derived ids (``<job id>:<nominal
instant>``), so a repeated or overlapping backfill, or one over a window the
dispatcher already ran, creates nothing twice: each insert is ``ON CONFLICT
DO NOTHING`` and the ids already present are reported as existing.

Backfilled executions are spread at :data:`BACKFILL_RATE` per second from
the request's instant (their ``due_at`` and ``ready_at``; the nominal instant
stays the schedule's), so a large window drains at a steady rate instead of
landing on the workers at once. Everything is inserted in batches of 1000
in one transaction per call; the API caps a call at 10 000 occurrences.

When the API call is traced, its traceparent is stored on the executions it
creates (``trace_context``): their hand-out and target call join its trace.

Each execution created takes one unit of the tenant's
``max_pending_manual_runs`` quota, from one of its slots (:mod:`.quota`,
:data:`.quota.MANUAL_RUNS`), in the transaction that inserts it, and names
the slot in ``manual_slot`` (:mod:`.manualslots`: the unit goes back when the
run starts or ends, and is taken again if it comes back to the queue).
A call that would pass the quota is refused whole with
:class:`~tickwheel_server.errors.QuotaExceeded` and writes nothing: a
backfill is not cut to what fits (a partial window would leave a gap the
caller did not ask for). A backfill takes its units before it inserts a
row, so a window past the quota costs no insert. A repeated trigger (a request id already seen) and
a backfill's occurrences that exist already take nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from google.protobuf.message import DecodeError
from sqlalchemy.engine import Connection
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import execution_id, to_us

from ..errors import FailedPrecondition, QuotaExceeded
from ..jobspec import handler_of
from ..telemetry.tracing import current_traceparent
from . import quota
from .arming import disarm_jobs
from .base import SqlStore, chunks, driver_sql, execute_arrays, one_of, tuples
from .history import ExecutionRecord, _attempts_of, execution_from_row
from .jobrecords import get_job
from .quota import SlotDry, SlotPicker
from .tables import executions, tenants

BACKFILL_RATE = 100
"""Backfilled executions become ready at this many per second."""
BATCH = 1000


@dataclass(frozen=True)
class BackfillItem:
    execution_id: str
    nominal_at: datetime
    already_exists: bool


@dataclass(frozen=True)
class BackfillResult:
    occurrences: list[BackfillItem]
    created: int
    existing: int


def trigger_id(job_id: str, request_id: str) -> str:
    return f"{job_id}:trigger:{request_id}"


# PostgreSQL and CockroachDB: a backfill's chunk in one statement of one text
# whatever its length, returning the ids it inserted (an executemany's count
# is its last statement's on psycopg).
_INSERT_BACKFILL = driver_sql(
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, delivery, "
    "status, owner, worker_id, handler, missed_count, reap_count, payload, error, dead_reason, created_at, "
    "finished_at, allow_overlap, trace_context, manual_slot) "
    "SELECT v.id, CAST(:job_id AS TEXT), CAST(:tenant AS TEXT), CAST(:partition AS INTEGER), 'backfill', "
    "v.nominal_at, v.due_at, v.due_at, 1, 0, 'scheduled', NULL, NULL, CAST(:handler AS TEXT), 1, 0, "
    "CAST(:payload AS BYTEA), '', '', CAST(:now AS BIGINT), NULL, CAST(:allow_overlap AS BOOLEAN), "
    "CAST(:trace_context AS TEXT), CAST(:slot AS INTEGER) "
    "FROM unnest(CAST(:ids AS TEXT[]), CAST(:nominals AS BIGINT[]), CAST(:dues AS BIGINT[])) "
    "AS v (id, nominal_at, due_at) "
    "ON CONFLICT (id) DO NOTHING RETURNING executions.id"
)


def _insert_backfill(conn: Connection, caps, rows: list[dict]) -> int:
    """Insert a chunk of a backfill's rows (:func:`_row`'s, one job, one
    call) not present yet; returns how many it inserted."""
    if caps.is_sqlite:  # sqlite3 sums an executemany's counts
        return conn.execute(_insert_statement(conn), rows).rowcount
    first = rows[0]
    parameters = dict(
        job_id=first["job_id"], tenant=first["tenant"], partition=first["partition"], handler=first["handler"],
        payload=first["payload"], now=first["created_at"], allow_overlap=first["allow_overlap"],
        trace_context=first["trace_context"], slot=first["manual_slot"],
        ids=[row["id"] for row in rows], nominals=[row["nominal_at"] for row in rows],
        dues=[row["due_at"] for row in rows],
    )
    return len(tuples(execute_arrays(conn, _INSERT_BACKFILL, parameters)))


def _insert_statement(conn: Connection):
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    return dialect.insert(executions).on_conflict_do_nothing(index_elements=["id"])


def _row(job, ident: str, origin: str, nominal_us: int, due_us: int, payload: bytes, now_us: int, handler,
         allow_overlap: bool, trace_context: str | None, slot: int) -> dict:
    return dict(
        allow_overlap=allow_overlap, trace_context=trace_context, manual_slot=slot,
        id=ident, job_id=job.id, tenant=job.tenant, partition=job.partition, origin=origin, nominal_at=nominal_us,
        due_at=due_us, ready_at=due_us, attempt=1, delivery=0, status="scheduled", owner=None, worker_id=None,
        handler=handler, missed_count=1, reap_count=0, payload=payload, error="", dead_reason="",
        created_at=now_us, finished_at=None,
    )


def take_units(conn: Connection, caps, tenant: str, slot: int, created: int, deal: bool) -> None:
    """Take a unit per manual run created from ``slot``, or refuse the call
    whole (:class:`QuotaExceeded`: the caller's transaction rolls back, so
    nothing is written). :class:`SlotDry` as :func:`.quota.take` raises it."""
    if created and quota.take(conn, caps, tenant, slot, created, deal=deal, rows=quota.MANUAL_RUNS) < created:
        limit = conn.execute(sa.select(tenants.c.max_pending_manual_runs).where(tenants.c.name == tenant)).scalar()
        raise QuotaExceeded(
            tenant, quota.MANUAL_RUNS.name, limit or 0,
            f"{created} more manual run(s) would pass the runs the tenant may have waiting to start",
        )


async def counted(store: SqlStore, slots: SlotPicker, tenant: str, fn):
    """Run ``fn(conn, slot, deal)`` in a transaction of ``store`` with a slot
    of the tenant's manual-run quota (picked by ``slots``); once more,
    dealing first, when the slot ran dry (its lock let go by the rollback).

    Row-locked (READ COMMITTED on PostgreSQL), as a job create is: the
    quota is exact on the slots' row locks (:func:`.quota.take`), the
    job is read ``FOR SHARE``, the insert decides each id under its
    unique key, and a backfill gives back the units of the ids it read
    as missing that a concurrent call inserted first. At SERIALIZABLE a deal (every slot of the tenant read under
    lock) failed against concurrent triggers on the other slots until
    its retries ran out, and triggers of one job conflicted over the
    executions index pages (loadtest/RESULTS.md, "Manual runs under a
    quota")."""
    with slots.slot(tenant) as slot:
        try:
            return await store._tx(lambda conn: fn(conn, slot, False), row_locked=True)
        except SlotDry:
            return await store._tx(lambda conn: fn(conn, slot, True), row_locked=True)


class ManualStore(SqlStore):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._slots = SlotPicker()

    async def _counted(self, tenant: str, fn):
        return await counted(self, self._slots, tenant, fn)

    async def trigger(
        self, tenant: str, job_id: str, request_id: str, payload: bytes | None = None, *, allow_overlap: bool = False
    ) -> tuple[ExecutionRecord, bool]:
        """Create the execution ``<job id>:trigger:<request id>``, ready now,
        or find the one an earlier call with that request id created.
        Returns (execution, created). NotFound for a missing or another
        tenant's job; a paused or completed job can still be triggered.
        Unless ``allow_overlap``, it queues behind a running execution of the
        job instead of being skipped (the hand-out decides). A new execution
        takes a unit of ``max_pending_manual_runs``; QuotaExceeded (nothing
        written) when none is left."""
        ident = trigger_id(job_id, request_id)
        # The API call's span, when it is traced: the execution joins its trace.
        trace_context = current_traceparent() or None

        def fn(conn: Connection, slot: int, deal: bool) -> tuple[ExecutionRecord, bool]:
            now_us = to_us(self.clock.now())
            job = get_job(conn, tenant, job_id, share=True)
            # An armed run of the job would start at its instant without the
            # overlap decision this run now needs: back to scheduled, both
            # take the round's path (docs/architecture.md, Hand-outs decided ahead).
            disarm_jobs(conn, [job_id])
            spec = _definition(job)
            row = _row(job, ident, "trigger", now_us, now_us, spec.payload if payload is None else payload, now_us,
                       handler_of(spec), allow_overlap, trace_context, slot)
            created = conn.execute(_insert_statement(conn).returning(executions.c.id), row).first() is not None
            take_units(conn, self.caps, tenant, slot, int(created), deal)
            stored = conn.execute(sa.select(executions).where(executions.c.id == ident)).one()
            return execution_from_row(stored, _attempts_of(conn, [ident])[ident], now_us=now_us), created

        return await self._counted(tenant, fn)

    async def backfill(
        self, tenant: str, job_id: str, nominals: list[datetime], *, dry_run: bool, allow_overlap: bool = False
    ) -> BackfillResult:
        """Create an execution for each of ``nominals`` (the schedule's
        occurrences in the window, computed by the caller, oldest first)
        that does not exist yet; ``dry_run`` reports the same without
        writing. NotFound for a missing or another tenant's job;
        QuotaExceeded (nothing written) when those created would pass the
        tenant's ``max_pending_manual_runs``."""
        trace_context = current_traceparent() or None

        def fn(conn: Connection, slot: int, deal: bool) -> BackfillResult:
            now = self.clock.now()
            now_us = to_us(now)
            job = get_job(conn, tenant, job_id, share=True)
            spec = _definition(job)
            ids = [execution_id(job_id, nominal) for nominal in nominals]
            existing: set[str] = set()
            for chunk in chunks(ids, BATCH):
                found = sa.select(executions.c.id).where(one_of(self.caps, executions.c.id, chunk))
                existing.update(conn.execute(found).scalars())
            items = [BackfillItem(i, n, i in existing) for i, n in zip(ids, nominals)]
            fresh = [item for item in items if not item.already_exists]
            if not dry_run and fresh:
                # The units first: a window past the quota is refused
                # before a row of it is inserted.
                take_units(conn, self.caps, tenant, slot, len(fresh), deal)
                disarm_jobs(conn, [job_id])  # as for a trigger
                handler = handler_of(spec)
                rows = []
                for index, item in enumerate(fresh):
                    due_us = to_us(now + timedelta(seconds=index / BACKFILL_RATE))
                    rows.append(_row(job, item.execution_id, "backfill", to_us(item.nominal_at), due_us, spec.payload,
                                     now_us, handler, allow_overlap, trace_context, slot))
                inserted = 0
                for chunk in chunks(rows, BATCH):
                    inserted += _insert_backfill(conn, self.caps, chunk)
                if inserted < len(rows):
                    # Ids a concurrent call inserted after the read above
                    # are its runs, counted by it: their units go back.
                    quota.give_back(conn, tenant, {slot: len(rows) - inserted}, rows=quota.MANUAL_RUNS)
            return BackfillResult(items, len(fresh), len(items) - len(fresh))

        return await self._counted(tenant, fn)


def _definition(job) -> job_pb2.Job:
    """The job's stored definition; FailedPrecondition (nothing written) when
    this server cannot parse it: it cannot know what such a run would do."""
    try:
        return job_pb2.Job.FromString(job.spec)
    except DecodeError:
        raise FailedPrecondition(
            f"job {job.id!r}", "its stored definition cannot be read by this server (see its JOB_UNREADABLE alert)",
            kind="JOB_UNREADABLE",
        ) from None
