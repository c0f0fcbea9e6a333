"""A tenant's paused jobs in id order: ``jobs_tenant_paused (tenant, id)
WHERE state = 'paused'``, the path of a page of jobs filtered by the state
``paused`` (ListJobs, SearchJobs with a tenant: :mod:`.jobpages`).

Without it such a page read the tenant's jobs in id order until it found
a page of paused ones: every job of a tenant that has few paused (the
common case), each with its cursor. On ``jobs`` and not ``job_cursors``:
``paused`` is set and cleared only by job writes (pause, resume, their
batches), which write both rows, so ``jobs.state = 'paused'`` holds for
exactly the paused jobs; the claim writes ``job_cursors`` only, so the
index costs it nothing, while one on the cursors would cost each claimed
job an index entry (a claim's update moves ``next_run_at``, so it is never
a heap-only update). A job costs an entry while it is paused only.

``completed`` is the cursor's state alone (a claim completes a job in its
cursor), so it has no such index: a page of completed jobs reads the
tenant's jobs in id order (see :mod:`.jobpages`). The index is built in the
migration's transaction: on a large table that holds writes while it
builds, so run ``tickwheel migrate`` at a quiet time.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text("CREATE INDEX IF NOT EXISTS jobs_tenant_paused ON jobs (tenant, id) WHERE state = 'paused'"))
