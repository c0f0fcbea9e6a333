"""Step 1 of a hand-out round: the tenants with ready work, and the room
each capped one has under its cap (see :mod:`.handout`).

Every function runs inside the round's transaction and commits nothing
itself.
"""

from __future__ import annotations

from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import driver_sql, execute_arrays, one_of
from .engine import Capabilities
from .executions import Capability
from .isolation import insert_for, status_in
from .session_walk import running_rows
from .tables import executions, tenant_gates, tenants
from .tenant_walk import TenantWalk

# The named tenants' settings and oldest ready instants (one descent of
# executions_tenant_ready each); one array parameter: one text, one plan.
_READY_TENANTS = driver_sql(
    "SELECT t.name, t.weight, t.max_concurrency, (SELECT e.ready_at FROM executions AS e WHERE e.tenant = t.name "
    "AND e.status = 'scheduled' ORDER BY e.ready_at LIMIT 1) AS oldest "
    "FROM tenants AS t WHERE t.name = ANY (CAST(:names AS TEXT[])) AND t.state <> 'paused'"
)


class Ready(NamedTuple):
    """A tenant with ready work: its weight, its cap (0: none) and its oldest ready instant."""

    name: str
    weight: int
    max_concurrency: int
    oldest: int | None


def ready_tenants(
    conn: Connection, caps: Capabilities, walk: TenantWalk, loose_scan_above: int, capability: Capability, now_us: int
) -> list:
    """The tenants of ``capability`` with an execution ready by ``now_us``
    (any handler: the scan decides), with their weight and cap, by name. A
    paused tenant has none: its executions wait for its resume. More than
    ``loose_scan_above`` tenants are found by ``walk`` (:mod:`.tenant_walk`)."""
    if len(capability.tenants) <= loose_scan_above and caps.is_postgres:
        rows = execute_arrays(conn, _READY_TENANTS, {"names": sorted(capability.tenants)}).all()
    elif len(capability.tenants) <= loose_scan_above:
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
        ).where(one_of(caps, tenants.c.name, sorted(capability.tenants)), tenants.c.state != "paused")
        rows = conn.execute(query).all()
    else:
        allowed = set(capability.tenants)
        rows = [Ready(t.name, t.weight, t.max_concurrency, t.first)
                for t in walk.visit(conn, capability, now_us) if t.name in allowed and t.weight is not None]
    return sorted((row for row in rows if row.oldest is not None and row.oldest <= now_us), key=lambda r: r.name)


def rooms_under_caps(conn: Connection, caps: Capabilities, capped: list) -> dict[str, int]:
    """How many more executions each capped tenant may run. Its gate row
    is written first: hand-outs for one tenant take turns, and each
    counts the running executions the previous one committed: one
    statement (one snapshot), each session's range of the capped tenants
    in ``executions_running`` (:func:`.session_walk.running_rows`)."""
    if not capped:
        return {}
    names = sorted(t.name for t in capped)
    gate = insert_for(conn, tenant_gates)
    conn.execute(
        gate.on_conflict_do_update(index_elements=["tenant"], set_=dict(rounds=tenant_gates.c.rounds + 1)),
        [dict(tenant=name, rounds=1) for name in names],
    )
    running = running_rows(caps, [executions.c.tenant], one_of(caps, executions.c.tenant, names))
    counts = dict(conn.execute(sa.select(running.c.tenant, sa.func.count()).group_by(running.c.tenant)).all())
    return {t.name: max(0, t.max_concurrency - counts.get(t.name, 0)) for t in capped}
