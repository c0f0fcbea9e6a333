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
from tickwheel_server.auth.windows import RefusalWindows
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


def keyed(secret: str, address: str = "203.0.113.9:4000") -> Request:
    return Request("GET", "/api/x", "/api/x", {}, {"authorization": f"Bearer {secret}"}, peer=address)


def random_key(n: int) -> str:
    return f"twk_k{n}_" + "z" * 43


async def test_console_requests_inside_their_callers_window_are_refused_before_any_check() -> None:
    """An address sending unknown keys to the console until it is refused
    meets its refusal window on every later request, as a gRPC call does:
    429 with the window's Retry-After, nothing checked and no store read;
    one that keeps asking is told a longer wait (here past the point where
    its failures' bucket alone would have let a new key be looked up)."""
    clock = FakeClock(datetime(2027, 1, 1, tzinfo=timezone.utc))
    tenants = Tenants()
    auth = Authenticator(tenants, Workers(), ADMIN, clock, windows=RefusalWindows(clock, hold=0))
    statuses = [await status_of(tenant_of(auth, keyed(random_key(n)))) for n in range(25)]
    assert statuses[0] == 401 and statuses[-1] == 429
    reads, checked, refused = tenants.calls, auth.failures.refused, auth.windows.refused
    for n in range(100, 180):  # a client calling in a loop, a new key each time
        assert await status_of(principal_of(auth, keyed(random_key(n)))) == 429
    assert (tenants.calls, auth.failures.refused) == (reads, checked), "refused by the window: nothing checked"
    assert auth.windows.refused - refused == 80
    with pytest.raises(HttpError) as error:
        await require_admin(auth, keyed(random_key(999)))
    assert error.value.status == 429 and int(dict(error.value.headers)["Retry-After"]) > 1, "escalated"
    clock.advance(1.0)  # the failures' bucket holds two tokens again: only the window holds the address back
    assert await status_of(tenant_of(auth, keyed(random_key(1000)))) == 429
    assert tenants.calls == reads, "no store read while the escalated window lasts"
    # Another address is its own; the same address's key that verified here is served.
    assert await status_of(tenant_of(auth, keyed(random_key(1001), "198.51.100.7:1"))) == 401
    assert (await tenant_of(auth, keyed(API_KEY, "198.51.100.7:2"))).name == "acme"
    assert (await tenant_of(auth, keyed(API_KEY))).name == "acme"


async def test_console_requests_without_a_credential_count_against_their_address() -> None:
    clock = FakeClock(datetime(2027, 1, 1, tzinfo=timezone.utc))
    auth = Authenticator(Tenants(), Workers(), ADMIN, clock, windows=RefusalWindows(clock, hold=0))
    bare = Request("GET", "/api/x", "/api/x", {}, {}, peer="203.0.113.9:4000")
    statuses = [await status_of(principal_of(auth, bare)) for _ in range(25)]
    assert statuses[0] == 401 and statuses[-1] == 429
    assert await status_of(tenant_of(auth, keyed(random_key(1)))) == 429, "the address's window: a new key too"
    assert (await tenant_of(auth, keyed(API_KEY, "198.51.100.7:2"))).name == "acme"
