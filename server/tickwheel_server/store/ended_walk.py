"""Ended executions of every tenant, read tenant by tenant on ``executions_ended_tenant``.

No index holds every tenant's ended executions in ``(nominal_at, id)``
order (migration 0037 dropped ``executions_ended``): such an entry cost
every execution that ends an index insert, its WAL and its pages, for two
rare readers, retention's walk and a search of executions of every
tenant. Both read the tenants' ranges of ``executions_ended_tenant
(tenant, nominal_at, id)`` one tenant at a time instead, the next tenant
found on that index too (a skip scan: the first name after the last, so
only tenants with history are visited): every statement a LIMITed range
scan, the work of a call bounded by its limit in rows and in tenants
visited, never by another tenant's history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select

from .tables import executions
from .timeline import TERMINAL, in_group

WalkKey = tuple[str, int | None, str | None]
"""(tenant, nominal µs, id): where a walk continues, after that execution
of that tenant; (tenant, None, None): from that tenant's first."""


def next_tenant(conn: Connection, after: str | None) -> str | None:
    """The first tenant after ``after`` (None: the first) with an ended
    execution: one step of a skip scan of ``executions_ended_tenant``, so
    only tenants with history are visited (and those the ``tenants``
    table does not list are not passed over)."""
    query = sa.select(executions.c.tenant).where(*in_group(TERMINAL)).order_by(executions.c.tenant).limit(1)
    if after is not None:
        query = query.where(executions.c.tenant > after)
    return conn.execute(query).scalar()


def oldest_ended(
    conn: Connection, columns: Sequence, cutoff_us: int, after: WalkKey | None, limit: int
) -> tuple[list, WalkKey | None]:
    """Up to ``limit`` ended executions nominally before ``cutoff_us``, in
    ``(tenant, nominal_at, id)`` order from after ``after``, and the key to
    continue from (None once every tenant's range up to the cutoff is read).

    ``columns`` must include ``nominal_at`` and ``id``. At most ``limit``
    tenants' ranges are read a call (a tenant with nothing to prune costs
    two probes: its range and the next tenant's name); a call that stops at
    that bound returns the next tenant's start as its key."""
    rows: list = []
    if after is None:
        tenant, key = next_tenant(conn, None), None
    else:
        tenant, key = after[0], (None if after[1] is None else (after[1], after[2]))
    for _ in range(limit):
        if tenant is None:
            return rows, None
        query = sa.select(*columns).where(
            executions.c.tenant == tenant, executions.c.nominal_at < cutoff_us, *in_group(TERMINAL)
        )
        if key is not None:
            # A row comparison is a range bound on the index, so a batch deep
            # inside a group sharing one instant starts where the last one ended.
            query = query.where(sa.tuple_(executions.c.nominal_at, executions.c.id) > sa.tuple_(*key))
        wanted = limit - len(rows)
        found = conn.execute(query.order_by(executions.c.nominal_at, executions.c.id).limit(wanted)).all()
        rows += found
        if len(found) == wanted:
            return rows, (tenant, found[-1].nominal_at, found[-1].id)
        tenant, key = next_tenant(conn, tenant), None
    return rows, (None if tenant is None else (tenant, None, None))


def newest_ended(conn: Connection, query: Select, limit: int, key: Callable) -> list:
    """The ``limit`` rows newest by ``key`` of ``query`` (a read of ended
    executions ordered newest first, with no tenant) over every tenant:
    each tenant's newest ``limit`` (``query`` narrowed to it), merged."""
    rows: list = []
    tenant = next_tenant(conn, None)
    while tenant is not None:
        rows += conn.execute(query.where(executions.c.tenant == tenant).limit(limit)).all()
        rows = sorted(rows, key=key, reverse=True)[:limit]
        tenant = next_tenant(conn, tenant)
    return rows
