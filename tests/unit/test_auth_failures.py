"""Failed authentications: the negative cache, the limits per peer and
overall, and that valid callers are not locked out by another peer's
failures; the authenticator over counting fake stores on a fake clock."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import grpc
import pytest

from tickwheel_server.api.status import status_for
from tickwheel_server.auth import tokens
from tickwheel_server.auth.authenticator import CACHE_TTL_SECONDS, Authenticator
from tickwheel_server.auth.failures import FailedAuthentications, FailureLimits, peer_key
from tickwheel.shared.clock import FakeClock
from tickwheel_server.errors import PermissionDenied, RateLimited, Unauthenticated
from tickwheel_server.store.credentials import WorkerCredential
from tickwheel_server.store.tenants import Tenant

ADMIN = "twa_" + "a" * 30


@dataclass
class FakeTenants:
    keys: dict[str, Tenant] = field(default_factory=dict)
    reads: int = 0

    async def verify_key_until(self, secret: str):
        self.reads += 1
        tenant = self.keys.get(secret)
        return None if tenant is None else (tenant, None)

    def issue(self, name: str) -> str:
        secret = tokens.new_secret(tokens.API_KEY_PREFIX).secret
        self.keys[secret] = Tenant(name=name)
        return secret


@dataclass
class FakeWorkers:
    live: dict[str, WorkerCredential] = field(default_factory=dict)
    reads: int = 0

    async def verify(self, secret: str):
        self.reads += 1
        return self.live.get(secret)

    def issue(self) -> tuple[str, WorkerCredential]:
        new = tokens.new_secret(tokens.WORKER_CREDENTIAL_PREFIX)
        credential = WorkerCredential(new.id, ("acme",), (), True, "", datetime(2026, 1, 1, tzinfo=timezone.utc))
        self.live[new.secret] = credential
        return new.secret, credential


@dataclass
class Call:
    """What the authenticator reads of a gRPC call."""

    secret: str | None
    address: str = "ipv4:10.0.0.1:4242"

    def invocation_metadata(self):
        return () if self.secret is None else (("authorization", f"Bearer {self.secret}"),)

    def peer(self) -> str:
        return self.address


def random_key() -> str:
    """A well-formed API key nobody issued."""
    return f"twk_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}"


def setup(**limits) -> tuple[Authenticator, FakeTenants, FakeWorkers, FakeClock]:
    clock = FakeClock()
    tenants, workers = FakeTenants(), FakeWorkers()
    failures = FailedAuthentications(clock, FailureLimits(**limits))
    return Authenticator(tenants, workers, ADMIN, clock, failures=failures), tenants, workers, clock


async def outcome(auth: Authenticator, call: Call) -> str:
    try:
        return (await auth.tenant(call)).name
    except Unauthenticated:
        return "unauthenticated"
    except RateLimited:
        return "exhausted"


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        ("ipv4:10.1.2.3:55000", "ipv4:10.1.2.3"),
        ("ipv6:[2001:db8:1:2:3:4:5:6]:443", "ipv6:2001:db8:1:2::/64"),
        ("ipv6:%5B2001:db8:1:2:ffff::1%5D:443", "ipv6:2001:db8:1:2::/64"),
        ("ipv6:[::1]:1", "ipv6:::/64"),
        ("unix:/run/tickwheel.sock", "unix:/run/tickwheel.sock"),
        ("", "unknown"),
        ("ipv6:[not an address]:1", "ipv6:[not an address]:1"),
        ("x" * 1000, "x" * 128),
    ],
)
def test_peers_are_keyed_by_address_without_port_and_ipv6_by_its_64(peer: str, key: str) -> None:
    assert peer_key(peer) == key


async def test_a_bogus_key_repeated_costs_one_store_read_per_negative_ttl() -> None:
    auth, tenants, _, clock = setup(negative_ttl=10.0, peer_burst=1000)
    bogus = random_key()
    assert [await outcome(auth, Call(bogus)) for _ in range(50)] == ["unauthenticated"] * 50
    assert tenants.reads == 1
    clock.advance(10.0)
    assert await outcome(auth, Call(bogus)) == "unauthenticated" and tenants.reads == 2


async def test_a_peer_over_its_failures_is_refused_without_reads_and_others_are_not() -> None:
    auth, tenants, _, clock = setup(peer_burst=5, peer_rate=1.0, overall_burst=1000)
    good = tenants.issue("acme")
    cached = tenants.issue("globex")
    attacker, honest = "ipv4:203.0.113.9:1000", "ipv4:198.51.100.7:2000"
    assert await outcome(auth, Call(cached, attacker)) == "globex", "a valid key from the attacker's address, cached"
    results = [await outcome(auth, Call(random_key(), attacker)) for _ in range(30)]
    assert results == ["unauthenticated"] * 5 + ["exhausted"] * 25
    assert tenants.reads == 1 + 5, "refused calls read nothing"
    assert await outcome(auth, Call(good, honest)) == "acme", "another peer is not locked out"
    assert await outcome(auth, Call(None, attacker)) == "exhausted", "no credential at all is refused too"
    assert await outcome(auth, Call(cached, attacker)) == "globex", "a cached credential still works there"
    clock.advance(1.0)
    assert await outcome(auth, Call(random_key(), attacker)) == "unauthenticated", "one failure a second refills"
    assert await outcome(auth, Call(random_key(), attacker)) == "exhausted"


async def test_failures_from_many_peers_are_capped_and_recent_callers_keep_working() -> None:
    auth, tenants, workers, clock = setup(peer_burst=3, overall_burst=10, overall_rate=1.0)
    known = tenants.issue("acme")
    worker_secret, _ = workers.issue()
    assert await outcome(auth, Call(known, "ipv4:198.51.100.7:1")) == "acme"
    assert await auth.worker(Call(worker_secret, "ipv4:198.51.100.8:1"))
    fresh = tenants.issue("globex")  # issued, never used on this server
    reads = tenants.reads
    results = [await outcome(auth, Call(random_key(), f"ipv4:203.0.113.{n}:1")) for n in range(40)]
    assert results == ["unauthenticated"] * 10 + ["exhausted"] * 30
    assert tenants.reads - reads == 10, "at most the overall burst of failures costs a read"
    clock.advance(6)  # the positive cache expired; six failures refilled, spent at once by the flood
    flood = [await outcome(auth, Call(random_key(), f"ipv4:203.0.114.{n}:1")) for n in range(20)]
    assert flood == ["unauthenticated"] * 6 + ["exhausted"] * 14
    reads = tenants.reads
    assert await outcome(auth, Call(known, "ipv4:198.51.100.7:1")) == "acme", "verified here recently: still read"
    assert tenants.reads == reads + 1
    assert (await auth.worker(Call(worker_secret, "ipv4:198.51.100.8:1"))).id
    refused = await outcome(auth, Call(fresh, "ipv4:198.51.100.9:1"))
    assert refused == "exhausted", "a credential never seen here waits while failures flood in"
    clock.advance(1.0)
    assert await outcome(auth, Call(fresh, "ipv4:198.51.100.9:1")) == "globex", "and works once they subside"


async def test_the_refusal_is_resource_exhausted_naming_who_and_when_to_retry() -> None:
    auth, _, _, _ = setup(peer_burst=1)
    await outcome(auth, Call(random_key()))
    with pytest.raises(RateLimited) as refused:
        await auth.tenant(Call(random_key()))
    code, status = status_for(refused.value)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "too many failed authentications from ipv4:10.0.0.1" in status.message
    assert [d.type_url.rsplit(".", 1)[-1] for d in status.details] == ["QuotaFailure", "RetryInfo"]


async def test_guessing_the_admin_token_is_limited_per_peer() -> None:
    auth, tenants, _, _ = setup(peer_burst=3)
    outcomes = []
    for n in range(5):
        try:
            await auth.admin(Call(f"guess-{n:020d}"))
            outcomes.append("admin")
        except Unauthenticated:
            outcomes.append("unauthenticated")
        except RateLimited:
            outcomes.append("exhausted")
    assert outcomes == ["unauthenticated"] * 3 + ["exhausted"] * 2 and tenants.reads == 0
    await auth.admin(Call(ADMIN, "ipv4:10.9.9.9:1"))


async def test_a_credential_found_revoked_is_dropped_from_the_cache() -> None:
    auth, _, workers, _ = setup()
    secret, credential = workers.issue()
    other_secret, _ = workers.issue()
    await auth.worker(Call(secret))
    await auth.worker(Call(other_secret))
    del workers.live[secret]
    assert (await auth.worker(Call(secret))).id == credential.id, "cached"
    auth.forget_worker_credentials({credential.id})
    with pytest.raises(Unauthenticated):
        await auth.worker(Call(secret))
    reads = workers.reads
    await auth.worker(Call(other_secret))
    assert workers.reads == reads, "the others stay cached"


async def test_the_cached_path_serves_only_its_own_secret_unexpired_and_of_the_right_kind() -> None:
    auth, tenants, workers, clock = setup(peer_burst=1000)
    acme, globex = tenants.issue("acme"), tenants.issue("globex")
    worker_secret, _ = workers.issue()
    assert [await outcome(auth, Call(acme)), await outcome(auth, Call(globex))] == ["acme", "globex"]
    await auth.worker(Call(worker_secret))
    assert tenants.reads == 2
    # Another tenant's secret, a prefix or an extension of a cached one: never its principal.
    assert await outcome(auth, Call(globex)) == "globex"
    assert await outcome(auth, Call(acme[:-1])) == "unauthenticated"
    assert await outcome(auth, Call(acme + "x")) == "unauthenticated"
    assert await outcome(auth, Call(f"  {acme}  ")) == "acme", "the bearer's spaces are not part of the secret"
    with pytest.raises(PermissionDenied):
        await auth.tenant(Call(worker_secret))  # cached as a worker: not a tenant
    with pytest.raises(PermissionDenied):
        await auth.worker(Call(acme))
    # Revoked: served from the cache until its entry expires, then read and refused at once.
    reads = tenants.reads
    del tenants.keys[acme]
    assert await outcome(auth, Call(acme)) == "acme" and tenants.reads == reads
    clock.advance(CACHE_TTL_SECONDS)
    assert await outcome(auth, Call(acme)) == "unauthenticated" and tenants.reads == reads + 1
    assert await outcome(auth, Call(globex)) == "globex" and tenants.reads == reads + 2
    del tenants.keys[globex]
    auth.forget()  # revoked on this server: refused on its very next call
    assert await outcome(auth, Call(globex)) == "unauthenticated" and tenants.reads == reads + 3


async def test_malformed_metadata_is_refused_and_counted_whatever_is_cached() -> None:
    auth, tenants, _, _ = setup(peer_burst=4, peer_rate=0.001)
    acme = tenants.issue("acme")
    assert await outcome(auth, Metadata((("authorization", f"Bearer {acme}"),))) == "acme"
    for metadata in ((), (("authorization", acme),), (("authorization", f"Basic {acme}"),), (("authorization", "Bearer  "),)):
        assert await outcome(auth, Metadata(metadata)) == "unauthenticated"
    assert await outcome(auth, Metadata((("authorization", acme),))) == "exhausted", "four failures counted"
    assert await outcome(auth, Metadata((("authorization", f"Bearer {acme}"),))) == "acme", "still cached"
    assert tenants.reads == 1


async def test_a_cached_key_is_not_served_past_its_expiry() -> None:
    auth, tenants, _, clock = setup()
    secret = tenants.issue("acme")
    expires = clock.now() + timedelta(seconds=1)
    tenant = tenants.keys[secret]

    async def verify_key_until(key: str):
        tenants.reads += 1
        return (tenant, expires) if key == secret and clock.now() < expires else None

    tenants.verify_key_until = verify_key_until  # type: ignore[method-assign]
    assert await outcome(auth, Call(secret)) == "acme"
    clock.advance(0.5)
    assert await outcome(auth, Call(secret)) == "acme" and tenants.reads == 1
    clock.advance(0.5)
    assert await outcome(auth, Call(secret)) == "unauthenticated" and tenants.reads == 2


@dataclass
class Metadata:
    """A call with the metadata given as is."""

    metadata: tuple

    def invocation_metadata(self):
        return self.metadata

    def peer(self) -> str:
        return "ipv4:10.0.0.2:1"


async def test_a_tenant_behind_the_address_of_a_flood_keeps_working_when_its_cache_expires() -> None:
    """A NAT: one address holds a flood of bad keys and a tenant whose key
    verified. Its cached principal expires while the address is over its
    failures; the key is checked again (one read) and served, where it was
    refused RESOURCE_EXHAUSTED every cache lifetime before. A key that
    never verified here still waits."""
    auth, tenants, _, clock = setup(peer_burst=5, peer_rate=1.0, overall_burst=5, overall_rate=1.0)
    nat = "ipv4:203.0.113.9:1000"
    quiet = tenants.issue("quiet")
    fresh = tenants.issue("fresh")
    assert await outcome(auth, Call(quiet, nat)) == "quiet"
    clock.advance(CACHE_TTL_SECONDS)
    flood = [await outcome(auth, Call(random_key(), nat)) for _ in range(20)]
    assert flood == ["unauthenticated"] * 5 + ["exhausted"] * 15
    reads = tenants.reads
    assert await outcome(auth, Call(quiet, nat)) == "quiet", "verified here before: checked again, not refused"
    assert tenants.reads == reads + 1
    assert await outcome(auth, Call(fresh, nat)) == "exhausted", "never verified here: waits for the flood to subside"
    del tenants.keys[quiet]  # revoked
    clock.advance(CACHE_TTL_SECONDS)
    assert await outcome(auth, Call(quiet, nat)) == "unauthenticated", "found revoked"
    reads = tenants.reads
    assert [await outcome(auth, Call(quiet, nat)) for _ in range(10)][-1] == "exhausted", "then limited as any"
    assert tenants.reads == reads, "and not read again"


@dataclass
class SlowTenants(FakeTenants):
    """Every read waits for ``gate``: the verifications are all in flight at once."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)

    async def verify_key_until(self, secret: str):
        self.reads += 1
        await self.gate.wait()
        return None


async def test_failures_in_flight_at_once_cannot_all_pass_on_the_same_tokens() -> None:
    # On main every check passed while the reads were in flight (the failures
    # are counted when a read answers): 60 unknown keys at once from one peer
    # were 60 store reads against a burst of 5, and from many peers as many
    # reads against the overall burst.
    clock = FakeClock()
    tenants = SlowTenants()
    limits = FailureLimits(peer_burst=5, peer_rate=1.0, overall_burst=12, overall_rate=1.0)
    auth = Authenticator(tenants, FakeWorkers(), ADMIN, clock, failures=FailedAuthentications(clock, limits))
    attacker = "ipv4:203.0.113.9:1000"
    calls = [asyncio.ensure_future(outcome(auth, Call(random_key(), attacker))) for _ in range(60)]
    many = [asyncio.ensure_future(outcome(auth, Call(random_key(), f"ipv4:203.0.114.{n}:1"))) for n in range(30)]
    await asyncio.sleep(0)
    assert tenants.reads == 12, "the peer's burst, then the overall burst's rest, read at once"
    tenants.gate.set()
    results = await asyncio.gather(*calls)
    assert results.count("unauthenticated") == 5 and results.count("exhausted") == 55
    assert (await asyncio.gather(*many)).count("unauthenticated") == 7
    assert tenants.reads == 12
    # Settled: nothing stays counted in flight once the reads answered.
    clock.advance(5.0)
    assert await outcome(auth, Call(random_key(), attacker)) == "unauthenticated"


async def test_one_secret_sent_by_many_calls_at_once_counts_once_in_flight() -> None:
    # A client firing 90 calls at once with a key new to this server (a full
    # suite's group-commit race) had only the peer's burst pass while the
    # first verification was in flight, the rest refused RESOURCE_EXHAUSTED:
    # the same secret in flight spends no more tokens.
    clock = FakeClock()
    tenants = SlowTenants()
    limits = FailureLimits(peer_burst=5, peer_rate=1.0, overall_burst=12, overall_rate=1.0)
    auth = Authenticator(tenants, FakeWorkers(), ADMIN, clock, failures=FailedAuthentications(clock, limits))
    key = random_key()
    calls = [asyncio.ensure_future(outcome(auth, Call(key, "ipv4:198.51.100.7:1"))) for _ in range(60)]
    await asyncio.sleep(0)
    tenants.gate.set()
    results = await asyncio.gather(*calls)
    assert results.count("exhausted") == 0, results


async def test_one_unknown_secret_sent_by_many_calls_at_once_costs_one_store_read() -> None:
    # Its calls pass the failure limits on one count (the test above); before,
    # each then read the store itself: a client sending one new unknown secret
    # on a connection's 100 calls at once cost 100 reads where the limits
    # allow one, and from 40 connections 4 000, the overall limit bypassed too.
    clock = FakeClock()
    tenants = SlowTenants()
    limits = FailureLimits(peer_burst=5, peer_rate=1.0, overall_burst=12, overall_rate=1.0)
    auth = Authenticator(tenants, FakeWorkers(), ADMIN, clock, failures=FailedAuthentications(clock, limits))
    for peer in ("ipv4:198.51.100.7:1", "ipv4:198.51.100.8:1"):
        key = random_key()
        calls = [asyncio.ensure_future(outcome(auth, Call(key, peer))) for _ in range(60)]
        await asyncio.sleep(0)
        tenants.gate.set()
        assert (await asyncio.gather(*calls)).count("unauthenticated") == 60
        tenants.gate.clear()
    assert tenants.reads == 2, "one read a secret"
