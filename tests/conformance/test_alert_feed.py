"""One alert reader per server shared by every watch: N watches cost the
store what one does, each still gets exactly what it would alone, a watch
that stops reading is ended instead of holding the others back, and nobody
watching means nothing read; on SQLite and PostgreSQL, on a fake clock that
only moves when told."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import event

from tickwheel.shared.clock import FakeClock
from tickwheel_server.errors import RateLimited
from tickwheel_server.alerts.catalogue import AlertRecord, NewAlert, clock_skew_key
from tickwheel_server.alerts.watch import AlertWatch
from tickwheel_server.store.alerts import AlertStore

from .test_alerts import WAIT, dead, skew, started


class Reads:
    """Statements on the alert tables, counted from the engine."""

    def __init__(self, engine) -> None:
        self.count = 0
        self._engine = engine
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn, cursor, statement, *args) -> None:
        if "alert" in statement:
            self.count += 1

    def close(self) -> None:
        event.remove(self._engine, "before_cursor_execute", self._seen)


async def one_poll(alerts: AlertWatch, clock: FakeClock) -> None:
    """Move the clock a poll interval and wait until the reader polled."""
    polled = alerts.feed.polled
    clock.advance(alerts.store.poll_interval)
    await asyncio.wait_for(polled.wait(), WAIT)


async def reads_per_poll(alerts: AlertWatch, clock: FakeClock, reads: Reads, polls: int = 3) -> list[int]:
    await one_poll(alerts, clock)  # settle: whatever the last start asked for is done
    counts = []
    for _ in range(polls):
        before = reads.count
        await one_poll(alerts, clock)
        counts.append(reads.count - before)
    return counts


async def test_many_watches_cost_the_store_one_read_per_poll(migrated_engine) -> None:
    clock = FakeClock()
    store = AlertStore(migrated_engine, clock)
    watching = AlertWatch(store)
    reads = Reads(migrated_engine)
    watches = [await started(watching, skew("first"))]
    try:
        alone = await reads_per_poll(watching, clock, reads)
        for n in range(19):
            clock.advance(0.001)  # its sentinel is the newest open alert, listed first
            watches.append(await started(watching, skew(f"s{n}")))
        assert watching.feed.watchers == 20
        shared = await reads_per_poll(watching, clock, reads)
        assert shared == alone and alone[0] > 0, "twenty watches read what one does"
        raised = await store.raise_alert(dead("e1"))
        for watch in watches:
            got = await watch.next()
            while got.key != raised.key:  # the others' sentinels raised after it started
                got = await watch.next()
            assert got == raised
    finally:
        for watch in watches:
            await watch.stop()
        reads.close()


async def test_each_watch_gets_exactly_what_it_would_alone(migrated_engine) -> None:
    clock = FakeClock()
    store = AlertStore(migrated_engine, clock)
    watching = AlertWatch(store)
    filters: list[dict] = [{}, {"kinds": ["dead_letter"]}, {"tenant": "acme"}, {"kinds": ["clock_skew"]},
                           {"kinds": ["dead_letter", "late"], "tenant": "globex"}]  # fmt: skip
    sentinels = [skew("sent-any"), dead("sent-dead"), NewAlert("late:sent-acme", "late", "info", "x", tenant="acme"),
                 skew("sent-skew"), NewAlert("late:sent-globex", "late", "info", "x", tenant="globex")]  # fmt: skip
    watches = []
    try:
        for f, sentinel in zip(filters, sentinels):
            clock.advance(0.001)  # its sentinel is the newest open alert, listed first
            watches.append(await started(watching, sentinel, **f))
        changes: list[AlertRecord] = []
        for n in range(12):
            tenant = ("acme", "globex", "initech")[n % 3]
            if n % 4 == 3:
                changes.append(await store.raise_alert(skew(f"s{n}")))
            else:
                changes.append(await store.raise_alert(dead(f"e{n}", tenant)))
        changes.append(await store.raise_alert(NewAlert("late:j1", "late", "warning", "late", tenant="globex")))
        for f, watch in zip(filters, watches):
            wanted = [a for a in changes if _matches(a, **f)]
            got = []
            while len(got) < len(wanted):
                alert = await watch.next()
                if alert.key not in {s.key for s in sentinels}:
                    got.append(alert)
            assert got == wanted, f"filter {f}"
        await one_poll(watching, clock)
        assert all(w.queue.empty() for w in watches)
    finally:
        for watch in watches:
            await watch.stop()


def _matches(alert: AlertRecord, kinds: list[str] = (), tenant: str = "") -> bool:
    return (not kinds or alert.kind in kinds) and (not tenant or alert.tenant == tenant)


async def test_a_watch_that_stops_reading_is_ended_and_the_others_keep_up(migrated_engine) -> None:
    clock = FakeClock()
    store = AlertStore(migrated_engine, clock)
    watching = AlertWatch(store, watch_queue=3)
    keeping_up = await started(watching, skew("sentinel"))
    stalled: AsyncIterator[AlertRecord] = watching.watch(include_open=True)
    assert (await asyncio.wait_for(anext(stalled), WAIT)).key == clock_skew_key("sentinel")
    try:
        # The watch that keeps up reads each alert before the next is raised:
        # raised in a burst, one poll could read four of them at once and
        # overflow its queue of three too, before its reader ran (the test
        # failed that way about one run in four).
        raised = []
        for n in range(6):
            raised.append(await store.raise_alert(dead(f"e{n}")))
            assert await keeping_up.next() == raised[-1]
        assert watching.feed.watchers == 1, "the stalled watch was dropped"
        got = []
        with pytest.raises(RateLimited, match="fell more than 3 alerts behind"):
            while True:
                got.append(await asyncio.wait_for(anext(stalled), WAIT))
        assert got == raised[:3], "what it had queued, then the end"
    finally:
        await keeping_up.stop()
        await stalled.aclose()


async def test_nobody_watching_reads_nothing_and_a_new_watch_starts_again(migrated_engine) -> None:
    clock = FakeClock()
    store = AlertStore(migrated_engine, clock)
    watching = AlertWatch(store)
    reads = Reads(migrated_engine)
    try:
        watch = await started(watching, skew("first"))
        await watch.stop()
        await asyncio.sleep(0)
        before = reads.count
        for _ in range(5):
            clock.advance(store.poll_interval)
            await asyncio.sleep(0.01)
        assert reads.count == before and watching.feed.watchers == 0
        await store.resolve(clock_skew_key("first"))
        again = await started(watching, skew("second"))
        raised = await store.raise_alert(dead("e1"))
        assert await again.next() == raised
        await again.stop()
    finally:
        reads.close()


async def test_close_ends_a_watch_that_has_not_started_yet(migrated_engine) -> None:
    store = AlertStore(migrated_engine, FakeClock())
    store.close()
    assert [a async for a in AlertWatch(store).watch(include_open=True)] == []
