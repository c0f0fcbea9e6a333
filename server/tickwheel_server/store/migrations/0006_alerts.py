"""Alerts, their change feed, and the dead-letter indexes.

``alerts`` is one row per alert. ``dedup_key`` names the condition
(``dead_letter:<execution id>``, ``clock_skew:<server id>``); the partial
unique index ``alerts_open_key`` lets at most one alert per key be open
(``resolved_at IS NULL``), so raising an open alert again updates that row
(``count``, ``last_seen_at``) and raising after resolution inserts a new one.
``tenant``, ``job_id``, ``execution_id`` and ``server_id`` are ``''`` when
the alert concerns none; ``details`` is a JSON object of strings. Instants
are microseconds since the epoch, UTC.

The change feed: every write to an alert sets ``changed_at`` and clears
``seq``. A sequencer numbers the rows whose ``seq`` is NULL from the counter
in ``alert_feed`` (one row, created by the first sequencer: a migration on
CockroachDB must not write to a table it creates), holding that row locked,
so sequence numbers are handed out in commit order and a reader that follows
``seq`` upwards never skips a change. ``alerts_unsequenced`` finds the rows
to number, ``alerts_seq`` serves the readers.

``alerts_open`` and ``alerts_raised`` serve ListAlerts (newest first, open
only or all; ``alerts_raised`` also the pruning of resolved alerts),
``alerts_tenant_open`` and ``alerts_tenant`` the same for one tenant.

``executions_dead`` and ``executions_dead_job`` serve ListDeadLetters: a
tenant's (or one job's) dead executions, newest ``finished_at`` first, as a
backwards range scan with a LIMIT. They are partial, so they hold only the
dead executions.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities

_DDL = [
    """
    CREATE TABLE IF NOT EXISTS alerts (
        id TEXT PRIMARY KEY,
        dedup_key TEXT NOT NULL,
        kind TEXT NOT NULL,
        severity TEXT NOT NULL,
        tenant TEXT NOT NULL,
        job_id TEXT NOT NULL,
        execution_id TEXT NOT NULL,
        server_id TEXT NOT NULL,
        summary TEXT NOT NULL,
        details TEXT NOT NULL,
        raised_at BIGINT NOT NULL,
        last_seen_at BIGINT NOT NULL,
        count BIGINT NOT NULL,
        resolved_at BIGINT,
        changed_at BIGINT NOT NULL,
        seq BIGINT
    )
    """,
    "CREATE UNIQUE INDEX IF NOT EXISTS alerts_open_key ON alerts (dedup_key) WHERE resolved_at IS NULL",
    "CREATE INDEX IF NOT EXISTS alerts_open ON alerts (raised_at, id) WHERE resolved_at IS NULL",
    "CREATE INDEX IF NOT EXISTS alerts_raised ON alerts (raised_at, id)",
    "CREATE INDEX IF NOT EXISTS alerts_tenant_open ON alerts (tenant, raised_at, id) WHERE resolved_at IS NULL",
    "CREATE INDEX IF NOT EXISTS alerts_tenant ON alerts (tenant, raised_at, id)",
    "CREATE UNIQUE INDEX IF NOT EXISTS alerts_seq ON alerts (seq)",
    "CREATE INDEX IF NOT EXISTS alerts_unsequenced ON alerts (changed_at, id) WHERE seq IS NULL",
    """
    CREATE TABLE IF NOT EXISTS alert_feed (
        id INTEGER PRIMARY KEY,
        seq BIGINT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS executions_dead ON executions (tenant, finished_at, id) WHERE status = 'dead'",
    "CREATE INDEX IF NOT EXISTS executions_dead_job ON executions (job_id, finished_at, id) WHERE status = 'dead'",
]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    for statement in _DDL:
        conn.execute(text(statement))
