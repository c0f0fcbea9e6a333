"""Indexes on ``executions`` by status group, so that a hand-out's UPDATE
inserts into as few indexes as possible.

Changing an execution's status is never a HOT update (the status is in
partial-index predicates), so PostgreSQL inserts the new tuple into every
index whose predicate it satisfies. A hand-out (``scheduled`` to
``running``, 2 000 rows a statement in a burst) inserted into eight: the
primary key, ``executions_owner``, ``executions_busy``,
``executions_running_tenant``, and four that held every status or every
execution not ended (``executions_job``, ``executions_active``,
``executions_nominal``, ``executions_tenant_nominal``). Those four are
replaced by indexes on two of the three status groups:

- ended (``succeeded``, ``dead``, ``canceled``): ``executions_ended
  (nominal_at, id)``, ``executions_ended_tenant (tenant, nominal_at, id)``,
  ``executions_ended_job (job_id, nominal_at, id)``;
- not started (``scheduled``, ``waiting``): ``executions_not_started
  (nominal_at, id)``, ``executions_not_started_job (job_id, nominal_at,
  id)`` (also the overlap policy's "what is ahead", which
  ``executions_active`` served). No tenant index: one led by the tenant
  would hold the rows of ``executions_tenant_ready`` and tempt PostgreSQL's
  planner into a BitmapAnd with ``executions_ready`` for a tenant's ready
  executions, which reads every ready entry once per tenant (seen on
  ClusterStatus's queue depths). A tenant's search reads
  ``executions_not_started`` with the tenant as a filter;
- running: none of these. Running executions are at most as many as the
  workers' slots and are found through the indexes the running state needs
  anyway: ``executions_owner`` (all of them, or a server's),
  ``executions_running_tenant`` (a tenant's), ``executions_busy`` (a job's).

A running tuple now satisfies four predicates: the primary key,
``executions_owner``, ``executions_busy`` and ``executions_running_tenant``.
A scheduled one (a dispatcher's insert) six, where it was eight: the primary key,
``executions_ready``, ``executions_partition``, ``executions_tenant_ready``
and the two not-started ones. A read over every status (SearchExecutions, a
job's history) is one LIMITed scan per group, merged
(:mod:`tickwheel_server.store.timeline`). Every new index ends in ``id``, so
pages keyed by ``(nominal_at, id)`` are range scans on each.

The indexes are built in the migration's transaction: on a large table that
holds writes to ``executions`` while they build, so run ``tickwheel
migrate`` at a quiet time.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import drop_index

_ENDED = "status IN ('succeeded', 'dead', 'canceled')"
_NOT_STARTED = "status IN ('scheduled', 'waiting')"

_CREATE = [
    f"CREATE INDEX IF NOT EXISTS executions_ended ON executions (nominal_at, id) WHERE {_ENDED}",
    f"CREATE INDEX IF NOT EXISTS executions_ended_tenant ON executions (tenant, nominal_at, id) WHERE {_ENDED}",
    f"CREATE INDEX IF NOT EXISTS executions_ended_job ON executions (job_id, nominal_at, id) WHERE {_ENDED}",
    f"CREATE INDEX IF NOT EXISTS executions_not_started ON executions (nominal_at, id) WHERE {_NOT_STARTED}",
    f"CREATE INDEX IF NOT EXISTS executions_not_started_job ON executions (job_id, nominal_at, id) WHERE {_NOT_STARTED}",
]
_DROP = ["executions_job", "executions_active", "executions_nominal", "executions_tenant_nominal"]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    for statement in _CREATE:
        conn.execute(text(statement))
    for name in _DROP:
        drop_index(conn, name)
