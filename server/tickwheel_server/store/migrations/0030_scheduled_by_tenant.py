"""The tenant in the index of scheduled rows by ready instant, so a pass can
find the tenants with work in its window without passing the parked ones.

``executions_scheduled (ready_at, partition) WHERE status = 'scheduled'``
becomes ``executions_scheduled_tenant (ready_at, tenant, partition)`` over
the same rows. Its readers read it as before: the lateness watch in
``ready_at`` order with a LIMIT, the timer wheel's rebuild up to its
horizon keeping the partitions gained (``partition`` is still in the
entry). The tenant after the instant lets the arm's and the rounds' walk
of the ready side (:mod:`tickwheel_server.store.tenant_walk`) step from one
(instant, tenant) pair to the next with one descent each: a tenant's burst
at one instant is one step, and rows outside the window (retries backing
off, runs due later) are outside the range it reads, whatever their number
and however many tenants hold them. The tenant walk along
``executions_tenant_ready`` visits those tenants one step each, so with
thousands of them a ready run was found only once its rotation came round.

The same number of index entries per scheduled row (one), each wider by
the tenant's name. A new name rather than the old one rebuilt: CockroachDB
does not promise a name dropped and created again in one transaction. The
index is built in the migration's transaction: on a large table that holds
writes while it builds, so run ``tickwheel migrate`` at a quiet time.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import drop_index


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text(
        "CREATE INDEX IF NOT EXISTS executions_scheduled_tenant ON executions (ready_at, tenant, partition) "
        "WHERE status = 'scheduled'"
    ))
    drop_index(conn, "executions_scheduled")
