"""The delivery a running row's worker said it does not hold.

A server starts armed rows ``running`` up to a second before their instant
and sends them at it, stamping at the start the worker each row is dealt to
(``worker_id``). A worker whose stream ended says hello again, at another
server or the same one, listing everything it still runs or holds a result
for. A running row stamped with that worker's id under another session,
of its credential's tenants, whose delivery the hello does not list, was
never received by that worker: the hello's transaction notes its delivery
here (docs/architecture.md, "Workers and failures", re-attachment). Once
that session is known dead, the reaper gives such a row back at once
(delivery back, no attempt: no worker saw it) instead of after the
re-attach grace; a row of a live session is left to its server.

A nullable column without a default: no table rewrite on PostgreSQL or
CockroachDB, and in no index (the reaper reads it on the rows of one dead
session, through ``executions_owner``; the hello through
``executions_running_tenant``). The same SQL runs on SQLite.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "executions", "unheld_delivery INTEGER")
