"""The hand-out: ready executions taken for a server's worker streams (the
executions table is the queue; :mod:`.outcomes` records results,
:mod:`.requeue` ends deliveries no worker will finish).

:meth:`HandoutStore.hand_out_ready` hands ready executions out in one
transaction per round, in four steps, each a bounded number of batched
statements whatever the backlog:

1. *Who has ready work.* The tenants the workers may serve that have an
   execution ``scheduled`` with ``ready_at <= :now`` (the first entry of each
   tenant in ``executions_tenant_ready``: one index probe per tenant; for a
   long tenant list, :mod:`.tenant_walk`'s bounded loose index scan over the
   tenants that have scheduled work at all, a rotating part of them per
   round), with their weight and concurrency cap. A capped tenant's
   ``tenant_gates`` row is written first (hand-outs for one tenant take
   turns) and its running executions counted: its room under the cap
   (:mod:`.handout_tenants`).
2. *How many each.* :mod:`.fairness` splits the round's budget (the
   workers' credit) by weighted fair share, none over a tenant's room; a
   tenant with 100 000 ready gets its share, not the round.
3. *Which.* Per tenant, its oldest ready executions up to its share, each a
   range scan on ``executions_tenant_ready`` with its own LIMIT, taken
   (moved to ``running``, stamping the server's session as ``owner``, the
   next delivery number and the hand-out instant) by an UPDATE …
   RETURNING: picked by a ``LATERAL`` with ``FOR UPDATE SKIP LOCKED`` on
   PostgreSQL, so concurrent servers take different rows; by a ``UNION
   ALL`` of the scans elsewhere. Shares a tenant could not fill go to the
   others in one more such pick.
4. *What may start.* :mod:`.admission` applies each job's overlap policy
   and the concurrency keys (their rows locked; :mod:`.handout_starts`
   reads and writes for it); the candidates that may start
   keep ``running`` (and take their key slots); the others give their
   delivery back and wait (``waiting``), are skipped (deleted, counted in a
   skip range with reason ``overlap``) or canceled, in the same
   transaction, so no one ever sees them running; running executions an
   overlap ``replace`` stops get a cancel request. A candidate whose job is
   gone (the read of the definitions, which the take carries on
   PostgreSQL, finds none) is canceled ``canceled: job deleted``
   (:data:`.timeline.DELETED_REASON`) the same way, its delivery given
   back: never sent (a worker would get no target and fail it, a dead
   letter of a job that no longer exists).

``:now`` is the handing-out server's clock, so nothing is handed out before
its due instant by that clock. The status transition is the fence: two
servers can never both move a row.

Deliveries only grow. Every hand-out increments ``delivery``; a retry, a
requeue and a replay keep it; only :meth:`.requeue.RequeueStore.release`
(the hand-out never reached a worker) takes one back. So ``(execution id,
delivery)`` names one hand-out for the execution's whole life, and a result
or heartbeat naming any other delivery than the current one is stale.

On PostgreSQL, hand-out rounds run at READ COMMITTED (see
:class:`.base.SqlStore`): their correctness rests on the row locks above, on
share locks on the running executions an overlap decision reads, read after
the not-started ones, and on an advisory lock per ``replace`` job (see
:mod:`.handout_starts`); what a SERIALIZABLE path ending a delivery could
leave asleep is woken by :meth:`.requeue.RequeueStore.wake_stalled`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import to_us

from ..jobspec import DefinitionCache
from ..policy.admission import Candidate, Cancel, decide_keys, decide_overlap
from ..policy.fairness import Demand, Shares
from . import handout_starts as starts
from .base import SqlStore, driver_sql, execute_arrays, one_of, tuples
from .doubt import InDoubt, handed_out
from .calendarhold import hold_unwalked
from .fairshare import FairShare
from .executions import Capability, HandedOut, HandOutRound
from .handout_starts import UNION_BRANCHES, SkipHook
from .handout_tenants import ready_tenants, rooms_under_caps
from .isolation import request_cancel, status_in, wake_key_waiters, wake_keys
from .tables import executions
from .tenant_walk import WALK_ABOVE, TenantWalk
from .timeline import DELETED_REASON

LOOSE_SCAN_ABOVE = WALK_ABOVE
"""A round whose workers may serve more tenants than this finds those with
ready work by the tenant walk (:mod:`.tenant_walk`, a bounded loose index
scan), instead of one probe per tenant named."""

_TAKEN_COLUMNS = (
    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition, executions.c.origin,
    executions.c.nominal_at, executions.c.due_at, executions.c.ready_at, executions.c.attempt, executions.c.delivery,
    executions.c.payload, executions.c.missed_count, executions.c.allow_overlap, executions.c.wait_key,
    executions.c.trace_context, executions.c.manual_slot,
)

# Per tenant, its oldest ready executions up to its share: one range scan on
# executions_tenant_ready with its own LIMIT each, rows locked as the scan
# passes them (SKIP LOCKED: a row another server is handing out is passed over),
# taken in the same statement.
_LATERAL_PICK = driver_sql(
    "SELECT c.id FROM unnest(CAST(:tenants AS TEXT[]), CAST(:quotas AS INTEGER[])) AS q (tenant, n) "
    "CROSS JOIN LATERAL ("
    "SELECT e.id FROM executions AS e "
    "WHERE e.tenant = q.tenant AND e.status = 'scheduled' AND e.ready_at <= :now "
    "AND (e.handler = ANY (CAST(:handlers AS TEXT[])) OR (CAST(:http AS BOOLEAN) AND e.handler IS NULL)) "
    "ORDER BY e.ready_at LIMIT q.n FOR UPDATE OF e SKIP LOCKED"
    ") AS c"
)

# Take the picked rows by primary key: an array of known length, so the
# planner looks each up rather than scanning the table to join. Returns only
# what the round's share accounting needs: the rows' other columns and their
# jobs' definitions are read by :data:`_TAKEN_ROWS` once the next round may
# start (returning them here made this statement, the one each next round
# waits for, about twice as long).
_TAKE_BY_ID = driver_sql(
    "UPDATE executions SET status = 'running', owner = :owner, delivery = executions.delivery + 1, "
    "handed_out_at = :at WHERE executions.id = ANY (CAST(:ids AS TEXT[])) AND COALESCE(executions.status, '') = 'scheduled' "
    "RETURNING executions.id, executions.tenant"
)

# The taken rows (this transaction's own updates) by primary key, each with
# its job's definition (NULL if the job was deleted meanwhile), so the round
# needs no statement of its own to read the jobs.
_TAKEN_ROWS = driver_sql(
    "SELECT e.id, e.job_id, e.tenant, e.partition, e.origin, e.nominal_at, e.due_at, e.ready_at, e.attempt, "
    "e.delivery, e.payload, e.missed_count, e.allow_overlap, e.wait_key, e.trace_context, e.manual_slot, j.spec, "
    "j.version, j.updated_at "
    "FROM executions AS e LEFT JOIN jobs AS j ON j.id = e.job_id WHERE e.id = ANY (CAST(:ids AS TEXT[]))"
)

class _Fenced(Exception):
    """A round's fence refused to let it commit: roll it back."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Moved(NamedTuple):
    """A row a take moved to ``running`` (PostgreSQL): what the round's
    shares need at once; :meth:`HandoutStore._taken` reads the rest."""

    id: str
    tenant: str


class _Taken(NamedTuple):
    """A row taken by a round, as :data:`_TAKEN_COLUMNS` lists its columns
    (a plain tuple: read thousands of times a round)."""

    id: str
    job_id: str
    tenant: str
    partition: int
    origin: str
    nominal_at: int
    due_at: int
    ready_at: int
    attempt: int
    delivery: int
    payload: bytes
    missed_count: int
    allow_overlap: bool
    wait_key: str | None
    trace_context: str | None
    manual_slot: int | None  # the manual-run quota's slot it holds a unit of (:mod:`.manualslots`)
    spec: bytes | None
    """The job's definition, where the take read it (PostgreSQL); else None."""
    job_version: int | None
    job_updated_at: int | None


class HandoutStore(SqlStore):
    def __init__(
        self,
        engine,
        clock,
        *,
        on_skip: SkipHook | None = None,
        fair: FairShare | None = None,
        loose_scan_above: int = LOOSE_SCAN_ABOVE,
        lateral: bool = True,
        definitions: DefinitionCache | None = None,
    ) -> None:
        super().__init__(engine, clock)
        self._on_skip = on_skip
        self.fair = fair if fair is not None else FairShare()
        self.loose_scan_above = loose_scan_above
        self.walk = TenantWalk(loose_scan_above)
        self.lateral = lateral
        """Use LATERAL scans on PostgreSQL; False sends the UNION ALL form other
        engines get (tests run it on PostgreSQL, which shares CockroachDB's SQL)."""
        self.definitions = definitions if definitions is not None else DefinitionCache()
        """Parsed definitions by (job id, version); shared with the dispatcher and outcomes where one server runs them."""
        self._at_lock = threading.Lock()
        self._last_at = 0
        self.in_doubt = InDoubt(lambda fn: self._tx(fn, row_locked=True), clock)
        """Its rounds, and the claims' hand-outs under its instants, whose COMMIT went unanswered (:mod:`.doubt`)."""

    async def hand_out_ready(
        self, owner: str, now: datetime, capability: Capability, limit: int,
        on_taken: Callable[[int], None] | None = None, fence: Callable[[], str | None] | None = None,
    ) -> HandOutRound:
        """Hand out up to ``limit`` executions whose ready instant is at or
        before ``now`` and that ``capability`` may run: shared among tenants
        by weighted fair share within their caps, oldest ready first within
        a tenant, each admitted by its job's overlap policy and its keys.

        What is ready is decided by the hand-out instant, this server's
        clock read when the transaction runs and never before ``now``; it is
        stamped on the rows (lateness and deadlines are measured from it). So
        a round retried after a serialization conflict or through an outage
        neither pretends it started earlier nor misses what came due
        meanwhile, and nothing is handed out early by this server's clock.
        Returns the
        executions handed out, oldest ready first; ``diverted`` counts the
        candidates that waited, were skipped or were canceled instead, and
        ``stopped`` the running executions asked to stop (overlap
        ``replace``). ``on_taken`` is called (in the store's thread) with
        how many rows the round took, as soon as they are taken and before
        their admission is decided: a caller may start its next round then,
        whose take passes over these rows as another server's would.

        ``fence`` is asked (in the store's thread) at the end of the
        transaction, just before it commits, whether ``owner`` may still
        hand out (:meth:`~tickwheel_server.gateway.fence.Fence.refusal`: its session surely alive, its
        clock trusted); a reason instead of None rolls the transaction back
        and returns an empty :class:`HandOutRound` whose ``fenced`` is that
        reason: nothing was handed out, changed or counted."""
        if limit <= 0 or not capability.tenants or not (capability.handlers or capability.http):
            return HandOutRound()
        now_us = to_us(now)
        outcome: list = []
        made: list[HandOutRound] = []

        def fn(conn: Connection) -> HandOutRound:
            outcome.clear()
            made.clear()
            shares = self.fair.begin()
            batch = self._round(conn, owner, now_us, capability, limit, shares, on_taken)
            refused = fence() if fence is not None else None
            if refused is not None:
                raise _Fenced(refused)
            outcome.append(shares)
            made.append(batch)
            return batch

        try:
            batch = await self.in_doubt.run(fn, lambda: handed_out(owner, made[0]) if made else None)
        except _Fenced as fenced:
            refused = HandOutRound()
            refused.fenced = fenced.reason
            return refused
        if outcome:
            self.fair.commit(outcome[0], batch.tenants)
        return batch

    def _round(
        self, conn: Connection, owner: str, now_us: int, capability: Capability, limit: int, shares: Shares,
        on_taken: Callable[[int], None] | None = None,
    ) -> HandOutRound:
        # This attempt's instant decides what is ready and is the hand-out
        # instant: an attempt retried after a conflict or an outage sees what
        # came due meanwhile, and is never early by this server's clock.
        at_us = self.unique_instant(max(now_us, to_us(self.clock.now())))
        now_us = at_us
        ready = ready_tenants(conn, self.caps, self.walk, self.loose_scan_above, capability, now_us)
        if not ready:
            return HandOutRound()
        rooms = rooms_under_caps(conn, self.caps, [t for t in ready if t.max_concurrency > 0])
        demands = {t.name: Demand(t.name, max(1, t.weight), rooms.get(t.name)) for t in ready}
        grants = shares.allocate(limit, demands.values())
        rows = self._take(conn, owner, at_us, grants, capability, now_us)
        got = Counter(row.tenant for row in rows)
        short = {name: grants[name] - got[name] for name in grants if got[name] < grants[name]}
        if short:
            # Tenants with fewer ready than their share (for these workers)
            # give it back; those that filled theirs share it in one more scan.
            for name, unused in short.items():
                shares.refund(name, demands[name].weight, unused)
            full = [
                Demand(name, demands[name].weight, None if demands[name].room is None else demands[name].room - got[name])
                for name in grants if grants[name] and name not in short
            ]
            if full:
                more = shares.allocate(sum(short.values()), full)
                extra = self._take(conn, owner, at_us, more, capability, now_us)
                rows += extra
                extra_got = Counter(row.tenant for row in extra)
                for name, granted in more.items():
                    shares.refund(name, demands[name].weight, granted - extra_got[name])
        if on_taken is not None:
            on_taken(len(rows))
        batch = HandOutRound(tenants=sorted(demands))
        if not rows:
            return batch
        rows = self._taken(conn, rows)
        rows.sort(key=lambda row: (row.ready_at, row.id))
        jobs_of = starts.jobs_of(conn, self.caps, self.lateral, self.definitions, rows)
        taken = len(rows)
        # Runs of a calendar whose change is still being walked, not yet decided again: not now.
        held = hold_unwalked(conn, self.caps, rows, lambda j: getattr(jobs_of.get(j), "definition", None), at_us)
        for row in (r for r in rows if r.id in held):
            shares.refund(row.tenant, demands[row.tenant].weight, 1)
        rows = [r for r in rows if r.id not in held] if held else rows
        rules = {job_id: job.definition.rules for job_id, job in jobs_of.items()}
        # A run whose job was deleted after DeleteJob's cancel (put back by a
        # requeue or a give-back racing it) has no target: canceled, never sent.
        gone = [Cancel(r.id, r.job_id, r.tenant, r.wait_key, DELETED_REASON) for r in rows if r.job_id not in jobs_of]
        candidates = [
            Candidate(r.id, r.job_id, r.tenant, r.origin, r.nominal_at, r.ready_at, r.attempt, r.delivery - 1,
                      bool(r.allow_overlap), r.wait_key)
            for r in rows if r.job_id in jobs_of
        ]
        starts.lock_replacing(conn, self.caps, rules)
        active = starts.active(conn, self.caps, self.lateral, candidates, rules, owner, at_us)
        decision, admitted = decide_overlap(candidates, rules, active, now_us)
        decision.cancel += gone
        # Stop and cancel what an overlap ``replace`` replaces before any key
        # row is locked (executions before keys: the order every writer keeps).
        batch.stopped = request_cancel(conn, [(stop.id, stop.reason) for stop in decision.stop], at_us)
        starts.cancel_replaced(conn, self.caps, decision.replace, at_us)
        keys = starts.lock_candidate_keys(conn, self.caps, admitted, rules, jobs_of)
        decide_keys(admitted, rules, keys, decision)
        starts.settle(conn, decision, at_us, self._on_skip, rows)
        # Woken executions that did not start after all hand their turn on;
        # keys with free slots and sleeping waiters wake them.
        wake_keys(conn, self.caps, {(s.candidate.tenant, s.candidate.wait_key) for s in decision.skip
                                    if s.candidate.wait_key} | {(c.tenant, c.wait_key) for c in decision.cancel
                                                                if c.wait_key})
        wake_key_waiters(conn, [(t, k, n) for (t, k), n in decision.wake.items()])
        for item in decision.wait + decision.skip:
            shares.refund(item.candidate.tenant, demands[item.candidate.tenant].weight, 1)
        for item in decision.cancel:
            shares.refund(item.tenant, demands[item.tenant].weight, 1)
        by_id = {row.id: row for row in rows}
        handed = [
            HandedOut(
                row.id, row.job_id, row.tenant, row.partition, row.origin, row.nominal_at, row.due_at, row.ready_at,
                row.attempt, row.delivery, bytes(row.payload), row.missed_count,
                jobs_of[row.job_id].definition, at_us, row.trace_context or "",
            )
            for row in (by_id[start.candidate.id] for start in decision.start)
        ]
        handed.sort(key=lambda h: (h.ready_at_us, h.id))
        batch.extend(handed)
        batch.diverted = taken - len(handed)
        return batch

    def unique_instant(self, at_us: int) -> int:
        """``at_us``, or a microsecond past the last round's instant if that is not
        earlier: rounds of one store stamp distinct instants (a round tells its own
        rows from other running ones by owner and instant), also two at once.

        Never the old instant after the wall clock was stepped back (more than
        :data:`_SAME_INSTANT_US` behind the last round): that would judge what is
        ready by a clock reading the server no longer has, handing out early by
        the step. The instant then follows the clock back; that it might equal an
        instant stamped before the step, within the span stepped over, is the one
        case where rounds are not told apart (docs/architecture.md, never early)."""
        with self._at_lock:
            last = self._last_at
            if last - _SAME_INSTANT_US < at_us <= last:
                at_us = last + 1
            self._last_at = at_us
            return at_us

    # -- step 3: the candidates --------------------------------------------------------------------

    def _take(
        self, conn: Connection, owner: str, at_us: int, quotas: dict[str, int], capability: Capability, now_us: int
    ) -> list:
        """Per tenant, its ``quotas[tenant]`` oldest ready executions that
        ``capability`` may run, moved to ``running`` under ``owner`` (next
        delivery, hand-out instant ``at_us``) by an UPDATE … RETURNING, as
        the candidates of the round: those that may not start after all are
        settled otherwise before the transaction ends (:func:`.handout_starts.settle`), so
        nobody ever sees them running. Taking first keeps the round's
        transaction short in the common case, where everything starts.

        PostgreSQL: the rows are picked by one ``LATERAL`` over the
        per-tenant scans, each locking as it goes and skipping rows other
        servers hold (SKIP LOCKED), then taken by primary key, returning
        only (id, tenant) (:meth:`_taken` reads the rest). Elsewhere a ``UNION ALL`` of the scans, each with its own
        constant LIMIT (CockroachDB takes no LIMIT from a lateral column, and
        may decorrelate a LATERAL into a full scan), locked with SKIP LOCKED
        where the engine has it."""
        quotas = {name: n for name, n in sorted(quotas.items()) if n > 0}
        if not quotas:
            return []
        if self.caps.is_postgres and self.lateral:
            picked = tuples(execute_arrays(
                conn,
                _LATERAL_PICK,
                dict(tenants=list(quotas), quotas=list(quotas.values()), now=now_us,
                     handlers=list(capability.handlers), http=bool(capability.http)),
            ))
            if not picked:
                return []
            ids = [row[0] for row in picked]
            moved = tuples(execute_arrays(conn, _TAKE_BY_ID, dict(ids=ids, owner=owner, at=at_us)))
            return [_Moved._make(row) for row in moved]
        fits = []
        if capability.handlers:
            fits.append(one_of(self.caps, executions.c.handler, sorted(capability.handlers)))
        if capability.http:
            fits.append(executions.c.handler.is_(None))
        scans = [
            sa.select(executions.c.id)
            .where(
                executions.c.tenant == name,
                status_in(executions.c.status, "scheduled"),
                executions.c.ready_at <= now_us,
                sa.or_(*fits),
            )
            .order_by(executions.c.ready_at)
            .limit(n)
            for name, n in quotas.items()
        ]
        rows: list = []
        for start in range(0, len(scans), UNION_BRANCHES):
            chunk = [sa.select(scan.subquery()) for scan in scans[start:start + UNION_BRANCHES]]
            picked = chunk[0] if len(chunk) == 1 else sa.union_all(*chunk)
            if self.caps.row_locks:
                picked = (
                    sa.select(executions.c.id)
                    .where(executions.c.id.in_(picked), status_in(executions.c.status, "scheduled"))
                    .with_for_update(skip_locked=self.caps.skip_locked)
                )
            rows += conn.execute(
                executions.update()
                .where(executions.c.id.in_(picked), status_in(executions.c.status, "scheduled"))
                .values(status="running", owner=owner, delivery=executions.c.delivery + 1, handed_out_at=at_us)
                .returning(*_TAKEN_COLUMNS)
            ).all()
        return [_Taken._make((*row, None, None, None)) for row in rows]

    def _taken(self, conn: Connection, moved: list) -> list[_Taken]:
        """The taken rows whole, each with its job's definition: read by
        primary key where the take returned only ids (PostgreSQL); elsewhere
        the take returned them whole."""
        if not (self.caps.is_postgres and self.lateral):
            return moved
        read = execute_arrays(conn, _TAKEN_ROWS, {"ids": [row.id for row in moved]})
        return [_Taken._make(row) for row in tuples(read)]


_SAME_INSTANT_US = 1000
"""Rounds whose instants are this close (µs) are told apart by bumping the
later one; further apart backwards, the wall clock was stepped back."""
