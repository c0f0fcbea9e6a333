"""The dispatcher's claim (``DispatchStore.claim_due``) on SQLite and
PostgreSQL: the same rows whichever way they are written (one statement over
arrays on PostgreSQL, executemany on SQLite), and a definition parsed again
when its version changes (the cache of parsed definitions)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2

from tickwheel_server.api.validate import normalise_job
from tickwheel.shared.ids import execution_id, new_job_id, to_us
from tickwheel_server.jobspec import DefinitionCache
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.jobrecords import JobRecord, NewJob
from tests.support.jobrows import job_row
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import executions, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

NOW = datetime(2027, 1, 1, 1, 0, tzinfo=timezone.utc)  # claims are made at this instant
MINUTE = timedelta(minutes=1)
PARTITIONS = 4
OWNED = {p: 1 for p in range(PARTITIONS)}


def cron_job(payload: bytes = b"p", *, http: bool = False) -> job_pb2.Job:
    target = (
        job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/hook"))
        if http
        else job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo"))
    )
    job = job_pb2.Job(
        name="claim", schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="* * * * *", time_zone="UTC")),
        target=target, payload=payload,
    )
    job.jitter.exact = True
    return normalise_job(job, NOW - timedelta(days=1))  # as the API stores it: defaults filled in (threshold 60 s)


def once_job(at: datetime, *, http: bool = False) -> job_pb2.Job:
    job = cron_job(b"once", http=http)
    job.schedule.once_at.FromDatetime(at)  # replaces the cron schedule (one of)
    return job


class World:
    def __init__(self, engine: sa.Engine, clock) -> None:
        self.engine = engine
        self.clock = clock
        self.jobs = JobStore(engine, clock, partition_count=PARTITIONS)
        self.dispatch = DispatchStore(engine, clock)

    async def create(self, job: job_pb2.Job, cursor: datetime | None, tenant: str = "acme") -> JobRecord:
        ident = new_job_id(self.clock.now())
        record, _ = await self.jobs.create(
            NewJob(
                id=ident, tenant=tenant, name=job.name, spec=job.SerializeToString(), time_zone="UTC",
                next_run_at=cursor, next_due_at=cursor, tzdata_version="2026a", payload_size=len(job.payload),
            ),
            f"req-{ident}",
        )
        return record

    def execution_rows(self) -> dict[str, sa.Row]:
        with self.engine.connect() as conn:
            return {row.id: row for row in conn.execute(sa.select(executions))}

    def job_row(self, job_id: str) -> sa.Row:
        with self.engine.connect() as conn:
            return job_row(conn, job_id)


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    return World(migrated_engine, clock)


async def test_a_due_cron_occurrence_becomes_one_execution_and_the_cursor_moves(world) -> None:
    job = await world.create(cron_job(b"hello"), NOW + MINUTE)
    result = await world.dispatch.claim_due(OWNED, NOW + timedelta(seconds=30))
    ident = execution_id(job.id, NOW + MINUTE)
    at = to_us(NOW + MINUTE)
    assert [(e.id, e.partition, e.due_at_us) for e in result.executions] == [(ident, job.partition, at)]
    assert (result.jobs, result.skipped, result.stale_partitions, result.full) == (1, 0, set(), False)
    [row] = world.execution_rows().values()
    expected = dict(
        id=ident, job_id=job.id, tenant="acme", partition=job.partition, origin="scheduled", nominal_at=at,
        due_at=at, ready_at=at, attempt=1, delivery=0, status="scheduled", owner=None, worker_id=None,
        handler="echo", missed_count=1, reap_count=0, payload=b"hello", error="", dead_reason="",
        created_at=to_us(NOW + timedelta(seconds=30)), finished_at=None, handed_out_at=None,
    )
    assert {name: row._mapping[name] for name in expected} == expected
    stored = world.job_row(job.id)
    assert (stored.state, stored.next_run_at, stored.next_due_at, stored.run_count) == (
        "active", to_us(NOW + 2 * MINUTE), to_us(NOW + 2 * MINUTE), 1,
    )
    again = await world.dispatch.claim_due(OWNED, NOW + timedelta(seconds=30))
    assert again.executions == [] and again.jobs == 0, "the next occurrence is past the look-ahead"


async def test_a_one_off_completes_and_an_http_target_has_no_handler(world) -> None:
    job = await world.create(once_job(NOW + MINUTE, http=True), NOW + MINUTE)
    result = await world.dispatch.claim_due(OWNED, NOW)
    assert [e.id for e in result.executions] == [execution_id(job.id, NOW + MINUTE)]
    [row] = world.execution_rows().values()
    assert row.handler is None and row.payload == b"once"
    stored = world.job_row(job.id)
    assert (stored.state, stored.next_run_at, stored.next_due_at, stored.run_count) == ("completed", None, None, 1)


async def test_an_occurrence_already_created_is_kept_and_the_cursor_still_moves(world) -> None:
    job = await world.create(cron_job(), NOW + MINUTE)
    ident = execution_id(job.id, NOW + MINUTE)
    at = to_us(NOW + MINUTE)
    with world.engine.begin() as conn:  # a backfill created this occurrence first, and it already ran
        conn.execute(
            executions.insert().values(
                id=ident, job_id=job.id, tenant="acme", partition=job.partition, origin="backfill", nominal_at=at,
                due_at=at, ready_at=at, attempt=1, delivery=1, status="succeeded", owner=None, worker_id="w",
                handler="echo", missed_count=1, reap_count=0, payload=b"first", error="", dead_reason="",
                created_at=at, finished_at=at,
            )
        )
    result = await world.dispatch.claim_due(OWNED, NOW)
    assert [e.id for e in result.executions] == [ident]
    [row] = world.execution_rows().values()
    assert (row.origin, row.status, row.payload) == ("backfill", "succeeded", b"first"), "not created twice"
    assert world.job_row(job.id).next_run_at == to_us(NOW + 2 * MINUTE)


async def test_missed_occurrences_run_once_with_their_count_and_one_skip_range(world) -> None:
    job = await world.create(cron_job(), NOW - 10 * MINUTE)
    result = await world.dispatch.claim_due(OWNED, NOW)
    # -10 … -2 min are more than the 60 s threshold late: the latest of them
    # runs for all nine, the eight before it are one skip range; -1, 0 and +1
    # min (the look-ahead) run as they are.
    rows = world.execution_rows()
    nominal = {row.nominal_at: row for row in rows.values()}
    assert sorted(nominal) == [to_us(NOW + k * MINUTE) for k in (-2, -1, 0, 1)]
    assert [nominal[to_us(NOW + k * MINUTE)].missed_count for k in (-2, -1, 0, 1)] == [9, 1, 1, 1]
    assert result.skipped == 8
    with world.engine.connect() as conn:
        [skip] = conn.execute(sa.select(skips)).all()
    assert (skip.job_id, skip.from_at, skip.to_at, skip.count, skip.reason) == (
        job.id, to_us(NOW - 10 * MINUTE), to_us(NOW - 3 * MINUTE), 8, "misfire",
    )
    stored = world.job_row(job.id)
    assert (stored.next_run_at, stored.run_count) == (to_us(NOW + 2 * MINUTE), 12)


async def test_a_full_batch_says_so_and_the_next_batches_take_the_rest(world) -> None:
    created = [await world.create(once_job(NOW + MINUTE), NOW + MINUTE) for _ in range(5)]
    found: list[str] = []
    fulls = []
    while True:
        result = await world.dispatch.claim_due(OWNED, NOW, batch=2)
        found += [e.id for e in result.executions]
        fulls.append(result.full)
        if not result.full:
            break
    assert fulls == [True, True, False]
    assert sorted(found) == sorted(execution_id(job.id, NOW + MINUTE) for job in created)
    assert len(world.execution_rows()) == 5


async def test_a_partition_with_a_newer_owner_is_reported_and_left_alone(world) -> None:
    job = await world.create(cron_job(), NOW + MINUTE)
    others = await world.create(cron_job(), NOW + MINUTE)
    while others.partition == job.partition:
        others = await world.create(cron_job(), NOW + MINUTE)
    assert await PartitionStore(world.engine, world.clock).raise_epoch(job.partition, 2, "newer")
    result = await world.dispatch.claim_due(OWNED, NOW)
    assert result.stale_partitions == {job.partition}
    assert job.partition not in {e.partition for e in result.executions}
    claimed = {row.job_id for row in world.execution_rows().values()}
    assert job.id not in claimed and others.id in claimed
    assert world.job_row(job.id).next_run_at == to_us(NOW + MINUTE), "its cursor did not move"


async def test_an_updated_definition_is_read_again_and_an_unchanged_one_is_not(world) -> None:
    specs = DefinitionCache()
    dispatch = DispatchStore(world.engine, world.clock, definitions=specs)
    job = await world.create(cron_job(b"v1"), NOW + MINUTE)
    await dispatch.claim_due(OWNED, NOW)
    assert (specs.misses, specs.hits) == (1, 0)
    await dispatch.claim_due(OWNED, NOW + MINUTE)  # the same version: not parsed again
    assert (specs.misses, specs.hits) == (1, 1)
    updated, _ = await world.jobs.update(
        "acme", job.id, job.version, name="claim", spec=cron_job(b"v2").SerializeToString(), time_zone="UTC",
        tzdata_version="2026a", payload_size=2,
        reschedule=None,  # the schedule is as it was: the cursor stays
    )
    assert updated.version == job.version + 1
    await dispatch.claim_due(OWNED, NOW + 2 * MINUTE)
    assert specs.misses == 2
    payloads = {row.nominal_at: row.payload for row in world.execution_rows().values() if row.status == "scheduled"}
    assert payloads[to_us(NOW + 3 * MINUTE)] == b"v2"
