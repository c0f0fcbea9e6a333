"""Drop ``executions_ended (nominal_at, id)``: an index entry fewer for
every execution that ends.

Every execution that ends is a new row version (a change of status is
never a heap-only update: ``status`` is in the partial indexes'
predicates), and each index its predicate meets takes an entry: the
primary key, ``executions_ended``, ``_ended_tenant`` and ``_ended_job``.
``executions_ended`` served two rare readers only, retention's walk and a
search of executions of every tenant, which now read
``executions_ended_tenant`` tenant by tenant (``store/ended_walk.py``).
Measured: loadtest/RESULTS.md, "An index entry fewer an ended execution".

Dropping an index takes a short exclusive lock of ``executions`` on
PostgreSQL; nothing is rebuilt. Running again is harmless (``IF EXISTS``).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import drop_index


def upgrade(conn: Connection, caps: Capabilities) -> None:
    drop_index(conn, "executions_ended")
