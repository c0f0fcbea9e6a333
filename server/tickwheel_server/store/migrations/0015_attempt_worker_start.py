"""When the worker says an attempt started, beside when it was handed out.

``attempts.started_at`` is the hand-out instant: the handing-out server's
clock, read inside the hand-out's transaction. Lateness is measured from it,
and it is the partition key. ``attempts.worker_started_at`` is what the
worker reported in its result (``ExecutionResult.started_at``, the worker's
clock) when it began the attempt. The difference is the time between the
store giving the execution out and the worker starting it: the assignment's
way through the server, the stream and the worker's own queue, which a
burst makes visible. NULL for an attempt that ended without a result (a
requeue's ``lost``) or a worker that reported no start. A plain nullable
column, added the same way on every engine (on PostgreSQL's partitioned
``attempts`` it reaches every partition).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "attempts", "worker_started_at BIGINT")
