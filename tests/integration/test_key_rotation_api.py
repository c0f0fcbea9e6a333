"""RotateApiKey and RevokeApiKey through the real server: the old key keeps
working for the grace and is refused from its end (old_key_expires_at) on;
a revoked key is refused at once; the new key keeps working."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import grpc
import pytest
from google.protobuf import duration_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tests.support.server import running_server

WAIT = 20.0


async def test_a_rotated_key_works_for_its_grace_then_not_and_a_revoked_key_stops_at_once(tmp_path) -> None:
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}") as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            meta = server.admin_metadata()
            created = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="acme")),
                                               metadata=meta)  # fmt: skip
            old = created.api_key.secret

            async def works(secret: str) -> bool:
                try:
                    await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(secret))
                    return True
                except grpc.aio.AioRpcError as error:
                    assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
                    return False

            assert await works(old)  # and cached
            rotated = await admin.RotateApiKey(
                admin_pb2.RotateApiKeyRequest(id=created.api_key.id, grace=duration_pb2.Duration(seconds=1)),
                metadata=meta,
            )
            ends = rotated.old_key_expires_at.ToDatetime(tzinfo=timezone.utc)
            assert await works(old) or datetime.now(timezone.utc) >= ends, "the old key works during its grace"
            deadline = asyncio.get_running_loop().time() + WAIT
            while await works(old):
                assert asyncio.get_running_loop().time() < deadline, "the old key still works after its grace"
                await asyncio.sleep(0.05)
            assert datetime.now(timezone.utc) >= ends, "refused only once the grace is over"
            new = rotated.api_key.secret
            assert await works(new)

            await admin.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=rotated.api_key.id), metadata=meta)
            assert not await works(new), "a revoked key is refused at once, cached or not"
            keys = await admin.ListApiKeys(admin_pb2.ListApiKeysRequest(tenant="acme"), metadata=meta)
            assert list(keys.api_keys) == []
            with pytest.raises(grpc.aio.AioRpcError) as gone:
                await admin.RotateApiKey(admin_pb2.RotateApiKeyRequest(id=rotated.api_key.id), metadata=meta)
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND


async def test_revoking_a_key_drops_only_it_from_the_revoking_servers_cache(tmp_path) -> None:
    """Every other caller stays cached (no store read for each of them
    after one revocation); the revoked key is refused at once."""
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}") as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            meta = server.admin_metadata()
            keys = {}
            for tenant in ("acme", "globex"):
                created = await admin.CreateTenant(
                    admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=tenant)), metadata=meta
                )
                keys[tenant] = created.api_key
            second = await admin.IssueApiKey(admin_pb2.IssueApiKeyRequest(tenant="acme"), metadata=meta)
            callers = [keys["acme"].secret, second.api_key.secret, keys["globex"].secret]
            for secret in callers:
                await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(secret))
            auth = server.server.auth
            cached = auth.cached()
            assert cached >= len(callers)

            await admin.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=keys["acme"].id), metadata=meta)
            assert auth.cached() == cached - 1, "only the revoked key left the cache"
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(keys["acme"].secret))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            for secret in callers[1:]:
                await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(secret))
            assert auth.cached() == cached - 1, "the others were served from the cache"
