"""The dispatcher's claim: due jobs → execution rows + advanced cursors, in
one transaction per batch, fenced by partition epochs.

One batched query over all owned partitions selects active jobs whose
``next_run_at`` is within the look-ahead (a range scan on ``job_cursors_due`` in the
index's own order, with a LIMIT; ``FOR UPDATE SKIP LOCKED`` where the engine
has it, so two claimers never wait on each other). For each job the pure :func:`plan_claim` decides
the occurrences; then, in the same transaction: the execution rows are
inserted (derived ids; ``ON CONFLICT DO NOTHING`` so a backfilled occurrence
is not created twice), skip ranges recorded, and every job's cursor advanced
with one batched UPDATE. The partitions' epochs are checked in that
transaction first: a job of a partition whose stored epoch is no longer the
one this server won is left alone (on PostgreSQL and CockroachDB the check
and the due SELECT, fenced in itself, go with the BEGIN in one round trip:
:func:`.claim_reads.fenced_due`). A crash anywhere leaves nothing or the
whole batch.

The writes (:mod:`.claim_writes`) are two statements per batch whatever its
size. On PostgreSQL and CockroachDB each is one statement over arrays
(``INSERT … SELECT FROM unnest(…)``, ``UPDATE job_cursors … FROM unnest(…)``), one
parse each, sent with the COMMIT in one round trip (:mod:`.pipeline`), not one per row
(``loadtest/bench_dispatch.py`` measures both). The owned partitions are one
array parameter too, so the claim's text is the same every tick, and the
SELECT names the state ``'active'`` as a constant: psycopg prepares a
statement it runs often and PostgreSQL may then keep one generic plan for
it, which can use the partial index ``job_cursors_due`` only if its predicate is in
the text. The SELECT is driver SQL read as the driver's tuples, and the
per-row work of a batch is lookups and appends: instants are converted once
per batch, the plan's values are named tuples. SQLite has no arrays and no
network: there it is an executemany and an ``IN`` list.

A job whose calendar rule is ``previous`` is scanned at the instant its
cursor's occurrence moves to (``next_run_at``, the nominal cursor then in
``next_nominal_at``: :class:`~.claim_calendars.PreviousClaim`); the claim
writes the same pair for the cursor it advances.

On PostgreSQL the claim runs at READ COMMITTED (``row_locked``): it decides from
rows it locks (its jobs, the epochs, the hand-out's tenants), so claims of disjoint
partitions at once do not roll each other back (architecture: "Claims side by side").

A job's definition is parsed once per version: the store's
:class:`~tickwheel_server.jobspec.DefinitionCache` keeps what a claim needs of
it (schedule, misfire policy, handler, payload) by job id and version, so a
minutely job is not parsed again every minute.

A paused tenant's jobs are claimed like the others, but planned by
:func:`plan_paused`: their occurrences become one ``tenant_paused`` skip
range per job (extended in place claim after claim) and no execution. The
tenant's state comes with each due row (a subquery on the tenants' primary
key, evaluated only for the rows the scan returns), so pausing costs no
extra statement and resuming costs nothing: the next claim plans normally.

With an :class:`~tickwheel_server.store.alerts.AlertStore`, every misfire or
backlog skip range a claim creates or extends (:class:`.claim_writes.SkipWrites`)
raises the job's ``skipped`` alert (``alerts.catalogue.skipped_alert``) in the claim's own
transaction: one upsert for the batch, so the alert commits with the range
or not at all. The alerts go before the writes, whose trip carries the
COMMIT. A paused tenant's ranges raise nothing: pausing is asked for.

A row this server cannot read, or whose next fire it cannot compute, is left
as it was and the rest of the batch claimed; it raises ``job_unreadable`` or
``schedule_uncomputable`` once and goes into :attr:`DispatchStore.quarantine`,
which later scans leave out; :meth:`DispatchStore.review_quarantine` resolves
those alerts once the job can be dispatched (see
:mod:`tickwheel_server.store.quarantine` and ``docs/architecture.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import execution_id, to_us

from ..policy.backlog import BACKLOG_REASON, NOT_STARTED_CAP, cap_plan, not_started_cap
from ..policy.claim import DEFAULT_SCAN_LIMIT, Plan, plan_claim, plan_paused
from .quarantine import KINDS, Finding, Quarantine, Unreadable
from ..jobspec import DefinitionCache, JobDefinition
from ..schedule import Fire, tzdata_version
from ..schedule.calendarrule import CalendarRule
from ..alerts.catalogue import NewAlert, job_unreadable_key, schedule_uncomputable_key, undispatchable_alert
from .alerts import AlertStore
from .base import SqlStore, one_of
from .claim_reads import (
    DUE_SQL, REVIEW_COLUMNS, claim_cursor, claimable, definitions, dispatchable, due_rows, due_select,
    fenced_due, following_fires, scheduled_select,
)  # fmt: skip
from .claim_handout import DirectHandOut, Fenced, HandOutOffer, kept_in_doubt
from .claim_writes import MISFIRE_REASON, TENANT_PAUSED_REASON, ClaimWrites, SkipWrites, carried_missed, write
from .claim_calendars import CalendarCache, PreviousClaim, calendar_due, calendar_plan, record_calendar_skips
from .executions import HandedOut
from .jobrecords import JOB_WITH_CURSOR
from .partitions import check_epochs
from .tables import alerts, jobs

log = logging.getLogger(__name__)


class ClaimedExecution(NamedTuple):
    """An execution the claim created (or found already created), for the wheel."""

    id: str
    partition: int
    due_at_us: int


@dataclass
class ClaimResult:
    executions: list[ClaimedExecution] = field(default_factory=list)
    jobs: int = 0
    """Jobs whose cursor this batch advanced."""
    unreadable: list[Finding] = field(default_factory=list)
    """Jobs this batch left as they were: unreadable or uncomputable here (see :mod:`.quarantine`)."""
    readable_again: list[str] = field(default_factory=list)
    """Jobs of the quarantine this batch read and planned: their alerts were resolved."""
    skipped: int = 0
    """Occurrences recorded as skipped (misfire policy, the tenant paused, a calendar, the backlog cap)."""
    backlogged: int = 0
    """Of those, the occurrences past their job's cap of executions not started (:mod:`..policy.backlog`)."""
    alerts_raised: int = 0
    """Jobs whose ``skipped`` alert this claim raised (misfire policy, backlog cap)."""
    stale_partitions: set[int] = field(default_factory=set)
    """Owned partitions whose epoch moved on: this server must stop claiming them."""
    full: bool = False
    """The batch hit its LIMIT: more may be due now."""
    handed_out: list[list[HandedOut]] = field(default_factory=list)
    """Per group of workers of the claim's offer: what it inserted handed out (not in :attr:`executions`)."""


# -------------------------------------------------------------------- the store


class DispatchStore(SqlStore):
    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        definitions: DefinitionCache | None = None,
        trace_occurrence: Callable[[str, str, str, int], str] | None = None,
        alerts: AlertStore | None = None,
        quarantine: Quarantine | None = None,
        server_id: str = "",
    ) -> None:
        super().__init__(engine, clock)
        self.definitions = definitions if definitions is not None else DefinitionCache()
        """Parsed definitions by (job id, version); shared with the hand-out and outcomes where one server runs both."""
        self.quarantine = quarantine if quarantine is not None else Quarantine()
        """The jobs this process cannot dispatch, left out of its claims."""
        self._read_specs = True  # whether the claim's SELECT carries definitions: until a batch finds them cached
        self.server_id = server_id
        self._alerts = alerts
        """Raises the ``skipped`` alert of a job whose misfire policy skipped occurrences, and the
        ``job_unreadable`` / ``schedule_uncomputable`` alerts of the quarantine."""
        self._review_after = self._review_local_after = ""
        self._trace_occurrence = trace_occurrence
        """While tracing is on: (execution id, job id, tenant, nominal instant) → the traceparent of a
        new trace for that occurrence, stored on its row."""
        self.calendars = CalendarCache()
        """The business-day calendars claims apply, by version (see :mod:`.claim_calendars`)."""

    async def claim_due(
        self,
        owned: dict[int, int],
        now: datetime,
        *,
        lookahead: timedelta = timedelta(seconds=60),
        batch: int = 1000,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
        offer: HandOutOffer | None = None,
    ) -> ClaimResult:
        """Claim one batch of due jobs of the ``owned`` partitions (partition →
        the epoch this server holds). ``now`` is the dispatcher's clock,
        decided once for the whole batch.

        A job this server cannot read, or whose next fire it cannot compute,
        is left exactly as it was (no execution, cursor and state untouched),
        its alert raised in this transaction the first time, and recorded in
        :attr:`quarantine` after the commit, so later claims leave it out of
        the scan; the rest of the batch is claimed as usual. ``full`` is set
        only when the batch made progress (a job planned, or one more left
        out), so a batch of jobs that can be neither does not repeat. With
        an ``offer``, what is due by ``now`` and needs no decision is inserted
        handed out (:mod:`.claim_handout`; fenced: refused, claimed without it)."""
        if not owned:
            return ClaimResult()
        now_us = to_us(now)
        horizon = now + lookahead
        horizon_us = to_us(horizon)
        arrays = not self.caps.is_sqlite
        excluded = self.quarantine.excluded_keys()
        direct = None if offer is None else DirectHandOut(offer, now_us)
        read_specs = self._read_specs or not arrays  # what the last batch parsed, this one likely parses too

        def fn(conn: Connection) -> tuple[ClaimResult, int]:
            if direct is not None:
                direct.begin()  # a retried transaction starts over
            result = ClaimResult()
            skip_locked = self.caps.skip_locked
            if arrays:  # the BEGIN, the epochs and the due jobs in one round trip
                parameters = dict(horizon=horizon_us, batch=batch, **({"excluded": excluded} if excluded else {}))
                sql = DUE_SQL[bool(excluded), skip_locked, read_specs, self.caps.is_postgres]  # lateral
                result.stale_partitions, rows = fenced_due(conn, owned, sql, parameters)
            else:
                result.stale_partitions = check_epochs(conn, owned)
                live = sorted(set(owned) - result.stale_partitions)
                rows = conn.execute(due_select(live, horizon_us, batch, excluded, skip_locked)).all() if live else []
            if len(result.stale_partitions) == len(owned):
                return result, 0
            result.full = len(rows) == batch
            writes, skip_writes = ClaimWrites(), SkipWrites()
            quarantine = self.quarantine
            trace = self._trace_occurrence
            executions = result.executions
            # Per batch: instants by microseconds and back (the jobs of a
            # batch share a few cursors), execution ids by column.
            instants: dict[int, datetime] = {}
            micros: dict[datetime, int] = {}
            ids, job_ids, tenants_, partitions = writes.ids, writes.job_ids, writes.tenants, writes.partitions
            nominal_ats, due_ats, handlers, missed_counts = (
                writes.nominal_ats, writes.due_ats, writes.handlers, writes.missed_counts
            )
            payloads = writes.payloads
            rows = due_rows(rows)
            parsed, self._read_specs = definitions(conn, arrays, rows, self.definitions, read=read_specs)
            calendars = self.calendars.load_for(conn, rows, parsed)
            for row, spec in zip(rows, parsed):
                job_id = row.id
                try:
                    spec = claimable(spec)
                    cursor = claim_cursor(row, instants)
                except Unreadable as error:
                    result.unreadable.append(Finding(job_id, row.tenant, row.version, error.kind, error.reason))
                    continue
                carried = carried_missed(conn, row, spec, cursor, now)
                calendar_skips = ()
                previous = None
                try:
                    if spec.calendar is None:
                        plan = self._plan(row, spec, cursor, now, horizon, scan_limit, carried)
                    else:
                        if spec.calendar.rule is CalendarRule.PREVIOUS:
                            previous = PreviousClaim(row, spec, calendars, cursor, now)
                            due_of = previous.due
                        else:
                            due_of = calendar_due(row, spec, calendars)
                        plan = self._plan(
                            row, spec, cursor, now, horizon, scan_limit, carried, due_of,
                            None if previous is None else previous.reach,
                        )
                        plan, calendar_skips = calendar_plan(row, spec, plan, calendars, previous)
                        if previous is not None and plan.next_fire is not None:
                            scan_key = previous.reach(plan.next_fire)
                except Unreadable as error:
                    result.unreadable.append(Finding(job_id, row.tenant, row.version, error.kind, error.reason))
                    continue
                backlog = None
                if len(plan.executions) + row.waiting > NOT_STARTED_CAP:  # only then may a cap bite
                    cap = not_started_cap(spec.misfire_policy, spec.run_all_limit)
                    plan, backlog = cap_plan(plan, row.waiting, cap)
                if previous is not None or row.next_nominal_at is not None:
                    writes.nominal = True
                if job_id in quarantine:
                    result.readable_again.append(job_id)
                result.jobs += 1
                for nominal_at, due_at, missed_count in plan.executions:
                    ident = execution_id(job_id, nominal_at)
                    nominal_us = micros.get(nominal_at)
                    if nominal_us is None:
                        nominal_us = micros[nominal_at] = to_us(nominal_at)
                    due_us = micros.get(due_at)
                    if due_us is None:
                        due_us = micros[due_at] = to_us(due_at)
                    ids.append(ident)
                    job_ids.append(job_id)
                    tenants_.append(row.tenant)
                    partitions.append(row.partition)
                    nominal_ats.append(nominal_us)
                    due_ats.append(due_us)
                    handlers.append(spec.handler)
                    missed_counts.append(missed_count)
                    payloads.append(spec.payload)
                    if trace is not None:
                        writes.trace_contexts.append(trace(ident, job_id, row.tenant, nominal_us))
                    executions.append(ClaimedExecution(ident, row.partition, due_us))
                    if direct is not None:
                        direct.consider(len(ids) - 1, ident, row, spec, due_us)
                if plan.skip is not None:
                    result.skipped += plan.skip.count
                    paused = row.tenant_state == "paused"
                    skip_writes.add(row, plan.skip, TENANT_PAUSED_REASON if paused else MISFIRE_REASON)
                if calendar_skips:
                    result.skipped += sum(skip.count for skip in calendar_skips)
                    record_calendar_skips(conn, row, calendar_skips, now_us)
                if backlog is not None:
                    result.skipped += backlog.count
                    result.backlogged += backlog.count
                    skip_writes.add(row, backlog, BACKLOG_REASON)
                following = plan.next_fire
                writes.cursor_ids.append(job_id)
                if following is None:
                    writes.next_run_ats.append(None)
                    writes.next_due_ats.append(None)
                    writes.next_nominal_ats.append(None)
                    writes.states.append("completed")
                else:
                    next_us = micros.get(following.nominal_at)
                    if next_us is None:
                        next_us = micros[following.nominal_at] = to_us(following.nominal_at)
                    if previous is not None and scan_key < following.nominal_at:
                        # Scanned at the earlier instant, the nominal one kept beside it.
                        writes.next_nominal_ats.append(next_us)
                        next_us = to_us(scan_key)
                    else:
                        writes.next_nominal_ats.append(None)
                    writes.next_run_ats.append(next_us)
                    next_us = micros.get(following.due_at)
                    if next_us is None:
                        next_us = micros[following.due_at] = to_us(following.due_at)
                    writes.next_due_ats.append(next_us)
                    writes.states.append("active")
                writes.run_counts.append(row.run_count + plan.runs)
            skip_writes.write(conn, arrays, now_us)
            skipped = skip_writes.alerts()  # a paused tenant's ranges raise nothing: pausing is asked for
            taken = None if direct is None else direct.take(conn, arrays, writes)
            # The alerts before the writes, so the COMMIT rides the writes' pipelined trip: a pipelined
            # trip that left the transaction open would arm no idle limit (:mod:`.pipeline`).
            changed = 0
            if skipped and self._alerts is not None:
                result.alerts_raised = changed = len(self._alerts.raise_many_in(conn, skipped, now=now))
            if self._alerts is not None:
                changed += self._record_quarantine_alerts(conn, result, now)
            inserted = write(conn, arrays, writes, now_us, direct, taken, to_us(self.clock.now()), commit=arrays)
            if taken is not None:
                result.handed_out, result.executions = direct.handed, [e for e in executions if e.id not in inserted]
                if not arrays:
                    direct.before_commit()  # SQLite: its runner commits
            return result, changed

        try:
            result, changed = await kept_in_doubt(direct, self._tx(fn, row_locked=True, begins_itself=True))
        except Fenced:  # nothing was handed out: claim as if no credit had been lent
            return await self.claim_due(owned, now, lookahead=lookahead, batch=batch, scan_limit=scan_limit)
        if direct is not None:
            direct.committed()
        self._after_claim(result)
        if changed:
            self._alerts.nudge()
        return result

    # ------------------------------------------------------------ the quarantine

    def _record_quarantine_alerts(self, conn: Connection, result: ClaimResult, now: datetime) -> int:
        """In the claim's transaction: raise the alert of each finding not
        already recorded (once per job, version and reason), resolve those
        of the jobs readable again. How many alerts changed."""
        new = [finding for finding in result.unreadable if not self.quarantine.is_known(finding)]
        raised = self._alerts.raise_many_in(conn, [self._alert_of(finding) for finding in new], now=now) if new else []
        resolved = []
        if result.readable_again:
            keys = [key(job_id) for job_id in result.readable_again for key in (job_unreadable_key, schedule_uncomputable_key)]
            resolved = self._alerts.resolve_many_in(conn, keys, now=now)
        return len(raised) + len(resolved)

    def _alert_of(self, finding: Finding) -> NewAlert:
        return undispatchable_alert(
            kind=finding.kind, job_id=finding.job_id, tenant=finding.tenant, version=finding.version,
            reason=finding.reason, server_id=self.server_id, tzdata=tzdata_version(),
        )

    def _after_claim(self, result: ClaimResult) -> None:
        """After the commit: the quarantine follows what the claim found; a
        full batch that planned nothing and left nothing more out is not
        full (the next one would return the same rows)."""
        for finding in result.unreadable:
            if not self.quarantine.is_known(finding) and self._alerts is None:
                log.warning("job %s of tenant %s (version %d) left out of claims: %s: %s", finding.job_id,
                            finding.tenant, finding.version, finding.kind, finding.reason)  # fmt: skip
        added = self.quarantine.record(result.unreadable)
        self.quarantine.forget(result.readable_again)
        if result.full and result.jobs == 0 and added == 0:
            result.full = False

    async def review_quarantine(self, owned: Iterable[int], *, limit: int = 100) -> list[str]:
        """Resolve the ``job_unreadable`` / ``schedule_uncomputable`` alerts
        of jobs that can be dispatched again, and forget them here; the job
        ids resolved. Run now and then by the dispatcher (bounded work: one
        page of ``limit`` open alerts and one of this process's entries per
        call, walked on across calls).

        An alert is resolved when its job is gone or no longer active, or
        when the job is in one of the ``owned`` partitions and this server
        reads it and computes its next fire (a newer server after an
        upgrade, the job changed by hand). A job of a partition this server
        does not own is its owner's to judge. An entry of this process is
        forgotten when its job is gone, no longer active, at another version
        or dispatchable now (its next claim reads it, and resolves its alert
        if still open)."""
        owned = set(owned)
        now = self.clock.now()
        after, local_after = self._review_after, self._review_local_after
        local = self.quarantine.page(local_after, limit)

        def fn(conn: Connection) -> tuple[list[str], list[str], str, int, int]:
            resolved_jobs: list[str] = []
            forget: list[str] = []
            keys: list[str] = []
            rows = []
            if self._alerts is not None:
                rows = conn.execute(
                    sa.select(alerts.c.dedup_key, alerts.c.job_id, *REVIEW_COLUMNS)
                    .select_from(alerts.outerjoin(JOB_WITH_CURSOR, jobs.c.id == alerts.c.job_id))
                    .where(alerts.c.resolved_at.is_(None), alerts.c.kind.in_(KINDS), alerts.c.dedup_key > after)
                    .order_by(alerts.c.dedup_key)
                    .limit(limit)
                ).all()
            for row in rows:
                if row.id is None or row.state != "active":
                    keys.append(row.dedup_key)
                elif row.partition in owned and dispatchable(row):
                    keys.append(row.dedup_key)
                else:
                    continue
                resolved_jobs.append(row.job_id)
                forget.append(row.job_id)
            if keys:
                self._alerts.resolve_many_in(conn, keys, now=now)
            if local:
                current = {
                    r.id: r
                    for r in conn.execute(
                        sa.select(*REVIEW_COLUMNS).select_from(JOB_WITH_CURSOR)
                        .where(one_of(self.caps, jobs.c.id, [f.job_id for f in local]))
                    )
                }
                for finding in local:
                    r = current.get(finding.job_id)
                    if r is None or r.state != "active" or r.version != finding.version or dispatchable(r):
                        forget.append(finding.job_id)
            return resolved_jobs, forget, rows[-1].dedup_key if rows else "", len(rows), len(keys)

        resolved_jobs, forget, last_key, seen, resolved = await self._tx(fn)
        self.quarantine.forget(forget)
        self._review_after = "" if seen < limit else last_key
        self._review_local_after = "" if len(local) < limit else local[-1].job_id
        if resolved:
            self._alerts.nudge()
        return resolved_jobs

    # ------------------------------------------------------------- the plan

    @staticmethod
    def _plan(
        row, spec: JobDefinition, cursor: Fire, now: datetime, horizon: datetime, scan_limit: int, carried: int,
        due_of: Callable[[Fire], datetime] | None = None, reach_of: Callable[[Fire], datetime] | None = None,
    ) -> Plan:
        """The job's plan (pure); :class:`Unreadable` when its schedule cannot be computed.
        ``due_of``: where the job's calendar moves an occurrence, for the misfire test;
        ``reach_of``: when the claim reaches an occurrence a ``previous`` rule moved earlier."""
        following = following_fires(spec, row.run_count)
        if row.tenant_state == "paused":
            return plan_paused(cursor, following, horizon=horizon, scan_limit=scan_limit, reach_of=reach_of)
        return plan_claim(
            cursor,
            following,
            now=now,
            horizon=horizon,
            policy=spec.misfire_policy,
            threshold=spec.misfire_threshold,
            run_all_limit=spec.run_all_limit,
            carried_missed=carried,
            scan_limit=scan_limit,
            due_of=due_of,
            reach_of=reach_of,
        )

    async def scheduled_in(self, partitions: list[int], until: datetime, limit: int = 100_000) -> list[ClaimedExecution]:
        """Executions of ``partitions`` waiting to be handed out whose ready
        instant is at or before ``until``: what the timer wheel is rebuilt from
        when partitions are acquired (the store is the authority; the read:
        :func:`.claim_reads.scheduled_select`)."""
        if not partitions:
            return []
        query = scheduled_select(self.caps, partitions, to_us(until), limit)

        def fn(conn: Connection) -> list[ClaimedExecution]:
            return [ClaimedExecution(r.id, r.partition, r.ready_at) for r in conn.execute(query)]

        return await self._tx(fn)
