"""Partitions: the fencing epoch of each partition.

One row per partition that has ever had an owner. ``epoch`` is the etcd
create revision of the ownership key of the partition's latest owner (it
only grows; :class:`~tickwheel_server.store.partitions.PartitionStore` never
lowers it); ``owner`` is that owner's server id, for operators; ``updated_at``
is when the epoch was last raised, microseconds since the epoch, UTC.

Rows are created by the first owner of a partition, not by this migration,
so the table does not depend on the cluster's partition count.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(
        text(
            """
            CREATE TABLE IF NOT EXISTS partitions (
                partition INTEGER PRIMARY KEY,
                epoch BIGINT NOT NULL,
                owner TEXT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """
        )
    )
