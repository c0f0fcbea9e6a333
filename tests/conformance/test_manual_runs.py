"""Trigger, backfill and the last run, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tickwheel.shared.ids import execution_id, to_us
from tickwheel_server.errors import NotFound
from tickwheel_server.store.manual import BACKFILL_RATE, ManualStore, trigger_id
from tickwheel_server.store.tables import executions

from .test_job_lifecycle import MINUTE, T0, World, every_minute, w  # noqa: F401 (the fixture)


@pytest.fixture
def manual(w: World) -> ManualStore:
    return ManualStore(w.engine, w.clock)


async def test_one_request_id_triggers_once_and_two_trigger_twice(w: World, manual: ManualStore) -> None:
    job = await w.create(job=every_minute(payload=b"normal"))
    first, created = await manual.trigger("acme", job.id, "click-1")
    again, created_again = await manual.trigger("acme", job.id, "click-1", payload=b"ignored")
    other, created_other = await manual.trigger("acme", job.id, "click-2", payload=b"special")
    assert (created, created_again, created_other) == (True, False, True)
    assert first.id == again.id == trigger_id(job.id, "click-1") and other.id == trigger_id(job.id, "click-2")
    assert (first.origin, first.status, first.payload, first.attempt) == ("trigger", "scheduled", b"normal", 1)
    assert other.payload == b"special" and again.payload == b"normal"
    assert first.due_at == first.ready_at == w.clock.now()
    assert len(w.rows(executions, job_id=job.id)) == 2


async def test_concurrent_triggers_with_one_request_id_create_one_execution(w: World, manual: ManualStore) -> None:
    job = await w.create()
    results = await asyncio.gather(*(manual.trigger("acme", job.id, "double-click") for _ in range(5)))
    assert [created for _, created in results].count(True) == 1
    assert len(w.rows(executions, job_id=job.id)) == 1


async def test_another_tenants_job_cannot_be_triggered_or_backfilled(w: World, manual: ManualStore) -> None:
    from tickwheel_server.store.tenants import Tenant

    await w.tenants.create(Tenant(name="globex"))
    job = await w.create(tenant="globex")
    with pytest.raises(NotFound):
        await manual.trigger("acme", job.id, "r")
    with pytest.raises(NotFound):
        await manual.backfill("acme", job.id, [T0], dry_run=False)
    assert w.rows(executions) == []


async def test_backfill_creates_what_is_missing_once_and_a_dry_run_says_exactly_that(w: World, manual: ManualStore) -> None:
    job = await w.create()
    window = [T0 - MINUTE * n for n in range(10, 0, -1)]  # ten past minutes, oldest first
    w.execution(job, window[3], "succeeded", tries=1)  # the dispatcher ran this one
    dry = await manual.backfill("acme", job.id, window, dry_run=True)
    assert w.rows(executions, origin="backfill") == []
    real = await manual.backfill("acme", job.id, window, dry_run=False)
    assert dry == real
    assert (real.created, real.existing) == (9, 1)
    assert [i.already_exists for i in real.occurrences] == [i == 3 for i in range(10)]
    assert [i.execution_id for i in real.occurrences] == [execution_id(job.id, n) for n in window]
    created = sorted(w.rows(executions, origin="backfill"), key=lambda r: r.nominal_at)
    assert [r.nominal_at for r in created] == [to_us(n) for i, n in enumerate(window) if i != 3]
    # Spread from now at the backfill rate, in nominal order.
    assert [r.ready_at - to_us(w.clock.now()) for r in created] == [
        round(index * 1_000_000 / BACKFILL_RATE) for index in range(9)
    ]
    overlapping = await manual.backfill("acme", job.id, window[5:] + [T0], dry_run=False)
    assert (overlapping.created, overlapping.existing) == (1, 5)
    assert len(w.rows(executions, job_id=job.id)) == 11


async def test_the_last_run_is_the_latest_finished_execution_with_its_error(w: World) -> None:
    job = await w.create()
    assert await w.history.last_run("acme", job.id) is None
    w.execution(job, T0 - MINUTE * 3, "succeeded", tries=1)
    dead = w.execution(job, T0 - MINUTE * 2, "dead", tries=3)
    w.execution(job, T0 - MINUTE, "running")
    last = await w.history.last_run("acme", job.id)
    assert last is not None and last.id == dead and last.status == "dead"
    assert last.attempts[-1].error == "boom"
    assert await w.history.last_run("globex", job.id) is None


async def test_allow_overlap_is_recorded_on_triggered_and_backfilled_executions(w: World, manual: ManualStore) -> None:
    job = await w.create()
    await manual.trigger("acme", job.id, "queued")
    await manual.trigger("acme", job.id, "beside", allow_overlap=True)
    await manual.backfill("acme", job.id, [T0 - MINUTE], dry_run=False, allow_overlap=True)
    flags = {row.id: row.allow_overlap for row in w.rows(executions, job_id=job.id)}
    assert flags == {trigger_id(job.id, "queued"): False, trigger_id(job.id, "beside"): True,
                     execution_id(job.id, T0 - MINUTE): True}
