"""The ``skipped`` and ``partition_unowned`` alerts, on SQLite and PostgreSQL
with a fake clock.

- A claim whose misfire policy skips occurrences raises the job's
  ``skipped`` alert in its transaction; the next claim extending the range
  raises it again (one alert, count 2); a paused tenant's ranges raise none.
- A hand-out round whose overlap policy skips occurrences raises it through
  the ``on_skip`` hook, with the range of what it skipped.
- The alert resolves once an occurrence after the last one skipped ran to an
  end, not before (not while it runs, not for an older one), or once the job
  is deleted.
- A partition unowned for longer than the grace raises one alert (seen again
  each pass), resolved when owned again; a brief gap raises nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.alerts.catalogue import partition_unowned_key, skipped_alert, skipped_key
from tickwheel_server.alerts.skipped import SkipWatch, overlap_alerts
from tickwheel_server.alerts.unowned import UnownedWatch
from tickwheel_server.policy.backlog import NOT_STARTED_CAP
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.skipped import SkipWatchStore
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_dispatch_claim import MINUTE, NOW, OWNED, World, cron_job
from .test_isolation import Server, occurrences, spec
from .test_isolation import tenants  # noqa: F401 - fixture


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    created = World(migrated_engine, clock)
    created.alerts = AlertStore(migrated_engine, clock)
    created.dispatch = DispatchStore(migrated_engine, clock, alerts=created.alerts)
    return created


def finish(engine, ident: str, status: str = "succeeded") -> None:
    with engine.begin() as conn:
        conn.execute(executions.update().where(executions.c.id == ident).values(status=status, delivery=1))


async def test_a_misfire_skip_raises_one_alert_per_job_that_resolves_when_a_later_occurrence_ran(world, clock):
    job = await world.create(cron_job(), NOW - 10 * MINUTE)
    result = await world.dispatch.claim_due(OWNED, NOW)
    assert (result.skipped, result.alerts_raised) == (8, 1)
    alert = await world.alerts.get(skipped_key(job.id))
    assert (alert.kind, alert.tenant, alert.job_id, alert.count) == ("skipped", "acme", job.id, 1)
    assert alert.details["reason"] == "misfire" and alert.details["count"] == "8"
    assert alert.details["to_us"] == str(to_us(NOW - 3 * MINUTE))
    watch = SkipWatch(SkipWatchStore(world.engine, clock, world.alerts))
    assert await watch.check_once() == 0  # nothing after the range ran yet
    rows = {row.nominal_at: row.id for row in world.execution_rows().values()}
    catch_up = rows[to_us(NOW - 2 * MINUTE)]  # the run_once execution standing for the missed ones
    with world.engine.begin() as conn:
        conn.execute(executions.update().where(executions.c.id == catch_up).values(status="running", delivery=1))
    assert await watch.check_once() == 0, "still running: not yet run"
    finish(world.engine, catch_up)
    assert await watch.check_once() == 1
    assert await world.alerts.get(skipped_key(job.id)) is None


async def test_a_claim_extending_the_range_raises_the_alert_again_and_a_paused_tenant_raises_none(world, clock):
    job = await world.create(cron_job(), NOW - 10 * MINUTE)
    await world.dispatch.claim_due(OWNED, NOW, lookahead=timedelta(0))
    # The dispatcher was away again: the next claim misses more, extending the range.
    clock.advance(5 * 60)
    result = await world.dispatch.claim_due(OWNED, clock.now(), lookahead=timedelta(0))
    assert result.skipped > 0
    alert = await world.alerts.get(skipped_key(job.id))
    assert alert.count == 2
    assert int(alert.details["to_us"]) > to_us(NOW - 3 * MINUTE), "the details carry the latest range"

    paused = await world.create(cron_job(), clock.now() - 10 * MINUTE)
    await TenantStore(world.engine, clock).pause("acme")
    result = await world.dispatch.claim_due(OWNED, clock.now(), lookahead=timedelta(0))
    assert result.skipped >= 10 and result.alerts_raised == 0
    assert await world.alerts.get(skipped_key(paused.id)) is None


async def test_a_backlog_skip_raises_the_alert_and_a_run_after_it_resolves_it(world, clock):
    """A job no worker takes: past its cap the claim's backlog range raises
    the job's ``skipped`` alert (reason ``backlog``); once an occurrence
    after the range ran, it resolves."""
    job = await world.create(cron_job(), NOW + MINUTE)
    for _ in range(NOT_STARTED_CAP):
        await world.dispatch.claim_due(OWNED, clock.now())
        clock.advance(60)
    result = await world.dispatch.claim_due(OWNED, clock.now())
    assert (result.skipped, result.backlogged, result.alerts_raised) == (1, 1, 1)
    alert = await world.alerts.get(skipped_key(job.id))
    assert (alert.details["reason"], alert.details["count"]) == ("backlog", "1")
    watch = SkipWatch(SkipWatchStore(world.engine, clock, world.alerts))
    for ident in list(world.execution_rows()):
        finish(world.engine, ident)  # a worker came: the kept ones ran, all before the range
    assert await watch.check_once() == 0
    clock.advance(60)
    result = await world.dispatch.claim_due(OWNED, clock.now())  # room again: the next occurrence
    [after] = [e.id for e in result.executions]
    finish(world.engine, after)
    assert await watch.check_once() == 1
    assert await world.alerts.get(skipped_key(job.id)) is None


async def test_a_deleted_jobs_skipped_alert_resolves(world, clock):
    job = await world.create(cron_job(), NOW - 10 * MINUTE)
    await world.dispatch.claim_due(OWNED, NOW)
    await world.jobs.delete("acme", job.id)
    assert await SkipWatch(SkipWatchStore(world.engine, clock, world.alerts)).check_once() == 1


async def test_an_overlap_skip_raises_the_alert_through_the_hand_out_hook(migrated_engine, clock, tenants):  # noqa: F811
    alerts = AlertStore(migrated_engine, clock)
    first, second, third, fourth = occurrences(migrated_engine, clock, "job_s", 4, job=spec())
    server = Server(migrated_engine, clock, "s1",
                    on_skip=lambda conn, skipped: alerts.raise_many_in(conn, overlap_alerts(skipped)))  # fmt: skip
    [running] = await server.claim()
    assert await alerts.get(skipped_key("job_s")) is None
    clock.advance(60)
    assert await server.claim() == []
    alert = await alerts.get(skipped_key("job_s"))
    assert (alert.tenant, alert.details["reason"], alert.details["count"], alert.count) == ("acme", "overlap", "1", 1)
    clock.advance(60)
    assert await server.claim() == []
    alert = await alerts.get(skipped_key("job_s"))
    third_nominal = row_nominal(migrated_engine, fourth) - 60_000_000  # skipped: its row is gone
    assert alert.count == 2 and alert.details["to_us"] == str(third_nominal)
    watch = SkipWatch(SkipWatchStore(migrated_engine, clock, alerts))
    await server.finish([running])
    assert await watch.check_once() == 0, "the run that finished is older than what was skipped"
    clock.advance(60)
    [next_one] = await server.claim()
    assert next_one.id == fourth
    assert await watch.check_once() == 0, "running, not yet run"
    await server.finish([next_one])
    assert await watch.check_once() == 1
    assert await alerts.get(skipped_key("job_s")) is None


def row_nominal(engine, ident: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(executions.c.nominal_at).where(executions.c.id == ident)).scalar()


class Holders:
    def __init__(self, owned: dict[int, str]) -> None:
        self.owned = owned

    async def __call__(self) -> dict[int, str]:
        return dict(self.owned)


async def test_a_partition_unowned_past_the_grace_raises_an_alert_resolved_when_owned_again(migrated_engine, clock):
    partitions = PartitionStore(migrated_engine, clock)
    await partitions.raise_epochs({0: 1, 1: 1, 2: 1}, "s1")
    alerts = AlertStore(migrated_engine, clock)
    holders = Holders({0: "s1", 1: "s1", 2: "s1"})
    watch = UnownedWatch(holders, 3, partitions, alerts, clock, grace=10)
    assert await watch.check_once() == (0, 0)
    del holders.owned[1]  # s1 lost partition 1
    assert await watch.check_once() == (0, 0)
    clock.advance(5)
    holders.owned[1] = "s2"  # taken over within the grace: nothing raised
    assert await watch.check_once() == (0, 0)
    del holders.owned[2]
    for _ in range(5):
        clock.advance(2)
        assert await watch.check_once() == (0, 0)
    clock.advance(2)
    assert await watch.check_once() == (1, 0)
    clock.advance(2)
    assert await watch.check_once() == (1, 0)
    alert = await alerts.get(partition_unowned_key(2))
    assert (alert.kind, alert.severity, alert.count, alert.server_id) == ("partition_unowned", "critical", 2, "s1")
    assert alert.details["partition"] == "2"
    assert alert.details["since"] == (NOW + timedelta(seconds=7)).isoformat()  # the first pass that saw it
    holders.owned[2] = "s2"
    assert await watch.check_once() == (0, 1)
    assert await alerts.get(partition_unowned_key(2)) is None


async def test_a_new_leader_waits_a_whole_grace_before_raising(migrated_engine, clock):
    partitions = PartitionStore(migrated_engine, clock)
    alerts = AlertStore(migrated_engine, clock)
    watch = UnownedWatch(Holders({}), 1, partitions, alerts, clock, grace=10)
    assert await watch.check_once() == (0, 0)
    clock.advance(60)  # not leading meanwhile: no pass
    assert await watch.check_once() == (0, 0), "what the last term saw is stale"
    clock.advance(10)
    assert await watch.check_once() == (1, 0)
    assert (await alerts.get(partition_unowned_key(0))).server_id == "", "no server ever owned it"


def test_the_alert_helpers_name_the_condition() -> None:
    at = datetime(2027, 1, 1, tzinfo=timezone.utc)
    alert = skipped_alert(job_id="j", tenant="t", reason="overlap", from_at=at, to_at=at, count=1)
    assert alert.key == "skipped:j" and "1 occurrence (overlap policy)" in alert.summary
