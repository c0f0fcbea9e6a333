"""CreateJob group commit (coalescer.py) over the real job store, on SQLite
and PostgreSQL: a write that fails inside its transaction fails every call
of its group with a retryable status and writes nothing of any of them, and
each call retried with its request id is then created once
(docs/architecture.md, "Job writes at scale")."""

from __future__ import annotations

import asyncio
import dataclasses

import grpc
import pytest
from psycopg import IsolationLevel
from psycopg.pq import TransactionStatus
from sqlalchemy import exc as sa_exc

from tests.conformance.test_job_writes import counts, new_job, slots_hold
from tickwheel_server.api.status import status_for
from tickwheel_server.coalescer import CreateCoalescer
from tickwheel_server.store.engine import create_store_engine
from tickwheel_server.store.errors import StoreError, StoreUnavailableError
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.tenants import Tenant, TenantStore

TIMEOUT = 30


class FaultyJobStore(JobStore):
    """A job store whose first write waits for ``hold_first``, and whose
    write number ``fail_write`` fails inside its transaction after every
    statement of the create ran (so the transaction rolls back)."""

    def __init__(self, *args, fail_write: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hold_first = asyncio.Event()
        self.fail_write = fail_write
        self.writes = 0
        self._failing = False

    async def create_many(self, tenant, items):
        self.writes += 1
        if self.writes == 1:
            await self.hold_first.wait()
        self._failing = self.writes == self.fail_write
        return await super().create_many(tenant, items)

    async def _tx(self, fn, **kwargs):
        if not self._failing:
            return await super()._tx(fn, **kwargs)

        def failing(conn):
            fn(conn)  # a dry quota slot raises here: the store's next transaction, dealing first, fails
            self._failing = False
            raise StoreUnavailableError("the connection dropped before COMMIT", attempts=1)

        return await super()._tx(failing, **kwargs)


async def until(predicate) -> None:
    async def spin() -> None:
        while not predicate():
            await asyncio.sleep(0)

    await asyncio.wait_for(spin(), TIMEOUT)


async def test_a_failed_group_fails_each_call_retryably_and_writes_nothing(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme", max_jobs=100))
    store = FaultyJobStore(migrated_engine, clock, partition_count=16, fail_write=2)
    coalescer = CreateCoalescer(store.create_many)
    first = asyncio.create_task(coalescer.create(new_job(clock, name="first"), "r-first"))
    await until(lambda: store.writes == 1)
    group = [asyncio.create_task(coalescer.create(new_job(clock, name=f"j{i}"), f"r{i}")) for i in range(5)]
    await until(lambda: coalescer.queued("acme") == 5)
    store.hold_first.set()
    assert (await asyncio.wait_for(first, TIMEOUT))[1] is True
    results = await asyncio.gather(*group, return_exceptions=True)
    assert store.writes == 2, "the five queued calls went in one write"
    assert all(isinstance(r, StoreUnavailableError) for r in results)
    assert all(status_for(r)[0] == grpc.StatusCode.UNAVAILABLE for r in results)
    assert counts(migrated_engine) == (1, 1, 1), "nothing of the failed group was written"
    slots_hold(migrated_engine)

    retried = await asyncio.gather(*(coalescer.create(new_job(clock, name=f"j{i}"), f"r{i}") for i in range(5)))
    assert all(created for _, created in retried), "each call retried with its request id is created"
    assert counts(migrated_engine) == (6, 6, 6)
    again = await coalescer.create(new_job(clock, name="j0"), "r0")
    assert again == (retried[0][0], False)
    assert not coalescer.writing("acme")


@pytest.mark.postgres
async def test_creates_through_a_postgres_restart_are_each_created_once(
    postgres_server, migrated_postgres_url, clock
) -> None:
    """Pooled connections are not pinged before use: the server's restart
    under concurrent creates costs reconnects and retryable failures,
    never a job created twice or a unit of the quota lost; after it, no
    create runs on a connection the restart closed."""
    engine = create_store_engine(migrated_postgres_url, connect_timeout=2)
    try:
        tenants = ["acme", "bravo"]
        for tenant in tenants:
            await TenantStore(engine, clock).create(Tenant(name=tenant, max_jobs=1000))
        store = JobStore(engine, clock, partition_count=16)
        coalescer = CreateCoalescer(store.create_many)
        restarted = asyncio.Event()
        answers: dict[tuple[str, str], object] = {}

        async def client(tenant: str, number: int) -> None:
            sent = 0
            while not restarted.is_set() or sent < 3:
                request_id = f"{tenant}-{number}-{sent}"
                try:
                    answers[tenant, request_id] = await coalescer.create(new_job(clock, tenant), request_id)
                except StoreError as error:  # retryable, or ambiguous: the client retries it
                    answers[tenant, request_id] = error
                sent += 1

        # Both tenants' writes side by side: the pool holds connections the restart closes.
        clients = [asyncio.create_task(client(tenant, number)) for tenant in tenants for number in range(3)]
        await until(lambda: len(answers) >= 12)
        await asyncio.to_thread(postgres_server.restart)
        restarted.set()
        await asyncio.wait_for(asyncio.gather(*clients), TIMEOUT)
        retries = sum(store.retries.values())
        for (tenant, request_id), answer in answers.items():
            again = await coalescer.create(new_job(clock, tenant), request_id)  # a retry with its request id
            if isinstance(answer, tuple):
                assert again == (answer[0], False), "a create answered before is its request's job"
        for tenant in tenants:
            made = sum(1 for (owner, _), answer in answers.items() if owner == tenant)
            assert counts(engine, tenant) == (made, made, made), "each request created once, each job counted once"
            slots_hold(engine, tenant)
        assert sum(store.retries.values()) == retries, "after the restart no create ran on a closed connection"
    finally:
        engine.dispose()


@pytest.mark.postgres
async def test_a_group_failed_mid_way_leaves_its_pooled_connection_clean_for_the_next(
    migrated_postgres_url, clock
) -> None:
    """On one pooled connection: a group whose jobs' insert fails (a job id
    already stored, after its request ids were recorded in the same
    transaction) and a group failed by its caller after both statements ran
    each write nothing; the next group, on the same connection, is created
    whole and finds nothing of theirs (no request id, no unit of the quota),
    and the connection is back idle at the engine's level."""
    engine = create_store_engine(migrated_postgres_url, pool_size=1, max_overflow=0)
    try:
        await TenantStore(engine, clock).create(Tenant(name="acme", max_jobs=100))
        store = JobStore(engine, clock, partition_count=16)
        (kept, created), = await store.create_many("acme", [(new_job(clock, name="kept"), "r-kept")])
        assert created
        pid = _backend(engine)

        # An id already stored: the jobs' insert fails with a unique violation.
        taken = dataclasses.replace(new_job(clock, name="clash"), id=kept.id)
        with pytest.raises(sa_exc.IntegrityError):
            await store.create_many("acme", [(new_job(clock, name="a"), "r-a"), (taken, "r-clash")])

        failing = FaultyJobStore(engine, clock, partition_count=16, fail_write=1)
        failing.hold_first.set()
        with pytest.raises(StoreUnavailableError):
            await failing.create_many("acme", [(new_job(clock, name="b"), "r-b"), (new_job(clock, name="c"), "r-c")])
        assert counts(engine) == (1, 1, 1), "nothing of either failed group was written"

        again = await store.create_many("acme", [(new_job(clock, name=n), f"r-{n}") for n in ("a", "b", "c", "clash")])
        assert [created for _, created in again] == [True] * 4, "no request id of the failed groups was left"
        assert counts(engine) == (5, 5, 5)
        slots_hold(engine)
        assert _backend(engine) == pid, "the same pooled connection throughout"
        pooled = engine.raw_connection()
        try:
            assert pooled.dbapi_connection.info.transaction_status == TransactionStatus.IDLE
            assert pooled.dbapi_connection.isolation_level == IsolationLevel.SERIALIZABLE
        finally:
            pooled.close()
    finally:
        engine.dispose()


def _backend(engine) -> int:
    pooled = engine.raw_connection()
    try:
        return pooled.dbapi_connection.info.backend_pid
    finally:
        pooled.close()
