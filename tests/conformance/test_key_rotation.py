"""API key rotation and revocation as a caller sees them, through the
Authenticator over the real tenant store (SQLite and PostgreSQL) on a fake
clock: a rotated key works for its grace and not a moment longer, even while
its verification is cached; a revoked key stops at once on the server that
revoked it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tickwheel_server.auth.authenticator import Authenticator
from tickwheel_server.errors import NotFound, Unauthenticated
from tickwheel_server.store.credentials import WorkerCredentialStore
from tickwheel_server.store.tenants import Tenant, TenantStore

ADMIN = "admin-token-0123456789abcdef"


class Call:
    """The metadata half of a gRPC call context."""

    def __init__(self, secret: str) -> None:
        self._metadata = (("authorization", f"Bearer {secret}"),)

    def invocation_metadata(self):
        return self._metadata


@pytest.fixture
def tenants(migrated_engine, clock) -> TenantStore:
    return TenantStore(migrated_engine, clock)


@pytest.fixture
def auth(migrated_engine, clock, tenants) -> Authenticator:
    return Authenticator(tenants, WorkerCredentialStore(migrated_engine, clock), ADMIN, clock)


async def test_a_rotated_key_works_through_its_grace_even_cached_and_is_refused_after(tenants, auth, clock) -> None:
    _, old = await tenants.create(Tenant(name="acme"))
    assert (await auth.tenant(Call(old.secret))).name == "acme"  # cached for 5 s from here
    new, expires = await tenants.rotate_key(old.key.id, timedelta(seconds=2))
    auth.forget()  # as RotateApiKey does on the server that rotated
    assert expires == clock.now() + timedelta(seconds=2)
    assert (await auth.tenant(Call(old.secret))).name == "acme", "valid during the grace"
    assert (await auth.tenant(Call(new.secret))).name == "acme"
    clock.advance(1.5)
    assert (await auth.tenant(Call(old.secret))).name == "acme"
    clock.advance(0.5)  # the grace is over, well within the cache's 5 s
    with pytest.raises(Unauthenticated):
        await auth.tenant(Call(old.secret))
    assert (await auth.tenant(Call(new.secret))).name == "acme"


async def test_a_rotation_elsewhere_ends_the_old_key_at_its_grace_here_too(tenants, auth, clock) -> None:
    _, old = await tenants.create(Tenant(name="acme"))
    other_server = TenantStore(tenants.engine, clock)
    await other_server.rotate_key(old.key.id, timedelta(seconds=1))
    assert (await auth.tenant(Call(old.secret))).name == "acme"  # cached here, not forgotten
    clock.advance(1)
    with pytest.raises(Unauthenticated):
        await auth.tenant(Call(old.secret))


async def test_a_revoked_key_is_refused_at_once_and_a_rotation_of_it_is_not_found(tenants, auth) -> None:
    _, key = await tenants.create(Tenant(name="acme"))
    assert (await auth.tenant(Call(key.secret))).name == "acme"
    await tenants.revoke_key(key.key.id)
    auth.forget()  # as RevokeApiKey does
    with pytest.raises(Unauthenticated):
        await auth.tenant(Call(key.secret))
    with pytest.raises(NotFound):
        await tenants.rotate_key(key.key.id, timedelta(hours=1))
