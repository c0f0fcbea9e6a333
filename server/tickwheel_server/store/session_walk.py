"""The sessions executions of one status are stamped with, a probe a session.

The reaper asks on every pass which sessions hold running
executions (``executions_owner (owner)``) and armed ones
(``executions_armed (owner, id)``), both indexes led by the owner. Grouped
by owner, that read every such row of the cluster each pass (its index
entry and, for visibility, its heap row): a read growing with the
executions held, not with the servers. Walked, it is one ``ORDER BY owner
LIMIT 1`` probe for the first session after the last one found (a skip
scan), so a pass reads one row a session and one more to find the end.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

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
