"""The sessions executions of one status are stamped with, a probe a session.

The reaper asks on every pass which sessions hold running
executions (``executions_running (owner, tenant, worker_id)``, migration
0040) and armed ones (``executions_armed (owner, id)``), both indexes led
by the owner. Grouped by owner, that read every such row of the cluster
each pass (its index entry and, for visibility, its heap row): a read
growing with the executions held, not with the servers. Walked, it is one
``ORDER BY owner LIMIT 1`` probe for the first session after the last one
found (a skip scan), so a pass reads one row a session and one more to
find the end.

The readers of running rows by tenant or worker id (a worker's hello, a
capped tenant's running count, ClusterStatus' queues, a tenant's running
executions in the timeline) take the same walk inside their own statement
(:func:`running_rows`): the index leads with the session, so each
session's range of their tenants (and worker id) is read, a probe a
session more, and never the other tenants' entries.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement, Subquery

from .engine import Capabilities
from .isolation import status_in
from .tables import executions


def stamped_sessions(conn: Connection, status: str, limit: int) -> list[str]:
    """Up to ``limit`` distinct owners of executions of ``status``, in
    order, rows without an owner left out: at most ``limit + 1`` probes of
    the status's partial index led by ``owner``, each reading one row."""
    found: list[str] = []
    while len(found) < limit:
        query = sa.select(executions.c.owner).where(status_in(executions.c.status, status))
        after = executions.c.owner > found[-1] if found else executions.c.owner.is_not(None)
        owner = conn.execute(query.where(after).order_by(executions.c.owner).limit(1)).scalar()
        if owner is None:
            break
        found.append(owner)
    return found


def _first_running_owner(name: str, after: ColumnElement | None) -> ColumnElement:
    """SQL: the least owner of a running row (after ``after``, if given): one probe of ``executions_running``."""
    probe = executions.alias(name)
    bound = probe.c.owner.is_not(None) if after is None else probe.c.owner > after
    return (
        sa.select(probe.c.owner)
        .where(status_in(probe.c.status, "running"), bound)
        .order_by(probe.c.owner)
        .limit(1)
        .scalar_subquery()
    )


def running_rows(caps: Capabilities, columns: Sequence, *conditions: ColumnElement, limit=None) -> Subquery:
    """The running rows that meet ``conditions`` (on ``executions``: a
    range of ``tenant``, and of ``worker_id`` inside it), ``columns`` of
    them, as a subquery named ``running_rows`` to select from: each
    session's range of ``executions_running (owner, tenant, worker_id)``,
    the sessions walked a probe each (as :func:`stamped_sessions`, inside
    the one statement: one snapshot, so a row restamped to another session
    while it runs is read once), and the range of rows without an owner
    (none is written so: a server starts a row under its session; one
    descent more). On PostgreSQL and CockroachDB each session's range is a
    LATERAL subquery, which no plan can turn into a read of every running
    row (an ``owner IN (…)`` of the walk was planned as a hash join over
    ``executions_busy``); SQLite, which has no LATERAL, takes the ``IN``.
    With ``limit``, at most that many rows from each session and in all."""
    sessions = sa.select(_first_running_owner("first_session", None).label("owner")).cte(
        "running_sessions", recursive=True
    )
    sessions = sessions.union_all(
        sa.select(_first_running_owner("next_session", sessions.c.owner).label("owner"))
        .where(sessions.c.owner.is_not(None))
    )
    query = sa.select(*columns).where(status_in(executions.c.status, "running"), *conditions)
    if caps.is_sqlite:
        owned = query.where(executions.c.owner.in_(sa.select(sessions.c.owner).where(sessions.c.owner.is_not(None))))
    else:
        # A LIMIT, or else OFFSET 0, keeps PostgreSQL from pulling the subquery
        # up into a join of its own choosing (a hash join over a read of the
        # tenant's range in every session at once, or of ``executions_busy``).
        each = query.where(executions.c.owner == sessions.c.owner)
        each = (each.offset(sa.literal_column("0")) if limit is None else each.limit(limit)).lateral("session_rows")
        owned = sa.select(*each.c).select_from(sessions.join(each, sa.true())).where(sessions.c.owner.is_not(None))
    parts = [owned, query.where(executions.c.owner.is_(None))]
    if limit is None:
        return sa.union_all(*parts).subquery("running_rows")
    both = sa.union_all(*(sa.select(*part.limit(limit).subquery().c) for part in parts)).subquery()
    return sa.select(*both.c).limit(limit).subquery("running_rows")
