"""Executions (the queue), attempts (history) and skip ranges.

``executions`` is one row per occurrence and the queue: the dispatcher
inserts a row per occurrence in the transaction that advances the job's
``next_run_at``; the gateway hands a row out by moving it from ``scheduled``
to ``running``. Ids are derived (``<job id>:<nominal instant>``), so a second
claim or a backfill of the same occurrence cannot create it twice.

``executions_ready`` serves the hand-out (``status = 'scheduled' AND
ready_at <= :now``, a range scan with a LIMIT); ``executions_partition``
rebuilds a partition's timer wheel when it is acquired.

``skips.continues_at`` is the nominal instant right after ``to_at`` in the
job's schedule, so a range split across claim batches is extended in place
instead of becoming a second row.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

_DDL = [
    """
    CREATE TABLE IF NOT EXISTS executions (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        partition INTEGER NOT NULL,
        origin TEXT NOT NULL,
        nominal_at BIGINT NOT NULL,
        due_at BIGINT NOT NULL,
        ready_at BIGINT NOT NULL,
        attempt INTEGER NOT NULL,
        delivery INTEGER NOT NULL,
        status TEXT NOT NULL,
        owner TEXT,
        worker_id TEXT,
        handler TEXT,
        missed_count INTEGER NOT NULL,
        reap_count INTEGER NOT NULL,
        payload {bytes} NOT NULL,
        error TEXT NOT NULL,
        dead_reason TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        finished_at BIGINT
    )
    """,
    "CREATE INDEX IF NOT EXISTS executions_ready ON executions (ready_at) WHERE status = 'scheduled'",
    "CREATE INDEX IF NOT EXISTS executions_partition ON executions (partition, ready_at) WHERE status = 'scheduled'",
    "CREATE INDEX IF NOT EXISTS executions_job ON executions (job_id, nominal_at)",
    "CREATE INDEX IF NOT EXISTS executions_owner ON executions (owner) WHERE status = 'running'",
    """
    CREATE TABLE IF NOT EXISTS attempts (
        execution_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        delivery INTEGER NOT NULL,
        status TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        finished_at BIGINT,
        lateness_us BIGINT NOT NULL,
        worker_id TEXT NOT NULL,
        error TEXT NOT NULL,
        PRIMARY KEY (execution_id, attempt, delivery)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS skips (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        from_at BIGINT NOT NULL,
        to_at BIGINT NOT NULL,
        continues_at BIGINT,
        count BIGINT NOT NULL,
        reason TEXT NOT NULL,
        created_at BIGINT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS skips_job ON skips (job_id, to_at)",
]


def upgrade(conn: Connection, caps) -> None:
    binary = "BLOB" if caps.is_sqlite else "BYTEA"
    for statement in _DDL:
        conn.execute(text(statement.format(bytes=binary)))
