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
from tickwheel_server.auth.authenticator import Revoked
from tickwheel_server.cluster.revocations import ALL, DEFAULT_MAX_ENTRIES, ENTRY_MAX, decode, encode
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


async def test_a_verification_overtaken_by_a_word_is_not_cached() -> None:
    """The store answered "live" before the revocation committed, and the
    word arrived while that answer was on its way: it is used for this call
    but not cached, so the next call is read again."""
    auth, tenants, _, _ = setup(peer_burst=1000)
    secret = tenants.issue("acme")
    reading, release = asyncio.Event(), asyncio.Event()
    real = tenants.verify_key_until

    async def slow(value: str):
        reading.set()
        await release.wait()
        return await real(value)

    tenants.verify_key_until = slow
    call = asyncio.ensure_future(outcome(auth, Call(secret)))
    await reading.wait()
    auth.forget_revoked(Revoked(KEY, ident(secret), "acme"))  # nothing cached yet: it still counts
    release.set()
    assert await call == "acme"
    tenants.verify_key_until = real
    del tenants.keys[secret]
    assert await outcome(auth, Call(secret)) == "unauthenticated"


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
    ],
)
def test_a_value_that_cannot_be_read_stands_for_every_credential(value: bytes) -> None:
    assert decode(value) == ("", None)
