"""Live worker credentials newest first: ``worker_credentials_live_newest
(created_at DESC, id) WHERE revoked_at IS NULL``, the order of a page of
ListWorkerCredentials (``store/credentials.py``, ``store/base.py``
``newest_first``).

Without it every page read every live credential and sorted them, of all
tenants, to answer 1 000 at most (EXPLAIN: Sort over a Seq Scan of the
table). With it a page walks the index from the previous page's last
(created_at, id), an index condition, and stops after its LIMIT: an
unfiltered page reads what it answers and one more; a page filtered by
tenant (a name in the row's JSON list, found by ``strpos``: no index
serves it) reads the live credentials from there until it has its page, so
a tenant with few credentials among many costs a walk of the others, never
a sort (``tests/integration/test_credential_pages_explain.py``). A revoked
credential leaves the index. Credentials are few and written rarely (an
operator's call each); the index is built in the migration's transaction.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text(
        "CREATE INDEX IF NOT EXISTS worker_credentials_live_newest ON worker_credentials (created_at DESC, id) "
        "WHERE revoked_at IS NULL"
    ))
