"""Calendars in the store, on SQLite and PostgreSQL: tenant scoping, request
ids, versions, paging, and the per-tenant quota exact when creates race."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from tickwheel_server.errors import AlreadyExists, NotFound, QuotaExceeded, VersionConflict
from tickwheel_server.store.calendars import CalendarDefinition, CalendarStore
from tickwheel_server.store.tables import calendars as calendars_table, request_ids
from tickwheel_server.store.tenants import Tenant, TenantStore


@pytest.fixture
async def store(migrated_engine, clock) -> CalendarStore:
    tenants = TenantStore(migrated_engine, clock)
    await tenants.create(Tenant(name="acme"))
    await tenants.create(Tenant(name="globex"))
    return CalendarStore(migrated_engine, clock, max_calendars=5)


def definition(zone: str = "Europe/London", holidays: int = 2) -> CalendarDefinition:
    return CalendarDefinition(spec=b"\x1a" + zone.encode(), time_zone=zone, business_days=0b11111, holiday_count=holidays, half_day_count=0)


def stored(engine, tenant: str = "acme") -> tuple[int, int]:
    """(calendars, remembered request ids) of ``tenant``."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(sa.func.count()).select_from(calendars_table).where(calendars_table.c.tenant == tenant)
        ).scalar()
        requests = conn.execute(
            sa.select(sa.func.count())
            .select_from(request_ids)
            .where(request_ids.c.tenant == tenant, request_ids.c.kind == "calendar")
        ).scalar()
        return rows, requests


async def test_create_get_and_repeat(store: CalendarStore, migrated_engine) -> None:
    made, created = await store.create("acme", "uk", definition(), "r-1")
    assert created and made.version == 1 and made.spec == definition().spec and made.holiday_count == 2
    assert await store.get("acme", "uk") == made
    again, created = await store.create("acme", "ignored-name", definition("UTC"), "r-1")
    assert not created and again == made
    assert stored(migrated_engine) == (1, 1)


async def test_another_tenants_calendar_is_not_found(store: CalendarStore) -> None:
    await store.create("acme", "uk", definition(), "r-1")
    with pytest.raises(NotFound):
        await store.get("globex", "uk")
    with pytest.raises(NotFound):
        await store.update("globex", "uk", 1, definition("UTC"))
    with pytest.raises(NotFound):
        await store.delete("globex", "uk")
    assert await store.list("globex") == []
    # Names and request ids are per tenant.
    theirs, created = await store.create("globex", "uk", definition("UTC"), "r-1")
    assert created and theirs.tenant == "globex"
    assert (await store.get("acme", "uk")).time_zone == "Europe/London"


async def test_a_taken_name_is_already_exists_and_writes_nothing(store: CalendarStore, migrated_engine) -> None:
    await store.create("acme", "uk", definition(), "r-1")
    with pytest.raises(AlreadyExists):
        await store.create("acme", "uk", definition("UTC"), "r-2")
    assert stored(migrated_engine) == (1, 1)


async def test_unknown_tenant(store: CalendarStore) -> None:
    with pytest.raises(NotFound) as caught:
        await store.create("nobody", "uk", definition(), "r-1")
    assert caught.value.kind == "tenant"


async def test_a_repeat_after_delete_is_not_found_and_the_id_expires(store: CalendarStore, clock) -> None:
    await store.create("acme", "uk", definition(), "r-1")
    await store.delete("acme", "uk")
    with pytest.raises(NotFound):
        await store.create("acme", "uk", definition(), "r-1")
    # Same name again under another request: the old request id still does not return it.
    await store.create("acme", "uk", definition("UTC"), "r-2")
    with pytest.raises(NotFound):
        await store.create("acme", "uk", definition(), "r-1")
    clock.advance(25 * 3600)
    with pytest.raises(AlreadyExists):  # r-1 forgotten: a create like any other
        await store.create("acme", "uk", definition(), "r-1")
    made, created = await store.create("acme", "us", definition("America/New_York"), "r-1")
    assert created and made.name == "us"


async def test_update_needs_the_current_version(store: CalendarStore, clock) -> None:
    made, _ = await store.create("acme", "uk", definition(), "r-1")
    clock.advance(5)
    updated = await store.update("acme", "uk", 1, definition("Europe/Dublin", holidays=7))
    assert updated.version == 2 and updated.time_zone == "Europe/Dublin" and updated.holiday_count == 7
    assert updated.created_at == made.created_at and updated.updated_at > made.updated_at
    with pytest.raises(VersionConflict) as caught:
        await store.update("acme", "uk", 1, definition("UTC"))
    assert caught.value.actual == 2
    assert (await store.get("acme", "uk")).time_zone == "Europe/Dublin"
    with pytest.raises(NotFound):
        await store.update("acme", "missing", 1, definition())


async def test_delete_checks_a_given_version(store: CalendarStore) -> None:
    await store.create("acme", "uk", definition(), "r-1")
    await store.update("acme", "uk", 1, definition("UTC"))
    with pytest.raises(VersionConflict):
        await store.delete("acme", "uk", 1)
    await store.get("acme", "uk")
    await store.delete("acme", "uk", 2)
    with pytest.raises(NotFound):
        await store.get("acme", "uk")
    with pytest.raises(NotFound):
        await store.delete("acme", "uk")


async def test_list_pages_by_name_without_definitions(store: CalendarStore) -> None:
    for name in ("c", "a", "e", "b", "d"):
        await store.create("acme", name, definition(), f"r-{name}")
    first = await store.list("acme", limit=2)
    assert [c.name for c in first] == ["a", "b"] and all(c.spec == b"" for c in first)
    rest = await store.list("acme", after_name="b", limit=10)
    assert [c.name for c in rest] == ["c", "d", "e"] and rest[0].holiday_count == 2
    assert rest[0].business_days == 0b11111


async def test_the_quota_refuses_past_the_limit_and_frees_on_delete(store: CalendarStore, migrated_engine) -> None:
    for n in range(5):
        await store.create("acme", f"c{n}", definition(), f"r{n}")
    with pytest.raises(QuotaExceeded) as caught:
        await store.create("acme", "c5", definition(), "r5")
    assert caught.value.quota == "max_calendars" and caught.value.limit == 5
    assert stored(migrated_engine) == (5, 5)
    await store.create("globex", "c0", definition(), "r0")  # another tenant's count is its own
    await store.delete("acme", "c0")
    await store.create("acme", "c5", definition(), "r5")
    assert stored(migrated_engine)[0] == 5


async def test_creates_racing_at_the_limit_stop_exactly_at_the_quota(store: CalendarStore, migrated_engine) -> None:
    """Three rounds of 40 creates racing for 5 places: exactly 5 calendars
    exist after each, every refusal is the quota's, none fails otherwise."""
    for round_ in range(3):
        outcomes = await asyncio.gather(
            *(store.create("acme", f"c{round_}-{n}", definition(), f"r{round_}-{n}") for n in range(40)),
            return_exceptions=True,
        )
        made = [o[0] for o in outcomes if isinstance(o, tuple)]
        refused = [o for o in outcomes if not isinstance(o, tuple)]
        assert len(made) == 5
        assert all(isinstance(o, QuotaExceeded) for o in refused), refused
        assert stored(migrated_engine)[0] == 5
        for record in made:
            await store.delete("acme", record.name)
