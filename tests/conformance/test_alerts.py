"""The alert store and its change feed, on SQLite and PostgreSQL.

"Another server" is another :class:`AlertStore` over the same database: it
shares nothing in process with the first, as a second server would not.
Watches run on a :class:`FakeClock` that only moves when told, so a change
that arrives without the test moving the clock arrived by an in-process
wake-up, not by a poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
import pytest
import sqlalchemy as sa
from sqlalchemy import event

from tickwheel.shared.clock import FakeClock, SystemClock
from tickwheel_server.store import run_in_transaction
from tickwheel_server.alerts.catalogue import AlertRecord, NewAlert, clock_skew_key, dead_letter_alert, poison_alert
from tickwheel_server.alerts.watch import AlertWatch
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.gauges import GaugeStore
from tickwheel_server.store.tables import alert_feed, alerts, tenants
from tickwheel_server.store.tenants import Tenant, TenantStore

WAIT = 20.0


def skew(server: str = "s1", severity: str = "warning", summary: str = "clock 300 ms ahead", **details) -> NewAlert:
    return NewAlert(clock_skew_key(server), "clock_skew", severity, summary, server_id=server, details=details)


def dead(execution: str, tenant: str = "acme") -> NewAlert:
    return dead_letter_alert(execution_id=execution, job_id="job_1", tenant=tenant, reason="failed permanently")


@pytest.fixture
def store(migrated_engine, clock) -> AlertStore:
    return AlertStore(migrated_engine, clock)


class Watch:
    """A watch consumed by a task into a queue; ``close`` stops it."""

    def __init__(self, iterator: AsyncIterator[AlertRecord]) -> None:
        self.queue: asyncio.Queue[AlertRecord] = asyncio.Queue()
        self.ended = asyncio.Event()
        self._task = asyncio.create_task(self._consume(iterator))

    async def _consume(self, iterator: AsyncIterator[AlertRecord]) -> None:
        try:
            async for alert in iterator:
                await self.queue.put(alert)
        finally:
            self.ended.set()

    async def next(self, *, poll: FakeClock | None = None, interval: float = 1.0) -> AlertRecord:
        """The next alert; with ``poll``, that clock is moved a poll interval
        at a time until one arrives (the watcher may not be asleep yet)."""

        async def get() -> AlertRecord:
            while True:
                if poll is not None:
                    poll.advance(interval)
                try:
                    return await asyncio.wait_for(self.queue.get(), 0.05 if poll is not None else WAIT)
                except asyncio.TimeoutError:
                    if poll is None:
                        raise

        return await asyncio.wait_for(get(), WAIT)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def started(alerts: AlertWatch, sentinel: NewAlert, **filters) -> Watch:
    """A watch with ``include_open`` whose first alert is ``sentinel`` (raised
    first): once it has arrived, the watch follows changes from there on."""
    await alerts.store.raise_alert(sentinel)
    watch = Watch(alerts.watch(include_open=True, **filters))
    first = await watch.next()
    assert first.key == sentinel.key
    return watch


# --- raising and resolving ------------------------------------------------------------------


async def test_raising_an_open_alert_again_bumps_it_and_keeps_its_id(store: AlertStore, clock: FakeClock) -> None:
    first = await store.raise_alert(skew(severity="warning", summary="clock 300 ms ahead", skew_ms="300"))
    raised_at = clock.now()
    clock.advance(30)
    again = await store.raise_alert(skew(severity="critical", summary="clock 900 ms ahead", skew_ms="900"))
    assert again.id == first.id and first.id.startswith("alr_")
    assert (again.count, again.raised_at, again.last_seen_at) == (2, raised_at, clock.now())
    assert (again.severity, again.summary, again.details) == ("critical", "clock 900 ms ahead", {"skew_ms": "900"})
    assert (again.kind, again.server_id, again.open) == ("clock_skew", "s1", True)
    assert await store.get(clock_skew_key("s1")) == again


async def test_resolving_then_raising_opens_a_new_alert(store: AlertStore, clock: FakeClock) -> None:
    first = await store.raise_alert(skew())
    clock.advance(5)
    resolved = await store.resolve(clock_skew_key("s1"))
    assert resolved is not None and (resolved.id, resolved.resolved_at) == (first.id, clock.now())
    assert await store.resolve(clock_skew_key("s1")) is None  # nothing open
    assert await store.get(clock_skew_key("s1")) is None
    clock.advance(5)
    reopened = await store.raise_alert(skew())
    assert reopened.id != first.id and (reopened.count, reopened.raised_at) == (1, clock.now())
    everything = (await store.list(include_resolved=True)).alerts
    assert [(a.id, a.open) for a in everything] == [(reopened.id, True), (first.id, False)]


async def test_raise_in_commits_or_rolls_back_with_the_callers_transaction(store: AlertStore, migrated_engine) -> None:
    await TenantStore(migrated_engine, store.clock).create(Tenant(name="acme"))

    def change_and_raise(fail: bool):
        def fn(conn):
            conn.execute(tenants.update().where(tenants.c.name == "acme").values(pause_reason="alerted"))
            raised = store.raise_in(conn, dead("e1"))
            if fail:
                raise RuntimeError("the caller's transaction fails after raising")
            return raised

        return fn

    with pytest.raises(RuntimeError):
        run_in_transaction(migrated_engine, change_and_raise(True))
    assert (await store.list(include_resolved=True)).alerts == ()
    raised = run_in_transaction(migrated_engine, change_and_raise(False))
    assert await store.get("dead_letter:e1") == raised
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(tenants.c.pause_reason)).scalar() == "alerted"
        assert conn.execute(sa.select(alerts.c.seq)).scalar() is None  # not numbered until a sequencer runs
    assert await store.sequence() == 1

    resolved = run_in_transaction(migrated_engine, lambda conn: store.resolve_in(conn, "dead_letter:e1"))
    assert resolved is not None and resolved.id == raised.id and not resolved.open
    assert run_in_transaction(migrated_engine, lambda conn: store.resolve_in(conn, "dead_letter:e1")) is None


async def test_a_batch_is_one_statement_and_repeated_keys_count_each_raise(store: AlertStore, migrated_engine) -> None:
    await store.raise_alert(dead("e1"))
    statements = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(migrated_engine, "before_cursor_execute", listener)
    try:
        raised = run_in_transaction(
            migrated_engine, lambda conn: store.raise_many_in(conn, [dead("e1"), dead("e2"), dead("e1"), dead("e3")])
        )
    finally:
        event.remove(migrated_engine, "before_cursor_execute", listener)
    assert len([s for s in statements if "alerts" in s]) == 1
    assert [(a.execution_id, a.count) for a in raised] == [("e2", 1), ("e1", 3), ("e3", 1)]
    resolved = run_in_transaction(
        migrated_engine, lambda conn: store.resolve_many_in(conn, ["dead_letter:e3", "dead_letter:e1", "nothing"])
    )
    assert [a.execution_id for a in resolved] == ["e1", "e3"]


async def test_two_servers_raising_one_key_at_once_open_one_alert(migrated_engine) -> None:
    # The real clock: conflicting transactions back off for real, as they would.
    servers = [AlertStore(migrated_engine, SystemClock()), AlertStore(migrated_engine, SystemClock())]
    raised = await asyncio.gather(*(servers[n % 2].raise_alert(skew("s9")) for n in range(12)))
    assert len({a.id for a in raised}) == 1
    [alert] = (await servers[0].list(include_resolved=True)).alerts
    assert alert.count == 12


async def test_alerts_that_cannot_exist_are_refused(store: AlertStore) -> None:
    with pytest.raises(ValueError, match="kind"):
        NewAlert("k", "meltdown", "warning", "x")
    with pytest.raises(ValueError, match="severity"):
        NewAlert("k", "late", "apocalyptic", "x")
    with pytest.raises(ValueError, match="key"):
        NewAlert("", "late", "info", "x")
    with pytest.raises(ValueError, match="kinds"):
        await store.list(kinds=["meltdown"])
    with pytest.raises(ValueError, match="limit"):
        await store.list(limit=0)


# --- listing -----------------------------------------------------------------------------


async def test_list_is_newest_first_paged_and_filtered(store: AlertStore, clock: FakeClock) -> None:
    made = []
    for index in range(7):
        tenant = ("acme", "globex")[index % 2]
        made.append(await store.raise_alert(dead(f"e{index}", tenant)))
        if index % 3 == 2:
            clock.advance(1)  # groups of three share their raised_at
    made.append(await store.raise_alert(skew()))
    await store.resolve("dead_letter:e0")

    pages, key = [], None
    while True:
        page = await store.list(include_resolved=True, before_key=key, limit=3)
        pages.append(page)
        key = page.next_key
        if key is None:
            break
    seen = [a for page in pages for a in page.alerts]
    assert [len(p.alerts) for p in pages] == [3, 3, 2]
    assert sorted(a.id for a in seen) == sorted(a.id for a in made)
    assert [(a.raised_at, a.id) for a in seen] == sorted(((a.raised_at, a.id) for a in seen), reverse=True)

    open_ids = {a.id for a in (await store.list()).alerts}
    assert open_ids == {a.id for a in made} - {made[0].id}
    acme = (await store.list(tenant="acme", include_resolved=True)).alerts
    assert {a.execution_id for a in acme} == {"e0", "e2", "e4", "e6"}
    assert {a.kind for a in (await store.list(kinds=["clock_skew", "poison"])).alerts} == {"clock_skew"}
    assert (await store.list(kinds=["dead_letter"], tenant="acme")).alerts[-1].execution_id == "e2"


async def test_prune_deletes_only_alerts_resolved_before_the_cutoff_in_bounded_batches(
    store: AlertStore, clock: FakeClock
) -> None:
    for n in range(5):
        await store.raise_alert(dead(f"old{n}"))
        await store.resolve(f"dead_letter:old{n}")
    still_open = await store.raise_alert(dead("open"))
    clock.advance(3600)
    cutoff = clock.now()
    late = await store.raise_alert(dead("late"))
    clock.advance(1)
    await store.resolve("dead_letter:late")
    assert [await store.prune(cutoff, limit=2) for _ in range(4)] == [2, 2, 1, 0]
    left = {a.id for a in (await store.list(include_resolved=True)).alerts}
    assert left == {still_open.id, late.id}
    with pytest.raises(ValueError):
        await store.prune(cutoff, limit=0)


# --- the change feed --------------------------------------------------------------------------


async def test_every_change_is_logged_once_when_it_enters_the_feed(store: AlertStore, caplog) -> None:
    caplog.set_level(logging.INFO, logger="tickwheel.alerts")
    await store.raise_alert(dead("e1"))
    await store.raise_alert(dead("e1"))
    await store.resolve("dead_letter:e1")
    await store.sequence()  # nothing left to number: logs nothing more
    lines = [r for r in caplog.records if r.name == "tickwheel.alerts"]
    assert [(r.alert_event, r.levelno) for r in lines] == [
        ("raised", logging.WARNING), ("seen again", logging.WARNING), ("resolved", logging.INFO)]  # fmt: skip
    assert all((r.execution_id, r.tenant, r.alert_kind) == ("e1", "acme", "dead_letter") for r in lines)
    assert "dead_letter:e1" in lines[0].getMessage() and "count=2" in lines[1].getMessage()


async def test_sequencers_on_two_servers_number_each_change_once(migrated_engine, clock) -> None:
    writer = AlertStore(migrated_engine, clock)
    run_in_transaction(migrated_engine, lambda conn: writer.raise_many_in(conn, [dead(f"e{n}") for n in range(60)]))
    servers = [AlertStore(migrated_engine, clock) for _ in range(3)]
    counts = await asyncio.gather(*(s.sequence() for s in servers))
    assert sum(counts) == 60
    with migrated_engine.connect() as conn:
        numbers = conn.execute(sa.select(alerts.c.seq)).scalars().all()
        counter = conn.execute(sa.select(alert_feed.c.seq)).scalar()
    assert sorted(numbers) == list(range(1, 61)) and counter == 60


async def test_a_watch_sees_its_own_servers_changes_without_polling(migrated_engine) -> None:
    clock = FakeClock()  # never moved: no poll ever fires
    store = AlertStore(migrated_engine, clock)
    watch = await started(AlertWatch(store), skew("sentinel"))
    try:
        raised = await store.raise_alert(dead("e1"))
        assert await watch.next() == raised
        resolved = await store.resolve("dead_letter:e1")
        got = await watch.next()
        assert got == resolved and got.id == raised.id and not got.open
    finally:
        await watch.stop()


async def test_a_change_raised_inside_a_transaction_is_delivered_when_nudged(migrated_engine) -> None:
    clock = FakeClock()
    store = AlertStore(migrated_engine, clock)
    watch = await started(AlertWatch(store), skew("sentinel"))
    runner = asyncio.create_task(AlertWatch(store).run())
    try:
        raised = run_in_transaction(migrated_engine, lambda conn: store.raise_in(conn, dead("e7"), now=clock.now()))
        store.nudge()
        assert await watch.next() == raised
    finally:
        store.close()
        await asyncio.wait_for(runner, WAIT)
        await watch.stop()


async def test_a_watch_sees_another_servers_changes_at_its_next_poll(migrated_engine) -> None:
    watcher_clock = FakeClock()
    watcher = AlertStore(migrated_engine, watcher_clock)
    other = AlertStore(migrated_engine, FakeClock(autojump=True))
    watch = await started(AlertWatch(watcher), skew("sentinel"))
    try:
        raised = await other.raise_alert(poison_alert(execution_id="e1", job_id="j", tenant="acme", reason="reaped"))
        assert await watch.next(poll=watcher_clock) == raised
        # Numbered by nobody yet (no sequencer ran on the other side): the
        # watcher's own poll numbers it.
        run_in_transaction(migrated_engine, lambda conn: other.resolve_in(conn, "poison:e1"))
        got = await watch.next(poll=watcher_clock)
        assert (got.id, got.open) == (raised.id, False)
    finally:
        await watch.stop()


async def test_include_open_lists_the_open_alerts_then_only_news(migrated_engine) -> None:
    clock = FakeClock()
    store = AlertStore(migrated_engine, clock)
    for index in range(5):
        await store.raise_alert(dead(f"e{index}", ("acme", "globex")[index % 2]))
        clock.advance(1)
    await store.raise_alert(skew())
    await store.resolve("dead_letter:e4")
    watch = Watch(AlertWatch(store).watch(include_open=True, kinds=["dead_letter"], tenant="acme"))
    try:
        first = [await watch.next(), await watch.next()]
        assert [a.execution_id for a in first] == ["e2", "e0"]  # open, acme's, newest first
        await store.raise_alert(skew())  # filtered out
        await store.raise_alert(dead("e5", "globex"))  # filtered out
        bumped = await store.raise_alert(dead("e0"))
        assert await watch.next() == bumped
        assert watch.queue.empty()
    finally:
        await watch.stop()


async def test_close_ends_every_watch_after_what_it_read(migrated_engine) -> None:
    store = AlertStore(migrated_engine, FakeClock())
    watch = await started(AlertWatch(store), skew("sentinel"))
    store.close()
    await asyncio.wait_for(watch.ended.wait(), WAIT)
    assert watch.queue.empty()


async def test_the_feed_skips_nothing_while_servers_write_concurrently(migrated_engine) -> None:
    """Two servers raise, re-raise and resolve 30 keys each at once; a watch
    on a third sees every alert's final state, and each alert's states in
    order (its count never goes back, resolution comes last)."""
    clock = SystemClock()
    writers = [AlertStore(migrated_engine, clock) for _ in range(2)]
    watcher = AlertStore(migrated_engine, clock, poll_interval=0.2)
    watch = await started(AlertWatch(watcher), skew("sentinel"))

    async def write(server: int) -> None:
        store = writers[server]
        for n in range(30):
            key = f"w{server}-{n}"
            await store.raise_alert(dead(key))
            await asyncio.to_thread(run_in_transaction, migrated_engine, lambda conn: store.raise_in(conn, dead(key)))
            await store.resolve(f"dead_letter:{key}")

    try:
        await asyncio.gather(write(0), write(1))
        states: dict[str, list[AlertRecord]] = {}
        while len([k for k, s in states.items() if not s[-1].open]) < 60:
            alert = await watch.next()
            states.setdefault(alert.execution_id, []).append(alert)
        for seen in states.values():
            counts = [a.count for a in seen]
            assert counts == sorted(counts) and seen[-1].count == 2
            assert all(a.open for a in seen[:-1]) and len({a.id for a in seen}) == 1
    finally:
        await watch.stop()


async def test_a_watch_outlives_a_store_outage_without_missing_changes(migrated_engine, monkeypatch) -> None:
    from tickwheel_server.store.errors import StoreUnavailableError

    clock = FakeClock()
    store = AlertStore(migrated_engine, clock)
    watch = await started(AlertWatch(store), skew("sentinel"))
    real = AlertStore._changes_after
    failures = []

    def flaky(conn, cursor):
        if not failures:
            failures.append(cursor)
            raise StoreUnavailableError("store unreachable after 10 attempts", attempts=10)
        return real(conn, cursor)

    monkeypatch.setattr(AlertStore, "_changes_after", staticmethod(flaky))
    try:
        raised = await store.raise_alert(dead("e1"))
        assert await watch.next(poll=clock) == raised
        assert failures
    finally:
        await watch.stop()


async def test_a_poll_interval_must_be_positive(migrated_engine) -> None:
    with pytest.raises(ValueError):
        AlertStore(migrated_engine, FakeClock(), poll_interval=0)


async def test_open_alerts_are_counted_by_kind_for_the_metrics(store, migrated_engine, clock) -> None:
    # tickwheel_alerts_open{kind} (telemetry/gauges.py) reads this: open
    # alerts only, by kind; a resolved one and a repeat of an open key count
    # nothing more.
    gauges = GaugeStore(migrated_engine, clock)
    assert await gauges.open_alerts() == {}
    await store.raise_many([dead("e1"), dead("e2"), dead("e3", tenant="other"), skew("s1"), skew("s2")])
    await store.raise_alert(dead("e1"))
    await store.resolve(clock_skew_key("s2"))
    assert await gauges.open_alerts() == {"dead_letter": 3, "clock_skew": 1}
