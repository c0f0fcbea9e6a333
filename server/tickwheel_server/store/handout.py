"""Hand-out and outcomes: the executions table as the queue.

:meth:`HandoutStore.claim_ready` moves ready executions from ``scheduled`` to
``running`` in one batched ``UPDATE … WHERE id IN (SELECT … ready_at <= :now
… LIMIT n FOR UPDATE SKIP LOCKED) RETURNING …``, stamping the server's
session and the next delivery number; ``:now`` is the handing-out server's
clock, so nothing is handed out before its due instant by that clock. The
status transition is the fence: two servers can never both move a row.

:meth:`HandoutStore.record_results` applies workers' results in one
transaction per batch: one read of the rows (locked), one batched update,
one batched insert of attempt rows. A result whose delivery is not the
current one is rejected and changes nothing; a repeated result is
acknowledged again and changes nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from tickwheel.v1 import job_pb2, worker_pb2

from ..ids import to_us
from ..retry import backoff_delay
from .base import SqlStore
from .tables import attempts, executions, jobs

TERMINAL = ("succeeded", "dead", "canceled")


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


@dataclass(frozen=True)
class ResultIn:
    execution_id: str
    delivery: int
    attempt: int
    outcome: int
    """A ``tickwheel.v1.ResultOutcome``."""
    error: str
    worker_id: str
    handed_out_at: datetime | None
    """When this server handed it out (lateness is measured from here); None if unknown."""
    retry_after: timedelta | None = None


@dataclass(frozen=True)
class ResultAck:
    execution_id: str
    delivery: int
    accepted: bool
    reason: str = ""


class HandoutStore(SqlStore):
    def __init__(self, engine, clock, *, rng: random.Random | None = None) -> None:
        super().__init__(engine, clock)
        self._rng = rng or random.Random()

    async def claim_ready(self, owner: str, now: datetime, capability: Capability, limit: int) -> list[HandedOut]:
        """Hand out up to ``limit`` executions whose ready instant is at or
        before ``now`` and that ``capability`` may run, oldest ready first."""
        if limit <= 0 or not capability.tenants or not (capability.handlers or capability.http):
            return []
        now_us = to_us(now)

        def fn(conn: Connection) -> list[HandedOut]:
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
                .values(status="running", owner=owner, delivery=executions.c.delivery + 1)
                .returning(
                    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.origin,
                    executions.c.nominal_at, executions.c.due_at, executions.c.ready_at, executions.c.attempt,
                    executions.c.delivery, executions.c.payload, executions.c.missed_count,
                )
            ).all()
            if not claimed:
                return []
            job_ids = sorted({row.job_id for row in claimed})
            specs = dict(conn.execute(sa.select(jobs.c.id, jobs.c.spec).where(jobs.c.id.in_(job_ids))).all())
            handed = [
                HandedOut(
                    r.id, r.job_id, r.tenant, r.origin, r.nominal_at, r.due_at, r.ready_at, r.attempt, r.delivery,
                    bytes(r.payload), r.missed_count, bytes(specs.get(r.job_id, b"")),
                )
                for r in claimed
            ]
            handed.sort(key=lambda h: h.ready_at_us)
            return handed

        return await self._tx(fn)

    async def release(self, handed: list[tuple[str, int]]) -> None:
        """Put back executions handed out but never sent to a worker (their
        stream closed first): ``scheduled`` again, delivery unchanged for the
        next hand-out to increment."""
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
                .values(status="scheduled", owner=None, worker_id=None, delivery=executions.c.delivery - 1),
                [dict(b_id=ident, b_delivery=delivery) for ident, delivery in handed],
            )

        await self._tx(fn)

    async def record_results(self, results: list[ResultIn]) -> list[ResultAck]:
        """Apply outcomes; returns one ack per result, in order."""
        if not results:
            return []
        now = self.clock.now()
        now_us = to_us(now)
        rng_state = self._rng.getstate()

        def fn(conn: Connection) -> list[ResultAck]:
            self._rng.setstate(rng_state)  # the same delays if the transaction is retried
            ids = sorted({r.execution_id for r in results})
            query = (
                sa.select(
                    executions.c.id, executions.c.status, executions.c.delivery, executions.c.attempt,
                    executions.c.due_at, executions.c.ready_at, jobs.c.spec,
                )
                .select_from(executions.outerjoin(jobs, jobs.c.id == executions.c.job_id))
                .where(executions.c.id.in_(ids))
            )
            if self.caps.row_locks:
                query = query.with_for_update(of=executions)
            rows = {row.id: row for row in conn.execute(query)}
            acks: list[ResultAck] = []
            updates: list[dict] = []
            history: list[dict] = []
            seen: set[tuple[str, int]] = set()
            for result in results:
                row = rows.get(result.execution_id)
                key = (result.execution_id, result.delivery)
                if row is None:
                    acks.append(ResultAck(*key, False, "no such execution"))
                    continue
                if row.status != "running" or row.delivery != result.delivery or row.attempt != result.attempt:
                    already = row.delivery == result.delivery and (row.status in TERMINAL or row.attempt > result.attempt)
                    if already:
                        acks.append(ResultAck(*key, True, "already recorded"))
                    else:
                        acks.append(ResultAck(*key, False, f"stale delivery: the current one is {row.delivery} ({row.status})"))
                    continue
                if key in seen:
                    acks.append(ResultAck(*key, True, "already recorded"))
                    continue
                seen.add(key)
                update, attempt_status = self._outcome(row, result, now, now_us)
                updates.append(update)
                started = result.handed_out_at or now
                measured_from = row.due_at if row.attempt == 1 else row.ready_at
                history.append(
                    dict(
                        execution_id=row.id, attempt=row.attempt, delivery=row.delivery, status=attempt_status,
                        started_at=to_us(started), finished_at=now_us,
                        lateness_us=max(0, to_us(started) - measured_from),
                        worker_id=result.worker_id, error=result.error[:4096],
                    )
                )
                acks.append(ResultAck(*key, True))
            if updates:
                conn.execute(
                    executions.update()
                    .where(executions.c.id == sa.bindparam("b_id"))
                    .values(
                        status=sa.bindparam("b_status"), attempt=sa.bindparam("b_attempt"),
                        delivery=sa.bindparam("b_delivery"), ready_at=sa.bindparam("b_ready_at"),
                        error=sa.bindparam("b_error"), dead_reason=sa.bindparam("b_dead_reason"),
                        finished_at=sa.bindparam("b_finished_at"), owner=None, worker_id=None,
                    ),
                    updates,
                )
                conn.execute(attempts.insert(), history)
            return acks

        return await self._tx(fn)

    def _outcome(self, row, result: ResultIn, now: datetime, now_us: int) -> tuple[dict, str]:
        """The execution's new values and the attempt's status for one result."""
        update = dict(
            b_id=row.id, b_status="succeeded", b_attempt=row.attempt, b_delivery=row.delivery,
            b_ready_at=row.ready_at, b_error=result.error[:4096], b_dead_reason="", b_finished_at=now_us,
        )
        outcome = result.outcome
        if outcome == worker_pb2.RESULT_OUTCOME_SUCCEEDED:
            return update, "succeeded"
        if outcome == worker_pb2.RESULT_OUTCOME_CANCELED:
            update["b_status"] = "canceled"
            return update, "canceled"
        attempt_status = "timed_out" if outcome == worker_pb2.RESULT_OUTCOME_TIMED_OUT else "failed"
        if outcome == worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT:
            update.update(b_status="dead", b_dead_reason="failed permanently")
            return update, attempt_status
        policy = job_pb2.Job.FromString(row.spec).retry_policy if row.spec else job_pb2.RetryPolicy()
        max_attempts = policy.max_attempts or 5
        if row.attempt >= max_attempts:
            update.update(b_status="dead", b_dead_reason=f"attempts exhausted ({row.attempt} of {max_attempts})")
            return update, attempt_status
        initial = policy.initial_backoff.ToTimedelta() if policy.HasField("initial_backoff") else timedelta(seconds=1)
        cap = policy.max_backoff.ToTimedelta() if policy.HasField("max_backoff") else timedelta(hours=1)
        delay = backoff_delay(row.attempt + 1, initial, cap, self._rng, result.retry_after)
        update.update(
            b_status="scheduled", b_attempt=row.attempt + 1, b_delivery=0, b_ready_at=to_us(now + delay),
            b_finished_at=None,
        )
        return update, attempt_status
