"""The dispatcher's claim: due jobs → execution rows + advanced cursors, in
one transaction per batch, fenced by partition epochs.

One batched query over all owned partitions selects active jobs whose
``next_run_at`` is within the look-ahead (a range scan on ``jobs_due`` in the
index's own order, with a LIMIT; ``FOR UPDATE SKIP LOCKED`` where the engine
has it, so two claimers never wait on each other). For each job the pure :func:`plan_claim` decides
the occurrences; then, in the same transaction: the execution rows are
inserted (derived ids; ``ON CONFLICT DO NOTHING`` so a backfilled occurrence
is not created twice), skip ranges recorded, and every job's cursor advanced
with one batched UPDATE. The partitions' epochs are checked in that
transaction first: a job of a partition whose stored epoch is no longer the
one this server won is left alone. A crash anywhere leaves nothing or the
whole batch.

The writes are two statements per batch whatever its size. On PostgreSQL and
CockroachDB each is one statement over arrays (``INSERT … SELECT FROM
unnest(…)``, ``UPDATE jobs … FROM unnest(…)``): one round trip and one
parse, where a driver-level executemany sends a statement per row
(``loadtest/bench_dispatch.py`` measures both). The owned partitions are one
array parameter too, so the claim's text is the same every tick. SQLite has
no arrays and no network: there it is an executemany and an ``IN`` list.

A job's definition is parsed once per version: :class:`ClaimSpecCache` keeps
what a claim needs of it (schedule, misfire policy, handler, payload) by job
id and version, so a minutely job is not parsed again every minute.

A paused tenant's jobs are claimed like the others, but planned by
:func:`plan_paused`: their occurrences become one ``tenant_paused`` skip
range per job (extended in place claim after claim) and no execution. The
tenant's state comes with each due row (a subquery on the tenants' primary
key, evaluated only for the rows the scan returns), so pausing costs no
extra statement and resuming costs nothing: the next claim plans normally.

With an :class:`~tickwheel_server.store.alerts.AlertStore`, every misfire
skip range a claim creates or extends raises the job's ``skipped`` alert
(:func:`~tickwheel_server.store.alerts.skipped_alert`) in the claim's own
transaction: one upsert for the batch, so the alert commits with the range
or not at all. A paused tenant's ranges raise nothing: pausing is asked for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from tickwheel.v1 import job_pb2

from ..clock import Clock
from ..dispatcher.plan import DEFAULT_SCAN_LIMIT, Plan, execution_id, plan_claim, plan_paused
from ..ids import from_us, to_us
from ..jobspec import MISFIRE_POLICIES, handler_of, schedule_of
from ..schedule import Fire, Schedule, ScheduleError, next_fire
from .alerts import AlertStore, NewAlert, skipped_alert
from .base import SqlStore
from .partitions import check_epochs
from .tables import executions, jobs, skips, tenants

MISFIRE_REASON = "misfire"
TENANT_PAUSED_REASON = "tenant_paused"


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
    """Occurrences recorded as skipped (misfire policy, or the tenant paused)."""
    alerts_raised: int = 0
    """Jobs whose ``skipped`` alert this claim raised (misfire policy)."""
    stale_partitions: set[int] = field(default_factory=set)
    """Owned partitions whose epoch moved on: this server must stop claiming them."""
    full: bool = False
    """The batch hit its LIMIT: more may be due now."""


# ------------------------------------------------------------ parsed definitions


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """What a claim reads from a job's definition (``jobs.spec``)."""

    schedule: Schedule
    policy: str
    threshold: timedelta
    run_all_limit: int
    handler: str | None
    payload: bytes


def claim_spec(job_id: str, spec: bytes) -> ClaimSpec:
    """Parse a stored definition into a :class:`ClaimSpec` (pure)."""
    job = job_pb2.Job.FromString(spec)
    return ClaimSpec(
        schedule=schedule_of(job, job_id),
        policy=MISFIRE_POLICIES[job.misfire_policy],
        threshold=job.misfire_threshold.ToTimedelta(),
        run_all_limit=job.misfire_run_all_limit or 100,
        handler=handler_of(job),
        payload=job.payload,
    )


class ClaimSpecCache:
    """Parsed definitions by job id, valid for one job version: a bounded LRU.

    Sound because a job's ``spec`` changes only with its ``version``
    (``JobStore.update`` replaces both; ids are never reused), so an entry
    recorded for another version is parsed again and replaced. Bounded by
    ``max_entries`` and by ``max_payload_bytes`` (payloads are up to the
    tenant's ``max_payload_bytes`` each); the least recently used entries go
    first. Safe to share between threads (claims run in executor threads).
    """

    def __init__(self, max_entries: int = 100_000, max_payload_bytes: int = 64 << 20) -> None:
        if max_entries < 1 or max_payload_bytes < 0:
            raise ValueError("max_entries must be >= 1 and max_payload_bytes >= 0")
        self.max_entries = max_entries
        self.max_payload_bytes = max_payload_bytes
        self._entries: OrderedDict[str, tuple[int, ClaimSpec]] = OrderedDict()
        self._payload_bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def payload_bytes(self) -> int:
        return self._payload_bytes

    def get(self, job_id: str, version: int, spec: bytes) -> ClaimSpec:
        """The parsed ``spec`` of ``job_id`` at ``version``, from the cache or parsed now."""
        with self._lock:
            found = self._entries.get(job_id)
            if found is not None and found[0] == version:
                self._entries.move_to_end(job_id)
                self.hits += 1
                return found[1]
        parsed = claim_spec(job_id, spec)
        with self._lock:
            self.misses += 1
            old = self._entries.pop(job_id, None)
            if old is not None:
                self._payload_bytes -= len(old[1].payload)
            size = len(parsed.payload)
            if size <= self.max_payload_bytes:
                self._entries[job_id] = (version, parsed)
                self._payload_bytes += size
                while len(self._entries) > self.max_entries or self._payload_bytes > self.max_payload_bytes:
                    _, (_, evicted) = self._entries.popitem(last=False)
                    self._payload_bytes -= len(evicted.payload)
        return parsed


# ------------------------------------------------------------------- the writes

# Columns every new scheduled execution has in common are constants of the
# statement; the arrays carry only what differs per row. Sent as driver SQL
# with psycopg's binary placeholders (``%(name)b``): a list becomes one
# binary array parameter, without the per-element quoting of the text format.
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
_ADVANCE_FROM_ARRAYS = (
    "UPDATE jobs SET next_run_at = v.next_run_at, next_due_at = v.next_due_at, run_count = v.run_count, "
    "state = v.state "
    "FROM unnest(CAST(%(ids)b AS TEXT[]), CAST(%(next_run_ats)b AS BIGINT[]), CAST(%(next_due_ats)b AS BIGINT[]), "
    "CAST(%(run_counts)b AS BIGINT[]), CAST(%(states)b AS TEXT[])) "
    "AS v (id, next_run_at, next_due_at, run_count, state) "
    "WHERE jobs.id = v.id"
)
_ADVANCE_ROW = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("b_id"))
    .values(
        next_run_at=sa.bindparam("b_next_run"),
        next_due_at=sa.bindparam("b_next_due"),
        run_count=sa.bindparam("b_runs"),
        state=sa.bindparam("b_state"),
    )
)


@dataclass
class _Writes:
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

    def apply_with_arrays(self, conn: Connection, now_us: int) -> None:
        """PostgreSQL and CockroachDB: one INSERT and one UPDATE over arrays."""
        if self.ids:
            traced = dict(trace_contexts=self.trace_contexts) if self.trace_contexts else {}
            conn.exec_driver_sql(
                _INSERT_TRACED_FROM_ARRAYS if traced else _INSERT_FROM_ARRAYS,
                dict(
                    ids=self.ids, job_ids=self.job_ids, tenants=self.tenants, partitions=self.partitions,
                    nominal_ats=self.nominal_ats, due_ats=self.due_ats, handlers=self.handlers,
                    missed_counts=self.missed_counts, payloads=self.payloads, created_at=now_us, **traced,
                ),
            )
        if self.cursor_ids:
            conn.exec_driver_sql(
                _ADVANCE_FROM_ARRAYS,
                dict(
                    ids=self.cursor_ids, next_run_ats=self.next_run_ats, next_due_ats=self.next_due_ats,
                    run_counts=self.run_counts, states=self.states,
                ),
            )

    def apply_per_row(self, conn: Connection, now_us: int) -> None:
        """SQLite: the same rows through executemany (no arrays, no network)."""
        if self.ids:
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
            conn.execute(sqlite.insert(executions).on_conflict_do_nothing(index_elements=["id"]), rows)
        if self.cursor_ids:
            conn.execute(
                _ADVANCE_ROW,
                [
                    dict(b_id=ident, b_next_run=next_run, b_next_due=next_due, b_runs=runs, b_state=state)
                    for ident, next_run, next_due, runs, state in zip(
                        self.cursor_ids, self.next_run_ats, self.next_due_ats, self.run_counts, self.states
                    )
                ],
            )


# -------------------------------------------------------------------- the store


class DispatchStore(SqlStore):
    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        specs: ClaimSpecCache | None = None,
        trace_occurrence: Callable[[str, str, str, int], str] | None = None,
        alerts: AlertStore | None = None,
    ) -> None:
        super().__init__(engine, clock)
        self.specs = specs if specs is not None else ClaimSpecCache()
        self._alerts = alerts
        """Raises the ``skipped`` alert of a job whose misfire policy skipped occurrences."""
        self._trace_occurrence = trace_occurrence
        """While tracing is on: (execution id, job id, tenant, nominal instant) → the traceparent of a
        new trace for that occurrence, stored on its row."""

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
        horizon = now + lookahead
        horizon_us = to_us(horizon)
        arrays = not self.caps.is_sqlite

        def fn(conn: Connection) -> ClaimResult:
            result = ClaimResult()
            result.stale_partitions = check_epochs(conn, owned)
            live = sorted(set(owned) - result.stale_partitions)
            if not live:
                return result
            if arrays:  # one array parameter: the statement's text is the same whatever is owned
                in_live = jobs.c.partition == sa.any_(sa.bindparam("live", live, type_=postgresql.ARRAY(sa.Integer)))
            else:
                in_live = jobs.c.partition.in_(live)
            # Per returned row, one probe of the tenants' primary key: it
            # leaves the scan on jobs_due (and its LIMIT) as it is, and
            # FOR UPDATE locks only the jobs in FROM.
            tenant_state = (
                sa.select(tenants.c.state).where(tenants.c.name == jobs.c.tenant).scalar_subquery().label("tenant_state")
            )
            query = (
                sa.select(
                    jobs.c.id, jobs.c.tenant, jobs.c.partition, jobs.c.spec, jobs.c.version,
                    jobs.c.next_run_at, jobs.c.next_due_at, jobs.c.run_count, tenant_state,
                )
                .where(jobs.c.state == "active", in_live, jobs.c.next_run_at <= horizon_us)
                # The order of jobs_due itself, so the index gives it with no
                # sort and the scan stops at the LIMIT. Without it the plan
                # hangs on the statistics of next_run_at, which every claim
                # makes stale: estimating many rows due, PostgreSQL prefers a
                # Seq Scan that would stop early, and when nothing is due it
                # reads the whole table every tick. (Not next_run_at alone:
                # across partitions the index cannot give that order, and a
                # sort would read every due row before the LIMIT.)
                .order_by(jobs.c.partition, jobs.c.next_run_at)
                .limit(batch)
            )
            if self.caps.skip_locked:
                query = query.with_for_update(skip_locked=True)
            rows = conn.execute(query).all()
            result.full = len(rows) == batch
            writes = _Writes()
            skipped: list[NewAlert] = []
            for row in rows:
                spec = self.specs.get(row.id, row.version, row.spec)
                plan = self._plan(conn, row, spec, now, horizon, scan_limit)
                result.jobs += 1
                for planned in plan.executions:
                    ident = execution_id(row.id, planned.nominal_at)
                    due_us = to_us(planned.due_at)
                    writes.ids.append(ident)
                    writes.job_ids.append(row.id)
                    writes.tenants.append(row.tenant)
                    writes.partitions.append(row.partition)
                    writes.nominal_ats.append(to_us(planned.nominal_at))
                    writes.due_ats.append(due_us)
                    writes.handlers.append(spec.handler)
                    writes.missed_counts.append(planned.missed_count)
                    writes.payloads.append(spec.payload)
                    if self._trace_occurrence is not None:
                        writes.trace_contexts.append(
                            self._trace_occurrence(ident, row.id, row.tenant, to_us(planned.nominal_at))
                        )
                    result.executions.append(ClaimedExecution(ident, row.partition, due_us))
                if plan.skip is not None:
                    result.skipped += plan.skip.count
                    reason = TENANT_PAUSED_REASON if row.tenant_state == "paused" else MISFIRE_REASON
                    self._record_skip(conn, row, plan, reason, now_us)
                    if reason == MISFIRE_REASON:
                        skipped.append(
                            skipped_alert(
                                job_id=row.id, tenant=row.tenant, reason=reason, from_at=plan.skip.from_at,
                                to_at=plan.skip.to_at, count=plan.skip.count,
                            )
                        )
                following = plan.next_fire
                writes.cursor_ids.append(row.id)
                writes.next_run_ats.append(None if following is None else to_us(following.nominal_at))
                writes.next_due_ats.append(None if following is None else to_us(following.due_at))
                writes.run_counts.append(row.run_count + plan.runs)
                writes.states.append("active" if following is not None else "completed")
            if arrays:
                writes.apply_with_arrays(conn, now_us)
            else:
                writes.apply_per_row(conn, now_us)
            if skipped and self._alerts is not None:
                result.alerts_raised = len(self._alerts.raise_many_in(conn, skipped, now=now))
            return result

        result = await self._tx(fn)
        if result.alerts_raised:
            self._alerts.nudge()
        return result

    @staticmethod
    def _plan(conn: Connection, row, spec: ClaimSpec, now: datetime, horizon: datetime, scan_limit: int) -> Plan:
        cursor = Fire(from_us(row.next_run_at), from_us(row.next_due_at), 0)

        def following(fire: Fire, runs: int) -> Fire | None:
            try:
                return next_fire(spec.schedule, fire.nominal_at, runs_so_far=row.run_count + runs)
            except ScheduleError:
                return None

        if row.tenant_state == "paused":
            return plan_paused(cursor, following, horizon=horizon, scan_limit=scan_limit)
        carried = 0
        if now - cursor.due_at > spec.threshold:
            carried = conn.execute(
                sa.select(skips.c.count).where(
                    skips.c.job_id == row.id, skips.c.reason == MISFIRE_REASON, skips.c.continues_at == row.next_run_at
                )
            ).scalar() or 0
        return plan_claim(
            cursor,
            following,
            now=now,
            horizon=horizon,
            policy=spec.policy,
            threshold=spec.threshold,
            run_all_limit=spec.run_all_limit,
            carried_missed=carried,
            scan_limit=scan_limit,
        )

    @staticmethod
    def _record_skip(conn: Connection, row, plan: Plan, reason: str, now_us: int) -> None:
        """Extend the job's open range of ``reason`` that continues at this
        skip's first occurrence, or start one (id ``<job>:skip:<from>`` for a
        misfire, ``<job>:tenant_paused:<from>`` for a paused tenant)."""
        skip = plan.skip
        from_us_, to_us_ = to_us(skip.from_at), to_us(skip.to_at)
        continues = None if skip.continues_at is None else to_us(skip.continues_at)
        extended = conn.execute(
            skips.update()
            .where(skips.c.job_id == row.id, skips.c.reason == reason, skips.c.continues_at == from_us_)
            .values(to_at=to_us_, continues_at=continues, count=skips.c.count + skip.count)
        )
        if extended.rowcount == 0:
            label = "skip" if reason == MISFIRE_REASON else reason
            conn.execute(
                skips.insert().values(
                    id=f"{row.id}:{label}:{from_us_}", job_id=row.id, tenant=row.tenant, from_at=from_us_, to_at=to_us_,
                    continues_at=continues, count=skip.count, reason=reason, created_at=now_us,
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
