"""Revoking a worker credential through the real server: its open Pull
streams end with UNAUTHENTICATED (within the authenticator's cache time when
another server revoked it, at once on the server that revoked), they get
nothing more and can report nothing more, and the execution a revoked worker
was running is requeued after the grace and finished once by another
worker; on the embedded stores and on PostgreSQL + etcd."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc

from tickwheel_server.auth.authenticator import CACHE_TTL_SECONDS
from tickwheel.shared.clock import SystemClock
from tickwheel_server.store.credentials import WorkerCredentialStore
from tests.support.polling import eventually
from tests.support.attempts import ALL_ATTEMPTS
from tests.support.server import running_server
from tests.support.workers import builtin_handlers, running_worker

WAIT = 20.0
GRACE = 2
"""The servers' session TTL (seconds), and so the grace after which a lost
worker's execution is requeued: short, as that requeue is part of the story."""


@pytest.fixture
async def server(store_and_etcd):
    """The shared ``server`` fixture's server, with the short :data:`GRACE`."""
    async with running_server(*store_and_etcd, session_ttl=GRACE) as running:
        yield running


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


class RawStream:
    """A Pull stream driven message by message, as a hostile or simple worker would."""

    def __init__(self, channel: grpc.aio.Channel, credential: str, worker_id: str) -> None:
        self.call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
        self.worker_id = worker_id

    async def hello(self) -> worker_pb2.ServerWelcome:
        hello = worker_pb2.WorkerHello(worker_id=self.worker_id, slots=1, handlers=["echo"])
        await self.call.write(worker_pb2.PullRequest(hello=hello))
        return (await self.next()).welcome

    async def next(self, kind: str | None = None) -> worker_pb2.PullResponse:
        """The next message (of ``kind`` when given, skipping heartbeats and others)."""
        while True:
            message = await asyncio.wait_for(self.call.read(), WAIT)
            assert message is not grpc.aio.EOF, f"stream ended: {await self.call.code()}"
            if kind is None or message.WhichOneof("message") == kind:
                return message

    async def ended(self, timeout: float) -> tuple[grpc.StatusCode, str, list[str]]:
        """Read to the end of the stream; its status and the kinds of message read before it."""
        kinds = []

        async def drain() -> None:
            while (message := await self.call.read()) is not grpc.aio.EOF:
                kinds.append(message.WhichOneof("message"))

        try:
            await asyncio.wait_for(drain(), timeout)
        except grpc.aio.AioRpcError:
            pass
        return await self.call.code(), await self.call.details(), kinds


def once_job(name: str) -> job_pb2.Job:
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    job.schedule.once_at.FromDatetime(datetime.now(timezone.utc))
    return job


def execution_row(engine: sa.Engine, job_id: str) -> sa.Row:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT * FROM executions WHERE job_id = :j"), {"j": job_id}).one()


def attempts_of(engine: sa.Engine, execution_id: str) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(
            sa.text(f"SELECT * FROM {ALL_ATTEMPTS} AS a WHERE execution_id = :e ORDER BY delivery, attempt"), {"e": execution_id}
        ).all()


async def test_a_credential_revoked_elsewhere_ends_its_stream_and_its_work_finishes_once_elsewhere(server) -> None:
    key = await server.create_tenant("acme")
    revoked = await server.issue_worker_credential(["acme"], ["echo"])
    other = await server.issue_worker_credential(["acme"], http=True)
    engine = server.server.engine
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        stream = RawStream(channel, revoked, "w-revoked")
        await stream.hello()
        created = await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job("held"), request_id="held"), metadata=bearer(key)
        )
        [assignment] = (await stream.next("assignment")).assignment.assignments
        assert execution_row(engine, created.job.id).status == "running"

        # Revoked by "another server": straight in the store, so this server learns it only by re-verifying.
        credential_id = revoked.split("_")[1]
        await WorkerCredentialStore(engine, SystemClock()).revoke(credential_id)
        code, details, kinds = await stream.ended(CACHE_TTL_SECONDS + 5)
        assert code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in details
        assert "assignment" not in kinds
        await eventually(lambda: not any(c.credential.id == credential_id for c in server.server.connections.all()),
                         "the stream's teardown")

        # Its result cannot come back: a new stream with the credential is refused at once.
        again = RawStream(channel, revoked, "w-revoked")
        await again.call.write(
            worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w-revoked", slots=1, handlers=["echo"]))
        )
        code, details, kinds = await again.ended(WAIT)
        assert code == grpc.StatusCode.UNAUTHENTICATED and kinds == []

        # The lost-worker rule: requeued after the grace, run by the other worker, once.
        async with running_worker(server.address, other, builtin_handlers(), worker_id="w-other"):
            row = await eventually(
                lambda: (r := execution_row(engine, created.job.id)).status == "succeeded" and r, "the requeued run"
            )
        assert (row.id, row.delivery, row.attempt) == (assignment.execution_id, 2, 1)
        runs = attempts_of(engine, row.id)
        assert [(a.delivery, a.worker_id, a.status) for a in runs if a.status == "succeeded"] == [
            (2, "w-other", "succeeded")]  # fmt: skip


async def test_the_revoking_server_ends_the_stream_before_it_answers(server) -> None:
    await server.create_tenant("acme")
    revoked = await server.issue_worker_credential(["acme"], ["echo"])
    kept = await server.issue_worker_credential(["acme"], ["echo"])
    async with grpc.aio.insecure_channel(server.address) as channel:
        stream, other = RawStream(channel, revoked, "w-revoked"), RawStream(channel, kept, "w-kept")
        await stream.hello()
        await other.hello()
        await admin_pb2_grpc.AdminServiceStub(channel).RevokeWorkerCredential(
            admin_pb2.RevokeWorkerCredentialRequest(id=revoked.split("_")[1]), metadata=server.admin_metadata()
        )
        ids = {c.worker_id: c.closed.is_set() for c in server.server.connections.all()}
        assert ids.get("w-revoked", True) and ids["w-kept"] is False, "closed before the answer"
        code, details, _ = await stream.ended(WAIT)
        assert code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in details
        assert (await other.next("heartbeat")).heartbeat.HasField("sent_at"), "the other credential's stream lives on"
        other.call.cancel()


async def test_a_stream_opened_before_the_revocation_says_hello_after_it_and_is_refused(server) -> None:
    """A stream is authenticated when it opens, before its hello. One opened
    with a credential that is then revoked (on this server: it answers once
    its open streams are ended) and says hello only after the answer is
    refused UNAUTHENTICATED and handed nothing. Before, it was welcomed and
    handed work until the next re-verification, and a credential holding
    many such streams (none counted before its hello) could say hello on
    one after another to go on being handed work after its revocation."""
    key = await server.create_tenant("acme")
    revoked = await server.issue_worker_credential(["acme"], ["echo"])
    auth = server.server.auth
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        created = await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job("waiting"), request_id="waiting"), metadata=bearer(key)
        )
        cached = auth.cached()
        early = RawStream(channel, revoked, "w-early")  # opened: its credential checked, no hello yet
        await eventually(lambda: auth.cached() > cached, "the stream's credential checked")
        await admin_pb2_grpc.AdminServiceStub(channel).RevokeWorkerCredential(
            admin_pb2.RevokeWorkerCredentialRequest(id=revoked.split("_")[1]), metadata=server.admin_metadata()
        )
        await early.call.write(
            worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w-early", slots=1, handlers=["echo"]))
        )
        code, details, kinds = await early.ended(WAIT)
        assert code == grpc.StatusCode.UNAUTHENTICATED and kinds == [], (code, details, kinds)
        assert not server.server.connections.all()
        with server.server.engine.connect() as conn:  # its run, if made yet, was handed to no one
            statuses = conn.execute(sa.text("SELECT status FROM executions WHERE job_id = :j"),
                                    {"j": created.job.id}).scalars().all()
        assert set(statuses) <= {"scheduled"}, statuses


async def test_a_revocation_while_the_hello_is_answered_still_refuses_the_stream(server) -> None:
    """The revocation lands while the server answers a hello: after the
    credential was checked at the hello, before the stream joined the
    server's list of streams, so the revoking server's ending of the
    credential's streams does not see it. The stream is refused
    UNAUTHENTICATED all the same and handed nothing (before, it was
    welcomed and handed work until the next re-verification)."""
    key = await server.create_tenant("acme")
    revoked = await server.issue_worker_credential(["acme"], ["echo"])
    liveness = server.server.worker_servicer.gateway.liveness
    reattach = liveness.reattach
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)

        async def reattach_then_revoke(*args, **kwargs):
            answer = await reattach(*args, **kwargs)
            await admin.RevokeWorkerCredential(
                admin_pb2.RevokeWorkerCredentialRequest(id=revoked.split("_")[1]), metadata=server.admin_metadata()
            )
            return answer

        liveness.reattach = reattach_then_revoke
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        created = await scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=once_job("waiting"), request_id="waiting"), metadata=bearer(key)
        )
        stream = RawStream(channel, revoked, "w-racing")
        await stream.call.write(
            worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w-racing", slots=1, handlers=["echo"]))
        )
        code, details, kinds = await stream.ended(WAIT)
        assert code == grpc.StatusCode.UNAUTHENTICATED and kinds == [], (code, details, kinds)
        with server.server.engine.connect() as conn:
            statuses = conn.execute(sa.text("SELECT status FROM executions WHERE job_id = :j"),
                                    {"j": created.job.id}).scalars().all()
        assert set(statuses) <= {"scheduled"}, statuses
