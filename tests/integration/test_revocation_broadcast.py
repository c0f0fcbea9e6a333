"""A credential revoked through one server is refused by another at once
(``cluster/revocations.py``): two real servers on PostgreSQL and etcd.

The servers' credential cache time is raised to an hour (and with it the
streams' re-verification period, half of it), so only the revoking server's
word through etcd can make the other refuse what it has cached: an API key
revoked (or rotated with no grace) through b is refused by a on its next
call once the word arrived, and a revoked worker's open stream on a ends.
With a's etcd cut (through a proxy), the word cannot reach it, and the
cache time (set short for that test) and the streams' re-verification
still apply. A tenant's request rate and payload quota lowered through b
(UpdateTenant) hold on a's next call, and on b's at once, the same way.
Every wait is bounded and far below the cache time; nothing here measures
time."""

from __future__ import annotations

import contextlib
import uuid

import grpc
import pytest
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc, worker_pb2

from tickwheel.shared.clock import SystemClock
from tickwheel_server.auth import authenticator
from tickwheel_server.lease import open_lease_store
from tickwheel_server.lease.keys import revocations_key
from tests.integration.test_credential_revocation_api import RawStream, bearer
from tests.support.etcd_proxy import EtcdProxy
from tests.support.polling import eventually
from tests.support.server import running_server

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]

PARTITIONS = 4
WAIT = 20.0
LONG = 3600.0
"""The cache time of the tests where only the word may refuse a credential."""
SHORT = 2.0
"""The cache time of the fallback test (re-verification every second)."""


@contextlib.asynccontextmanager
async def two_servers(postgres_url: str, etcd_endpoint: str):
    """Servers a (reaching etcd through a proxy the test may cut) and b, one
    database, and admin stubs on each."""
    proxy = EtcdProxy(etcd_endpoint)
    tag = uuid.uuid4().hex[:8]
    try:
        async with contextlib.AsyncExitStack() as stack:
            a = await stack.enter_async_context(running_server(
                postgres_url, proxy.endpoint, server_id=f"revoke-a-{tag}", partition_count=PARTITIONS))
            b = await stack.enter_async_context(running_server(
                postgres_url, etcd_endpoint, server_id=f"revoke-b-{tag}", partition_count=PARTITIONS))
            for running in (a, b):
                await eventually(lambda r=running: r.server.revocations.following.is_set(), "following the key", WAIT)
            channels = [await stack.enter_async_context(grpc.aio.insecure_channel(r.address)) for r in (a, b)]
            yield proxy, a, b, channels
    finally:
        proxy.close()


async def call_as(channel: grpc.aio.Channel, key: str) -> grpc.StatusCode:
    """A SchedulerService call with ``key``: OK, or the code it failed with."""
    try:
        await scheduler_pb2_grpc.SchedulerServiceStub(channel).ListJobs(
            scheduler_pb2.ListJobsRequest(page_size=1), metadata=bearer(key)
        )
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def test_a_key_revoked_through_b_is_refused_by_a_on_its_next_call(
    monkeypatch, migrated_postgres_url: str, etcd_endpoint: str
) -> None:
    monkeypatch.setattr(authenticator, "CACHE_TTL_SECONDS", LONG)
    async with two_servers(migrated_postgres_url, etcd_endpoint) as (_proxy, a, b, (on_a, on_b)):
        assert a.server.auth.cache_ttl == LONG and a.server.credential_watch.interval == LONG / 2
        revoked, kept = await a.create_tenant("acme"), await a.create_tenant("globex")
        rotated = await a.create_tenant("initech")
        for key in (revoked, kept, rotated):
            assert await call_as(on_a, key) == grpc.StatusCode.OK  # cached on a for an hour
        received = a.server.revocations.received
        admin_b = admin_pb2_grpc.AdminServiceStub(on_b)
        await admin_b.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=revoked.split("_")[1]), metadata=b.admin_metadata())
        assert b.server.revocations.puts == 1 and b.server.revocations.failed_puts == 0, "put before b answered"
        await eventually(lambda: a.server.revocations.received > received, "the word reaching a", WAIT)
        assert a.server.revocations.evicted == 1, "the revoked key only: the others stay cached"
        assert await call_as(on_a, revoked) == grpc.StatusCode.UNAUTHENTICATED
        assert await call_as(on_a, kept) == grpc.StatusCode.OK, "another tenant's key is untouched"

        # A word naming globex's key as acme's (forged: no server writes that) evicts nothing.
        received = a.server.revocations.received
        async with open_lease_store(etcd_endpoint, SystemClock()) as leases:
            await leases.put(revocations_key(), f"v1 forger\ntwk {kept.split('_')[1]} acme")
        await eventually(lambda: a.server.revocations.received > received, "the forged word reaching a", WAIT)
        assert a.server.revocations.evicted == 1 and a.server.revocations.resets == 1

        # A rotation with no grace: the old key's end is told the same way.
        received = a.server.revocations.received
        await admin_b.RotateApiKey(
            admin_pb2.RotateApiKeyRequest(id=rotated.split("_")[1], grace={"seconds": 0}), metadata=b.admin_metadata()
        )
        await eventually(lambda: a.server.revocations.received > received, "the rotation's word reaching a", WAIT)
        assert await call_as(on_a, rotated) == grpc.StatusCode.UNAUTHENTICATED
        assert a.server.revocations.resets == 1, "a's watch never had to be established again"


async def trigger_as(channel: grpc.aio.Channel, key: str, payload: bytes) -> tuple[grpc.StatusCode, str]:
    """TriggerJob of a job nobody created, with ``payload``: the payload
    quota is checked before the job is looked up, so RESOURCE_EXHAUSTED
    when the payload is over the tenant's quota as the server holds it,
    NOT_FOUND otherwise."""
    try:
        await scheduler_pb2_grpc.SchedulerServiceStub(channel).TriggerJob(
            scheduler_pb2.TriggerJobRequest(id="no-such-job", request_id="r1", payload=payload), metadata=bearer(key)
        )
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


async def test_a_tenants_quotas_lowered_through_b_hold_on_as_next_call(
    monkeypatch, migrated_postgres_url: str, etcd_endpoint: str
) -> None:
    monkeypatch.setattr(authenticator, "CACHE_TTL_SECONDS", LONG)
    async with two_servers(migrated_postgres_url, etcd_endpoint) as (_proxy, a, b, (on_a, on_b)):
        first, kept = await a.create_tenant("acme"), await a.create_tenant("globex")
        admin_a, admin_b = admin_pb2_grpc.AdminServiceStub(on_a), admin_pb2_grpc.AdminServiceStub(on_b)
        second = (await admin_a.IssueApiKey(
            admin_pb2.IssueApiKeyRequest(tenant="acme"), metadata=a.admin_metadata())).api_key.secret
        payload = b"x" * 100
        for key in (first, second, kept):  # cached on a for an hour, with the default quotas
            assert (await trigger_as(on_a, key, payload))[0] == grpc.StatusCode.NOT_FOUND
        assert (await trigger_as(on_b, first, payload))[0] == grpc.StatusCode.NOT_FOUND  # and on b
        received = a.server.revocations.received

        lowered = admin_pb2.TenantQuotas(max_payload_bytes=10, requests_per_second=1)
        await admin_b.UpdateTenant(admin_pb2.UpdateTenantRequest(
            tenant=admin_pb2.Tenant(name="acme", quotas=lowered), update_mask={"paths": ["quotas"]},
        ), metadata=b.admin_metadata())
        assert b.server.revocations.puts == 1 and b.server.revocations.failed_puts == 0, "put before b answered"
        code, details = await trigger_as(on_b, first, payload)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_payload_bytes" in details, "b's own: evicted at once"

        await eventually(lambda: a.server.revocations.received > received, "the word reaching a", WAIT)
        assert a.server.revocations.evicted == 2, "acme's two keys only: globex's stays cached"
        # a's bucket for acme held tens of calls: capped to the new rate's one, this call passes it.
        code, details = await trigger_as(on_a, first, payload)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_payload_bytes = 10" in details
        # Then the rate (1 a second for the cluster) or the payload refuses the other key: the new settings either way.
        code, details = await trigger_as(on_a, second, payload)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_payload_bytes = 10" in details or "requests_per_second = 1" in details, details
        assert (await trigger_as(on_a, kept, payload))[0] == grpc.StatusCode.NOT_FOUND, "globex's quota is its own"
        refused = [await call_as(on_a, first) for _ in range(10)]  # a bounded count of calls, no clock read
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in refused, refused

        # Pausing and resuming change what the principal carries (its state): told the same way.
        changes = (
            lambda: admin_b.PauseTenant(admin_pb2.PauseTenantRequest(name="globex"), metadata=b.admin_metadata()),
            lambda: admin_b.ResumeTenant(admin_pb2.ResumeTenantRequest(name="globex"), metadata=b.admin_metadata()),
        )
        for change in changes:
            received, evicted = a.server.revocations.received, a.server.revocations.evicted
            await change()
            await eventually(lambda: a.server.revocations.received > received, "the word reaching a", WAIT)
            assert a.server.revocations.evicted == evicted + 1, "globex's key, read again on its next call"
            assert await call_as(on_a, kept) == grpc.StatusCode.OK
        assert a.server.revocations.resets == 1, "no word was taken as all"


async def test_a_revoked_workers_stream_on_a_ends_when_b_revokes(
    monkeypatch, migrated_postgres_url: str, etcd_endpoint: str
) -> None:
    monkeypatch.setattr(authenticator, "CACHE_TTL_SECONDS", LONG)
    async with two_servers(migrated_postgres_url, etcd_endpoint) as (_proxy, a, b, (on_a, on_b)):
        await a.create_tenant("acme")
        revoked = await a.issue_worker_credential(["acme"], ["echo"])
        kept = await a.issue_worker_credential(["acme"], ["echo"])
        stream, other = RawStream(on_a, revoked, "w-revoked"), RawStream(on_a, kept, "w-kept")
        await stream.hello()
        await other.hello()
        await admin_pb2_grpc.AdminServiceStub(on_b).RevokeWorkerCredential(
            admin_pb2.RevokeWorkerCredentialRequest(id=revoked.split("_")[1]), metadata=b.admin_metadata()
        )
        code, details, kinds = await stream.ended(WAIT)
        assert code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in details and "assignment" not in kinds
        assert (await other.next("heartbeat")).heartbeat.HasField("sent_at"), "the other credential's stream lives on"
        # A reconnect to a is refused at once (its cache entry went with the stream).
        again = RawStream(on_a, revoked, "w-revoked")
        await again.call.write(
            worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w-revoked", slots=1, handlers=["echo"]))
        )
        code, _, kinds = await again.ended(WAIT)
        assert code == grpc.StatusCode.UNAUTHENTICATED and kinds == []
        other.call.cancel()


async def test_with_etcd_cut_the_cache_time_and_the_re_verification_still_apply(
    monkeypatch, migrated_postgres_url: str, etcd_endpoint: str
) -> None:
    monkeypatch.setattr(authenticator, "CACHE_TTL_SECONDS", SHORT)
    async with two_servers(migrated_postgres_url, etcd_endpoint) as (proxy, a, b, (on_a, on_b)):
        key = await a.create_tenant("acme")
        credential = await a.issue_worker_credential(["acme"], ["echo"])
        stream = RawStream(on_a, credential, "w-cut")
        await stream.hello()
        assert await call_as(on_a, key) == grpc.StatusCode.OK
        received = a.server.revocations.received
        proxy.cut()  # a no longer hears from etcd (for less than its session's TTL)
        try:
            admin_b = admin_pb2_grpc.AdminServiceStub(on_b)
            await admin_b.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=key.split("_")[1]), metadata=b.admin_metadata())
            await admin_b.RevokeWorkerCredential(
                admin_pb2.RevokeWorkerCredentialRequest(id=credential.split("_")[1]), metadata=b.admin_metadata()
            )
            code, details, _ = await stream.ended(WAIT)
            assert code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in details
            await eventually(lambda: _refused(on_a, key), "the key refused once its cache entry expired", WAIT)
            assert a.server.revocations.received == received, "the word did not reach a: the fallback did it"
        finally:
            proxy.restore()
        # Once etcd is back, a follows the key again (the watch resumes, or is established again and empties the cache).
        await eventually(
            lambda: a.server.revocations.received > received or a.server.revocations.resets > 1, "a following again", WAIT
        )


async def _refused(channel: grpc.aio.Channel, key: str) -> bool:
    return await call_as(channel, key) == grpc.StatusCode.UNAUTHENTICATED
