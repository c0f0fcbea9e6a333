"""One lease-store suite, run against the in-process store and a real etcd.

The memory store runs on a FakeClock that the tests advance; etcd runs on the
system clock with 1-2 s TTLs, and the tests await the event they expect (a
watch event, ``session.lost``) with a timeout instead of sleeping. The only
real-time waits are where elapsed time is the point (a session staying alive
across several TTLs) or where a test shows that something does *not* happen.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import TypeVar

import pytest

from tickwheel.shared.clock import Clock, FakeClock, SystemClock
from tickwheel_server.lease import (
    EventType,
    LeaseStore,
    LeaseStoreClosed,
    LeaseStoreUnavailable,
    SessionLost,
    WatchEvent,
    is_retryable,
    open_lease_store,
    parse_etcd_endpoints,
)
from tickwheel_server.lease.memory import MemoryLeaseStore

T = TypeVar("T")

TTL = 1  # requested; etcd may grant more (read session.ttl)


@dataclass
class Backend:
    name: str
    store: LeaseStore
    clock: Clock
    prefix: str

    @property
    def fake(self) -> FakeClock | None:
        return self.clock if isinstance(self.clock, FakeClock) else None

    def key(self, name: str) -> str:
        return self.prefix + name

    async def settle(self) -> None:
        """Let every task that can run, run (fake clock only matters)."""
        for _ in range(20):
            await asyncio.sleep(0)

    async def elapse(self, seconds: float, step: float = TTL / 6) -> None:
        """Let ``seconds`` of store time pass; fake time moves in small steps so
        keep-alives get their turn, as they would in real time."""
        fake = self.fake
        if fake is None:
            await asyncio.sleep(seconds)
            return
        for _ in range(math.ceil(seconds / step)):
            await self.settle()
            fake.advance(step)
        await self.settle()

    async def until(self, work: Awaitable[T], within: float) -> T:
        """``work``'s result, letting up to ``within`` seconds of store time pass
        (plus 3 s of slack on etcd for its expiry sweep); TimeoutError if it is
        not done by then."""
        task = asyncio.ensure_future(work)
        fake = self.fake
        if fake is None:
            return await asyncio.wait_for(task, within + 3)
        step = TTL / 6
        for _ in range(math.ceil(within / step) + 1):
            await self.settle()
            if task.done():
                return task.result()
            fake.advance(step)
        await self.settle()
        if task.done():
            return task.result()
        task.cancel()
        raise TimeoutError(f"not done within {within}s of fake time")

    async def still_pending(self, task: asyncio.Future[object]) -> bool:
        """True if ``task`` has not finished after a short while (nothing
        should finish it)."""
        if self.fake is None:
            done, _ = await asyncio.wait({task}, timeout=0.3)
        else:
            await self.elapse(0.2)
            done = {task} if task.done() else set()
        return not done


@pytest.fixture(params=["memory", pytest.param("etcd", marks=pytest.mark.etcd)])
async def backend(request: pytest.FixtureRequest, etcd_prefix: str) -> AsyncIterator[Backend]:
    clock: Clock
    if request.param == "memory":
        clock = FakeClock()
        store: LeaseStore = MemoryLeaseStore(clock)
    else:
        clock = SystemClock()
        store = open_lease_store(request.getfixturevalue("etcd_endpoint"), clock)
    try:
        yield Backend(request.param, store, clock, etcd_prefix)
    finally:
        await store.close()
    # Nothing of ours may outlive the store: keep-alives, watchdogs, watches.
    # (grpc.aio finishes its own bookkeeping tasks a moment later; not ours.)
    await asyncio.sleep(0)
    leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done() and _ours(t)]
    assert not leftovers, f"tasks left running after close: {leftovers}"


def _ours(task: asyncio.Task[object]) -> bool:
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and "tickwheel_server" in code.co_filename


async def next_event(events: AsyncIterator[WatchEvent], timeout: float = 5) -> WatchEvent:
    return await asyncio.wait_for(anext(events), timeout)


# --------------------------------------------------------------------------- keys


async def test_put_get_delete(backend: Backend) -> None:
    store, key = backend.store, backend.key("a")
    assert await store.get(key) is None
    rev1 = await store.put(key, b"one")
    kv = await store.get(key)
    assert kv is not None
    assert (kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease) == (key, b"one", rev1, rev1, 1, 0)
    rev2 = await store.put(key, "two")
    assert rev2 > rev1
    kv = await store.get(key)
    assert kv is not None and (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"two", rev1, rev2, 2)
    assert await store.current_revision() == rev2
    assert await store.delete(key) is True
    assert await store.delete(key) is False
    assert await store.get(key) is None
    assert await store.current_revision() > rev2


async def test_get_prefix_is_sorted_and_bounded(backend: Backend) -> None:
    store = backend.store
    for name in ["b", "a", "c/d"]:
        await store.put(backend.key(name), name)
    await store.put(backend.prefix.rstrip("/") + "-sibling", b"x")  # shares the prefix minus its slash
    found = await store.get_prefix(backend.prefix)
    assert [kv.key for kv in found] == [backend.key("a"), backend.key("b"), backend.key("c/d")]
    assert await store.get_prefix(backend.key("zzz")) == []
    await store.delete(backend.prefix.rstrip("/") + "-sibling")


async def test_bad_arguments_are_refused_before_any_write(backend: Backend) -> None:
    with pytest.raises(ValueError):
        await backend.store.put("", b"x")
    with pytest.raises(TypeError):
        await backend.store.put(backend.key("a"), 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await backend.store.open_session(0)
    assert await backend.store.get_prefix(backend.prefix) == []


# --------------------------------------------------------------------------- sessions


async def test_session_close_deletes_its_keys_only(backend: Backend) -> None:
    store = backend.store
    session = await store.open_session(TTL)
    assert session.id != 0 and session.ttl >= TTL
    await store.put(backend.key("leased"), b"1", session=session)
    await store.put(backend.key("plain"), b"2")
    kv = await store.get(backend.key("leased"))
    assert kv is not None and kv.lease == session.id

    await session.close()
    assert session.lost.is_set() and session.lost_reason == "closed"
    assert await store.get(backend.key("leased")) is None
    assert await store.get(backend.key("plain")) is not None
    await session.close()  # idempotent
    with pytest.raises(SessionLost):
        await store.put(backend.key("again"), b"x", session=session)


async def test_a_close_cancelled_before_its_revoke_leaves_it_to_the_next_close(backend: Backend) -> None:
    """A stop or a failed start cancels the session loop while it closes a
    lost session: the revoke it had not done yet is not dropped, the next
    close does it (keys gone at once, not a TTL later)."""
    store = backend.store
    session = await store.open_session(TTL)
    await store.put(backend.key("leased"), b"1", session=session)
    closing = asyncio.ensure_future(session.close())
    await asyncio.sleep(0)  # it stopped the renewals and waits for them to end
    closing.cancel()
    await asyncio.gather(closing, return_exceptions=True)
    assert closing.cancelled() and session.closed and session.lost.is_set()
    assert await store.get(backend.key("leased")) is not None, "the cancelled close revoked already: no test"
    await session.close()
    assert await store.get(backend.key("leased")) is None
    await session.close()  # done: idempotent


async def test_ttl_expiry_really_deletes_keys(backend: Backend) -> None:
    store, key = backend.store, backend.key("ephemeral")
    session = await store.open_session(TTL, keepalive=False)
    await store.put(key, b"v", session=session)
    async with store.watch(key) as events:
        event = await backend.until(anext(events), within=session.ttl + 1)
    assert (event.type, event.key) == (EventType.DELETE, key)
    assert session.lost.is_set()
    assert await store.get(key) is None
    with pytest.raises(SessionLost):
        await store.put(key, b"again", session=session)
    await session.close()


async def test_keepalive_keeps_a_session_alive_past_several_ttls(backend: Backend) -> None:
    store, key = backend.store, backend.key("kept")
    session = await store.open_session(TTL)
    await store.put(key, b"v", session=session)
    await backend.elapse(3 * session.ttl + 0.5)
    assert not session.lost.is_set(), session.lost_reason
    kv = await store.get(key)
    assert kv is not None and kv.lease == session.id
    await session.close()


async def test_a_session_is_surely_alive_only_while_renewed_in_time(backend: Backend) -> None:
    store = backend.store
    kept = await store.open_session(TTL)
    first = kept.alive_until
    assert kept.surely_alive() and 0 < kept.alive_for() <= kept.ttl
    await backend.elapse(3 * kept.ttl + 0.5)
    assert kept.surely_alive() and kept.alive_until > first  # each renewal moved it on
    unrenewed = await store.open_session(TTL, keepalive=False)
    assert unrenewed.surely_alive() and not unrenewed.surely_alive(margin=unrenewed.ttl)
    await backend.until(unrenewed.lost.wait(), within=unrenewed.ttl + 1)
    assert not unrenewed.surely_alive() and unrenewed.alive_for() == 0
    await kept.close()
    assert not kept.surely_alive()
    await unrenewed.close()


async def test_lost_cancels_bound_work(backend: Backend) -> None:
    session = await backend.store.open_session(TTL, keepalive=False)
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.ensure_future(session.run_bound(work()))
    await started.wait()
    with pytest.raises(SessionLost):
        await backend.until(task, within=session.ttl + 1)
    assert cancelled.is_set()
    assert session.lost_reason
    await session.close()


async def test_lost_cancels_a_task_group_in_scope(backend: Backend) -> None:
    session = await backend.store.open_session(TTL, keepalive=False)
    children_cancelled = 0

    async def child() -> None:
        nonlocal children_cancelled
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            children_cancelled += 1
            raise

    async def holder() -> None:
        async with session.scope():
            async with asyncio.TaskGroup() as group:
                group.create_task(child())
                group.create_task(child())

    with pytest.raises(SessionLost):
        await backend.until(holder(), within=session.ttl + 1)
    assert children_cancelled == 2
    with pytest.raises(SessionLost):  # a lost session admits no new scope
        async with session.scope():
            pass
    await session.close()


async def test_scope_lets_other_cancellation_through(backend: Backend) -> None:
    session = await backend.store.open_session(TTL)
    entered = asyncio.Event()

    async def holder() -> None:
        async with session.scope():
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(holder())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not session.lost.is_set()
    assert await session.run_bound(asyncio.sleep(0, result="done")) == "done"
    await session.close()


# --------------------------------------------------------------------------- elections


@pytest.mark.parametrize("first_ends_by", ["close", "expiry"])
async def test_second_candidate_wins_only_after_first_session_ends(backend: Backend, first_ends_by: str) -> None:
    store, key = backend.store, backend.key("leader")
    first = await store.open_session(TTL, keepalive=(first_ends_by == "close"))
    second = await store.open_session(TTL)
    mine = await store.try_acquire(key, b"first", first)
    assert mine is not None and mine.session is first
    assert await store.try_acquire(key, b"second", second) is None

    waiting = asyncio.ensure_future(store.wait_acquire(key, b"second", second))
    if first_ends_by == "close":
        assert await backend.still_pending(waiting)
        kv = await store.get(key)
        assert kv is not None and kv.value == b"first"
        await first.close()
    theirs = await backend.until(waiting, within=first.ttl + 1)
    assert first.lost.is_set()
    assert theirs.session is second and theirs.fencing_revision > mine.fencing_revision
    kv = await store.get(key)
    assert kv is not None and (kv.value, kv.lease, kv.create_revision) == (b"second", second.id, theirs.fencing_revision)
    assert await store.is_owner(theirs) and not await store.is_owner(mine)
    await first.close()
    await second.close()


async def test_fencing_revisions_strictly_increase_across_owners(backend: Backend) -> None:
    store, key = backend.store, backend.key("partition-7")
    revisions = []
    stale = None
    for round_ in range(4):
        session = await store.open_session(TTL)
        await store.put(backend.key(f"noise-{round_}"), b"x")  # unrelated writes in between
        ownership = await store.try_acquire(key, f"owner-{round_}", session)
        assert ownership is not None
        revisions.append(ownership.fencing_revision)
        if stale is not None:
            # a deposed owner can neither resign nor be mistaken for the owner
            assert not await store.resign(stale)
            assert not await store.is_owner(stale)
            assert await store.is_owner(ownership)
        if round_ % 2:
            assert await store.resign(ownership)  # the session stays usable
            assert not session.lost.is_set()
            again = await store.try_acquire(key, b"again", session)
            assert again is not None and again.fencing_revision > ownership.fencing_revision
            revisions.append(again.fencing_revision)
            ownership = again
        await session.close()
        stale = ownership
    assert revisions == sorted(set(revisions)), revisions


async def test_try_acquire_adopts_a_key_held_by_the_same_session(backend: Backend) -> None:
    store, key = backend.store, backend.key("adopt")
    session = await store.open_session(TTL)
    first = await store.try_acquire(key, b"v", session)
    retried = await store.try_acquire(key, b"v", session)  # e.g. after an ambiguous timeout
    assert first is not None and retried is not None
    assert retried.fencing_revision == first.fencing_revision
    await session.close()


async def test_wait_acquire_raises_session_lost_when_its_own_session_goes(backend: Backend) -> None:
    store, key = backend.store, backend.key("contended")
    holder = await store.open_session(TTL)
    assert await store.try_acquire(key, b"holder", holder) is not None
    doomed = await store.open_session(TTL, keepalive=False)
    with pytest.raises(SessionLost):
        await backend.until(store.wait_acquire(key, b"doomed", doomed), within=doomed.ttl + 1)
    kv = await store.get(key)
    assert kv is not None and kv.value == b"holder"
    with pytest.raises(SessionLost):
        await store.try_acquire(key, b"doomed", doomed)
    await doomed.close()
    await holder.close()


# --------------------------------------------------------------------------- watches


async def test_watch_sees_puts_and_deletes_in_order(backend: Backend) -> None:
    store = backend.store
    async with store.watch(backend.prefix, prefix=True) as events:
        r1 = await store.put(backend.key("a"), b"1")
        r2 = await store.put(backend.key("a"), b"2")
        r3 = await store.put(backend.key("b/c"), b"3")
        await store.delete(backend.key("a"))
        seen = [await next_event(events) for _ in range(4)]
    assert [(e.type, e.key, e.value) for e in seen] == [
        (EventType.PUT, backend.key("a"), b"1"),
        (EventType.PUT, backend.key("a"), b"2"),
        (EventType.PUT, backend.key("b/c"), b"3"),
        (EventType.DELETE, backend.key("a"), b""),
    ]
    assert [e.revision for e in seen[:3]] == [r1, r2, r3] and seen[3].revision > r3
    assert seen[1].create_revision == r1


async def test_key_watch_ignores_other_keys(backend: Backend) -> None:
    store = backend.store
    async with store.watch(backend.key("a")) as events:
        await store.put(backend.key("ab"), b"no")
        await store.put(backend.key("b"), b"no")
        await store.put(backend.key("a"), b"yes")
        event = await next_event(events)
    assert (event.key, event.value) == (backend.key("a"), b"yes")


async def test_watch_from_a_past_revision_replays_history(backend: Backend) -> None:
    store = backend.store
    start = await store.current_revision() + 1
    await store.put(backend.key("x"), b"1")
    await store.delete(backend.key("x"))
    async with store.watch(backend.key("x"), start_revision=start) as events:
        first, second = await next_event(events), await next_event(events)
    assert (first.type, second.type) == (EventType.PUT, EventType.DELETE)
    assert first.revision == start


async def test_session_end_deletes_appear_in_watch(backend: Backend) -> None:
    store = backend.store
    session = await store.open_session(TTL)
    await store.put(backend.key("s/1"), b"1", session=session)
    await store.put(backend.key("s/2"), b"2", session=session)
    async with store.watch(backend.key("s/"), prefix=True) as events:
        await session.close()
        deletes = [await next_event(events), await next_event(events)]
    assert {e.key for e in deletes} == {backend.key("s/1"), backend.key("s/2")}
    assert {e.type for e in deletes} == {EventType.DELETE}
    assert deletes[0].revision == deletes[1].revision  # one revocation, one revision


async def test_closing_the_store_ends_watches_and_sessions(backend: Backend) -> None:
    store = backend.store
    session = await store.open_session(TTL)
    await store.put(backend.key("k"), b"v", session=session)
    events = store.watch(backend.prefix, prefix=True)
    await events.start()
    reader = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0)
    await store.close()
    assert session.lost.is_set()
    with pytest.raises(LeaseStoreClosed):
        await asyncio.wait_for(reader, 5)
    with pytest.raises(LeaseStoreClosed):
        await store.get(backend.key("k"))
    await events.aclose()


# --------------------------------------------------------------------------- memory only


async def test_memory_frozen_past_ttl_expires_even_with_keepalive() -> None:
    clock = FakeClock()
    store = MemoryLeaseStore(clock)
    session = await store.open_session(3)
    await store.put("k", b"v", session=session)
    clock.advance(2.9)  # shorter than the TTL: the keep-alive catches up
    await asyncio.wait_for(asyncio.sleep(0.01), 1)
    assert not session.lost.is_set()
    clock.advance(3.5)  # a process frozen longer than the TTL loses its lease
    await asyncio.wait_for(session.lost.wait(), 1)
    assert await store.get("k") is None
    await store.close()


async def test_memory_frozen_past_ttl_is_in_doubt_before_any_task_runs() -> None:
    # A process woken from SIGSTOP may run any task first: the holder's own
    # check must not wait for the task that sets ``lost``.
    clock = FakeClock()
    store = MemoryLeaseStore(clock)
    session = await store.open_session(3)
    await asyncio.sleep(0)  # its keep-alive task waits for its first renewal
    clock.freeze(2.9)
    assert session.surely_alive() and not session.surely_alive(margin=0.2)
    clock.freeze(0.2)
    assert not session.lost.is_set() and not session.surely_alive()
    clock.advance(0)
    await asyncio.wait_for(session.lost.wait(), 1)
    await store.close()


async def test_memory_loss_noticed_by_the_holder_itself_leaves_no_stray_cancel() -> None:
    clock = FakeClock()
    store = MemoryLeaseStore(clock)
    session = await store.open_session(2, keepalive=False)

    async def holder() -> str:
        with pytest.raises(SessionLost):
            async with session.scope():  # nested scopes, as a holder inside wait_acquire would be
                async with session.scope():
                    clock.advance(5)  # the holder's own next call finds its lease expired
                    await store.put("k", b"v", session=session)
        await asyncio.sleep(0)  # no cancellation may be left pending for the task
        return "carried on"

    assert await asyncio.wait_for(holder(), 1) == "carried on"
    await store.close()


async def test_memory_watch_history_is_bounded() -> None:
    from tickwheel_server.lease import WatchCompacted

    store = MemoryLeaseStore(FakeClock(), history_limit=3)
    for i in range(5):
        await store.put("k", str(i))
    with pytest.raises(WatchCompacted):
        async with store.watch("k", start_revision=2):
            pass
    async with store.watch("k", start_revision=await store.current_revision()) as events:
        assert (await next_event(events)).value == b"4"
    await store.close()


# --------------------------------------------------------------------------- etcd only


@pytest.mark.etcd
async def test_etcd_unreachable_is_retryable_unavailable() -> None:
    store = open_lease_store("127.0.0.1:1", SystemClock(), request_timeout=2)
    try:
        with pytest.raises(LeaseStoreUnavailable) as caught:
            await asyncio.wait_for(store.current_revision(), 10)
        assert is_retryable(caught.value)
        with pytest.raises(LeaseStoreUnavailable):
            await asyncio.wait_for(store.open_session(TTL), 10)
    finally:
        await store.close()


@pytest.mark.etcd
async def test_etcd_fails_over_to_the_next_endpoint(etcd_endpoint: str, etcd_prefix: str) -> None:
    store = open_lease_store(f"etcd://127.0.0.1:1,{etcd_endpoint}", SystemClock())
    try:
        session = await asyncio.wait_for(store.open_session(TTL), 10)
        await store.put(etcd_prefix + "k", b"v", session=session)
        assert (await store.get(etcd_prefix + "k")) is not None
        await session.close()
    finally:
        await store.close()


# --------------------------------------------------------------------------- spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("127.0.0.1:2379", ["127.0.0.1:2379"]),
        ("etcd://a:1,b:2", ["a:1", "b:2"]),
        (" http://a:1/, http://b:2 ", ["a:1", "b:2"]),
        ("[::1]:2379", ["[::1]:2379"]),
    ],
)
def test_parse_etcd_endpoints(spec: str, expected: list[str]) -> None:
    assert parse_etcd_endpoints(spec) == expected


@pytest.mark.parametrize("spec", ["", "etcd://", "host", "host:", ":2379", "a:0", "a:70000", "a:1,", "https://a:1", "::1:2379", "a:x"])
def test_bad_specs_are_refused_with_a_reason(spec: str) -> None:
    with pytest.raises(ValueError, match="etcd endpoint"):
        open_lease_store(spec, SystemClock())


def test_open_lease_store_memory() -> None:
    assert isinstance(open_lease_store("memory", FakeClock()), MemoryLeaseStore)


@pytest.mark.etcd
async def test_an_etcd_keepalive_that_dies_of_its_own_error_is_logged_and_the_session_then_lost(
    etcd_endpoint: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the renewals must not pass in silence: the error is logged
    at once, and the watchdog still sets ``lost`` within the TTL."""
    from tickwheel_server.lease.etcd_session import EtcdSession

    async def broken(self: EtcdSession) -> None:
        raise RuntimeError("a bug in the renewals")

    monkeypatch.setattr(EtcdSession, "_keepalive", broken)
    store = open_lease_store(etcd_endpoint, SystemClock())
    try:
        with caplog.at_level("ERROR", logger="tickwheel_server.lease.etcd_session"):
            session = await store.open_session(1)
            await asyncio.sleep(0.05)
            logged = [r for r in caplog.records if "renewals stopped" in r.getMessage()]
            assert logged and "a bug in the renewals" in str(logged[0].exc_info[1])
            await asyncio.wait_for(session.lost.wait(), 5)
    finally:
        await store.close()
