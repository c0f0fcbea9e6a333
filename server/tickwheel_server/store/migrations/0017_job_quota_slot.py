"""``jobs.quota_slot``: the ``tenant_quota`` slot that counts the job.

Deleting a job gives its unit back to this slot, so every slot's ``used`` is
exactly the number of the tenant's jobs that name it. Existing jobs are in
slot 0, where the previous migration put each tenant's count.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "jobs", "quota_slot INTEGER NOT NULL DEFAULT 0")
