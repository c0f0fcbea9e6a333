"""Hostile bytes at the gRPC transport, against a real server on the
embedded stores and on PostgreSQL + etcd (guard tests: all of this held
when they were written; docs/operations.md, "Transport limits").

- Metadata past 8 KiB in all (a credential of 1 MiB, 2 000 keys, one
  value of 17 KiB or of 9 KiB) is refused RESOURCE_EXHAUSTED before any
  servicer runs, every time, and nothing is written; 7 KiB is served every
  time. (With grpcio's defaults a 9 KiB value was refused at random, four
  calls in twenty: this part failed on main.)
- A message past 4 MiB is refused RESOURCE_EXHAUSTED, on a unary call and
  on a worker's Pull stream (which it ends), and so is a gzip-compressed
  one that inflates past it; nothing is written.
- Unknown groups nested 100 000 deep are INVALID_ARGUMENT ("not a valid
  ..."), on every service, never a crash or UNKNOWN.
- Three MiB of unknown fields in a CreateJob are dropped, not stored.
- A refusal listing many long violations (a thousand bad labels, each
  echoing its 40-character bidi key) is INVALID_ARGUMENT at the client,
  not RESOURCE_EXHAUSTED for trailers over its limit (failed on main).
- Health and reflection answer without a credential (intended: a load
  balancer's health check and grpcurl carry none, and both tell only what
  the public proto files say); every other service's call without one is
  UNAUTHENTICATED.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc
from tickwheel_server.api.validate import MAX_LABELS

RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED

DEEP_GROUPS = b"\xc3\x3e" * 100_000 + b"\xc4\x3e" * 100_000
"""Field 1000 as a group (wire type 3) opened 100 000 times, then closed."""


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


def a_job(name: str, payload: bytes = b"") -> job_pb2.Job:
    job = job_pb2.Job(name=name, payload=payload, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    job.schedule.once_at.FromDatetime(datetime.now(timezone.utc) + timedelta(hours=1))
    return job


async def status_of(call) -> grpc.StatusCode:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def stream_end(call) -> grpc.StatusCode:
    """The status a Pull stream ends with, reading (a status arrives after the messages before it)."""
    try:
        while await asyncio.wait_for(call.read(), 20) is not grpc.aio.EOF:
            pass
    except grpc.aio.AioRpcError as error:
        return error.code()
    return await call.code()


def raw(channel: grpc.aio.Channel, method: str):
    return channel.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)


async def test_hostile_transport_bytes_are_refused_before_any_servicer_and_write_nothing(server) -> None:
    key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], handlers=["echo"])
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        create = scheduler_pb2.CreateJobRequest(job=a_job("j"), request_id="r1")
        for metadata in (
            (("authorization", "Bearer " + "x" * (1 << 20)),),
            bearer(key) + tuple((f"k{i}", "v") for i in range(2000)),
            bearer(key) + (("x-pad", "p" * 17_000),),
        ):
            assert await status_of(scheduler.CreateJob(create, metadata=metadata)) == RESOURCE_EXHAUSTED
        listing = scheduler_pb2.ListJobsRequest()
        for _ in range(20):  # the same answer every time
            pad = bearer(key) + (("x-pad", "p" * 9_000),)
            assert await status_of(scheduler.CreateJob(create, metadata=pad)) == RESOURCE_EXHAUSTED
            fits = bearer(key) + (("x-pad", "p" * 7_000),)
            assert await status_of(scheduler.ListJobs(listing, metadata=fits)) == grpc.StatusCode.OK

        big = scheduler_pb2.CreateJobRequest(job=a_job("big", b"p" * (4 << 20)), request_id="r2")
        assert await status_of(scheduler.CreateJob(big, metadata=bearer(key))) == RESOURCE_EXHAUSTED
        # A gzip bomb: 16 MiB of zeros in a request of a few KiB on the wire; the cap is on what it inflates to.
        bomb = scheduler_pb2.CreateJobRequest(job=a_job("bomb", bytes(16 << 20)), request_id="r4")
        assert await status_of(scheduler.CreateJob(bomb, metadata=bearer(key), compression=grpc.Compression.Gzip)) \
            == RESOURCE_EXHAUSTED

        for method in ("/tickwheel.v1.SchedulerService/ListJobs", "/tickwheel.v1.AdminService/ListTenants"):
            assert await status_of(raw(channel, method)(DEEP_GROUPS, metadata=bearer(key))) == \
                grpc.StatusCode.INVALID_ARGUMENT, method

        pull = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
        await pull.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w1", handlers=["echo"], slots=1)))
        huge = worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[worker_pb2.ExecutionResult(
            execution_id="e", delivery=1, attempt=1, outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED,
            error="e" * (5 << 20))]))  # fmt: skip
        assert (await pull.read()).WhichOneof("message") == "welcome"
        await pull.write(huge)
        assert await stream_end(pull) == RESOURCE_EXHAUSTED

        nothing = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key))
        assert list(nothing.jobs) == []

        # Unknown fields, 3 MiB of them, are dropped: the job stored is the job sent.
        plain = scheduler_pb2.CreateJobRequest(job=a_job("bloated"), request_id="r3").SerializeToString()
        bloat = b"".join(b"\xc2\x3e\x80\x80\x01" + b"u" * 16384 for _ in range(190))  # field 1000, 16 KiB each
        created = scheduler_pb2.CreateJobResponse.FromString(
            await raw(channel, "/tickwheel.v1.SchedulerService/CreateJob")(plain + bloat, metadata=bearer(key)))
        stored = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=created.job.id), metadata=bearer(key))
        assert stored.job.ByteSize() < 4096
        assert b"uuuu" not in stored.SerializeToString()


async def test_health_and_reflection_answer_without_a_credential_and_nothing_else_does(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        listing = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        services = {s.name async for answer in listing for s in answer.list_services_response.service}
        assert services == {
            "tickwheel.v1.SchedulerService", "tickwheel.v1.WorkerService", "tickwheel.v1.AdminService",
            "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection",
        }  # fmt: skip
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        for call in (scheduler.ListJobs(scheduler_pb2.ListJobsRequest()),
                     admin.ListTenants(admin_pb2.ListTenantsRequest())):  # fmt: skip
            assert await status_of(call) == grpc.StatusCode.UNAUTHENTICATED
        pull = worker_pb2_grpc.WorkerServiceStub(channel).Pull()
        await pull.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w1", slots=1)))
        assert await stream_end(pull) == grpc.StatusCode.UNAUTHENTICATED


async def test_a_refusal_listing_long_violations_reaches_the_client_as_invalid_argument(server) -> None:
    # Each bad label's key comes back in its violation (escaped, cut to 160 characters) and its
    # description (400): twenty of them made a status of 40 KiB, sent twice in the trailers,
    # which the client refused as RESOURCE_EXHAUSTED "received metadata size exceeds ...".
    # As many labels as a job may hold, each bad: more labels are refused by their count alone.
    key = await server.create_tenant("acme")
    job = a_job("labels")
    for i in range(MAX_LABELS):
        job.labels[f"BAD KEY {i} " + "\u202e" * 40] = "\x01" * 60
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for attempt in range(20):  # grpcio refuses trailers between 8 and 16 KiB at random
            try:
                await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"l{attempt}"),
                                          metadata=bearer(key))  # fmt: skip
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()[:300]
                assert "job.labels" in error.details() and "more violations not listed" in error.details()
            else:
                raise AssertionError(f"a job with {MAX_LABELS} bad labels was created")
        assert list((await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(key))).jobs) == []
