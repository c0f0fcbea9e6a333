"""Hand-out, outcomes and requeues: the executions table as the queue.

:meth:`HandoutStore.claim_ready` hands ready executions out in one
transaction per round, in four steps, each a bounded number of batched
statements whatever the backlog:

1. *Who has ready work.* The tenants the workers may serve that have an
   execution ``scheduled`` with ``ready_at <= :now`` (the first entry of each
   tenant in ``executions_tenant_ready``: one index probe per tenant; for a
   long tenant list, a loose index scan over the tenants that have scheduled
   work at all), with their weight and concurrency cap. A capped tenant's
   ``tenant_gates`` row is written first (hand-outs for one tenant take
   turns) and its running executions counted: its room under the cap.
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
4. *What may start.* :mod:`.admission` applies each job's overlap policy and
   the concurrency keys (their rows locked); the candidates that may start
   keep ``running`` (and take their key slots); the others give their
   delivery back and wait (``waiting``), are skipped (deleted, counted in a
   skip range with reason ``overlap``) or canceled, in the same
   transaction, so no one ever sees them running; running executions an
   overlap ``replace`` stops get a cancel request.

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
one batched insert of attempt rows. Each result carries the tenants of the
credential it came with: an execution of any other tenant is answered
exactly like one that does not exist (:data:`NOT_HELD`). A result whose
delivery is not the current one is rejected and changes nothing but a note
on the attempt row of that delivery, if it was requeued; a repeated result
(its attempt row exists) is acknowledged again and changes nothing. A result
the caller does not vouch for (``held=False``: the stream that sent it does
not hold the delivery) is never applied, only classified.

:meth:`requeue` ends a delivery that no worker will finish (its worker died,
stopped heartbeating, or its server's session expired): an attempt row
``lost`` with the reason, and the execution ``scheduled`` again with the same
id (the next hand-out is delivery + 1). Every update is conditional on the
delivery and the owner it was decided for, so a worker that re-attached
elsewhere meanwhile (:meth:`reattach`) keeps its execution. Requeues that
count (the worker died or went silent, not the server) raise ``reap_count``;
past the poison cap the execution is dead-lettered instead.

Whatever ends a delivery gives its concurrency-key slots back and wakes the
next in line (:mod:`.isolation`), in the same transaction. An execution with
a cancel request ends ``canceled`` instead of being retried or requeued.

On PostgreSQL, hand-out rounds and result batches run at READ COMMITTED
(see :class:`.base.SqlStore`): their correctness rests on the row locks
above, on share locks on the running executions an overlap decision reads
(:data:`_BUSY_SHARED`), read after the not-started ones, and on an advisory
lock per ``replace`` job (:meth:`HandoutStore._lock_replacing`); what a
SERIALIZABLE path ending a delivery could leave asleep is woken by
:meth:`HandoutStore.wake_stalled`.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from tickwheel.v1 import worker_pb2

from tickwheel.shared.ids import to_us

from ..circuits import CircuitBreaker
from ..jobspec import NO_DEFINITION, DefinitionCache, JobDefinition
from ..policy.outcome import BREAKER_OUTCOMES, Facts, breaker_event, decide
from ..policy.admission import (
    ANYTHING_GOES, Active, Candidate, KeyState, Replace, Rules, Skip, decide_keys, decide_overlap,
)
from .base import SqlStore, driver_sql, execute_arrays, tuples
from .fairshare import FairShare
from ..policy.fairness import Demand, Shares
from .isolation import (
    PAUSED_WAIT, ensure_keys, insert_for, lock_keys, not_held, release_slots, request_cancel, status_in, take_slots,
    wake_jobs, wake_key_waiters, wake_keys,
)
from .tables import attempts, concurrency_keys, executions, jobs, skips, tenant_gates, tenants
from .timeline import NOT_STARTED, in_group

TERMINAL = ("succeeded", "dead", "canceled")
NOT_HELD = "no such execution held by this worker"
"""The answer to a result for an execution that does not exist, is another
tenant's, or whose current delivery this worker does not hold: one text for
all three, so an answer never tells a worker whether another tenant's id exists."""
DEFAULT_POISON_CAP = 3
OVERLAP_REASON = "overlap"
LOOSE_SCAN_ABOVE = 64
"""A round whose workers may serve more tenants than this finds those with
ready work by a loose index scan over the tenants that have any scheduled
execution, instead of one probe per tenant named."""
_UNION_BRANCHES = 100
"""Scans per UNION ALL statement (SQLite's compound SELECT limit is 500)."""
DeadLetterHook = Callable[[Connection, "DeadLetter"], None]
"""Called inside the transaction that dead-letters an execution (raises its alert)."""
SkipHook = Callable[[Connection, list[Skip]], None]
"""Called inside the round's transaction with the occurrences its overlap policies skipped (raises their alerts)."""

_TAKEN_COLUMNS = (
    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition, executions.c.origin,
    executions.c.nominal_at, executions.c.due_at, executions.c.ready_at, executions.c.attempt, executions.c.delivery,
    executions.c.payload, executions.c.missed_count, executions.c.allow_overlap, executions.c.wait_key,
    executions.c.trace_context,
)

# Per tenant, its oldest ready executions up to its share: one range scan on
# executions_tenant_ready with its own LIMIT each, rows locked as the scan
# passes them (SKIP LOCKED: a row another server is claiming is passed over),
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
    "handed_out_at = :at WHERE executions.id = ANY (CAST(:ids AS TEXT[])) AND executions.status = 'scheduled' "
    "RETURNING executions.id, executions.tenant"
)

# The taken rows (this transaction's own updates) by primary key, each with
# its job's definition (NULL if the job was deleted meanwhile), so the round
# needs no statement of its own to read the jobs.
_TAKEN_ROWS = driver_sql(
    "SELECT e.id, e.job_id, e.tenant, e.partition, e.origin, e.nominal_at, e.due_at, e.ready_at, e.attempt, "
    "e.delivery, e.payload, e.missed_count, e.allow_overlap, e.wait_key, e.trace_context, j.spec, j.version, "
    "j.updated_at "
    "FROM executions AS e LEFT JOIN jobs AS j ON j.id = e.job_id WHERE e.id = ANY (CAST(:ids AS TEXT[]))"
)

_ACTIVE_COLUMNS = (
    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.status, executions.c.origin,
    executions.c.nominal_at, executions.c.ready_at, executions.c.attempt, executions.c.allow_overlap,
    executions.c.wait_key, executions.c.cancel_requested_at,
)

# Running, or waiting for a retry: the predicate of executions_busy, written
# as it is there so that every engine matches the partial index.
_BUSY = sa.text("(executions.status = 'running' OR (executions.status = 'scheduled' AND executions.attempt > 1))")

# Per job, its oldest executions not started (executions_not_started_job, one range each).
_JOBS_BY_ID = sa.text("SELECT id, version, spec, updated_at FROM jobs WHERE id = ANY (CAST(:ids AS TEXT[]))")

# What the overlap policies look at, part one (PostgreSQL, READ COMMITTED):
# the candidates' jobs' executions that run or wait for a retry
# (executions_busy, one array parameter), other than this round's own, each
# row share-locked. A result being recorded for one of them holds its row
# (FOR UPDATE) until it commits: the round then reads the row as it ends up,
# and a round that locked first makes the result wait, so the result's
# wake-up sees a waiter this round queued behind it.
_BUSY_SHARED = driver_sql(
    "SELECT e.id, e.job_id, e.tenant, e.status, e.origin, e.nominal_at, e.ready_at, e.attempt, e.allow_overlap, "
    "e.wait_key, e.cancel_requested_at FROM executions AS e "
    "WHERE e.job_id = ANY (CAST(:jobs AS TEXT[])) "
    "AND (e.status = 'running' OR (e.status = 'scheduled' AND e.attempt > 1)) "
    "AND (e.owner IS DISTINCT FROM :owner OR e.handed_out_at IS DISTINCT FROM :at) "
    "FOR SHARE OF e"
)

# Part two: per job, its oldest executions not started up to its newest
# candidate (executions_not_started_job, one LIMITed range each), leaving out
# those its pause holds (isolation.PAUSED_WAIT): they are in no line.
_NOT_STARTED = driver_sql(
    "SELECT a.id, a.job_id, a.tenant, a.status, a.origin, a.nominal_at, a.ready_at, a.attempt, a.allow_overlap, "
    "a.wait_key, a.cancel_requested_at "
    "FROM unnest(CAST(:jobs AS TEXT[]), CAST(:limits AS INTEGER[]), CAST(:uptos AS BIGINT[])) AS q (job_id, n, upto) "
    "CROSS JOIN LATERAL ("
    "SELECT e.id, e.job_id, e.tenant, e.status, e.origin, e.nominal_at, e.ready_at, e.attempt, e.allow_overlap, "
    "e.wait_key, e.cancel_requested_at FROM executions AS e "
    "WHERE e.job_id = q.job_id AND e.status IN ('scheduled', 'waiting') AND e.nominal_at <= q.upto "
    f"AND (e.wait_key IS NULL OR e.wait_key <> '{PAUSED_WAIT}') "
    "ORDER BY e.nominal_at, e.id LIMIT q.n"
    ") AS a"
)

# Outcomes of a batch of results (PostgreSQL): every row's new state from
# parallel arrays, by primary key; whatever held the delivery is cleared.
_RECORD_OUTCOMES = driver_sql(
    "UPDATE executions SET status = v.status, attempt = v.attempt, ready_at = v.ready_at, error = v.error, "
    "dead_reason = v.dead_reason, finished_at = v.finished_at, owner = NULL, worker_id = NULL, "
    "handed_out_at = NULL, held_keys = NULL, wait_key = NULL, waiting_since = NULL, cancel_requested_at = NULL, "
    "cancel_reason = NULL "
    "FROM unnest(CAST(:ids AS TEXT[]), CAST(:statuses AS TEXT[]), CAST(:attempts AS INTEGER[]), "
    "CAST(:ready AS BIGINT[]), CAST(:errors AS TEXT[]), CAST(:deads AS TEXT[]), CAST(:finished AS BIGINT[])) "
    "AS v (id, status, attempt, ready_at, error, dead_reason, finished_at) "
    "WHERE executions.id = v.id"
)
_OUTCOME_ARRAYS = {
    "ids": "b_id", "statuses": "b_status", "attempts": "b_attempt", "ready": "b_ready_at", "errors": "b_error",
    "deads": "b_dead_reason", "finished": "b_finished_at",
}

# A batch of results' executions (PostgreSQL), locked, each with its job's
# definition: one array parameter, one plan whatever the batch.
_RESULT_ROWS = driver_sql(
    "SELECT e.id, e.job_id, e.tenant, e.partition, e.status, e.delivery, e.attempt, e.due_at, e.ready_at, "
    "e.handed_out_at, e.held_keys, e.waiting_since, e.cancel_requested_at, e.cancel_reason, j.spec, j.version "
    "FROM executions AS e LEFT JOIN jobs AS j ON j.id = e.job_id "
    "WHERE e.id = ANY (CAST(:ids AS TEXT[])) FOR UPDATE OF e"
)

# A batch of attempt rows (PostgreSQL) from parallel arrays: one statement,
# not one per row.
_ATTEMPT_COLUMNS = (
    ("execution_id", "TEXT"), ("attempt", "INTEGER"), ("delivery", "INTEGER"), ("status", "TEXT"),
    ("started_at", "BIGINT"), ("finished_at", "BIGINT"), ("lateness_us", "BIGINT"), ("worker_id", "TEXT"),
    ("error", "TEXT"), ("waited_us", "BIGINT"), ("worker_started_at", "BIGINT"),
)
_INSERT_ATTEMPTS = driver_sql(
    f"INSERT INTO attempts ({', '.join(name for name, _ in _ATTEMPT_COLUMNS)}) "
    f"SELECT * FROM unnest({', '.join(f'CAST(:{name} AS {kind}[])' for name, kind in _ATTEMPT_COLUMNS)})"
)


class _ResultRow(NamedTuple):
    """An execution a result names, as :data:`_RESULT_ROWS` reads it."""

    id: str
    job_id: str
    tenant: str
    partition: int
    status: str
    delivery: int
    attempt: int
    due_at: int
    ready_at: int
    handed_out_at: int | None
    held_keys: str | None
    waiting_since: int | None
    cancel_requested_at: int | None
    cancel_reason: str | None
    spec: bytes | None
    version: int | None
    """The job's version (None: the job was deleted): the definition's cache key with its id."""


# Transaction advisory locks on jobs (PostgreSQL), one per job, taken in one
# order (the sorted subquery is scanned in its order) so rounds never deadlock.
_LOCK_JOBS = driver_sql(
    "SELECT pg_advisory_xact_lock(s.k) FROM ("
    "SELECT DISTINCT hashtextextended(j, 0) AS k FROM unnest(CAST(:jobs AS TEXT[])) AS j ORDER BY 1"
    ") AS s"
)

# The tenants that have any scheduled execution, by a loose index scan of
# executions_tenant_ready (one descent per tenant), each with its oldest
# ready instant (one more descent) and its settings.
_LOOSE_SCAN = sa.text(
    "WITH RECURSIVE present (tenant) AS ("
    "SELECT (SELECT e.tenant FROM executions AS e WHERE e.status = 'scheduled' ORDER BY e.tenant LIMIT 1) "
    "UNION ALL "
    "SELECT (SELECT e.tenant FROM executions AS e WHERE e.status = 'scheduled' AND e.tenant > p.tenant "
    "ORDER BY e.tenant LIMIT 1) FROM present AS p WHERE p.tenant IS NOT NULL"
    ") "
    "SELECT t.name, t.weight, t.max_concurrency, "
    "(SELECT e.ready_at FROM executions AS e WHERE e.status = 'scheduled' AND e.tenant = t.name "
    "ORDER BY e.ready_at LIMIT 1) AS oldest "
    "FROM present AS p JOIN tenants AS t ON t.name = p.tenant WHERE t.state <> 'paused'"
)


@dataclass(frozen=True)
class Capability:
    """What a group of workers may receive."""

    tenants: tuple[str, ...]
    handlers: tuple[str, ...]
    """Handler names they run (already narrowed to what their credential allows)."""
    http: bool


class HandedOut(NamedTuple):
    """One execution a round handed out (a tuple: thousands are made per round)."""

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
    definition: JobDefinition | None
    """The job's definition; None if the job was deleted meanwhile."""
    handed_out_at_us: int
    trace_context: str
    """W3C traceparent of the span that created the execution; empty when it was created untraced."""


class ResultIn(NamedTuple):
    """A worker's result (a tuple: a batch has thousands)."""

    execution_id: str
    delivery: int
    attempt: int
    outcome: int
    """A ``tickwheel.v1.ResultOutcome``."""
    error: str
    worker_id: str
    tenants: tuple[str, ...]
    """The tenants of the worker's credential: an execution of any other is answered as unknown."""
    retry_after: timedelta | None = None
    worker_started_at_us: int | None = None
    """When the worker says it started the attempt (its clock); None: not reported."""
    held: bool = True
    """The stream that sent it holds the delivery (the gateway checked); False:
    the result is classified (already recorded, stale) but never applied."""


class ResultAck(NamedTuple):
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
    canceled: list[str] = field(default_factory=list)
    """Executions ended as canceled instead: they had a cancel request."""


@dataclass(frozen=True)
class CancelRequest:
    """A running execution its owner must tell its worker to stop."""

    execution_id: str
    delivery: int
    reason: str


class Running(NamedTuple):
    """A running execution as :meth:`HandoutStore.running_under` reads it."""

    execution_id: str
    delivery: int
    handed_out_at_us: int | None
    worker_id: str


@dataclass(frozen=True)
class Reattached:
    execution_id: str
    delivery: int
    partition: int


class Claimed(list):
    """The executions a round handed out (a list of :class:`HandedOut`),
    with what else it did."""

    def __init__(self, items: Iterable[HandedOut] = (), *, tenants: Sequence[str] = ()) -> None:
        super().__init__(items)
        self.tenants = list(tenants)
        """The tenants the round found with ready work."""
        self.diverted = 0
        """Candidates that waited, were skipped or canceled instead of starting."""
        self.stopped = 0
        """Running executions asked to stop (overlap ``replace``)."""
        self.fenced: str | None = None
        """Why the claim's fence refused to commit it (nothing was handed out); None if it did not."""


class _Fenced(Exception):
    """A claim's fence refused to let it commit: roll it back."""

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
    spec: bytes | None
    """The job's definition, where the take read it (PostgreSQL); else None."""
    job_version: int | None
    job_updated_at: int | None


class _Job(NamedTuple):
    definition: JobDefinition
    updated_at: int


class HandoutStore(SqlStore):
    def __init__(
        self,
        engine,
        clock,
        *,
        rng: random.Random | None = None,
        on_dead_letter: DeadLetterHook | None = None,
        on_skip: SkipHook | None = None,
        poison_cap: int = DEFAULT_POISON_CAP,
        fair: FairShare | None = None,
        loose_scan_above: int = LOOSE_SCAN_ABOVE,
        lateral: bool = True,
        breaker: CircuitBreaker | None = None,
        definitions: DefinitionCache | None = None,
    ) -> None:
        super().__init__(engine, clock)
        self._rng = rng or random.Random()
        self._on_dead_letter = on_dead_letter
        self._on_skip = on_skip
        self.breaker = breaker
        """Counts HTTP-target outcomes per (tenant, host) and holds retries while a circuit is open; None: no breaker."""
        self.poison_cap = poison_cap
        self.fair = fair if fair is not None else FairShare()
        self.loose_scan_above = loose_scan_above
        self.lateral = lateral
        """Use LATERAL scans on PostgreSQL; False sends the UNION ALL form other
        engines get (tests run it on PostgreSQL, which shares CockroachDB's SQL)."""
        self.definitions = definitions if definitions is not None else DefinitionCache()
        """Parsed definitions by (job id, version); shared with the dispatcher where one server runs both."""
        self._at_lock = threading.Lock()
        self._last_at = 0

    # -- hand-out ---------------------------------------------------------------------------------

    async def claim_ready(
        self, owner: str, now: datetime, capability: Capability, limit: int,
        on_taken: Callable[[int], None] | None = None, fence: Callable[[], str | None] | None = None,
    ) -> "Claimed":
        """Hand out up to ``limit`` executions whose ready instant is at or
        before ``now`` and that ``capability`` may run: shared among tenants
        by weighted fair share within their caps, oldest ready first within
        a tenant, each admitted by its job's overlap policy and its keys.

        What is ready is decided by the hand-out instant, this server's
        clock read when the transaction runs and never before ``now``; it is
        stamped on the rows (lateness and deadlines are measured from it). So
        a claim retried after a serialization conflict or through an outage
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
        hand out (:meth:`Gateway.refusal`: its session surely alive, its
        clock trusted); a reason instead of None rolls the transaction back
        and returns an empty :class:`Claimed` whose ``fenced`` is that
        reason: nothing was handed out, changed or counted."""
        if limit <= 0 or not capability.tenants or not (capability.handlers or capability.http):
            return Claimed()
        now_us = to_us(now)
        outcome: list = []

        def fn(conn: Connection) -> Claimed:
            outcome.clear()
            shares = self.fair.begin()
            claimed = self._claim(conn, owner, now_us, capability, limit, shares, on_taken)
            refused = fence() if fence is not None else None
            if refused is not None:
                raise _Fenced(refused)
            outcome.append(shares)
            return claimed

        try:
            claimed = await self._tx(fn, row_locked=True)
        except _Fenced as fenced:
            refused = Claimed()
            refused.fenced = fenced.reason
            return refused
        if outcome:
            self.fair.commit(outcome[0], claimed.tenants)
        return claimed

    def _claim(
        self, conn: Connection, owner: str, now_us: int, capability: Capability, limit: int, shares: Shares,
        on_taken: Callable[[int], None] | None = None,
    ) -> "Claimed":
        # This attempt's instant decides what is ready and is the hand-out
        # instant: an attempt retried after a conflict or an outage sees what
        # came due meanwhile, and is never early by this server's clock.
        at_us = self._unique_instant(max(now_us, to_us(self.clock.now())))
        now_us = at_us
        ready = self._ready_tenants(conn, capability, now_us)
        if not ready:
            return Claimed()
        rooms = self._rooms(conn, [t for t in ready if t.max_concurrency > 0])
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
        claimed = Claimed(tenants=sorted(demands))
        if not rows:
            return claimed
        rows = self._taken(conn, rows)
        rows.sort(key=lambda row: (row.ready_at, row.id))
        jobs_of = self._jobs_of(conn, rows)
        rules = {job_id: job.definition.rules for job_id, job in jobs_of.items()}
        candidates = [
            Candidate(r.id, r.job_id, r.tenant, r.origin, r.nominal_at, r.ready_at, r.attempt, r.delivery - 1,
                      bool(r.allow_overlap), r.wait_key)
            for r in rows
        ]
        self._lock_replacing(conn, rules)
        active = self._active(conn, candidates, rules, owner, at_us)
        decision, admitted = decide_overlap(candidates, rules, active, now_us)
        # Stop and cancel what an overlap ``replace`` replaces before any key
        # row is locked (executions before keys: the order every writer keeps).
        claimed.stopped = request_cancel(conn, [(stop.id, stop.reason) for stop in decision.stop], at_us)
        self._cancel_replaced(conn, decision.replace, at_us)
        keys = self._lock_keys(conn, admitted, rules, jobs_of)
        decide_keys(admitted, rules, keys, decision)
        self._settle(conn, decision, at_us)
        # Woken executions that did not start after all hand their turn on;
        # keys with free slots and sleeping waiters wake them.
        wake_keys(conn, self.caps, {(s.candidate.tenant, s.candidate.wait_key) for s in decision.skip
                                    if s.candidate.wait_key})
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
                jobs_of[row.job_id].definition if row.job_id in jobs_of else None, at_us, row.trace_context or "",
            )
            for row in (by_id[start.candidate.id] for start in decision.start)
        ]
        handed.sort(key=lambda h: (h.ready_at_us, h.id))
        claimed.extend(handed)
        claimed.diverted = len(rows) - len(handed)
        return claimed

    def _unique_instant(self, at_us: int) -> int:
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

    # -- step 1: who has ready work, and room under their caps -------------------------------------

    def _ready_tenants(self, conn: Connection, capability: Capability, now_us: int) -> list:
        """The tenants of ``capability`` with an execution ready by ``now_us``
        (any handler: the scan decides), with their weight and cap. A paused
        tenant has none: its executions wait for its resume."""
        if len(capability.tenants) <= self.loose_scan_above:
            first = executions.alias("first")
            oldest = (
                sa.select(first.c.ready_at)
                .where(first.c.tenant == tenants.c.name, status_in(first.c.status, "scheduled"))
                .order_by(first.c.ready_at)
                .limit(1)
                .scalar_subquery()
            )
            query = sa.select(
                tenants.c.name, tenants.c.weight, tenants.c.max_concurrency, oldest.label("oldest")
            ).where(tenants.c.name.in_(sorted(capability.tenants)), tenants.c.state != "paused")
            rows = conn.execute(query).all()
        else:
            rows = conn.execute(_LOOSE_SCAN).all()
            allowed = set(capability.tenants)
            rows = [row for row in rows if row.name in allowed]
        return sorted((row for row in rows if row.oldest is not None and row.oldest <= now_us), key=lambda r: r.name)

    def _rooms(self, conn: Connection, capped: list) -> dict[str, int]:
        """How many more executions each capped tenant may run. Its gate row
        is written first: hand-outs for one tenant take turns, and each
        counts the running executions the previous one committed."""
        if not capped:
            return {}
        names = sorted(t.name for t in capped)
        gate = insert_for(conn, tenant_gates)
        conn.execute(
            gate.on_conflict_do_update(index_elements=["tenant"], set_=dict(rounds=tenant_gates.c.rounds + 1)),
            [dict(tenant=name, rounds=1) for name in names],
        )
        counts = dict(
            conn.execute(
                sa.select(executions.c.tenant, sa.func.count())
                .where(status_in(executions.c.status, "running"), executions.c.tenant.in_(names))
                .group_by(executions.c.tenant)
            ).all()
        )
        return {t.name: max(0, t.max_concurrency - counts.get(t.name, 0)) for t in capped}

    # -- step 3: the candidates --------------------------------------------------------------------

    def _take(
        self, conn: Connection, owner: str, at_us: int, quotas: dict[str, int], capability: Capability, now_us: int
    ) -> list:
        """Per tenant, its ``quotas[tenant]`` oldest ready executions that
        ``capability`` may run, moved to ``running`` under ``owner`` (next
        delivery, hand-out instant ``at_us``) by an UPDATE … RETURNING, as
        the candidates of the round: those that may not start after all are
        settled otherwise before the transaction ends (:meth:`_settle`), so
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
            fits.append(executions.c.handler.in_(capability.handlers))
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
        for start in range(0, len(scans), _UNION_BRANCHES):
            chunk = [sa.select(scan.subquery()) for scan in scans[start:start + _UNION_BRANCHES]]
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

    # -- step 4: what may start --------------------------------------------------------------------

    def _jobs_of(self, conn: Connection, rows: list[_Taken]) -> dict[str, "_Job"]:
        """The candidates' jobs: definition (parsed once per distinct
        definition) and when last written; read with the rows where the take
        returned them, else in one statement."""
        found: dict[str, _Job] = {}
        if self.caps.is_postgres and self.lateral:
            for row in rows:
                if row.spec is not None and row.job_id not in found:
                    found[row.job_id] = _Job(self.definitions.get(row.job_id, row.job_version, row.spec),
                                             row.job_updated_at)
            return found
        job_ids = sorted({row.job_id for row in rows})
        if self.caps.is_sqlite:
            query = sa.select(jobs.c.id, jobs.c.version, jobs.c.spec, jobs.c.updated_at).where(jobs.c.id.in_(job_ids))
            read = conn.execute(query)
        else:  # one array parameter: one statement text whatever the count, so its plan is reused
            read = conn.execute(_JOBS_BY_ID, dict(ids=job_ids))
        for job_id, version, spec, updated_at in read:
            found[job_id] = _Job(self.definitions.get(job_id, version, spec), updated_at)
        return found

    def _lock_replacing(self, conn: Connection, rules: dict[str, Rules]) -> None:
        """Rounds at READ COMMITTED take turns per ``replace`` job.

        Everywhere else the overlap decision needs no lock of its own: a
        round sees another server's candidate of the same job as
        ``scheduled`` and ready, so the newer of two waits behind or is
        skipped for the older (never both start), and the running executions
        it reads are share-locked (:data:`_BUSY_SHARED`), so a result being
        recorded for one is either seen or waits for the round, and its
        wake-up then sees a waiter the round queued. Under ``replace``, though, each round's
        newest occurrence replaces only what is older, so two servers could
        each start one; a transaction advisory lock per such job, taken in
        one order before the job's executions are read, makes the second
        round read what the first committed."""
        if self.row_locked_engine is None:
            return
        replacing = sorted(job_id for job_id, rule in rules.items() if rule.overlap == "replace")
        if replacing:
            execute_arrays(conn, _LOCK_JOBS, dict(jobs=replacing))

    def _active(
        self, conn: Connection, candidates: list[Candidate], rules: dict[str, Rules], owner: str, at_us: int
    ) -> list[Active]:
        """What the overlap policies of the candidates' jobs look at: every
        execution of those jobs that runs or waits for a retry
        (``executions_busy``), and each job's oldest executions not started,
        up to its newest candidate, as many as it has candidates and two
        more (``executions_not_started_job``, one LIMITed range per job): enough to
        know what is ahead of each candidate, however long a job's queue (a
        backfill) is. For a job with nothing else going on, both read index
        entries only. On PostgreSQL (READ COMMITTED) the running ones are
        share-locked and this round's own candidates left out."""
        wanted = Counter(c.job_id for c in candidates if rules.get(c.job_id, ANYTHING_GOES).overlap != "allow")
        if not wanted:
            return []
        job_ids = sorted(wanted)
        upto: dict[str, int] = {}
        for candidate in candidates:
            upto[candidate.job_id] = max(upto.get(candidate.job_id, candidate.nominal_at), candidate.nominal_at)
        # Not started first, then running: at READ COMMITTED each statement
        # reads what was committed when it began, so an execution another
        # round starts between the two is read as not started, as running,
        # or both (the running row wins below), never as neither.
        if self.caps.is_postgres and self.lateral:
            rows = execute_arrays(
                conn,
                _NOT_STARTED,
                dict(jobs=job_ids, limits=[wanted[j] + 2 for j in job_ids], uptos=[upto[j] for j in job_ids]),
            ).all()
        else:
            rows = _union_all(conn, [
                sa.select(*_ACTIVE_COLUMNS)
                .where(
                    executions.c.job_id == job_id,
                    *in_group(NOT_STARTED),
                    executions.c.nominal_at <= upto[job_id],
                    not_held(),
                )
                .order_by(executions.c.nominal_at, executions.c.id)
                .limit(wanted[job_id] + 2)
                for job_id in job_ids
            ])
        if self.row_locked_engine is not None:
            rows += execute_arrays(conn, _BUSY_SHARED, dict(jobs=job_ids, owner=owner, at=at_us)).all()
        else:  # serializable: the snapshot and the engine's conflict checks do what the locks do
            rows += conn.execute(sa.select(*_ACTIVE_COLUMNS).where(executions.c.job_id.in_(job_ids), _BUSY)).all()
        # The candidates come back (they run now): they are not "others".
        mine = {c.id for c in candidates}
        found = {
            ident: Active(ident, job_id, tenant, status, origin, nominal_at, ready_at, attempt, bool(allow_overlap),
                          wait_key, cancel_requested_at is not None)
            for (ident, job_id, tenant, status, origin, nominal_at, ready_at, attempt, allow_overlap, wait_key,
                 cancel_requested_at) in rows
            if ident not in mine
        }
        return list(found.values())

    def _cancel_replaced(self, conn: Connection, replaced: list[Replace], at_us: int) -> None:
        """Cancel what an overlap ``replace`` replaced before it started: every
        execution of the job not started, older than the replacing one, that
        may not overlap (one statement for the round)."""
        if not replaced:
            return
        older = sa.or_(*[
            sa.and_(
                executions.c.job_id == r.job_id,
                sa.tuple_(executions.c.nominal_at, executions.c.id) < sa.tuple_(sa.literal(r.nominal_at), sa.literal(r.id)),
            )
            for r in replaced
        ])
        reasons = sa.case(*[(executions.c.job_id == r.job_id, r.reason) for r in replaced], else_=executions.c.dead_reason)
        canceled = conn.execute(
            executions.update()
            .where(
                executions.c.job_id.in_(sorted({r.job_id for r in replaced})),
                *in_group(NOT_STARTED),
                executions.c.allow_overlap.is_(False),
                older,
            )
            .values(status="canceled", finished_at=at_us, dead_reason=reasons)
            .returning(executions.c.tenant, executions.c.wait_key)
        ).all()
        # A key whose freed slot had woken one of them hands the turn on.
        wake_keys(conn, self.caps, {(row.tenant, row.wait_key) for row in canceled if row.wait_key})

    def _lock_keys(self, conn: Connection, admitted: list[Candidate], rules: dict[str, Rules], jobs_of) -> dict:
        """The rows of every key the admitted candidates' jobs name, locked,
        with their queues' heads; a key no job write created yet is created
        with the limit its job names."""
        wanted: dict[tuple[str, str], tuple[int, int]] = {}
        for candidate in admitted:
            job = jobs_of.get(candidate.job_id)
            for name, key_limit in rules.get(candidate.job_id, ANYTHING_GOES).keys:
                wanted.setdefault((candidate.tenant, name), (key_limit, job.updated_at if job else 0))
        if not wanted:
            return {}
        rows = lock_keys(conn, self.caps, wanted, heads=True)
        missing = [(t, n, *wanted[(t, n)]) for t, n in sorted(wanted) if (t, n) not in rows]
        if missing:
            ensure_keys(conn, missing)
            rows = lock_keys(conn, self.caps, wanted, heads=True)
        return {pair: KeyState(row.max_running, row.running, row.head_ready_at) for pair, row in rows.items()}

    def _settle(self, conn: Connection, decision, at_us: int) -> None:
        """Give every taken candidate its end state for this round: those
        that start keep ``running`` and take their key slots; the others give
        back the delivery they were taken with and wait (``waiting``, for
        their job or a key; ``waiting_since`` keeps the attempt's first
        wait), are canceled (replaced), or are skipped (deleted if never
        handed out before, canceled if they were: their attempts stay)."""
        holding = [start for start in decision.start if start.keys or start.candidate.wait_key]
        if holding:
            conn.execute(
                executions.update()
                .where(executions.c.id == sa.bindparam("b_id"))
                .values(held_keys=sa.bindparam("b_keys"), wait_key=None),
                [dict(b_id=start.candidate.id, b_keys=json.dumps(list(start.keys)) if start.keys else None)
                 for start in holding],
            )
            taken: Counter[tuple[str, str]] = Counter()
            for start in holding:
                for name in start.keys:
                    taken[(start.candidate.tenant, name)] += 1
            take_slots(conn, taken)
        back = dict(owner=None, handed_out_at=None, delivery=executions.c.delivery - 1)
        if decision.wait:
            conn.execute(
                executions.update()
                .where(executions.c.id == sa.bindparam("b_id"))
                .values(
                    status="waiting", wait_key=sa.bindparam("b_key"),
                    waiting_since=sa.func.coalesce(executions.c.waiting_since, at_us), **back,
                ),
                [dict(b_id=w.candidate.id, b_key=w.key) for w in decision.wait],
            )
        ended = [(c.id, c.reason) for c in decision.cancel]
        ended += [(s.candidate.id, "canceled: skipped by the overlap policy") for s in decision.skip
                  if s.candidate.delivery > 0]
        if ended:
            conn.execute(
                executions.update()
                .where(executions.c.id == sa.bindparam("b_id"))
                .values(status="canceled", finished_at=at_us, dead_reason=sa.bindparam("b_reason"), **back),
                [dict(b_id=ident, b_reason=reason) for ident, reason in ended],
            )
        fresh = [s.candidate.id for s in decision.skip if s.candidate.delivery == 0]
        if fresh:
            conn.execute(executions.delete().where(executions.c.id.in_(fresh)))
        self._skip_ranges(conn, decision.skip, at_us)
        if decision.skip and self._on_skip is not None:
            self._on_skip(conn, decision.skip)

    @staticmethod
    def _skip_ranges(conn: Connection, skipped: list[Skip], at_us: int) -> None:
        """Count skipped occurrences in the skip range (reason ``overlap``) of
        the execution they were skipped for: one range while it runs."""
        if not skipped:
            return
        ranges: dict[str, dict] = {}
        for item in sorted(skipped, key=lambda s: (s.candidate.nominal_at, s.candidate.id)):
            c = item.candidate
            ident = f"{item.blocker_id}:overlap"
            found = ranges.get(ident)
            if found is None:
                ranges[ident] = dict(id=ident, job_id=c.job_id, tenant=c.tenant, from_at=c.nominal_at,
                                     to_at=c.nominal_at, continues_at=None, count=1, reason=OVERLAP_REASON,
                                     created_at=at_us)
            else:
                found["to_at"] = max(found["to_at"], c.nominal_at)
                found["from_at"] = min(found["from_at"], c.nominal_at)
                found["count"] += 1
        statement = insert_for(conn, skips)
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=["id"],
                set_=dict(
                    from_at=sa.case((statement.excluded.from_at < skips.c.from_at, statement.excluded.from_at),
                                    else_=skips.c.from_at),
                    to_at=sa.case((statement.excluded.to_at > skips.c.to_at, statement.excluded.to_at),
                                  else_=skips.c.to_at),
                    count=skips.c.count + statement.excluded.count,
                ),
            ),
            list(ranges.values()),
        )

    async def release(self, handed: list[tuple[str, int]]) -> None:
        """Put back executions handed out but never sent to a worker (their
        stream closed first): ``scheduled`` again, and the delivery taken
        back, since no worker ever saw it; their key slots are given back."""
        if not handed:
            return

        def fn(conn: Connection) -> None:
            wanted = dict(handed)
            query = sa.select(executions.c.id, executions.c.tenant, executions.c.delivery, executions.c.held_keys).where(
                executions.c.id.in_(sorted(wanted)), status_in(executions.c.status, "running")
            )
            if self.caps.row_locks:
                query = query.with_for_update()
            rows = [row for row in conn.execute(query) if wanted[row.id] == row.delivery]
            if not rows:
                return
            conn.execute(
                executions.update()
                .where(
                    executions.c.id == sa.bindparam("b_id"),
                    executions.c.delivery == sa.bindparam("b_delivery"),
                    executions.c.status == "running",
                )
                .values(
                    status="scheduled", owner=None, worker_id=None, handed_out_at=None, held_keys=None,
                    delivery=executions.c.delivery - 1,
                ),
                [dict(b_id=row.id, b_delivery=row.delivery) for row in rows],
            )
            release_slots(conn, self.caps, [(row.tenant, row.held_keys) for row in rows])

        await self._tx(fn)

    async def reattach(
        self, owner: str, worker_id: str, held: Sequence[tuple[str, int]], *, tenants: Sequence[str]
    ) -> list[Reattached]:
        """Take over deliveries a reconnecting worker still runs: those of
        ``tenants`` (its credential's) still ``running`` at that delivery, and
        not re-attached by another worker since (``worker_id`` unset or this
        one), are stamped with ``owner`` (this server's session) and
        ``worker_id``; the rest (finished, requeued, another delivery, another
        tenant's, unknown) are not returned and the worker must drop them."""
        if not held:
            return []
        wanted = dict(held)
        scope = frozenset(tenants)

        def fn(conn: Connection) -> list[Reattached]:
            query = sa.select(
                executions.c.id, executions.c.delivery, executions.c.partition, executions.c.tenant,
                executions.c.worker_id,
            ).where(executions.c.id.in_(sorted(wanted)), executions.c.status == "running")
            if self.caps.row_locks:
                query = query.with_for_update()
            rows = [
                row for row in conn.execute(query)
                if wanted.get(row.id) == row.delivery and row.tenant in scope
                and row.worker_id in (None, worker_id)
            ]
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
        """Apply outcomes; returns one ack per result, in order.

        A result is applied only if its execution is of one of its
        ``tenants``, ``running`` at its delivery and attempt, and ``held``.
        Otherwise nothing of the execution changes: another tenant's or an
        unknown execution, or a current delivery not held, is answered
        :data:`NOT_HELD`; a delivery already recorded ``already recorded``
        (accepted); a requeued one is rejected and, once per lost attempt,
        noted on its ``lost`` attempt row; any other stale one is rejected."""
        if not results:
            return []
        rng_state = self._rng.getstate()

        def fn(conn: Connection) -> list[ResultAck]:
            self._rng.setstate(rng_state)  # the same delays if the transaction is retried
            now = self.clock.now()
            now_us = to_us(now)
            ids = sorted({r.execution_id for r in results})
            if self.caps.is_postgres:
                read = [_ResultRow._make(row) for row in tuples(execute_arrays(conn, _RESULT_ROWS, {"ids": ids}))]
            else:
                read = self._result_rows(conn, ids)
            rows = {row.id: row for row in read}
            # Another tenant's execution is, to this result, no execution at all.
            mine = [
                row if row is not None and row.tenant in r.tenants else None
                for r in results for row in (rows.get(r.execution_id),)
            ]
            mismatched = [
                r for r, row in zip(results, mine)
                if row is not None and (row.status != "running" or row.delivery != r.delivery or row.attempt != r.attempt)
            ]
            recorded = self._recorded_attempts(conn, mismatched)
            acks: list[ResultAck] = []
            updates: list[dict] = []
            history: list[dict] = []
            notes: list[dict] = []
            dead: list[DeadLetter] = []
            ended: list = []
            finished_jobs: list[str] = []
            seen: set[tuple[str, int]] = set()
            for result, row in zip(results, mine):
                key = (result.execution_id, result.delivery)
                if row is None:
                    acks.append(ResultAck(*key, False, NOT_HELD))
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
                if not result.held:  # current, but not this worker's to end
                    acks.append(ResultAck(*key, False, NOT_HELD))
                    continue
                seen.add(key)
                update, attempt_status, retry, dead_letter = self._outcome(row, result, now, now_us)
                updates.append(update)
                history.append(_attempt_row(row, attempt_status, result.worker_id, result.error, now_us,
                                            result.worker_started_at_us))
                ended.append(row)
                if update["b_status"] in TERMINAL:
                    finished_jobs.append(row.job_id)
                if dead_letter is not None:
                    dead.append(dead_letter)
                acks.append(ResultAck(*key, True, retry=retry))
            if updates:
                self._apply_outcomes(conn, updates)
                self._insert_attempts(conn, history)
                release_slots(conn, self.caps, [(row.tenant, row.held_keys) for row in ended])
                wake_jobs(conn, finished_jobs)
            if notes:
                self._note_late_results(conn, notes)
            self._dead_lettered(conn, dead)
            return acks

        return await self._tx(fn, row_locked=True)

    def _result_rows(self, conn: Connection, ids: list[str]) -> list:
        """:data:`_RESULT_ROWS` on engines without binary array parameters."""
        query = (
            sa.select(
                executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition,
                executions.c.status, executions.c.delivery, executions.c.attempt, executions.c.due_at,
                executions.c.ready_at, executions.c.handed_out_at, executions.c.held_keys,
                executions.c.waiting_since, executions.c.cancel_requested_at, executions.c.cancel_reason,
                jobs.c.spec, jobs.c.version,
            )
            .select_from(executions.outerjoin(jobs, jobs.c.id == executions.c.job_id))
            .where(executions.c.id.in_(ids))
        )
        if self.caps.row_locks:
            query = query.with_for_update(of=executions)
        return conn.execute(query).all()

    def _insert_attempts(self, conn: Connection, history: list[dict]) -> None:
        """Insert attempt rows: one statement over arrays on PostgreSQL, an
        executemany elsewhere."""
        if self.caps.is_postgres:
            arrays = {name: [row[name] for row in history] for name, _ in _ATTEMPT_COLUMNS}
            execute_arrays(conn, _INSERT_ATTEMPTS, arrays)
            return
        conn.execute(attempts.insert(), history)

    def _apply_outcomes(self, conn: Connection, updates: list[dict]) -> None:
        """Write the executions' new states: one statement over arrays on
        PostgreSQL (one plan, one round trip, whatever the batch), one
        statement per row elsewhere."""
        if self.caps.is_postgres:
            execute_arrays(conn, _RECORD_OUTCOMES, {
                name: [update[key] for update in updates] for name, key in _OUTCOME_ARRAYS.items()
            })
            return
        conn.execute(
            executions.update()
            .where(executions.c.id == sa.bindparam("b_id"))
            .values(
                status=sa.bindparam("b_status"), attempt=sa.bindparam("b_attempt"),
                ready_at=sa.bindparam("b_ready_at"), error=sa.bindparam("b_error"),
                dead_reason=sa.bindparam("b_dead_reason"), finished_at=sa.bindparam("b_finished_at"),
                owner=None, worker_id=None, handed_out_at=None, held_keys=None, wait_key=None,
                waiting_since=None, cancel_requested_at=None, cancel_reason=None,
            ),
            updates,
        )

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
        """The execution's new values, the attempt's status, and the retry or dead letter it makes, for one result,
        as :func:`~tickwheel_server.policy.outcome.decide` decides.

        An HTTP target's outcome is counted by the circuit breaker of
        (tenant, host); while that circuit is open, a retry is scheduled no
        earlier than the breaker says (see :mod:`tickwheel_server.policy.breaker`).
        A definition that cannot be read fails the result where the decision
        needs it (the result writer then refuses that result alone).
        """
        definition = self.definitions.get(row.job_id, row.version, row.spec) if row.spec else None
        hold = None
        if self.breaker is not None and definition is not None and result.outcome in BREAKER_OUTCOMES:
            event = breaker_event(result.outcome, definition.host(), row.handed_out_at, now_us)
            if event is not None:
                hold = self.breaker.record(row.tenant, event.host, (row.id, result.delivery), failed=event.failed,
                                           age=event.age)
        facts = Facts(row.attempt, row.cancel_requested_at is not None, row.cancel_reason)
        retry = (definition or NO_DEFINITION).retry_or_problem()
        decision = decide(facts, result.outcome, result.retry_after, retry, hold, now, self._rng)
        retrying = decision.status == "scheduled"
        update = dict(
            b_id=row.id, b_status=decision.status, b_attempt=decision.attempt,
            b_ready_at=decision.ready_at_us if retrying else row.ready_at, b_error=result.error[:4096],
            b_dead_reason=decision.reason, b_finished_at=None if retrying else now_us,
        )
        retry_of = Retry(row.id, row.partition, decision.ready_at_us) if retrying else None
        dead = (
            DeadLetter(row.id, row.job_id, row.tenant, decision.reason, result.error, poison=False)
            if decision.dead else None
        )
        return update, decision.attempt_status, retry_of, dead

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
            query = sa.select(*_REQUEUE_COLUMNS).where(
                executions.c.id.in_(sorted(wanted)), executions.c.status == "running", executions.c.owner == owner
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
                _attempt_row(row, "lost", (workers or {}).get(row.id) or row.worker_id or "", reason, now_us)
            )
            if row.cancel_requested_at is not None:  # asked to stop: it ends here, not run again
                updates.append(dict(b_id=row.id, b_status="canceled", b_reaps=reaps, b_finished=now_us,
                                    b_dead_reason=row.cancel_reason or "canceled: by request", b_error=reason[:4096]))
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
        conn.execute(
            executions.update()
            .where(executions.c.id == sa.bindparam("b_id"))
            .values(
                status=sa.bindparam("b_status"), reap_count=sa.bindparam("b_reaps"),
                finished_at=sa.bindparam("b_finished"), dead_reason=sa.bindparam("b_dead_reason"),
                error=sa.bindparam("b_error"), owner=None, worker_id=None, handed_out_at=None, held_keys=None,
                waiting_since=None, cancel_requested_at=None, cancel_reason=None,
            ),
            updates,
        )
        conn.execute(attempts.insert(), history)
        release_slots(conn, self.caps, [(row.tenant, row.held_keys) for row in rows])
        wake_jobs(conn, finished_jobs)
        self._dead_lettered(conn, result.dead)
        return result

    # -- the cancel signal and stalled queues ------------------------------------------------------

    async def cancel_requests(self, owner: str, limit: int = 1000) -> list[CancelRequest]:
        """Running executions stamped with ``owner`` that someone asked to
        stop (a scan of the ``executions_cancel_requested`` partial index,
        which holds only those)."""

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
            return [CancelRequest(r.id, r.delivery, r.cancel_reason or "canceled: by request") for r in conn.execute(query)]

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
            retrying = sa.and_(status_in(other.c.status, "scheduled"), other.c.attempt > 1)
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

    async def running_under(self, owner: str, after: str = "", limit: int = 1000) -> list[Running]:
        """Up to ``limit`` running executions stamped with ``owner`` whose id
        sorts after ``after``, in id order: a page of what one server's
        session holds (the ``executions_owner`` partial index; a server's
        running executions are at most its workers' slots). Writes nothing."""

        def fn(conn: Connection) -> list[Running]:
            query = (
                sa.select(executions.c.id, executions.c.delivery, executions.c.handed_out_at, executions.c.worker_id)
                .where(executions.c.owner == owner, executions.c.status == "running", executions.c.id > after)
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


def _union_all(conn: Connection, scans: list) -> list:
    """The rows of ``scans`` (SELECTs with their own ORDER BY and LIMIT), in
    statements of at most :data:`_UNION_BRANCHES` branches."""
    rows: list = []
    for start in range(0, len(scans), _UNION_BRANCHES):
        chunk = [sa.select(scan.subquery()) for scan in scans[start:start + _UNION_BRANCHES]]
        rows += conn.execute(chunk[0] if len(chunk) == 1 else sa.union_all(*chunk)).all()
    return rows


_SAME_INSTANT_US = 1000
"""Rounds whose instants are this close (µs) are told apart by bumping the
later one; further apart backwards, the wall clock was stepped back."""


_REQUEUE_COLUMNS = (
    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition, executions.c.delivery,
    executions.c.attempt, executions.c.ready_at, executions.c.due_at, executions.c.handed_out_at,
    executions.c.reap_count, executions.c.worker_id, executions.c.held_keys, executions.c.waiting_since,
    executions.c.cancel_requested_at, executions.c.cancel_reason,
)


def _attempt_row(row, status: str, worker_id: str, error: str, now_us: int, worker_started_us: int | None = None) -> dict:
    """The attempt row that ends ``row``'s current delivery (an outcome, or a requeue's ``lost``).

    It started when it was handed out; its lateness is measured from when it
    became ready: the due instant for a first attempt, the backoff's end for
    a retry, the replay instant for a replayed series (``ready_at`` is never
    before ``due_at``, so the later of the two is the right one)."""
    started_us = row.handed_out_at if row.handed_out_at is not None else now_us
    return dict(
        execution_id=row.id, attempt=row.attempt, delivery=row.delivery, status=status,
        started_at=started_us, finished_at=now_us, lateness_us=max(0, started_us - max(row.due_at, row.ready_at)),
        worker_id=worker_id, error=error[:4096], waited_us=_waited(row.waiting_since, started_us),
        worker_started_at=worker_started_us,
    )


def _waited(waiting_since: int | None, started_us: int) -> int:
    """How long an attempt waited for its job or a key before it started."""
    return 0 if waiting_since is None else max(0, started_us - waiting_since)
