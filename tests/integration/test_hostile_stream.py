"""What a hostile worker's stream sends that no worker sends (red team,
session 21): each is refused with a clear status, once, rather than ignored
at a cost the worker chooses (a log line a message, say)."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc

from tests.support.server import running_server


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


async def test_a_second_hello_ends_the_stream(server, caplog) -> None:
    await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"])
    hello = worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="chatty", handlers=["echo"], slots=1))
    caplog.set_level(logging.INFO, logger="tickwheel_server")
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
        await call.write(hello)
        first = await asyncio.wait_for(call.read(), 20)
        assert first.WhichOneof("message") == "welcome"

        # One more: ignored, each such hello cost a WARNING line, as many as a
        # worker cared to send. (Only one is written: a write after the
        # stream's end makes the client report INTERNAL, not the status.)
        await call.write(hello)
        messages = []
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async with asyncio.timeout(20):  # the server's heartbeats would keep a stream that ignores them open
                while True:
                    message = await call.read()
                    assert message is not grpc.aio.EOF
                    messages.append(message.WhichOneof("message"))
    assert set(messages) <= {"heartbeat"}, messages
    assert ended.value.code() == grpc.StatusCode.FAILED_PRECONDITION, ended.value
    assert "hello" in ended.value.details()
    said = [r for r in caplog.records if "second hello" in r.getMessage()]
    assert len(said) == 1, said


@pytest.mark.parametrize(
    ("handlers", "why"),
    [
        ([f"h{n:07d}" for n in range(1_001)], "at most 1000 names"),
        (["h" * 201], "1 to 200 characters"),
        ([""], "1 to 200 characters"),
        (["echo", "x\x00y"], "of [A-Za-z0-9_.:-]"),
        (["echo", "a\n2026-12-07 ERROR forged"], "of [A-Za-z0-9_.:-]"),
        (["\x1b[2Jecho"], "of [A-Za-z0-9_.:-]"),
    ],
    ids=["too many", "too long", "empty", "NUL", "line break", "escape"],
)
async def test_a_hello_naming_handlers_past_their_bounds_is_refused(server, handlers, why, caplog) -> None:
    """Each name is compared, sorted and sent to the store in every hand-out
    round for the stream: a hello of as many names as a message holds cost
    every round of the server's loop, everyone's (loadtest/RESULTS.md). A
    name is a job's handler name: one holding NUL was welcomed, and on
    PostgreSQL every hand-out round of its tenants then failed (the text
    array refused) and was logged at ERROR, again and again; a line break
    in one forged a log line."""
    caplog.set_level(logging.INFO)
    await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"])
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
        await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
            worker_id="greedy", handlers=handlers, slots=1)))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await asyncio.wait_for(call.read(), 20)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "hello.handlers" in refused.value.details() and why in refused.value.details()
    assert not [r for r in caplog.records if "forged" in r.getMessage() or r.levelno >= logging.ERROR]


async def ended_with(call) -> grpc.aio.AioRpcError:
    """The status that ends ``call``, skipping the server's heartbeats (and failing on anything else)."""
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        async with asyncio.timeout(20):  # the server's heartbeats would keep a stream that is not ended open
            while True:
                message = await call.read()
                assert message is not grpc.aio.EOF
                assert message.WhichOneof("message") == "heartbeat", message
    return ended.value


async def test_heartbeats_listing_what_the_stream_does_not_hold_cost_its_budget(server) -> None:
    """Each entry of a heartbeat is read on the server's loop: made-up ones
    cost the credential's budget as results not held do, so a worker cannot
    send them as large and as often as it likes."""
    await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"])
    made_up = worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat(executions=[
        worker_pb2.ExecutionProgress(execution_id=f"job_x:{n}", delivery=1) for n in range(20_000)]))
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
        await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="beats", handlers=["echo"])))
        assert (await asyncio.wait_for(call.read(), 20)).WhichOneof("message") == "welcome"
        # The burst is 20 000: the second takes the stream over it (no write
        # follows the end: one would make the client report INTERNAL).
        await call.write(made_up)
        await call.write(made_up)
        ended = await ended_with(call)
    assert ended.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, ended
    assert "heartbeat entries that none of its streams holds" in ended.details()


async def test_a_heartbeat_listing_more_than_a_worker_may_hold_ends_the_stream(server) -> None:
    await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"])
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
        await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="beats", handlers=["echo"])))
        assert (await asyncio.wait_for(call.read(), 20)).WhichOneof("message") == "welcome"
        await call.write(worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat(executions=[
            worker_pb2.ExecutionProgress(execution_id=f"job_x:{n}", delivery=1) for n in range(20_001)])))
        ended = await ended_with(call)
    assert ended.code() == grpc.StatusCode.INVALID_ARGUMENT, ended
    assert "heartbeat.executions" in ended.details() and "at most 20000" in ended.details()


async def test_a_heartbeat_repeating_one_entry_pays_for_the_repeats(server) -> None:
    """An entry listed again and again is read each time: past its first,
    each listing of a delivery the stream holds costs the budget too."""
    acme = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"])
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job = job_pb2.Job(name="held", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
        job.schedule.once_at.FromDatetime(datetime.now(timezone.utc) + timedelta(seconds=1))
        await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="held"), metadata=bearer(acme))
        call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
        await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="beats", handlers=["echo"])))
        assert (await asyncio.wait_for(call.read(), 20)).WhichOneof("message") == "welcome"
        while True:
            message = await asyncio.wait_for(call.read(), 20)
            if message.WhichOneof("message") == "assignment":
                [held] = message.assignment.assignments
                break
        once = worker_pb2.ExecutionProgress(execution_id=held.execution_id, delivery=held.delivery)
        repeated = worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat(executions=[once] * 20_000))
        await call.write(repeated)
        await call.write(repeated)
        ended = await ended_with(call)
    assert ended.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, ended


async def test_a_stream_that_never_says_hello_is_ended(store_and_etcd) -> None:
    """A stream is counted against its credential's caps, and watched for
    silence, from its hello on. One that opens with a valid credential and
    sends nothing was kept for ever, counted nowhere: a credential could
    hold any number of them (and say hello on each after its revocation).
    It is ended UNAVAILABLE, naming the hello, after the heartbeat timeout."""
    async with running_server(*store_and_etcd, heartbeat_interval=0.2, heartbeat_timeout=1.5) as server:
        await server.create_tenant("acme")
        credential = await server.issue_worker_credential(["acme"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                async with asyncio.timeout(20):  # before, it waited for ever
                    message = await call.read()
                    assert message is grpc.aio.EOF, message
            assert ended.value.code() == grpc.StatusCode.UNAVAILABLE, ended.value
            assert "hello" in ended.value.details()
