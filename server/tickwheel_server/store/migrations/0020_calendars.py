"""Business-day calendars: ``calendars`` and the request ids that created them.

A calendar is keyed by ``(tenant, name)``. Its definition (zone, business
weekdays, holidays, half-days) is the serialised ``tickwheel.v1.Calendar``
in ``spec``, output-only fields and the name cleared; ``time_zone`` beside
 ``request_id`` is the
CreateCalendar request that created the row: a repeat of it finds this row
only while this row (not a later calendar of the same name) exists.
``calendar_requests`` remembers each create's request id for 24 hours
(pruned by the tenant's next create, through ``calendar_requests_created``).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities

_DDL = [
    """
    CREATE TABLE IF NOT EXISTS calendars (
        tenant TEXT NOT NULL REFERENCES tenants (name),
        name TEXT NOT NULL,
        spec {bytes} NOT NULL,
        time_zone TEXT NOT NULL,
        business_days INTEGER NOT NULL,
        holiday_count INTEGER NOT NULL,
        half_day_count INTEGER NOT NULL,
        request_id TEXT NOT NULL,
        version BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (tenant, name)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS calendar_requests (
        tenant TEXT NOT NULL,
        request_id TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (tenant, request_id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS calendar_requests_created ON calendar_requests (tenant, created_at)",
]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    binary = "BLOB" if caps.is_sqlite else "BYTEA"
    for statement in _DDL:
        conn.execute(text(statement.format(bytes=binary)))
