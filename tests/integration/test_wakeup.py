"""Wake-ups across two real servers on PostgreSQL and etcd (issue 17): a job
created due now through one server, in a partition the other owns, is
claimed by its owner on the wake, not at its next tick; a wake lost (etcd
down) leaves the job to the owner's tick, late, not lost.

Both servers run in this process with their dispatchers' tick raised to an
hour once ownership has settled, so only a wake can claim what the test
creates (until the lost-wake test puts the tick back). A trigger storm
through both servers costs the holder at most one hand-out round per ready
gap, and each triggered run still goes out on the wakes. Every wait is
bounded; nothing here measures time."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_dispatch_flow import history, once_job, wait_for_status
from tests.support.server import running_server
from tests.support.workers import builtin_handlers, running_worker
from tickwheel.shared.ids import partition_of
from tickwheel_server.gateway.gateway import DEFAULT_READY_GAP
from tickwheel_worker.handlers import HandlerRegistry

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]

PARTITIONS = 8
NO_TICK = 3600.0
WAIT = 20.0


async def settled(*running) -> None:
    """Until every partition is owned by one of the servers."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while asyncio.get_running_loop().time() < deadline:
        owned = [set(r.server.ownership.owned()) for r in running]
        if sum(map(len, owned)) == PARTITIONS and set().union(*owned) == set(range(PARTITIONS)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"ownership did not settle: {owned}")


async def without_ticks(*running, tick: float = NO_TICK) -> None:
    """Set the dispatchers' tick, and let each finish the claim it was
    sleeping towards, so the next wait is the new tick's."""
    for r in running:
        r.server.dispatcher._tick = tick
    await next_pass([(r.server.dispatcher, "tick_done") for r in running])


async def next_pass(loops) -> None:
    """Wake each loop (a dispatcher or a gateway, with the name of its event
    set once a pass is done) and wait for the pass it was sleeping towards."""
    for loop, event in loops:
        done = getattr(loop, event)
        loop.wake()
        await asyncio.wait_for(done.wait(), WAIT)


@pytest.fixture
async def pair(migrated_postgres_url: str, etcd_endpoint: str):
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(
            running_server(migrated_postgres_url, etcd_endpoint, server_id="wake-a", partition_count=PARTITIONS)
        )
        b = await stack.enter_async_context(
            running_server(migrated_postgres_url, etcd_endpoint, server_id="wake-b", partition_count=PARTITIONS)
        )
        await settled(a, b)
        key = await a.create_tenant("acme")
        credential = await a.issue_worker_credential(["acme"], http=True)
        for index, server in enumerate((a, b)):
            await stack.enter_async_context(
                running_worker(server.address, credential, builtin_handlers(), worker_id=f"w{index}", slots=8)
            )
        channel = await stack.enter_async_context(grpc.aio.insecure_channel(b.address))
        yield a, b, scheduler_pb2_grpc.SchedulerServiceStub(channel), key


async def create_on(scheduler, key: str, owner, tag: str, at: datetime | None = None) -> str:
    """Through ``scheduler``, a one-off due now (or ``at``) whose partition ``owner`` owns (job ids are random)."""
    meta = (("authorization", f"Bearer {key}"),)
    for attempt in range(64):
        reply = await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job(f"{tag}-{attempt}", at or datetime.now(timezone.utc)),
                                           request_id=f"{tag}-{attempt}"),
            metadata=meta,
        )  # fmt: skip
        if partition_of(reply.job.id, PARTITIONS) in owner.server.ownership.owned():
            return reply.job.id
        await scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=reply.job.id), metadata=meta)
    raise AssertionError("no job id fell in the owner's partitions")


async def test_a_job_created_on_one_server_is_claimed_by_its_owner_on_the_wake(pair) -> None:
    a, b, scheduler, key = pair
    await settled(a, b)
    await without_ticks(a, b)
    received, woken = a.server.wakeup.received, a.server.dispatcher.woken_ticks
    job_id = await create_on(scheduler, key, a, "remote")
    await wait_for_status(scheduler, key, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert a.server.wakeup.received > received, "the owner saw the wake on its key"
    assert a.server.dispatcher.woken_ticks > woken
    assert len(await history(scheduler, key, job_id)) == 1

    local = await create_on(scheduler, key, b, "local")
    await wait_for_status(scheduler, key, local, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert b.server.wakeup.local_wakes >= 1, "the creating server's own partition is woken in process"


async def without_sweeps(*running) -> None:
    """Raise the gateways' sweep to an hour, and let each finish the round
    it was sleeping towards: from here on only a wake runs a round."""
    for r in running:
        r.server.gateway._sweep_interval = NO_TICK
    await next_pass([(r.server.gateway, "round_done") for r in running])


async def test_a_trigger_on_one_server_wakes_the_hand_out_of_the_jobs_owner(pair) -> None:
    """A job of a tenant whose only worker is on server a, in a partition a
    owns, triggered through server b: b's own round has no worker for it;
    a's round runs on the wake (b's put, its value asking for a round), not
    at a's sweep, which is an hour here. The same for a backfill."""
    a, b, scheduler, _key = pair
    await settled(a, b)
    key = await a.create_tenant("solo")
    credential = await a.issue_worker_credential(["solo"], http=True)
    meta = (("authorization", f"Bearer {key}"),)
    async with running_worker(a.address, credential, builtin_handlers(), worker_id="solo-w", slots=4):
        await without_ticks(a, b)
        later = datetime(2100, 1, 1, tzinfo=timezone.utc)
        job_id = await create_on(scheduler, key, a, "trigger", at=later)
        await without_sweeps(a, b)
        received = a.server.wakeup.received
        reply = await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job_id, request_id="t-1"), metadata=meta)
        assert reply.created
        await wait_for_status(scheduler, key, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
        assert a.server.wakeup.received > received, "the owner saw the wake on its key"

        yearly = job_pb2.Job(name="yearly", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
        yearly.schedule.cron.expression = "0 0 1 1 *"  # nothing of its own runs during the test
        for attempt in range(64):
            created = await scheduler.CreateJob(
                scheduler_pb2.CreateJobRequest(job=yearly, request_id=f"yearly-{attempt}"), metadata=meta)
            if partition_of(created.job.id, PARTITIONS) in a.server.ownership.owned():
                break
            await scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=created.job.id), metadata=meta)
        await without_sweeps(a, b)
        received = a.server.wakeup.received
        new_year = datetime(datetime.now(timezone.utc).year, 1, 1, tzinfo=timezone.utc)
        window = scheduler_pb2.BackfillJobRequest(id=created.job.id)
        window.from_at.FromDatetime(new_year - timedelta(minutes=1))
        window.to_at.FromDatetime(new_year + timedelta(minutes=1))
        filled = await scheduler.BackfillJob(window, metadata=meta)
        assert filled.created_count == 1
        await wait_for_status(scheduler, key, created.job.id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
        assert a.server.wakeup.received > received


async def test_a_wake_lost_while_etcd_is_down_leaves_the_job_to_the_tick(pair, etcd_server) -> None:
    a, b, scheduler, key = pair
    await settled(a, b)
    await without_ticks(a, b, tick=1.0)
    received = a.server.wakeup.received
    etcd_server.stop()
    try:
        job_id = await create_on(scheduler, key, a, "lost")
        await asyncio.sleep(0.5)  # the wake's put fails meanwhile
    finally:
        etcd_server.start()
    await wait_for_status(scheduler, key, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert len(await history(scheduler, key, job_id)) == 1, "run once"
    assert a.server.wakeup.received == received, "no wake reached the owner: the tick claimed it"
    # The wake key is followed again after the restart: the next one arrives.
    await without_ticks(a, b)
    again = await create_on(scheduler, key, a, "after")
    await wait_for_status(scheduler, key, again, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert a.server.wakeup.received > received


async def unlimited_tenant(server, name: str) -> tuple[str, str]:
    """A tenant whose request rate quota is lifted, through ``server``: its
    API key and a worker credential for it."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        created_tenant = await admin_pb2_grpc.AdminServiceStub(channel).CreateTenant(
            admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(
                name=name, quotas=admin_pb2.TenantQuotas(requests_per_second=100_000))),
            metadata=server.admin_metadata(),
        )  # fmt: skip
    return created_tenant.api_key.secret, await server.issue_worker_credential([name], http=True)


async def test_a_tenant_creating_due_now_jobs_in_a_loop_cannot_make_the_servers_spin(pair) -> None:
    """A tenant whose request rate quota is lifted creates due-now jobs from
    eight concurrent loops: each server's claims stay within one per wake
    gap of the time the creates took, the writer's puts within one per
    merging window, the writer claims fewer times than it is woken, and
    every job runs once. (On a loaded machine the claims' own length may
    keep them under the bound too; the gap alone is tested on a FakeClock
    in ``tests/unit/dispatcher/test_dispatcher_wake.py``.)"""
    a, b, scheduler, _key = pair
    await settled(a, b)
    key, credential = await unlimited_tenant(a, "flood")
    meta = (("authorization", f"Bearer {key}"),)
    async with running_worker(a.address, credential, builtin_handlers(), worker_id="flood-w", slots=64):
        await without_ticks(a, b)
        servers = [r.server for r in (a, b)]
        ticks = [s.dispatcher.ticks for s in servers]
        puts, local = b.server.wakeup.puts, b.server.wakeup.local_wakes
        loop = asyncio.get_running_loop()
        created: list[str] = []

        async def flood(lane: int) -> None:
            for index in range(40):
                reply = await scheduler.CreateJob(
                    scheduler_pb2.CreateJobRequest(job=once_job(f"flood-{lane}-{index}", datetime.now(timezone.utc)),
                                                   request_id=f"flood-{lane}-{index}"),
                    metadata=meta,
                )  # fmt: skip
                created.append(reply.job.id)

        began = loop.time()
        await asyncio.gather(*(flood(lane) for lane in range(8)))
        elapsed = loop.time() - began
        for job_id in created:
            await wait_for_status(scheduler, key, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
        # Only wakes claim here (the tick is an hour); the last wake's claim
        # comes at most one gap after the last create.
        claims = [server.dispatcher.ticks - before for server, before in zip(servers, ticks)]
        for server, claimed in zip(servers, claims):
            assert claimed <= elapsed / server.dispatcher._wake_gap + 3, f"{claimed} claims in {elapsed:.2f} s"
        assert b.server.wakeup.puts - puts <= elapsed / b.server.wakeup.window() + 2
        # A flood, not a trickle: b, the writer, was woken in process more
        # often than it claimed, so wakes were merged (a server claiming on
        # every wake is the spin). How many wakes per second the creates
        # make depends on the machine's load, so it is not compared with
        # the gap: a loaded machine's creates come slower, and its claims
        # take longer, merging the wakes that come meanwhile.
        local_wakes = b.server.wakeup.local_wakes - local
        assert local_wakes > claims[1], f"{local_wakes} wakes, {claims[1]} claims in {elapsed:.2f} s"
        for job_id in created[:10]:
            assert len(await history(scheduler, key, job_id)) == 1


# A trigger storm (session 17): a tenant calling TriggerJob as fast as it
# can, through the holder of the job's partition (its ready wakes in
# process) and through the other server (its wake puts on the holder's key),
# costs the holder at most one hand-out round per ready gap, and every
# triggered execution, the last one included, is still handed out on the
# wakes (the gateways' sweep is an hour). The tenant's only worker is on the
# holder, and its handler holds every run until the end, so no result and
# no credit grant runs a round of its own meanwhile. Two lanes back to back
# (not more): each round then takes less than a trigger's request, so with
# no gap nearly every ready wake had a round of its own (48 rounds for 120
# triggers in 1.15 s, measured with the gap set to 0).

LANES = 2
PER_LANE = 60


async def held_job_on(scheduler, key: str, owner) -> str:
    """Through ``scheduler``, a yearly job of the ``hold`` handler whose partition ``owner`` owns."""
    meta = (("authorization", f"Bearer {key}"),)
    job = job_pb2.Job(name="held", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="hold")))
    job.schedule.cron.expression = "0 0 1 1 *"  # nothing of its own runs during the test
    for attempt in range(64):
        created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"held-{attempt}"),
                                            metadata=meta)
        if partition_of(created.job.id, PARTITIONS) in owner.server.ownership.owned():
            return created.job.id
        await scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=created.job.id), metadata=meta)
    raise AssertionError("no job id fell in the owner's partitions")


async def running_count(scheduler, key: str, job_id: str) -> int:
    reply = await scheduler.ListExecutions(
        scheduler_pb2.ListExecutionsRequest(job_id=job_id, page_size=500), metadata=(("authorization", f"Bearer {key}"),)
    )
    return sum(1 for e in reply.executions if e.status == job_pb2.EXECUTION_STATUS_RUNNING)


async def test_a_trigger_storm_costs_the_holder_one_round_per_ready_gap_and_every_run_goes_out(pair) -> None:
    a, b, _scheduler, _key = pair
    await settled(a, b)
    key, credential = await unlimited_tenant(a, "storm")
    meta = (("authorization", f"Bearer {key}"),)
    release = asyncio.Event()
    handlers = HandlerRegistry()

    async def hold(_ctx) -> bytes:
        await release.wait()
        return b"{}"

    handlers.register("hold", hold)
    async with (grpc.aio.insecure_channel(a.address) as to_a, grpc.aio.insecure_channel(b.address) as to_b,
                running_worker(a.address, credential, handlers, worker_id="storm-w", slots=LANES * PER_LANE + 10)):
        via = [scheduler_pb2_grpc.SchedulerServiceStub(to_a), scheduler_pb2_grpc.SchedulerServiceStub(to_b)]
        await without_ticks(a, b)
        job_id = await held_job_on(via[1], key, a)
        await without_sweeps(a, b)
        gateway = a.server.gateway
        rounds, woken, wakes = gateway.rounds_run, gateway.woken_rounds, gateway.ready_wakes
        received = a.server.wakeup.received
        loop = asyncio.get_running_loop()

        async def storm(lane: int) -> None:
            scheduler = via[lane % 2]  # half in process on the holder, half through the other server's puts
            for index in range(PER_LANE):
                reply = await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(
                    id=job_id, request_id=f"storm-{lane}-{index}", allow_overlap=True), metadata=meta)
                assert reply.created

        began = loop.time()
        await asyncio.gather(*(storm(lane) for lane in range(LANES)))
        try:
            deadline = loop.time() + WAIT
            while (handed := await running_count(via[0], key, job_id)) < LANES * PER_LANE:
                assert loop.time() < deadline, f"{handed} of {LANES * PER_LANE} triggered runs handed out"
                await asyncio.sleep(0.1)
        finally:
            release.set()
        # The last trigger's round comes at most one gap after it; the rest
        # of the wait (ListExecutions polls) runs no round: no wake, no result.
        settle = loop.time() - began
        bound = settle / DEFAULT_READY_GAP + 3
        assert a.server.wakeup.received > received, "the other server's puts reached the holder"
        assert gateway.ready_wakes - wakes >= LANES * PER_LANE // 2, "a storm, not a trickle"
        assert gateway.woken_rounds - woken <= bound, f"{gateway.woken_rounds - woken} woken rounds in {settle:.2f} s"
        assert gateway.rounds_run - rounds <= bound + 2, f"{gateway.rounds_run - rounds} rounds in {settle:.2f} s"
