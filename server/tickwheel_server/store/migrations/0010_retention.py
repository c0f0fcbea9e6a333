"""Retention and the operators' reads: per-job daily rollups of attempts,
and the indexes that keep pruning and cross-tenant search range scans.

``attempt_rollups``: one row per (job, UTC day of the attempts' start), made
from attempts as retention deletes them: ``runs`` (attempts), ``failures``
(attempts that ``failed``, ``timed_out`` or were ``lost``), the lateness
percentiles in microseconds and ``lateness_sketch``, the mergeable histogram
they are read from (JSON; see :mod:`tickwheel_server.policy.rollups`), so
attempts of one day rolled up in several batches give the same figures as
one batch would. ``day`` is the day's first instant (microseconds since the
epoch, like every instant). ``attempt_rollups_day`` serves their own
pruning.

Indexes on ``executions`` (neither is partial: they serve every status):

- ``executions_nominal (nominal_at, id)``: SearchExecutions without a tenant
  or job (newest first, a backwards range scan with a LIMIT), and the
  retention scan (oldest first, from the start of time to the cutoff).
- ``executions_tenant_nominal (tenant, nominal_at, id)``: SearchExecutions of
  one tenant.

``skips_to (to_at)``: skip ranges that ended before the cutoff, oldest first.

Attempts stay one table on every engine (no PostgreSQL partitions): see
``docs/operations.md`` ("Retention") for why. They are deleted with their
execution, by primary key, so they need no time index.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities

_DDL = [
    """
    CREATE TABLE IF NOT EXISTS attempt_rollups (
        job_id TEXT NOT NULL,
        day BIGINT NOT NULL,
        tenant TEXT NOT NULL,
        runs BIGINT NOT NULL,
        failures BIGINT NOT NULL,
        lateness_p50_us BIGINT NOT NULL,
        lateness_p90_us BIGINT NOT NULL,
        lateness_p99_us BIGINT NOT NULL,
        lateness_sketch TEXT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (job_id, day)
    )
    """,
    "CREATE INDEX IF NOT EXISTS attempt_rollups_day ON attempt_rollups (day)",
    "CREATE INDEX IF NOT EXISTS executions_nominal ON executions (nominal_at, id)",
    "CREATE INDEX IF NOT EXISTS executions_tenant_nominal ON executions (tenant, nominal_at, id)",
    "CREATE INDEX IF NOT EXISTS skips_to ON skips (to_at)",
]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    for statement in _DDL:
        conn.execute(text(statement))
