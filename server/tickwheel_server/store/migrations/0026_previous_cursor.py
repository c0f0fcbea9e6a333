"""``jobs.next_nominal_at``: the nominal cursor of a job whose claim is due earlier (the ``previous`` rule).

The claim scans ``jobs_due`` by ``next_run_at`` and reaches an occurrence one
look-ahead before that instant. A job whose calendar rule is ``previous``
may run days before its nominal instant (a Monday holiday's run on the
Friday before), so for it ``next_run_at`` holds the instant the rule moved
the cursor's occurrence to, the scan key, and this column the nominal
instant (what the execution id and the schedule's walk start from). NULL on
every other row: there ``next_run_at`` is the nominal cursor as before, so
nothing else reads or writes differently (docs/architecture.md, Calendars).

A plain nullable column, added the same way on every engine; no index (the
claim's scan stays on ``jobs_due``). Existing jobs have NULL: no job could
name ``previous`` before this change.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "jobs", "next_nominal_at BIGINT")
