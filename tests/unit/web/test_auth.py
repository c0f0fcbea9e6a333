"""The console's callers through the server's Authenticator: the same
credentials as the gRPC API, 401 for none or an unknown one, 403 for the
wrong kind."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import json

from tickwheel_server.auth.authenticator import Authenticator
from tickwheel.shared.clock import FakeClock
from tickwheel_server.auth.ratelimit import RequestRateLimiter
from tickwheel_server.store.credentials import WorkerCredential
from tickwheel_server.store.tenants import Tenant
from tickwheel_server.web.api import ConsoleApi
from tickwheel_server.web.auth import Principal, principal_of, require_admin, tenant_of
from tickwheel_server.web.router import HttpError, Request

ADMIN = "admin-token-0123456789abcdef"
API_KEY = "twk_acmekey_" + "a" * 43
WORKER = "tww_worker1_" + "w" * 43


class Tenants:
    def __init__(self, requests_per_second: int = 100) -> None:
        self.calls = 0
        self.requests_per_second = requests_per_second

    async def verify_key_until(self, secret: str) -> tuple[Tenant, None] | None:
        self.calls += 1
        return (Tenant(name="acme", requests_per_second=self.requests_per_second), None) if secret == API_KEY else None


class Workers:
    async def verify(self, secret: str) -> WorkerCredential | None:
        if secret != WORKER:
            return None
        return WorkerCredential("worker1", ("acme",), (), True, "", datetime(2027, 1, 1, tzinfo=timezone.utc))


@pytest.fixture
def tenants() -> Tenants:
    return Tenants()


@pytest.fixture
def auth(tenants) -> Authenticator:
    return Authenticator(tenants, Workers(), ADMIN, FakeClock(datetime(2027, 1, 1, tzinfo=timezone.utc)))


def request(authorization: str | None) -> Request:
    headers = {} if authorization is None else {"authorization": authorization}
    return Request("GET", "/api/x", "/api/x", {}, headers)


async def status_of(call) -> int:
    with pytest.raises(HttpError) as error:
        await call
    return error.value.status


async def test_a_tenant_key_is_that_tenant_on_the_tenant_views_and_refused_on_the_cluster(auth) -> None:
    assert (await tenant_of(auth, request(f"Bearer {API_KEY}"))).name == "acme"
    assert await principal_of(auth, request(f"bearer  {API_KEY} ")) == Principal("tenant", "acme")
    with pytest.raises(HttpError) as error:
        await require_admin(auth, request(f"Bearer {API_KEY}"))
    assert (error.value.status, error.value.message) == (403, "the cluster view needs the admin token")


async def test_the_admin_token_opens_the_cluster_and_not_the_tenant_views(auth) -> None:
    await require_admin(auth, request(f"Bearer {ADMIN}"))
    assert await principal_of(auth, request(f"Bearer {ADMIN}")) == Principal("admin")
    assert await status_of(tenant_of(auth, request(f"Bearer {ADMIN}"))) == 403


async def test_a_worker_credential_opens_nothing(auth) -> None:
    for call in (tenant_of, require_admin, principal_of):
        assert await status_of(call(auth, request(f"Bearer {WORKER}"))) == 403


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer   ", f"Basic {API_KEY}", API_KEY, "Bearer twk_acmekey_wrong", "Bearer nonsense"],
)
async def test_no_credential_or_an_unknown_one_is_401_with_a_challenge(auth, header) -> None:
    for call in (tenant_of, require_admin, principal_of):
        with pytest.raises(HttpError) as error:
            await call(auth, request(header))
        assert error.value.status == 401
        assert error.value.headers == (("WWW-Authenticate", 'Bearer realm="tickwheel"'),)


async def test_verified_keys_are_cached_like_the_grpc_apis(auth, tenants) -> None:
    for _ in range(3):
        await tenant_of(auth, request(f"Bearer {API_KEY}"))
    assert tenants.calls == 1


async def test_a_tenant_over_its_request_rate_gets_429_naming_the_limit_not_500() -> None:
    clock = FakeClock(datetime(2027, 1, 1, tzinfo=timezone.utc))
    limited = Authenticator(Tenants(requests_per_second=2), Workers(), ADMIN, clock,
                            rate_limiter=RequestRateLimiter(clock))  # fmt: skip
    for _ in range(2):  # one second's worth
        assert (await tenant_of(limited, request(f"Bearer {API_KEY}"))).name == "acme"
    for call in (tenant_of, principal_of):
        with pytest.raises(HttpError) as error:
            await call(limited, request(f"Bearer {API_KEY}"))
        assert error.value.status == 429
        assert "API request rate over 2/s" in error.value.message
        assert error.value.headers == (("Retry-After", "1"),)
    # Through a console endpoint: the JSON error the page shows, with the header.
    response = await ConsoleApi(limited, None, None, None, None, None, None).session(request(f"Bearer {API_KEY}"))
    assert response.status == 429 and ("Retry-After", "1") in response.headers
    assert "API request rate over 2/s" in json.loads(response.body)["error"]["message"]
    await require_admin(limited, request(f"Bearer {ADMIN}"))  # the operator has no tenant rate
    clock.advance(1)
    assert await principal_of(limited, request(f"Bearer {API_KEY}")) == Principal("tenant", "acme")
