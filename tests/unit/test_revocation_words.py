"""What a server does with another's word that a credential was revoked
(``cluster/revocations.py``): the authenticator evicts only a principal of
the named kind and tenant, by index and never by scan, and caches no
verification the word overtook; a put's value is read strictly, and one it
cannot read stands for every credential."""

from __future__ import annotations

import asyncio

import pytest

from tickwheel_server.auth import authenticator as auth_module
from tickwheel_server.auth import tokens
from tickwheel_server.auth.authenticator import TENANT_CHANGED, Revoked
from tickwheel_server.cluster.revocations import ALL, DEFAULT_MAX_ENTRIES, ENTRY_MAX, decode, encode
from tickwheel_server.store.tenants import Tenant
from tickwheel_server.errors import Unauthenticated

from tests.unit.test_auth_failures import Call, outcome, setup

KEY, WORKER = tokens.API_KEY_PREFIX, tokens.WORKER_CREDENTIAL_PREFIX


def ident(secret: str) -> str:
    return secret.split("_")[1]


async def test_a_word_evicts_only_the_named_credential_of_its_kind_and_tenant() -> None:
    auth, tenants, workers, _ = setup(peer_burst=1000)
    acme, globex = tenants.issue("acme"), tenants.issue("globex")
    worker_secret, credential = workers.issue()  # serves acme
    for secret in (acme, globex):
        assert await outcome(auth, Call(secret)) in ("acme", "globex")
    await auth.worker(Call(worker_secret))
    reads = tenants.reads, workers.reads

    # Hostile or wrong words evict nothing: another tenant, another kind, an unknown id.
    assert not auth.forget_revoked(Revoked(KEY, ident(acme), "globex"))
    assert not auth.forget_revoked(Revoked(WORKER, ident(acme), "acme"))
    assert not auth.forget_revoked(Revoked(KEY, ident(worker_secret), "acme"))
    assert not auth.forget_revoked(Revoked(WORKER, credential.id, "globex")), "not one of its tenants"
    assert not auth.forget_revoked(Revoked("twx", ident(acme), "acme"))
    assert not auth.forget_revoked(Revoked(KEY, "nope", "acme"))
    del tenants.keys[acme]
    assert await outcome(auth, Call(acme)) == "acme" and (tenants.reads, workers.reads) == reads, "still cached"

    # The right word: the next call is read and refused; the others stay cached.
    assert auth.forget_revoked(Revoked(KEY, ident(acme), "acme"))
    assert await outcome(auth, Call(acme)) == "unauthenticated" and tenants.reads == reads[0] + 1
    assert await outcome(auth, Call(globex)) == "globex" and tenants.reads == reads[0] + 1
    del workers.live[worker_secret]
    assert auth.forget_revoked(Revoked(WORKER, credential.id, "acme"))
    with pytest.raises(Unauthenticated):
        await auth.worker(Call(worker_secret))
    assert not auth.forget_revoked(Revoked(KEY, ident(acme), "acme")), "gone already"


async def test_the_index_follows_the_lru(monkeypatch) -> None:
    monkeypatch.setattr(auth_module, "CACHE_SIZE", 2)
    auth, tenants, _, _ = setup(peer_burst=1000)
    secrets = [tenants.issue(f"t{n}") for n in range(3)]
    for secret in secrets:
        await outcome(auth, Call(secret))
    assert auth.cached() == 2 and len(auth._ids) == 2, "the oldest left the cache and the index"
    assert not auth.forget_revoked(Revoked(KEY, ident(secrets[0]), "t0"))
    assert auth.forget_revoked(Revoked(KEY, ident(secrets[2]), "t2"))
    assert auth.cached() == 1 and len(auth._ids) == 1


@pytest.mark.parametrize("word", ["revoked", "tenant changed"])
async def test_a_verification_overtaken_by_a_word_is_not_cached(word: str) -> None:
    """The store answered (the key live, the tenant's old settings) before
    the revocation or the tenant's change committed, and the word arrived
    while that answer was on its way: it is used for this call but not
    cached, so the next call is read again."""
    auth, tenants, _, _ = setup(peer_burst=1000)
    secret = tenants.issue("acme")
    reading, release = asyncio.Event(), asyncio.Event()
    real = tenants.verify_key_until

    async def slow(value: str):
        reading.set()
        await release.wait()
        return await real(value)

    tenants.verify_key_until = slow
    call = asyncio.ensure_future(auth.tenant(Call(secret)))
    await reading.wait()
    # Nothing cached yet: it still counts.
    told = Revoked(KEY, ident(secret), "acme") if word == "revoked" else Revoked(TENANT_CHANGED, "", "acme")
    auth.forget_revoked(told)
    release.set()
    assert (await call) == Tenant(name="acme")
    tenants.verify_key_until = real
    if word == "revoked":
        del tenants.keys[secret]
        assert await outcome(auth, Call(secret)) == "unauthenticated"
    else:
        tenants.keys[secret] = Tenant(name="acme", requests_per_second=1)
        assert (await auth.tenant(Call(secret))).requests_per_second == 1


def test_a_put_round_trips_and_says_all_when_asked() -> None:
    entries = [Revoked(KEY, "abcDEF012_-x", "acme"), Revoked(WORKER, "Z" * 64, "a" + "-" * 62)]
    value = encode("srv-a:42", entries, False)
    assert decode(value) == ("srv-a:42", entries)
    assert decode(encode("srv-a:42", entries, True)) == ("srv-a:42", None)
    assert encode("s", [], True).endswith(ALL.encode())
    biggest = encode("s", [Revoked(KEY, "x" * 64, "a" * 63)] * DEFAULT_MAX_ENTRIES, False)
    assert len(biggest) <= DEFAULT_MAX_ENTRIES * (ENTRY_MAX + 1) + 400
    assert decode(biggest)[1] is not None


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"v1 s",  # no entry
        b"v2 s\ntwk abc acme",  # a newer format
        b"v1 s\ntwk abc",  # no tenant
        b"v1 s\ntwk abc acme extra",
        b"v1 s\ntwz abc acme",  # unknown kind
        b"v1 s\ntwk ab/c acme",  # not an id
        b"v1 s\ntwk abc Acme",  # not a tenant name
        b"v1 s\ntwk abc acme\n",  # an empty line
        b"v1 s\ntwk " + b"x" * 65 + b" acme",  # an id too long
        b"v1 s\ntwk abc \xff",  # not UTF-8
        b"v1 s\ntwk abc ac\x00me",
        b"v1 s\n" + b"\n".join([b"twk abc acme"] * (DEFAULT_MAX_ENTRIES + 1)),  # more entries than a put carries
        b"v1 s\ntwk abc acme" + b" " * 100_000,  # far too long: not even split
        b"v1 s\ntnt",  # a tenant word without its tenant
        b"v1 s\ntnt ",
        b"v1 s\ntnt acme extra",
        b"v1 s\ntnt acme ",
        b"v1 s\ntnt  acme",
        b"v1 s\ntnt Acme",
        b"v1 s\ntnt ac/me",
        b"v1 s\ntnt *",  # not a way to say "every tenant"
        b"v1 s\ntnt " + b"a" * 64,  # a tenant name too long
        b"v1 s\ntnt abc acme",  # a credential's shape with the tenant kind
        b"v1 s\ntwk acme",  # a tenant word's shape with a credential kind
        b"v1 s\ntnt acme\ntwk abc",  # one bad line spoils the put
    ],
)
def test_a_value_that_cannot_be_read_stands_for_every_credential(value: bytes) -> None:
    assert decode(value) == ("", None)


def test_a_tenant_word_round_trips_and_merges_with_credentials() -> None:
    longest = Revoked(TENANT_CHANGED, "", "a" * 63)
    entries = [Revoked(TENANT_CHANGED, "", "acme"), Revoked(KEY, "abc", "globex"), longest]
    value = encode("srv-b:7", entries, False)
    assert value == b"v1 srv-b:7\ntnt acme\ntwk abc globex\ntnt " + b"a" * 63
    assert decode(value) == ("srv-b:7", entries)


def test_a_server_older_than_the_tenant_word_takes_it_as_all() -> None:
    """The parser before the tenant word took a line as ``<kind> <id>
    <tenant>`` with a kind ``twk`` or ``tww``, and a put with any other line
    as "all" (``*``: cache emptied, streams re-verified). A tenant word's
    line fails both of its tests, so an older server does what ``*`` does."""
    line = encode("s", [Revoked(TENANT_CHANGED, "", "acme")], False).decode().split("\n")[1]
    kind = line.split(" ")[0]
    assert kind not in (KEY, WORKER) and line.count(" ") != 2
    assert decode(b"v1 s\ntwz abc acme") == ("", None), "today's parser on a kind it does not know"


async def test_a_tenant_word_evicts_that_tenants_keys_only() -> None:
    auth, tenants, workers, _ = setup(peer_burst=1000)
    first, second, other = tenants.issue("acme"), tenants.issue("acme"), tenants.issue("globex")
    worker_secret, _credential = workers.issue()  # serves acme
    for secret in (first, second, other):
        await outcome(auth, Call(secret))
    await auth.worker(Call(worker_secret))
    assert auth.cached() == 4
    reads = tenants.reads, workers.reads

    # Words naming no cached tenant evict nothing (nor does a credential's word with acme's name as its id).
    assert auth.forget_revoked(Revoked(TENANT_CHANGED, "", "initech")) == 0
    assert auth.forget_revoked(Revoked(KEY, "acme", "acme")) == 0
    assert auth.cached() == 4

    # acme's rate and payload quota lowered in the store: its keys read them on their next call.
    for secret in (first, second):
        tenants.keys[secret] = Tenant(name="acme", requests_per_second=1, max_payload_bytes=10)
    assert auth.forget_revoked(Revoked(TENANT_CHANGED, "", "acme")) == 2
    assert auth.cached() == 2 and "acme" not in auth._by_tenant
    for secret in (first, second):
        tenant = await auth.tenant(Call(secret))
        assert (tenant.requests_per_second, tenant.max_payload_bytes) == (1, 10)
    assert tenants.reads == reads[0] + 2, "acme's two keys read again"
    assert await outcome(auth, Call(other)) == "globex" and tenants.reads == reads[0] + 2, "globex still cached"
    await auth.worker(Call(worker_secret))
    assert workers.reads == reads[1], "a worker credential carries no tenant settings: still cached"
    assert auth.forget_revoked(Revoked(TENANT_CHANGED, "", "acme")) == 2, "cached again, and indexed again"


async def test_the_tenant_index_follows_the_cache(monkeypatch) -> None:
    monkeypatch.setattr(auth_module, "CACHE_SIZE", 2)
    auth, tenants, _, clock = setup(peer_burst=1000)
    secrets = [tenants.issue("acme") for _ in range(3)]
    for secret in secrets:
        await outcome(auth, Call(secret))
    assert auth._by_tenant == {"acme": set(secrets[1:])}, "the oldest left the cache and the index"
    assert auth.forget_revoked(Revoked(KEY, ident(secrets[1]), "acme")) == 1
    assert auth._by_tenant == {"acme": {secrets[2]}}
    clock.advance(auth.cache_ttl + 1)
    await outcome(auth, Call(secrets[2]))  # expired, read again: cached once, indexed once
    assert auth.cached() == 1 and auth._by_tenant == {"acme": {secrets[2]}}
    auth.forget()
    assert auth._by_tenant == {} and auth._ids == {}
