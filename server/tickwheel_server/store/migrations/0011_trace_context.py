"""The trace an execution belongs to, on the execution row.

``executions.trace_context`` is the W3C ``traceparent`` of the span that
created the execution: the API call for a trigger or a backfill, the
dispatcher's per-occurrence ``dispatch`` span for a scheduled occurrence. The
hand-out returns it, so the gateway's ``hand-out`` span and the worker's call
to the target join that trace on whichever server hands it out. NULL when
tracing was off where the execution was created (the common case: nothing is
written then). A plain nullable column, added the same way on every engine.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "executions", "trace_context TEXT")
