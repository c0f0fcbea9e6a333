"""A worker that never reads its Pull stream (red team, session 21).

What the server sends a worker waits in that stream's bounded outbox. The
loops every worker shares (the result writer, hand-out rounds, cancels and
requeues) must never wait on one worker's full outbox: a stream that does
not read what it asked for is ended, and everyone else goes on."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc

from tests.support.polling import eventually
from tests.support.workers import running_worker
from tickwheel_worker import HandlerRegistry

SUCCEEDED = worker_pb2.RESULT_OUTCOME_SUCCEEDED
HOSTILE_OPTIONS = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
"""A client's own choice: no window grown by BDP probes, a small one to start."""


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


async def test_a_worker_that_never_reads_its_stream_stalls_no_one_elses_results(server) -> None:
    await server.create_tenant("acme")
    globex = await server.create_tenant("globex")
    hostile = await server.issue_worker_credential(["acme"], handlers=["hostile"])
    globex_credential = await server.issue_worker_credential(["globex"])
    registry = HandlerRegistry()

    @registry.handler("quick")
    async def quick(ctx) -> str:
        return "done"

    # The hostile stream has a connection of its own: what it leaves unread
    # fills its own HTTP/2 window, not the one the test's calls use.
    async with (
        grpc.aio.insecure_channel(server.address) as channel,
        grpc.aio.insecure_channel(server.address, options=HOSTILE_OPTIONS) as hostile_channel,
        running_worker(server.address, globex_credential, registry, worker_id="g-worker", http=False),
    ):
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        call = worker_pb2_grpc.WorkerServiceStub(hostile_channel).Pull(metadata=bearer(hostile))
        await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
            worker_id="never-reads", handlers=["hostile"], slots=1)))
        welcome = await asyncio.wait_for(call.read(), 20)
        assert welcome.WhichOneof("message") == "welcome"
        # From here on it writes and never reads: one result a message for an
        # execution it does not hold (each answered by an ack of its own),
        # well within its credential's budget of such results.
        written = 0

        async def flood() -> None:
            nonlocal written
            for n in range(19_000):
                result = worker_pb2.ExecutionResult(
                    execution_id=f"{n:06d}" + "x" * 250, delivery=1, attempt=1, outcome=SUCCEEDED)
                await call.write(worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[result])))
                written += 1
                await asyncio.sleep(0.003)

        flooding = asyncio.create_task(flood())
        try:
            await eventually(lambda: written >= 3_000 or flooding.done(), "the hostile worker wrote its results")
            job = job_pb2.Job(name="victim", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="quick")))
            job.schedule.once_at.FromDatetime(datetime.now(timezone.utc) + timedelta(seconds=1))
            created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="victim"),
                                                metadata=bearer(globex))

            async def succeeded():
                reply = await scheduler.ListExecutions(
                    scheduler_pb2.ListExecutionsRequest(job_id=created.job.id), metadata=bearer(globex))
                return [e for e in reply.executions if e.status == job_pb2.EXECUTION_STATUS_SUCCEEDED]

            await eventually(succeeded, "globex's execution is recorded while acme's worker reads nothing")
            # Its stream is over on the server (the status waits behind what
            # it leaves unread, so it cannot read it).
            await eventually(lambda: all(c.worker_id != "never-reads" for c in server.server.connections.all()),
                             "the stream that reads nothing is ended")
        finally:
            flooding.cancel()
            call.cancel()
            await asyncio.gather(flooding, return_exceptions=True)
