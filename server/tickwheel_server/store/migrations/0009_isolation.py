"""Isolation: overlap policy, concurrency keys, tenant caps, fair hand-out and
the cancel signal for running executions.

On ``executions``:

- ``allow_overlap``: the request that created it (TriggerJob, BackfillJob)
  said it may run beside a running execution of its job; the overlap policy
  then leaves it alone. False for everything the dispatcher creates.
- ``wait_key``: while ``waiting`` behind a concurrency key, that key; NULL
  while waiting behind its own job (overlap). It stays set when a freed slot
  wakes the execution (``scheduled`` again), so a woken execution that is
  canceled before it starts hands its turn on; the hand-out clears it.
- ``waiting_since``: when the current attempt first had to wait (overlap or
  key); NULL if it has not. The attempt row's ``waited_us`` is the hand-out
  instant minus it: waiting is measured, never hidden (lateness keeps
  counting from the due instant as well).
- ``held_keys``: while ``running``, the concurrency keys whose slots the
  hand-out took for it (a JSON list); whatever ends the delivery gives back
  exactly these, whatever the job's definition says by then. NULL for a
  delivery that took none (also one handed out before this migration).
- ``cancel_requested_at``, ``cancel_reason``: set on a ``running`` execution
  by whoever decides to stop it (CancelExecution, an overlap ``replace``);
  the server whose session owns it tells its worker. Its end then becomes
  ``canceled`` with that reason, also when the worker dies meanwhile.

``attempts.waited_us``: how long the attempt waited for its job or a key.

``concurrency_keys``: one row per (tenant, key) with its limit
(``max_running``, set by the most recent job write naming the key, at
``limit_set_at``) and the slots taken (``running``). Every status change that
takes or gives back slots updates the row in the same transaction, holding
its row lock, so the limit holds exactly across servers.

``tenant_gates``: one row per tenant with a concurrency cap. A hand-out that
counts a capped tenant's running executions writes the row first, so
hand-outs for one tenant take turns and each counts what the previous one
committed (``rounds`` counts them).

Indexes:

- ``executions_tenant_ready (tenant, ready_at) WHERE status = 'scheduled'``:
  the fair hand-out's per-tenant candidate scans (ORDER BY ready_at with a
  LIMIT each) and its probe for tenants with ready work (the first entry of a
  tenant). ``executions_ready (ready_at)`` stays: the oldest ready across
  tenants (lateness alerts, queue depths) is read from it.
- ``executions_active (job_id, nominal_at) WHERE status IN (scheduled,
  waiting, running)``: a job's executions that have not ended, oldest
  first, for the overlap policy (what is ahead of an occurrence), without
  reading its retained history.
- ``executions_busy (job_id) WHERE status = 'running' OR (status =
  'scheduled' AND attempt > 1)``: a job's executions that run or wait for
  a retry (a retry wait counts as running), however long its queue.
- ``executions_key_waits (tenant, wait_key, ready_at) WHERE status =
  'waiting'``: a key's queue, oldest ready first.
- ``executions_job_waits (job_id, nominal_at) WHERE status = 'waiting' AND
  wait_key IS NULL``: a job's own queue, oldest first, woken one at a time
  when one of its executions ends (whatever else the job has not started).
- ``executions_waiting (ready_at) WHERE status = 'waiting'``: the oldest
  waiting across tenants, as ``executions_ready`` gives the oldest ready:
  an execution held back by its job or a key is late like any other.
- ``executions_running_tenant (tenant) WHERE status = 'running'``: a capped
  tenant's running executions, counted.
- ``executions_cancel_requested (owner) WHERE status = 'running' AND
  cancel_requested_at IS NOT NULL``: what a server must tell its workers to
  stop; almost always empty, read about once a second by every server.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column

_COLUMNS = [
    ("executions", "allow_overlap BOOLEAN NOT NULL DEFAULT FALSE"),
    ("executions", "wait_key TEXT"),
    ("executions", "waiting_since BIGINT"),
    ("executions", "held_keys TEXT"),
    ("executions", "cancel_requested_at BIGINT"),
    ("executions", "cancel_reason TEXT"),
    ("attempts", "waited_us BIGINT NOT NULL DEFAULT 0"),
]
_DDL = [
    """
    CREATE TABLE IF NOT EXISTS concurrency_keys (
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        max_running INTEGER NOT NULL,
        running INTEGER NOT NULL,
        limit_set_at BIGINT NOT NULL,
        PRIMARY KEY (tenant, name)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS tenant_gates (
        tenant TEXT PRIMARY KEY,
        rounds BIGINT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS executions_tenant_ready ON executions (tenant, ready_at) WHERE status = 'scheduled'",
    "CREATE INDEX IF NOT EXISTS executions_active ON executions (job_id, nominal_at) "
    "WHERE status IN ('scheduled', 'waiting', 'running')",
    "CREATE INDEX IF NOT EXISTS executions_busy ON executions (job_id) "
    "WHERE (status = 'running' OR (status = 'scheduled' AND attempt > 1))",
    "CREATE INDEX IF NOT EXISTS executions_key_waits ON executions (tenant, wait_key, ready_at) WHERE status = 'waiting'",
    "CREATE INDEX IF NOT EXISTS executions_waiting ON executions (ready_at) WHERE status = 'waiting'",
    "CREATE INDEX IF NOT EXISTS executions_job_waits ON executions (job_id, nominal_at) "
    "WHERE status = 'waiting' AND wait_key IS NULL",
    "CREATE INDEX IF NOT EXISTS executions_running_tenant ON executions (tenant) WHERE status = 'running'",
    "CREATE INDEX IF NOT EXISTS executions_cancel_requested ON executions (owner) "
    "WHERE status = 'running' AND cancel_requested_at IS NOT NULL",
]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    for table, column in _COLUMNS:
        add_column(conn, caps, table, column)
    for statement in _DDL:
        conn.execute(text(statement))
