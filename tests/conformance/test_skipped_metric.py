"""``tickwheel_skipped_occurrences_total{reason}`` as the stores feed it
(``store/skiptally.py``): each writer of a skip range reports the
occurrences it added to its store's ``on_skipped`` hook once the
transaction committed, so the metric moves by what the ``skips`` rows
gained, for every reason, and a claim retried after a serialization
failure counts once."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2

from tickwheel.shared.clock import FakeClock

from tickwheel_server.api.calendars import definition_of
from tickwheel_server.policy.backlog import NOT_STARTED_CAP
from tickwheel_server.store.calendars import CalendarStore
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import skips
from tickwheel_server.store.tenants import Tenant, TenantStore

from . import test_calendar_claims as calendars
from . import test_job_changes as changes
from .test_claim_round_trips import FAILURES, arm, fired
from .test_dispatch_claim import MINUTE, NOW, OWNED, World, cron_job
from .test_isolation import Server, occurrences, spec
from .test_isolation import tenants  # noqa: F401 - fixture


class Tally:
    """A store's ``on_skipped`` hook: what it was told, and the ``skips`` rows' counts beside it."""

    def __init__(self, engine, *stores) -> None:
        self.engine = engine
        self.told: Counter[str] = Counter()
        self.calls = 0
        for store in stores:
            store.on_skipped = self.hear

    def hear(self, occurrences) -> None:
        self.calls += 1
        self.told.update(occurrences)

    def recorded(self) -> Counter[str]:
        """The occurrences the ``skips`` rows count, by reason."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(skips.c.reason, sa.func.sum(skips.c.count)).group_by(skips.c.reason)).all()
        return Counter({reason: int(total) for reason, total in rows})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW, autojump=True)  # a retried transaction backs off on it


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    return World(migrated_engine, clock)


async def test_misfire_skips_count_each_occurrence_once_per_claim(world) -> None:
    tally = Tally(world.engine, world.dispatch)
    await world.create(cron_job(), NOW - 10 * MINUTE)
    result = await world.dispatch.claim_due(OWNED, NOW, lookahead=timedelta(0))
    assert result.skipped == 8 and tally.told == Counter(misfire=8) == tally.recorded()
    world.clock.set(NOW + 5 * MINUTE)  # the dispatcher away again: the next claim extends the range
    result = await world.dispatch.claim_due(OWNED, NOW + 5 * MINUTE, lookahead=timedelta(0))
    assert result.skipped > 0
    assert tally.told == tally.recorded() and tally.told["misfire"] == 8 + result.skipped


async def test_a_paused_tenants_occurrences_count_as_tenant_paused(world) -> None:
    tally = Tally(world.engine, world.dispatch)
    await world.create(cron_job(), NOW - 10 * MINUTE)
    await TenantStore(world.engine, world.clock).pause("acme")
    result = await world.dispatch.claim_due(OWNED, NOW, lookahead=timedelta(0))
    assert result.skipped >= 10 and tally.told == Counter(tenant_paused=result.skipped) == tally.recorded()


async def test_the_backlog_cap_counts_what_it_skipped(world) -> None:
    tally = Tally(world.engine, world.dispatch)
    await world.create(cron_job(), NOW + MINUTE)
    for _ in range(NOT_STARTED_CAP):
        await world.dispatch.claim_due(OWNED, world.clock.now())
        world.clock.advance(60)
    assert tally.told == Counter()
    result = await world.dispatch.claim_due(OWNED, world.clock.now())
    assert result.backlogged == 1 and tally.told == Counter(backlog=1) == tally.recorded()


async def test_a_calendar_skip_counts_as_calendar(migrated_engine, clock) -> None:
    store = TenantStore(migrated_engine, clock)
    await store.create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(calendars.OWNED, "claimer")
    w = calendars.World(migrated_engine, clock)
    await CalendarStore(migrated_engine, clock).create("acme", "uk", definition_of(calendars.uk_calendar()), "cal-1")
    tally = Tally(migrated_engine, w.dispatch)
    await w.create(calendars.weekly_job(job_pb2.CALENDAR_RULE_SKIP), calendars.SATURDAY)
    result = await w.dispatch.claim_due(calendars.OWNED, calendars.CLAIM_AT)
    assert result.skipped == 1 and tally.told == Counter(calendar=1) == tally.recorded()


async def test_overlap_skips_of_a_hand_out_round_count_as_overlap(migrated_engine, clock, tenants) -> None:  # noqa: F811
    occurrences(migrated_engine, clock, "job_s", 4, job=spec())
    server = Server(migrated_engine, clock, "s1")
    tally = Tally(migrated_engine, server.store.handout)
    [running] = await server.claim()
    assert tally.told == Counter()
    clock.advance(60)
    assert await server.claim() == []
    clock.advance(60)
    assert await server.claim() == []
    assert tally.told == Counter(overlap=2) == tally.recorded() and tally.calls == 2


async def test_a_paused_jobs_span_counts_as_job_paused_at_resume(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(changes.OWNED, "claimer")
    w = changes.World(
        migrated_engine, clock, changes.JobStore(migrated_engine, clock, partition_count=changes.PARTITIONS),
        DispatchStore(migrated_engine, clock), changes.ExecutionQueue(migrated_engine, clock),
        changes.ManualStore(migrated_engine, clock),
    )
    tally = Tally(migrated_engine, w.jobs, w.dispatch)
    job = await w.create(changes.daily(), changes.TWO_AM - 10 * changes.MINUTE)
    await w.pause(job.id, changes.TWO_AM - 5 * changes.MINUTE)
    # Two minutes past the fourth 02:00: past the 60 s misfire threshold, so
    # that one is skipped too (within it, it would run late: "Resume releases").
    _, skip, _ = await w.resume(job.id, changes.TWO_AM + 3 * changes.ONE_DAY + 2 * changes.MINUTE)
    assert skip is not None and skip.count == 4  # 02:00 on four days
    assert tally.told == Counter(job_paused=4) == tally.recorded()


@pytest.mark.postgres
@pytest.mark.parametrize("failure", ["a serialization failure at the insert", "a serialization failure at the COMMIT itself"])
@pytest.mark.parametrize("migrated_engine", ["postgres"], indirect=True)
async def test_a_claim_retried_after_a_serialization_failure_counts_once(world, migrated_engine, failure) -> None:
    tally = Tally(migrated_engine, world.dispatch)
    await world.create(cron_job(), NOW - 10 * MINUTE)  # 8 skipped, the 9th created: the trigger fires on it
    arm(migrated_engine, FAILURES[failure][0])
    result = await world.dispatch.claim_due(OWNED, NOW, lookahead=timedelta(0))
    assert fired(migrated_engine) >= 2 and world.dispatch.retries == {"40001": 1}
    assert result.skipped == 8 and tally.calls == 1
    assert tally.told == Counter(misfire=8) == tally.recorded()
