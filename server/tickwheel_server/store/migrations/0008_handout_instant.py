"""The hand-out instant of the current delivery, on the execution row.

``executions.handed_out_at`` is written by the hand-out UPDATE itself (no
extra statement) with the handing-out server's clock. The attempt row written
with the outcome takes its start and lateness from it, so they are right
whichever server records the outcome: the one that handed it out, or another
one the worker re-attached to after its server died. NULL while the
execution is not running.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "executions", "handed_out_at BIGINT")
