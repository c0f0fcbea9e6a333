"""The alert webhook on SQLite and PostgreSQL: what the store says is owed
(``AlertStore.owed`` / ``mark_notified``) and how :class:`AlertWebhook`
delivers it (order, retries with full-jitter backoff on the injected clock,
giving up, one sender). The sink is a function here; the HTTP round trip is
in tests/integration/test_alert_webhook_api.py."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tickwheel.shared.clock import FakeClock
from tickwheel_server.alerts.catalogue import NewAlert, dead_letter_alert
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.tables import alerts
from tickwheel_server.alerts.webhook import AlertWebhook, WebhookConfig, alert_payload, check_webhook_url

URL = "https://alerts.example.com/hook?token=s3cret"
WAIT = 20.0


def dead(execution: str) -> NewAlert:
    return dead_letter_alert(execution_id=execution, job_id="job_1", tenant="acme", reason="failed permanently")


class Sink:
    """Answers each POST with the next status of ``statuses`` (then 200) and keeps what it got."""

    def __init__(self, *statuses: int | Exception) -> None:
        self.statuses = list(statuses)
        self.got: list[tuple[dict, dict[str, str]]] = []

    async def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
        assert url == URL
        self.got.append((json.loads(body), headers))
        answer = self.statuses.pop(0) if self.statuses else 200
        if isinstance(answer, Exception):
            raise answer
        return answer

    @property
    def events(self) -> list[tuple[str, str]]:
        return [(body["id"], body["state"]) for body, _ in self.got]


def webhook(store: AlertStore, clock, sink: Sink, *, leading=lambda: True, **options) -> AlertWebhook:
    return AlertWebhook(store, WebhookConfig(URL, **options), clock, leading=leading, post=sink, rng=random.Random(7))


@pytest.fixture
def store(migrated_engine, clock) -> AlertStore:
    return AlertStore(migrated_engine, clock)


async def test_a_raise_then_a_resolve_are_owed_once_each_and_repeats_are_not(store) -> None:
    raised = await store.raise_alert(dead("e1"))
    [owed] = await store.owed()
    assert (owed.alert.id, owed.notified, owed.events) == (raised.id, "", ("raised",))
    assert await store.mark_notified(raised.id, "raised", was="")
    assert not await store.mark_notified(raised.id, "raised", was=""), "recorded once: another sender moved it"
    await store.raise_alert(dead("e1"))  # seen again: count 2, nothing owed
    assert await store.owed() == []
    await store.resolve(raised.key)
    [owed] = await store.owed()
    assert (owed.notified, owed.events) == ("raised", ("resolved",))
    assert await store.mark_notified(raised.id, "resolved", was="raised")
    assert await store.owed() == []
    with pytest.raises(ValueError):
        await store.mark_notified(raised.id, "raised", was="resolved")


async def test_an_alert_resolved_before_anything_was_sent_owes_both_in_order(store) -> None:
    raised = await store.raise_alert(dead("e1"))
    await store.resolve(raised.key)
    [owed] = await store.owed()
    assert owed.events == ("raised", "resolved")


async def test_alerts_from_before_the_webhook_and_changes_older_than_the_max_age_are_not_sent(store, clock, caplog) -> None:
    old = await store.raise_alert(dead("old"))
    with store.engine.begin() as conn:  # as migration 0012 leaves an alert raised before it
        conn.execute(alerts.update().where(alerts.c.id == old.id).values(notified=None))
    stale = await store.raise_alert(dead("stale"))
    clock.advance(3600)
    fresh = await store.raise_alert(dead("fresh"))
    with caplog.at_level(logging.WARNING, "tickwheel.alerts"):
        owed = await store.owed(not_before=clock.now() - timedelta(minutes=30))
    assert [o.alert.id for o in owed] == [fresh.id]
    assert "1 alert changes older than" in caplog.text
    with store.engine.connect() as conn:
        notified = dict(conn.execute(sa.select(alerts.c.id, alerts.c.notified)).all())
    assert notified == {old.id: None, stale.id: "raised", fresh.id: ""}


async def test_stale_changes_are_marked_in_bounded_batches_each_once_and_a_stopped_walk_resumes(
    store, clock, caplog, monkeypatch
) -> None:
    stale = [await store.raise_alert(dead(f"stale{i}")) for i in range(5)]  # > 2 batches of 2
    await store.resolve(stale[1].key)  # owed a raise and a resolve: marked resolved
    clock.advance(3600)
    fresh = await store.raise_alert(dead("fresh"))
    cutoff = clock.now() - timedelta(minutes=30)
    batches: list[int] = []
    real = AlertStore._mark_stale

    def failing_second(conn, cutoff_us, batch):
        if len(batches) == 1:
            raise RuntimeError("connection lost")
        batches.append(real(conn, cutoff_us, batch))
        return batches[-1]

    monkeypatch.setattr(AlertStore, "_mark_stale", staticmethod(failing_second))
    with pytest.raises(RuntimeError):
        await store.owed(not_before=cutoff, stale_batch=2)
    assert batches == [2], "the first batch committed on its own, the second wrote nothing"

    def counting(conn, cutoff_us, batch):
        batches.append(real(conn, cutoff_us, batch))
        return batches[-1]

    monkeypatch.setattr(AlertStore, "_mark_stale", staticmethod(counting))
    batches.clear()
    with caplog.at_level(logging.WARNING, "tickwheel.alerts"):
        owed = await store.owed(not_before=cutoff, stale_batch=2)
    assert batches == [2, 1], "the rest, each at most the batch, none marked twice"
    assert "3 alert changes older than" in caplog.text
    assert [o.alert.id for o in owed] == [fresh.id]
    with store.engine.connect() as conn:
        notified = dict(conn.execute(sa.select(alerts.c.id, alerts.c.notified)).all())
    assert notified == {
        **{a.id: "raised" for a in stale}, stale[1].id: "resolved", fresh.id: "",
    }
    with pytest.raises(ValueError):
        await store.owed(not_before=cutoff, stale_batch=0)


async def test_a_sink_failing_twice_gets_the_alert_on_the_third_try_after_full_jitter_waits(store, clock) -> None:
    raised = await store.raise_alert(dead("e1"))
    sink = Sink(500, ConnectionRefusedError("refused"))
    sender = webhook(store, clock, sink, initial_backoff=timedelta(seconds=1), max_backoff=timedelta(seconds=60))
    [owed] = await store.owed()
    before = clock.monotonic()
    await sender.deliver(owed)
    assert sink.events == [(raised.id, "raised")] * 3
    assert (sender.attempts, sender.delivered, sender.undeliverable) == (3, 1, 0)
    assert 0 <= clock.monotonic() - before <= 1 + 2, "attempt 2 waits at most 1 s, attempt 3 at most 2 s"
    body, headers = sink.got[-1]
    assert headers["Idempotency-Key"] == f"{raised.id}:raised" and headers["Content-Type"] == "application/json"
    assert body == alert_payload(raised, "raised") and body["resolved_at"] is None
    assert (body["kind"], body["tenant"], body["job"], body["key"]) == ("dead_letter", "acme", "job_1", "dead_letter:e1")
    assert await store.owed() == []


async def test_an_event_is_given_up_after_its_attempts_or_a_refusal_and_logged(store, clock, caplog) -> None:
    down = await store.raise_alert(dead("down"))
    clock.advance(1)
    refused = await store.raise_alert(dead("refused"))
    sink = Sink(*[503] * 4, 400)
    sender = webhook(store, clock, sink, max_attempts=4)
    with caplog.at_level(logging.ERROR, "tickwheel.webhook"):
        for owed in await store.owed():
            await sender.deliver(owed)
    assert sink.events == [(down.id, "raised")] * 4 + [(refused.id, "raised")]
    assert (sender.delivered, sender.undeliverable) == (0, 2)
    assert f"alert {down.id} raised undeliverable" in caplog.text and "HTTP 503" in caplog.text
    assert "HTTP 400" in caplog.text and "after 1 attempts" in caplog.text
    assert "s3cret" not in caplog.text, "the URL's query (a token) is not logged"
    assert await store.owed() == [], "given up is recorded: one bad alert does not block the others"


async def test_only_the_leader_sends_and_the_run_loop_follows_raises_and_resolves(migrated_engine) -> None:
    clock = FakeClock()  # moves only when told: what arrives came by the in-process wake-up
    store = AlertStore(migrated_engine, clock)
    sink = Sink()
    leading = False
    sender = webhook(store, clock, sink, leading=lambda: leading)
    raised = await store.raise_alert(dead("e1"))
    assert await sender.fill_once() == 0 and sink.got == []
    leading = True
    task = asyncio.create_task(sender.run())
    try:
        await _until(lambda: sink.events == [(raised.id, "raised")])
        await store.resolve(raised.key)
        await _until(lambda: sink.events == [(raised.id, "raised"), (raised.id, "resolved")])
        resolved = sink.got[-1][0]
        assert resolved["state"] == "resolved" and resolved["resolved_at"] is not None
        await _until(lambda: sender.delivered == 2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert await store.owed() == []


class SlowReads(AlertStore):
    """An AlertStore whose reads of what is owed, while ``held`` is set,
    return (the rows already read) only when it is cleared: a read slowed by
    a loaded machine, outrun by a delivery's record."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.held: asyncio.Event | None = None
        self.reading = asyncio.Event()

    async def owed(self, **options):
        rows = await super().owed(**options)
        if self.held is not None:
            self.reading.set()
            await self.held.wait()
        return rows


class HeldSink(Sink):
    """A Sink that answers only once ``answer`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.posted = asyncio.Event()

    async def __call__(self, url, body, headers, timeout) -> int:
        self.posted.set()
        await self.answer.wait()
        return await super().__call__(url, body, headers, timeout)


async def test_a_read_that_predates_a_deliverys_record_does_not_send_the_event_again(migrated_engine) -> None:
    # Under load a read of what is owed can start before a sender records a
    # 200 and return after the sender let the alert go: its row still says
    # the raise is owed. That read must not queue it again (a second POST
    # of an event the sink already accepted).
    clock = FakeClock()
    store = SlowReads(migrated_engine, clock)
    sink = HeldSink()
    sender = webhook(store, clock, sink)
    raised = await store.raise_alert(dead("e1"))
    task = asyncio.create_task(sender.run())
    try:
        await asyncio.wait_for(sink.posted.wait(), WAIT)  # the raise is being sent
        store.held = asyncio.Event()
        late = asyncio.create_task(sender.fill_once())
        await asyncio.wait_for(store.reading.wait(), WAIT)  # its rows read: the raise still owed
        sent = sender.sent
        sink.answer.set()
        await asyncio.wait_for(sent.wait(), WAIT)  # the 200 recorded, the alert let go
        store.held.set()
        assert await asyncio.wait_for(late, WAIT) == 0, "the late read queued the delivered raise again"
        store.held = None
        assert await sender.fill_once() == 0 and await store.owed() == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert sink.events == [(raised.id, "raised")]
    assert (sender.attempts, sender.delivered) == (1, 1)


def test_the_url_must_be_http_or_https_with_a_host_and_no_credentials() -> None:
    assert check_webhook_url("http://127.0.0.1:9000/alerts") == "http://127.0.0.1:9000/alerts"
    for bad in ("ftp://example.com/x", "https:///path", "example.com/hook", "https://u:p@example.com/", "http://h:99999/"):
        with pytest.raises(ValueError):
            check_webhook_url(bad)


async def _until(check) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the wait"
        await asyncio.sleep(0.01)


async def test_a_sink_answering_a_hostile_status_line_is_logged_bounded_and_escaped(store, clock, caplog) -> None:
    import http.client

    await store.raise_alert(dead("hostile"))
    # http.client's BadStatusLine holds the sink's whole line (up to 64 KiB).
    line = "XTTP/1.1 \x1b]0;owned\x07\x1b[2J\r\n2026-12-07 INFO forged" + "S" * 60_000
    sender = webhook(store, clock, Sink(http.client.BadStatusLine(line)), max_attempts=1)
    with caplog.at_level(logging.ERROR, "tickwheel.webhook"):
        for owed in await store.owed():
            await sender.deliver(owed)
    (record,) = [r for r in caplog.records if "undeliverable" in r.getMessage()]
    message = record.getMessage()
    assert "BadStatusLine: XTTP/1.1 \\x1b]0;owned\\x07\\x1b[2J\\r\\n2026" in message, message[:300]
    assert message.isprintable() and len(message) < 2000, len(message)
