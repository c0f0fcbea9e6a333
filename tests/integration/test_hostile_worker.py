"""A hostile worker against the real server (issue 15, items 1, 2, 3 and 5),
on the embedded stores and on PostgreSQL + etcd: with acme's credential it
reports results for globex's running execution and lists it in its hello,
and sends malformed results beside good ones in one message. Globex's
execution is unaffected (answered exactly as an unknown id) and ends once,
by globex's own worker; of acme's, the malformed result is refused naming
its field, the others are recorded."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from tickwheel.v1 import (
    execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc,
)

from tests.support.polling import eventually
from tests.support.server import running_server
from tests.support.workers import running_worker
from tickwheel_server.store.requeue import DEFAULT_POISON_CAP
from tickwheel_worker import HandlerRegistry

UNKNOWN = "no such execution held by this worker"
RUNNING = job_pb2.EXECUTION_STATUS_RUNNING
SUCCEEDED = worker_pb2.RESULT_OUTCOME_SUCCEEDED


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


async def create_once(scheduler, key: str, name: str, handler: str) -> str:
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=handler)))
    job.schedule.once_at.FromDatetime(datetime.now(timezone.utc) + timedelta(seconds=1))
    reply = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=name), metadata=bearer(key))
    return reply.job.id


async def executions_of(scheduler, key: str, job_id: str) -> list[execution_pb2.Execution]:
    reply = await scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job_id), metadata=bearer(key))
    return list(reply.executions)


async def the_execution(scheduler, key: str, job_id: str, status: int) -> execution_pb2.Execution:
    async def check():
        found = await executions_of(scheduler, key, job_id)
        return found[0] if len(found) == 1 and found[0].status == status else None

    return await eventually(check, f"the execution of {job_id} has status {status}")


async def read(call, kind: str) -> list:
    """Messages of ``kind`` from the server, skipping heartbeats, until one comes."""
    while True:
        message = await asyncio.wait_for(call.read(), 20)
        assert message is not grpc.aio.EOF, "the server ended the stream"
        if message.WhichOneof("message") == kind:
            return getattr(message, kind)


async def test_a_hostile_worker_cannot_touch_another_tenants_execution_nor_stop_the_results(server) -> None:
    acme = await server.create_tenant("acme")
    globex = await server.create_tenant("globex")
    hostile_credential = await server.issue_worker_credential(["acme"], handlers=["hostile"])
    globex_credential = await server.issue_worker_credential(["globex"])
    release = asyncio.Event()
    calls: list[str] = []
    registry = HandlerRegistry()

    @registry.handler("slow")
    async def slow(ctx) -> str:
        calls.append(ctx.execution_id)
        await release.wait()
        return "done"

    async with (
        grpc.aio.insecure_channel(server.address) as channel,
        running_worker(server.address, globex_credential, registry, worker_id="g-worker", http=False) as victims_worker,
    ):
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        victim_job = await create_once(scheduler, globex, "victim", "slow")
        victim = await the_execution(scheduler, globex, victim_job, RUNNING)
        mine = [await create_once(scheduler, acme, f"mine-{n}", "hostile") for n in range(3)]

        call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(hostile_credential))
        stolen = worker_pb2.InFlightExecution(execution_id=victim.id, delivery=victim.delivery)
        unknown = worker_pb2.InFlightExecution(execution_id=victim_job + ":2030-01-01T00:00:00Z", delivery=1)
        await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
            worker_id="g-worker", handlers=["hostile"], slots=3, in_flight=[stolen, unknown])))
        welcome = await read(call, "welcome")
        assert list(welcome.reattached) == []
        assert sorted((e.execution_id, e.delivery) for e in welcome.rejected) == sorted(
            [(stolen.execution_id, stolen.delivery), (unknown.execution_id, unknown.delivery)])
        assigned: dict[str, worker_pb2.Assignment] = {}
        while len(assigned) < 3:
            for assignment in (await read(call, "assignment")).assignments:
                assigned[assignment.job_id] = assignment
        assert sorted(assigned) == sorted(mine)
        far, nul, good = (assigned[job_id] for job_id in mine)

        def result_for(assignment, outcome=SUCCEEDED, **fields) -> worker_pb2.ExecutionResult:
            return worker_pb2.ExecutionResult(execution_id=assignment.execution_id, delivery=assignment.delivery,
                                              attempt=assignment.attempt, outcome=outcome, **fields)

        forged = [
            worker_pb2.ExecutionResult(execution_id=victim.id, delivery=victim.delivery, attempt=1, outcome=SUCCEEDED),
            worker_pb2.ExecutionResult(execution_id=victim.id, delivery=victim.delivery, attempt=1,
                                       outcome=worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error="forged"),
            worker_pb2.ExecutionResult(execution_id=unknown.execution_id, delivery=1, attempt=1, outcome=SUCCEEDED),
        ]
        distant = result_for(far)
        distant.started_at.seconds = 2**62
        message = worker_pb2.PullRequest()
        message.result.results.extend([*forged, distant, result_for(nul, worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT,
                                                                     error="HTTP 500: \x00bad\x00"), result_for(good)])
        await call.write(message)
        acks: list[worker_pb2.ResultAck] = []
        while len(acks) < 6:
            acks += (await read(call, "ack")).acks
        by_id: dict[str, list[tuple[bool, str]]] = {}
        for ack in acks:
            by_id.setdefault(ack.execution_id, []).append((ack.accepted, ack.reason))
        assert by_id[victim.id] == [(False, UNKNOWN), (False, UNKNOWN)]
        assert by_id[unknown.execution_id] == [(False, UNKNOWN)]  # exactly as the victim's
        assert by_id[far.execution_id] == [
            (False, "invalid result: started_at: a valid timestamp (0001-01-01 to 9999-12-31)")]
        assert by_id[nul.execution_id] == by_id[good.execution_id] == [(True, "")]

        assert (await executions_of(scheduler, acme, mine[1]))[0].error == "HTTP 500: \ufffdbad\ufffd"
        await the_execution(scheduler, acme, mine[1], job_pb2.EXECUTION_STATUS_DEAD)
        await the_execution(scheduler, acme, mine[2], job_pb2.EXECUTION_STATUS_SUCCEEDED)
        assert (await executions_of(scheduler, acme, mine[0]))[0].status == RUNNING  # refused: nothing written
        await call.write(worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[result_for(far)])))
        assert [(a.execution_id, a.accepted) for a in (await read(call, "ack")).acks] == [(far.execution_id, True)]

        # The victim's own worker was never disturbed; it ends the execution, once.
        assert (await executions_of(scheduler, globex, victim_job))[0].status == RUNNING
        release.set()
        done = await the_execution(scheduler, globex, victim_job, job_pb2.EXECUTION_STATUS_SUCCEEDED)
        call.cancel()
        assert victims_worker.sessions == 1  # a hello with its worker id, from another credential, closed nothing
    assert calls == [victim.id]
    assert (done.attempt, done.delivery, done.error) == (1, 1, "")
    [attempt] = done.attempts
    assert attempt.status == execution_pb2.ATTEMPT_STATUS_SUCCEEDED and attempt.worker_id == "g-worker"


async def test_a_silent_stream_is_ended_and_its_work_goes_to_a_live_worker(store_and_etcd) -> None:
    """A worker that says hello, takes credit and then sends nothing (frozen,
    cut off) has its stream ended with UNAVAILABLE after the heartbeat
    timeout: it is handed nothing more, and what it held runs elsewhere."""
    store, etcd = store_and_etcd
    # The session TTL is the grace before what the ended stream held is requeued.
    async with running_server(store, etcd, heartbeat_interval=0.2, heartbeat_timeout=1.5, session_ttl=2) as server:
        acme = await server.create_tenant("acme")
        credential = await server.issue_worker_credential(["acme"])
        registry = HandlerRegistry()
        ran: list[tuple[str, int]] = []

        @registry.handler("work")
        async def work(ctx) -> str:
            ran.append((ctx.execution_id, ctx.delivery))
            return "done"

        async with grpc.aio.insecure_channel(server.address) as channel:
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
            await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
                worker_id="silent", handlers=["work"], slots=10)))
            await read(call, "welcome")
            # Heartbeats (listing nothing) until it holds the job: the job is
            # due a second after its creation, and on a loaded machine its
            # hand-out may come later than the heartbeat timeout after the hello.
            holding = asyncio.Event()

            async def keep_alive() -> None:
                while not holding.is_set():
                    try:
                        await asyncio.wait_for(holding.wait(), 0.2)
                    except TimeoutError:
                        await call.write(worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat()))

            alive = asyncio.create_task(keep_alive())
            try:
                job_id = await create_once(scheduler, acme, "taken", "work")
                [held] = (await read(call, "assignment")).assignments
            finally:
                holding.set()
                await alive
            assert held.job_id == job_id
            # From here the stream says nothing, but stays open.
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                async with asyncio.timeout(20):  # the server's heartbeats alone would keep it reading
                    while True:
                        message = await call.read()
                        assert message.WhichOneof("message") in ("heartbeat", "cancel"), message
            assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "no message from worker silent" in ended.value.details()
            async with running_worker(server.address, credential, registry, worker_id="alive", http=False):
                later = await create_once(scheduler, acme, "later", "work")
                done = await the_execution(scheduler, acme, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
                await the_execution(scheduler, acme, later, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    assert (done.delivery, [a.status for a in done.attempts]) == (
        2, [execution_pb2.ATTEMPT_STATUS_LOST, execution_pb2.ATTEMPT_STATUS_SUCCEEDED])
    assert sorted(d for _, d in ran) == [1, 2], "each ran once, on the live worker"


async def test_another_credential_of_the_tenant_cannot_take_over_an_execution_of_a_handler_it_may_not_run(
    store_and_etcd,
) -> None:
    """A worker's stream ends while it runs an execution of handler
    ``charge``: until the grace runs out its worker id may re-attach it.
    Another credential of the same tenant, allowed only ``report``, says
    hello with that worker id listing the execution: it is rejected, and a
    result it sends for it is refused as an unknown one's (before, it was
    re-attached and its forged result ended the run it may not run). The
    worker itself then re-attaches it and ends it, once."""
    store, etcd = store_and_etcd
    async with running_server(store, etcd, session_ttl=30) as server:  # the TTL is the re-attach grace
        acme = await server.create_tenant("acme")
        payments = await server.issue_worker_credential(["acme"], handlers=["charge"])
        reports = await server.issue_worker_credential(["acme"], handlers=["report"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            workers = worker_pb2_grpc.WorkerServiceStub(channel)
            job_id = await create_once(scheduler, acme, "charge-once", "charge")
            hello = worker_pb2.WorkerHello(worker_id="pay-1", handlers=["charge"], slots=1)
            call = workers.Pull(metadata=bearer(payments))
            await call.write(worker_pb2.PullRequest(hello=hello))
            await read(call, "welcome")
            [assignment] = (await read(call, "assignment")).assignments
            held = worker_pb2.InFlightExecution(execution_id=assignment.execution_id, delivery=assignment.delivery)
            call.cancel()  # the worker's connection drops; it still runs the execution
            await eventually(lambda: not server.server.connections.all(), "the stream's end noticed")

            hostile = workers.Pull(metadata=bearer(reports))
            await hostile.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
                worker_id="pay-1", handlers=["report"], slots=1, in_flight=[held])))
            welcome = await read(hostile, "welcome")
            assert (list(welcome.reattached), [(e.execution_id, e.delivery) for e in welcome.rejected]) == (
                [], [(held.execution_id, held.delivery)])
            forged = worker_pb2.ExecutionResult(execution_id=held.execution_id, delivery=held.delivery,
                                                attempt=assignment.attempt, outcome=SUCCEEDED)
            await hostile.write(worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[forged])))
            assert [(a.accepted, a.reason) for a in (await read(hostile, "ack")).acks] == [(False, UNKNOWN)]
            assert (await executions_of(scheduler, acme, job_id))[0].status == RUNNING
            hostile.cancel()

            back = workers.Pull(metadata=bearer(payments))
            hello.in_flight.append(held)
            await back.write(worker_pb2.PullRequest(hello=hello))
            assert list((await read(back, "welcome")).reattached) == [held]
            await back.write(worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[forged])))
            assert [a.accepted for a in (await read(back, "ack")).acks] == [True]
            done = await the_execution(scheduler, acme, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
            back.cancel()
    [attempt] = done.attempts
    assert (done.delivery, attempt.worker_id) == (1, "pay-1")


async def test_a_late_result_is_noted_only_from_a_credential_that_could_have_held_its_delivery(
    store_and_etcd,
) -> None:
    """A worker's stream ends while it runs an execution of handler
    ``charge``; after the grace the delivery is requeued (``lost``). Another
    credential of the same tenant, allowed only ``report``, says hello with
    that worker id and sends a late result for the lost delivery: it is
    answered as an unknown execution's and nothing is written (before, its
    ack told the execution's state and a note naming the worker was added
    to the lost attempt, which then took no note from the worker itself).
    The worker's own late result is rejected and noted, once."""
    store, etcd = store_and_etcd
    # The TTL is the re-attach grace: short, but not so short that a loaded machine keeps the session in doubt.
    async with running_server(store, etcd, session_ttl=5) as server:
        acme = await server.create_tenant("acme")
        payments = await server.issue_worker_credential(["acme"], handlers=["charge"])
        reports = await server.issue_worker_credential(["acme"], handlers=["report"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            workers = worker_pb2_grpc.WorkerServiceStub(channel)
            job_id = await create_once(scheduler, acme, "charge-once", "charge")
            call = workers.Pull(metadata=bearer(payments))
            await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
                worker_id="pay-1", handlers=["charge"], slots=1)))
            await read(call, "welcome")
            [assignment] = (await read(call, "assignment")).assignments
            call.cancel()  # the worker's connection drops and stays away past the grace
            lost = await the_execution(scheduler, acme, job_id, job_pb2.EXECUTION_STATUS_SCHEDULED)
            [lost_attempt] = lost.attempts
            assert (lost_attempt.status, lost_attempt.delivery) == (execution_pb2.ATTEMPT_STATUS_LOST, 1)

            late = worker_pb2.ExecutionResult(execution_id=assignment.execution_id, delivery=assignment.delivery,
                                              attempt=assignment.attempt, outcome=SUCCEEDED)
            hostile = workers.Pull(metadata=bearer(reports))
            await hostile.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
                worker_id="pay-1", handlers=["report"], slots=1)))
            await read(hostile, "welcome")
            await hostile.write(worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[late])))
            assert [(a.accepted, a.reason) for a in (await read(hostile, "ack")).acks] == [(False, UNKNOWN)]
            hostile.cancel()
            assert (await executions_of(scheduler, acme, job_id))[0].attempts == [lost_attempt], "a write on refusal"

            back = workers.Pull(metadata=bearer(payments))
            await back.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
                worker_id="pay-1", handlers=["charge"], slots=1)))
            await read(back, "welcome")
            for _ in range(2):  # a repeat is rejected again, and not noted twice
                await back.write(worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[late])))
                assert [(a.accepted, a.reason) for a in (await read(back, "ack")).acks] == [
                    (False, "stale delivery: delivery 1 was requeued (lost)")]
            back.cancel()
            [noted] = [a for a in (await executions_of(scheduler, acme, job_id))[0].attempts if a.delivery == 1]
    assert noted.error == lost_attempt.error + "; a late result (succeeded) from worker pay-1 was rejected"


async def test_a_worker_that_gets_the_attempt_wrong_has_its_run_end_at_the_poison_cap(store_and_etcd) -> None:
    """A worker of the run's own tenant answers every delivery it is handed
    with a result whose ``attempt`` is not the delivery's, and keeps its
    stream alive (heartbeats listing nothing). Each result is refused naming
    ``attempt`` and nothing of it is recorded; the delivery stays the
    worker's until its heartbeats stop listing it, then is requeued as lost,
    counted towards the poison cap. So the run is handed out cap + 1 times
    and ends dead, once. (Before, the refused delivery was forgotten while
    the run stayed ``running``; the safety net requeued it without counting,
    and it was handed to the same worker again and again, for ever.)"""
    store, etcd = store_and_etcd
    cap = DEFAULT_POISON_CAP
    async with running_server(store, etcd, heartbeat_interval=0.2, heartbeat_timeout=1.0) as server:
        acme = await server.create_tenant("acme")
        credential = await server.issue_worker_credential(["acme"], handlers=["work"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
            writing = asyncio.Lock()

            async def write(message: worker_pb2.PullRequest) -> None:
                async with writing:
                    await call.write(message)

            await write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="wrong", handlers=["work"],
                                                                            slots=1)))
            await read(call, "welcome")
            handed: list[tuple[str, int, int]] = []
            acks: list[tuple[str, int, bool, str]] = []

            async def heartbeats() -> None:
                while True:
                    await write(worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat()))
                    await asyncio.sleep(0.2)

            async def answer_wrongly() -> None:
                while (message := await call.read()) is not grpc.aio.EOF:
                    kind = message.WhichOneof("message")
                    if kind == "ack":
                        acks.extend((a.execution_id, a.delivery, a.accepted, a.reason) for a in message.ack.acks)
                    for assignment in message.assignment.assignments if kind == "assignment" else ():
                        handed.append((assignment.execution_id, assignment.delivery, assignment.attempt))
                        result = worker_pb2.ExecutionResult(
                            execution_id=assignment.execution_id, delivery=assignment.delivery,
                            attempt=assignment.attempt + 1, outcome=SUCCEEDED)
                        await write(worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[result])))
                        await write(worker_pb2.PullRequest(credit=worker_pb2.WorkerCredit(credits=1)))

            tasks = [asyncio.create_task(heartbeats()), asyncio.create_task(answer_wrongly())]
            try:
                job_id = await create_once(scheduler, acme, "wrong-attempt", "work")
                try:
                    dead = await eventually(lambda: _ended(scheduler, acme, job_id), "the run ends", timeout=60)
                except AssertionError as error:
                    raise AssertionError(f"{error}; handed out {len(handed)} times, the last {handed[-2:]}") from None
                await asyncio.sleep(2.0)  # any hand-out after its end would come within a heartbeat timeout
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                call.cancel()
    assert dead.status == job_pb2.EXECUTION_STATUS_DEAD and dead.dead_reason.startswith("poison"), dead
    assert [(delivery, attempt) for _, delivery, attempt in handed] == [(n, 1) for n in range(1, cap + 2)]
    assert acks == [(dead.id, n, False, "invalid result: attempt: this delivery is attempt 1, not 2")
                    for n in range(1, cap + 2)]
    assert [(a.delivery, a.status) for a in dead.attempts] == [
        (n, execution_pb2.ATTEMPT_STATUS_LOST) for n in range(1, cap + 2)]


async def _ended(scheduler, key: str, job_id: str) -> execution_pb2.Execution | None:
    """The job's one execution once it ended; None before (also while it has more than one)."""
    found = await executions_of(scheduler, key, job_id)
    ended = (job_pb2.EXECUTION_STATUS_DEAD, job_pb2.EXECUTION_STATUS_SUCCEEDED, job_pb2.EXECUTION_STATUS_CANCELED)
    return found[0] if len(found) == 1 and found[0].status in ended else None
