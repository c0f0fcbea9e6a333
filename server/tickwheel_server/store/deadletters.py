"""Dead letters: executions that ended without succeeding and can be run again.

An execution is dead when ``executions.status = 'dead'``: its attempts ran
out, it failed permanently, or it killed its workers too often (poison).
Its payload, ``dead_reason`` and the error of its last attempt stay on the
row, and every attempt's error in ``attempts``.

Reads are scoped to one tenant: another tenant's execution is
indistinguishable from a missing one (NotFound).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import to_us

from ..errors import FailedPrecondition, NotFound
from ..alerts.catalogue import AlertRecord, dead_letter_key, poison_key
from .alerts import AlertStore
from .base import SqlStore
from .history import ExecutionRecord, _attempts_of, execution_from_row
from .isolation import status_in
from .manual import counted, take_units
from .quota import SlotPicker
from .tables import executions


@dataclass(frozen=True)
class DeadLetterPage:
    """One page of dead executions, newest ``finished_at`` first, each with its attempts."""

    executions: tuple[ExecutionRecord, ...]
    more: bool

    @property
    def next_key(self) -> tuple[datetime, str] | None:
        """``before_key`` for the next page, or None on the last page."""
        if not self.more or not self.executions:
            return None
        last = self.executions[-1]
        return last.finished_at, last.id


class DeadLetterStore(SqlStore):
    """A tenant's dead executions, and replaying them.

    ``alerts`` is the server's alert store: a replay resolves the
    execution's dead-letter and poison alerts in its own transaction.
    """

    def __init__(self, engine, clock, alerts: AlertStore) -> None:
        super().__init__(engine, clock)
        self._alerts = alerts
        self._slots = SlotPicker()

    async def list(
        self,
        tenant: str,
        *,
        job_id: str = "",
        before_key: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> DeadLetterPage:
        """One page of ``tenant``'s dead executions (only ``job_id``'s when
        given), newest ``finished_at`` first, ties by id descending, each with
        its attempts (oldest first, every series).

        Paged by the key ``(finished_at, id)``: ``before_key`` is the
        previous page's :attr:`DeadLetterPage.next_key`. A job the tenant has
        no dead executions of (or another tenant's job) gives an empty page.

        Two statements in one transaction: a backwards range scan with a
        LIMIT on ``executions_dead (tenant, finished_at, id)`` (or
        ``executions_dead_job`` with a job), and the page's attempts by
        primary key.
        """
        if limit < 1:
            raise ValueError("limit must be >= 1")
        query = sa.select(executions).where(status_in(executions.c.status, "dead"), executions.c.tenant == tenant)
        if job_id:
            query = query.where(executions.c.job_id == job_id)
        if before_key is not None:
            at, ident = to_us(before_key[0]), before_key[1]
            # The first conjunct bounds the index range; the second breaks ties on id.
            query = query.where(
                executions.c.finished_at <= at,
                sa.or_(executions.c.finished_at < at, executions.c.id < ident),
            )
        query = query.order_by(executions.c.finished_at.desc(), executions.c.id.desc()).limit(limit + 1)

        def fn(conn: Connection) -> DeadLetterPage:
            rows = conn.execute(query).all()
            more = len(rows) > limit
            rows = rows[:limit]
            found = _attempts_of(conn, [row.id for row in rows])
            now_us = to_us(self.clock.now())
            return DeadLetterPage(tuple(execution_from_row(row, found[row.id], now_us=now_us) for row in rows), more)

        return await self._tx(fn)

    async def replay(self, tenant: str, execution_id: str) -> ExecutionRecord:
        """Start a fresh attempt series for a dead execution, same id; the
        execution as it is afterwards, with its attempts (those of earlier
        series stay).

        - ``status`` ``scheduled``, ``attempt`` 1, ``ready_at`` now (this
          server's clock: the next hand-out round takes it), ``owner`` and
          ``worker_id`` and ``handed_out_at`` cleared, ``reap_count`` 0, ``dead_reason`` ``''``,
          ``finished_at`` NULL. ``delivery`` is kept: deliveries only grow
          over an execution's life, so ``(id, attempt, delivery)`` stays
          unique in ``attempts`` and a result from an earlier series is
          stale. ``error`` (the last failed attempt's) and the payload are
          kept.
        - In the same transaction, its open ``dead_letter:<id>`` and
          ``poison:<id>`` alerts are resolved (numbered in the feed before
          this returns).
        - It queues a run the tenant asked for, as a trigger does: it takes
          a unit of the tenant's ``max_pending_manual_runs`` and names its
          slot in ``manual_slot`` until it starts or ends
          (:mod:`.manualslots`); QuotaExceeded when none is left.
        - FailedPrecondition when it is not dead, NotFound when missing or
          another tenant's, QuotaExceeded; nothing is written then.
        """
        now = self.clock.now()
        now_us = to_us(now)

        def fn(conn: Connection, slot: int, deal: bool) -> tuple[ExecutionRecord, list[AlertRecord]]:
            # The status condition is the fence: only a dead row moves, once.
            moved = conn.execute(
                executions.update()
                .where(
                    executions.c.id == execution_id, executions.c.tenant == tenant,
                    status_in(executions.c.status, "dead"),
                )
                .values(
                    status="scheduled", attempt=1, ready_at=now_us, owner=None, worker_id=None, handed_out_at=None,
                    reap_count=0, dead_reason="", finished_at=None, manual_slot=slot,
                )
                .returning(executions.c.id)
            ).all()
            row = conn.execute(
                sa.select(executions).where(executions.c.id == execution_id, executions.c.tenant == tenant)
            ).first()
            if row is None:
                raise NotFound("execution", execution_id)
            if not moved:
                raise FailedPrecondition(f"execution {execution_id!r}", f"it is {row.status}, not dead")
            take_units(conn, self.caps, tenant, slot, 1, deal)
            resolved = self._alerts.resolve_many_in(
                conn, [dead_letter_key(execution_id), poison_key(execution_id)], now=now
            )
            return execution_from_row(row, _attempts_of(conn, [row.id])[row.id], now_us=now_us), resolved

        execution, resolved = await counted(self, self._slots, tenant, fn)
        if resolved:
            await self._alerts.sequence_after_commit()
        return execution

