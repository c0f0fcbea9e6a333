"""Hand-out, outcomes and requeues: the executions table as the queue.

:meth:`HandoutStore.claim_ready` moves ready executions from ``scheduled`` to
``running`` in one batched ``UPDATE … WHERE id IN (SELECT … ready_at <= :now
… LIMIT n FOR UPDATE SKIP LOCKED) RETURNING …``, stamping the server's
session (``owner``), the next delivery number and the hand-out instant;
``:now`` is the handing-out server's clock, so nothing is handed out before
its due instant by that clock. The status transition is the fence: two
servers can never both move a row.

Deliveries only grow. Every hand-out increments ``delivery``; a retry, a
requeue and a replay keep it; only :meth:`release` (the hand-out never
reached a worker) takes one back. So ``(execution id, delivery)`` names one
hand-out for the execution's whole life, and a result or heartbeat naming
any other delivery than the current one is stale.

:meth:`HandoutStore.record_results` applies workers' results in one
transaction per batch: one read of the rows (locked), one batched update,
one batched insert of attempt rows. A result whose delivery is not the
current one is rejected and changes nothing but a note on the attempt row of
that delivery, if it was requeued; a repeated result (its attempt row
exists) is acknowledged again and changes nothing.

:meth:`requeue` ends a delivery that no worker will finish (its worker died,
stopped heartbeating, or its server's session expired): an attempt row
``lost`` with the reason, and the execution ``scheduled`` again with the same
id (the next hand-out is delivery + 1). Every update is conditional on the
delivery and the owner it was decided for, so a worker that re-attached
elsewhere meanwhile (:meth:`reattach`) keeps its execution. Requeues that
count (the worker died or went silent, not the server) raise ``reap_count``;
past the poison cap the execution is dead-lettered instead.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from tickwheel.v1 import job_pb2, worker_pb2

from ..ids import to_us
from ..retry import backoff_delay
from .base import SqlStore
from .tables import attempts, executions, jobs

TERMINAL = ("succeeded", "dead", "canceled")
DEFAULT_POISON_CAP = 3

DeadLetterHook = Callable[[Connection, "DeadLetter"], None]
"""Called inside the transaction that dead-letters an execution (raises its alert)."""


@dataclass(frozen=True)
class Capability:
    """What a group of workers may receive."""

    tenants: tuple[str, ...]
    handlers: tuple[str, ...]
    """Handler names they run (already narrowed to what their credential allows)."""
    http: bool


@dataclass(frozen=True)
class HandedOut:
    id: str
    job_id: str
    tenant: str
    partition: int
    origin: str
    nominal_at_us: int
    due_at_us: int
    ready_at_us: int
    attempt: int
    delivery: int
    payload: bytes
    missed_count: int
    spec: bytes
    """The job's definition (target, timeout); empty if the job was deleted meanwhile."""
    handed_out_at_us: int


@dataclass(frozen=True)
class ResultIn:
    execution_id: str
    delivery: int
    attempt: int
    outcome: int
    """A ``tickwheel.v1.ResultOutcome``."""
    error: str
    worker_id: str
    retry_after: timedelta | None = None


@dataclass(frozen=True)
class ResultAck:
    execution_id: str
    delivery: int
    accepted: bool
    reason: str = ""
    retry: "Retry | None" = None
    """Set when the outcome scheduled another attempt: its ready instant, for the timer wheel."""


@dataclass(frozen=True)
class Retry:
    execution_id: str
    partition: int
    ready_at_us: int


@dataclass(frozen=True)
class DeadLetter:
    execution_id: str
    job_id: str
    tenant: str
    reason: str
    error: str
    poison: bool
    """Dead because it was requeued more than the poison cap allows (it kills its workers)."""


@dataclass(frozen=True)
class Lost:
    """A delivery to end: no worker will finish it."""

    execution_id: str
    delivery: int
    reason: str
    worker_id: str = ""


@dataclass
class RequeueResult:
    requeued: list[Retry] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    skipped: list[tuple[str, int]] = field(default_factory=list)
    """Deliveries no longer running under the expected owner (finished, re-attached, already requeued)."""


@dataclass(frozen=True)
class Reattached:
    execution_id: str
    delivery: int
    partition: int


class HandoutStore(SqlStore):
    def __init__(
        self,
        engine,
        clock,
        *,
        rng: random.Random | None = None,
        on_dead_letter: DeadLetterHook | None = None,
        poison_cap: int = DEFAULT_POISON_CAP,
    ) -> None:
        super().__init__(engine, clock)
        self._rng = rng or random.Random()
        self._on_dead_letter = on_dead_letter
        self.poison_cap = poison_cap

    # -- hand-out ---------------------------------------------------------------------------------

    async def claim_ready(self, owner: str, now: datetime, capability: Capability, limit: int) -> list[HandedOut]:
        """Hand out up to ``limit`` executions whose ready instant is at or
        before ``now`` and that ``capability`` may run, oldest ready first.

        ``now`` decides what is ready. The hand-out instant stamped on the
        rows (lateness and deadlines are measured from it) is read when the
        transaction runs, so a claim retried through an outage does not
        pretend it started earlier; it is never before ``now``."""
        if limit <= 0 or not capability.tenants or not (capability.handlers or capability.http):
            return []
        now_us = to_us(now)

        def fn(conn: Connection) -> list[HandedOut]:
            at_us = max(now_us, to_us(self.clock.now()))
            fits = []
            if capability.handlers:
                fits.append(executions.c.handler.in_(capability.handlers))
            if capability.http:
                fits.append(executions.c.handler.is_(None))
            ready = (
                sa.select(executions.c.id)
                .where(
                    executions.c.status == "scheduled",
                    executions.c.ready_at <= now_us,
                    executions.c.tenant.in_(capability.tenants),
                    sa.or_(*fits),
                )
                .order_by(executions.c.ready_at)
                .limit(limit)
            )
            if self.caps.skip_locked:
                ready = ready.with_for_update(skip_locked=True)
            claimed = conn.execute(
                executions.update()
                .where(executions.c.id.in_(ready.scalar_subquery()))
                .values(status="running", owner=owner, delivery=executions.c.delivery + 1, handed_out_at=at_us)
                .returning(
                    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition,
                    executions.c.origin, executions.c.nominal_at, executions.c.due_at, executions.c.ready_at,
                    executions.c.attempt, executions.c.delivery, executions.c.payload, executions.c.missed_count,
                )
            ).all()
            if not claimed:
                return []
            job_ids = sorted({row.job_id for row in claimed})
            specs = dict(conn.execute(sa.select(jobs.c.id, jobs.c.spec).where(jobs.c.id.in_(job_ids))).all())
            handed = [
                HandedOut(
                    r.id, r.job_id, r.tenant, r.partition, r.origin, r.nominal_at, r.due_at, r.ready_at, r.attempt,
                    r.delivery, bytes(r.payload), r.missed_count, bytes(specs.get(r.job_id, b"")), at_us,
                )
                for r in claimed
            ]
            handed.sort(key=lambda h: h.ready_at_us)
            return handed

        return await self._tx(fn)

    async def release(self, handed: list[tuple[str, int]]) -> None:
        """Put back executions handed out but never sent to a worker (their
        stream closed first): ``scheduled`` again, and the delivery taken
        back, since no worker ever saw it."""
        if not handed:
            return

        def fn(conn: Connection) -> None:
            conn.execute(
                executions.update()
                .where(
                    executions.c.id == sa.bindparam("b_id"),
                    executions.c.delivery == sa.bindparam("b_delivery"),
                    executions.c.status == "running",
                )
                .values(
                    status="scheduled", owner=None, worker_id=None, handed_out_at=None,
                    delivery=executions.c.delivery - 1,
                ),
                [dict(b_id=ident, b_delivery=delivery) for ident, delivery in handed],
            )

        await self._tx(fn)

    async def reattach(self, owner: str, worker_id: str, held: Sequence[tuple[str, int]]) -> list[Reattached]:
        """Take over deliveries a reconnecting worker still runs: those still
        ``running`` at that delivery are stamped with ``owner`` (this server's
        session); the rest (finished, requeued, another delivery) are not
        returned and the worker must drop them."""
        if not held:
            return []
        wanted = dict(held)

        def fn(conn: Connection) -> list[Reattached]:
            query = sa.select(executions.c.id, executions.c.delivery, executions.c.partition).where(
                executions.c.id.in_(sorted(wanted)), executions.c.status == "running"
            )
            if self.caps.row_locks:
                query = query.with_for_update()
            rows = [row for row in conn.execute(query) if wanted.get(row.id) == row.delivery]
            if rows:
                conn.execute(
                    executions.update()
                    .where(
                        executions.c.id == sa.bindparam("b_id"),
                        executions.c.delivery == sa.bindparam("b_delivery"),
                        executions.c.status == "running",
                    )
                    .values(owner=owner, worker_id=worker_id),
                    [dict(b_id=row.id, b_delivery=row.delivery) for row in rows],
                )
            return [Reattached(row.id, row.delivery, row.partition) for row in rows]

        return await self._tx(fn)

    async def restamp(self, old_owner: str, new_owner: str) -> int:
        """A server that lost its session and opened a new one takes its
        running executions over under the new one, before a reaper takes them."""
        if not old_owner or old_owner == new_owner:
            return 0

        def fn(conn: Connection) -> int:
            return conn.execute(
                executions.update()
                .where(executions.c.owner == old_owner, executions.c.status == "running")
                .values(owner=new_owner)
            ).rowcount

        return await self._tx(fn)

    # -- outcomes ---------------------------------------------------------------------------------

    async def record_results(self, results: list[ResultIn]) -> list[ResultAck]:
        """Apply outcomes; returns one ack per result, in order."""
        if not results:
            return []
        rng_state = self._rng.getstate()

        def fn(conn: Connection) -> list[ResultAck]:
            self._rng.setstate(rng_state)  # the same delays if the transaction is retried
            now = self.clock.now()
            now_us = to_us(now)
            ids = sorted({r.execution_id for r in results})
            query = (
                sa.select(
                    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition,
                    executions.c.status, executions.c.delivery, executions.c.attempt, executions.c.due_at,
                    executions.c.ready_at, executions.c.handed_out_at, jobs.c.spec,
                )
                .select_from(executions.outerjoin(jobs, jobs.c.id == executions.c.job_id))
                .where(executions.c.id.in_(ids))
            )
            if self.caps.row_locks:
                query = query.with_for_update(of=executions)
            rows = {row.id: row for row in conn.execute(query)}
            mismatched = [
                r for r in results
                if r.execution_id in rows and (
                    rows[r.execution_id].status != "running"
                    or rows[r.execution_id].delivery != r.delivery
                    or rows[r.execution_id].attempt != r.attempt
                )
            ]
            recorded = self._recorded_attempts(conn, mismatched)
            acks: list[ResultAck] = []
            updates: list[dict] = []
            history: list[dict] = []
            notes: list[dict] = []
            dead: list[DeadLetter] = []
            seen: set[tuple[str, int]] = set()
            for result in results:
                row = rows.get(result.execution_id)
                key = (result.execution_id, result.delivery)
                if row is None:
                    acks.append(ResultAck(*key, False, "no such execution"))
                    continue
                if key in seen:
                    acks.append(ResultAck(*key, True, "already recorded"))
                    continue
                if row.status != "running" or row.delivery != result.delivery or row.attempt != result.attempt:
                    status = recorded.get((result.execution_id, result.attempt, result.delivery))
                    if status is not None and status != "lost":
                        acks.append(ResultAck(*key, True, "already recorded"))
                        continue
                    reason = f"stale delivery: the current one is {row.delivery} ({row.status})"
                    if status == "lost":
                        reason = f"stale delivery: delivery {result.delivery} was requeued (lost)"
                        notes.append(
                            dict(
                                b_id=result.execution_id, b_attempt=result.attempt, b_delivery=result.delivery,
                                b_note=f"; a late result ({_OUTCOME_NAMES.get(result.outcome, 'unknown')}) "
                                f"from worker {result.worker_id} was rejected",
                            )
                        )
                    acks.append(ResultAck(*key, False, reason))
                    continue
                seen.add(key)
                update, attempt_status, retry, dead_letter = self._outcome(row, result, now, now_us)
                updates.append(update)
                started_us = row.handed_out_at if row.handed_out_at is not None else now_us
                measured_from = row.due_at if row.attempt == 1 else row.ready_at
                history.append(
                    dict(
                        execution_id=row.id, attempt=row.attempt, delivery=row.delivery, status=attempt_status,
                        started_at=started_us, finished_at=now_us, lateness_us=max(0, started_us - measured_from),
                        worker_id=result.worker_id, error=result.error[:4096],
                    )
                )
                if dead_letter is not None:
                    dead.append(dead_letter)
                acks.append(ResultAck(*key, True, retry=retry))
            if updates:
                conn.execute(
                    executions.update()
                    .where(executions.c.id == sa.bindparam("b_id"))
                    .values(
                        status=sa.bindparam("b_status"), attempt=sa.bindparam("b_attempt"),
                        ready_at=sa.bindparam("b_ready_at"), error=sa.bindparam("b_error"),
                        dead_reason=sa.bindparam("b_dead_reason"), finished_at=sa.bindparam("b_finished_at"),
                        owner=None, worker_id=None, handed_out_at=None,
                    ),
                    updates,
                )
                conn.execute(attempts.insert(), history)
            if notes:
                self._note_late_results(conn, notes)
            self._dead_lettered(conn, dead)
            return acks

        return await self._tx(fn)

    def _recorded_attempts(self, conn: Connection, results: list[ResultIn]) -> dict[tuple[str, int, int], str]:
        """The attempt rows, by (execution, attempt, delivery), of results that do not match their execution's current delivery."""
        if not results:
            return {}
        rows = conn.execute(
            sa.select(attempts.c.execution_id, attempts.c.attempt, attempts.c.delivery, attempts.c.status).where(
                attempts.c.execution_id.in_(sorted({r.execution_id for r in results}))
            )
        )
        return {(r.execution_id, r.attempt, r.delivery): r.status for r in rows}

    @staticmethod
    def _note_late_results(conn: Connection, notes: list[dict]) -> None:
        """Record a rejected late result on the ``lost`` attempt row of its delivery."""
        conn.execute(
            attempts.update()
            .where(
                attempts.c.execution_id == sa.bindparam("b_id"),
                attempts.c.attempt == sa.bindparam("b_attempt"),
                attempts.c.delivery == sa.bindparam("b_delivery"),
                attempts.c.status == "lost",
                attempts.c.error.not_like("%was rejected"),
            )
            .values(error=attempts.c.error + sa.bindparam("b_note")),
            notes,
        )

    def _outcome(
        self, row, result: ResultIn, now: datetime, now_us: int
    ) -> tuple[dict, str, Retry | None, DeadLetter | None]:
        """The execution's new values, the attempt's status, and the retry or dead letter it makes, for one result."""
        update = dict(
            b_id=row.id, b_status="succeeded", b_attempt=row.attempt, b_ready_at=row.ready_at,
            b_error=result.error[:4096], b_dead_reason="", b_finished_at=now_us,
        )
        outcome = result.outcome
        if outcome == worker_pb2.RESULT_OUTCOME_SUCCEEDED:
            return update, "succeeded", None, None
        if outcome == worker_pb2.RESULT_OUTCOME_CANCELED:
            update["b_status"] = "canceled"
            return update, "canceled", None, None
        attempt_status = "timed_out" if outcome == worker_pb2.RESULT_OUTCOME_TIMED_OUT else "failed"
        if outcome == worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT:
            return self._dead(update, row, "failed permanently", result.error)
        policy = job_pb2.Job.FromString(row.spec).retry_policy if row.spec else job_pb2.RetryPolicy()
        max_attempts = policy.max_attempts or 5
        if row.attempt >= max_attempts:
            return self._dead(update, row, f"attempts exhausted ({row.attempt} of {max_attempts})", result.error,
                              attempt_status)
        initial = policy.initial_backoff.ToTimedelta() if policy.HasField("initial_backoff") else timedelta(seconds=1)
        cap = policy.max_backoff.ToTimedelta() if policy.HasField("max_backoff") else timedelta(hours=1)
        delay = backoff_delay(row.attempt + 1, initial, cap, self._rng, result.retry_after)
        ready_us = to_us(now + delay)
        update.update(b_status="scheduled", b_attempt=row.attempt + 1, b_ready_at=ready_us, b_finished_at=None)
        return update, attempt_status, Retry(row.id, row.partition, ready_us), None

    @staticmethod
    def _dead(update: dict, row, reason: str, error: str, attempt_status: str = "failed"):
        update.update(b_status="dead", b_dead_reason=reason)
        return update, attempt_status, None, DeadLetter(row.id, row.job_id, row.tenant, reason, error, poison=False)

    def _dead_lettered(self, conn: Connection, dead: Iterable[DeadLetter]) -> None:
        if self._on_dead_letter is None:
            return
        for letter in dead:
            self._on_dead_letter(conn, letter)

    # -- requeues ---------------------------------------------------------------------------------

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
            query = sa.select(
                executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition,
                executions.c.delivery, executions.c.attempt, executions.c.ready_at, executions.c.due_at,
                executions.c.handed_out_at, executions.c.reap_count, executions.c.worker_id,
            ).where(executions.c.id.in_(sorted(wanted)), executions.c.status == "running", executions.c.owner == owner)
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
        for row in rows:
            reaps = row.reap_count + (1 if counts else 0)
            reason = reasons[row.id]
            started_us = row.handed_out_at if row.handed_out_at is not None else now_us
            measured_from = row.due_at if row.attempt == 1 else row.ready_at
            history.append(
                dict(
                    execution_id=row.id, attempt=row.attempt, delivery=row.delivery, status="lost",
                    started_at=started_us, finished_at=now_us, lateness_us=max(0, started_us - measured_from),
                    worker_id=(workers or {}).get(row.id) or row.worker_id or "", error=reason[:4096],
                )
            )
            if counts and reaps > self.poison_cap:
                dead_reason = f"poison: requeued {reaps} times because its worker died or stopped heartbeating"
                updates.append(dict(b_id=row.id, b_status="dead", b_reaps=reaps, b_finished=now_us,
                                    b_dead_reason=dead_reason, b_error=reason[:4096]))
                result.dead.append(DeadLetter(row.id, row.job_id, row.tenant, dead_reason, reason, poison=True))
            else:
                updates.append(dict(b_id=row.id, b_status="scheduled", b_reaps=reaps, b_finished=None,
                                    b_dead_reason="", b_error=reason[:4096]))
                result.requeued.append(Retry(row.id, row.partition, row.ready_at))
        conn.execute(
            executions.update()
            .where(executions.c.id == sa.bindparam("b_id"))
            .values(
                status=sa.bindparam("b_status"), reap_count=sa.bindparam("b_reaps"),
                finished_at=sa.bindparam("b_finished"), dead_reason=sa.bindparam("b_dead_reason"),
                error=sa.bindparam("b_error"), owner=None, worker_id=None, handed_out_at=None,
            ),
            updates,
        )
        conn.execute(attempts.insert(), history)
        self._dead_lettered(conn, result.dead)
        return result

    async def running_owners(self, limit: int = 1000) -> list[str]:
        """The sessions that running executions are stamped with (a scan of the
        ``executions_owner`` partial index)."""

        def fn(conn: Connection) -> list[str]:
            query = (
                sa.select(executions.c.owner)
                .where(executions.c.status == "running", executions.c.owner.is_not(None))
                .group_by(executions.c.owner)
                .limit(limit)
            )
            return [row.owner for row in conn.execute(query)]

        return await self._tx(fn)

    async def reap_owner(self, owner: str, reason: str, limit: int = 1000) -> RequeueResult:
        """Requeue up to ``limit`` running executions stamped with ``owner``, a
        session that no longer exists. Does not count towards the poison cap."""

        def fn(conn: Connection) -> RequeueResult:
            now_us = to_us(self.clock.now())
            query = (
                sa.select(
                    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition,
                    executions.c.delivery, executions.c.attempt, executions.c.ready_at, executions.c.due_at,
                    executions.c.handed_out_at, executions.c.reap_count, executions.c.worker_id,
                )
                .where(executions.c.owner == owner, executions.c.status == "running")
                .limit(limit)
            )
            if self.caps.skip_locked:
                query = query.with_for_update(skip_locked=True)
            rows = conn.execute(query).all()
            return self._requeue_rows(conn, rows, {row.id: reason for row in rows}, False, now_us)

        return await self._tx(fn)


_OUTCOME_NAMES = {
    worker_pb2.RESULT_OUTCOME_SUCCEEDED: "succeeded",
    worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE: "failed, retryable",
    worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT: "failed permanently",
    worker_pb2.RESULT_OUTCOME_TIMED_OUT: "timed out",
    worker_pb2.RESULT_OUTCOME_CANCELED: "canceled",
}
