"""The worker: holds one ``WorkerService.Pull`` stream at a time and keeps it up.

Per stream (a *session*) the worker sends ``hello`` (with the executions it
still runs or holds an unacknowledged result for, on a reconnect: a server
counts a result only from the stream that holds its delivery, so the new
stream must re-attach those too), waits for ``welcome``, then:

* **credit** - ``hello.slots`` is the stream's initial credit. The worker
  tracks the credit the server still holds and grants more only while
  ``held + outstanding < slots``, where ``held`` counts every assignment it
  has not finished with (waiting for a slot, running, or decided but with a
  handler that has not yet stopped). With nothing carried over that keeps
  what the server may send plus what runs at most ``slots``. After a
  reconnect the ``k`` executions still running are held while the server's
  credit restarts at ``slots``; the worker then never runs more than
  ``slots`` at once (a semaphore), lets the surplus wait for a slot, and
  grants nothing until ``held + outstanding`` is back under ``slots``.
  Anything beyond ``2 * slots`` held (a server ignoring credit) is answered
  FAILED_RETRYABLE at once; more than :data:`MAX_REFUSED` such answers
  unacknowledged end the stream as a protocol error and are forgotten (the
  server hands those executions out again; the results of real attempts are
  kept and sent on the next stream).
* **heartbeats** - every ``welcome.heartbeat_interval``, listing every
  execution not yet decided, with its progress. An interval outside the
  bounds a server's configuration takes (:mod:`tickwheel.shared.heartbeats`)
  is clamped into them, with a WARNING.
* **results** - sent when each attempt's outcome is known, batched, and kept
  until acked; after a reconnect every unacked result is sent again (the
  server's result handling is idempotent). An ack forgets the execution.
* **cancel** - the attempt is stopped and reported CANCELED;
  **welcome.rejected** - stopped and not reported (it is someone else's now).
* **drain** - no more credit; when every attempt is decided and every result
  acked, or at the drain deadline, the worker closes the stream and reconnects
  (attempts still running then are re-reported in the next hello).
* **server liveness** - any message from the server counts; after
  ``server_silence_intervals`` heartbeat intervals of silence the server is
  presumed dead and the worker reconnects.

Reconnects wait :func:`~tickwheel.shared.backoff.full_jitter` (doubling
per stream that got no welcome or ended within a heartbeat interval of it, from
``reconnect_initial_backoff`` up to ``reconnect_max_backoff``). A server
that refuses the worker (UNAUTHENTICATED, PERMISSION_DENIED,
INVALID_ARGUMENT, UNIMPLEMENTED) ends :meth:`Worker.run` with
:class:`WorkerFatalError`, logged as an ERROR (the CLI adds nothing to that
line but its exit status).

**Logs of an outage** - a server unreachable, restarting, waiting for its
store, refusing with any other status, or breaking the protocol is an
outage of the stream, logged through
:class:`~tickwheel.shared.outages.OutageLog` (as the server logs its own):
one WARNING when it begins (the address, the gRPC status and its details,
first line, bounded, with the credential masked), one a minute later, then
after gaps doubling up to 15 minutes, DEBUG for each failed reconnect in
between and one INFO with its duration once a stream lasted a heartbeat
interval (a stream that ends sooner, welcomed or not, is part of the
outage). Results held meanwhile stay held and are sent again on the next
stream. What a server sends against the protocol on an open stream (a
second welcome, duplicate assignments, assignments beyond the credit, a
heartbeat interval out of bounds, results it rejects) and what it can make
the worker say a stream at will (its drains, a drain done, a stream closed)
is one line of each kind a minute, the rest DEBUG (:class:`_Limited`); its
texts are cut to one printable line (:func:`_clean`). A cancel or a
welcome's ``rejected`` list costs one pass over the attempts at most.

Every queue is bounded: outgoing messages are not queued but computed from
state (results pending, credit owed, heartbeat due) by one writer task, and
state is bounded by the number of executions held (at most ``2 * slots``
attempts, their unacknowledged results: no credit is granted while attempts
and unacknowledged results together would pass the :data:`MAX_IN_FLIGHT` a
hello may list, and an assignment arriving past that is refused) plus at
most :data:`MAX_REFUSED` refusals. What each of those holds is bounded too: an assignment with a
field out of :mod:`tickwheel_worker.bounds` (an id, a handler name, a
payload, an HTTP target) ends the stream as a protocol error
before anything of its message is taken; a cancel's reason is cut to
:data:`CANCEL_REASON_CHARS`, the server's id and every text the worker logs
to :data:`SAID_CHARS`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timezone
from typing import Any, TypeVar

import grpc
import grpc.aio

from tickwheel.shared.backoff import full_jitter
from tickwheel.shared.clock import Clock, SystemClock
from tickwheel.shared.heartbeats import clamp_heartbeat_interval
from tickwheel.shared.logs import log_execution
from tickwheel.shared.outages import STILL_EVERY, OutageLog, one_line
from tickwheel.v1 import worker_pb2, worker_pb2_grpc
from tickwheel_worker._version import VERSION
from tickwheel_worker.attempt import FAILED_RETRYABLE, Attempt, AttemptSettings, Key
from tickwheel_worker.bounds import breach, valid_duration
from tickwheel_worker.config import WorkerConfig
from tickwheel_worker.handlers import HandlerRegistry
from tickwheel_worker.slots import Slots
from tickwheel_worker.timers import Timers

log = logging.getLogger(__name__)

FATAL_CODES = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
_REMEDY = {
    grpc.StatusCode.UNAUTHENTICATED: "the credential is unknown or was revoked: issue a new one",
    grpc.StatusCode.PERMISSION_DENIED: "the credential does not allow this",
    grpc.StatusCode.UNIMPLEMENTED: "is the address a Tickwheel server?",
}

RESULTS_PER_MESSAGE = 1000
RESULT_MESSAGE_BYTES = 1024 * 1024
"""A result message takes no more results once their sizes (bounded from above) pass this; the
server reads messages of up to 4 MiB. Every message costs a write (a system call) here and a
read, a submit and an ack there, so a burst's results go in as few as that allows."""
RESULT_BYTES_BEYOND = 256
"""At least what a result takes beside its execution id, output and error (numbers, timestamps, tags)."""
MAX_IN_FLIGHT = 20_000
"""The most ``hello.in_flight`` entries a server takes."""
CLOSE_TIMEOUT = 1.0
"""Seconds a clean close waits for the last write and for the server to end the stream."""
ABANDON_TIMEOUT = 1.0
"""Seconds a stopping worker waits for its cancelled async handlers to return."""
MAX_RECEIVE_BYTES = 64 * 1024 * 1024
"""An assignment batch can carry 100 payloads of 64 KiB and more; gRPC's default is 4 MiB."""
USER_AGENT = f"tickwheel-worker/{VERSION}"
SAID_CHARS = 300
"""The most characters of a server's error (its status details) a log line repeats."""
MAX_REFUSED = RESULTS_PER_MESSAGE
"""The most refusals of assignments beyond the credit held unacknowledged; one more ends the
stream as a protocol error (a server that ignores the credit and never acks would grow them
without end)."""
CANCEL_REASON_CHARS = 1024
"""What a canceled attempt keeps of the server's reason (its result's error is bounded too)."""

F = TypeVar("F", bound=Callable[..., Any])


class WorkerFatalError(Exception):
    """The server refused this worker; retrying with the same configuration cannot help."""


class _SessionLost(Exception):
    """The stream ended, the server went silent or broke the protocol: reconnect."""


def _server_outage(error: BaseException) -> str | None:
    """``"server"`` when ``error`` ended a stream for a reason of the
    server's or the network's (a worker reconnects); ``None`` for a defect
    of the worker's own."""
    if isinstance(error, (grpc.aio.AioRpcError, _SessionLost, OSError, EOFError)):
        return "server"
    return None


def _said(error: BaseException, credential: str) -> str:
    """What a server's error says, as one log line: the gRPC status and the
    first line of its details, printable, at most :data:`SAID_CHARS`
    characters, the worker's credential masked (a server may echo it)."""
    if isinstance(error, grpc.aio.AioRpcError):
        text = f"{error.code().name}: {error.details() or ''}".strip()
    elif isinstance(error, _SessionLost):
        text = str(error)
    else:
        text = one_line(error)
    return _clean(text, credential)


def _clean(text: str, credential: str) -> str:
    """``text`` from a server, fit for a log line: its first line, printable, at
    most :data:`SAID_CHARS` characters, the worker's credential masked."""
    lines = text[: SAID_CHARS + len(credential) + 1].splitlines()  # a server's text may run to megabytes
    text = lines[0] if lines else ""
    if credential:
        text = text.replace(credential, "***")
    text = "".join(c if c.isprintable() else "?" for c in text[: SAID_CHARS + 1])
    return text if len(text) <= SAID_CHARS else text[:SAID_CHARS] + "..."


class _Session:
    """The state of one Pull stream."""

    def __init__(self, call: Any, interval: float, last_seen: float, credit: int) -> None:
        self.call = call
        self.interval = interval
        self.last_seen = last_seen
        self.outstanding = credit
        """Credit the server holds for this worker on this stream."""
        self.unsent: dict[Key, None] = {}
        """Results (by key into ``Worker._unacked``) not yet written to this stream, in order."""
        self.wake = asyncio.Event()
        self.heartbeat_due = False
        self.draining = False
        self.drain_received = asyncio.Event()
        self.drain_deadline: datetime | None = None
        self.closing = False
        """Set on a clean end: the writer flushes, half-closes and stops."""
        self.server_id = ""


def _size_bound(result: worker_pb2.ExecutionResult) -> int:
    """At least ``result.ByteSize()``, for a fraction of its cost (that serialises it).

    Execution ids are ASCII; an error, rare, is measured in UTF-8.
    """
    error = result.error
    return RESULT_BYTES_BEYOND + len(result.execution_id) + len(result.output) + (len(error.encode()) if error else 0)


class _Limited:
    """Lines a broken or hostile server causes at will, one per message it
    sends (a duplicate assignment, one beyond the credit, a second welcome):
    each kind at its level at most once a minute, the rest DEBUG, counted in
    the next line of that kind."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._said_at: dict[str, float] = {}
        self._unsaid: dict[str, int] = {}

    def level(self, kind: str, level: int) -> tuple[int, str]:
        """The level of a line of ``kind`` now, and what it adds to its text."""
        now = self._clock.monotonic()
        said_at = self._said_at.get(kind)
        if said_at is not None and now - said_at < STILL_EVERY:
            self._unsaid[kind] = self._unsaid.get(kind, 0) + 1
            return logging.DEBUG, ""
        self._said_at[kind] = now
        unsaid = self._unsaid.pop(kind, 0)
        return level, f" ({unsaid} more since the last such line, at DEBUG)" if unsaid else ""


async def _wait_any(*aws: Awaitable[Any]) -> None:
    """Return when the first of ``aws`` completes; cancel the rest."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Worker:
    """A worker process's connection to Tickwheel and the executions it runs.

    Register handlers with :meth:`handler` (or in ``config.handlers``), then
    ``await run()``; ``await stop(grace)`` from another task ends it. A Worker
    runs once.
    """

    def __init__(self, config: WorkerConfig, *, clock: Clock | None = None, rng: random.Random | None = None) -> None:
        self.config = config
        self.handlers: HandlerRegistry = config.handlers
        self.connected = asyncio.Event()
        """Set while a stream is open and welcomed; cleared when it ends."""
        self.sessions = 0
        """How many streams were welcomed so far."""
        self._clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._max_held = 2 * config.slots
        self._timers = Timers(self._clock)
        """Every attempt's deadline and cancel grace: one task for all of them."""
        self._attempt_settings = AttemptSettings(
            registry=self.handlers,
            clock=self._clock,
            timers=self._timers,
            slots=Slots(config.slots),
            report=self._record,
            finished=self._forget,
            http_enabled=config.http,
            address_policy=config.address_policy,
            cancel_grace=config.cancel_grace,
            user_agent=USER_AGENT,
            tracer=config.tracer,
            resolver=config.resolver,
        )
        self._attempts: dict[Key, Attempt] = {}
        self._unacked: dict[Key, worker_pb2.ExecutionResult] = {}
        self._refused: dict[Key, None] = {}
        """The keys in ``_unacked`` of refusals of assignments beyond the credit (at most :data:`MAX_REFUSED`)."""
        self._session: _Session | None = None
        self._welcomed = False
        self._started = False
        self._stopping = False
        self._shutdown = asyncio.Event()
        self._finished = asyncio.Event()
        self._watchers: list[asyncio.Future[None]] = []
        """Futures of those waiting for the next change of state (see :meth:`_notify`)."""
        self._outages = OutageLog(
            log, f"stream to {config.address}", self._clock, kind_of=_server_outage,
            describe=lambda error: _said(error, config.credential), then="reconnecting",
        )
        """Failed streams and reconnects: a line an outage, not one a try."""
        self._healthy_at: float | None = None
        self._limited = _Limited(self._clock)
        """What a server's messages make the worker log, one line a kind a minute."""
        self._said_connected_at: float | None = None
        """When the last "connected" line was INFO."""
        """When the current stream counts as having worked (its welcome plus a
        heartbeat interval): a stream lost sooner backs the reconnects off."""

    # -- public surface ---------------------------------------------------

    def handler(self, name: str) -> Callable[[F], F]:
        """Decorator registering a sync or async handler: ``@worker.handler("billing.charge")``."""
        return self.handlers.handler(name)

    def in_flight(self) -> list[Key]:
        """``(execution_id, delivery)`` of every attempt not yet decided."""
        return [key for key, attempt in self._attempts.items() if not attempt.decided]

    def unacked(self) -> list[Key]:
        """Results reported but not yet acknowledged by a server."""
        return list(self._unacked)

    @property
    def server_id(self) -> str:
        """The id of the server the current stream is welcomed by, or empty."""
        return self._session.server_id if self._session else ""

    @property
    def draining(self) -> bool:
        """True while the current stream's server is draining (no new work is taken)."""
        return self._session is not None and self._session.draining

    async def run(self) -> None:
        """Connect, serve, reconnect, until :meth:`stop`.

        Raises :class:`WorkerFatalError` when the server refuses the worker
        and ValueError when it could run nothing (no handler, HTTP disabled).
        On return no attempt is running, except handlers that ignore their
        cancellation: sync ones in their threads, async ones that swallow
        ``CancelledError`` (logged) on the event loop.
        """
        if self._started:
            raise RuntimeError("a Worker runs once")
        if not self.config.http and len(self.handlers) == 0:
            raise ValueError("the worker has no handler and HTTP targets are disabled: nothing to run")
        self._started = True
        timers = asyncio.create_task(self._timers.run(), name="tickwheel-worker-timers")
        failures = 0
        try:
            while not self._shutdown.is_set():
                self._welcomed = False
                self._healthy_at = None
                try:
                    await self._run_session()
                    if self._welcomed and not self._stream_worked() and not self._shutdown.is_set():
                        raise _SessionLost("the server ended the stream within a heartbeat interval of its welcome")
                    if self._welcomed:
                        level, more = self._limited.level("closed", logging.INFO)
                        log.log(level, "stream to %s closed; reconnecting%s", self.config.address, more)
                except grpc.aio.AioRpcError as exc:
                    if exc.code() in FATAL_CODES:
                        said = _said(exc, self.config.credential)
                        log.error("%s refused the worker %s: %s; stopping (%s)", self.config.address,
                                  self.config.worker_id, said, _REMEDY.get(exc.code(), "check its configuration"))
                        raise WorkerFatalError(f"{self.config.address} refused the worker: {said}") from exc
                    self._outages.failed(self._stage(), exc)
                except Exception as exc:  # noqa: BLE001 - keep serving; a server hiccup must not kill the worker
                    self._outages.failed(self._stage(), exc)
                # A stream that lasted a heartbeat interval worked: the next connect is quick
                # again. One ended sooner (a welcome, then at once a close, a drain or an error,
                # in a loop) backs off as a refused connect does, and its outage goes on.
                failures = 0 if self._stream_worked() else failures + 1
                if self._shutdown.is_set():
                    break
                delay = full_jitter(
                    failures,
                    initial=self.config.reconnect_initial_backoff,
                    cap=self.config.reconnect_max_backoff,
                    rng=self._rng,
                )
                await _wait_any(self._shutdown.wait(), self._clock.sleep(delay))
        finally:
            self._shutdown.set()
            self.connected.clear()
            await self._abandon_all()
            timers.cancel()
            await asyncio.gather(timers, return_exceptions=True)
            self._finished.set()

    async def stop(self, grace: float = 30.0) -> None:
        """Stop taking work, let in-flight attempts finish, then end :meth:`run`.

        Waits up to ``grace`` seconds until every attempt is decided and every
        result acknowledged (reconnecting meanwhile if the stream drops), then
        closes the stream and stops what still runs without reporting it: the
        server re-delivers those, and any result left unacknowledged, to
        another worker. Returns when :meth:`run` has returned.
        """
        self._stopping = True
        if not self._started:
            self._shutdown.set()
            return
        deadline = self._clock.monotonic() + grace
        while not self._finished.is_set():
            change = self._next_change()
            left = deadline - self._clock.monotonic()
            if self._quiet() or left <= 0:
                break
            await _wait_any(change, self._clock.sleep(left), self._finished.wait())
        self._shutdown.set()
        await self._finished.wait()

    # -- one stream ------------------------------------------------------

    def _stream_worked(self) -> bool:
        """The last stream was welcomed and lasted a heartbeat interval."""
        return self._healthy_at is not None and self._clock.monotonic() >= self._healthy_at

    def _stage(self) -> str:
        """What failed, in a log line: the stream a server welcomed, or a connect."""
        return "the stream" if self._welcomed else "connecting"

    def _open_channel(self) -> grpc.aio.Channel:
        """A new channel per stream, so a reconnect resolves the address again."""
        options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
        if self.config.tls:
            return grpc.aio.secure_channel(self.config.address, self.config.channel_credentials(), options=options)
        return grpc.aio.insecure_channel(self.config.address, options=options)

    async def _run_session(self) -> None:
        channel = self._open_channel()
        call = None
        try:
            stub = worker_pb2_grpc.WorkerServiceStub(channel)
            call = stub.Pull(metadata=(("authorization", f"Bearer {self.config.credential}"),))
            welcome = await self._handshake(call)
            if welcome is None:  # the worker is stopping
                return
            session = _Session(call, self._heartbeat_interval(welcome), self._clock.monotonic(), self.config.slots)
            session.server_id = _clean(welcome.server_id, self.config.credential)
            for attempt in self._matching(welcome.rejected):
                attempt.reject("the server gave this execution to another worker")
            session.unsent = dict.fromkeys(self._unacked)
            session.wake.set()
            self._session = session
            self._welcomed = True
            self._healthy_at = session.last_seen + session.interval
            self.sessions += 1
            self.connected.set()
            # Through an outage (streams welcomed, then ended at once, in a loop) this line too
            # is one a minute; the outage's end is logged once a stream lasted (see _tick).
            now = self._clock.monotonic()
            quiet = self._outages.down and self._said_connected_at is not None and \
                now - self._said_connected_at < STILL_EVERY
            if not quiet:
                self._said_connected_at = now
            log.log(
                logging.DEBUG if quiet else logging.INFO,
                "worker %s connected to server %s (%d in flight, %d results to resend)",
                self.config.worker_id, session.server_id, len(welcome.reattached), len(session.unsent),
            )
            await self._serve(session)
        finally:
            self._session = None
            self.connected.clear()
            if call is not None:
                call.cancel()
            await channel.close()

    async def _handshake(self, call: Any) -> worker_pb2.ServerWelcome | None:
        """Send hello and read the welcome within ``welcome_timeout`` (connecting included).

        None when the worker starts stopping meanwhile.
        """

        async def hello_then_welcome() -> worker_pb2.ServerWelcome:
            await call.write(worker_pb2.PullRequest(hello=self._hello()))
            message = await call.read()
            if message is grpc.aio.EOF:
                raise _SessionLost("the server closed the stream before its welcome")
            if message.WhichOneof("message") != "welcome":
                raise _SessionLost(f"protocol error: expected welcome, got {message.WhichOneof('message')}")
            return message.welcome

        handshake = asyncio.ensure_future(hello_then_welcome())
        await _wait_any(asyncio.shield(handshake), self._clock.sleep(self.config.welcome_timeout),
                        self._shutdown.wait())
        if not handshake.done():
            handshake.cancel()
            await asyncio.gather(handshake, return_exceptions=True)
            if self._shutdown.is_set():
                return None
            raise _SessionLost(f"no welcome within {self.config.welcome_timeout:g}s")
        return handshake.result()

    def _heartbeat_interval(self, welcome: worker_pb2.ServerWelcome) -> float:
        if welcome.HasField("heartbeat_interval"):
            interval = welcome.heartbeat_interval
            if not valid_duration(interval.seconds, interval.nanos):
                raise _SessionLost("protocol error: the welcome's heartbeat_interval is out of range")
            try:
                seconds = welcome.heartbeat_interval.ToTimedelta().total_seconds()
            except (ValueError, OverflowError) as exc:
                raise _SessionLost("protocol error: the welcome's heartbeat_interval is out of range") from exc
            if seconds > 0:
                clamped = clamp_heartbeat_interval(seconds)
                if clamped != seconds:
                    level, more = self._limited.level("heartbeat interval", logging.WARNING)
                    log.log(level, "server %s announced a heartbeat interval of %gs; using %gs%s",
                            _clean(welcome.server_id, self.config.credential), seconds, clamped, more)
                return clamped
        return self.config.default_heartbeat_interval

    async def _serve(self, session: _Session) -> None:
        """Run the stream's tasks until one fails (raised) or the session ends cleanly.

        A clean end (drain complete, or the worker stops) half-closes the
        stream after the last pending write and gives the server up to
        ``CLOSE_TIMEOUT`` to end its side, so it sees a finished stream rather
        than a cancelled one. Cancelling a pending read or write would cancel
        the RPC, hence the order.
        """
        reader = asyncio.create_task(self._read_loop(session))
        writer = asyncio.create_task(self._write_loop(session))
        tasks = [
            reader,
            writer,
            asyncio.create_task(self._tick(session)),
            asyncio.create_task(self._watch_server(session)),
            asyncio.create_task(self._until_session_ends(session)),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            session.closing = True
            session.wake.set()
            timer = asyncio.create_task(self._clock.sleep(CLOSE_TIMEOUT))
            await asyncio.wait({writer, timer}, return_when=asyncio.FIRST_COMPLETED)
            if writer.done():
                await asyncio.wait({reader, timer}, return_when=asyncio.FIRST_COMPLETED)
            timer.cancel()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _until_session_ends(self, session: _Session) -> None:
        """Return when the worker shuts down, or when a drain is complete.

        Changes of state are only watched during a drain: before it, waking
        on every result would cost each execution a round of this loop.
        """
        while not self._shutdown.is_set():
            if not session.draining:
                await _wait_any(session.drain_received.wait(), self._shutdown.wait())
                continue
            change = self._next_change()
            if self._quiet():
                level, more = self._limited.level("drained", logging.INFO)
                log.log(level, "drained: every attempt decided and acknowledged%s", more)
                return
            left: float | None = None
            if session.drain_deadline is not None:
                left = (session.drain_deadline - self._clock.now()).total_seconds()
                if left <= 0:
                    level, more = self._limited.level("drained", logging.INFO)
                    log.log(level, "drain deadline passed with %d in flight%s", len(self.in_flight()), more)
                    return
            waits: list[Awaitable[Any]] = [change, self._shutdown.wait()]
            if left is not None:
                waits.append(self._clock.sleep(left))
            await _wait_any(*waits)

    async def _read_loop(self, session: _Session) -> None:
        while True:
            message = await session.call.read()
            if message is grpc.aio.EOF:
                raise _SessionLost("the server closed the stream")
            session.last_seen = self._clock.monotonic()
            kind = message.WhichOneof("message")
            if kind == "assignment":
                assignments = message.assignment.assignments
                attempts = self._checked(assignments)
                session.outstanding = max(0, session.outstanding - len(assignments))
                for attempt in attempts:
                    self._accept(session, attempt)
            elif kind == "cancel":
                reason = message.cancel.reason[:CANCEL_REASON_CHARS]
                for attempt in self._matching(message.cancel.executions):
                    attempt.cancel(reason)
            elif kind == "ack":
                self._apply_acks(session, message.ack.acks)
            elif kind == "drain":
                session.draining = True
                session.drain_received.set()
                if message.drain.HasField("deadline_at"):
                    try:
                        session.drain_deadline = message.drain.deadline_at.ToDatetime(tzinfo=timezone.utc)
                    except (ValueError, OverflowError) as exc:
                        raise _SessionLost("protocol error: the drain's deadline_at is out of range") from exc
                level, more = self._limited.level("drains", logging.INFO)
                log.log(level, "server %s drains: %s%s", session.server_id,
                        _clean(message.drain.reason, self.config.credential), more)
                self._notify()
            elif kind == "welcome":
                level, more = self._limited.level("welcome", logging.WARNING)
                log.log(level, "ignoring a second welcome from server %s%s", session.server_id, more)
            session.wake.set()

    async def _write_loop(self, session: _Session) -> None:
        """The only writer of the stream: results, then credit, then a heartbeat (or the half-close)."""
        call = session.call
        while True:
            await session.wake.wait()
            session.wake.clear()
            while session.unsent:
                keys = list(itertools.islice(session.unsent, RESULTS_PER_MESSAGE))
                batch = []
                size = 0
                for key in keys:
                    result = self._unacked.get(key)
                    if result is not None:
                        size += _size_bound(result)
                        if size > RESULT_MESSAGE_BYTES and batch:
                            break  # this one goes in the next message
                        batch.append(result)
                    del session.unsent[key]
                if batch:
                    # Extending the request's own field copies each result once; PullRequest(result=
                    # WorkerResults(results=batch)) copies it twice (the WorkerResults is copied too).
                    request = worker_pb2.PullRequest()
                    request.result.results.extend(batch)
                    await call.write(request)
            credit = self._grantable(session)
            if credit > 0:
                session.outstanding += credit
                await call.write(worker_pb2.PullRequest(credit=worker_pb2.WorkerCredit(credits=credit)))
            if session.closing:
                await call.done_writing()
                return
            if session.heartbeat_due:
                session.heartbeat_due = False
                await call.write(worker_pb2.PullRequest(heartbeat=self._heartbeat()))

    async def _tick(self, session: _Session) -> None:
        while True:
            await self._clock.sleep(session.interval)
            self._outages.ok()  # the stream lasted a heartbeat interval: an outage is over
            session.heartbeat_due = True
            session.wake.set()

    async def _watch_server(self, session: _Session) -> None:
        limit = session.interval * self.config.server_silence_intervals
        while True:
            left = session.last_seen + limit - self._clock.monotonic()
            if left <= 0:
                raise _SessionLost(f"no message from the server for {limit:g}s: presumed dead")
            await self._clock.sleep(left)

    # -- state -------------------------------------------------------------

    def _hello(self) -> worker_pb2.WorkerHello:
        """The hello of a new stream: ``in_flight`` lists every attempt not yet
        decided, then every result not yet acknowledged (at most
        :data:`MAX_IN_FLIGHT`), so that the server re-attaches their
        deliveries to this stream and takes their results from it."""
        held = dict.fromkeys(self.in_flight())
        held.update(dict.fromkeys(self._unacked))
        return worker_pb2.WorkerHello(
            worker_id=self.config.worker_id,
            version=VERSION,
            handlers=self.handlers.names(),
            http=self.config.http,
            slots=self.config.slots,
            in_flight=[
                worker_pb2.InFlightExecution(execution_id=key[0], delivery=key[1])
                for key in itertools.islice(held, MAX_IN_FLIGHT)
            ],
        )

    def _heartbeat(self) -> worker_pb2.WorkerHeartbeat:
        heartbeat = worker_pb2.WorkerHeartbeat()
        add = heartbeat.executions.add
        for key, attempt in self._attempts.items():
            if not attempt.decided:
                add(execution_id=key[0], delivery=key[1], progress=attempt.progress)
        return heartbeat

    def _grantable(self, session: _Session) -> int:
        if self._stopping or session.draining or session.closing or self._shutdown.is_set():
            return 0
        held = len(self._attempts)
        # Never so much that a hello could not list everything held: a server that never acks
        # would otherwise have the results of real attempts grow without end.
        return max(0, min(self.config.slots - held, MAX_IN_FLIGHT - held - len(self._unacked)) - session.outstanding)

    def _quiet(self) -> bool:
        """Nothing left to report: every attempt decided and every result acknowledged."""
        return not self._unacked and all(attempt.decided for attempt in self._attempts.values())

    def _notify(self) -> None:
        """Wake everyone waiting for a change of state (a broadcast).

        Called for every result and every ack; with nobody waiting (the
        usual case: only a drain and :meth:`stop` wait) it costs nothing.
        """
        if self._watchers:
            for watcher in self._watchers:
                if not watcher.done():
                    watcher.set_result(None)
            self._watchers = []

    def _next_change(self) -> asyncio.Future[None]:
        """A future done at the next :meth:`_notify`."""
        watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watchers.append(watcher)
        return watcher

    def _matching(self, executions: Iterable[worker_pb2.InFlightExecution]) -> list[Attempt]:
        """Attempts of ``executions``, each once; delivery 0 matches every delivery.

        One pass over the attempts at most, however many entries a server
        sends (a scan an entry would let one message cost entries times attempts).
        """
        found: dict[Key, Attempt] = {}
        by_id: dict[str, list[Attempt]] | None = None
        for execution in executions:
            if execution.delivery:
                key = (execution.execution_id, execution.delivery)
                attempt = self._attempts.get(key)
                if attempt is not None:
                    found[key] = attempt
                continue
            if by_id is None:
                by_id = {}
                for key, attempt in self._attempts.items():
                    by_id.setdefault(key[0], []).append(attempt)
            for attempt in by_id.get(execution.execution_id, ()):
                found[attempt.key] = attempt
        return list(found.values())

    def _checked(self, assignments: Iterable[worker_pb2.Assignment]) -> list[Attempt]:
        """An attempt for each of ``assignments`` (built, not started), or :class:`_SessionLost`
        when one is out of :mod:`~tickwheel_worker.bounds`: nothing of a message is taken unless
        all of it is in bounds. The check reads the strings the attempt's context read already."""
        attempts = []
        settings = self._attempt_settings
        for assignment in assignments:
            attempt = Attempt(assignment, settings)
            ctx = attempt.context
            said = breach(ctx.execution_id, ctx.job_id, ctx.tenant, ctx.traceparent, ctx.payload, ctx.handler,
                          assignment.target.http if attempt.kind == "http" else None)
            if said is not None:
                raise _SessionLost(f"protocol error: {said}")
            attempts.append(attempt)
        return attempts

    def _accept(self, session: _Session, attempt: Attempt) -> None:
        """Take ``attempt`` (built by :meth:`_checked`): start it, or answer its assignment otherwise."""
        assignment = attempt.assignment
        key = attempt.key
        if key in self._attempts:
            level, more = self._limited.level("duplicate", logging.WARNING)
            log_execution(log, level, "duplicate assignment (delivery %d) ignored%s", assignment.delivery, more,
                          execution=assignment.execution_id, job=assignment.job_id, tenant=assignment.tenant)
            return
        if key in self._unacked:  # finished, but the server did not see the result yet
            session.unsent[key] = None
            return
        # Beyond twice the slots held, or once attempts and unacknowledged results fill a hello (a
        # server that never acks; the credit never gets there): refused, so that neither grows
        # without bound.
        if len(self._attempts) >= self._max_held or len(self._attempts) + len(self._unacked) >= MAX_IN_FLIGHT:
            level, more = self._limited.level("beyond credit", logging.ERROR)
            log_execution(log, level, "assignment (delivery %d) beyond this worker's credit; refused%s",
                          assignment.delivery, more, execution=assignment.execution_id, job=assignment.job_id,
                          tenant=assignment.tenant)
            if key not in self._refused and len(self._refused) >= MAX_REFUSED:
                self._forget_refused(session)
                raise _SessionLost(f"protocol error: more than {MAX_REFUSED} assignments beyond the credit "
                                   "unacknowledged")
            self._refused[key] = None
            self._record(key, worker_pb2.ExecutionResult(
                execution_id=assignment.execution_id,
                delivery=assignment.delivery,
                attempt=assignment.attempt,
                outcome=FAILED_RETRYABLE,
                error=f"worker {self.config.worker_id} over capacity: the assignment exceeded its credit",
            ))
            return
        self._attempts[key] = attempt
        attempt.start()

    def _forget_refused(self, session: _Session) -> None:
        """Drop every refusal not yet acknowledged (the server hands those
        executions out again once their deliveries time out); the results of
        real attempts stay."""
        for key in self._refused:
            self._unacked.pop(key, None)
            session.unsent.pop(key, None)
        self._refused.clear()
        self._notify()

    def _forget(self, attempt: Attempt) -> None:
        """The attempt's task ends: its slot is free."""
        self._attempts.pop(attempt.key, None)
        if self._session is not None:
            self._session.wake.set()  # maybe credit
        self._notify()

    def _record(self, key: Key, result: worker_pb2.ExecutionResult) -> None:
        self._unacked[key] = result
        if self._session is not None:
            self._session.unsent[key] = None
            self._session.wake.set()
        self._notify()

    def _apply_acks(self, session: _Session, acks: Iterable[worker_pb2.ResultAck]) -> None:
        for ack in acks:
            key = (ack.execution_id, ack.delivery)
            held = self._unacked.pop(key, None)
            self._refused.pop(key, None)
            session.unsent.pop(key, None)
            if not ack.accepted and held is not None:
                # The attempt is gone; its id names the execution (a job id is its prefix).
                level, more = self._limited.level("result rejected", logging.WARNING)
                log_execution(log, level, "server rejected the result of delivery %d: %s%s", ack.delivery,
                              _clean(ack.reason, self.config.credential), more, execution=ack.execution_id)
        self._notify()

    async def _abandon_all(self) -> None:
        """Stop every attempt without reporting (the server re-delivers them).

        An async handler runs in its attempt's task, so one that swallows its
        cancellation keeps that task going: it is given ``ABANDON_TIMEOUT``,
        then left running (and logged).
        """
        attempts = list(self._attempts.values())
        for attempt in attempts:
            attempt.reject("the worker stopped")
        tasks = [attempt.task for attempt in attempts if attempt.task is not None]
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        stopped = asyncio.ensure_future(asyncio.gather(*tasks, return_exceptions=True))
        await _wait_any(asyncio.shield(stopped), self._clock.sleep(ABANDON_TIMEOUT))
        if not stopped.done():
            log.warning("%d handlers ignored their cancellation and still run",
                        sum(not task.done() for task in tasks))
