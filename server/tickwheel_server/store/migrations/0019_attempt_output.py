"""What the worker reported as an attempt's output, kept on its row.

``ExecutionResult.output`` (at most 16 KiB) used to be checked and then
dropped, though the contract said it was kept in history. The first 4 KiB
(``store.executions.OUTPUT_KEPT_BYTES``) now go in ``attempts.output``; NULL
when there was none (a no-op handler, a requeue's ``lost``), so an execution
without output costs nothing more. A plain nullable column, added the same
way on every engine (on PostgreSQL's partitioned ``attempts`` it reaches
every partition).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    binary = "BLOB" if caps.is_sqlite else "BYTEA"
    add_column(conn, caps, "attempts", f"output {binary}")
