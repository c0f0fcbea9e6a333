"""The dispatcher's claim: due jobs → execution rows + advanced cursors, in
one transaction per batch, fenced by partition epochs.

One batched query over all owned partitions selects active jobs whose
``next_run_at`` is within the look-ahead (a range scan on ``jobs_due`` with a
LIMIT; ``FOR UPDATE SKIP LOCKED`` where the engine has it, so two claimers
never wait on each other). For each job the pure :func:`plan_claim` decides
the occurrences; then, in the same transaction: the execution rows are
inserted (derived ids; ``ON CONFLICT DO NOTHING`` so a backfilled occurrence
is not created twice), skip ranges recorded, and every job's cursor advanced
with one batched UPDATE. The partitions' epochs are checked in that
transaction first: a job of a partition whose stored epoch is no longer the
one this server won is left alone. A crash anywhere leaves nothing or the
whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from tickwheel.v1 import job_pb2

from ..dispatcher.plan import DEFAULT_SCAN_LIMIT, Plan, execution_id, plan_claim
from ..ids import from_us, to_us
from ..jobspec import MISFIRE_POLICIES, handler_of, schedule_of
from ..schedule import Fire, ScheduleError, next_fire
from .base import SqlStore
from .partitions import check_epochs
from .tables import executions, jobs, skips

MISFIRE_REASON = "misfire"


@dataclass(frozen=True)
class ClaimedExecution:
    """An execution the claim created (or found already created), for the wheel."""

    id: str
    partition: int
    due_at_us: int


@dataclass
class ClaimResult:
    executions: list[ClaimedExecution] = field(default_factory=list)
    jobs: int = 0
    """Jobs whose cursor this batch advanced."""
    skipped: int = 0
    """Occurrences recorded as skipped (misfire policy)."""
    stale_partitions: set[int] = field(default_factory=set)
    """Owned partitions whose epoch moved on: this server must stop claiming them."""
    full: bool = False
    """The batch hit its LIMIT: more may be due now."""


def _insert_ignoring_duplicates(conn: Connection, rows: list[dict]) -> None:
    if not rows:
        return
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    conn.execute(dialect.insert(executions).on_conflict_do_nothing(index_elements=["id"]), rows)


class DispatchStore(SqlStore):
    async def claim_due(
        self,
        owned: dict[int, int],
        now: datetime,
        *,
        lookahead: timedelta = timedelta(seconds=60),
        batch: int = 1000,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
    ) -> ClaimResult:
        """Claim one batch of due jobs of the ``owned`` partitions (partition →
        the epoch this server holds). ``now`` is the dispatcher's clock,
        decided once for the whole batch."""
        if not owned:
            return ClaimResult()
        now_us = to_us(now)
        horizon_us = to_us(now + lookahead)

        def fn(conn: Connection) -> ClaimResult:
            result = ClaimResult()
            result.stale_partitions = check_epochs(conn, owned)
            live = sorted(set(owned) - result.stale_partitions)
            if not live:
                return result
            query = (
                sa.select(
                    jobs.c.id, jobs.c.tenant, jobs.c.partition, jobs.c.spec,
                    jobs.c.next_run_at, jobs.c.next_due_at, jobs.c.run_count,
                )
                .where(jobs.c.state == "active", jobs.c.partition.in_(live), jobs.c.next_run_at <= horizon_us)
                # No ORDER BY: across partitions the index cannot give rows in
                # next_run_at order, so a sort would read every due row before
                # the LIMIT. Every due job is claimed this tick anyway (batches
                # continue while full), so the order within a tick is moot.
                .limit(batch)
            )
            if self.caps.skip_locked:
                query = query.with_for_update(skip_locked=True)
            rows = conn.execute(query).all()
            result.full = len(rows) == batch
            inserts: list[dict] = []
            cursors: list[dict] = []
            for row in rows:
                job = job_pb2.Job.FromString(row.spec)
                plan = self._plan(conn, row, job, now, now + lookahead, scan_limit)
                result.jobs += 1
                handler = handler_of(job)
                for planned in plan.executions:
                    ident = execution_id(row.id, planned.nominal_at)
                    due_us = to_us(planned.due_at)
                    inserts.append(
                        dict(
                            id=ident, job_id=row.id, tenant=row.tenant, partition=row.partition, origin="scheduled",
                            nominal_at=to_us(planned.nominal_at), due_at=due_us, ready_at=due_us, attempt=1,
                            delivery=0, status="scheduled", owner=None, worker_id=None, handler=handler,
                            missed_count=planned.missed_count, reap_count=0, payload=job.payload, error="",
                            dead_reason="", created_at=now_us, finished_at=None,
                        )
                    )
                    result.executions.append(ClaimedExecution(ident, row.partition, due_us))
                if plan.skip is not None:
                    result.skipped += plan.skip.count
                    self._record_skip(conn, row, plan, now_us)
                cursors.append(
                    dict(
                        b_id=row.id,
                        b_next_run=None if plan.next_fire is None else to_us(plan.next_fire.nominal_at),
                        b_next_due=None if plan.next_fire is None else to_us(plan.next_fire.due_at),
                        b_runs=row.run_count + plan.runs,
                        b_state="active" if plan.next_fire is not None else "completed",
                    )
                )
            _insert_ignoring_duplicates(conn, inserts)
            if cursors:
                conn.execute(
                    jobs.update()
                    .where(jobs.c.id == sa.bindparam("b_id"))
                    .values(
                        next_run_at=sa.bindparam("b_next_run"),
                        next_due_at=sa.bindparam("b_next_due"),
                        run_count=sa.bindparam("b_runs"),
                        state=sa.bindparam("b_state"),
                    ),
                    cursors,
                )
            return result

        return await self._tx(fn)

    @staticmethod
    def _plan(conn: Connection, row, job: job_pb2.Job, now: datetime, horizon: datetime, scan_limit: int) -> Plan:
        schedule = schedule_of(job, row.id)
        threshold = job.misfire_threshold.ToTimedelta()
        cursor = Fire(from_us(row.next_run_at), from_us(row.next_due_at), 0)
        carried = 0
        if now - cursor.due_at > threshold:
            carried = conn.execute(
                sa.select(skips.c.count).where(
                    skips.c.job_id == row.id, skips.c.reason == MISFIRE_REASON, skips.c.continues_at == row.next_run_at
                )
            ).scalar() or 0

        def following(fire: Fire, runs: int) -> Fire | None:
            try:
                return next_fire(schedule, fire.nominal_at, runs_so_far=row.run_count + runs)
            except ScheduleError:
                return None

        return plan_claim(
            cursor,
            following,
            now=now,
            horizon=horizon,
            policy=MISFIRE_POLICIES[job.misfire_policy],
            threshold=threshold,
            run_all_limit=job.misfire_run_all_limit or 100,
            carried_missed=carried,
            scan_limit=scan_limit,
        )

    @staticmethod
    def _record_skip(conn: Connection, row, plan: Plan, now_us: int) -> None:
        skip = plan.skip
        from_us_, to_us_ = to_us(skip.from_at), to_us(skip.to_at)
        continues = None if skip.continues_at is None else to_us(skip.continues_at)
        extended = conn.execute(
            skips.update()
            .where(skips.c.job_id == row.id, skips.c.reason == MISFIRE_REASON, skips.c.continues_at == from_us_)
            .values(to_at=to_us_, continues_at=continues, count=skips.c.count + skip.count)
        )
        if extended.rowcount == 0:
            conn.execute(
                skips.insert().values(
                    id=f"{row.id}:skip:{from_us_}", job_id=row.id, tenant=row.tenant, from_at=from_us_, to_at=to_us_,
                    continues_at=continues, count=skip.count, reason=MISFIRE_REASON, created_at=now_us,
                )
            )

    async def scheduled_in(self, partitions: list[int], until: datetime, limit: int = 100_000) -> list[ClaimedExecution]:
        """Executions of ``partitions`` waiting to be handed out whose ready
        instant is at or before ``until``: what the timer wheel is rebuilt from
        when partitions are acquired (the store is the authority)."""
        if not partitions:
            return []
        until_us = to_us(until)

        def fn(conn: Connection) -> list[ClaimedExecution]:
            query = (
                sa.select(executions.c.id, executions.c.partition, executions.c.ready_at)
                .where(
                    executions.c.status == "scheduled",
                    executions.c.partition.in_(partitions),
                    executions.c.ready_at <= until_us,
                )
                .order_by(executions.c.ready_at)
                .limit(limit)
            )
            return [ClaimedExecution(r.id, r.partition, r.ready_at) for r in conn.execute(query)]

        return await self._tx(fn)
