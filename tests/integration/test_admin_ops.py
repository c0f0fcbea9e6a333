"""Operator controls through the real servers, on real PostgreSQL and etcd:
ClusterStatus across two servers, DrainServer for a rolling restart (with a
real worker and an exactly-once audit), SearchExecutions, and the plans of
the queries behind them.

Servers run in-process (the real ``TickwheelServer``: gRPC, dispatcher,
gateway, reaper) so the test can watch their parts; the worker is the real
``tickwheel_worker`` runtime. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator, Awaitable
from datetime import datetime, timedelta, timezone

import grpc
import pytest
import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import event
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support.polling import eventually
from tests.support.server import TICKWHEEL, Running, running_server
from tickwheel.shared.clock import FakeClock, SystemClock
from tickwheel_server.dispatcher.ownership import OwnershipConfig, PartitionOwnership
from tickwheel_server.cluster.drain import Drainer
from tickwheel.shared.ids import to_us
from tickwheel_server.lease import open_lease_store
from tickwheel_server.cluster.presence import Presence
from tickwheel_server.lease.keys import DRAINS_PREFIX, SERVERS_PREFIX, session_name
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.operations import OperationsStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.history import attempt_history
from tickwheel_server.store.tables import executions
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig, register_builtins

# Every recorded attempt: the table's rows and those plain successes keep on their execution rows.
attempts = attempt_history()

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]

PARTITIONS = 16
WAIT = 30.0
WORKER_SERVICE = "tickwheel.v1.WorkerService"


# --------------------------------------------------------------------------- harness


@contextlib.asynccontextmanager
async def operated(running: Running, answer_timeout: float = 10.0) -> AsyncIterator[Running]:
    """The server with its presence and drainer running.

    Until app.py wires them (the lines are in the report that came with this
    file), this does what app.py is to do: publish the record (here every
    0.2 s rather than 10 s, so figures settle quickly), answer drain requests,
    and on a drain mark the worker service NOT_SERVING and publish at once."""
    server = running.server
    tasks: list[asyncio.Task] = []
    if server.info.drainer is None:
        leases, session = server._lease_store, lambda: server._session
        if not server.config.advertise:  # listening on port 0: the bound address, not the configured one
            server.info.address = server.address
        server.info.workers = lambda: len(server.connections)
        server.info.reaper_leading = lambda: server.reaper.leading
        presence = Presence(leases, session, server.clock, server.info.record, interval=0.2)

        async def on_drain() -> None:
            await server._health.set(WORKER_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
            await presence.publish()

        drainer = Drainer(server.ownership, server.connections, leases, session, server.clock,
                          server_id=server.server_id, on_drain=on_drain, answer_timeout=answer_timeout)  # fmt: skip
        server.info.presence, server.info.drainer = presence, drainer
        await presence.publish()
        tasks = [asyncio.create_task(presence.run()), asyncio.create_task(drainer.run())]
    try:
        yield running
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def two_servers(postgres_url: str, etcd: str) -> AsyncIterator[tuple[Running, Running]]:
    async with (
        running_server(postgres_url, etcd, server_id="ops-a", partition_count=PARTITIONS) as a,
        operated(a),
        running_server(postgres_url, etcd, server_id="ops-b", partition_count=PARTITIONS) as b,
        operated(b),
    ):
        yield a, b


def admin(running: Running) -> admin_pb2_grpc.AdminServiceStub:
    return admin_pb2_grpc.AdminServiceStub(grpc.aio.insecure_channel(running.address))


async def status(running: Running, **kwargs) -> admin_pb2.ClusterStatusResponse:
    return await admin(running).ClusterStatus(
        admin_pb2.ClusterStatusRequest(**kwargs), metadata=running.admin_metadata(), timeout=10
    )


async def tenant_with_worker_credential(running: Running, name: str) -> tuple[str, str]:
    """Create tenant ``name``: (its API key, a worker credential for its ``echo`` handler)."""
    return await running.create_tenant(name), await running.issue_worker_credential([name], handlers=["echo"])


def once_job(name: str, at: datetime) -> job_pb2.Job:
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")), payload=b"x")
    job.schedule.once_at.FromDatetime(at)
    return job


async def create_once_jobs(running: Running, key: str, instants: list[datetime], tag: str) -> dict[str, datetime]:
    stub = scheduler_pb2_grpc.SchedulerServiceStub(grpc.aio.insecure_channel(running.address))
    created = {}
    for index, at in enumerate(instants):
        reply = await stub.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job(f"{tag}-{index}", at), request_id=f"{tag}-{index}"),
            metadata=(("authorization", f"Bearer {key}"),), timeout=10,
        )
        created[reply.job.id] = at
    return created


async def tickwheel(*args: str) -> str:
    """Run the `tickwheel` CLI without blocking the servers' event loop; its stdout."""
    process = await asyncio.create_subprocess_exec(
        TICKWHEEL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, f"tickwheel {' '.join(args[:2])}: {stderr.decode()}"
    return stdout.decode()


def rpc_error(code: grpc.StatusCode, field: str | None = None):
    """A pytest.raises for an AioRpcError with ``code`` (and a message naming ``field``)."""

    class Matcher:
        def __enter__(self):
            self._raises = pytest.raises(grpc.aio.AioRpcError)
            self.info = self._raises.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self._raises.__exit__(*exc)
            assert self.info.value.code() == code, self.info.value
            if field is not None:
                assert field in self.info.value.details(), self.info.value.details()
            return handled

    return Matcher()


# --------------------------------------------------------------------------- ClusterStatus


async def test_cluster_status_shows_every_server_the_owners_and_the_deepest_queues(
    postgres_url: str, etcd_endpoint: str
) -> None:
    async with two_servers(postgres_url, etcd_endpoint) as (a, b):
        key, _ = await tenant_with_worker_credential(a, "acme")
        other_key, _ = await tenant_with_worker_credential(a, "globex")
        # No worker: everything due stays ready, so the queues are known.
        past = datetime.now(timezone.utc) - timedelta(minutes=5)
        await create_once_jobs(a, key, [past + timedelta(seconds=i) for i in range(6)], "acme")
        await create_once_jobs(b, other_key, [past + timedelta(minutes=1)] * 2, "globex")

        async def settled():
            reply = await status(b)
            owners = [p.server_id for p in reply.partitions]
            ready = {q.tenant: q.ready for q in reply.queues}
            skewed = all(s.HasField("clock_skew") for s in reply.servers)
            if sorted(owners) == ["ops-a"] * 8 + ["ops-b"] * 8 and ready == {"acme": 6, "globex": 2} and skewed:
                return reply
            return None

        reply = await eventually(settled, "two servers share the partitions and the queues are counted")
        assert [s.server_id for s in reply.servers] == ["ops-a", "ops-b"]
        by_id = {s.server_id: s for s in reply.servers}
        for running, server_id in ((a, "ops-a"), (b, "ops-b")):
            shown = by_id[server_id]
            assert shown.address == running.address
            assert shown.session_id == session_name(running.server._session.id)
            assert shown.version and shown.started_at.seconds > 0
            assert not shown.draining
            assert abs(shown.clock_skew.ToTimedelta()) < timedelta(seconds=1)
        assert by_id["ops-b"].partitions_owned == 8  # the answering server's own, read now
        assert reply.partition_count == PARTITIONS and reply.store_engine == "postgresql"
        assert [p.partition for p in reply.partitions] == list(range(PARTITIONS))
        assert all(p.epoch > 0 for p in reply.partitions)
        leader = "ops-a" if a.server.reaper.leading else "ops-b"
        assert reply.reaper_server_id == leader
        assert [s.server_id for s in reply.servers if s.reaper] == [leader]
        assert {s.session_state for s in reply.servers} == {admin_pb2.SESSION_STATE_LIVE}
        [acme, globex] = reply.queues  # deepest first
        assert (acme.tenant, acme.ready, acme.running) == ("acme", 6, 0)
        assert acme.oldest_ready_age.ToTimedelta() >= timedelta(minutes=4)
        assert globex.oldest_ready_age.ToTimedelta() >= timedelta(minutes=3)
        [only] = (await status(a, top_tenants=1)).queues
        assert only.tenant == "acme"

        with rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "top_tenants"):
            await status(a, top_tenants=101)
        with rpc_error(grpc.StatusCode.PERMISSION_DENIED):
            await admin(a).ClusterStatus(admin_pb2.ClusterStatusRequest(), metadata=(("authorization", f"Bearer {key}"),))


# --------------------------------------------------------------------------- DrainServer


async def test_drain_moves_partitions_and_workers_and_every_job_runs_exactly_once(
    postgres_url: str, etcd_endpoint: str
) -> None:
    engine = create_store_engine(postgres_url)
    worker_task = None
    try:
        async with two_servers(postgres_url, etcd_endpoint) as (a, b):
            key, credential = await tenant_with_worker_credential(a, "acme")
            registry = HandlerRegistry()
            register_builtins(registry)
            # Connected to `a` (gRPC's pick_first takes the first address that answers).
            worker = Worker(WorkerConfig(
                address=f"ipv4:{a.address},{b.address}", credential=credential, worker_id="w1", handlers=registry,
                slots=8, http=False, reconnect_max_backoff=1.0,
            ))  # fmt: skip
            worker_task = asyncio.create_task(worker.run())
            await asyncio.wait_for(worker.connected.wait(), WAIT)
            assert worker.server_id == "ops-a"

            async def balanced():
                rows = await PartitionStore(engine, a.server.clock).rows()
                counts = [sum(1 for r in rows if r.owner == s) for s in ("ops-a", "ops-b")]
                return rows if len(rows) == PARTITIONS and counts == [8, 8] else None

            before = {row.partition: row for row in await eventually(balanced, "8 partitions each")}
            start = datetime.now(timezone.utc) + timedelta(seconds=1.5)
            first = await create_once_jobs(a, key, [start + timedelta(seconds=0.2 * i) for i in range(20)], "first")

            async def succeeded(jobs: dict[str, datetime]) -> int:
                with engine.connect() as conn:
                    return conn.execute(
                        sa.select(sa.func.count(sa.distinct(executions.c.job_id))).where(
                            executions.c.job_id.in_(list(jobs)), executions.c.status == "succeeded"
                        )
                    ).scalar_one()

            await eventually(lambda: succeeded(first), "the run is under way (a few jobs done)")

            # Drain `a` through `b`: the request goes through etcd to `a`.
            drained = await admin(b).DrainServer(
                admin_pb2.DrainServerRequest(server_id="ops-a", grace=_seconds(5)), metadata=b.admin_metadata()
            )
            assert (drained.partitions_released, drained.workers_drained) == (8, 1)
            assert a.server.ownership.owned() == {} and a.server.ownership.draining
            again = await admin(a).DrainServer(admin_pb2.DrainServerRequest(server_id="ops-a"), metadata=a.admin_metadata())
            assert (again.partitions_released, again.workers_drained) == (0, 0)

            async def moved():
                rows = await PartitionStore(engine, a.server.clock).rows()
                return rows if all(r.owner == "ops-b" for r in rows) and len(b.server.ownership.owned()) == 16 else None

            after = {row.partition: row for row in await eventually(moved, "every partition owned by b")}
            for partition, row in before.items():
                if row.owner == "ops-a":
                    assert after[partition].epoch > row.epoch, f"partition {partition}: epoch not raised"
                else:
                    assert after[partition].epoch == row.epoch, f"partition {partition} moved without need"
            shown = await eventually(
                lambda: _draining_view(b), "b's ClusterStatus shows a draining with no partition"
            )
            assert [(p.server_id) for p in shown.partitions] == ["ops-b"] * PARTITIONS
            async with grpc.aio.insecure_channel(a.address) as channel:
                health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=WORKER_SERVICE))
            assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING

            # `a` still serves API calls; what is created through it is dispatched by `b`.
            second = await create_once_jobs(
                a, key, [datetime.now(timezone.utc) + timedelta(seconds=1 + 0.2 * i) for i in range(10)], "second"
            )
            # The rolling restart goes on: `a` stops; its worker moves to `b`.
            await a.server.stop(1.0)
            await eventually(lambda: _is(worker.server_id == "ops-b"), "the worker reconnects to b")
            expected = {**first, **second}
            await eventually(lambda: _equals(succeeded(expected), len(expected)), "every job succeeds")
        audit_exactly_once(engine, expected)
    finally:
        if worker_task is not None:
            await worker.stop(1.0)
            await asyncio.gather(worker_task, return_exceptions=True)
        engine.dispose()


async def _draining_view(running: Running):
    reply = await status(running)
    servers = {s.server_id: s for s in reply.servers}
    drained = servers.get("ops-a")
    if drained is not None and drained.draining and drained.partitions_owned == 0:
        return reply
    return None


async def _is(value: bool) -> bool:
    return value


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


def _seconds(seconds: float):
    from google.protobuf import duration_pb2

    duration = duration_pb2.Duration()
    duration.FromTimedelta(timedelta(seconds=seconds))
    return duration


def audit_exactly_once(engine: sa.Engine, expected: dict[str, datetime]) -> None:
    """Every job: one execution, succeeded at its first attempt and delivery,
    one attempt row, started no earlier than due."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(executions.c.job_id, executions.c.status, executions.c.attempt, executions.c.delivery,
                      executions.c.due_at, sa.func.count(attempts.c.execution_id).label("tries"),
                      sa.func.min(attempts.c.started_at).label("started"))  # fmt: skip
            .select_from(executions.outerjoin(attempts, attempts.c.execution_id == executions.c.id))
            .where(executions.c.job_id.in_(list(expected)))
            .group_by(executions.c.id)
        ).all()
    per_job: dict[str, list] = {}
    for row in rows:
        per_job.setdefault(row.job_id, []).append(row)
    assert sorted(per_job) == sorted(expected), "jobs without an execution"
    problems = [
        (job, [(r.status, r.attempt, r.delivery, r.tries) for r in found])
        for job, found in per_job.items()
        if [(r.status, r.attempt, r.delivery, r.tries) for r in found] != [("succeeded", 1, 1, 1)]
    ]
    assert not problems, f"not run exactly once: {problems}"
    early = [(job, r.started, r.due_at) for job, [r] in per_job.items() if r.started < r.due_at]
    assert not early, f"started before due: {early}"
    assert all(r.due_at == to_us(expected[job]) for job, [r] in per_job.items())


async def test_drain_server_input_and_unknown_servers(postgres_url: str, etcd_endpoint: str) -> None:
    async with running_server(postgres_url, etcd_endpoint, server_id="ops-solo", partition_count=PARTITIONS) as solo:
        async with operated(solo, answer_timeout=1.0):
            stub, meta = admin(solo), solo.admin_metadata()
            with rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "server_id"):
                await stub.DrainServer(admin_pb2.DrainServerRequest(), metadata=meta)
            with rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "server_id"):
                await stub.DrainServer(admin_pb2.DrainServerRequest(server_id="a/b"), metadata=meta)
            with rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "grace"):
                await stub.DrainServer(
                    admin_pb2.DrainServerRequest(server_id="ops-solo", grace=_seconds(7 * 3600)), metadata=meta
                )
            with rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "grace"):
                await stub.DrainServer(admin_pb2.DrainServerRequest(server_id="ops-solo", grace=_seconds(-1)), metadata=meta)
            with rpc_error(grpc.StatusCode.NOT_FOUND, "no-such-server"):
                await stub.DrainServer(admin_pb2.DrainServerRequest(server_id="no-such-server"), metadata=meta)
            # A live server that does not answer (its key is there, nothing follows its requests).
            leases = solo.server._lease_store
            ghost = await leases.open_session(10)
            try:
                await leases.put(SERVERS_PREFIX + "ops-ghost", "{}", session=ghost)
                with rpc_error(grpc.StatusCode.UNAVAILABLE, "did not answer"):
                    await stub.DrainServer(admin_pb2.DrainServerRequest(server_id="ops-ghost"), metadata=meta)
                assert await leases.get_prefix(DRAINS_PREFIX) == [], "the unanswered request is removed"
                # A request naming a session the server no longer runs under
                # (meant for a process that has restarted since): refused, never applied.
                key = f"{DRAINS_PREFIX}ops-solo/stale"
                revision = await leases.put(key, json.dumps({"grace_us": 0, "session": "deadbeef"}), session=ghost)
                async with asyncio.timeout(WAIT):
                    async with leases.watch(key, start_revision=revision + 1) as events:
                        answer = json.loads((await anext(aiter(events))).value)
                assert "deadbeef" in answer["error"] and "result" not in answer
            finally:
                await ghost.close()
            assert not solo.server.ownership.draining, "no refused request drained anything"
            await eventually(lambda: _is(len(solo.server.ownership.owned()) == PARTITIONS), "it keeps every partition")
            out = await tickwheel(
                "admin", "drain", "ops-solo", "--grace", "5s", "--address", solo.address, "--admin-token", solo.admin_token
            )
            assert out.strip() == (
                f"server ops-solo drains: {PARTITIONS} partition(s) released, 0 worker(s) told to reconnect elsewhere"
            )
            again = await tickwheel(
                "admin", "drain", "ops-solo", "--json", "--address", solo.address, "--admin-token", solo.admin_token
            )
            assert json.loads(again) == {}  # nothing more released: both counts 0, left out of proto3 JSON


async def test_a_drained_ownership_never_rejoins_even_under_a_new_session(
    postgres_url: str, etcd_endpoint: str, etcd_prefix: str
) -> None:
    """PartitionOwnership.drain on real etcd: the other member takes every
    partition at higher epochs; a new session (after a loss) does not bring
    the drained member back."""
    engine = create_store_engine(postgres_url)
    migrate(engine)
    clock = SystemClock()
    leases = open_lease_store(etcd_endpoint, clock)
    config = OwnershipConfig(key_prefix=etcd_prefix, tick=0.2)
    store = PartitionStore(engine, clock)
    sessions = [await leases.open_session(5), await leases.open_session(5)]
    members = [
        PartitionOwnership(leases, s, store, server_id=f"m{i}", partition_count=8, clock=clock, config=config)
        for i, s in enumerate(sessions)
    ]
    try:
        for member in members:
            await member.start()

        async def split():
            return [len(m.owned()) for m in members] == [4, 4]

        await eventually(split, "4 partitions each")
        epochs = dict(members[0].owned())
        released = await members[0].drain()
        assert released == 4 and members[0].owned() == {} and members[0].draining
        assert await members[0].drain() == 0

        async def taken():
            return len(members[1].owned()) == 8

        await eventually(taken, "the other member owns all 8")
        for partition, epoch in epochs.items():
            assert members[1].owned()[partition] > epoch
        assert await leases.get(config.member_key("m0")) is None
        fresh = await leases.open_session(5)
        await members[0].reset_session(fresh)
        await sessions[0].close()
        await asyncio.sleep(1.0)  # several ticks under the new session
        assert members[0].owned() == {}
        assert await leases.get(config.member_key("m0")) is None
        assert len(members[1].owned()) == 8
        await fresh.close()
    finally:
        for member in members:
            await member.stop()
        await leases.close()
        engine.dispose()


# --------------------------------------------------------------------------- SearchExecutions


def _insert_executions(engine: sa.Engine, rng: random.Random, count: int, base: datetime) -> list[dict]:
    rows = []
    statuses = ["scheduled", "running", "succeeded", "succeeded", "dead", "canceled"]
    for index in range(count):
        tenant = f"tenant-{index % 3}"
        job = f"job_{tenant[-1]}{index % 7}"
        # Some executions share an instant (a trigger at an occurrence's instant).
        nominal = to_us(base - timedelta(seconds=index // 3))
        rows.append(dict(
            id=f"{job}:{index:05d}", job_id=job, tenant=tenant, partition=0, origin="scheduled", nominal_at=nominal,
            due_at=nominal, ready_at=nominal, attempt=1, delivery=0, status=rng.choice(statuses), owner=None,
            worker_id=None, handler="echo", missed_count=1, reap_count=0, payload=b"p", error="", dead_reason="",
            created_at=nominal, finished_at=None,
        ))  # fmt: skip
    with engine.begin() as conn:
        conn.execute(executions.insert(), rows)
    return rows


def _expected(rows: list[dict], *, tenant="", job="", statuses=(), from_us=None, to_us_=None) -> list[str]:
    kept = [
        r for r in rows
        if (not tenant or r["tenant"] == tenant) and (not job or r["job_id"] == job)
        and (not statuses or r["status"] in statuses)
        and (from_us is None or r["nominal_at"] >= from_us) and (to_us_ is None or r["nominal_at"] < to_us_)
    ]  # fmt: skip
    return [r["id"] for r in sorted(kept, key=lambda r: (r["nominal_at"], r["id"]), reverse=True)]


async def test_search_executions_pages_through_every_filter(postgres_url: str, etcd_endpoint: str) -> None:
    async with running_server(postgres_url, etcd_endpoint, partition_count=PARTITIONS) as running:
        engine = running.server.engine
        base = datetime(2030, 1, 1, tzinfo=timezone.utc)
        rows = _insert_executions(engine, random.Random(5), 300, base)
        stub, meta = admin(running), running.admin_metadata()

        async def search(page_size: int, **filters) -> list[str]:
            found, token, pages = [], "", 0
            while True:
                request = admin_pb2.SearchExecutionsRequest(page_size=page_size, page_token=token, **filters)
                reply = await stub.SearchExecutions(request, metadata=meta)
                found += [e.id for e in reply.executions]
                assert len(reply.executions) <= page_size
                pages += 1
                token = reply.next_page_token
                if not token:
                    return found

        window_from, window_to = base - timedelta(seconds=60), base - timedelta(seconds=20)
        cases = [
            ({}, {}),
            ({"tenant": "tenant-1"}, {"tenant": "tenant-1"}),
            ({"job_id": "job_23"}, {"job": "job_23"}),
            ({"tenant": "tenant-0", "job_id": "job_23"}, {"tenant": "tenant-0", "job": "job_23"}),
            ({"statuses": [job_pb2.EXECUTION_STATUS_DEAD, job_pb2.EXECUTION_STATUS_CANCELED]},
             {"statuses": ("dead", "canceled")}),
            ({"tenant": "tenant-2", "statuses": [job_pb2.EXECUTION_STATUS_SUCCEEDED]},
             {"tenant": "tenant-2", "statuses": ("succeeded",)}),
        ]  # fmt: skip
        for request_filters, expected_filters in cases:
            for page_size in (1, 7, 500):
                assert await search(page_size, **request_filters) == _expected(rows, **expected_filters), (
                    request_filters, page_size,
                )
        windowed = {"from_at": _ts(window_from), "to_at": _ts(window_to), "job_id": "job_11"}
        assert await search(4, **windowed) == _expected(
            rows, job="job_11", from_us=to_us(window_from), to_us_=to_us(window_to)
        )
        cli = ("--address", running.address, "--admin-token", running.admin_token)
        shown = json.loads(await tickwheel("admin", "executions", "--tenant", "tenant-1", "--status", "dead",
                                           "--limit", "7", "--json", *cli))  # fmt: skip
        assert [e["id"] for e in shown["executions"]] == _expected(rows, tenant="tenant-1", statuses=("dead",))[:7]
        table = (await tickwheel("admin", "executions", "--job", "job_23", "--limit", "3", *cli)).splitlines()
        assert table[0].split() == ["EXECUTION", "TENANT", "NOMINAL", "(UTC)", "STATUS", "ATTEMPT", "LATENESS", "ERROR"]
        assert [line.split()[0] for line in table[1:]] == _expected(rows, job="job_23")[:3]
        first = (await stub.SearchExecutions(admin_pb2.SearchExecutionsRequest(page_size=1), metadata=meta)).executions[0]
        assert first.tenant and first.job_id and first.status and first.nominal_at.seconds

        bad = [
            (admin_pb2.SearchExecutionsRequest(page_size=501), "page_size"),
            (admin_pb2.SearchExecutionsRequest(page_token="nonsense"), "page_token"),
            (admin_pb2.SearchExecutionsRequest(statuses=[99]), "statuses"),
            (admin_pb2.SearchExecutionsRequest(tenant="Not A Tenant"), "tenant"),
            (admin_pb2.SearchExecutionsRequest(from_at=_ts(window_to), to_at=_ts(window_from)), "to_at"),
        ]
        for request, field in bad:
            with rpc_error(grpc.StatusCode.INVALID_ARGUMENT, field):
                await stub.SearchExecutions(request, metadata=meta)


async def test_a_status_filtered_search_examines_a_bounded_number_of_rows(postgres_url: str) -> None:
    engine = create_store_engine(postgres_url)
    try:
        migrate(engine)
        base = datetime(2030, 1, 1, tzinfo=timezone.utc)
        rows = _insert_executions(engine, random.Random(9), 200, base)
        store = OperationsStore(engine, FakeClock(autojump=True))
        found, key, pages = [], None, []
        while True:
            page = await store.search_executions(statuses=["dead"], before_key=key, limit=5, scan=20)
            pages.append(len(page.executions))
            found += [e.id for e in page.executions]
            key = page.next_key
            if key is None:
                break
        assert found == _expected(rows, statuses=("dead",))
        # Only ended executions are read for "dead", at most 20 of them per page.
        ended = sum(1 for row in rows if row["status"] in ("succeeded", "dead", "canceled"))
        assert max(pages) <= 5 and len(pages) >= ended // 20, pages
    finally:
        engine.dispose()


def _ts(instant: datetime):
    from google.protobuf import timestamp_pb2

    message = timestamp_pb2.Timestamp()
    message.FromDatetime(instant)
    return message


# --------------------------------------------------------------------------- query plans


def _plan_nodes(plan: dict) -> list[dict]:
    nodes, stack = [], [plan]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    return nodes


async def _captured(engine: sa.Engine, call: Awaitable, marker: str) -> list[tuple[str, dict]]:
    captured: list[tuple[str, dict]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if marker in statement:
            captured.append((statement, dict(parameters)))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        await call
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert captured, f"no statement with {marker!r} was sent"
    return captured


RUNNING_INDEXES = {"executions_running", "executions_busy"}
ARMED_INDEXES = {"executions_armed", "executions_armed_job"}
"""The armed group's (migration 0027): both hold armed rows only, at most 50 000 a server
(the armed queue's ``DEFAULT_LIMIT``)."""
"""Partial indexes of running executions (``executions_busy`` also of retries waiting): migrations 0014, 0040."""


def _explain(engine: sa.Engine, statement: str, parameters: dict) -> list[dict]:
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters).scalar()[0]["Plan"]
        conn.rollback()
    return _plan_nodes(plan)


async def test_queue_depth_and_search_are_index_scans_on_postgresql(postgres_url: str) -> None:
    """The statements really sent, explained with their parameters over
    60 000 executions of 40 tenants (ANALYZE'd): no sequential scan of
    executions; a search page is one statement per status group, the ended
    and the not-started ones range scans with no sort under the page's
    LIMIT, reading about a page, the running one reading the running
    executions of its scope and nothing else."""
    engine = create_store_engine(postgres_url)
    try:
        migrate(engine)
        now = datetime(2030, 1, 1, tzinfo=timezone.utc)
        rng = random.Random(2)
        rows = []
        for index in range(60_000):
            tenant = f"t{index % 40:02d}"
            ready = to_us(now + timedelta(seconds=rng.randrange(-3600, 3600)))
            status = rng.choice(["scheduled"] + ["succeeded"] * 8 + ["running"])
            rows.append(dict(
                id=f"job_{tenant}{index % 50}:{index:06d}", job_id=f"job_{tenant}{index % 50}", tenant=tenant,
                partition=0, origin="scheduled", nominal_at=ready, due_at=ready, ready_at=ready, attempt=1,
                delivery=1, status=status, owner=f"s{index % 3}" if status == "running" else None,
                worker_id=None, handler="echo", missed_count=1, reap_count=0,
                payload=b"p", error="", dead_reason="", created_at=ready, finished_at=None,
            ))  # fmt: skip
        for index in range(600):  # one job has a backlog (a backfill): more not started than a page
            rows.append(dict(rows[167], id=f"job_t0717:backfill{index:03d}", status="scheduled",
                             nominal_at=rows[167]["nominal_at"] - index))  # fmt: skip
        with engine.begin() as conn:
            conn.execute(executions.insert(), rows)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE executions")
        store = OperationsStore(engine, FakeClock(now))

        [(queues_sql, queues_params)] = await _captured(engine, store.queues(now, 10), "WITH RECURSIVE present")
        nodes = _explain(engine, queues_sql, queues_params)
        scans = [n for n in nodes if n.get("Relation Name") == "executions"]
        assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), nodes
        assert not any(n["Node Type"] == "Seq Scan" for n in nodes), nodes
        assert {n["Index Name"] for n in nodes if "Index Name" in n} == {"executions_tenant_ready"}, nodes
        counted = [n for n in nodes if n.get("Index Name") == "executions_tenant_ready" and n["Actual Loops"] == 40]
        assert counted, nodes  # one descent (or range) per tenant present, not a pass over every row

        running = [row for row in rows if row["status"] == "running"]
        searches = {  # scope: (call, its running executions, (index, most rows read) of each group)
            "all": (store.search_executions(before_key=(now, "job_t0512:999999"), limit=50), running,
                    (("executions_ended_tenant", 51), ("executions_not_started", 51), (RUNNING_INDEXES, None),
                     (ARMED_INDEXES, None))),
            # A tenant's executions not started are read from the index of all, the tenant a filter: at most `scan`.
            "tenant": (store.search_executions(tenant="t07", before_key=(now, "x"), limit=50, scan=200),
                       [row for row in running if row["tenant"] == "t07"],
                       (("executions_ended_tenant", 51), ("executions_not_started", 200),
                        ({"executions_running"}, None), (ARMED_INDEXES, None))),
            "job": (store.search_executions(job_id="job_t0717", limit=50),
                    [row for row in running if row["job_id"] == "job_t0717"],
                    (("executions_ended_job", 51), ("executions_not_started_job", 51), ({"executions_busy"}, None),
                     (ARMED_INDEXES, None))),
        }  # fmt: skip
        for scope, (call, running_in_scope, expected) in searches.items():
            # The page's keys, one statement per group (ended, not started,
            # running, armed: none armed here); the rest are primary-key reads.
            captured = [sent for sent in await _captured(engine, call, "FROM executions") if "ORDER BY" in sent[0]]
            if scope == "all":
                # No index of every tenant's ended executions (migration 0037): each
                # tenant's newest on executions_ended_tenant, the next tenant found there.
                ended = [sent for sent in captured
                         if "ORDER BY executions.tenant" in sent[0] or "executions.tenant = " in sent[0]]
                captured = [sent for sent in captured if sent not in ended]
                assert len(ended) == 2 * 40 + 1, (scope, len(ended))
                for statement, parameters in ended:
                    nodes = _explain(engine, statement, parameters)
                    scans = [n for n in nodes if n.get("Relation Name") == "executions" or "Index Name" in n]
                    assert [n["Index Name"] for n in scans if "Index Name" in n] == ["executions_ended_tenant"], nodes
                    assert not any(n["Node Type"] in ("Sort", "Seq Scan") for n in nodes), nodes
                    assert max(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in scans) <= 51, nodes
                expected = expected[1:]
            assert len(captured) == len(expected), (scope, captured)
            for (statement, parameters), (index_name, most) in zip(captured, expected):
                nodes = _explain(engine, statement, parameters)
                scans = [n for n in nodes if n.get("Relation Name") == "executions" or "Index Name" in n]
                used = [n["Index Name"] for n in scans if "Index Name" in n]
                assert not any(n["Node Type"] == "Seq Scan" for n in nodes), (scope, index_name, nodes)
                read = max(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in scans)
                if most is None:  # every running (or armed: none) execution of the scope, sorted: no more
                    # (a tenant's: the sessions walked, then each one's range, all on executions_running)
                    assert used and set(used) <= index_name, (scope, nodes)
                    assert len(used) == 1 or scope == "tenant", (scope, nodes)
                    assert read <= len(running_in_scope), (scope, read, len(running_in_scope))
                else:
                    assert used == [index_name], (scope, nodes)
                    assert not any(n["Node Type"] == "Sort" for n in nodes), (scope, index_name, nodes)
                    assert read <= most, (scope, index_name, read)
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- retention over a real run


async def test_retention_prunes_what_a_real_run_left_into_daily_rollups(postgres_url: str, etcd_endpoint: str) -> None:
    """Executions and attempts written by the real dispatcher, gateway and
    worker; retention run on a clock 31 days later: they are gone, rolled up
    per job and day, and the dead letter's alert is resolved with it."""
    from tickwheel_server.store.alerts import AlertStore
    from tickwheel_server.maintenance.retention import Retention, RetentionConfig
    from tickwheel_server.store.retention import RetentionStore
    from tickwheel_worker.handlers import PermanentError

    async with running_server(postgres_url, etcd_endpoint, partition_count=PARTITIONS) as running:
        key, credential = await tenant_with_worker_credential(running, "acme")
        registry = HandlerRegistry()

        def echo_or_refuse(ctx) -> bytes:
            if ctx.payload == b"refuse":
                raise PermanentError("refused")
            return ctx.payload

        registry.register("echo", echo_or_refuse)
        worker = Worker(WorkerConfig(address=running.address, credential=credential, worker_id="w-ret",
                                     handlers=registry, http=False))  # fmt: skip
        task = asyncio.create_task(worker.run())
        try:
            now = datetime.now(timezone.utc)
            jobs = await create_once_jobs(running, key, [now + timedelta(seconds=0.3 * i) for i in range(5)], "ok")
            stub = scheduler_pb2_grpc.SchedulerServiceStub(grpc.aio.insecure_channel(running.address))
            refuse = once_job("refuse", now + timedelta(seconds=0.5))
            refuse.payload = b"refuse"
            refused = (await stub.CreateJob(scheduler_pb2.CreateJobRequest(job=refuse, request_id="refuse"),
                                            metadata=(("authorization", f"Bearer {key}"),))).job.id  # fmt: skip
            engine = running.server.engine

            async def ended():
                with engine.connect() as conn:
                    return conn.execute(
                        sa.select(sa.func.count()).select_from(executions).where(
                            executions.c.status.in_(("succeeded", "dead"))
                        )
                    ).scalar_one() == 6

            await eventually(ended, "five jobs succeed and one is dead-lettered")
        finally:
            await worker.stop(1.0)
            await asyncio.gather(task, return_exceptions=True)
        with engine.connect() as conn:
            attempt_rows = conn.execute(sa.select(attempts.c.execution_id, attempts.c.status)).all()
        assert len(attempt_rows) == 6

        later = FakeClock(datetime.now(timezone.utc) + timedelta(days=31))
        alerts = AlertStore(engine, later)
        retention = Retention(RetentionStore(engine, later, alerts), alerts, running.server._lease_store, lambda: None, later,
                              server_id="offline", config=RetentionConfig(pause=0))  # fmt: skip
        result = await retention.run_pass()
        assert (result.executions, result.attempts, result.resolved, result.alerts) == (6, 6, 1, 0)
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(executions)).scalar_one() == 0
            assert conn.execute(sa.select(sa.func.count()).select_from(attempts)).scalar_one() == 0
        store = RetentionStore(engine, later)
        for job_id in jobs:
            [rollup] = await store.rollups(job_id)
            assert (rollup.tenant, rollup.runs, rollup.failures) == ("acme", 1, 0)
            assert timedelta(0) <= rollup.lateness_p50 == rollup.lateness_p99 < timedelta(seconds=5)
        [dead] = await store.rollups(refused)
        assert (dead.runs, dead.failures) == (1, 1)
        assert (await alerts.list(kinds=["dead_letter"])).alerts == ()  # none open
        [alert] = (await alerts.list(kinds=["dead_letter"], include_resolved=True)).alerts
        assert alert.job_id == refused and alert.resolved_at == later.now()
