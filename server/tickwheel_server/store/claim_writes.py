"""The writes of the dispatcher's claim (see :mod:`.dispatch`): one batch's
new execution rows and advanced cursors, and the skip ranges its plans record.

The rows and cursors are two statements per batch whatever its size: on
PostgreSQL and CockroachDB each is one statement over arrays (``INSERT …
SELECT FROM unnest(…)``, ``UPDATE job_cursors … FROM unnest(…)``); on SQLite an
executemany. The rows the claim hands out itself (:mod:`.claim_handout`)
go in an INSERT of their own, already ``running``. The batch's skip
ranges (misfire, tenant paused, backlog) are :class:`SkipWrites`: one
UPDATE extending those that continue an open range and one INSERT of the
rest, however many jobs (a job nobody takes extends its ``backlog`` range
at every claim). Everything here runs
inside the claim's transaction; on PostgreSQL and CockroachDB :func:`write`
sends the writes together, with the COMMIT after them (:mod:`.pipeline`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..alerts.catalogue import NewAlert, skipped_alert
from ..policy.backlog import BACKLOG_REASON
from ..policy.claim import PlannedSkip
from ..jobspec import JobDefinition
from ..schedule import Fire
from . import pipeline
from .base import driver_sql, execute_arrays
from .binary_arrays import BigintArray, ByteaArray, IntegerArray, TextArray
from .pipeline import Statement
from .skiptally import counted
from .tables import executions, job_cursors, skips

MISFIRE_REASON = "misfire"
TENANT_PAUSED_REASON = "tenant_paused"
_ALERTING = frozenset({MISFIRE_REASON, BACKLOG_REASON})
"""The reasons whose ranges raise the job's ``skipped`` alert."""

# Columns every new scheduled execution has in common are constants of the
# statement; the arrays carry only what differs per row. Sent as driver SQL
# with psycopg's binary placeholders (``%(name)b``): a column becomes one
# binary array parameter, without the per-element quoting of the text
# format, packed whole rather than by psycopg's per-element list dumper.
_INSERT_FROM_ARRAYS = (
    "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
    "delivery, status, owner, worker_id, handler, missed_count, reap_count, payload, error, dead_reason, "
    "created_at, finished_at) "
    "SELECT v.id, v.job_id, v.tenant, v.partition, 'scheduled', v.nominal_at, v.due_at, v.due_at, 1, "
    "0, 'scheduled', NULL, NULL, v.handler, v.missed_count, 0, v.payload, '', '', "
    "CAST(%(created_at)b AS BIGINT), NULL "
    "FROM unnest(CAST(%(ids)b AS TEXT[]), CAST(%(job_ids)b AS TEXT[]), CAST(%(tenants)b AS TEXT[]), "
    "CAST(%(partitions)b AS INTEGER[]), CAST(%(nominal_ats)b AS BIGINT[]), CAST(%(due_ats)b AS BIGINT[]), "
    "CAST(%(handlers)b AS TEXT[]), CAST(%(missed_counts)b AS INTEGER[]), CAST(%(payloads)b AS BYTEA[])) "
    "AS v (id, job_id, tenant, partition, nominal_at, due_at, handler, missed_count, payload) "
    "ON CONFLICT (id) DO NOTHING"
)
# The same with each row's trace context, while tracing is on.
_INSERT_TRACED_FROM_ARRAYS = (
    _INSERT_FROM_ARRAYS.replace("created_at, finished_at) ", "created_at, finished_at, trace_context) ")
    .replace("CAST(%(created_at)b AS BIGINT), NULL ", "CAST(%(created_at)b AS BIGINT), NULL, v.trace_context ")
    .replace("CAST(%(payloads)b AS BYTEA[]))", "CAST(%(payloads)b AS BYTEA[]), CAST(%(trace_contexts)b AS TEXT[]))")
    .replace("missed_count, payload) ", "missed_count, payload, trace_context) ")
)
# The rows the claim hands out itself (:mod:`.claim_handout`): ``running``,
# stamped with the server's session, delivery 1 and the hand-out instant;
# the ids inserted come back (one that already existed is not handed out).
_HANDED_OUT = (
    ("1, 0, 'scheduled', NULL, NULL, ", "1, 1, 'running', CAST(%(owner)b AS TEXT), NULL, "),
    ("created_at, finished_at", "created_at, finished_at, handed_out_at"),
    ("CAST(%(created_at)b AS BIGINT), NULL", "CAST(%(created_at)b AS BIGINT), NULL, CAST(%(at)b AS BIGINT)"),
)


def _handed_out(sql: str) -> str:
    for old, new in _HANDED_OUT:
        if sql.count(old) != 1:
            raise AssertionError(f"the claim's INSERT no longer reads {old!r} once")
        sql = sql.replace(old, new)
    return sql + " RETURNING id"


_INSERT_HANDED_OUT_FROM_ARRAYS = _handed_out(_INSERT_FROM_ARRAYS)
_INSERT_HANDED_OUT_TRACED_FROM_ARRAYS = _handed_out(_INSERT_TRACED_FROM_ARRAYS)
# The cursors only (``job_cursors``, migration 0032): ``jobs`` and its
# indexes are not written by a claim, a completed job included (its
# cursor's state is the job's). ``job_cursors.job_id = ANY(:ids)`` beside
# the join gives the planner a path to the claimed rows by their primary
# key: with the join alone it hashes the table's every row to probe the
# arrays (a Seq Scan per batch, its cost growing with the jobs stored)
# until the table is large enough for a nested loop.
_ADVANCE_FROM_ARRAYS = (
    "UPDATE job_cursors SET next_run_at = v.next_run_at, next_due_at = v.next_due_at, run_count = v.run_count, "
    "state = v.state "
    "FROM unnest(CAST(%(ids)b AS TEXT[]), CAST(%(next_run_ats)b AS BIGINT[]), CAST(%(next_due_ats)b AS BIGINT[]), "
    "CAST(%(run_counts)b AS BIGINT[]), CAST(%(states)b AS TEXT[])) "
    "AS v (id, next_run_at, next_due_at, run_count, state) "
    "WHERE job_cursors.job_id = ANY(CAST(%(ids)b AS TEXT[])) AND job_cursors.job_id = v.id"
)
# The same writing ``next_nominal_at`` too, for a batch with a ``previous``
# job (or a row that held a moved cursor): other batches leave the column
# alone, as it is NULL for every other job.
_ADVANCE_WITH_NOMINAL_FROM_ARRAYS = (
    _ADVANCE_FROM_ARRAYS.replace("state = v.state ", "state = v.state, next_nominal_at = v.next_nominal_at ")
    .replace("CAST(%(states)b AS TEXT[])) ", "CAST(%(states)b AS TEXT[]), CAST(%(next_nominal_ats)b AS BIGINT[])) ")
    .replace("run_count, state) ", "run_count, state, next_nominal_at) ")
)
_ADVANCE_ROW = (
    job_cursors.update()
    .where(job_cursors.c.job_id == sa.bindparam("b_id"))
    .values(
        next_run_at=sa.bindparam("b_next_run"),
        next_due_at=sa.bindparam("b_next_due"),
        run_count=sa.bindparam("b_runs"),
        state=sa.bindparam("b_state"),
    )
)
_ADVANCE_WITH_NOMINAL_ROW = _ADVANCE_ROW.values(next_nominal_at=sa.bindparam("b_next_nominal"))


@dataclass
class ClaimWrites:
    """One batch's new executions and advanced cursors, column by column."""

    ids: list[str] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)
    tenants: list[str] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    nominal_ats: list[int] = field(default_factory=list)
    due_ats: list[int] = field(default_factory=list)
    handlers: list[str | None] = field(default_factory=list)
    missed_counts: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    trace_contexts: list[str] = field(default_factory=list)
    """Empty unless tracing is on: then one traceparent per new execution."""
    cursor_ids: list[str] = field(default_factory=list)
    next_run_ats: list[int | None] = field(default_factory=list)
    next_due_ats: list[int | None] = field(default_factory=list)
    run_counts: list[int] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    next_nominal_ats: list[int | None] = field(default_factory=list)
    """Per cursor: its nominal instant when ``next_run_at`` is an earlier scan key (``previous``), else None."""
    nominal: bool = False
    """Whether the cursors' ``next_nominal_at`` is written: a ``previous`` job, or a row that held one, is in the batch."""

    def array_statements(self, now_us: int) -> list[Statement]:
        """PostgreSQL and CockroachDB: the INSERT and the UPDATE over arrays
        (none for an empty side), to send (:func:`write`)."""
        statements: list[Statement] = []
        if self.ids:
            traced = bool(self.trace_contexts)
            statements.append((_INSERT_TRACED_FROM_ARRAYS if traced else _INSERT_FROM_ARRAYS, self._row_arrays(now_us)))
        if self.cursor_ids:
            nominal = dict(next_nominal_ats=BigintArray(self.next_nominal_ats)) if self.nominal else {}
            statements.append((
                _ADVANCE_WITH_NOMINAL_FROM_ARRAYS if nominal else _ADVANCE_FROM_ARRAYS,
                dict(
                    ids=TextArray(self.cursor_ids), next_run_ats=BigintArray(self.next_run_ats),
                    next_due_ats=BigintArray(self.next_due_ats), run_counts=BigintArray(self.run_counts),
                    states=TextArray(self.states), **nominal,
                ),
            ))  # fmt: skip
        return statements

    def apply_per_row(self, conn: Connection, now_us: int) -> None:
        """SQLite: the same rows through executemany (no arrays, no network)."""
        if self.ids:
            conn.execute(sqlite.insert(executions).on_conflict_do_nothing(index_elements=["id"]), self._rows(now_us))
        if self.cursor_ids:
            rows = [
                dict(b_id=ident, b_next_run=next_run, b_next_due=next_due, b_runs=runs, b_state=state)
                for ident, next_run, next_due, runs, state in zip(
                    self.cursor_ids, self.next_run_ats, self.next_due_ats, self.run_counts, self.states
                )
            ]
            if self.nominal:
                for row, nominal in zip(rows, self.next_nominal_ats):
                    row["b_next_nominal"] = nominal
            conn.execute(_ADVANCE_WITH_NOMINAL_ROW if self.nominal else _ADVANCE_ROW, rows)

    def take(self, indices: list[int]) -> "ClaimWrites":
        """Move the new executions at ``indices`` (ascending) out of these
        writes into writes of their own, which hold no cursor."""
        taken = ClaimWrites()
        names = _ROW_COLUMNS if not self.trace_contexts else (*_ROW_COLUMNS, "trace_contexts")
        if len(indices) == len(self.ids):  # every one (what is due now, handed out whole): the columns move
            for name in names:
                setattr(taken, name, getattr(self, name))
                setattr(self, name, [])
            return taken
        moved = set(indices)
        for name in names:
            column = getattr(self, name)
            setattr(taken, name, [column[i] for i in indices])
            setattr(self, name, [value for i, value in enumerate(column) if i not in moved])
        return taken

    def handed_out_statement(self, now_us: int, owner: str, at_us: int) -> Statement:
        """PostgreSQL and CockroachDB: the INSERT of these new executions
        already handed out (``running``, ``owner``, delivery 1, handed out
        at ``at_us``), returning the ids inserted: one that already existed
        is left as it was."""
        sql = _INSERT_HANDED_OUT_TRACED_FROM_ARRAYS if self.trace_contexts else _INSERT_HANDED_OUT_FROM_ARRAYS
        return sql, dict(self._row_arrays(now_us), owner=owner, at=at_us)

    def insert_handed_out_per_row(self, conn: Connection, now_us: int, owner: str, at_us: int) -> set[str]:
        """SQLite: :meth:`handed_out_statement`'s insert; the ids inserted."""
        if not self.ids:
            return set()
        # One writer at a time, so what exists now is what the insert would pass over.
        existing = set(conn.execute(sa.select(executions.c.id).where(executions.c.id.in_(self.ids))).scalars())
        rows = [
            dict(row, delivery=1, status="running", owner=owner, handed_out_at=at_us)
            for row in self._rows(now_us) if row["id"] not in existing
        ]
        if rows:
            conn.execute(sqlite.insert(executions).on_conflict_do_nothing(index_elements=["id"]), rows)
        return {row["id"] for row in rows}

    def _row_arrays(self, now_us: int) -> dict:
        """The INSERT's parameters: each column packed whole (:mod:`.binary_arrays`)."""
        traced = dict(trace_contexts=TextArray(self.trace_contexts)) if self.trace_contexts else {}
        return dict(
            ids=TextArray(self.ids), job_ids=TextArray(self.job_ids), tenants=TextArray(self.tenants),
            partitions=IntegerArray(self.partitions), nominal_ats=BigintArray(self.nominal_ats),
            due_ats=BigintArray(self.due_ats), handlers=TextArray(self.handlers),
            missed_counts=IntegerArray(self.missed_counts), payloads=ByteaArray(self.payloads), created_at=now_us,
            **traced,
        )

    def _rows(self, now_us: int) -> list[dict]:
        rows = [
            dict(
                id=ident, job_id=job_id, tenant=tenant, partition=partition, origin="scheduled",
                nominal_at=nominal, due_at=due, ready_at=due, attempt=1, delivery=0, status="scheduled",
                owner=None, worker_id=None, handler=handler, missed_count=missed, reap_count=0, payload=payload,
                error="", dead_reason="", created_at=now_us, finished_at=None,
            )
            for ident, job_id, tenant, partition, nominal, due, handler, missed, payload in zip(
                self.ids, self.job_ids, self.tenants, self.partitions, self.nominal_ats, self.due_ats,
                self.handlers, self.missed_counts, self.payloads,
            )
        ]
        for row, trace_context in zip(rows, self.trace_contexts):
            row["trace_context"] = trace_context
        return rows


_ROW_COLUMNS = (
    "ids", "job_ids", "tenants", "partitions", "nominal_ats", "due_ats", "handlers", "missed_counts", "payloads"
)
"""The columns of :class:`ClaimWrites` that hold one value per new execution."""


def write(conn: Connection, arrays: bool, writes: ClaimWrites, now_us: int, direct=None, taken=None, at_us: int = 0,
          *, commit: bool = False) -> set[str]:
    """A claim's writes: ``writes`` (its new scheduled executions and its
    cursors) and, with ``taken`` (what ``direct``, its
    :class:`~.claim_handout.DirectHandOut`, took out of them), those
    inserted handed out at the unique instant after ``at_us``. The ids
    inserted handed out (``direct.handed`` says how, per group).

    On PostgreSQL and CockroachDB the statements go in one round trip
    (:func:`.pipeline.send`), with the COMMIT after them when ``commit``:
    the offer's fence is asked just before that trip, and ``direct.handed``
    holds every row sent handed out until the reply says which were
    inserted (what a COMMIT gone unanswered may have done). SQLite runs
    them one by one and its transaction's runner commits."""
    if not arrays:
        writes.apply_per_row(conn, now_us)
        return set() if taken is None else direct.insert_per_row(conn, taken, at_us)
    statements = writes.array_statements(now_us)
    if taken is not None:
        statements.append(taken.handed_out_statement(now_us, direct.offer.owner, direct.stamp(taken, at_us)))
        if commit:
            direct.before_commit()
    if not statements and not commit:
        return set()
    results = pipeline.send(conn, statements, commit=commit)
    if taken is None:
        return set()
    inserted = {ident for (ident,) in results[-1]}
    direct.keep(taken, inserted)
    return inserted


def carried_missed(conn: Connection, row, definition: JobDefinition, cursor: Fire, now: datetime) -> int:
    """How many missed occurrences earlier claims recorded for this run of
    misses (the open misfire range continuing at the cursor); 0 unless
    the cursor itself is missed (judged at the earlier instant a
    ``previous`` rule moved it to, where the row holds one)."""
    if row.next_nominal_at is None:
        due, nominal_us = cursor.due_at, row.next_run_at
    else:
        due, nominal_us = from_us(row.next_run_at) + (cursor.due_at - cursor.nominal_at), row.next_nominal_at
    if row.tenant_state == "paused" or now - due <= definition.misfire_threshold:
        return 0
    return conn.execute(
        sa.select(skips.c.count).where(
            skips.c.job_id == row.id, skips.c.reason == MISFIRE_REASON, skips.c.continues_at == nominal_us
        )
    ).scalar() or 0


# A claim batch's skip ranges that continue an open one (misfire, tenant
# paused, backlog: each claim of a job nobody takes extends its range):
# one UPDATE over arrays for the batch, found through skips_job by the ids
# (ANY beside the join), returning which (job, reason) it extended.
_EXTEND_FROM_ARRAYS = driver_sql(
    "UPDATE skips SET to_at = v.to_at, continues_at = v.continues_at, count = skips.count + v.count "
    "FROM unnest(CAST(:job_ids AS TEXT[]), CAST(:reasons AS TEXT[]), CAST(:froms AS BIGINT[]), "
    "CAST(:tos AS BIGINT[]), CAST(:continues AS BIGINT[]), CAST(:counts AS BIGINT[])) "
    "AS v (job_id, reason, from_at, to_at, continues_at, count) "
    "WHERE skips.job_id = ANY(CAST(:job_ids AS TEXT[])) AND skips.job_id = v.job_id AND skips.reason = v.reason "
    "AND skips.continues_at = v.from_at "
    "RETURNING skips.job_id, skips.reason"
)


class SkipWrite(NamedTuple):
    job_id: str
    tenant: str
    reason: str
    first_us: int
    last_us: int
    continues_us: int | None
    count: int


@dataclass
class SkipWrites:
    """One claim batch's skip ranges: each extends its job's open range of
    its reason that continues at its first occurrence, or starts one (id
    ``<job>:skip:<from>`` for a misfire, ``<job>:<reason>:<from>``
    otherwise). At most one per (job, reason) a batch."""

    ranges: list[SkipWrite] = field(default_factory=list)

    def add(self, row, skip: PlannedSkip, reason: str) -> None:
        continues = None if skip.continues_at is None else to_us(skip.continues_at)
        self.ranges.append(
            SkipWrite(row.id, row.tenant, reason, to_us(skip.from_at), to_us(skip.to_at), continues, skip.count)
        )

    def alerts(self) -> list[NewAlert]:
        """The ``skipped`` alert of each job whose misfire policy or backlog
        cap skipped occurrences in this batch (a paused tenant's raise none)."""
        return [
            skipped_alert(
                job_id=one.job_id, tenant=one.tenant, reason=one.reason, from_at=from_us(one.first_us),
                to_at=from_us(one.last_us), count=one.count,
            )
            for one in self.ranges if one.reason in _ALERTING
        ]  # fmt: skip

    def write(self, conn: Connection, arrays: bool, now_us: int) -> None:
        """On PostgreSQL and CockroachDB one UPDATE extending what continues
        (:data:`_EXTEND_FROM_ARRAYS`) and one INSERT of the rest, whatever
        their number; on SQLite the same per range (no network)."""
        if not self.ranges:
            return
        for one in self.ranges:
            counted(one.reason, one.count)
        if not arrays:
            for one in self.ranges:
                _record(conn, one, now_us)
            return
        columns = list(zip(*self.ranges))
        extended = set(
            map(tuple, execute_arrays(conn, _EXTEND_FROM_ARRAYS, dict(
                job_ids=list(columns[0]), reasons=list(columns[2]), froms=list(columns[3]), tos=list(columns[4]),
                continues=list(columns[5]), counts=list(columns[6]),
            )).all())
        )  # fmt: skip
        new = [_new_range(one, now_us) for one in self.ranges if (one.job_id, one.reason) not in extended]
        if new:
            conn.execute(skips.insert(), new)


def _new_range(one: SkipWrite, now_us: int) -> dict:
    label = "skip" if one.reason == MISFIRE_REASON else one.reason
    return dict(
        id=f"{one.job_id}:{label}:{one.first_us}", job_id=one.job_id, tenant=one.tenant, from_at=one.first_us,
        to_at=one.last_us, continues_at=one.continues_us, count=one.count, reason=one.reason, created_at=now_us,
    )


def _record(conn: Connection, one: SkipWrite, now_us: int) -> None:
    extended = conn.execute(
        skips.update()
        .where(skips.c.job_id == one.job_id, skips.c.reason == one.reason, skips.c.continues_at == one.first_us)
        .values(to_at=one.last_us, continues_at=one.continues_us, count=skips.c.count + one.count)
    )
    if extended.rowcount == 0:
        conn.execute(skips.insert().values(**_new_range(one, now_us)))


def record_skip(conn: Connection, row, skip: PlannedSkip, reason: str, now_us: int) -> None:
    """Extend the job's open range of ``reason`` that continues at
    ``skip``'s first occurrence, or start one (as :class:`SkipWrites`, for
    one range: a calendar's, recorded per job)."""
    writes = SkipWrites()
    writes.add(row, skip, reason)
    counted(reason, skip.count)
    _record(conn, writes.ranges[0], now_us)
