"""The max-jobs quota in slots: ``tenant_quota``, filled from ``tenants.job_count``.

Every create of a tenant used to add one to ``tenants.job_count`` in its
transaction, so concurrent creates of one tenant serialised on that row (and
under SERIALIZABLE failed with 40001 once their retries ran out). The count
now lives in :data:`~tickwheel_server.policy.quota.SLOTS` rows per tenant,
``tenant_quota(tenant, slot, used, allowance)``: a create takes units from
one slot, a delete gives its unit back to the slot that counted the job
(``jobs.quota_slot``, the next migration), and
:func:`~tickwheel_server.policy.quota.deal` spreads the rest of
``max_jobs`` over the slots as allowances (docs/architecture.md, "Job
writes at scale"). Here each existing tenant's count goes to slot 0, where
the next migration puts every existing job.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.policy.quota import deal
from tickwheel_server.store.engine import Capabilities


def upgrade(conn: Connection, caps: Capabilities) -> None:
    conn.execute(text(
        "CREATE TABLE IF NOT EXISTS tenant_quota ("
        " tenant TEXT NOT NULL,"
        " slot INTEGER NOT NULL,"
        " used BIGINT NOT NULL,"
        " allowance BIGINT NOT NULL,"
        " PRIMARY KEY (tenant, slot))"
    ))  # fmt: skip
    rows = []
    for name, max_jobs, job_count in conn.execute(text("SELECT name, max_jobs, job_count FROM tenants")).all():
        for slot, (used, allowance) in deal({0: job_count}, max_jobs).slots.items():
            rows.append(dict(tenant=name, slot=slot, used=used, allowance=allowance))
    if rows:
        conn.execute(
            text(
                "INSERT INTO tenant_quota (tenant, slot, used, allowance) VALUES (:tenant, :slot, :used, :allowance) "
                "ON CONFLICT (tenant, slot) DO NOTHING"  # run again after a stop halfway (CockroachDB)
            ),
            rows,
        )
