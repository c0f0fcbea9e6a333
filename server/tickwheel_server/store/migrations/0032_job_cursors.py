"""``job_cursors``: a job's cursor in a narrow row of its own, which the claim writes instead of ``jobs``.

The claim's cursor UPDATE was never a HOT update (it moves ``next_run_at``,
the key of ``jobs_due``), so every claimed job wrote a whole new ``jobs``
row, its definition included, and an entry in each of its indexes (five for
an active job). ``job_cursors (job_id, tenant, partition, state, version,
next_run_at, next_due_at, run_count, next_nominal_at)`` has only its
primary key and ``job_cursors_due (partition, next_run_at) WHERE state =
'active'``, the index ``jobs_due`` was: the claim reads due cursors through
it, the definitions its cache lacks by ``jobs``' primary key, and writes
only cursors (loadtest/RESULTS.md, "A narrow cursor table"). ``tenant``
and ``version`` are copies the claim needs per row (the tenant's state,
the cache's key); only a job write changes the version, and it writes
both rows.

The columns move: ``jobs`` loses ``next_run_at``, ``next_due_at``,
``run_count`` and ``next_nominal_at`` and its index ``jobs_due``, so no
reader can take a value the claim no longer keeps there. ``jobs.state``
stays: ``jobs_active_zone`` is partial on it (the tzdata recompute's
read), and a job write (create, update, pause, resume) writes it beside
the cursor's; the claim completes a job in its cursor only, so the
cursor's ``state`` is the job's.

The copy is bounded. :func:`prepare` creates the table in a transaction
of its own; :func:`backfill` then copies :data:`BATCH` jobs a transaction,
in id order, as an upsert (a batch repeated after a crash, or by a second
server migrating at once, rewrites the same rows), so ten million jobs
are a thousand transactions, none holding more than a batch's writes (one
statement's transaction of every job is more than CockroachDB takes well).
:func:`upgrade`, in the migration's own transaction with its version row
(on CockroachDB each statement a transaction of its own, the copy skipped
when run again after the drops began: ``store/migrate_steps.py``), copies
the jobs created since the last batch (normally none), builds the index,
drops ``jobs_due`` and the moved columns. Servers of the previous
release cannot run on the result (their claim writes ``jobs.next_run_at``):
stop them, migrate, start the new release (docs/operations.md).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import drop_column, drop_index, has_column

BATCH = 10_000
"""Jobs copied per backfill transaction."""

_CREATE = """
CREATE TABLE IF NOT EXISTS job_cursors (
    job_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    partition INTEGER NOT NULL,
    state TEXT NOT NULL,
    version BIGINT NOT NULL,
    next_run_at BIGINT,
    next_due_at BIGINT,
    run_count BIGINT NOT NULL,
    next_nominal_at BIGINT
)
"""
_COLUMNS = "job_id, tenant, partition, state, version, next_run_at, next_due_at, run_count, next_nominal_at"
_SOURCE = "id, tenant, partition, state, version, next_run_at, next_due_at, run_count, next_nominal_at"
_COPY = (
    f"INSERT INTO job_cursors ({_COLUMNS}) SELECT {_SOURCE} FROM jobs "
    "WHERE id > :after{upper} "
    "ON CONFLICT (job_id) DO UPDATE SET tenant = excluded.tenant, partition = excluded.partition, "
    "state = excluded.state, version = excluded.version, "
    "next_run_at = excluded.next_run_at, next_due_at = excluded.next_due_at, run_count = excluded.run_count, "
    "next_nominal_at = excluded.next_nominal_at"
)
_MOVED = ("next_run_at", "next_due_at", "run_count", "next_nominal_at")


def prepare(conn: Connection, caps: Capabilities) -> None:
    """The table, before any batch (again after a crash: IF NOT EXISTS)."""
    conn.execute(text(_CREATE))


def backfill(conn: Connection, caps: Capabilities, after: str) -> str | None:
    """Copy the cursors of the next :data:`BATCH` jobs by id after
    ``after``; the last id copied, or None when none are left after it
    (or the columns are gone: the migration stopped after its drops and
    runs again, on CockroachDB)."""
    if not has_column(conn, caps, "jobs", _MOVED[0]):
        return None
    upper = conn.execute(
        text("SELECT id FROM jobs WHERE id > :after ORDER BY id LIMIT 1 OFFSET :skip"),
        dict(after=after, skip=BATCH - 1),
    ).scalar()
    if upper is None:
        conn.execute(text(_COPY.format(upper="")), dict(after=after))
        return None
    conn.execute(text(_COPY.format(upper=" AND id <= :upper")), dict(after=after, upper=upper))
    return upper


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text(_CREATE))  # a database migrated without the backfill's steps (a test's target)
    # The copy reads the columns dropped below, in order, after it: on
    # CockroachDB a run stopped after the first drop runs again without it.
    if has_column(conn, caps, "jobs", _MOVED[0]):
        conn.execute(text(
            f"INSERT INTO job_cursors ({_COLUMNS}) SELECT {_SOURCE} FROM jobs "
            "WHERE NOT EXISTS (SELECT 1 FROM job_cursors AS c WHERE c.job_id = jobs.id)"
        ))  # fmt: skip
    conn.execute(text(
        "CREATE INDEX IF NOT EXISTS job_cursors_due ON job_cursors (partition, next_run_at) WHERE state = 'active'"
    ))
    drop_index(conn, "jobs_due")
    for column in _MOVED:
        drop_column(conn, caps, "jobs", column)
    if caps.is_postgres:
        # Vacuumed as ``jobs`` was (migration 0007): every claim rewrites
        # the claimed cursors, leaving dead entries at the head of the index.
        conn.execute(text(
            "ALTER TABLE job_cursors SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 10000, "
            "autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 10000)"
        ))  # fmt: skip
