"""One table for the request ids of every create: ``request_ids (tenant, kind,
request_id)``, in place of ``job_requests`` and ``calendar_requests``.

``job_requests`` was never pruned (a row per job created, forever) while
``calendar_requests`` was pruned by the tenant's next create. Now both kinds
are remembered for the same 24 hours and pruned by the retention runner in
bounded batches (``request_ids_created``), off the create path
(:mod:`tickwheel_server.store.requests`). Every existing row moves, with
its kind (``job``: target the job id; ``calendar``: target the calendar's
name); those already past the window are then the runner's to prune.

The copy runs in the migration's transaction: on a store with many job
request ids it holds creates while it runs, so run ``tickwheel migrate`` at
a quiet time.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities

_CREATE = [
    """
    CREATE TABLE request_ids (
        tenant TEXT NOT NULL,
        kind TEXT NOT NULL,
        request_id TEXT NOT NULL,
        target TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (tenant, kind, request_id)
    )
    """,
    "CREATE INDEX request_ids_created ON request_ids (created_at)",
]
_MOVE = [
    "INSERT INTO request_ids (tenant, kind, request_id, target, created_at) "
    "SELECT tenant, 'job', request_id, job_id, created_at FROM job_requests",
    "INSERT INTO request_ids (tenant, kind, request_id, target, created_at) "
    "SELECT tenant, 'calendar', request_id, name, created_at FROM calendar_requests",
]
_DROP = ["DROP TABLE job_requests", "DROP TABLE calendar_requests"]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    for statement in _CREATE + _MOVE + _DROP:
        conn.execute(text(statement))
