"""Attempts partitioned by UTC day of their start, on PostgreSQL (>= 11).

``attempts`` becomes a table ``PARTITION BY RANGE (started_at)`` with one
partition per UTC day, ``attempts_pYYYYMMDD`` holding ``[day, day + 1 day)``
in microseconds since the epoch, and a DEFAULT partition,
``attempts_default``, so an insert never fails for want of a day's
partition. Retention (:mod:`tickwheel_server.store.retention`) creates the
coming days' partitions ahead of time, rolls a day up and drops its
partition once the whole day is past the window, instead of deleting its
rows one by one.

The primary key becomes ``(execution_id, attempt, delivery, started_at)``
(a partitioned table's unique constraints must hold its partition key). It
is exactly as unique as ``(execution_id, attempt, delivery)`` was:
``started_at`` is the delivery's hand-out instant
(``executions.handed_out_at``, stamped once by the hand-out that made the
delivery and cleared only when the delivery ends or is taken back, which
writes no attempt row), so every attempt row of one delivery carries the
same ``started_at``, lands in the same partition and conflicts there.

The existing rows are kept: the new table is created with a partition for
each day that holds rows plus yesterday, today and the next
:data:`AHEAD_DAYS` days by the database's clock (retention keeps that
look-ahead from then on), the rows are copied, the old table dropped and the
new one renamed, all in this migration's transaction (PostgreSQL's DDL is
transactional). The copy holds ``attempts`` locked against writes while it
runs: results recorded meanwhile wait, so on a large history run
``tickwheel migrate`` at a quiet time.

``attempt_partition_walks`` records how far the rollup of a detached day
partition has got (its last primary key rolled up), so a day too large for
one transaction is rolled up in batches, each counted exactly once, before
its table is dropped.

CockroachDB (whose ranges split by themselves and which has no
``PARTITION BY RANGE`` of this kind) and SQLite keep one table, pruned by
batched deletes.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities

DAY_US = 86_400_000_000
AHEAD_DAYS = 3
"""Days after today given a partition now (retention keeps this up)."""

_COLUMNS = "execution_id, attempt, delivery, status, started_at, finished_at, lateness_us, worker_id, error, waited_us"


def partition_name(day_us: int) -> str:
    """``attempts_pYYYYMMDD`` for the UTC day starting at ``day_us``."""
    return "attempts_p" + datetime.fromtimestamp(day_us / 1e6, tz=timezone.utc).strftime("%Y%m%d")


def upgrade(conn: Connection, caps: Capabilities) -> None:
    if not caps.declarative_partitioning:
        return
    conn.execute(text("""
        CREATE TABLE attempts_by_day (
            execution_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            delivery INTEGER NOT NULL,
            status TEXT NOT NULL,
            started_at BIGINT NOT NULL,
            finished_at BIGINT,
            lateness_us BIGINT NOT NULL,
            worker_id TEXT NOT NULL,
            error TEXT NOT NULL,
            waited_us BIGINT NOT NULL DEFAULT 0,
            CONSTRAINT attempts_by_day_pkey PRIMARY KEY (execution_id, attempt, delivery, started_at)
        ) PARTITION BY RANGE (started_at)
    """))
    held = conn.execute(text(
        "SELECT DISTINCT started_at - mod(started_at, :day) FROM attempts WHERE started_at >= 0"
    ), {"day": DAY_US}).scalars()
    now_us = conn.execute(text("SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS BIGINT)")).scalar_one()
    today = now_us - now_us % DAY_US
    days = set(held) | {today + offset * DAY_US for offset in range(-1, AHEAD_DAYS + 1)}
    for day in sorted(days):
        bounds = f"FROM ({day}) TO ({day + DAY_US})"
        conn.execute(text(f"CREATE TABLE {partition_name(day)} PARTITION OF attempts_by_day FOR VALUES {bounds}"))
    conn.execute(text("CREATE TABLE attempts_default PARTITION OF attempts_by_day DEFAULT"))
    conn.execute(text(f"INSERT INTO attempts_by_day ({_COLUMNS}) SELECT {_COLUMNS} FROM attempts"))
    conn.execute(text("DROP TABLE attempts"))
    conn.execute(text("ALTER TABLE attempts_by_day RENAME TO attempts"))
    conn.execute(text("ALTER TABLE attempts RENAME CONSTRAINT attempts_by_day_pkey TO attempts_pkey"))
    conn.execute(text("""
        CREATE TABLE attempt_partition_walks (
            partition TEXT PRIMARY KEY,
            after_key TEXT,
            rows BIGINT NOT NULL
        )
    """))
