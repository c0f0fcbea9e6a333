"""Executions armed ahead of their instant: armed by a server's session a
few seconds before they are due, started at the instant, or disarmed
(docs/architecture.md, "Hand-outs decided ahead").

Life of an armed execution:

- :meth:`ArmStore.arm` moves ready-soon ``scheduled`` executions that need
  no decision at their instant (:func:`~tickwheel_server.policy.arming.may_arm`)
  to ``armed``, stamping ``owner`` (the arming server's session) and the
  next ``delivery``; ``handed_out_at`` stays NULL. An armed row is in none
  of the ``scheduled`` indexes, so no hand-out round, sweep or other server
  takes it; to every reader outside its server it is an execution not
  started (:func:`as_scheduled`: status ``scheduled``, the delivery before
  arming, no owner).
- :meth:`ArmStore.start` moves the owner's armed rows that are due by the
  instant it is given (when its server will send them: its clock, or up to
  a second ahead of it) to ``running`` (``handed_out_at`` that instant),
  only if each is still armed by that owner at that delivery; one whose job has anything
  else running, waiting for a retry, or not started ahead of it (unless it
  runs beside others), or whose tenant was paused or capped since, is
  disarmed instead, and the next round decides for it as for any scheduled
  execution. The arming server sends only what a start returned.
- :meth:`ArmStore.disarm` (the owner gives rows back: not sent within its
  timeout), :meth:`ArmStore.disarm_owner` (the reaper: the owner's session
  is gone) and :func:`disarm_jobs` / :func:`disarm_ids` (a delete, pause,
  update, trigger, backfill or cancel, inside its own transaction, after
  locking the job and before touching its executions) put armed rows back
  to ``scheduled`` and take the delivery back, as
  :meth:`.requeue.RequeueStore.release` does: no worker ever saw it.

Every write is conditional on the status (and, for the owner's own writes,
on owner and delivery), so a row disarmed by anyone is never started, and a
row started is never disarmed: the status transition is the fence, as for
the hand-out.

An arm or start whose COMMIT went unanswered is undone, in a transaction
of its own, before this store's next arm, start or disarm (:mod:`.doubt`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import to_us

from ..jobspec import DefinitionCache
from ..policy.arming import may_arm, runs_beside
from ..policy.fairness import Shares
from ..schedule.model import ScheduleKind
from .doubt import ARM, START, Doubt, InDoubt
from .engine import Capabilities, capabilities
from .arming_pick import pick_fairly
from .calendarhold import Unwalked
from .base import SqlStore, chunks, driver_sql, execute_arrays, one_of, pairs_in, tuples
from .executions import Capability, HandedOut, Retry
from .fairshare import FairShare
from .isolation import PAUSED_WAIT, status_by_key, status_in
from .session_walk import stamped_sessions
from .tables import executions, tenants
from .tenant_walk import TenantWalk

ARMED = "armed"
"""The status of an armed execution (internal: every view shows ``scheduled``)."""

_ONE_OFF = (ScheduleKind.ONCE, ScheduleKind.LOCAL)
_CHUNK = 500
"""Ids per statement for the writes by id on SQLite (its parameter limit)."""
_ARRAY_CHUNK = 10_000
"""Ids per statement elsewhere: one array parameter, one statement text whatever the count."""


def _chunk(caps: Capabilities) -> int:
    return _CHUNK if caps.is_sqlite else _ARRAY_CHUNK


_ID_DELIVERY = ("TEXT", "INTEGER")
"""The array types of (execution id, delivery) pairs (:func:`.base.pairs_in`)."""

# Back to scheduled, the delivery taken back: no worker ever saw it. A row a
# start in doubt was undone to armed may carry its worker: cleared with it.
_DISARMED = dict(status="scheduled", owner=None, worker_id=None, unheld_delivery=None, delivery=executions.c.delivery - 1)


# The start on PostgreSQL and CockroachDB: one statement for the batch, its
# rows found by primary key (``id = ANY`` beside the join to the arrays), the
# guard's probes each on its partial index, written as the index writes its
# predicate (``executions_busy``, ``executions_not_started_job``,
# ``executions_armed_job``); "ahead of it" a row comparison, one range of the
# index ending before the row (loadtest/RESULTS.md, "the start's plan").
_START = driver_sql(
    "UPDATE executions AS e SET status = 'running', handed_out_at = :at, worker_id = v.worker, unheld_delivery = NULL "
    "FROM unnest(CAST(:ids AS TEXT[]), CAST(:deliveries AS INTEGER[]), CAST(:beside AS BOOLEAN[]), "
    "CAST(:workers AS TEXT[])) AS v (id, delivery, beside, worker) "
    "WHERE e.id = ANY (CAST(:ids AS TEXT[])) AND e.id = v.id AND e.delivery = v.delivery "
    "AND COALESCE(e.status, '') = 'armed' AND e.owner = :owner AND e.ready_at <= :at "
    "AND NOT EXISTS (SELECT 1 FROM tenants AS t WHERE t.name = e.tenant "
    "AND (t.state = 'paused' OR t.max_concurrency <> 0)) "
    "AND (v.beside OR NOT ("
    "EXISTS (SELECT 1 FROM executions AS o WHERE o.job_id = e.job_id "
    "AND (o.status = 'running' OR (o.status = 'scheduled' AND o.attempt > 1)) AND o.id <> e.id) "
    "OR EXISTS (SELECT 1 FROM executions AS o WHERE o.job_id = e.job_id AND o.status IN ('scheduled', 'waiting') "
    "AND (o.nominal_at, o.id) < (e.nominal_at, e.id) "
    f"AND (o.wait_key IS NULL OR o.wait_key <> '{PAUSED_WAIT}')) "
    "OR EXISTS (SELECT 1 FROM executions AS o WHERE o.job_id = e.job_id AND o.status = 'armed' "
    "AND (o.nominal_at, o.id) < (e.nominal_at, e.id))"
    ")) RETURNING e.id"
)


# The arm's write on PostgreSQL and CockroachDB: by primary key, one array parameter.
_ARM = driver_sql(
    "UPDATE executions SET status = 'armed', owner = :owner, delivery = executions.delivery + 1 "
    "WHERE executions.id = ANY (CAST(:ids AS TEXT[])) AND COALESCE(executions.status, '') = 'scheduled' "
    "RETURNING executions.id, executions.delivery"
)


class Armed(NamedTuple):
    """An execution armed for its instant: what the gateway sends once a
    start returned it (``handed.handed_out_at_us`` is 0 until then)."""

    handed: HandedOut
    beside: bool
    """It may start whatever else of its job runs: the start skips the overlap guard."""
    size: int = 0
    """Its payload's and its job's stored definition's bytes: what the arming counted against ``max_bytes``."""
    weight: int = 1
    """Its tenant's weight when armed: the start interleaves one instant's tenants by it."""


class StartRound(NamedTuple):
    """What a start did, all in one transaction."""

    started: list[str]
    """Now ``running`` at ``at_us`` under the owner: send these, and only these."""
    disarmed: list[str]
    """Due, but their job or tenant needs a decision now: back to ``scheduled``."""
    at_us: int
    """The hand-out instant stamped on the started rows (the server's clock, never before their ready instant)."""
    fenced: str | None = None
    """The fence refused the commit: nothing was started or disarmed."""


class _Fenced(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def as_scheduled(status: str, delivery: int, owner: str | None) -> tuple[str, int, str | None]:
    """How a row's (status, delivery, owner) reads outside its arming server:
    an armed execution is not started, at the delivery it had before."""
    if status == ARMED:
        return "scheduled", delivery - 1, None
    return status, delivery, owner


def disarm_jobs(conn: Connection, job_ids: Sequence[str]) -> list[str]:
    """Inside the caller's transaction (the jobs already locked): every
    armed execution of ``job_ids``, whoever armed it, back to ``scheduled``
    with its delivery taken back; their ids. Its server's start then finds
    them no longer armed and sends nothing."""
    found: list[str] = []
    caps = capabilities(conn)
    for chunk in chunks(sorted(set(job_ids)), _chunk(caps)):
        found += conn.execute(
            executions.update()
            .where(one_of(caps, executions.c.job_id, chunk), status_in(executions.c.status, ARMED))
            .values(**_DISARMED)
            .returning(executions.c.id)
        ).scalars().all()
    return found


def disarm_ids(conn: Connection, ids: Sequence[str], *, tenant: str | None = None) -> list[str]:
    """As :func:`disarm_jobs`, for executions named by id (of ``tenant`` only, if given)."""
    found: list[str] = []
    caps = capabilities(conn)
    for chunk in chunks(sorted(set(ids)), _chunk(caps)):
        query = executions.update().where(one_of(caps, executions.c.id, chunk), status_by_key(executions.c.status, ARMED))
        if tenant is not None:
            query = query.where(executions.c.tenant == tenant)
        found += conn.execute(query.values(**_DISARMED).returning(executions.c.id)).scalars().all()
    return found


def _guard(table=executions):
    """True when an armed row must not start without the round's overlap
    decision: its job has another execution running or waiting for a retry
    (``executions_busy``'s predicate), not started ahead of it
    (``executions_not_started_job``'s; a pause's hold is in no line), or
    armed ahead of it (``executions_armed_job``'s)."""
    other = executions.alias("other")
    ahead = sa.or_(
        other.c.nominal_at < table.c.nominal_at,
        sa.and_(other.c.nominal_at == table.c.nominal_at, other.c.id < table.c.id),
    )
    same_job = [other.c.job_id == table.c.job_id, other.c.id != table.c.id]
    busy = sa.or_(
        status_in(other.c.status, "running"),
        sa.and_(status_in(other.c.status, "scheduled"), other.c.attempt > sa.literal_column("1")),
    ).self_group()
    not_held = sa.or_(other.c.wait_key.is_(None), other.c.wait_key != PAUSED_WAIT).self_group()
    return sa.or_(
        sa.select(other.c.id).where(*same_job, busy).exists(),
        sa.select(other.c.id).where(*same_job, status_in(other.c.status, "scheduled", "waiting"), ahead, not_held)
        .exists(),
        sa.select(other.c.id).where(*same_job, status_in(other.c.status, ARMED), ahead).exists(),
    )


def _tenant_changed(table=executions):
    """The row's tenant was paused or given a concurrency cap since it was armed."""
    return (
        sa.select(tenants.c.name)
        .where(tenants.c.name == table.c.tenant, sa.or_(tenants.c.state == "paused", tenants.c.max_concurrency != 0))
        .exists()
    )


class ArmStore(SqlStore):
    """The armed state of one server's executions (see the module docstring)."""

    def __init__(
        self,
        engine,
        clock,
        *,
        definitions: DefinitionCache | None = None,
        unique_instant: Callable[[int], int] | None = None,
        fair: FairShare | None = None,
        walk: TenantWalk | None = None,
    ) -> None:
        super().__init__(engine, clock)
        self.walk = walk if walk is not None else TenantWalk()
        """How a pass finds the tenants with work when its workers may serve many (:mod:`.tenant_walk`)."""
        self.fair = fair if fair is not None else FairShare()
        """The fair-share passes arming shares its passes by: the hand-out store's (one rule, one state)."""
        self.definitions = definitions if definitions is not None else DefinitionCache()
        self._unique_instant = unique_instant or (lambda at_us: at_us)
        """The hand-out store's: a start's instant differs from every round's
        of this server, which tells its own rows from others by (owner, instant)."""
        self.in_doubt = InDoubt(lambda fn: self._tx(fn, row_locked=True), clock)
        """Its arms and starts whose COMMIT went unanswered, undone (in a
        row-locked transaction of their own) before the next transaction
        through it (:meth:`.doubt.InDoubt.run`)."""

    async def arm(
        self, owner: str, now: datetime, until: datetime, capability: Capability, limit: int,
        *, max_bytes: int | None = None, row_bytes: int = 0,
    ) -> list[Armed]:
        """Arm for ``owner`` up to ``limit`` executions that ``capability``
        may run, ``scheduled`` with ``ready_at`` in (``now``, ``until``],
        of tenants neither paused nor capped, that
        :func:`~tickwheel_server.policy.arming.may_arm` accepts; rows another
        transaction holds are passed over (SKIP LOCKED where the engine has
        it). ``limit`` is shared among the tenants with such executions by
        the rounds' weighted fair share (:func:`.arming_pick.pick_fairly`),
        each tenant's oldest ready first. With ``max_bytes``, candidates are
        accepted in the order the fair share interleaves the tenants while
        the sum over them of ``row_bytes`` plus their :attr:`Armed.size`
        stays within it (the arming server's memory bound); a tenant whose
        next candidate does not fit has no more accepted, the others go on.
        Three statements, a few more at most: the tenants (two for a long
        tenant list's walk that wraps round), the candidates with their
        jobs' definitions (one more read for the shares left unused; one of
        the calendar walks when a job names a calendar: :mod:`.calendarhold`),
        and one UPDATE of those accepted, conditional on their status. Returns them armed, each with its definition parsed."""
        now_us, until_us = to_us(now), to_us(until)
        if limit <= 0 or until_us <= now_us or not capability.tenants or not (capability.handlers or capability.http):
            return []
        outcome: list[tuple[Shares, list[str]]] = []
        tried: list[str] = []

        def fn(conn: Connection) -> list[Armed]:
            outcome.clear()
            tried.clear()
            shares = self.fair.begin()
            definitions: dict[str, object] = {}
            unwalked = Unwalked(conn, self.caps)

            def armable(row) -> bool:
                definition = None if row.spec is None else self.definitions.get(row.job_id, row.version, row.spec)
                # Holding a quota unit (a round starts it and gives it back), or a calendar change not yet walked it.
                if row.manual_slot is not None or unwalked.holds(row, definition):
                    return False
                readable = definition is not None and definition.problem is None
                one_off = readable and definition.schedule is not None and definition.schedule.kind in _ONE_OFF
                if may_arm(definition.rules if readable else None, one_off=bool(one_off), origin=row.origin,
                           allow_overlap=bool(row.allow_overlap), tenant_cap=row.max_concurrency,
                           wait_key=row.wait_key):
                    definitions[row.id] = definition
                    return True
                return False

            rows, weights = pick_fairly(conn, self.caps, capability, now_us, until_us, limit, shares,
                                        walk=self.walk, accept=armable)
            outcome.append((shares, sorted(weights)))
            by_tenant: dict[str, deque] = {}
            for row in rows:
                by_tenant.setdefault(row.tenant, deque()).append(row)
            chosen: dict[str, tuple] = {}
            budget = max_bytes
            order = Shares().order({name: (weights[name], len(queued)) for name, queued in by_tenant.items()})
            for name in order:
                queued = by_tenant[name]
                if not queued:
                    continue  # refused for bytes before: its rest was given back
                row = queued.popleft()
                size = len(row.payload) + (0 if row.spec is None else len(row.spec))
                if budget is not None and budget < row_bytes + size:
                    # Its oldest first: what is past its bound waits for the rounds or the next pass.
                    shares.refund(name, weights[name], 1 + len(queued))
                    queued.clear()
                    continue
                chosen[row.id] = (row, definitions[row.id], size)
                if budget is not None:
                    budget -= row_bytes + size
            if not chosen:
                return []
            tried.extend(sorted(chosen))
            armed: list[Armed] = []
            if not self.caps.is_sqlite:
                batches = [tuples(execute_arrays(conn, _ARM, dict(ids=sorted(chosen), owner=owner)))]
            else:
                batches = [conn.execute(
                    executions.update()
                    .where(executions.c.id.in_(chunk), status_in(executions.c.status, "scheduled"))
                    .values(status=ARMED, owner=owner, delivery=executions.c.delivery + 1)
                    .returning(executions.c.id, executions.c.delivery)
                ).all() for chunk in chunks(sorted(chosen), _CHUNK)]  # fmt: skip
            for moved in batches:
                for ident, delivery in moved:
                    row, definition, size = chosen[ident]
                    armed.append(Armed(
                        HandedOut(
                            row.id, row.job_id, row.tenant, row.partition, row.origin, row.nominal_at, row.due_at,
                            row.ready_at, row.attempt, delivery, bytes(row.payload), row.missed_count, definition, 0,
                            row.trace_context or "",
                        ),
                        runs_beside(definition.rules, bool(row.allow_overlap)),
                        size,
                        weights[row.tenant],
                    ))
            armed.sort(key=lambda a: (a.handed.ready_at_us, a.handed.id))
            return armed

        armed = await self.in_doubt.run(fn, lambda: Doubt(ARM, owner, [(i, 0) for i in tried]))
        if outcome:
            self.fair.commit(*outcome[0])
        return armed

    async def start(
        self, owner: str, items: Sequence[tuple[str, int, bool, str | None] | tuple[str, int, bool]], now: datetime,
        fence: Callable[[], str | None] | None = None,
    ) -> StartRound:
        """Start ``items`` (execution id, delivery, runs beside, and the
        worker id it is dealt to, None or left out if none) armed by ``owner``: each still ``armed`` by
        ``owner`` at that delivery and ready by the hand-out instant
        (``now``, the instant its server will send them at, or this
        server's clock read in the transaction if later; unique among its
        rounds) becomes ``running`` with that instant and that worker
        (``worker_id``: a hello of that worker elsewhere not listing it
        tells the reaper no worker holds it, :mod:`.unheld`), unless its tenant was paused or capped since or (not
        beside) its job has anything else running, waiting for a retry, or
        not started or armed ahead of it: those are disarmed. Items not yet
        ready stay armed; items no longer armed by ``owner`` at that
        delivery (disarmed, reaped, canceled, another's) are left alone and
        not returned, so they are never sent.

        ``fence`` is asked just before the commit, as for a hand-out round;
        a reason rolls everything back and comes back as ``fenced``."""
        if not items:
            return StartRound([], [], 0)
        wanted = {item[0]: (item[1], item[2]) for item in items}
        workers = {item[0]: item[3] if len(item) > 3 else None for item in items}
        tried: list[int] = []

        def fn(conn: Connection) -> StartRound:
            at_us = self._unique_instant(max(to_us(now), to_us(self.clock.now())))
            tried[:] = [at_us]
            mine = [status_by_key(executions.c.status, ARMED), executions.c.owner == owner,
                    executions.c.ready_at <= at_us]
            started: list[str] = []
            if not self.caps.is_sqlite:
                ordered = sorted(wanted.items())
                started += [row[0] for row in tuples(execute_arrays(conn, _START, dict(
                    ids=[ident for ident, _ in ordered], deliveries=[d for _, (d, _b) in ordered],
                    beside=[b for _, (_d, b) in ordered], workers=[workers[ident] for ident, _ in ordered],
                    owner=owner, at=at_us,
                )))]  # fmt: skip
            groups = sorted({(b, workers[ident]) for ident, (_d, b) in wanted.items()}, key=lambda g: (g[0], g[1] or ""))
            for beside, worker in (() if not self.caps.is_sqlite else groups):
                pairs = sorted((ident, d) for ident, (d, b) in wanted.items() if b == beside and workers[ident] == worker)
                for chunk in chunks(pairs, _CHUNK):
                    query = executions.update().where(
                        sa.tuple_(executions.c.id, executions.c.delivery).in_(chunk), *mine, ~_tenant_changed()
                    )
                    if not beside:
                        query = query.where(~_guard())
                    started += conn.execute(query.values(
                        status="running", handed_out_at=at_us, worker_id=worker, unheld_delivery=None,
                    ).returning(executions.c.id)).scalars().all()
            done = set(started)
            rest = sorted((ident, d) for ident, (d, _b) in wanted.items() if ident not in done)
            disarmed: list[str] = []
            for chunk in chunks(rest, _chunk(self.caps)):
                disarmed += conn.execute(
                    executions.update()
                    .where(pairs_in(self.caps, (executions.c.id, executions.c.delivery), chunk, _ID_DELIVERY), *mine)
                    .values(**_DISARMED)
                    .returning(executions.c.id)
                ).scalars().all()
            refused = fence() if fence is not None else None
            if refused is not None:
                raise _Fenced(refused)
            return StartRound(sorted(started), sorted(disarmed), at_us)

        try:
            pairs = sorted((ident, delivery) for ident, (delivery, _beside) in wanted.items())
            return await self.in_doubt.run(fn, lambda: Doubt(START, owner, pairs, tried[0]) if tried else None)
        except _Fenced as fenced:
            return StartRound([], [], 0, fenced.reason)

    async def disarm(self, owner: str, items: Sequence[tuple[str, int]]) -> list[str]:
        """Give back ``items`` (execution id, delivery) still armed by
        ``owner`` at that delivery (never sent: their server found no
        worker in time, or is stopping): ``scheduled`` again, the delivery
        taken back, so any server's next round may hand them out. Returns
        the ids given back; rows another session armed are not touched."""
        if not items:
            return []
        pairs = sorted(set(items))

        def fn(conn: Connection) -> list[str]:
            found: list[str] = []
            for chunk in chunks(pairs, _chunk(self.caps)):
                found += conn.execute(
                    executions.update()
                    .where(
                        pairs_in(self.caps, (executions.c.id, executions.c.delivery), chunk, _ID_DELIVERY),
                        status_by_key(executions.c.status, ARMED),
                        executions.c.owner == owner,
                    )
                    .values(**_DISARMED)
                    .returning(executions.c.id)
                ).scalars().all()
            return sorted(found)

        return await self.in_doubt.run(fn, lambda: None)

    async def armed_owners(self, limit: int = 1000) -> list[str]:
        """The sessions that armed executions are stamped with, in order: a
        probe a session of ``executions_armed`` (:func:`.session_walk.stamped_sessions`)."""
        return await self._tx(lambda conn: stamped_sessions(conn, ARMED, limit), idempotent=True)

    async def disarm_owner(self, owner: str, limit: int = 1000) -> list[Retry]:
        """Up to ``limit`` executions armed by ``owner``, a session that no
        longer exists, back to ``scheduled`` with their delivery taken back
        (rows another transaction holds are passed over). Returns them, so
        the caller can put their ready instants into its wheel."""

        def fn(conn: Connection) -> list[Retry]:
            picked = (
                sa.select(executions.c.id)
                .where(status_in(executions.c.status, ARMED), executions.c.owner == owner)
                .order_by(executions.c.owner, executions.c.id)
                .limit(limit)
            )
            if self.caps.row_locks:
                picked = picked.with_for_update(skip_locked=self.caps.skip_locked)
            ids = list(conn.execute(picked).scalars())
            if not ids:
                return []
            rows = conn.execute(
                executions.update()
                .where(one_of(self.caps, executions.c.id, ids), status_by_key(executions.c.status, ARMED),
                       executions.c.owner == owner)
                .values(**_DISARMED)
                .returning(executions.c.id, executions.c.partition, executions.c.ready_at)
            ).all()
            return sorted((Retry(ident, partition, ready_at) for ident, partition, ready_at in rows),
                          key=lambda r: r.execution_id)

        return await self._tx(fn, row_locked=True)
