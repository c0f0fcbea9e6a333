"""``job_revisions``: the definitions applied updates replaced, the last
:data:`~tickwheel_server.store.revisions.KEEP` per job (docs/architecture.md,
"Job changes"). Keyed by (job, version): a revision is read by its job and
version, listed newest first by a range scan of one job's rows, and pruned
by the same scan."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    binary = "BLOB" if caps.is_sqlite else "BYTEA"
    conn.execute(text(
        "CREATE TABLE IF NOT EXISTS job_revisions ("
        " job_id TEXT NOT NULL,"
        " version BIGINT NOT NULL,"
        " tenant TEXT NOT NULL,"
        " name TEXT NOT NULL,"
        f" spec {binary} NOT NULL,"
        " version_at BIGINT NOT NULL,"
        " changed_at BIGINT NOT NULL,"
        " changed_by TEXT NOT NULL,"
        " update_mask TEXT NOT NULL,"
        " changed_to_version BIGINT NOT NULL,"
        " PRIMARY KEY (job_id, version))"
    ))  # fmt: skip
