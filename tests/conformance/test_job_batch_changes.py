"""Updating and deleting jobs in batches, on SQLite and PostgreSQL: a batch
is one transaction (a failure part-way writes nothing), the quota slots
count exactly what is left, and racing batches over overlapping jobs in
opposite orders both complete (docs/architecture.md, "Job writes at scale")."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest

from tests.conformance.test_job_lifecycle import MINUTE, T0, World, w  # noqa: F401 - w is a fixture
from tests.conformance.test_job_writes import counts, new_job, slots_hold
from tickwheel_server.api.scheduler import resume_span
from tickwheel_server.errors import NotFound, VersionConflict
from tickwheel_server.store.jobbatch import JobChange
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore


@pytest.fixture
def tenants(migrated_engine, clock) -> TenantStore:
    return TenantStore(migrated_engine, clock)


@pytest.fixture
def jobs(migrated_engine, clock) -> JobStore:
    return JobStore(migrated_engine, clock, partition_count=16)


def rename(name: str):
    """A decision that renames the job and changes nothing else."""
    return lambda record: JobChange(
        name=name, spec=record.spec, time_zone=record.time_zone, tzdata_version=record.tzdata_version,
        payload_size=0, reschedule=None,
    )  # fmt: skip


async def make(jobs: JobStore, clock, count: int, tenant: str = "acme"):
    outcomes = await jobs.create_many(tenant, [(new_job(clock, tenant), f"{tenant}-{i}") for i in range(count)])
    return [outcome[0] for outcome in outcomes]


async def test_a_failure_part_way_through_a_batch_writes_nothing(jobs, tenants, clock, migrated_engine) -> None:
    await tenants.create(Tenant(name="acme"))
    a, b, c = await make(jobs, clock, 3)

    def broken(record):
        raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        await jobs.update_many("acme", [(a.id, 1, rename("one")), (b.id, 1, rename("two")), (c.id, 1, broken)])
    assert [(await jobs.get("acme", j.id)).name for j in (a, b, c)] == ["nightly"] * 3

    with pytest.raises(RuntimeError):
        await jobs.update_many("acme", [(a.id, 1, rename("one")), (a.id, 2, broken)])
    assert (await jobs.get("acme", a.id)).version == 1


async def test_batch_delete_counts_and_repeats(jobs, tenants, clock, migrated_engine) -> None:
    await tenants.create(Tenant(name="acme"))
    await tenants.create(Tenant(name="globex"))
    mine = await make(jobs, clock, 40)
    (theirs,) = await make(jobs, clock, 1, "globex")
    items = [(job.id, 0) for job in mine[:30]] + [(theirs.id, 0), (mine[0].id, 0), (mine[31].id, 5)]
    outcomes = await jobs.delete_many("acme", items)
    assert outcomes[:30] == [0] * 30
    assert isinstance(outcomes[30], NotFound) and isinstance(outcomes[31], NotFound)
    assert isinstance(outcomes[32], VersionConflict)
    assert counts(migrated_engine)[:2] == (10, 10)
    assert counts(migrated_engine, "globex")[:2] == (1, 1)
    slots_hold(migrated_engine)


async def test_racing_batches_in_opposite_orders_both_complete(jobs, tenants, clock, migrated_engine, caplog) -> None:
    """Each batch locks its jobs in id order whatever the request's order,
    so two batches over the same jobs queue instead of deadlocking (no
    40P01 retried); the second sees the first's versions."""
    caplog.set_level(logging.DEBUG, logger="tickwheel_server.store.transactions")
    await tenants.create(Tenant(name="acme"))
    made = await make(jobs, clock, 1000)  # two chunks of CHUNK ids each
    forward = [(job.id, 1, rename("forward")) for job in made]
    backward = [(job.id, 1, rename("backward")) for job in reversed(made)]
    first, second = await asyncio.gather(jobs.update_many("acme", forward), jobs.update_many("acme", backward))
    won = [isinstance(o, tuple) for o in first], [isinstance(o, tuple) for o in second]
    assert all(won[0]) != all(won[1]), "one batch applies every item, the other none"
    loser = second if all(won[0]) else first
    assert all(isinstance(o, VersionConflict) for o in loser)
    names = {(await jobs.get("acme", job.id)).name for job in made}
    assert len(names) == 1
    assert not [r for r in caplog.records if "40P01" in r.getMessage()], "the batches deadlocked"


async def test_repeated_ids_see_the_earlier_items(jobs, tenants, clock) -> None:
    await tenants.create(Tenant(name="acme"))
    (a,) = await make(jobs, clock, 1)
    seen = []

    def record_and_rename(record):
        seen.append(dataclasses.replace(record))
        return rename("third")(record)

    outcomes = await jobs.update_many(
        "acme", [(a.id, 1, rename("first")), (a.id, 1, rename("stale")), (a.id, 2, record_and_rename)]
    )
    assert outcomes[0][0].name == "first" and isinstance(outcomes[1], VersionConflict)
    assert outcomes[2][0].version == 3 and seen[-1].name == "first"
    stored = await jobs.get("acme", a.id)
    assert (stored.name, stored.version) == ("third", 3)


async def test_a_batch_delete_cancels_what_has_not_started_and_leaves_running_ones(w: World) -> None:
    """As DeleteJob: a paused job's held executions are canceled too, a
    running one finishes, history stays; the quota counts what is left."""
    one, two, kept = await w.create(), await w.create(), await w.create()
    waiting = w.execution(one, T0 - MINUTE, "scheduled")
    running = w.execution(one, T0 - 3 * MINUTE, "running", tries=1)
    done = w.execution(two, T0 - 2 * MINUTE, "succeeded", tries=1)
    held = w.execution(two, T0 + MINUTE, "scheduled")
    await w.jobs.pause("acme", two.id)
    assert w.statuses(two.id)[held] == "waiting"
    outcomes = await w.jobs.delete_many("acme", [(one.id, 1), (two.id, 0)])
    assert outcomes == [1, 1]
    assert w.statuses(one.id) == {waiting: "canceled", running: "running"}
    assert w.statuses(two.id) == {done: "succeeded", held: "canceled"}
    assert {row.dead_reason for row in w.rows(executions, status="canceled")} == {"canceled: job deleted"}
    assert [j.id for j in await w.jobs.list("acme")] == [kept.id]
    assert await w.tenants.job_count("acme") == 1


async def test_batch_pause_holds_and_batch_resume_releases_as_the_single_calls(w: World) -> None:
    one, two = await w.create(), await w.create()
    ahead = w.execution(one, T0 + MINUTE, "scheduled")
    running = w.execution(two, T0 - MINUTE, "running", tries=1)
    paused = await w.jobs.pause_many("acme", [(one.id, "incident"), (two.id, ""), (one.id, "again"), ("nope", "")])
    assert [(o[0].state, o[0].pause_reason, o[1]) for o in paused[:3]] == [
        ("paused", "incident", 1), ("paused", "", 0), ("paused", "incident", 0)
    ]
    assert isinstance(paused[3], NotFound)
    assert w.statuses(one.id)[ahead] == "waiting" and w.statuses(two.id)[running] == "running"
    assert (await w.jobs.get("acme", one.id)).version == 2

    w.clock.advance(30)  # still within the misfire threshold of `ahead`
    now = w.clock.now()
    resumed = await w.jobs.resume_many(
        "acme", [(one.id, lambda record, cal: resume_span(record, now, None, cal)),
         (one.id, lambda record, cal: resume_span(record, now, None, cal))],
        now=now, tzdata_version="2026b",
    )
    (first, _, released), (again, _, released_again) = resumed
    assert (first.state, first.version, released) == ("active", 3, 1)
    assert (again.version, released_again) == (3, 0), "a second resume of one job in a batch changes nothing"
    assert w.statuses(one.id)[ahead] == "scheduled"
    assert (await w.jobs.get("acme", two.id)).state == "paused"
