"""One index of running rows, led by the session: ``executions_running
(owner, tenant, worker_id) WHERE status = 'running'`` replaces
``executions_owner (owner)`` and ``executions_running_worker (tenant,
worker_id)`` over the same rows.

Every running row was an entry in both (and in ``executions_busy`` and the
primary key): an insert, a WAL record and the pages it touches on every
start, the cost issue 17 cuts (loadtest/RESULTS.md, "the running state's
indexes"). The readers by session read the leading column as before (the
reaper, a restamp, the gateway's safety net, the unheld release); the
readers by tenant or worker (a worker's hello, a capped tenant's running
count at a hand-out, ClusterStatus' queues, a tenant's running executions
in the timeline) walk the sessions holding running rows first, a probe
each, then read each session's range of their tenants (and worker id):
:mod:`tickwheel_server.store.session_walk`. Sessions are the servers, a
few; the walk costs a probe each, not a row of every running execution.

The index is built in the migration's transaction before the two are
dropped: on a large table that holds writes while it builds, so run
``tickwheel migrate`` at a quiet time. A new name, not one reused
(migration 0033). Running again is harmless (``IF [NOT] EXISTS``).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import drop_index


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text(
        "CREATE INDEX IF NOT EXISTS executions_running ON executions (owner, tenant, worker_id) "
        "WHERE status = 'running'"
    ))
    drop_index(conn, "executions_running_worker")
    drop_index(conn, "executions_owner")
