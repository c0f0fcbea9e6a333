"""Requeues: deliveries no worker will finish ended and their executions
scheduled again (release, requeue, reap, re-attach, restamp), and the
signals around running executions (cancel requests, stalled queues woken,
who runs what).

:meth:`RequeueStore.requeue` ends a delivery that no worker will finish (its worker died,
stopped heartbeating, or its server's session expired): an attempt row ``lost`` with the
reason, and the execution ``scheduled`` again with the same id (the next hand-out is
delivery + 1). Every update is conditional on the delivery and the owner it was decided
for, so a worker that re-attached elsewhere meanwhile (:meth:`reattach`) keeps its
execution. Requeues that count (the worker died or went silent, not the server) raise
``reap_count``; past the poison cap the execution is dead-lettered instead.

Whatever ends a delivery gives its concurrency-key slots back and wakes the next in line
(:mod:`.isolation`), in the same transaction; a manual run scheduled again takes its quota
unit back (:mod:`.manualslots`). An execution with a cancel request, or whose job was
deleted while it ran (DeleteJob lets it finish; one put back has not started, and a hand-out
of it would carry no target), ends ``canceled`` instead of being retried or requeued.
Hand-outs no worker saw are given back by :mod:`.unsend` (:meth:`RequeueStore.release`,
:meth:`RequeueStore.release_unheld`), which ends a deleted job's run the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import to_us

from . import manualslots
from .attempt_writes import insert_attempts
from .base import SqlStore, driver_sql, execute_arrays
from .executions import (
    CancelRequest, DeadLetter, DeadLetterHook, Lost, Reattached, RequeueResult, Retry, Running, attempt_row,
    dead_lettered,
)
from .isolation import release_slots, status_in, wake_jobs, wake_keys
from .peertext import escaped_text
from .session_walk import stamped_sessions
from .tables import concurrency_keys, executions
from .timeline import DELETED_REASON, NOT_STARTED, in_group
from .unheld import Released, disown, unheld_rows
from .unsend import JOB_EXISTS, RUNNING_BY_ID, release_unsent, running_at_delivery, running_by_id, unsend

DEFAULT_POISON_CAP = 3
"""Requeues that count (the worker died or went silent) an execution survives; one more and it is dead."""

_REQUEUE_COLUMNS = (
    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition, executions.c.delivery,
    executions.c.attempt, executions.c.ready_at, executions.c.due_at, executions.c.handed_out_at,
    executions.c.reap_count, executions.c.worker_id, executions.c.held_keys, executions.c.waiting_since,
    executions.c.cancel_requested_at, executions.c.cancel_reason, executions.c.manual_slot,
    JOB_EXISTS,  # a deleted job's run ends
)


# The updates of :func:`unsend`, :meth:`RequeueStore.reattach` and
# :meth:`RequeueStore._requeue_rows` on PostgreSQL and CockroachDB: one
# statement for the batch, where an executemany sent one UPDATE per row
# (SQLite keeps it). The ``ANY`` beside the join gives the planner the
# primary key's path.
_BY_ID = "WHERE executions.id = ANY (CAST(:ids AS TEXT[])) AND executions.id = v.id"
_REATTACH_BY_ID = driver_sql(
    f"UPDATE executions SET owner = CAST(:owner AS TEXT), worker_id = CAST(:worker AS TEXT) {RUNNING_BY_ID}"
)
_REQUEUE_FROM_ARRAYS = driver_sql(
    "UPDATE executions SET status = v.status, reap_count = v.reaps, finished_at = v.finished, "
    "dead_reason = v.dead_reason, error = v.error, owner = NULL, worker_id = NULL, handed_out_at = NULL, "
    "held_keys = NULL, waiting_since = NULL, cancel_requested_at = NULL, cancel_reason = NULL "
    "FROM unnest(CAST(:ids AS TEXT[]), CAST(:statuses AS TEXT[]), CAST(:reaps AS INTEGER[]), "
    "CAST(:finished AS BIGINT[]), CAST(:dead_reasons AS TEXT[]), CAST(:errors AS TEXT[])) "
    f"AS v (id, status, reaps, finished, dead_reason, error) {_BY_ID}"
)
_REQUEUE_ARRAYS = {"ids": "b_id", "statuses": "b_status", "reaps": "b_reaps", "finished": "b_finished",
                   "dead_reasons": "b_dead_reason", "errors": "b_error"}


class StreamGone(Exception):
    """A hello's stream ended while its re-attachment was being written: rolled back."""


class RequeueStore(SqlStore):
    def __init__(
        self, engine, clock, *, on_dead_letter: DeadLetterHook | None = None, poison_cap: int = DEFAULT_POISON_CAP
    ) -> None:
        super().__init__(engine, clock)
        self._on_dead_letter = on_dead_letter
        self.poison_cap = poison_cap

    async def release(
        self, handed: list[tuple[str, int]], *, owner: str | None = None, at_us: int | None = None
    ) -> None:
        """Put back executions handed out but never sent to a worker (their
        stream closed first): ``scheduled`` again, and the delivery taken
        back, since no worker ever saw it; their key slots are given back.
        With ``owner`` and ``at_us``, only rows still stamped so (a started
        batch the fence refused: the reaper may have given a dead session's
        rows back, and another server handed them out again, meanwhile)."""
        if handed:
            now_us = to_us(self.clock.now())
            await self._tx(lambda conn: release_unsent(conn, self.caps, handed, now_us=now_us, owner=owner,
                                                       at_us=at_us))

    async def release_unheld(self, owner: str, limit: int = 1000) -> Released:
        """``owner`` is a session no longer alive: up to ``limit`` of its
        running rows that the worker they were dealt to, saying hello again,
        did not list (:mod:`.unheld`) back to ``scheduled`` at once, the
        delivery taken back and no attempt written (no worker saw them); a
        row whose job is gone ends ``canceled`` instead (:func:`.unsend.unsend`).
        Returns the rows put back (``back``: the caller puts their ready
        instants into its wheel), the ids canceled, and how many it took."""

        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> Released:
            rows = unheld_rows(conn, self.caps, owner, limit)
            if not rows:
                return Released([], [], 0)
            # locked by the pick: unsend re-reads them at that delivery and owner
            unsent = unsend(conn, self.caps, [(r.id, r.delivery) for r in rows], now_us=now_us, owner=owner)
            release_slots(conn, self.caps, unsent.slots)
            back = [Retry(r.id, r.partition, r.ready_at) for r in rows if r.id in unsent.back]
            return Released(back, sorted(unsent.canceled), len(rows))

        return await self._tx(fn)

    async def reattach(
        self, owner: str, worker_id: str, held: Sequence[tuple[str, int]], *, tenants: Sequence[str],
        disown_since_us: int | None = None, still_open: Callable[[], bool] | None = None,
        may_serve: Callable[[str, str | None], bool] | None = None,
    ) -> list[Reattached]:
        """Take over deliveries a reconnecting worker still runs: those of
        ``tenants`` (its credential's) that ``may_serve`` (tenant, handler;
        None for an HTTP target: the credential's own rule) allows, still
        ``running`` at that delivery, neither dealt to nor re-attached by
        another worker (``worker_id`` unset or this one) nor disowned by
        this one before, are stamped with ``owner`` (this server's session)
        and ``worker_id``; the rest (finished, requeued, another delivery,
        another tenant's, another worker's, a handler the credential may not
        run, unknown) are not returned and the worker must drop them. A
        worker id is no secret (the tenant's history shows it): another
        credential saying hello with it takes over only what it could have
        been handed.

        With ``disown_since_us`` (the hello lists everything the worker
        holds), the same transaction marks the tenants' running rows dealt
        to ``worker_id`` under another session since then that it does not
        list (:func:`.unheld.disown`); ``still_open`` is asked just before
        the commit and False (the worker gave up on this stream, and may
        already be dealt to elsewhere) rolls everything back."""
        wanted = dict(held)
        scope = frozenset(tenants)
        if not held and disown_since_us is None:
            return []

        def fn(conn: Connection) -> list[Reattached]:
            if disown_since_us is not None:
                disown(conn, self.caps, owner, worker_id, held, tenants=sorted(scope), since_us=disown_since_us,
                       may_serve=may_serve)
            taken = take(conn) if held else []
            if still_open is not None and not still_open():
                raise StreamGone("the worker's stream ended before its hello was recorded: nothing written")
            return taken

        def take(conn: Connection) -> list[Reattached]:
            query = sa.select(
                executions.c.id, executions.c.delivery, executions.c.partition, executions.c.tenant,
                executions.c.worker_id, executions.c.unheld_delivery, executions.c.handler,
            ).where(running_by_id(self.caps, sorted(wanted)))
            if self.caps.row_locks:
                query = query.with_for_update()
            rows = [
                row for row in conn.execute(query)
                if wanted.get(row.id) == row.delivery and row.tenant in scope
                and row.worker_id in (None, worker_id) and row.unheld_delivery != row.delivery
                and (may_serve is None or may_serve(row.tenant, row.handler))
            ]
            if rows and self.caps.is_sqlite:
                conn.execute(
                    running_at_delivery().values(owner=owner, worker_id=worker_id),
                    [dict(b_id=row.id, b_delivery=row.delivery) for row in rows],
                )
            elif rows:
                execute_arrays(conn, _REATTACH_BY_ID, {
                    "ids": [row.id for row in rows], "owner": owner, "worker": worker_id,
                })
            return [Reattached(row.id, row.delivery, row.partition) for row in rows]

        return await self._tx(fn)

    async def restamp(self, old_owner: str, new_owner: str, *, batch: int = 1000) -> int:
        """A server that lost its session and opened a new one takes its
        running executions over under the new one, before a reaper takes
        them: ``batch`` a transaction until a batch is short; how many. Each
        row moves on its own condition (``running`` under ``old_owner``), as
        the reaper takes each on its own (``reap_owner``, in batches too): a
        row is restamped or reaped, never both, and a walk a fault stops is
        taken up by the caller's retry where it stopped."""
        if not old_owner or old_owner == new_owner:
            return 0
        if batch < 1:
            raise ValueError("batch must be >= 1")
        moved, last = 0, batch
        while last == batch:
            last = await self._tx(lambda conn: self._restamp_batch(conn, old_owner, new_owner, batch))
            moved += last
        return moved

    @staticmethod
    def _restamp_batch(conn: Connection, old_owner: str, new_owner: str, batch: int) -> int:
        """Up to ``batch`` of ``old_owner``'s running rows to ``new_owner`` (on ``executions_owner``)."""
        held = sa.and_(executions.c.owner == old_owner, status_in(executions.c.status, "running"))
        picked = sa.select(executions.c.id).where(held).limit(batch)
        moved = conn.execute(executions.update().where(executions.c.id.in_(picked), held).values(owner=new_owner))
        return moved.rowcount

    async def requeue(self, owner: str, lost: Sequence[Lost], *, counts: bool) -> RequeueResult:
        """End deliveries no worker will finish, if they are still running at
        that delivery under ``owner``: an attempt row ``lost`` with the reason,
        then ``scheduled`` again (same id, same attempt) or, when ``counts``
        and the execution was requeued more than the poison cap, dead.

        ``counts``: the worker died or stopped heartbeating (it may be the
        execution killing it); False when the server's session expired."""
        if not lost:
            return RequeueResult()

        def fn(conn: Connection) -> RequeueResult:
            now_us = to_us(self.clock.now())
            wanted = {item.execution_id: item for item in lost}
            query = sa.select(*_REQUEUE_COLUMNS).where(
                running_by_id(self.caps, sorted(wanted)),
                executions.c.owner == owner,
            )
            if self.caps.row_locks:
                query = query.with_for_update()
            rows = [row for row in conn.execute(query) if wanted[row.id].delivery == row.delivery]
            return self._requeue_rows(
                conn, rows, {row.id: wanted[row.id].reason for row in rows}, counts, now_us,
                skipped=[(i.execution_id, i.delivery) for i in lost],
                workers={row.id: wanted[row.id].worker_id for row in rows},
            )

        return await self._tx(fn)

    def _requeue_rows(
        self, conn: Connection, rows: list, reasons: dict[str, str], counts: bool, now_us: int,
        skipped: list[tuple[str, int]] | None = None, workers: dict[str, str] | None = None,
    ) -> RequeueResult:
        result = RequeueResult()
        taken = {(row.id, row.delivery) for row in rows}
        result.skipped = [key for key in (skipped or []) if key not in taken]
        if not rows:
            return result
        updates: list[dict] = []
        history: list[dict] = []
        finished_jobs: list[str] = []
        for row in rows:
            reaps = row.reap_count + (1 if counts else 0)
            reason = reasons[row.id]
            history.append(
                attempt_row(row, "lost", (workers or {}).get(row.id) or row.worker_id or "", reason, now_us)
            )
            if row.cancel_requested_at is not None or not row.job_exists:  # it ends here, not run again
                stopped = row.cancel_reason or ("canceled: by request" if row.job_exists else DELETED_REASON)
                updates.append(dict(b_id=row.id, b_status="canceled", b_reaps=reaps, b_finished=now_us,
                                    b_dead_reason=escaped_text(stopped), b_error=reason[:4096]))
                result.canceled.append(row.id)
                finished_jobs.append(row.job_id)
            elif counts and reaps > self.poison_cap:
                dead_reason = f"poison: requeued {reaps} times because its worker died or stopped heartbeating"
                updates.append(dict(b_id=row.id, b_status="dead", b_reaps=reaps, b_finished=now_us,
                                    b_dead_reason=dead_reason, b_error=reason[:4096]))
                result.dead.append(DeadLetter(row.id, row.job_id, row.tenant, dead_reason, reason, poison=True))
                finished_jobs.append(row.job_id)
            else:
                updates.append(dict(b_id=row.id, b_status="scheduled", b_reaps=reaps, b_finished=None,
                                    b_dead_reason="", b_error=reason[:4096]))
                result.requeued.append(Retry(row.id, row.partition, row.ready_at))
        if self.caps.is_sqlite:
            conn.execute(executions.update().where(executions.c.id == sa.bindparam("b_id")).values(
                status=sa.bindparam("b_status"), reap_count=sa.bindparam("b_reaps"),
                finished_at=sa.bindparam("b_finished"), dead_reason=sa.bindparam("b_dead_reason"),
                error=sa.bindparam("b_error"), owner=None, worker_id=None, handed_out_at=None, held_keys=None,
                waiting_since=None, cancel_requested_at=None, cancel_reason=None,
            ), updates)  # fmt: skip
        else:
            execute_arrays(conn, _REQUEUE_FROM_ARRAYS, {
                name: [update[key] for update in updates] for name, key in _REQUEUE_ARRAYS.items()
            })
        insert_attempts(conn, self.caps, history)
        release_slots(conn, self.caps, [(row.tenant, row.held_keys) for row in rows])
        manualslots.take_back(conn, [(row.tenant, row.manual_slot) for row, update in zip(rows, updates)
                                     if update["b_status"] == "scheduled"])  # waiting to start again
        wake_jobs(conn, finished_jobs)
        dead_lettered(conn, self._on_dead_letter, result.dead)
        return result

    # -- the cancel signal and stalled queues ------------------------------------------------------

    async def cancel_requests(self, owner: str, limit: int = 1000) -> list[CancelRequest]:
        """Running executions stamped with ``owner`` that someone asked to
        stop (a scan of the ``executions_cancel_requested`` partial index,
        which holds only those), each reason escaped (:func:`.peertext.escaped_text`:
        a row an earlier release stored raw that migration 0036 has not reached)."""

        def fn(conn: Connection) -> list[CancelRequest]:
            query = (
                sa.select(executions.c.id, executions.c.delivery, executions.c.cancel_reason)
                .where(
                    executions.c.owner == owner,
                    status_in(executions.c.status, "running"),
                    executions.c.cancel_requested_at.is_not(None),
                )
                .order_by(executions.c.owner, executions.c.id)
                .limit(limit)
            )
            return [CancelRequest(r.id, r.delivery, escaped_text(r.cancel_reason or "canceled: by request"))
                    for r in conn.execute(query)]

        return await self._tx(fn)

    async def wake_stalled(self, limit: int = 1000) -> int:
        """The safety net under the wake-ups: every key with free slots and
        sleeping waiters gets that many woken, and every job with executions
        waiting for it but nothing running, retrying or ready gets its oldest
        waiter woken (a result recorded while a hand-out round decided, at
        READ COMMITTED, to queue behind that very execution leaves one so).
        Returns how many keys and jobs had some. A scan of
        ``concurrency_keys`` (one row per key in use) with one index probe
        per key that has room, and a scan of ``executions_job_waits`` (only
        job waiters: usually empty) with one probe of ``executions_busy``
        and one of ``executions_not_started_job`` per job."""

        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> int:
            waiting = executions.alias("waiting")
            sleeping = (
                sa.select(waiting.c.id)
                .where(
                    status_in(waiting.c.status, "waiting"),
                    waiting.c.tenant == concurrency_keys.c.tenant,
                    waiting.c.wait_key == concurrency_keys.c.name,
                )
                .limit(1)
                .exists()
            )
            pairs = conn.execute(
                sa.select(concurrency_keys.c.tenant, concurrency_keys.c.name)
                .where(concurrency_keys.c.running < concurrency_keys.c.max_running, sleeping)
                .order_by(concurrency_keys.c.tenant, concurrency_keys.c.name)
                .limit(limit)
            ).all()
            wake_keys(conn, self.caps, [(row.tenant, row.name) for row in pairs])
            other = executions.alias("other")
            retrying = sa.and_(status_in(other.c.status, "scheduled"), other.c.attempt > sa.literal_column("1"))
            busy = (  # executions_busy, its predicate as the index writes it
                sa.select(other.c.id)
                .where(other.c.job_id == waiting.c.job_id, sa.or_(status_in(other.c.status, "running"), retrying))
                .limit(1)
                .exists()
            )
            ready = (
                sa.select(other.c.id)
                .where(
                    other.c.job_id == waiting.c.job_id,
                    *in_group(NOT_STARTED, table=other),
                    status_in(other.c.status, "scheduled"),
                    other.c.ready_at <= now_us,
                )
                .limit(1)
                .exists()
            )
            stranded = conn.execute(
                sa.select(waiting.c.job_id)
                .where(status_in(waiting.c.status, "waiting"), waiting.c.wait_key.is_(None), ~busy, ~ready)
                .group_by(waiting.c.job_id)
                .order_by(waiting.c.job_id)
                .limit(limit)
            ).scalars().all()
            wake_jobs(conn, stranded)
            return len(pairs) + len(stranded)

        return await self._tx(fn)

    async def running_owners(self, limit: int = 1000) -> list[str]:
        """The sessions that running executions are stamped with, in order: a
        probe a session of the ``executions_owner`` partial index
        (:func:`.session_walk.stamped_sessions`), not a read of every running row."""
        return await self._tx(lambda conn: stamped_sessions(conn, "running", limit), idempotent=True)

    async def running_under(self, owner: str, after: str = "", limit: int = 1000) -> list[Running]:
        """Up to ``limit`` running executions stamped with ``owner`` whose id
        sorts after ``after``, in id order: a page of what one server's
        session holds (the ``executions_owner`` partial index; a server's
        running executions are at most its workers' slots). Writes nothing."""

        def fn(conn: Connection) -> list[Running]:
            query = (
                sa.select(executions.c.id, executions.c.delivery, executions.c.handed_out_at, executions.c.worker_id)
                .where(executions.c.owner == owner, status_in(executions.c.status, "running"), executions.c.id > after)
                .order_by(executions.c.id)
                .limit(limit)
            )
            return [Running(row.id, row.delivery, row.handed_out_at, row.worker_id or "") for row in conn.execute(query)]

        return await self._tx(fn, idempotent=True)

    async def reap_owner(self, owner: str, reason: str, limit: int = 1000) -> RequeueResult:
        """Requeue up to ``limit`` running executions stamped with ``owner``, a
        session that no longer exists. Does not count towards the poison cap."""

        def fn(conn: Connection) -> RequeueResult:
            now_us = to_us(self.clock.now())
            query = (
                sa.select(*_REQUEUE_COLUMNS)
                .where(executions.c.owner == owner, status_in(executions.c.status, "running"))
                .limit(limit)
            )
            if self.caps.skip_locked:
                query = query.with_for_update(skip_locked=True)
            rows = conn.execute(query).all()
            return self._requeue_rows(conn, rows, {row.id: reason for row in rows}, False, now_us)

        return await self._tx(fn)
