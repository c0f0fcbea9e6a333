"""Raw reads and writes of a job's row and its cursor's (``job_cursors``,
migration 0032), as tests set up what a newer version, a bad migration or a
claim would leave."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel_server.store.jobrecords import select_jobs
from tickwheel_server.store.tables import job_cursors, jobs

CURSOR_ONLY = {"next_run_at", "next_due_at", "run_count", "next_nominal_at"}
"""Columns only the cursor has; ``tenant``, ``partition``, ``state`` and ``version`` are in both rows."""


def write_job(conn: Connection, job_id: str, **values) -> None:
    """Write ``values`` to the job's row and its cursor's, each column where it is."""
    on_job = {k: v for k, v in values.items() if k not in CURSOR_ONLY}
    on_cursor = {k: v for k, v in values.items() if k in CURSOR_ONLY or k in ("tenant", "partition", "state", "version")}
    if on_job:
        conn.execute(jobs.update().where(jobs.c.id == job_id).values(**on_job))
    if on_cursor:
        conn.execute(job_cursors.update().where(job_cursors.c.job_id == job_id).values(**on_cursor))


def job_row(conn: Connection, job_id: str) -> sa.Row:
    """The job's row joined to its cursor (the cursor's state)."""
    return conn.execute(select_jobs().where(jobs.c.id == job_id)).one()


def delete_job(conn: Connection, job_id: str) -> None:
    """The job's row and its cursor gone, as a delete leaves them."""
    conn.execute(job_cursors.delete().where(job_cursors.c.job_id == job_id))
    conn.execute(jobs.delete().where(jobs.c.id == job_id))


def insert_jobs(conn: Connection, rows: list[dict]) -> None:
    """Insert job rows given as before migration 0032 (cursor columns
    included, missing ones defaulted): each a ``jobs`` row and its cursor;
    on a database migrated to an earlier version, the rows as given."""
    if not rows:
        return
    migrated = sa.text("SELECT count(*) FROM schema_migrations WHERE version = 32")  # plain SQL: traced tests check it
    if not conn.execute(migrated).scalar():
        conn.execute(sa.table("jobs", *(sa.column(name) for name in rows[0])).insert(), rows)
        return
    conn.execute(jobs.insert(), [{k: v for k, v in row.items() if k not in CURSOR_ONLY} for row in rows])
    conn.execute(job_cursors.insert(), [
        dict(
            job_id=row["id"], tenant=row["tenant"], partition=row["partition"], state=row["state"],
            version=row.get("version", 1), next_run_at=row.get("next_run_at"),
            next_due_at=row.get("next_due_at"), run_count=row.get("run_count", 0),
            next_nominal_at=row.get("next_nominal_at"),
        )
        for row in rows
    ])  # fmt: skip
