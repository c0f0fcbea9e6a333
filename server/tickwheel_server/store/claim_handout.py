"""The claim's direct hand-out: of what a claim creates, the executions due
by its instant that need no decision at it go out already handed out to
this server's workers, in the claim's own transaction (see
docs/architecture.md, Dispatch, "Claimed straight to the hand-out").

The gateway lends the claim some of its workers' credit
(:class:`HandOutOffer`). Within the claim's transaction, the executions it
plans that are due by the claim's ``now`` (never early: the server's clock)
and that :func:`~tickwheel_server.policy.arming.may_arm` accepts (no
concurrency key, a tenant neither paused nor capped, overlap ``allow`` or a
one-off's own occurrence) are candidates; one whose job has another
execution not ended (scheduled, waiting, running or armed) keeps the round's
path, so the round's overlap decision still rules it. The credit of each
group of workers is split among the candidates' tenants by the weighted
fair share of the hand-out (:class:`~.fairshare.FairShare`: the same passes
the rounds charge, so a tenant served here is served less by the next
rounds). The chosen rows are inserted ``running``, stamped with the
server's session, delivery 1 and the hand-out instant; every other row is
inserted ``scheduled`` as before. A row whose id already existed is not
handed out (``ON CONFLICT DO NOTHING … RETURNING``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..jobspec import JobDefinition
from ..policy.arming import may_arm, runs_beside
from ..policy.fairness import Demand, Shares
from ..schedule.model import ScheduleKind
from . import pipeline
from .base import array_literal, driver_sql, execute_arrays, tuples
from .doubt import InDoubt, handed_out
from .engine import capabilities
from .errors import AmbiguousCommitError
from .executions import Capability, HandedOut
from .fairshare import FairShare
from .tables import executions, tenants
from .timeline import ARMED_GROUP, NOT_STARTED, RUNNING, in_group

T = TypeVar("T")

_ONE_OFF = (ScheduleKind.ONCE, ScheduleKind.LOCAL)

# The jobs (of the candidates that do not run beside others) with an
# execution not ended: one branch per status group, each with its partial
# index's predicate as the index writes it (``executions_not_started_job``,
# ``executions_busy``, ``executions_armed_job``). No index holds the three
# statuses together (migration 0014 replaced the one that did): a branch
# naming them read the whole table, ended history included, at every claim.
_BUSY_JOBS = driver_sql(
    "SELECT e.job_id FROM executions AS e WHERE e.job_id = ANY (CAST(:ids AS TEXT[])) "
    "AND e.status IN ('scheduled', 'waiting') "
    "UNION SELECT e.job_id FROM executions AS e WHERE e.job_id = ANY (CAST(:ids AS TEXT[])) "
    "AND (e.status = 'running' OR (e.status = 'scheduled' AND e.attempt > 1)) "
    "UNION SELECT e.job_id FROM executions AS e WHERE e.job_id = ANY (CAST(:ids AS TEXT[])) AND e.status = 'armed'"
)
# The tenants' settings share-locked where the engine has row locks: the
# claim runs at READ COMMITTED on PostgreSQL (:mod:`.dispatch`), and a pause
# or a cap set on a tenant (an UPDATE of its row) then waits for the claim
# that read it unpaused and uncapped, or the claim reads the new row.
_TENANTS = {
    locked: driver_sql(
        "SELECT t.name, t.weight, t.max_concurrency, t.state FROM tenants AS t "
        "WHERE t.name = ANY (CAST(:names AS TEXT[])) ORDER BY t.name" + (" FOR SHARE" if locked else "")
    )
    for locked in (False, True)
}


@dataclass(frozen=True)
class HandOutOffer:
    """What the gateway lends one claim: hand out at most ``credit`` of each
    group's executions under ``owner``, while ``fence`` says nothing against
    it (:meth:`~tickwheel_server.gateway.fence.Fence.refusal`, asked in the
    claim's thread before the rows are written and just before the commit)."""

    owner: str
    groups: tuple[tuple[Capability, int], ...]
    """Each group of workers with the credit lent for it."""
    fair: FairShare
    """The hand-out's fair-share passes (charged for what is handed out here)."""
    fence: Callable[[], str | None]
    unique_instant: Callable[[int], int]
    """The hand-out store's: the instant stamped differs from every round's of this server."""
    in_doubt: InDoubt | None = None
    """The hand-out store's: what a claim whose COMMIT went unanswered may
    have inserted handed out is kept there, undone by its next transaction
    (:func:`kept_in_doubt`)."""


class Candidate(NamedTuple):
    """A new execution the claim may hand out directly."""

    index: int
    """Its place in the claim's writes."""
    id: str
    job_id: str
    tenant: str
    handler: str | None
    due_us: int
    beside: bool
    """It may run beside others of its job: no overlap probe."""


def needs_no_decision(definition: JobDefinition) -> tuple[bool, bool]:
    """(whether a new scheduled occurrence of this job may be handed out
    without the round's decisions, whether it runs beside others), as
    :func:`~tickwheel_server.policy.arming.may_arm` rules (the tenant's cap
    is checked apart, in :func:`choose`)."""
    one_off = definition.schedule is not None and definition.schedule.kind in _ONE_OFF
    if not may_arm(definition.rules, one_off=one_off, origin="scheduled", allow_overlap=False, tenant_cap=0,
                   wait_key=None):
        return False, False
    return True, runs_beside(definition.rules, False)


def fits(capability: Capability, candidate: Candidate) -> bool:
    """Whether a worker of ``capability`` may run ``candidate``."""
    if candidate.tenant not in capability.tenants:
        return False
    return candidate.handler in capability.handlers if candidate.handler is not None else capability.http


def share_out(
    offer: HandOutOffer, candidates: Sequence[Candidate], weights: dict[str, int], shares: Shares
) -> list[list[Candidate]]:
    """Per group of ``offer``, the candidates it is handed (pure): each
    group's credit split among the tenants of the candidates it may run by
    weighted fair share (``shares``, advanced), each tenant's oldest due
    first; a candidate goes to one group at most."""
    left = sorted(candidates, key=_oldest_first)
    chosen: list[list[Candidate]] = []
    for number, (capability, credit) in enumerate(offer.groups, 1):
        by_tenant: dict[str, list[Candidate]] = defaultdict(list)
        for candidate in left:
            if fits(capability, candidate):
                by_tenant[candidate.tenant].append(candidate)
        if credit <= 0 or not by_tenant:
            chosen.append([])
            continue
        grants = shares.allocate(
            credit, [Demand(tenant, max(1, weights[tenant]), len(rows)) for tenant, rows in by_tenant.items()]
        )
        if len(by_tenant) == 1:  # one tenant's rows: already oldest first, as ``left`` is
            (tenant, rows), = by_tenant.items()
            picked = rows[: grants[tenant]]
        else:
            picked = sorted((row for tenant, rows in by_tenant.items() for row in rows[: grants[tenant]]),
                            key=_oldest_first)
        if number < len(offer.groups):  # what the next groups may still be handed
            taken = {row.index for row in picked}
            left = [candidate for candidate in left if candidate.index not in taken]
        chosen.append(picked)
    return chosen


def _oldest_first(candidate: Candidate) -> tuple[int, str]:
    return candidate.due_us, candidate.id


def choose(
    conn: Connection, arrays: bool, offer: HandOutOffer, candidates: Sequence[Candidate], shares: Shares
) -> list[list[Candidate]]:
    """Per group of ``offer``, the candidates handed out: those of tenants
    neither paused nor capped, whose job has no other execution not ended
    (unless they run beside others), shared out by :func:`share_out`. Two
    reads at most: the tenants' settings (share-locked) and the jobs'
    executions. On PostgreSQL and CockroachDB both go in one round trip
    (:func:`.pipeline.send`; the tenants first, as before), so the probe
    asks for the jobs of every candidate's tenant, paused or capped too
    (SQLite asks the same)."""
    names = sorted({c.tenant for c in candidates})
    guarded = sorted({c.job_id for c in candidates if not c.beside})
    if arrays:
        reads = [(_TENANTS[capabilities(conn).row_locks], {"names": array_literal(names)})]
        if guarded:
            reads.append((_BUSY_JOBS, {"ids": array_literal(guarded)}))
        rows, *probed = pipeline.send(conn, reads)
        busy = {job_id for (job_id,) in probed[0]} if probed else set()
    else:
        rows = conn.execute(
            sa.select(tenants.c.name, tenants.c.weight, tenants.c.max_concurrency, tenants.c.state)
            .where(tenants.c.name.in_(names))
        ).all()
        busy = busy_jobs(conn, arrays, guarded) if guarded else set()
    weights = {name: weight for name, weight, cap, state in rows if cap == 0 and state != "paused"}
    kept = [c for c in candidates if c.tenant in weights and (c.beside or c.job_id not in busy)]
    return share_out(offer, kept, weights, shares)


def busy_jobs(conn: Connection, arrays: bool, job_ids: list[str]) -> set[str]:
    """Those of ``job_ids`` with an execution not ended (scheduled, waiting,
    running or armed): one probe per status group's index by job."""
    if arrays:
        return {job_id for (job_id,) in tuples(execute_arrays(conn, _BUSY_JOBS, {"ids": job_ids}))}
    return set(conn.execute(sa.union(*(
        sa.select(executions.c.job_id).where(executions.c.job_id.in_(job_ids), *in_group(group, by_job=True))
        for group in (NOT_STARTED, RUNNING, ARMED_GROUP)
    ))).scalars())  # fmt: skip


class Fenced(Exception):
    """The offer's fence refused just before the commit: the claim rolls back."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DirectHandOut:
    """One claim's direct hand-out under ``offer``: the candidates as the
    claim plans its executions (:meth:`consider`), then, in the claim's
    transaction, the choice (:meth:`take`), the insert (its instant
    :meth:`stamp`, the rows inserted :meth:`keep`:
    :func:`.claim_writes.write`) and the fence before the commit
    (:meth:`before_commit`); the fair-share
    passes are kept once the claim committed (:meth:`committed`)."""

    def __init__(self, offer: HandOutOffer, now_us: int) -> None:
        self.offer = offer
        self.now_us = now_us
        self._shares: tuple[Shares, list[str]] | None = None
        self.begin()

    def begin(self) -> None:
        """Start (again: a retried transaction starts over)."""
        self.candidates: list[Candidate] = []
        self.chosen: list[list[Candidate]] = []
        self.handed: list[list[HandedOut]] = []
        """What the claim inserted handed out (or may have, while its round trip is unanswered), per group."""
        self._at_us = 0
        self._whole = None
        """The writes (what :meth:`take` returned) of which :attr:`handed` holds every row."""
        self._eligible: dict[tuple[str, int], tuple[bool, bool]] = {}
        self._specs: dict[str, JobDefinition] = {}
        self._shares = None

    def consider(self, index: int, ident: str, row, spec: JobDefinition, due_us: int) -> None:
        """A new execution of the claim (``index`` in its writes) of due row ``row``."""
        if due_us > self.now_us:  # never early: due by the server's clock
            return
        key = (row.id, row.version)
        eligible = self._eligible.get(key)
        if eligible is None:
            eligible = self._eligible[key] = needs_no_decision(spec)
            self._specs[row.id] = spec
        if eligible[0]:
            self.candidates.append(Candidate(index, ident, row.id, row.tenant, spec.handler, due_us, eligible[1]))

    def take(self, conn: Connection, arrays: bool, writes):
        """Choose (unless the fence refuses) and move the chosen rows out of
        the claim's ``writes`` into writes of their own; None: none chosen."""
        if not self.candidates or self.offer.fence() is not None:
            return None
        shares = self.offer.fair.begin()
        self.chosen = choose(conn, arrays, self.offer, self.candidates, shares)
        indices = sorted(c.index for group in self.chosen for c in group)
        if not indices:
            return None
        self._shares = (shares, sorted({c.tenant for c in self.candidates}))
        return writes.take(indices)

    def stamp(self, direct, at_us: int) -> int:
        """The unique instant after ``at_us`` that ``direct`` (what
        :meth:`take` returned) is handed out at; until :meth:`keep` says
        which rows were inserted, :attr:`handed` holds every one of them."""
        self._at_us = self.offer.unique_instant(max(self.now_us, at_us))
        self.keep(direct, set(direct.ids))
        return self._at_us

    def keep(self, direct, inserted: set[str]) -> None:
        """:attr:`handed`: per group, the rows of ``direct`` whose ids were ``inserted``."""
        whole = len(inserted) == len(direct.ids)  # ``inserted`` is of ``direct.ids``: every one
        if whole and self._whole is direct:
            return  # every row inserted (the common case), as :meth:`stamp` kept them: made once
        self._whole = direct if whole else None
        place = {ident: i for i, ident in enumerate(direct.ids)}
        traced = direct.trace_contexts
        groups = []
        for group in self.chosen:
            handed = []
            for c in group:
                if c.id in inserted:
                    i = place[c.id]
                    handed.append(HandedOut(
                        c.id, c.job_id, c.tenant, direct.partitions[i], "scheduled", direct.nominal_ats[i],
                        direct.due_ats[i], direct.due_ats[i], 1, 1, direct.payloads[i], direct.missed_counts[i],
                        self._specs[c.job_id], self._at_us, traced[i] if traced else "",
                    ))  # fmt: skip
            groups.append(handed)
        self.handed = groups

    def insert_per_row(self, conn: Connection, direct, at_us: int) -> set[str]:
        """SQLite: insert ``direct`` handed out (:meth:`stamp`); the ids inserted."""
        at_us = self.stamp(direct, at_us)
        inserted = direct.insert_handed_out_per_row(conn, self.now_us, self.offer.owner, at_us)
        self.keep(direct, inserted)
        return inserted

    def before_commit(self) -> None:
        """Raises :class:`Fenced` if the fence refuses now."""
        refused = self.offer.fence()
        if refused is not None:
            raise Fenced(refused)

    def committed(self) -> None:
        """The claim committed: keep the passes it charged."""
        if self._shares is not None:
            self.offer.fair.commit(*self._shares)


async def kept_in_doubt(direct: DirectHandOut | None, claiming: Awaitable[T]) -> T:
    """``claiming`` (the claim's transaction) awaited. If its COMMIT went
    unanswered, what ``direct`` inserted handed out (delivery 1, the claim's
    unique instant, its owner) may be ``running`` with no server sending it:
    it is kept in doubt by the offer's hand-out store, whose next
    transaction puts it back to ``scheduled`` if so (:mod:`.doubt`)."""
    try:
        return await claiming
    except AmbiguousCommitError:
        if direct is not None and direct.offer.in_doubt is not None:
            direct.offer.in_doubt.add(handed_out(direct.offer.owner, [h for group in direct.handed for h in group]))
        raise
