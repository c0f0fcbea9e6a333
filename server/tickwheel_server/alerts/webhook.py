"""The alert webhook: every alert raised and every alert resolved, POSTed as
JSON to the operator's URL (``tickwheel server --alert-webhook URL``).

The store is the queue. Raising or resolving an alert only writes its row
(``notified = ''`` on a new alert, see :mod:`.store.alerts`), so nothing that
raises an alert ever waits on the sink. One server sends: the elected
reaper's leader (``leading``), so each alert goes out from one place
whichever server raised it. It reads what is owed (a partial index, least
recently changed first) at once when an alert changes in its own process and
otherwise every ``poll_interval``, into a bounded in-memory queue that
``senders`` tasks drain. An alert whose delivery ended while a read ran is
not queued from that read (its rows may predate the delivery's record, and
would send the same event again); the next read queues what is still owed. Each alert's events go out in order (its raise, then
its resolve), each with up to ``max_attempts`` attempts spaced by full-jitter
backoff; a success is recorded on the alert's row (conditionally: a leader
that changed meanwhile never records twice). After the last attempt, or on a
refusal that will not change (a 4xx other than 408 and 429), the event is
logged as undeliverable and recorded as done, so one bad alert does not
block the others for ever.

Delivery is at least once: a server that stops between a POST and its
record, or a leadership change in that window, sends the event again after
the restart. Each POST carries ``Idempotency-Key: <alert id>:<event>`` so a
sink can recognise a repeat. Changes older than ``max_age`` (a sink turned
on, or one unreachable for longer than that) are recorded without being
sent, with one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import random
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

from tickwheel.shared.clock import Clock
from tickwheel.shared.quoted import quoted

from .. import __version__
from ..policy.retry import backoff_delay
from .catalogue import AlertRecord, Owed
from ..store.alerts import AlertStore
from ..telemetry.outages import OutageLog

log = logging.getLogger("tickwheel.webhook")

MAX_RESPONSE_BYTES = 64 * 1024
PROBLEM_MAX_CHARS = 512
"""What the undeliverable line quotes of the last error (escaped: it may quote the sink's answer)."""

Post = Callable[[str, bytes, dict[str, str], float], Awaitable[int]]
"""``post(url, body, headers, timeout)`` → the HTTP status; raises ``OSError``
(or ``http.client.HTTPException``) when no answer came."""


def check_webhook_url(url: str) -> str:
    """``url`` when it is an ``http``/``https`` URL with a host; ValueError
    naming what is wrong otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL with a host")
    try:
        parts.port
    except ValueError:
        raise ValueError(f"{url!r} has an invalid port") from None
    if parts.username or parts.password:
        raise ValueError(f"{url!r}: credentials in the URL are not sent; put a token in its path or query")
    return url


@dataclass(frozen=True)
class WebhookConfig:
    url: str
    max_attempts: int = 6
    """Attempts per event before it is logged as undeliverable."""
    initial_backoff: timedelta = timedelta(seconds=1)
    max_backoff: timedelta = timedelta(seconds=60)
    """Attempt n ≥ 2 waits uniform in [0, min(max, initial · 2^(n-2))]."""
    timeout: float = 10.0
    """Seconds for one POST (connect, send, answer)."""
    queue_size: int = 256
    senders: int = 4
    poll_interval: float = 1.0
    max_age: timedelta = timedelta(hours=24)

    def __post_init__(self) -> None:
        check_webhook_url(self.url)
        if self.max_attempts < 1 or self.queue_size < 1 or self.senders < 1:
            raise ValueError("max_attempts, queue_size and senders must be >= 1")
        if self.timeout <= 0 or self.poll_interval <= 0:
            raise ValueError("timeout and poll_interval must be > 0")


def _instant(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def alert_payload(alert: AlertRecord, event: str) -> dict:
    """The JSON body for ``event`` (``'raised'`` or ``'resolved'``) of
    ``alert`` (pure). ``state`` is the event; ``resolved_at`` is set in a
    resolve only, so a raise reads the same whenever it is sent. Subjects an
    alert does not concern are ``""``."""
    return {
        "id": alert.id,
        "key": alert.key,
        "state": event,
        "kind": alert.kind,
        "severity": alert.severity,
        "tenant": alert.tenant,
        "job": alert.job_id,
        "execution": alert.execution_id,
        "server": alert.server_id,
        "message": alert.summary,
        "details": alert.details,
        "count": alert.count,
        "raised_at": _instant(alert.raised_at),
        "resolved_at": _instant(alert.resolved_at) if event == "resolved" else None,
    }


def _shown(url: str) -> str:
    """``url`` for logs: without its query, which may carry a token."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


async def post_json(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST ``body`` to ``url`` in a worker thread (the standard library's
    http.client; redirects are not followed); the response's status.

    ``timeout`` bounds each socket operation and the whole exchange: a sink
    that answers a byte at a time, or ``100 Continue`` for ever, each within
    the per-operation timeout, would otherwise hold a sender (and, since a
    thread cannot be cancelled, the server's stop) for as long as it likes.
    Past it the connection is shut and TimeoutError raised (a retryable
    failure, as any connection error)."""
    exchange = _Exchange(url, body, headers, timeout)
    work = asyncio.ensure_future(asyncio.to_thread(exchange.run))
    try:
        return await asyncio.wait_for(asyncio.shield(work), timeout)
    except TimeoutError:
        exchange.abort()
        with contextlib.suppress(Exception):
            await work  # ends at once: its socket is shut, or it never opens one
        raise TimeoutError(f"no whole answer within {timeout:g} s") from None
    except asyncio.CancelledError:
        exchange.abort()  # a stopping server does not wait on the sink
        raise


class _Exchange:
    """One POST, in a thread; :meth:`abort` (from any thread) shuts its socket and stops one not yet opened."""

    def __init__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self.connection = kind(parts.hostname, parts.port, timeout=timeout)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.body, self.headers = body, headers
        self._lock = threading.Lock()
        self._aborted = False

    def run(self) -> int:
        connection = self.connection
        try:
            connection.connect()
            with self._lock:
                if self._aborted:
                    raise TimeoutError("aborted")
            connection.request("POST", self.path, body=self.body, headers=self.headers)
            response = connection.getresponse()
            response.read(MAX_RESPONSE_BYTES)
            return response.status
        finally:
            connection.close()

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            sock = self.connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class AlertWebhook:
    """Sends alerts' raises and resolves to one URL while ``leading()``.

    Counters for tests and operators: ``delivered`` (events the sink
    accepted), ``undeliverable`` (events given up on), ``attempts`` (POSTs
    made). ``sent`` is set each time an event is recorded as done.
    """

    def __init__(
        self,
        store: AlertStore,
        config: WebhookConfig,
        clock: Clock,
        *,
        leading: Callable[[], bool],
        post: Post = post_json,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self.config = config
        self._clock = clock
        self.outages = OutageLog(log, "alert webhook", clock)
        self._leading = leading
        self._post = post
        self._rng = rng or random.Random()
        self._queue: asyncio.Queue[Owed] = asyncio.Queue(config.queue_size)
        self._queued: set[str] = set()
        """Alerts in the queue or being sent: not read into it again."""
        self._reading: list[set[str]] = []
        """One set per read of what is owed in progress: the alerts whose
        delivery ended while it ran. Its rows may predate that delivery's
        record, so those alerts are not queued from it (the next read,
        after the record, queues what is still owed)."""
        self.delivered = 0
        self.undeliverable = 0
        self.attempts = 0
        self.sent = asyncio.Event()

    async def run(self) -> None:
        """Read what is owed and send it, until cancelled."""
        senders = [asyncio.create_task(self._send_loop(), name=f"tickwheel-webhook-{n}") for n in range(self.config.senders)]
        try:
            while True:
                try:
                    await self.fill_once()
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    self.outages.failed("reading the alerts owed", error)
                else:
                    self.outages.ok()
                await self._store.wait_changed(self.config.poll_interval)
        finally:
            for task in senders:
                task.cancel()
            await asyncio.gather(*senders, return_exceptions=True)

    async def fill_once(self) -> int:
        """Queue what is owed and not queued yet, as far as the queue has
        room; how many were queued. Nothing while another server leads."""
        room = self.config.queue_size - len(self._queued)
        if room <= 0 or not self._leading():
            return 0
        ended: set[str] = set()
        self._reading.append(ended)
        try:
            owed = await self._store.owed(
                limit=self.config.queue_size, not_before=self._clock.now() - self.config.max_age
            )
        finally:
            # By identity: two reads in flight may hold equal sets.
            self._reading = [other for other in self._reading if other is not ended]
        queued = 0
        for item in owed:
            if queued == room:
                break
            if item.alert.id in self._queued or item.alert.id in ended:
                continue
            self._queued.add(item.alert.id)
            self._queue.put_nowait(item)
            queued += 1
        return queued

    async def _send_loop(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self.deliver(item)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.outages.failed(f"delivering {item.alert.id} (it stays owed)", error)
            finally:
                self._queued.discard(item.alert.id)
                for ended in self._reading:
                    ended.add(item.alert.id)

    async def deliver(self, item: Owed) -> None:
        """Send ``item``'s owed events in order and record each. Stops, leaving
        the rest owed, when this server stops leading or the record moved."""
        was = item.notified
        for event in item.events:
            if not self._leading():
                return
            await self._send(item.alert, event)
            if not await self._store.mark_notified(item.alert.id, event, was=was):
                return
            was = event
            self.sent.set()
            self.sent = asyncio.Event()

    async def _send(self, alert: AlertRecord, event: str) -> bool:
        """POST one event with retries; True when the sink accepted it."""
        body = json.dumps(alert_payload(alert, event), separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"tickwheel/{__version__}",
            "Idempotency-Key": f"{alert.id}:{event}",
        }
        problem = ""
        for attempt in range(1, self.config.max_attempts + 1):
            if attempt > 1:
                delay = backoff_delay(attempt, self.config.initial_backoff, self.config.max_backoff, self._rng)
                await self._clock.sleep(delay.total_seconds())
            self.attempts += 1
            try:
                status = await self._post(self.config.url, body, headers, self.config.timeout)
            except (OSError, http.client.HTTPException) as error:
                # BadStatusLine holds the sink's whole status line (64 KiB, escape sequences and all).
                problem = f"{type(error).__name__}: {quoted(str(error), PROBLEM_MAX_CHARS)}"
                continue
            if 200 <= status < 300:
                self.delivered += 1
                return True
            problem = f"HTTP {status}"
            if not _retryable(status):
                break
        self.undeliverable += 1
        log.error(
            "alert webhook: alert %s %s undeliverable to %s after %d attempts (%s): kind=%s key=%s",
            alert.id, event, _shown(self.config.url), attempt, problem, alert.kind, alert.key,
            extra={"alert_id": alert.id, "alert_event": event, "alert_kind": alert.kind},
        )  # fmt: skip
        return False
