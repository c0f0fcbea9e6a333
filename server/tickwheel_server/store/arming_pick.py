"""Which ready-soon executions an arming pass reads, shared among tenants
(docs/architecture.md, "Hand-outs decided ahead", "Fair share when
armed"): the candidates of :meth:`.arming.ArmStore.arm`.

An arming pass splits its budget among the tenants with executions ready
within its window by the hand-out's weighted fair share
(:mod:`tickwheel_server.policy.fairness`, the same passes as the rounds),
then reads per tenant its oldest up to its share, as a round's pick does, so
a tenant with a burst of runs on one instant cannot fill a pass while another
tenant's run at that instant waits. Two statements: the tenants (one index
probe each, or for a long tenant list :mod:`.tenant_walk`'s bounded loose
index scan), the candidates (a ``UNION ALL`` of per-tenant scans, each with
its own LIMIT, at most :data:`.handout_starts.UNION_BRANCHES` a statement);
a share a tenant could not use (too few candidates, or candidates the arm
may not take) goes to those that may have more in one more read.
"""

from __future__ import annotations

from collections import Counter, namedtuple
from collections.abc import Callable, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..policy.fairness import Demand, Shares
from .base import one_of
from .engine import Capabilities, capabilities
from .executions import Capability
from .handout_starts import UNION_BRANCHES
from .isolation import status_in
from .tables import executions, jobs, tenants
from .tenant_walk import TenantWalk

_COLUMNS = (
    executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition,
    executions.c.origin, executions.c.nominal_at, executions.c.due_at, executions.c.ready_at,
    executions.c.attempt, executions.c.delivery, executions.c.payload, executions.c.missed_count,
    executions.c.allow_overlap, executions.c.wait_key, executions.c.trace_context, executions.c.manual_slot,
    jobs.c.spec, jobs.c.version, tenants.c.max_concurrency,
)
Candidate = namedtuple("Candidate", [column.name for column in _COLUMNS])
"""One candidate row as a plain tuple: an arming pass reads each row's
fields a few dozen times, and a named tuple's field is read for a fraction
of what a result row's attribute costs."""


def _window(now_us: int, until_us: int) -> list:
    return [
        status_in(executions.c.status, "scheduled"),
        executions.c.ready_at > now_us,
        executions.c.ready_at <= until_us,
    ]


def ready_soon_tenants(
    conn: Connection, capability: Capability, now_us: int, until_us: int, walk: TenantWalk | None = None,
) -> dict[str, int]:
    """The tenants of ``capability``, neither paused nor capped, with an
    execution ``scheduled`` and ready in (``now_us``, ``until_us``]: name →
    weight (any handler: the pick decides). One probe of
    ``executions_tenant_ready`` per tenant named, or, for more than
    ``walk`` takes, ``walk``'s bounded part of the tenants with scheduled
    work (:mod:`.tenant_walk`)."""
    if walk is not None and walk.applies(len(capability.tenants)):
        allowed = set(capability.tenants)
        return {
            t.name: max(1, t.weight) for t in walk.visit(conn, capability, until_us, since=now_us)
            if t.name in allowed and t.weight is not None and t.max_concurrency == 0
        }
    soon = sa.select(executions.c.id).where(executions.c.tenant == tenants.c.name, *_window(now_us, until_us))
    rows = conn.execute(
        sa.select(tenants.c.name, tenants.c.weight).where(
            one_of(capabilities(conn), tenants.c.name, sorted(capability.tenants)),
            tenants.c.state != "paused",
            tenants.c.max_concurrency == 0,
            soon.exists(),
        )
    ).all()
    return {name: max(1, weight) for name, weight in rows}


def _pick(
    conn: Connection, caps: Capabilities, capability: Capability, now_us: int, until_us: int,
    quotas: Mapping[str, int], after: Mapping[str, tuple[int, str]],
) -> list[Candidate]:
    """Per tenant, its ``quotas[tenant]`` oldest candidates (after
    ``after[tenant]``, its last (ready_at, id) read, if any), with their
    jobs' definitions and their tenants' settings; rows another transaction
    holds are passed over (SKIP LOCKED where the engine has it)."""
    fits = []
    if capability.handlers:
        fits.append(one_of(caps, executions.c.handler, sorted(capability.handlers)))
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
        rows += map(Candidate._make, conn.execute(query))  # selected in _COLUMNS' order
    return rows


def pick_fairly(
    conn: Connection, caps: Capabilities, capability: Capability, now_us: int, until_us: int, limit: int,
    shares: Shares, *, walk: TenantWalk | None = None, accept: Callable[[object], bool] | None = None,
) -> tuple[list, dict[str, int]]:
    """Up to ``limit`` candidates of the tenants with work in the window
    (found by ``walk`` for a long tenant list), shared among them by
    ``shares`` (advanced by what was read: refund what is not armed), each
    kept only if ``accept`` takes it: the rows, each tenant's oldest first,
    and the tenants' weights. A slot a tenant did not use (fewer candidates
    than its share, or some not accepted) goes, in one more read, to the
    tenants that may have more: after their last row read, so rows not
    accepted at the head of a tenant's window do not use up its share."""
    weights = ready_soon_tenants(conn, capability, now_us, until_us, walk)
    if not weights:
        return [], weights
    grants = shares.allocate(limit, [Demand(name, weight) for name, weight in sorted(weights.items())])
    rows, unused, last = _read(conn, caps, capability, now_us, until_us, grants, {}, accept)
    for name, slots in unused.items():
        shares.refund(name, weights[name], slots)
    spare = sum(unused.values())
    # A tenant that read fewer rows than its share has no more in the window
    # (or another server holds them); the others may.
    more_to_read = [name for name in grants if grants[name] and name in last and last[name][2] == grants[name]]
    if spare and more_to_read:
        more = shares.allocate(spare, [Demand(name, weights[name]) for name in more_to_read])
        after = {name: last[name][:2] for name in more_to_read}
        extra, extra_unused, _last = _read(conn, caps, capability, now_us, until_us, more, after, accept)
        rows += extra
        for name, slots in extra_unused.items():
            shares.refund(name, weights[name], slots)
    rows.sort(key=lambda row: (row.ready_at, row.id))
    return rows, weights


def _read(
    conn: Connection, caps: Capabilities, capability: Capability, now_us: int, until_us: int,
    quotas: Mapping[str, int], after: Mapping[str, tuple[int, str]], accept: Callable[[object], bool] | None,
) -> tuple[list, dict[str, int], dict[str, tuple[int, str, int]]]:
    """One :func:`_pick`: the rows accepted, the slots of ``quotas`` each
    tenant did not use, and per tenant its last row read (ready_at, id) and
    how many it read."""
    read = _pick(conn, caps, capability, now_us, until_us, quotas, after)
    last: dict[str, tuple[int, str, int]] = {}
    for row in read:
        seen = last.get(row.tenant)
        key = (row.ready_at, row.id)
        last[row.tenant] = (*max(seen[:2], key), seen[2] + 1) if seen else (*key, 1)
    kept = read if accept is None else [row for row in read if accept(row)]
    got = Counter(row.tenant for row in kept)
    unused = {name: n - got[name] for name, n in quotas.items() if n > got[name]}
    return kept, unused, last
