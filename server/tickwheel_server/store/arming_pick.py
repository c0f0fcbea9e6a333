"""Which ready-soon executions an arming pass reads, shared among tenants
(docs/architecture.md, "Hand-outs decided ahead", "Fair share when
armed"): the candidates of :meth:`.arming.ArmStore.arm`.

An arming pass splits its budget among the tenants with executions ready
within its window by the hand-out's weighted fair share
(:mod:`tickwheel_server.policy.fairness`, the same passes as the rounds),
then reads per tenant its oldest up to its share, as a round's pick does, so
a tenant with a burst of runs on one instant cannot fill a pass while another
tenant's run at that instant waits. Two statements: the tenants (one index
probe each), the candidates (a ``UNION ALL`` of per-tenant scans, each with
its own LIMIT, at most :data:`.handout_starts.UNION_BRANCHES` a statement);
a share a tenant could not fill goes to the others in one more read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..policy.fairness import Demand, Shares
from .engine import Capabilities
from .executions import Capability
from .handout_starts import UNION_BRANCHES
from .isolation import status_in
from .tables import executions, jobs, tenants

_COLUMNS = (
    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition,
    executions.c.origin, executions.c.nominal_at, executions.c.due_at, executions.c.ready_at,
    executions.c.attempt, executions.c.delivery, executions.c.payload, executions.c.missed_count,
    executions.c.allow_overlap, executions.c.wait_key, executions.c.trace_context,
    jobs.c.spec, jobs.c.version, tenants.c.max_concurrency,
)


def _window(now_us: int, until_us: int) -> list:
    return [
        status_in(executions.c.status, "scheduled"),
        executions.c.ready_at > now_us,
        executions.c.ready_at <= until_us,
    ]


def ready_soon_tenants(conn: Connection, capability: Capability, now_us: int, until_us: int) -> dict[str, int]:
    """The tenants of ``capability``, neither paused nor capped, with an
    execution ``scheduled`` and ready in (``now_us``, ``until_us``]: name →
    weight (one probe of ``executions_tenant_ready`` each; any handler: the
    pick decides)."""
    soon = sa.select(executions.c.id).where(executions.c.tenant == tenants.c.name, *_window(now_us, until_us))
    rows = conn.execute(
        sa.select(tenants.c.name, tenants.c.weight).where(
            tenants.c.name.in_(sorted(capability.tenants)),
            tenants.c.state != "paused",
            tenants.c.max_concurrency == 0,
            soon.exists(),
        )
    ).all()
    return {name: max(1, weight) for name, weight in rows}


def _pick(
    conn: Connection, caps: Capabilities, capability: Capability, now_us: int, until_us: int,
    quotas: Mapping[str, int], after: Mapping[str, tuple[int, str]],
) -> list:
    """Per tenant, its ``quotas[tenant]`` oldest candidates (after
    ``after[tenant]``, its last (ready_at, id) read, if any), with their
    jobs' definitions and their tenants' settings; rows another transaction
    holds are passed over (SKIP LOCKED where the engine has it)."""
    fits = []
    if capability.handlers:
        fits.append(executions.c.handler.in_(sorted(capability.handlers)))
    if capability.http:
        fits.append(executions.c.handler.is_(None))
    scans = []
    for name, n in sorted(quotas.items()):
        if n <= 0:
            continue
        scan = sa.select(executions.c.id).where(executions.c.tenant == name, *_window(now_us, until_us), sa.or_(*fits))
        if name in after:
            scan = scan.where(sa.tuple_(executions.c.ready_at, executions.c.id) > sa.tuple_(*after[name]))
        scans.append(scan.order_by(executions.c.ready_at, executions.c.id).limit(n))
    rows: list = []
    for start in range(0, len(scans), UNION_BRANCHES):
        chunk = scans[start:start + UNION_BRANCHES]
        picked = chunk[0] if len(chunk) == 1 else sa.union_all(*(sa.select(scan.subquery()) for scan in chunk))
        query = (
            sa.select(*_COLUMNS)
            .select_from(
                executions.join(tenants, tenants.c.name == executions.c.tenant)
                .outerjoin(jobs, jobs.c.id == executions.c.job_id)
            )
            .where(
                executions.c.id.in_(picked), status_in(executions.c.status, "scheduled"),
                tenants.c.state != "paused", tenants.c.max_concurrency == 0,
            )
        )
        if caps.row_locks:
            query = query.with_for_update(of=executions, skip_locked=caps.skip_locked)
        rows += conn.execute(query).all()
    return rows


def pick_fairly(
    conn: Connection, caps: Capabilities, capability: Capability, now_us: int, until_us: int, limit: int,
    shares: Shares,
) -> tuple[list, dict[str, int]]:
    """Up to ``limit`` candidates of the tenants with work in the window,
    shared among them by ``shares`` (advanced by what was read: refund
    what is not armed): the rows, each tenant's oldest first, and the
    tenants' weights."""
    weights = ready_soon_tenants(conn, capability, now_us, until_us)
    if not weights:
        return [], weights
    grants = shares.allocate(limit, [Demand(name, weight) for name, weight in sorted(weights.items())])
    rows = _pick(conn, caps, capability, now_us, until_us, grants, {})
    got = Counter(row.tenant for row in rows)
    short = {name: grants[name] - got[name] for name in grants if got[name] < grants[name]}
    for name, unused in short.items():
        shares.refund(name, weights[name], unused)
    full = [name for name in grants if grants[name] and name not in short]
    if short and full:
        # Tenants with fewer candidates than their share (or rows another
        # server holds) give it back; those that filled theirs share it.
        more = shares.allocate(sum(short.values()), [Demand(name, weights[name]) for name in full])
        last = {}
        for row in rows:
            last[row.tenant] = max(last.get(row.tenant, (row.ready_at, row.id)), (row.ready_at, row.id))
        extra = _pick(conn, caps, capability, now_us, until_us, more, last)
        rows += extra
        extra_got = Counter(row.tenant for row in extra)
        for name, granted in more.items():
            shares.refund(name, weights[name], granted - extra_got[name])
    rows.sort(key=lambda row: (row.ready_at, row.id))
    return rows, weights
