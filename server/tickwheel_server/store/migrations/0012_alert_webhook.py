"""What the alert webhook has sent of each alert.

``alerts.notified``: ``''`` nothing sent yet, ``'raised'`` the raise was
sent, ``'resolved'`` the resolve too (an alert resolved before its raise
was sent gets both, in that order). NULL for alerts raised before this
migration: they are never sent, so turning the webhook on does not replay
history. The sender (one server: the elected reaper's leader) finds what is
owed through ``alerts_webhook``, a partial index holding only those rows
(``notified = ''``, or ``'raised'`` and resolved since), oldest change first;
it is small and nearly always empty while a sink is configured. Without a
sink it holds the alerts raised since, until retention prunes the resolved
ones. A plain nullable column and an index, the same on every engine.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column

_DDL = [
    "CREATE INDEX IF NOT EXISTS alerts_webhook ON alerts (changed_at, id) "
    "WHERE notified = '' OR (notified = 'raised' AND resolved_at IS NOT NULL)",
]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "alerts", "notified TEXT")
    for statement in _DDL:
        conn.execute(text(statement))
