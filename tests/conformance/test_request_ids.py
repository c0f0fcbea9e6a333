"""Create request ids on SQLite and PostgreSQL: one table for jobs and
calendars, remembered for exactly 24 hours, scoped by tenant and kind, pruned
by the retention runner in bounded batches, moved over by the migration
(docs/architecture.md, "Data")."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from tests.conformance.conftest import STORE_BACKENDS
from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import new_job_id
from tickwheel_server.errors import AlreadyExists, NotFound, QuotaExceeded
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.maintenance.retention import Retention, RetentionConfig
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.calendars import CalendarDefinition, CalendarStore
from tickwheel_server.store.jobrecords import NewJob
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.requests import REQUEST_RETENTION
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.tables import request_ids
from tickwheel_server.store.tenants import Tenant, TenantStore

START = datetime(2026, 3, 1, tzinfo=timezone.utc)
DAY = REQUEST_RETENTION.total_seconds()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START, autojump=True)


@pytest.fixture
async def stores(migrated_engine, clock) -> tuple[JobStore, CalendarStore]:
    tenants = TenantStore(migrated_engine, clock)
    for name in ("acme", "globex"):
        await tenants.create(Tenant(name=name, max_jobs=100))
    return JobStore(migrated_engine, clock, partition_count=16), CalendarStore(migrated_engine, clock)


def new_job(clock, tenant: str = "acme", name: str = "nightly") -> NewJob:
    now = clock.now()
    return NewJob(
        id=new_job_id(now), tenant=tenant, name=name, spec=b"\x1a" + bytes([len(name)]) + name.encode(),
        time_zone="UTC", next_run_at=now + timedelta(minutes=5), next_due_at=now + timedelta(minutes=5),
        tzdata_version="2026a", payload_size=10,
    )  # fmt: skip


def calendar(zone: str = "UTC") -> CalendarDefinition:
    return CalendarDefinition(spec=b"\x1a" + zone.encode(), time_zone=zone, business_days=0b11111,
                              holiday_count=0, half_day_count=0)  # fmt: skip


def rows(engine) -> list[tuple[str, str, str]]:
    """Every (tenant, kind, request id) remembered, sorted."""
    with engine.connect() as conn:
        return sorted(tuple(r) for r in conn.execute(
            sa.select(request_ids.c.tenant, request_ids.c.kind, request_ids.c.request_id)
        ))  # fmt: skip


async def test_a_retry_within_the_window_gets_the_same_job_and_calendar(stores, clock, migrated_engine) -> None:
    jobs, calendars = stores
    first, created = await jobs.create(new_job(clock), "r-1")
    made, _ = await calendars.create("acme", "uk", calendar(), "r-1")
    assert created
    clock.advance(DAY - 1)  # the last second of the window
    (again,) = await jobs.create_many("acme", [(new_job(clock, name="other body"), "r-1")])
    assert again == (first, False)
    assert await calendars.create("acme", "ignored", calendar("Europe/Paris"), "r-1") == (made, False)
    assert rows(migrated_engine) == [("acme", "calendar", "r-1"), ("acme", "job", "r-1")]


async def test_after_the_window_a_request_id_is_a_new_request(stores, clock, migrated_engine) -> None:
    """Past 24 hours the id is forgotten whether or not the row was pruned
    yet: the same id with another body creates anew, and that row is the
    one remembered from then on."""
    jobs, calendars = stores
    first, _ = await jobs.create(new_job(clock), "r-1")
    await calendars.create("acme", "uk", calendar(), "r-1")
    clock.advance(DAY + 1)
    second, created = await jobs.create(new_job(clock, name="new body"), "r-1")
    assert created and second.id != first.id and second.name == "new body"
    with pytest.raises(AlreadyExists):  # a new request for a taken name, not a repeat
        await calendars.create("acme", "uk", calendar(), "r-1")
    made, created = await calendars.create("acme", "us", calendar("America/New_York"), "r-1")
    assert created
    clock.advance(60)
    assert await jobs.create(new_job(clock), "r-1") == (second, False)
    assert await calendars.create("acme", "nl", calendar(), "r-1") == (made, False)
    # The rows taken over are fresh: a pruning pass leaves them.
    assert await RetentionStore(migrated_engine, clock).prune_request_ids(clock.now()) == 0
    assert rows(migrated_engine) == [("acme", "calendar", "r-1"), ("acme", "job", "r-1")]


async def test_pruning_is_bounded_per_batch_and_keeps_the_window(stores, clock, migrated_engine) -> None:
    jobs, calendars = stores
    await jobs.create_many("acme", [(new_job(clock), f"old-{i}") for i in range(4)])
    await calendars.create("acme", "uk", calendar(), "old-cal")
    await jobs.create(new_job(clock, tenant="globex"), "old-0")
    clock.advance(DAY - 10)
    await jobs.create(new_job(clock), "young")
    clock.advance(11)  # the first six are now past the window, "young" is not
    retention = RetentionStore(migrated_engine, clock)
    assert [await retention.prune_request_ids(clock.now(), limit=4) for _ in range(3)] == [4, 2, 0]
    assert rows(migrated_engine) == [("acme", "job", "young")]

    # The runner's pass does it in batches of its size.
    await jobs.create_many("acme", [(new_job(clock), f"later-{i}") for i in range(5)])
    clock.advance(DAY + 1)
    leases = MemoryLeaseStore(clock)
    runner = Retention(retention, AlertStore(migrated_engine, clock), leases, lambda: None, clock,
                       server_id="s1", config=RetentionConfig(batch=2, pause=0))  # fmt: skip
    result = await runner.run_pass()
    assert result.request_ids == 6 and rows(migrated_engine) == []
    await leases.close()


async def test_another_tenants_and_another_kinds_id_is_another_request(stores, clock, migrated_engine) -> None:
    """Hostile: globex reusing acme's request ids neither gets acme's job
    nor disturbs acme's rows, when its items are refused at its quota
    (their rows forgotten) or when its rows expire and are pruned; a
    calendar's request id never answers a job."""
    jobs, calendars = stores
    mine, _ = await jobs.create(new_job(clock), "shared")
    await TenantStore(migrated_engine, clock).update("globex", max_jobs=0)
    (refused,) = await jobs.create_many("globex", [(new_job(clock, tenant="globex"), "shared")])
    assert isinstance(refused, QuotaExceeded)
    assert await jobs.create(new_job(clock), "shared") == (mine, False)
    await TenantStore(migrated_engine, clock).update("globex", max_jobs=10)
    theirs, created = await jobs.create(new_job(clock, tenant="globex"), "shared")
    assert created and theirs.tenant == "globex" and theirs.id != mine.id
    made, created = await calendars.create("acme", "uk", calendar(), "shared")
    assert created and made.name == "uk"
    # The rows of both tenants past the window go; the younger ones of each stay.
    clock.advance(DAY - 5)
    later, _ = await jobs.create(new_job(clock), "acme-only")
    clock.advance(10)
    await jobs.create(new_job(clock, tenant="globex"), "fresh")
    assert await RetentionStore(migrated_engine, clock).prune_request_ids(clock.now()) == 3
    assert rows(migrated_engine) == [("acme", "job", "acme-only"), ("globex", "job", "fresh")]
    with pytest.raises(NotFound):  # another tenant's job id is never answered
        await jobs.get("globex", mine.id)


@pytest.mark.parametrize("backend", STORE_BACKENDS)
def test_the_migration_moves_job_and_calendar_request_ids(request, tmp_path, backend: str) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = create_store_engine(url)
    try:
        migrate(engine, target=22)
        # Within the window by the migrating process's clock (an hour old), and past it (25 hours).
        young, old = int(time.time() * 1e6) - 3600 * 10**6, int(time.time() * 1e6) - 25 * 3600 * 10**6
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO job_requests (tenant, request_id, job_id, created_at) VALUES "
                "('acme', 'r-1', 'job_1', :young), ('globex', 'r-1', 'job_2', :young), ('acme', 'r-0', 'job_0', :old)"
            ), {"young": young, "old": old})  # fmt: skip
            conn.execute(sa.text(
                "INSERT INTO calendar_requests (tenant, request_id, name, created_at) VALUES "
                "('acme', 'r-1', 'uk', :young), ('acme', 'r-0', 'us', :old)"
            ), {"young": young, "old": old})  # fmt: skip
        migrate(engine)
        with engine.connect() as conn:
            moved = sorted(tuple(r) for r in conn.execute(sa.select(request_ids)))
            tables = set(sa.inspect(conn).get_table_names())
        # What is past the window already answers nothing, so it is not copied.
        assert moved == [("acme", "calendar", "r-1", "uk", young), ("acme", "job", "r-1", "job_1", young),
                         ("globex", "job", "r-1", "job_2", young)]  # fmt: skip
        assert not tables & {"job_requests", "calendar_requests"}
    finally:
        engine.dispose()


@pytest.mark.parametrize("size", [5, 64, 200])
async def test_a_batch_tells_new_ids_from_repeats_and_expired_ones_whatever_its_size(
    stores, clock, migrated_engine, size: int
) -> None:
    """A batch of ``size`` items (from 64 the store tries a plain insert of
    its request ids first and falls back on the first one already there)
    mixing an id seen within the window, one past it (its row not pruned),
    another tenant's and a calendar's: the first answers its job, the
    others create; every row stays its own tenant's and kind's. Then the
    same batch again answers every item from the first, writing nothing."""
    jobs, calendars = stores
    await TenantStore(migrated_engine, clock).update("acme", max_jobs=1000)
    expired, _ = await jobs.create(new_job(clock), "expired")
    clock.advance(DAY + 1)
    seen, _ = await jobs.create(new_job(clock), "seen")
    theirs, _ = await jobs.create(new_job(clock, tenant="globex"), "theirs")
    await calendars.create("acme", "uk", calendar(), "a-calendar")
    special = ["seen", "expired", "theirs", "a-calendar"]
    ids = special + [f"new-{i:03}" for i in range(size - len(special))]
    items = [(new_job(clock, name=f"n{i}"), request_id) for i, request_id in enumerate(ids)]
    outcomes = await jobs.create_many("acme", items)
    assert outcomes[0] == (seen, False)
    created = outcomes[1:]
    assert all(created_now for _, created_now in created)
    assert [record.id for record, _ in created] == [job.id for job, _ in items[1:]]
    assert expired.id not in {record.id for record, _ in created}
    assert rows(migrated_engine) == sorted(
        [("acme", "job", request_id) for request_id in ids] + [("acme", "calendar", "a-calendar"),
                                                               ("globex", "job", "theirs")]
    )  # fmt: skip
    again = await jobs.create_many("acme", [(new_job(clock, name="other"), request_id) for request_id in ids])
    assert again == [(record, False) for record, _ in [(seen, False), *created]]
    assert len(rows(migrated_engine)) == size + 2
    assert await jobs.create_many("globex", [(new_job(clock, tenant="globex"), "theirs")]) == [(theirs, False)]


@pytest.mark.postgres
async def test_a_conflict_in_the_plain_insert_is_retried_not_taken_for_a_repeat(
    request, clock, monkeypatch
) -> None:
    """Only a unique violation sends a large batch's request ids to the
    ON CONFLICT insert: a serialization failure (40001) in the plain insert
    fails the transaction, which is run again whole, and every item is
    created once (none answered as a repeat of itself)."""
    import psycopg

    from tickwheel_server.store import requests as requests_module

    engine = create_store_engine(request.getfixturevalue("migrated_postgres_url"))
    try:
        await TenantStore(engine, clock).create(Tenant(name="acme", max_jobs=1000))
        jobs = JobStore(engine, clock, partition_count=16)
        real = psycopg.Cursor.execute
        failed = []

        def failing_once(self, query, *args, **kwargs):
            # Raised by the driver itself: store/driver.py hands it to SQLAlchemy, which wraps it.
            if query == requests_module._INSERT_FRESH_JOBS and not failed:
                failed.append(query)
                raise psycopg.errors.SerializationFailure("injected")
            return real(self, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", failing_once)
        items = [(new_job(clock, name=f"n{i}"), f"r-{i}") for i in range(100)]
        outcomes = await jobs.create_many("acme", items)
        assert failed, "the plain insert ran"
        assert jobs.retries["40001"] == 1
        assert all(created for _, created in outcomes)
        assert [record.id for record, _ in outcomes] == [job.id for job, _ in items]
        assert rows(engine) == sorted(("acme", "job", f"r-{i}") for i in range(100))
    finally:
        engine.dispose()
