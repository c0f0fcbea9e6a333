"""Two index entries fewer per one-off execution: one in ``executions`` at
every insert of a scheduled row, one in ``jobs`` when a claim completes a job.

Neither write is a HOT update or can be made one (the claim moves
``next_run_at``, which ``jobs_due`` holds, and changes ``state``; every
change of an execution's status changes the partial indexes' predicates), so
PostgreSQL inserts the new row version into every index whose predicate it
satisfies. Two of those entries served reads that do not need them:

- ``executions_partition (partition, ready_at) WHERE status = 'scheduled'``
  served only the timer wheel's rebuild when a server gains partitions (a
  rare read). ``executions_ready (ready_at)`` over the same rows becomes
  ``executions_scheduled (ready_at, partition)``: the lateness watch reads it
  as it read ``executions_ready`` (in ``ready_at`` order, with a LIMIT), and
  the rebuild reads it up to its horizon, keeping the partitions gained.
  The rebuild then passes over the entries of the partitions it did not
  gain (the scheduled rows due within twice the look-ahead, and any
  backlog), in exchange for one entry fewer at every insert, retry and
  requeue of a scheduled row.
- ``jobs_zone (time_zone, id)`` held every job; its one reader, the
  tzdata recompute, reads active jobs only. ``jobs_active_zone (time_zone,
  id) WHERE state = 'active'`` holds what it reads, so the claim that
  completes a one-off job (``state`` → ``completed``) inserts no entry
  into it, nor does a pause.

New names rather than the old ones rebuilt: CockroachDB does not promise a
name dropped and created again in one transaction. The indexes are built in
the migration's transaction: on a large table that holds writes while they
build, so run ``tickwheel migrate`` at a quiet time.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import drop_index

_CREATE = [
    "CREATE INDEX IF NOT EXISTS executions_scheduled ON executions (ready_at, partition) WHERE status = 'scheduled'",
    "CREATE INDEX IF NOT EXISTS jobs_active_zone ON jobs (time_zone, id) WHERE state = 'active'",
]
_DROP = ["executions_ready", "executions_partition", "jobs_zone"]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    for statement in _CREATE:
        conn.execute(text(statement))
    for name in _DROP:
        drop_index(conn, name)
