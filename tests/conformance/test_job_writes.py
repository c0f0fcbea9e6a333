"""Creating jobs in batches and concurrently, on SQLite and PostgreSQL: per-item
outcomes, idempotency per request id, and the max-jobs quota exact when
creates race (docs/architecture.md, "Job writes at scale")."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections import Counter
from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2

from tests.conformance.conftest import STORE_BACKENDS
from tickwheel.shared.ids import new_job_id, to_us
from tickwheel_server.policy.jobchanges import PausedSpan
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.errors import NotFound, QuotaExceeded
from tickwheel_server.store.jobcreate import CREATED, create_jobs
from tickwheel_server.store.jobrecords import NewJob, NewJobs
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.quota import SlotDry
from tickwheel_server.store.tables import concurrency_keys, job_cursors, jobs as jobs_table, request_ids, tenant_quota
from tickwheel_server.store.tenants import Tenant, TenantStore
from tickwheel_server.store.errors import TransactionConflictError


@pytest.fixture
def tenants(migrated_engine, clock) -> TenantStore:
    return TenantStore(migrated_engine, clock)


@pytest.fixture
def jobs(migrated_engine, clock) -> JobStore:
    return JobStore(migrated_engine, clock, partition_count=16)


def new_job(clock, tenant: str = "acme", payload_size: int = 10, name: str = "nightly") -> NewJob:
    now = clock.now()
    return NewJob(
        id=new_job_id(now), tenant=tenant, name=name, spec=b"\x1a\x07nightly", time_zone="UTC",
        next_run_at=now + timedelta(minutes=5), next_due_at=now + timedelta(minutes=5), tzdata_version="2026a",
        payload_size=payload_size,
    )  # fmt: skip


def counts(engine, tenant: str = "acme") -> tuple[int, int, int]:
    """(jobs stored, what the quota slots count, request ids recorded)."""
    with engine.connect() as conn:
        stored = conn.execute(sa.select(sa.func.count()).select_from(jobs_table).where(jobs_table.c.tenant == tenant))
        counted = conn.execute(
            sa.select(sa.func.coalesce(sa.func.sum(tenant_quota.c.used), 0)).where(tenant_quota.c.tenant == tenant)
        )
        requests = conn.execute(
            sa.select(sa.func.count())
            .select_from(request_ids)
            .where(request_ids.c.tenant == tenant, request_ids.c.kind == "job")
        )
        return stored.scalar(), counted.scalar(), requests.scalar()


def slots_hold(engine, tenant: str = "acme") -> None:
    """Every slot counts exactly the jobs that name it, within its allowance."""
    with engine.connect() as conn:
        by_slot = dict(
            conn.execute(
                sa.select(jobs_table.c.quota_slot, sa.func.count())
                .where(jobs_table.c.tenant == tenant)
                .group_by(jobs_table.c.quota_slot)
            ).all()
        )
        for slot, used, allowance in conn.execute(
            sa.select(tenant_quota.c.slot, tenant_quota.c.used, tenant_quota.c.allowance).where(
                tenant_quota.c.tenant == tenant
            )
        ):
            assert used == by_slot.get(slot, 0), f"slot {slot}"
            assert 0 <= used <= allowance, f"slot {slot}"


async def test_a_batch_answers_each_item(tenants: TenantStore, jobs: JobStore, clock, migrated_engine) -> None:
    await tenants.create(Tenant(name="acme", max_jobs=4, max_payload_bytes=100))
    (earlier, _) = await jobs.create(new_job(clock), "seen-before")
    items = [
        (new_job(clock, name="a"), "r-a"),
        (new_job(clock, name="dup"), "seen-before"),  # an earlier call's request id
        (new_job(clock, name="big", payload_size=101), "r-big"),
        (new_job(clock, name="b"), "r-b"),
        (new_job(clock, name="a-again"), "r-a"),  # this call's own request id again
        (new_job(clock, name="c"), "r-c"),
        (new_job(clock, name="d"), "r-d"),  # past max_jobs = 4
    ]
    outcomes = await jobs.create_many("acme", items)
    assert len(outcomes) == len(items)
    a, dup, big, b, again, c, d = outcomes
    assert a[1] and a[0].name == "a" and b[1] and c[1]
    assert dup == (earlier, False)
    assert isinstance(big, QuotaExceeded) and big.quota == "max_payload_bytes"
    assert again == (a[0], False)
    assert isinstance(d, QuotaExceeded) and d.quota == "max_jobs"
    for outcome in (a, b, c):
        assert outcome[0] == await jobs.get("acme", outcome[0].id), "the answer is the row as stored"
    assert counts(migrated_engine) == (4, 4, 4), "refused items leave no job, unit or request id"
    slots_hold(migrated_engine)

    again = await jobs.create_many("acme", items)
    assert [(o[0].id, o[1]) for o in again if isinstance(o, tuple)] == [
        (a[0].id, False), (earlier.id, False), (b[0].id, False), (a[0].id, False), (c[0].id, False)
    ]
    assert counts(migrated_engine) == (4, 4, 4), "a repeated batch writes nothing"


async def test_a_batch_by_columns_answers_created_jobs_without_reading_them(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine
) -> None:
    """create_batch: a created job's outcome is CREATED and its record, as
    the batch builds it, is the row stored; only created jobs set the key
    limits they carry (not a repeat's, not one refused at the quota)."""
    await tenants.create(Tenant(name="acme", max_jobs=3, max_payload_bytes=100))
    (earlier, _) = await jobs.create(new_job(clock), "seen-before")
    items = [(new_job(clock, name="a"), "r-a"), (new_job(clock, name="dup"), "seen-before"),
             (new_job(clock, name="big", payload_size=101), "r-big"), (new_job(clock, name="b"), "r-b"),
             (new_job(clock, name="a-again"), "r-a"), (new_job(clock, name="c"), "r-c")]  # fmt: skip
    limits = [(("db", 2),), (("dup-key", 5),), (("big-key", 5),), (("db", 3), ("api", 1)), (), (("over", 9),)]
    batch = NewJobs.of("acme", items, lambda job: limits[[j for j, _ in items].index(job)])
    outcomes, created_at = await jobs.create_batch(batch)
    a, dup, big, b, again, over = outcomes
    assert a is CREATED and b is CREATED
    assert dup == (earlier, False)
    assert isinstance(big, QuotaExceeded) and big.quota == "max_payload_bytes"
    assert again[1] is False and again[0].id == batch.ids[0]
    assert isinstance(over, QuotaExceeded) and over.quota == "max_jobs"
    for index in (0, 3):
        stored = await jobs.get("acme", batch.ids[index])
        assert batch.record(index, stored.partition, created_at) == stored
    assert again[0] == await jobs.get("acme", batch.ids[0])
    assert counts(migrated_engine) == (3, 3, 3)
    with migrated_engine.connect() as conn:
        keys = dict(conn.execute(sa.select(concurrency_keys.c.name, concurrency_keys.c.max_running)).all())
    assert keys == {"db": 3, "api": 1}, "the later created job's limit wins; refused and repeated items set none"
    with pytest.raises(ValueError):
        NewJobs.of("acme", [(new_job(clock, tenant="globex"), "x")], lambda job: ())


SHARED_BATCH = 70
"""More than ``quota.SAVEPOINT_FROM``: the batch's units taken in a statement of their own."""


def _calendar_spec(name: str, rule: int) -> bytes:
    return job_pb2.Job(name="cal", calendar=job_pb2.JobCalendar(name=name, rule=rule)).SerializeToString()


def _stored_columns(engine, ids: list[str]) -> list[tuple]:
    """(state, time zone, tzdata version, calendar, the cursor's state) of each of ``ids``, in order."""
    with engine.connect() as conn:
        rows = dict(
            (row[0], row[1:]) for row in conn.execute(
                sa.select(jobs_table.c.id, jobs_table.c.state, jobs_table.c.time_zone, jobs_table.c.tzdata_version,
                          jobs_table.c.calendar, job_cursors.c.state)
                .join(job_cursors, job_cursors.c.job_id == jobs_table.c.id)
                .where(jobs_table.c.id.in_(ids))
            )
        )  # fmt: skip
    return [tuple(rows[job_id]) for job_id in ids]


@pytest.mark.parametrize("size", [4, SHARED_BATCH])
async def test_a_batch_stores_each_jobs_own_columns_shared_or_not(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine, size: int
) -> None:
    """A column every job of a batch shares (state, time zone, tzdata
    version, calendar: the usual batch's) is stored on every row, and a
    batch where they differ (one job in another zone, one without a next
    run, one naming a calendar, a value spelling an array's syntax)
    stores each row's own, in ``jobs`` and in its cursor; on both sides of
    the quota's savepoint size."""
    await tenants.create(Tenant(name="acme"))
    shared = [(new_job(clock, name=f"s{i}"), f"shared-{size}-{i}") for i in range(size)]
    batch = NewJobs.of("acme", shared, lambda job: ())
    outcomes, _ = await jobs.create_batch(batch)
    assert outcomes == [CREATED] * size
    assert _stored_columns(migrated_engine, batch.ids) == [("active", "UTC", "2026a", "", "active")] * size

    mixed = [new_job(clock, name=f"m{i}") for i in range(size)]
    mixed[0] = dataclasses.replace(mixed[0], time_zone="Europe/Paris")
    mixed[1] = dataclasses.replace(mixed[1], next_run_at=None, next_due_at=None)
    mixed[2] = dataclasses.replace(mixed[2], spec=_calendar_spec("holidays", job_pb2.CALENDAR_RULE_SKIP))
    mixed[-1] = dataclasses.replace(mixed[-1], tzdata_version='NULL,"{x}"')
    batch = NewJobs.of("acme", [(job, f"mixed-{size}-{i}") for i, job in enumerate(mixed)], lambda job: ())
    outcomes, _ = await jobs.create_batch(batch)
    assert outcomes == [CREATED] * size
    expected = [("active", "UTC", "2026a", "", "active")] * size
    expected[0] = ("active", "Europe/Paris", "2026a", "", "active")
    expected[1] = ("completed", "UTC", "2026a", "", "completed")
    expected[2] = ("active", "UTC", "2026a", "holidays", "active")
    expected[-1] = ("active", "UTC", 'NULL,"{x}"', "", "active")
    assert _stored_columns(migrated_engine, batch.ids) == expected
    for index in range(size):
        stored = await jobs.get("acme", batch.ids[index])
        assert batch.record(index, stored.partition, stored.created_at) == stored


def _sent(monkeypatch) -> list[str]:
    """The first words of every statement psycopg's cursors send from now
    on (SQLAlchemy's and the store's driver SQL alike; psycopg's own BEGIN
    and COMMIT are not cursor statements)."""
    import psycopg

    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def recorded(self, query, params=None, **kwargs):
        sent.append(" ".join(str(query).split()[:3]))
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recorded)
    return sent


async def test_a_large_batch_sends_two_savepoints_and_two_writes(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine, monkeypatch
) -> None:
    """On PostgreSQL a batch of ``quota.SAVEPOINT_FROM`` jobs or more takes
    its units in its jobs' insert, under a savepoint as its request ids'
    plain insert is, and releases neither: four statements between BEGIN
    and COMMIT (six round trips; nine before). A slot found dry there
    inserts nothing and is rolled back to, then dealt: every job still
    created, each unit counted once."""
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("SQLite takes its quota in statements of its own, without savepoints")
    await tenants.create(Tenant(name="acme", max_jobs=1000))
    first = [(new_job(clock, name=f"a{i}"), f"first-{i}") for i in range(SHARED_BATCH)]
    sent = _sent(monkeypatch)
    outcomes = await jobs.create_many("acme", first)  # a fresh tenant's slots are dealt small: dry, then dealt
    assert all(outcome[1] for outcome in outcomes)
    assert sent[:5] == ["SAVEPOINT tickwheel_try", "WITH recorded AS", "SAVEPOINT tickwheel_try", "WITH taken AS",
                        "ROLLBACK TO SAVEPOINT"], sent  # fmt: skip
    assert counts(migrated_engine) == (SHARED_BATCH, SHARED_BATCH, SHARED_BATCH)
    slots_hold(migrated_engine)
    sent.clear()
    second = [(new_job(clock, name=f"b{i}"), f"second-{i}") for i in range(SHARED_BATCH)]
    outcomes = await jobs.create_many("acme", second)  # the slot kept its reserve: no deal
    assert all(outcome[1] for outcome in outcomes)
    assert sent == ["SAVEPOINT tickwheel_try", "WITH recorded AS", "SAVEPOINT tickwheel_try", "WITH taken AS"], sent
    assert counts(migrated_engine) == (2 * SHARED_BATCH,) * 3
    slots_hold(migrated_engine)


async def test_a_group_of_new_jobs_is_one_statement(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine, monkeypatch
) -> None:
    """On PostgreSQL a CreateJob group (fewer than 64 jobs, each its own
    request id) records its ids, takes its units and inserts its rows in one
    statement between BEGIN and COMMIT (two before). When that cannot take
    the whole group (a request id seen, a payload over the limit, a dry
    slot) it writes only the ids it recorded and the group goes on as
    before: each item answered as alone, the quota counted exactly, the
    rows of a tenant that does not exist never written."""
    if migrated_engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite and CockroachDB keep their statements")
    await tenants.create(Tenant(name="acme", max_jobs=1000, max_payload_bytes=100))
    await jobs.create_many("acme", [(new_job(clock, name="warm"), "warm")])  # a fresh tenant's slot: dealt here
    sent = _sent(monkeypatch)
    group = [(new_job(clock, name=f"g{i}"), f"group-{i}") for i in range(12)]
    outcomes = await jobs.create_many("acme", group)
    assert [created for _, created in outcomes] == [True] * 12
    assert sent == ["WITH recorded AS"], sent
    assert counts(migrated_engine) == (13, 13, 13)

    sent.clear()
    mixed = [(new_job(clock, name="again"), "group-3"), (new_job(clock, name="m0"), "mixed-0"),
             (new_job(clock, name="big", payload_size=101), "mixed-big"), (new_job(clock, name="m1"), "mixed-1")]
    outcomes = await jobs.create_many("acme", mixed)
    assert outcomes[0] == (await jobs.get("acme", outcomes[0][0].id), False)
    assert outcomes[0][0].name == "g3"
    assert [outcomes[1][1], outcomes[3][1]] == [True, True]
    assert isinstance(outcomes[2], QuotaExceeded) and outcomes[2].quota == "max_payload_bytes"
    assert sent[0] == "WITH recorded AS" and "WITH taken AS" in sent, sent  # the new ones inserted after
    assert counts(migrated_engine) == (15, 15, 15)
    slots_hold(migrated_engine)

    with pytest.raises(NotFound):
        await jobs.create_many("nobody", [(new_job(clock, tenant="nobody", name="x"), "x")])
    assert counts(migrated_engine, "nobody") == (0, 0, 0)


def _parameters_sent(monkeypatch) -> list[dict]:
    """The parameters of every statement psycopg's cursors send from now on."""
    import psycopg

    sent: list[dict] = []
    execute = psycopg.Cursor.execute

    def recorded(self, query, params=None, **kwargs):
        if isinstance(params, dict):
            sent.append(params)
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recorded)
    return sent


@pytest.mark.parametrize("size", [12, SHARED_BATCH])
async def test_a_create_sends_each_column_whole_not_a_value_per_job(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine, monkeypatch, size
) -> None:
    """A create's statements (a CreateJob group's, a batch's) take every
    column of its jobs as one value: a text array literal, or the
    definitions packed as one binary array (:mod:`.binary_arrays`), never a
    Python list that psycopg dumps a call per element. The definitions,
    of several lengths (some bytes PostgreSQL would escape in text), are
    stored byte for byte."""
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("SQLite's statements are SQLAlchemy's, a row of parameters per job")
    await tenants.create(Tenant(name="acme", max_jobs=1000))
    await jobs.create_many("acme", [(new_job(clock, name="warm"), "warm")])  # a fresh tenant's slot: dealt here
    sent = _parameters_sent(monkeypatch)
    items = []
    for i in range(size):
        job = new_job(clock, name=f"c{i}")
        spec = b"\x1a\x02c" + bytes([48 + i % 10]) + b"\x5a" + bytes([i % 7]) + bytes(range(256))[: i % 7]
        items.append((dataclasses.replace(job, spec=spec), f"column-{i}"))
    outcomes = await jobs.create_many("acme", items)
    assert all(created for _, created in outcomes)
    listed = sorted({name for parameters in sent for name, value in parameters.items()
                     if isinstance(value, (list, tuple))})  # fmt: skip
    assert not listed, f"sent as Python lists (dumped a call per element): {listed}"
    with migrated_engine.connect() as conn:
        stored = dict(conn.execute(sa.select(jobs_table.c.id, jobs_table.c.spec).where(
            jobs_table.c.id.in_([record.id for record, _ in outcomes]))).all())  # fmt: skip
    assert [stored[record.id] for record, _ in outcomes] == [job.spec for job, _ in items]
    assert counts(migrated_engine) == (size + 1,) * 3


async def test_a_group_at_the_limit_creates_what_fits_in_order(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine
) -> None:
    """A group that the slot cannot cover (here: the tenant's last units)
    is dealt again and the first ones that fit are created, the rest
    refused QuotaExceeded with nothing of theirs kept (no request id)."""
    await tenants.create(Tenant(name="acme", max_jobs=10))
    first = await jobs.create_many("acme", [(new_job(clock, name=f"a{i}"), f"a-{i}") for i in range(7)])
    assert all(created for _, created in first)
    outcomes = await jobs.create_many("acme", [(new_job(clock, name=f"b{i}"), f"b-{i}") for i in range(5)])
    assert [created for _, created in outcomes[:3]] == [True] * 3
    assert all(isinstance(o, QuotaExceeded) and o.quota == "max_jobs" for o in outcomes[3:])
    assert counts(migrated_engine) == (10, 10, 10)
    slots_hold(migrated_engine)


HOSTILE_TEXTS = ['say "hi"', "back\\slash", "{braces}", "a,b", "NULL", " padded ", "", "é☃𝄞", "'quote",
                 "x" * 2000]  # fmt: skip


async def test_names_and_request_ids_are_stored_as_sent_whatever_they_spell(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine
) -> None:
    """The batch's columns go to PostgreSQL as array literals: a name or a
    request id that spells an array's syntax (quotes, backslashes, braces,
    commas, the word NULL, an empty string) is stored and answered as
    sent, and each request id stays its own (a repeat is still a repeat)."""
    await tenants.create(Tenant(name="acme"))
    items = [(new_job(clock, name=text), f"r{text}") for text in HOSTILE_TEXTS]
    batch = NewJobs.of("acme", items, lambda job: ())
    outcomes, _ = await jobs.create_batch(batch)
    assert outcomes == [CREATED] * len(items)
    for index, text in enumerate(HOSTILE_TEXTS):
        stored = await jobs.get("acme", batch.ids[index])
        assert stored.name == text
    again = await jobs.create_many("acme", [(new_job(clock, name="other"), f"r{text}") for text in HOSTILE_TEXTS])
    assert [(record.id, created) for record, created in again] == [(job_id, False) for job_id in batch.ids]
    with migrated_engine.connect() as conn:
        query = sa.select(request_ids.c.request_id).where(request_ids.c.tenant == "acme")
        recorded = set(conn.execute(query).scalars())
    assert recorded == {f"r{text}" for text in HOSTILE_TEXTS}


async def test_create_many_takes_the_key_limits_the_api_read(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine
) -> None:
    """A NewJob carrying the key limits the API read when it validated the
    definition is not parsed again for them (its spec here names none);
    one without them (None) has them read from its spec."""
    await tenants.create(Tenant(name="acme"))
    told = NewJob(**{**new_job(clock).__dict__, "key_limits": (("db", 2),)})
    spec = job_pb2.Job(name="nightly", concurrency_keys=[job_pb2.ConcurrencyKey(key="api", limit=3)])
    read = NewJob(**{**new_job(clock).__dict__, "spec": spec.SerializeToString()})
    assert read.key_limits is None
    await jobs.create_many("acme", [(told, "r-told"), (read, "r-read")])
    with migrated_engine.connect() as conn:
        keys = dict(conn.execute(sa.select(concurrency_keys.c.name, concurrency_keys.c.max_running)).all())
    assert keys == {"db": 2, "api": 3}


async def test_a_repeat_gets_the_first_job_whatever_its_own_payload(tenants: TenantStore, jobs: JobStore, clock) -> None:
    """The request id decides: a repeat whose own definition would now be
    refused (a payload over the quota) still answers the job its first
    request created, as a repeat of CreateJob always has."""
    await tenants.create(Tenant(name="acme", max_payload_bytes=100))
    first, _ = await jobs.create(new_job(clock), "r-1")
    (again, fresh) = await jobs.create_many(
        "acme", [(new_job(clock, payload_size=101), "r-1"), (new_job(clock, payload_size=101), "r-2")]
    )
    assert again == (first, False)
    assert isinstance(fresh, QuotaExceeded) and fresh.quota == "max_payload_bytes"


async def test_a_request_whose_job_was_deleted_is_not_found(tenants: TenantStore, jobs: JobStore, clock) -> None:
    await tenants.create(Tenant(name="acme"))
    record, _ = await jobs.create(new_job(clock), "r-1")
    await jobs.delete("acme", record.id)
    (outcome,) = await jobs.create_many("acme", [(new_job(clock), "r-1")])
    assert isinstance(outcome, NotFound) and outcome.ident == record.id
    with pytest.raises(NotFound):
        await jobs.create(new_job(clock), "r-1")
    with pytest.raises(NotFound):
        await jobs.create_many("nobody", [(new_job(clock, tenant="nobody"), "r-1")])


@pytest.mark.parametrize("size", [5, 64, 200])
async def test_oversized_items_write_nothing_whichever_statement_records_the_batch(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine, size: int
) -> None:
    """The payload limit is read in the statement recording the request ids
    (on PostgreSQL; from 64 items its plain form): in a batch of ``size``
    mixing items over it (new ones, one repeating an earlier request, one
    twice in the batch), items exactly at it and under it, only those within
    it are recorded and created; an oversized new item writes nothing, so
    its request id sent again with a payload that fits creates its job; the
    oversized repeat answers its first job, the batch's own repeat its
    first item's answer."""
    await tenants.create(Tenant(name="acme", max_jobs=1000, max_payload_bytes=100))
    earlier, _ = await jobs.create(new_job(clock), "earlier")
    payloads = [101, 100, 10_000_000, 99] + [10 if i % 3 else 101 for i in range(size - 4)]
    ids = [f"r-{i:03}" for i in range(size)]
    items = [(new_job(clock, payload_size=p, name=f"n{i}"), r) for i, (p, r) in enumerate(zip(payloads, ids))]
    items += [(new_job(clock, payload_size=500), "earlier"), (new_job(clock, payload_size=101), "r-000")]
    outcomes = await jobs.create_many("acme", items)
    for (job, request_id), payload, outcome in zip(items, payloads, outcomes):
        if payload > 100:
            assert isinstance(outcome, QuotaExceeded) and outcome.quota == "max_payload_bytes", request_id
        else:
            assert outcome[1] and outcome[0].id == job.id, request_id
    assert outcomes[-2] == (earlier, False)
    assert isinstance(outcomes[-1], QuotaExceeded) and outcomes[-1].quota == "max_payload_bytes"
    fitting = sum(1 for p in payloads if p <= 100)
    assert counts(migrated_engine) == (fitting + 1, fitting + 1, fitting + 1)
    with migrated_engine.connect() as conn:
        recorded = set(conn.execute(sa.select(request_ids.c.request_id).where(request_ids.c.tenant == "acme")).scalars())
    assert recorded == {r for r, p in zip(ids, payloads) if p <= 100} | {"earlier"}
    retried, created = await jobs.create(new_job(clock, payload_size=100), "r-000")
    assert created and retried.id not in {o[0].id for o in outcomes if isinstance(o, tuple)}
    slots_hold(migrated_engine)


async def test_a_dry_slot_inserts_nothing_and_takes_no_other_tenants_units(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine
) -> None:
    """A group's units are taken in the statement inserting its jobs (on
    PostgreSQL): when its slot is dry that statement inserts no job, the
    attempt is refused (SlotDry, rolled back: nothing written), and the
    next one deals the tenant's quota again and creates every job. Another
    tenant's slot of the same index, with room, is never taken from."""
    await tenants.create(Tenant(name="acme", max_jobs=40))
    await tenants.create(Tenant(name="globex", max_jobs=40))
    with migrated_engine.begin() as conn:  # every slot of acme dry, none of globex
        conn.execute(tenant_quota.update().where(tenant_quota.c.tenant == "acme").values(allowance=0))
    def slots(tenant: str) -> list[tuple]:
        with migrated_engine.connect() as conn:
            return conn.execute(
                sa.select(tenant_quota.c.slot, tenant_quota.c.used, tenant_quota.c.allowance)
                .where(tenant_quota.c.tenant == tenant).order_by(tenant_quota.c.slot)
            ).all()  # fmt: skip
    theirs = slots("globex")
    batch = NewJobs.of("acme", [(new_job(clock, name=f"n{i}"), f"r-{i}") for i in range(3)], lambda job: None)
    if jobs.caps.row_locks:
        with migrated_engine.connect() as conn:
            transaction = conn.begin()
            with pytest.raises(SlotDry):
                create_jobs(conn, jobs.caps, batch, slot=0, partition_count=16, now_us=to_us(clock.now()))
            written = conn.execute(sa.select(sa.func.count()).select_from(jobs_table)).scalar()
            transaction.rollback()
        assert written == 0
        assert counts(migrated_engine) == (0, 0, 0)
    outcomes = await jobs.create_many("acme", [(new_job(clock, name=f"n{i}"), f"r-{i}") for i in range(3)])
    assert all(created for _, created in outcomes)
    assert counts(migrated_engine) == (3, 3, 3)
    assert slots("globex") == theirs
    slots_hold(migrated_engine)


@pytest.mark.parametrize("ghost", ["nobody", "ACME", "acme ", "acme'--"])
async def test_a_batch_for_a_tenant_that_does_not_exist_writes_nothing(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine, ghost: str
) -> None:
    """The store's one check of the tenant (the limits read, once per batch)
    is what refuses it on PostgreSQL since migration 0028 dropped the
    per-row foreign key: NotFound, and no job, request id or quota unit of
    that name, nor of the tenant it resembles."""
    await tenants.create(Tenant(name="acme"))
    items = [(new_job(clock, tenant=ghost, name=f"j{i}"), f"r-{i}") for i in range(70)]
    with pytest.raises(NotFound) as raised:
        await jobs.create_many(ghost, items)
    assert raised.value.kind == "tenant"
    assert counts(migrated_engine, ghost) == (0, 0, 0)
    assert counts(migrated_engine, "acme") == (0, 0, 0)
    (created,) = await jobs.create_many("acme", [(new_job(clock), "r-0")])
    assert created[1], "the tenant's own request id was not taken by the refused call"


@pytest.mark.parametrize("backend", STORE_BACKENDS)
def test_jobs_keep_no_per_row_tenant_key_on_postgres(request, tmp_path, backend: str) -> None:
    """Migration 0028: on PostgreSQL ``jobs`` has no foreign key (the create
    checks the tenant once per batch); SQLite, which cannot drop one, keeps
    it. Rows inserted before the migration stay."""
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = create_store_engine(url)
    try:
        migrate(engine, target=27)
        keys = [key["referred_table"] for key in sa.inspect(engine).get_foreign_keys("jobs")]
        assert keys == ["tenants"]
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO tenants (name, weight, max_concurrency, max_jobs, max_payload_bytes, "
                "requests_per_second, state, pause_reason, created_at, updated_at, version) "
                "VALUES ('acme', 1, 0, 10, 65536, 100, 'active', '', 0, 0, 1)"
            ))
            conn.execute(sa.text(
                "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, run_count, tzdata_version, "
                "pause_reason, version, created_at, updated_at, quota_slot) "
                "VALUES ('job_old', 'acme', 0, 'old', 'completed', :spec, 'UTC', 0, '2026a', '', 1, 0, 0, 0)"
            ), {"spec": b""})  # fmt: skip
        migrate(engine)
        keys = [key["referred_table"] for key in sa.inspect(engine).get_foreign_keys("jobs")]
        assert keys == (["tenants"] if backend == "sqlite" else [])
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT id FROM jobs")).scalars().all() == ["job_old"]
    finally:
        engine.dispose()


async def test_request_ids_are_per_tenant(tenants: TenantStore, jobs: JobStore, clock) -> None:
    await tenants.create(Tenant(name="acme"))
    await tenants.create(Tenant(name="globex"))
    mine, _ = await jobs.create(new_job(clock), "shared-id")
    (theirs,) = await jobs.create_many("globex", [(new_job(clock, tenant="globex"), "shared-id")])
    assert theirs[1] and theirs[0].tenant == "globex" and theirs[0].id != mine.id
    with pytest.raises(ValueError):
        await jobs.create_many("acme", [(new_job(clock, tenant="globex"), "x")])


async def test_lowering_max_jobs_under_the_count_refuses_creates_until_deletes(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine
) -> None:
    await tenants.create(Tenant(name="acme", max_jobs=100))
    made = [o[0] for o in await jobs.create_many("acme", [(new_job(clock), f"r{i}") for i in range(10)])]
    await tenants.update("acme", max_jobs=5)
    with pytest.raises(QuotaExceeded):
        await jobs.create(new_job(clock), "over")
    for record in made[:6]:
        await jobs.delete("acme", record.id)
    assert await tenants.job_count("acme") == 4
    await jobs.create(new_job(clock), "fits")
    with pytest.raises(QuotaExceeded):
        await jobs.create(new_job(clock), "over-again")
    assert counts(migrated_engine)[:2] == (5, 5)
    slots_hold(migrated_engine)
    await tenants.update("acme", max_jobs=8)
    outcomes = await jobs.create_many("acme", [(new_job(clock), f"more{i}") for i in range(5)])
    assert [isinstance(o, tuple) for o in outcomes] == [True, True, True, False, False]
    slots_hold(migrated_engine)


@pytest.mark.parametrize("batch", [1, 7])
async def test_creates_racing_at_the_limit_stop_exactly_at_max_jobs(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine, batch: int
) -> None:
    """16 writers race past max_jobs with single creates or batches: exactly
    max_jobs jobs exist after, every refusal says max_jobs, none fails."""
    await tenants.create(Tenant(name="acme", max_jobs=50))

    async def writer(w: int) -> list:
        out = []
        for n in range(0, 12, batch):
            out += await jobs.create_many("acme", [(new_job(clock), f"w{w}-{n + i}") for i in range(batch)])
        return out

    outcomes = [o for part in await asyncio.gather(*(writer(w) for w in range(16))) for o in part]
    created = [o for o in outcomes if isinstance(o, tuple)]
    refused = [o for o in outcomes if not isinstance(o, tuple)]
    assert len(created) == 50 and all(c for _, c in created)
    assert refused and all(isinstance(o, QuotaExceeded) and o.quota == "max_jobs" for o in refused)
    assert counts(migrated_engine) == (50, 50, 50)
    slots_hold(migrated_engine)


async def test_concurrent_writes_of_one_tenant_neither_fail_nor_drift(
    tenants: TenantStore, jobs: JobStore, clock, migrated_engine
) -> None:
    """16 writers create (singly and in batches), pause, resume, update and
    delete jobs of one tenant at once: no call runs out of retries, and the
    count is the jobs that exist."""
    await tenants.create(Tenant(name="acme"))
    rng = random.Random(4)

    async def writer(w: int) -> int:
        mine = []
        for n in range(24):
            if mine and rng.random() < 0.3:
                record = mine.pop(rng.randrange(len(mine)))
                await jobs.delete("acme", record.id)
            elif mine and rng.random() < 0.3:
                index = rng.randrange(len(mine))
                paused, _ = await jobs.pause("acme", mine[index].id, "racing")
                resumed, _, _ = await jobs.resume(
                    "acme", paused.id, expected_version=paused.version, span=PausedSpan(None, None),
                    tzdata_version="2026a",
                )
                mine[index], _ = await jobs.update(
                    "acme", resumed.id, resumed.version, name=f"renamed-{n}", spec=resumed.spec, time_zone="UTC",
                    tzdata_version="2026a", payload_size=0, reschedule=None,
                )
            elif rng.random() < 0.2:
                made = await jobs.create_many("acme", [(new_job(clock), f"w{w}-{n}-{i}") for i in range(5)])
                mine += [record for record, _ in made]
            else:
                record, _ = await jobs.create(new_job(clock), f"w{w}-{n}")
                mine.append(record)
        return len(mine)

    try:
        kept = sum(await asyncio.gather(*(writer(w) for w in range(16))))
    except TransactionConflictError as error:  # pragma: no cover - the failure this test guards against
        pytest.fail(f"a job write of one tenant ran out of retries: {error}")
    stored, counted, _ = counts(migrated_engine)
    assert stored == counted == kept
    assert await tenants.job_count("acme") == kept
    slots_hold(migrated_engine)


@pytest.mark.parametrize("backend", STORE_BACKENDS)
def test_the_quota_migration_keeps_every_tenants_count(request, tmp_path, backend: str) -> None:
    """A store migrated before the quota slots, with jobs: after the
    migrations each tenant's count is in slot 0 with its jobs, the rest of
    max_jobs dealt as allowances."""
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = create_store_engine(url)
    try:
        migrate(engine, target=15)
        with engine.begin() as conn:
            for name, max_jobs, count in (("acme", 10, 3), ("globex", 100_000, 0), ("full", 2, 5)):
                conn.execute(sa.text(
                    "INSERT INTO tenants (name, weight, max_concurrency, max_jobs, max_payload_bytes, "
                    "requests_per_second, state, pause_reason, job_count, created_at, updated_at, version) "
                    "VALUES (:n, 1, 0, :m, 65536, 100, 'active', '', :c, 0, 0, 1)"
                ), {"n": name, "m": max_jobs, "c": count})  # fmt: skip
        migrate(engine)
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT tenant, slot, used, allowance FROM tenant_quota")).all()
        by_tenant: dict[str, list] = {}
        for tenant, slot, used, allowance in rows:
            by_tenant.setdefault(tenant, []).append((slot, used, allowance))
        for tenant, max_jobs, count in (("acme", 10, 3), ("globex", 100_000, 0), ("full", 2, 5)):
            slots = by_tenant[tenant]
            assert len(slots) == 32
            assert sum(used for _, used, _ in slots) == count
            assert [used for slot, used, _ in slots if slot != 0] == [0] * 31
            assert sum(allowance for _, _, allowance in slots) == max(max_jobs, count)
    finally:
        engine.dispose()


@pytest.mark.parametrize("own, rounds, max_jobs", [(6, 40, 1_500), (70, 10, 4_500)])
async def test_batches_racing_through_quota_deals_never_deadlock(
    tenants: TenantStore, clock, migrated_engine, own: int, rounds: int, max_jobs: int
) -> None:
    """Two servers' batches of one tenant race while its slots keep running
    dry (each dry slot deals again under every slot's lock), their request
    ids overlapping in opposite orders: every lock is taken in one order
    (request ids sorted, then one slot or every slot in slot order, never a
    slot and then the others), so no transaction is retried for a deadlock
    (SQLSTATE 40P01), and the quota ends exact. Small batches let a dry
    slot go by running the create again, large ones by a savepoint."""
    await tenants.create(Tenant(name="acme", max_jobs=max_jobs))
    servers = [JobStore(migrated_engine, clock, partition_count=16) for _ in range(2)]

    async def writer(w: int) -> None:
        store = servers[w % 2]
        for n in range(rounds):
            shared = [f"shared-{n}-{i}" for i in range(4)]  # the same ids, opposite orders
            items = [(new_job(clock), request_id) for request_id in (shared if w % 2 else shared[::-1])]
            items += [(new_job(clock), f"w{w}-{n}-{i}") for i in range(own)]
            await store.create_many("acme", items)

    await asyncio.gather(*(writer(w) for w in range(8)))
    retried = sum((store.retries for store in servers), Counter())
    assert retried["40P01"] == 0, f"transactions retried: {dict(retried)}"
    stored, counted, _ = counts(migrated_engine)
    assert stored == counted == max_jobs
    slots_hold(migrated_engine)


async def test_batches_repeating_each_others_request_ids_never_deadlock(
    tenants: TenantStore, clock, migrated_engine
) -> None:
    """Batches of two servers, sent at once, carry the same request ids in
    opposite orders (a client resending a batch, reversed, while the first
    send still runs): each request id is recorded once, the other item
    answers its job, and no transaction is retried for a deadlock (SQLSTATE
    40P01): request ids are inserted in one order."""
    await tenants.create(Tenant(name="acme"))
    servers = [JobStore(migrated_engine, clock, partition_count=16) for _ in range(2)]
    answers: dict[str, set[str]] = {}

    async def send(server: JobStore, request_ids: list[str]) -> None:
        items = [(new_job(clock), request_id) for request_id in request_ids]
        for (_, request_id), (record, _) in zip(items, await server.create_many("acme", items)):
            answers.setdefault(request_id, set()).add(record.id)

    for n in range(30):
        shared = [f"shared-{n}-{i:04}" for i in range(1000)]
        await asyncio.gather(send(servers[0], shared), send(servers[1], shared[::-1]))
    retried = sum((store.retries for store in servers), Counter())
    assert retried["40P01"] == 0, f"transactions retried: {dict(retried)}"
    assert len(answers) == 30_000 and all(len(ids) == 1 for ids in answers.values())
    assert counts(migrated_engine) == (30_000, 30_000, 30_000)


async def test_a_listing_reads_each_job_as_get_does(tenants: TenantStore, jobs: JobStore, clock) -> None:
    """ListJobs's page is read as plain tuples (store/jobrecords.py:
    job_records): every field, None instants included, is what GetJob's
    read of the row gives."""
    await tenants.create(Tenant(name="acme"))
    active, _ = await jobs.create(new_job(clock, name="active"), "r-1")
    done = new_job(clock, name="done")
    done = NewJob(**{**done.__dict__, "next_run_at": None, "next_due_at": None})
    completed, _ = await jobs.create(done, "r-2")
    paused, _ = await jobs.create(new_job(clock, name="paused"), "r-3")
    paused, _ = await jobs.pause("acme", paused.id, "held")
    listed = await jobs.list("acme")
    assert listed == [await jobs.get("acme", job_id) for job_id in sorted((active.id, completed.id, paused.id))]
    assert {job.state for job in listed} == {"active", "completed", "paused"}
    assert listed == await jobs.search(tenant="acme")
