"""Tenants, their credentials, and jobs.

Instants are BIGINT microseconds since the epoch (UTC) on every engine; see
``tickwheel.shared.ids``. The job's definition is kept as the serialised
``tickwheel.v1.Job`` message (output-only fields cleared) in ``spec``; the
columns beside it are the ones queries filter, order or update on.

``jobs_due`` is the dispatcher's index: every claim is a range scan on
``(partition, next_run_at)`` over active jobs, with a LIMIT.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection


_DDL = [
    """
    CREATE TABLE IF NOT EXISTS tenants (
        name TEXT PRIMARY KEY,
        weight INTEGER NOT NULL,
        max_concurrency INTEGER NOT NULL,
        max_jobs BIGINT NOT NULL,
        max_payload_bytes BIGINT NOT NULL,
        requests_per_second INTEGER NOT NULL,
        state TEXT NOT NULL,
        pause_reason TEXT NOT NULL,
        job_count BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        version BIGINT NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS api_keys (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL REFERENCES tenants (name),
        secret_hash {bytes} NOT NULL,
        description TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT
    )
    """,
    "CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys (tenant, created_at)",
    """
    CREATE TABLE IF NOT EXISTS worker_credentials (
        id TEXT PRIMARY KEY,
        secret_hash {bytes} NOT NULL,
        tenants TEXT NOT NULL,
        handlers TEXT NOT NULL,
        http BOOLEAN NOT NULL,
        description TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL REFERENCES tenants (name),
        partition INTEGER NOT NULL,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        spec {bytes} NOT NULL,
        time_zone TEXT NOT NULL,
        next_run_at BIGINT,
        next_due_at BIGINT,
        run_count BIGINT NOT NULL,
        tzdata_version TEXT NOT NULL,
        pause_reason TEXT NOT NULL,
        paused_at BIGINT,
        version BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS jobs_due ON jobs (partition, next_run_at) WHERE state = 'active'",
    "CREATE INDEX IF NOT EXISTS jobs_tenant ON jobs (tenant, id)",
    "CREATE INDEX IF NOT EXISTS jobs_tenant_name ON jobs (tenant, name)",
    "CREATE INDEX IF NOT EXISTS jobs_zone ON jobs (time_zone, id)",
    """
    CREATE TABLE IF NOT EXISTS job_requests (
        tenant TEXT NOT NULL,
        request_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (tenant, request_id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS job_requests_created ON job_requests (created_at)",
]


def upgrade(conn: Connection, caps) -> None:
    binary = "BLOB" if caps.is_sqlite else "BYTEA"
    for statement in _DDL:
        conn.execute(text(statement.format(bytes=binary)))
