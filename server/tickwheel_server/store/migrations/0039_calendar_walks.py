"""``calendar_walks``: the re-decision of a calendar's created runs still in progress.

UpdateCalendar commits the new definition at once and re-decides the
created runs of the jobs naming the calendar afterwards, a page of jobs per
transaction (``store/calendarwalk.py``). One row per calendar whose walk is
not finished, keyed like the calendar: the ``version`` being walked (a
newer update overwrites it: the walk starts again), ``after_job`` (the last
job id walked, jobs are walked in id order; '' before the first page),
what it has found so far (``job_count`` naming the calendar when it began,
``changed_count``, ``reported``: the first changed runs as JSON, for the
response and the alert), and ``held_until``, the instant until which the
walker that last wrote it is presumed alive (the reaper's duty resumes a
walk past it). The row goes when the walk ends.

Rows are few (one per calendar being changed) and short-lived; the
hand-out reads the rows of the tenants whose candidates name a calendar
(by primary key prefix), so no other index is needed.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text(
        """
        CREATE TABLE IF NOT EXISTS calendar_walks (
            tenant TEXT NOT NULL,
            calendar TEXT NOT NULL,
            version BIGINT NOT NULL,
            after_job TEXT NOT NULL,
            job_count BIGINT NOT NULL,
            changed_count BIGINT NOT NULL,
            reported TEXT NOT NULL,
            started_at BIGINT NOT NULL,
            held_until BIGINT NOT NULL,
            PRIMARY KEY (tenant, calendar)
        )
        """
    ))
