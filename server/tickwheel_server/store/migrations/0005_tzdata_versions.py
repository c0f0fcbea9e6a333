"""tzdata versions: the zone fingerprints of every tzdata release a server ran.

One row per IANA release (``version``, such as ``"2026f"``), written by each
server at start if absent. ``fingerprints`` is a JSON object mapping every
zone key of that release to its offset digest
(:func:`tickwheel_server.schedule.zones.zone_fingerprints`), so a later server
on another release can tell which zones' rules changed without having the old
release installed. ``recorded_at`` is microseconds since the epoch, UTC.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(
        text(
            """
            CREATE TABLE IF NOT EXISTS tzdata_versions (
                version TEXT PRIMARY KEY,
                fingerprints TEXT NOT NULL,
                recorded_at BIGINT NOT NULL
            )
            """
        )
    )
