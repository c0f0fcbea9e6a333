"""The start's plan on PostgreSQL (issue 17: a burst's fifteen starts of
2 000 must fit in its one-second window): its overlap guard's "ahead of
it" probes each read one range of their index that ends before the row
being started, whatever the statistics.

Written as ``nominal_at < e.nominal_at OR (nominal_at = e.nominal_at AND
id < e.id)``, the probe on ``executions_armed_job`` was bounded only by
``nominal_at <= e.nominal_at`` and read the row being started (armed
too), and its heap page, for every row of the batch; on a table never
analysed of a million rows both probes became two bitmap scans each
(loadtest/RESULTS.md, "the start's plan"). A row comparison is one range
of the index's (nominal_at, id)."""

from __future__ import annotations

import pytest

from tickwheel_server.store.arming import _START
from tickwheel_server.store.tenants import Tenant, TenantStore

from tests.support.plans import nodes, plan

pytestmark = pytest.mark.postgres

ARMED = 3_000
BATCH = 2_000
AHEAD = ("executions_armed_job", "executions_not_started_job", "executions_not_started")
"""The indexes an "ahead of it" probe may read."""


@pytest.fixture
async def engine(migrated_engine, clock):
    """A burst: one armed one-off of its own job each, owner s1, never analysed."""
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plans")
    burst = ("INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
             "delivery, status, owner, handler, missed_count, reap_count, payload, error, dead_reason, created_at) "
             "SELECT 'x' || lpad(g::text, 6, '0'), 'job_' || lpad(g::text, 6, '0'), 'acme', 0, 'once', 1000, 1000, "
             f"1000, 1, 1, 'armed', 's1', 'echo', 0, 0, '', '', '', 0 FROM generate_series(1, {ARMED}) AS g")
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    with migrated_engine.begin() as conn:
        conn.exec_driver_sql(burst)
    return migrated_engine


def _probes(top: dict) -> list[dict]:
    return [n for n in nodes(top) if n.get("Index Name") in AHEAD]


@pytest.mark.parametrize("analysed", [False, True], ids=["never-analysed", "analysed"])
@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
async def test_the_start_s_guard_reads_only_what_is_ahead_of_the_row(engine, analysed, mode) -> None:
    if analysed:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE executions")
            conn.exec_driver_sql("ANALYZE tenants")
    ids = [f"x{g:06d}" for g in range(1, BATCH + 1)]
    top = plan(engine, _START, dict(ids=ids, deliveries=[1] * BATCH, beside=[False] * BATCH,
                                    workers=["w1"] * BATCH, owner="s1", at=2000), mode=mode)
    probes = _probes(top)
    shown = [(n["Node Type"], n.get("Index Name"), n.get("Index Cond")) for n in nodes(top)]
    assert {n.get("Index Name") for n in probes} & {"executions_armed_job"}, shown
    assert not [n for n in nodes(top) if n["Node Type"] == "BitmapOr"], shown
    # Each probe's range ends before the started row: its id is in the index's condition.
    assert all("e.id" in n.get("Index Cond", "") for n in probes), shown
