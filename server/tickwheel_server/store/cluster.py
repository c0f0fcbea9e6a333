"""The cluster row: which cluster a database belongs to, and its partition count."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from .transactions import run_in_transaction_async

_cluster = sa.Table(
    "cluster",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("cluster_id", sa.Text),
    sa.Column("partition_count", sa.Integer),
    sa.Column("created_at", sa.BigInteger),
)


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    partition_count: int
    created: bool
    """True when this call created the cluster row."""


async def ensure_cluster(engine: Engine, clock: Clock, partition_count: int) -> ClusterInfo:
    """The cluster's identity, creating it with ``partition_count`` on first use.

    The partition count is fixed when the cluster is created; a later server
    configured with another count uses the stored one (the caller reports
    the difference).
    """
    if partition_count < 1:
        raise ValueError("partition_count must be >= 1")
    now_us = to_us(clock.now())

    def fn(conn: Connection) -> ClusterInfo:
        row = conn.execute(sa.select(_cluster).where(_cluster.c.id == 1)).first()
        if row is not None:
            return ClusterInfo(row.cluster_id, row.partition_count, False)
        cluster_id = str(uuid.uuid4())
        conn.execute(
            _cluster.insert().values(id=1, cluster_id=cluster_id, partition_count=partition_count, created_at=now_us)
        )
        return ClusterInfo(cluster_id, partition_count, True)

    return await run_in_transaction_async(engine, fn, clock=clock)


async def database_now(engine: Engine, clock: Clock):
    """The database server's clock, for the gateway's skew check."""
    from datetime import datetime, timezone

    def fn(conn: Connection):
        if conn.dialect.name == "sqlite":
            text = conn.execute(sa.text("SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now')")).scalar()
            return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)
        return conn.execute(sa.text("SELECT now()")).scalar().astimezone(timezone.utc)

    return await run_in_transaction_async(engine, fn, clock=clock)
