"""``jobs.calendar``: the business-day calendar a job names ('' for none).

Kept beside the definition so that the jobs naming a calendar are found
without reading definitions: DeleteCalendar counts them (and refuses while
there are any), UpdateCalendar walks them in id order, page by page, to
re-decide their created runs. The index holds only the jobs that name a
calendar, so jobs without one cost no entry.
Existing jobs name none (no job could before this change).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "jobs", "calendar TEXT NOT NULL DEFAULT ''")
    conn.execute(text("CREATE INDEX IF NOT EXISTS jobs_calendar ON jobs (tenant, calendar, id) WHERE calendar <> ''"))
