"""``tenants.job_count`` goes: ``tenant_quota`` holds the count now (the sum
of its slots' ``used``), and nothing writes the old column any more."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text("ALTER TABLE tenants DROP COLUMN job_count"))
