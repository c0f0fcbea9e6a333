"""``jobs.tenant`` without its foreign key on PostgreSQL and CockroachDB: the
create checks the tenant once per batch, not once per row.

The key made PostgreSQL check every inserted job against ``tenants`` with
a trigger of its own after the statement (a lookup of the tenant's row and
a ``FOR KEY SHARE`` lock on it, per row), a large share of the backend's
CPU in a BatchCreateJobs call (loadtest/RESULTS.md, "BatchCreateJobs'
write (issue 21)"). It guarded nothing the store does not already
guarantee:

- Every job is inserted by :func:`tickwheel_server.store.jobcreate.create_jobs`,
  whose first statement, in the same transaction, reads the tenant's limits
  and refuses the whole call with NotFound (nothing written) when the
  tenant does not exist.
- A tenant is never deleted and its name, the key, never changes
  (:mod:`tickwheel_server.store.tenants` has no such write), so a tenant read
  at the start of the transaction still exists at its commit.

SQLite keeps the key: it cannot drop a constraint without rebuilding the
table, and its check is one lookup in the same file (SQLite is not where
bulk creates are measured). The key's name depends on the engine and its
version (``jobs_tenant_fkey``; ``fk_tenant_ref_tenants`` on older
CockroachDB), so it is read from ``information_schema``, which both have.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities

_KEYS = (
    "SELECT constraint_name FROM information_schema.table_constraints "
    "WHERE table_schema = current_schema() AND table_name = 'jobs' AND constraint_type = 'FOREIGN KEY'"
)


def upgrade(conn: Connection, caps: Capabilities) -> None:
    if caps.is_sqlite:
        return
    for (name,) in conn.execute(text(_KEYS)).all():
        quoted = '"' + name.replace('"', '""') + '"'
        conn.execute(text(f"ALTER TABLE jobs DROP CONSTRAINT {quoted}"))
