"""The cluster row: which cluster this database belongs to and its partition count.

At most one row (``id = 1``), written when the cluster is created, not by
this migration. ``partition_count`` is fixed for the cluster's life: a job's
partition is a hash of its id modulo it. ``created_at`` is microseconds since
the epoch, UTC, like every instant in the store.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(
        text(
            """
            CREATE TABLE IF NOT EXISTS cluster (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                cluster_id TEXT NOT NULL,
                partition_count INTEGER NOT NULL DEFAULT 256 CHECK (partition_count > 0),
                created_at BIGINT NOT NULL
            )
            """
        )
    )
