"""``tenants.job_count`` goes: ``tenant_quota`` holds the count now (the sum
of its slots' ``used``), and nothing writes the old column any more."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import drop_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    drop_column(conn, caps, "tenants", "job_count")
