"""What one worker credential may hold on a server (hardening, session 22):
its streams, the server's streams, the slots its streams state and the
credit each stream holds. Past a cap a hello is refused with
RESOURCE_EXHAUSTED naming it, and the streams already open go on; credit
past the protocol's bound ends the stream with INVALID_ARGUMENT, and credit
past a stream's slots is cut to them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc

from tests.support.server import running_server
from tickwheel_server.api.status import retry_delay


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


@contextlib.asynccontextmanager
async def capped_server(**caps) -> AsyncIterator:
    with tempfile.TemporaryDirectory() as tmp:
        async with running_server(f"sqlite:///{os.path.join(tmp, 'caps.db')}", heartbeat_interval=0.2,
                                  **caps) as server:
            yield server


async def open_stream(channel, credential: str, worker_id: str, *, slots: int = 1):
    """A Pull stream after its hello: (the call, its first message or the status that refused it)."""
    call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
    await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
        worker_id=worker_id, handlers=["echo"], slots=slots)))
    try:
        first = await asyncio.wait_for(call.read(), 20)
    except grpc.aio.AioRpcError as refused:
        return call, refused
    return call, first


async def welcomed(channel, credential: str, worker_id: str, *, slots: int = 1):
    call, first = await open_stream(channel, credential, worker_id, slots=slots)
    assert not isinstance(first, grpc.aio.AioRpcError), first
    assert first.WhichOneof("message") == "welcome", first
    return call


async def refused(channel, credential: str, worker_id: str, *, slots: int = 1) -> grpc.aio.AioRpcError:
    _, first = await open_stream(channel, credential, worker_id, slots=slots)
    assert isinstance(first, grpc.aio.AioRpcError), first
    return first


async def still_served(call) -> None:
    """The server still writes to ``call``: a heartbeat arrives (every 0.2 s here)."""
    while True:
        message = await asyncio.wait_for(call.read(), 20)
        assert message is not grpc.aio.EOF
        if message.WhichOneof("message") == "heartbeat":
            return


async def test_a_credential_past_its_stream_cap_is_refused_and_its_open_streams_go_on() -> None:
    async with capped_server(max_streams_per_credential=3) as server:
        await server.create_tenant("acme")
        greedy = await server.issue_worker_credential(["acme"])
        other = await server.issue_worker_credential(["acme"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            calls = [await welcomed(channel, greedy, f"w{n}") for n in range(3)]
            past = await refused(channel, greedy, "w3")
            assert past.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, past
            assert "max_streams_per_credential = 3" in past.details(), past.details()
            # The oldest are unharmed, another credential is not held back, and
            # a worker reconnecting under its own id replaces its stream.
            for call in calls:
                await still_served(call)
            await welcomed(channel, other, "w0")
            again = await welcomed(channel, greedy, "w0")
            await still_served(again)
            # One stream gone, one more is taken.
            calls[1].cancel()
            for _ in range(200):
                call, first = await open_stream(channel, greedy, "w9")
                if not isinstance(first, grpc.aio.AioRpcError):
                    break
                await asyncio.sleep(0.05)  # the cancelled stream's end reaches the server
            assert first.WhichOneof("message") == "welcome", first


async def test_a_credential_retrying_past_its_cap_is_told_to_wait_longer_and_one_that_fits_is_not() -> None:
    """A refusal by a cap opens a refusal window for the credential: its
    hellos refused again inside it are held and told a longer delay (the
    code before told 5 s every time, so a client retrying at once cost a
    full hello each try); a worker replacing its own stream, which fits,
    is served inside the window."""
    async with capped_server(max_streams_per_credential=1) as server:
        await server.create_tenant("acme")
        greedy = await server.issue_worker_credential(["acme"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            await welcomed(channel, greedy, "w0")
            first = await refused(channel, greedy, "x")
            assert first.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and retry_delay(first.trailing_metadata()) == 5.0, first
            again = await asyncio.gather(*(refused(channel, greedy, f"x{n}") for n in range(40)))
            assert {error.code() for error in again} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
            assert all("max_streams_per_credential = 1" in error.details() for error in again)
            assert max(retry_delay(error.trailing_metadata()) for error in again) > 5.0, "escalated, as a window's calls are"
            replacing = await welcomed(channel, greedy, "w0")
            await still_served(replacing)


async def test_a_server_past_its_stream_cap_refuses_and_says_which() -> None:
    async with capped_server(max_worker_streams=2) as server:
        await server.create_tenant("acme")
        credentials = [await server.issue_worker_credential(["acme"]) for _ in range(3)]
        async with grpc.aio.insecure_channel(server.address) as channel:
            first = await welcomed(channel, credentials[0], "a")
            await welcomed(channel, credentials[1], "b")
            past = await refused(channel, credentials[2], "c")
            assert past.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, past
            assert "max_worker_streams = 2" in past.details(), past.details()
            await still_served(first)


async def test_a_credential_past_its_slots_is_refused() -> None:
    async with capped_server(max_slots_per_credential=10) as server:
        await server.create_tenant("acme")
        credential = await server.issue_worker_credential(["acme"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            await welcomed(channel, credential, "big", slots=8)
            past = await refused(channel, credential, "more", slots=3)
            assert past.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, past
            assert "max_slots_per_credential = 10" in past.details(), past.details()
            await welcomed(channel, credential, "fits", slots=2)


async def ended_with(call) -> grpc.aio.AioRpcError:
    """The status that ends ``call``, skipping the server's heartbeats (and failing on anything else)."""
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        async with asyncio.timeout(20):
            while True:
                message = await call.read()
                assert message is not grpc.aio.EOF
                assert message.WhichOneof("message") == "heartbeat", message
    return ended.value


@pytest.mark.parametrize("credits", [10_001, 2**31 - 1, 0, -5], ids=["past slots' bound", "int32 max", "zero",
                                                                      "negative"])
async def test_credit_outside_the_protocol_bound_ends_the_stream(server, credits) -> None:
    await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"])
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = await welcomed(channel, credential, "greedy")
        await call.write(worker_pb2.PullRequest(credit=worker_pb2.WorkerCredit(credits=credits)))
        ended = await ended_with(call)
    assert ended.code() == grpc.StatusCode.INVALID_ARGUMENT, ended
    assert "credit.credits" in ended.details() and "between 1 and 10000" in ended.details()


async def test_credit_past_a_streams_slots_pulls_no_more_of_the_backlog(server) -> None:
    """A stream of one slot announcing a thousand credits is handed one
    execution; the tenant's other worker gets the rest of the backlog."""
    acme = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"])
    jobs = 5
    async with grpc.aio.insecure_channel(server.address) as channel:
        greedy = await welcomed(channel, credential, "greedy", slots=1)
        await greedy.write(worker_pb2.PullRequest(credit=worker_pb2.WorkerCredit(credits=1000)))
        honest = await welcomed(channel, credential, "honest", slots=jobs - 1)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        due = datetime.now(timezone.utc) + timedelta(seconds=2)
        for n in range(jobs):
            job = job_pb2.Job(name=f"j{n}", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
            job.schedule.once_at.FromDatetime(due)
            await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"j{n}"),
                                      metadata=bearer(acme))
        received = {"greedy": 0, "honest": 0}

        async def count(name: str, call) -> None:
            while True:
                message = await call.read()
                if message is grpc.aio.EOF:
                    return
                if message.WhichOneof("message") == "assignment":
                    received[name] += len(message.assignment.assignments)

        readers = [asyncio.create_task(count("greedy", greedy)), asyncio.create_task(count("honest", honest))]
        try:
            async with asyncio.timeout(30):
                while sum(received.values()) < jobs:
                    await asyncio.sleep(0.05)
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
    assert received == {"greedy": 1, "honest": jobs - 1}, received


async def test_a_first_message_that_is_not_a_sound_hello_is_refused_and_counts_nothing() -> None:
    """Credit before any hello, a worker id past 128 characters or of
    other characters, slots past the bound or negative: each stream is
    refused naming the field (``stream`` for the credit), is counted
    against no cap, and the credential's sound hello then passes a cap of
    one stream."""
    async with capped_server(max_streams_per_credential=1, max_slots_per_credential=4) as server:
        await server.create_tenant("acme")
        credential = await server.issue_worker_credential(["acme"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            bad = [
                (worker_pb2.PullRequest(credit=worker_pb2.WorkerCredit(credits=5)),
                 grpc.StatusCode.FAILED_PRECONDITION, "stream"),
                *[(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id=worker_id, handlers=["echo"])),
                   grpc.StatusCode.INVALID_ARGUMENT, "hello.worker_id") for worker_id in ("w" * 129, "w 1", "")],
                *[(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w1", handlers=["echo"], slots=slots)),
                   grpc.StatusCode.INVALID_ARGUMENT, "hello.slots") for slots in (10_001, -1, 2**31 - 1)],
            ]  # fmt: skip
            for message, code, field in bad:
                call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
                await call.write(message)
                with pytest.raises(grpc.aio.AioRpcError) as ended:
                    await asyncio.wait_for(call.read(), 20)
                assert (ended.value.code(), field in ended.value.details()) == (code, True), ended.value.details()
            connections = server.server.connections
            assert (len(connections), connections.refused) == (0, 0)
            call = await welcomed(channel, credential, "w1", slots=4)  # the cap of one stream and four slots
            await still_served(call)
            call.cancel()


async def test_streams_waiting_for_their_hello_are_capped_per_credential() -> None:
    # On main a stream was counted from its hello on: one credential opened
    # streams that never said hello by the thousand, each held until the
    # heartbeat timeout (the third here got FAILED_PRECONDITION for its
    # first message, having been served, instead of being refused).
    async with capped_server(max_streams_per_credential=2) as server:
        await server.create_tenant("acme")
        greedy = await server.issue_worker_credential(["acme"])
        other = await server.issue_worker_credential(["acme"])
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = worker_pb2_grpc.WorkerServiceStub(channel)
            silent = [stub.Pull(metadata=bearer(greedy)) for _ in range(2)]
            for _ in range(400):  # sent nothing: the server waits for their hellos
                if getattr(server.server.connections, "waiting_for_hello", lambda: 2)() == 2:  # (main had none)
                    break
                await asyncio.sleep(0.05)
            third = stub.Pull(metadata=bearer(greedy))
            await third.write(worker_pb2.PullRequest())  # not a hello: read only if it was let in
            try:
                await asyncio.wait_for(third.read(), 20)
                raise AssertionError("served")
            except grpc.aio.AioRpcError as refused:
                assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused
                assert "waiting for their hello" in refused.details(), refused.details()
            # Another credential, and a stream that says hello, are not held back.
            await welcomed(channel, other, "o")
            for call in silent:
                call.cancel()
            for _ in range(200):
                call, first = await open_stream(channel, greedy, "g")
                if not isinstance(first, grpc.aio.AioRpcError):
                    break
                await asyncio.sleep(0.05)
            assert first.WhichOneof("message") == "welcome", first
