"""The worker's id in the index of running rows by tenant, so a worker's
hello reads its own running rows, not its tenant's.

``executions_running_tenant (tenant) WHERE status = 'running'`` becomes
``executions_running_worker (tenant, worker_id)`` over the same rows. A
hello marks the running rows of its credential's tenants dealt to its
worker id that it does not list (:func:`tickwheel_server.store.unheld.
disown`, migration 0031): on the old index that read every running row of
those tenants from the heap for its worker id, however many they ran; on
this one it reads the range of its tenants and its worker id. The index's
other readers lead with the tenant as before (a capped tenant's running
count at a hand-out, the admin's queues, a tenant's running executions in
the timeline): they read the tenant's range, now ordered by worker id
inside it, which none of them needs otherwise.

The same number of index entries per running row (one), each wider by
the worker id (none until the row is started for a worker). A new name
rather than the old one rebuilt: CockroachDB does not promise a name
dropped and created again in one transaction (migration 0030). The index
is built in the migration's transaction: on a large table that holds
writes while it builds, so run ``tickwheel migrate`` at a quiet time.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import drop_index


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text(
        "CREATE INDEX IF NOT EXISTS executions_running_worker ON executions (tenant, worker_id) WHERE status = 'running'"
    ))
    drop_index(conn, "executions_running_tenant")
