"""The pending-manual-runs quota in slots: ``tenants.max_pending_manual_runs``,
``manual_quota (tenant, slot, used, allowance)`` and ``executions.manual_slot``.

The same rule as the max-jobs quota's (``policy/quota.py``): a trigger or
backfill takes its units from one slot with a conditional update, and each
manual run names the slot that counts it in ``executions.manual_slot`` until
it starts or ends, when the unit goes back (docs/architecture.md, "Manual
runs under a quota"). Every existing tenant gets the default and its slots
dealt empty: manual runs created before this migration are not counted (the
column is NULL for every existing row), so nothing is read from
``executions`` here.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.policy.quota import deal
from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column

DEFAULT = 100_000


def upgrade(conn: Connection, caps: Capabilities) -> None:
    add_column(conn, caps, "tenants", f"max_pending_manual_runs BIGINT NOT NULL DEFAULT {DEFAULT}")
    add_column(conn, caps, "executions", "manual_slot INTEGER")
    conn.execute(text(
        "CREATE TABLE IF NOT EXISTS manual_quota ("
        " tenant TEXT NOT NULL,"
        " slot INTEGER NOT NULL,"
        " used BIGINT NOT NULL,"
        " allowance BIGINT NOT NULL,"
        " PRIMARY KEY (tenant, slot))"
    ))  # fmt: skip
    rows = []
    for name, limit in conn.execute(text("SELECT name, max_pending_manual_runs FROM tenants")).all():
        for slot, (used, allowance) in deal({}, limit).slots.items():
            rows.append(dict(tenant=name, slot=slot, used=used, allowance=allowance))
    if rows:
        conn.execute(
            text(
                "INSERT INTO manual_quota (tenant, slot, used, allowance) VALUES (:tenant, :slot, :used, :allowance) "
                "ON CONFLICT (tenant, slot) DO NOTHING"  # run again after a stop halfway (CockroachDB)
            ),
            rows,
        )
