"""Revocations told through the lease store (:mod:`tickwheel_server.cluster.revocations`),
on the in-process store and on a real etcd: a revocation announced on one
server reaches the others' caches and streams, not its own; a flood of them
is a bounded number of puts on one key; a value no server can read empties
every cache; and a watch established again (a store error, a compaction
past it) empties the cache too and keeps following."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

from tickwheel_server.auth import tokens
from tickwheel_server.auth.authenticator import TENANT_CHANGED, Revoked
from tickwheel_server.cluster.revocations import ALL, PUT_OVERHEAD, Revocations
from tickwheel_server.lease import LeaseStoreUnavailable, Watch

from tests.conformance import test_lease_store as lease_suite
from tests.conformance.test_lease_store import Backend

backend = lease_suite.backend
"""The lease store suite's fixture: the in-process store on a FakeClock, and etcd."""

KEY, WORKER = tokens.API_KEY_PREFIX, tokens.WORKER_CREDENTIAL_PREFIX


class FlakyWatch(Watch):
    """A watch of the real store that fails once when told (a cut the
    store's own reconnection did not ride out)."""

    def __init__(self, inner: Watch, leases: "FlakyLeases") -> None:
        self._inner, self._leases = inner, leases

    async def start(self) -> None:
        if self._leases.broken.is_set():
            raise LeaseStoreUnavailable("cut by the test")
        await self._inner.start()

    async def __anext__(self):
        if self._leases.broken.is_set():
            raise LeaseStoreUnavailable("cut by the test")
        next_event = asyncio.ensure_future(anext(self._inner))
        broken = asyncio.ensure_future(self._leases.broken.wait())
        try:
            done, _ = await asyncio.wait({next_event, broken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (next_event, broken):
                if not task.done():
                    task.cancel()
            await asyncio.gather(next_event, broken, return_exceptions=True)
        if next_event in done:
            return next_event.result()
        raise LeaseStoreUnavailable("cut by the test")

    async def aclose(self) -> None:
        await self._inner.aclose()


class FlakyLeases:
    """The backend's store, whose watches fail while :attr:`broken` is set."""

    def __init__(self, store) -> None:
        self._store = store
        self.broken = asyncio.Event()
        self.watches_opened = 0

    def watch(self, key: str, *, prefix: bool = False, start_revision: int | None = None) -> Watch:
        self.watches_opened += 1
        return FlakyWatch(self._store.watch(key, prefix=prefix, start_revision=start_revision), self)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


class Server:
    """One server's side: what its authenticator and streams are told."""

    def __init__(self, backend: Backend, name: str, leases=None, **options) -> None:
        self.forgotten: list[Revoked] = []
        self.cleared = 0
        self.rechecked: list[Collection[str] | None] = []
        self.told = asyncio.Event()
        self.revocations = Revocations(
            leases or backend.store, backend.clock, server_id=name, forget=self._forget, forget_all=self._clear,
            recheck=self._recheck, root=backend.prefix, **{"max_entries": 4, **options},
        )

    def _forget(self, revoked: Revoked) -> bool:
        self.forgotten.append(revoked)
        self.told.set()
        return True

    def _clear(self) -> None:
        self.cleared += 1
        self.told.set()

    async def _recheck(self, ids: Collection[str] | None) -> int:
        self.rechecked.append(None if ids is None else set(ids))
        return 0


@asynccontextmanager
async def servers(backend: Backend, names: list[str], leases=None, **options) -> AsyncIterator[list[Server]]:
    started = [Server(backend, name, leases, **options) for name in names]
    tasks = [asyncio.create_task(server.revocations.run()) for server in started]
    try:
        for server in started:
            await backend.until(server.revocations.following.wait(), 5)
            await backend.settle()
            server.told.clear()
        yield started
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def told(backend: Backend, server: Server) -> None:
    await backend.until(server.told.wait(), 5)
    await backend.settle()
    server.told.clear()


async def test_a_revocation_reaches_the_others_and_not_its_sender(backend: Backend) -> None:
    async with servers(backend, ["a", "b", "c"]) as (a, b, c):
        assert [s.cleared for s in (a, b, c)] == [1, 1, 1], "a watch established empties the cache once"
        before = await backend.store.current_revision()
        key = Revoked(KEY, "k1", "acme")
        assert await backend.until(a.revocations.announce(key), 5) is True, "answered once the put landed"
        await told(backend, b)
        await told(backend, c)
        assert b.forgotten == c.forgotten == [key] and a.forgotten == []
        assert await backend.store.current_revision() == before + 1 and a.revocations.puts == 1
        assert b.rechecked == [None], "an API key re-verifies no stream (the None is the watch's start)"

        worker = Revoked(WORKER, "w1", "acme")
        await backend.until(c.revocations.announce(worker), 5)
        await told(backend, b)
        await backend.until(_rechecked(backend, b, 2), 5)
        assert b.forgotten == [key, worker] and b.rechecked == [None, {"w1"}], "the credential's streams, one read"
        assert c.rechecked == [None] and c.forgotten == [key]
        kv = await backend.store.get(a.revocations.key)
        assert kv is not None and kv.lease == 0 and kv.value.startswith(b"v1 c\n")
        assert [k.key for k in await backend.store.get_prefix(backend.prefix)] == [a.revocations.key], "one key"


async def _rechecked(backend: Backend, server: Server, count: int) -> None:
    while len(server.rechecked) < count:
        await backend.elapse(0.01)


async def test_a_tenants_change_reaches_the_others_merged_under_the_same_rules(backend: Backend) -> None:
    """A tenant's word rides the same key and puts: merged with the
    revocations made meanwhile (the same tenant twice is one entry), no
    stream re-verified for it, and more entries than a put carries say all."""
    async with servers(backend, ["a", "b"]) as (a, b):
        before = await backend.store.current_revision()
        acme = Revoked(TENANT_CHANGED, "", "acme")
        key = Revoked(KEY, "acme", "acme")  # a key whose id is the tenant's name: another entry
        answers = await backend.until(asyncio.gather(*(a.revocations.announce(w) for w in (acme, acme, key))), 5)
        assert all(answers) and a.revocations.puts == 1
        await told(backend, b)
        assert b.forgotten == [acme, key] and a.forgotten == []
        kv = await backend.store.get(a.revocations.key)
        assert kv.value == b"v1 a\ntnt acme\ntwk acme acme"
        assert await backend.store.current_revision() == before + 1
        await backend.settle()
        assert b.rechecked == [None] and b.cleared == 1, "a tenant's settings end no stream and empty no cache"

        many = [Revoked(TENANT_CHANGED, "", f"t{n}") for n in range(5)]  # max 4 entries a put
        assert all(await backend.until(asyncio.gather(*(a.revocations.announce(w) for w in many)), 5))
        await told(backend, b)
        assert b.cleared == 2 and b.forgotten == [acme, key], "said as all"


async def test_a_flood_of_revocations_is_a_few_small_puts_on_one_key(backend: Backend) -> None:
    """500 revocations at once (max 4 entries a put): one put saying "all",
    not 500, and each announcer answered once it landed."""
    async with servers(backend, ["a", "b"]) as (a, b):
        before = await backend.store.current_revision()
        flood = [Revoked(KEY, f"k{n}", "acme") for n in range(500)]
        answers = await backend.until(asyncio.gather(*(a.revocations.announce(r) for r in flood)), 10)
        assert all(answers)
        await told(backend, b)
        assert a.revocations.puts == 1, "every announcement was made before the sender ran: one put"
        assert await backend.store.current_revision() == before + 1
        kv = await backend.store.get(a.revocations.key)
        assert kv.value.endswith(ALL.encode()) and len(kv.value) < 20
        assert b.cleared == 2 and b.forgotten == [] and b.revocations.received == a.revocations.puts
        await backend.until(_rechecked(backend, b, 2), 5)
        assert b.rechecked == [None, None], "every stream re-verified, in one read"


async def test_what_a_server_adds_to_etcds_history_is_budgeted_in_bytes(backend: Backend) -> None:
    """One revocation after another goes out at once while the budget
    lasts, then at the rate; the bytes put never exceed the burst plus the
    rate over the time taken (the store's clock)."""
    rate, burst = 4000.0, 1000.0
    async with servers(backend, ["a"], rate=rate, burst=burst) as [a]:
        began = backend.clock.monotonic()
        sizes = []
        for n in range(12):
            assert await backend.until(a.revocations.announce(Revoked(KEY, f"k{n}", "acme")), 5)
            kv = await backend.store.get(a.revocations.key)
            sizes.append(len(kv.value) + PUT_OVERHEAD)
        took = backend.clock.monotonic() - began
        assert a.revocations.puts == 12, "one put each: nothing was pending meanwhile to merge"
        assert sum(sizes) <= burst + rate * took + max(sizes)
        assert sum(sizes) > burst, "the budget was used up, so the rate held some back"


async def test_a_value_no_server_can_read_empties_every_cache(backend: Backend) -> None:
    async with servers(backend, ["a", "b"]) as (a, b):
        await backend.store.put(a.revocations.key, b"v1 x\ntwk k1 Not-A-Tenant")
        await told(backend, a)
        await told(backend, b)
        assert a.cleared == b.cleared == 2 and a.forgotten == b.forgotten == []
        # A well-formed word naming a credential is an eviction only (the store decides the rest).
        await backend.store.put(a.revocations.key, b"v1 x\ntww w9 globex")
        await told(backend, a)
        assert a.forgotten == [Revoked(WORKER, "w9", "globex")] and a.cleared == 2


async def test_a_watch_established_again_empties_the_cache_and_follows_on(backend: Backend) -> None:
    leases = FlakyLeases(backend.store)
    async with servers(backend, ["a"], leases) as [a]:
        async with servers(backend, ["b"]) as [b]:
            await backend.until(b.revocations.announce(Revoked(KEY, "k0", "acme")), 5)
            await told(backend, a)
            assert a.forgotten == [Revoked(KEY, "k0", "acme")] and a.cleared == 1
            leases.broken.set()  # a's watch fails, and cannot be established again until the cut ends
            await backend.elapse(0.1)
            await backend.until(b.revocations.announce(Revoked(KEY, "k1", "acme")), 5)
            # Compacted past where a's watch would resume (k1's revision): it starts from now.
            await backend.store.put(backend.key("filler"), b"x")
            await backend.store.compact(await backend.store.current_revision())
            leases.broken.clear()
            await backend.until(_followed_on(backend, a, b), 10)
            assert a.revocations.compactions == 1, "a's watch resumed from k1 and found it compacted"
            assert Revoked(KEY, "k1", "acme") not in a.forgotten, "the put made meanwhile was compacted away"
            assert a.cleared >= 2, "the cache was emptied instead, when the watch was established again"
            assert a.rechecked.count(None) >= 2, "and every stream re-verified"


async def _followed_on(backend: Backend, a: Server, b: Server) -> None:
    """Until a sees b's puts again (those made before its watch is
    established again are not delivered: its emptied cache covers them)."""
    tries = 0
    while not any(r.credential_id.startswith("k2-") for r in a.forgotten):
        tries += 1
        await b.revocations.announce(Revoked(KEY, f"k2-{tries}", "acme"))
        await backend.elapse(0.05)


async def test_a_put_the_store_refuses_or_holds_answers_false(backend: Backend) -> None:
    """The revoking call is not held up by a lease store it cannot reach:
    a refused put answers False at once, one that hangs after ``wait``."""
    async with servers(backend, ["a"]) as [a]:
        async def refused(*_args, **_kwargs):
            raise LeaseStoreUnavailable("cut by the test")

        a.revocations._leases = type("Refusing", (), {"put": staticmethod(refused)})()
        assert await backend.until(a.revocations.announce(Revoked(KEY, "k1", "acme")), 5) is False
        assert a.revocations.failed_puts == 1

        async def held(*_args, **_kwargs):
            await asyncio.Event().wait()

        a.revocations._leases = type("Holding", (), {"put": staticmethod(held)})()
        a.revocations._wait = 0.2  # seconds of the event loop, whatever the store's clock
        assert await asyncio.wait_for(a.revocations.announce(Revoked(KEY, "k2", "acme")), 5) is False
