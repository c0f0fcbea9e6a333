"""CreateJob group commit against the real gRPC server: concurrent calls of
one tenant share a transaction (on PostgreSQL the first write is held on its
quota rows so the rest queue behind it, deterministically), each call keeps
a lone call's answer: the quota exact at the limit, one job per request id,
a caller that goes away while queued leaves nothing and wedges nothing
(docs/architecture.md, "Job writes at scale")."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import field_mask_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc

from tests.support.polling import eventually
from tests.support.server import running_server

from .test_batch_create_api import item, job_count
from .test_server_api import bearer


HELD = {"store_lock_timeout": 0}
"""The servers' settings here: no lock_timeout of their own, since a test
holds the quota rows for as long as queueing its calls takes (under load,
longer than the default's two tries of 1 s)."""


@pytest.fixture
async def pg_server(postgres_url, etcd_endpoint):
    async with running_server(postgres_url, etcd_endpoint, **HELD) as running:
        yield running


@pytest.fixture
def store(postgres_url):
    engine = sa.create_engine(postgres_url)
    yield engine
    engine.dispose()


@contextlib.contextmanager
def quota_held(engine, tenant: str):
    """Hold every quota row of ``tenant`` locked: a create's write waits
    at its quota update until the block ends."""
    with engine.connect() as conn:
        with conn.begin():
            rows = conn.execute(sa.text(
                "SELECT slot FROM tenant_quota WHERE tenant = :tenant FOR UPDATE"), {"tenant": tenant}).all()
            assert rows, "the tenant has quota rows"
            yield


def slots_used(engine, tenant: str) -> int:
    """How many quota slots the tenant's jobs name: one per write that created some."""
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT count(DISTINCT quota_slot) FROM jobs WHERE tenant = :tenant"), {"tenant": tenant}).scalar()


async def set_max_jobs(server, channel, max_jobs: int) -> None:
    await admin_pb2_grpc.AdminServiceStub(channel).UpdateTenant(
        admin_pb2.UpdateTenantRequest(
            tenant=admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(max_jobs=max_jobs)),
            update_mask=field_mask_pb2.FieldMask(paths=["quotas"]),
        ),
        metadata=server.admin_metadata(),
    )  # fmt: skip


async def queue_behind_held_write(server, scheduler, key, requests: list[str | scheduler_pb2.CreateJobRequest]):
    """Send the first call (a request id: the usual job; or a request),
    wait until its write holds (on the locked quota rows), then send the
    rest one at a time, each once the one before has queued (calls in
    flight together reach the server in any order; the queue's order is
    what the tests read). Returns the calls' tasks, in order; the caller
    releases the lock."""
    creates = server.server.creates

    async def call(request: str | scheduler_pb2.CreateJobRequest) -> scheduler_pb2.CreateJobResponse:
        return await scheduler.CreateJob(item(request) if isinstance(request, str) else request, metadata=bearer(key))

    first = asyncio.create_task(call(requests[0]))
    await eventually(lambda: creates.writing("acme") and creates.queued("acme") == 0 and creates.writes == 1,
                     "the first write in flight")
    rest: list[asyncio.Task] = []
    for request in requests[1:]:
        rest.append(asyncio.create_task(call(request)))
        await eventually(lambda: creates.queued("acme") == len(rest), f"call {len(rest)} queued", interval=0.005)
    return [first, *rest]


@pytest.mark.postgres
@pytest.mark.etcd
async def test_calls_racing_at_max_jobs_share_one_write_and_stop_at_exactly_max_jobs(pg_server, store) -> None:
    key = await pg_server.create_tenant("acme")
    async with grpc.aio.insecure_channel(pg_server.address) as channel:
        await set_max_jobs(pg_server, channel, 25)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with quota_held(store, "acme"):
            calls = await queue_behind_held_write(pg_server, scheduler, key, [f"r{i}" for i in range(60)])
        results = await asyncio.gather(*calls, return_exceptions=True)
        created = [r for r in results if isinstance(r, scheduler_pb2.CreateJobResponse)]
        refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(created) == 25 and all(r.created for r in created)
        assert len(refused) == 35
        assert all(r.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_jobs" in r.details() for r in refused)
        assert await job_count(pg_server, channel) == 25
        assert pg_server.server.creates.writes == 2
        # Each write takes its units from one slot (the second may pick the first's again).
        assert slots_used(store, "acme") <= 2, "the 59 queued calls were stored by one transaction"


@pytest.mark.postgres
@pytest.mark.etcd
async def test_concurrent_calls_with_one_request_id_create_one_job(pg_server, store) -> None:
    key = await pg_server.create_tenant("acme")
    async with grpc.aio.insecure_channel(pg_server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with quota_held(store, "acme"):
            calls = await queue_behind_held_write(pg_server, scheduler, key,
                                                  ["first", "x", "x", "y", "first", "x", "y"])
        results = await asyncio.gather(*calls)
        by_id: dict[str, set[str]] = {}
        for rid, reply in zip(["first", "x", "x", "y", "first", "x", "y"], results):
            by_id.setdefault(rid, set()).add(reply.job.id)
        assert all(len(ids) == 1 for ids in by_id.values()), "every call of a request id answers its one job"
        assert [r.created for r in results] == [True, True, False, True, False, False, False]
        assert await job_count(pg_server, channel) == 3


@pytest.mark.postgres
@pytest.mark.etcd
async def test_a_caller_gone_while_queued_leaves_nothing_and_wedges_nothing(pg_server, store) -> None:
    key = await pg_server.create_tenant("acme")
    creates = pg_server.server.creates
    async with grpc.aio.insecure_channel(pg_server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with quota_held(store, "acme"):
            first, gone, stays = await queue_behind_held_write(pg_server, scheduler, key, ["a", "gone", "b"])
            gone.cancel()
            await eventually(lambda: creates.queued("acme") == 1, "the cancelled call left the queue")
        assert (await first).created and (await stays).created
        with pytest.raises(asyncio.CancelledError):
            await gone
        await eventually(lambda: not creates.writing("acme"), "the writer finished")
        assert await job_count(pg_server, channel) == 2
        again = await scheduler.CreateJob(item("gone"), metadata=bearer(key))
        assert again.created, "the cancelled call's request id was never recorded"
        assert await job_count(pg_server, channel) == 3


async def test_concurrent_calls_racing_at_max_jobs_on_each_backend(server) -> None:
    """Without holding any write: whatever groups form, the quota is exact."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        await set_max_jobs(server, channel, 30)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        results = await asyncio.gather(
            *(scheduler.CreateJob(item(f"r{i}"), metadata=bearer(key)) for i in range(90)), return_exceptions=True
        )
        created = [r for r in results if isinstance(r, scheduler_pb2.CreateJobResponse)]
        refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(created) == 30 and len({r.job.id for r in created}) == 30
        assert len(refused) == 60 and all(r.code() == grpc.StatusCode.RESOURCE_EXHAUSTED for r in refused)
        assert await job_count(server, channel) == 30


@pytest.mark.postgres
@pytest.mark.etcd
async def test_hostile_calls_in_a_group_are_refused_alone_and_write_nothing(pg_server, store) -> None:
    """Calls are validated with their group: a call whose job is refused
    (a loopback target, a malformed schedule) answers INVALID_ARGUMENT
    naming the field, nothing of it stored, its request id free; the good
    calls queued around it are created in the same write."""
    key = await pg_server.create_tenant("acme")
    creates = pg_server.server.creates
    loopback = item("loopback")
    loopback.job.target.ClearField("handler")
    loopback.job.target.http.url = "http://127.0.0.1:8080/admin"
    garbled = item("garbled")
    garbled.job.schedule.cron.expression = "61 * * * *"
    requests = [item("a"), loopback, item("b"), garbled, item("c")]
    async with grpc.aio.insecure_channel(pg_server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with quota_held(store, "acme"):
            calls = await queue_behind_held_write(pg_server, scheduler, key, requests)
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert [isinstance(r, scheduler_pb2.CreateJobResponse) and r.created for r in results] == [
            True, False, True, False, True]  # fmt: skip
        for refused, field in ((results[1], "job.target.http.url"), (results[3], "job.schedule.cron.expression")):
            assert isinstance(refused, grpc.aio.AioRpcError) and refused.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert field in refused.details() or field in str(refused.trailing_metadata())
        assert creates.writes == 2, "the queued calls, refused ones among them, made one write"
        assert await job_count(pg_server, channel) == 3
        with store.connect() as conn:
            names = conn.execute(sa.text(
                "SELECT request_id FROM request_ids WHERE tenant = 'acme' ORDER BY 1")).scalars().all()
        assert names == ["a", "b", "c"], "a refused call's request id is not recorded"


@pytest.mark.postgres
@pytest.mark.etcd
async def test_two_servers_groups_at_max_jobs_keep_each_calls_lone_answer(postgres_url, etcd_endpoint, store) -> None:
    """Two servers, each with a group queued behind its held first write,
    released together at max_jobs: the groups race for the tenant's quota
    slots (however the race goes: a dry slot re-dealt, a 40001 replayed)
    and exactly max_jobs jobs are created; a request id sent to both servers answers one job on both;
    a refused call (a malformed schedule) answers INVALID_ARGUMENT naming
    its field on either server and counts against nothing."""
    limit = 12
    async with (running_server(postgres_url, etcd_endpoint, **HELD) as one,
                running_server(postgres_url, etcd_endpoint, **HELD) as two):
        key = await one.create_tenant("acme")
        garbled = item("garbled")
        garbled.job.schedule.cron.expression = "61 * * * *"
        async with grpc.aio.insecure_channel(one.address) as a, grpc.aio.insecure_channel(two.address) as b:
            await set_max_jobs(one, a, limit)
            pairs = ((one, a), (two, b))
            servers = [(server, scheduler_pb2_grpc.SchedulerServiceStub(channel)) for server, channel in pairs]
            # Per server: its first call (held), then its group: its own
            # request ids, the shared ones, and a refused call.
            plans = [
                [item("one-0")] + [item(f"one-{i}") for i in range(1, 10)] + [item("both-a"), garbled, item("both-b")],
                [item("two-0")] + [item(f"two-{i}") for i in range(1, 10)] + [item("both-b"), garbled, item("both-a")],
            ]
            with quota_held(store, "acme"):
                tasks = [await queue_behind_held_write(server, scheduler, key, plan)
                         for (server, scheduler), plan in zip(servers, plans)]
            results = [await asyncio.gather(*sent, return_exceptions=True) for sent in tasks]
            assert [server.server.creates.writes for server, _ in servers] == [2, 2], "each server: one group"
            answered: dict[str, set[str]] = {}
            refused = 0
            for plan, outcomes in zip(plans, results):
                for request, outcome in zip(plan, outcomes):
                    if request.request_id == "garbled":
                        assert isinstance(outcome, grpc.aio.AioRpcError), outcome
                        assert outcome.code() == grpc.StatusCode.INVALID_ARGUMENT
                        assert "job.schedule.cron.expression" in outcome.details()
                    elif isinstance(outcome, grpc.aio.AioRpcError):
                        assert outcome.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, outcome.details()
                        assert "max_jobs" in outcome.details()
                        refused += 1
                    else:
                        answered.setdefault(request.request_id, set()).add(outcome.job.id)
            assert all(len(ids) == 1 for ids in answered.values()), f"a request id answered two jobs: {answered}"
            assert len(answered) == limit, "exactly max_jobs request ids were created"
            # 24 calls not refused by validation (two per shared request id):
            # those of a created request id answer its job, the rest max_jobs.
            assert await job_count(one, a) == limit
            with store.connect() as conn:
                rows = conn.execute(sa.text("SELECT count(*) FROM jobs WHERE tenant = 'acme'")).scalar()
            assert rows == limit
            shared_created = [rid for rid in ("both-a", "both-b") if rid in answered]
            assert refused == 24 - limit - len(shared_created), (refused, shared_created)


@pytest.mark.postgres
@pytest.mark.etcd
async def test_a_local_time_past_year_9999_is_refused_alone_in_its_group(pg_server, store) -> None:
    """A one-off at local 9999-12-31T23:59:59 in New York (its instant in
    year 10000) queued among good calls: it answers INVALID_ARGUMENT
    naming ``job.schedule.local.local_time``, the good calls of its group
    are created (on main it raised OverflowError: INTERNAL for every call
    of the group)."""
    key = await pg_server.create_tenant("acme")
    creates = pg_server.server.creates
    overflow = item("overflow")
    overflow.job.schedule.ClearField("cron")
    overflow.job.schedule.local.local_time = "9999-12-31T23:59:59"
    overflow.job.schedule.local.time_zone = "America/New_York"
    requests = [item("a"), item("b"), overflow, item("c")]
    async with grpc.aio.insecure_channel(pg_server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with quota_held(store, "acme"):
            calls = await queue_behind_held_write(pg_server, scheduler, key, requests)
        results = await asyncio.gather(*calls, return_exceptions=True)
        refused = results[2]
        assert isinstance(refused, grpc.aio.AioRpcError) and refused.code() == grpc.StatusCode.INVALID_ARGUMENT
        field = "job.schedule.local.local_time"
        assert field in refused.details() or field in str(refused.trailing_metadata())
        good = (results[0], results[1], results[3])
        assert all(isinstance(r, scheduler_pb2.CreateJobResponse) and r.created for r in good), good
        assert creates.writes == 2, "the queued calls made one write"
        assert await job_count(pg_server, channel) == 3
