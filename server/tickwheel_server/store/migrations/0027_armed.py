"""Executions armed ahead of their instant: two small partial indexes.

An ``armed`` execution (docs/architecture.md, "Hand-outs decided ahead") is
one a server decided to hand out at its instant, seconds before it: status
``armed``, ``owner`` its session, ``delivery`` already counted. It leaves
every index of the ``scheduled`` state (so no hand-out round, sweep or
dispatcher reads it) and is found through these two only, which hold
nothing else and are nearly always small (a server arms at most its bounded
queue):

- ``executions_armed (owner, id) WHERE status = 'armed'``: a server's own
  armed rows, and a dead session's for the reaper;
- ``executions_armed_job (job_id, nominal_at, id) WHERE status = 'armed'``:
  a job's, for the writes that disarm a job's executions before changing
  them (delete, pause, update, trigger, backfill) and for the start's
  overlap guard and a job's history.

No status is enumerated by a CHECK constraint (``status`` is plain text),
so nothing else changes; existing partial indexes name their statuses and
simply do not hold ``armed`` rows. The same SQL runs on SQLite, PostgreSQL
and CockroachDB.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities

_CREATE = [
    "CREATE INDEX IF NOT EXISTS executions_armed ON executions (owner, id) WHERE status = 'armed'",
    "CREATE INDEX IF NOT EXISTS executions_armed_job ON executions (job_id, nominal_at, id) WHERE status = 'armed'",
]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    for statement in _CREATE:
        conn.execute(text(statement))
