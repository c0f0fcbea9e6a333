"""One table for the request ids of every create: ``request_ids (tenant, kind,
request_id)``, in place of ``job_requests`` and ``calendar_requests``.

``job_requests`` was never pruned (a row per job created, forever) while
``calendar_requests`` was pruned by the tenant's next create. Now both kinds
are remembered for the same 24 hours and pruned by the retention runner in
bounded batches (``request_ids_created``), off the create path
(:mod:`tickwheel_server.store.requests`). The rows still within the window
(created in the last 24 hours by the migrating process's clock) move, with
their kind (``job``: target the job id; ``calendar``: target the calendar's
name). Older ones count as gone already (a row past its window answers
nothing), so they are dropped with their tables rather than copied: the
copy is a day of creates, not every create ever made, which one
transaction holds on PostgreSQL and CockroachDB alike.
"""

from __future__ import annotations

import time

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import has_table

_CREATE = [
    """
    CREATE TABLE IF NOT EXISTS request_ids (
        tenant TEXT NOT NULL,
        kind TEXT NOT NULL,
        request_id TEXT NOT NULL,
        target TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (tenant, kind, request_id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS request_ids_created ON request_ids (created_at)",
]
_MOVE = [
    ("job_requests", "INSERT INTO request_ids (tenant, kind, request_id, target, created_at) "
     "SELECT tenant, 'job', request_id, job_id, created_at FROM job_requests WHERE created_at >= :since "
     "ON CONFLICT (tenant, kind, request_id) DO NOTHING"),
    ("calendar_requests", "INSERT INTO request_ids (tenant, kind, request_id, target, created_at) "
     "SELECT tenant, 'calendar', request_id, name, created_at FROM calendar_requests WHERE created_at >= :since "
     "ON CONFLICT (tenant, kind, request_id) DO NOTHING"),
]
_WINDOW_US = 24 * 3600 * 1_000_000
"""The request ids' window as this migration was written (``store.requests.REQUEST_RETENTION``)."""
_DROP = ["DROP TABLE IF EXISTS job_requests", "DROP TABLE IF EXISTS calendar_requests"]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    since = int(time.time() * 1_000_000) - _WINDOW_US
    for statement in _CREATE:
        conn.execute(text(statement))
    for table, statement in _MOVE:
        # Run again after a stop halfway (CockroachDB): the old table may be dropped already.
        if has_table(conn, caps, table):
            conn.execute(text(statement), {"since": since})
    for statement in _DROP:
        conn.execute(text(statement))
