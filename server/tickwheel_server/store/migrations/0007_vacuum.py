"""Autovacuum settings of the two tables the dispatch path rewrites (PostgreSQL only).

Every claim rewrites each claimed ``jobs`` row (never a HOT update:
``next_run_at`` is indexed) and every hand-out and outcome rewrites an
``executions`` row (``status`` is in the predicates of its partial indexes).
Each rewrite leaves a dead tuple and a dead entry in every index of the
table, and in ``jobs_due`` and the hand-out's ready-time indexes those
entries sit at the head of the ranges every dispatcher tick and every
hand-out round start from: the scans walk them until VACUUM removes them
(index scans mark them dead, which makes the walk cheaper, not free). PostgreSQL's defaults wait for 20 % of a table
to be dead, which for a 10 M-job table is 2 M rewritten cursors, and for the
executions kept 30 days is days of hand-outs. So vacuum these two on a
number of dead rows rather than a share of the table:

- ``jobs``: 1 % + 10 000 (a 100 k-job burst on 1 M jobs is vacuumed within
  a naptime of draining); ``ANALYZE`` at the same point, so the statistics
  of ``next_run_at``, which every claim moves, do not lag behind by days.
- ``executions``: every 10 000 dead rows whatever the table's size (a
  queue: its garbage grows with hand-outs, not with what is retained).

CockroachDB has no VACUUM (MVCC garbage goes after the zone's
``gc.ttlseconds``, an operator's setting); SQLite neither needs nor has
per-table settings. Both skip this migration.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities

SETTINGS = {
    "jobs": {
        "autovacuum_vacuum_scale_factor": "0.01",
        "autovacuum_vacuum_threshold": "10000",
        "autovacuum_analyze_scale_factor": "0.01",
        "autovacuum_analyze_threshold": "10000",
    },
    "executions": {
        "autovacuum_vacuum_scale_factor": "0",
        "autovacuum_vacuum_threshold": "10000",
        "autovacuum_analyze_scale_factor": "0.01",
        "autovacuum_analyze_threshold": "10000",
    },
}


def upgrade(conn: Connection, caps: Capabilities) -> None:
    if not caps.is_postgres:
        return
    for table, settings in SETTINGS.items():
        values = ", ".join(f"{name} = {value}" for name, value in settings.items())
        conn.execute(text(f"ALTER TABLE {table} SET ({values})"))
