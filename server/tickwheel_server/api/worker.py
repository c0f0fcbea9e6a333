"""WorkerService.Pull: the worker's one long-lived stream.

Authentication, hello and welcome, credit, worker heartbeats, server
heartbeats and drain happen here (a worker silent for the heartbeat
timeout, its hello included, has its stream ended with UNAVAILABLE; the
credential is checked when the stream opens, at its hello, and once the
stream is listed, before its welcome and credit, so no stream outlives a
revocation that answered before it was welcomed); executions are handed out by the gateway
through each connection's outbox, and results go to the gateway, which
records them and acknowledges each (a stale delivery is rejected, never
applied; one the stream does not hold, or another tenant's, is answered as
an unknown id). A stream the server ended (its credential was revoked, see
:mod:`tickwheel_server.gateway.revocation`, or it sent more than its
credential's budget of what its streams do not hold, see
:mod:`tickwheel_server.gateway.budget`) ends with that status
(UNAUTHENTICATED, RESOURCE_EXHAUSTED), and nothing it sends afterwards is read.

A hello past the server's stream caps (its streams, its credential's
streams and slots: :class:`~tickwheel_server.gateway.connections.StreamCaps`)
is refused with RESOURCE_EXHAUSTED naming the cap, and so is a stream
opened while as many of its credential's streams as its stream cap wait
for their hello (:meth:`~tickwheel_server.gateway.connections.Connections.before_hello`). A stream's credit never
exceeds its hello's slots (more is cut: an honest worker never has more
outstanding), and a credit message outside 1 to :data:`MAX_SLOTS` ends the
stream (INVALID_ARGUMENT on ``credit.credits``). A hello refused by a cap
or by the budget, and a stream ended over the budget or by a second
hello, are logged at WARNING once a minute per cause and credential, the
rest DEBUG (:class:`~tickwheel_server.telemetry.refusals.RefusalLog`): a
worker retrying at once would otherwise write a line a try.

A refusal by a cap opens a refusal window for its credential
(:mod:`tickwheel_server.auth.windows`, under :data:`CAP_KEY` and the
bearer secret): a hello of that credential refused again by a cap inside
it is answered with the window's RetryInfo, and one that keeps coming is
held and told a longer delay, as calls inside a window are. So a
credential past its cap retrying at once costs a few hellos a second per
stream it keeps trying, not as many as the server can answer. Only a
refused hello meets the window: one that fits (a fleet's other worker, a
worker replacing its own stream) is served as before.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from datetime import timedelta

import grpc
from google.protobuf import duration_pb2
from tickwheel.v1 import worker_pb2, worker_pb2_grpc

from tickwheel.shared.clock import Clock

from ..auth.authenticator import Authenticator
from ..auth.windows import caller_key
from ..errors import FailedPrecondition, InvalidArgument, PermissionDenied, TickwheelError, Unavailable
from ..gateway.budget import OverBudget
from ..gateway.connections import Connections, StreamRefused, WorkerConnection
from ..gateway.gateway import Gateway
from ..store.executions import NOT_HELD
from ..telemetry.outages import OutageLog
from ..telemetry.refusals import RefusalLog
from .status import abort, refusal_answer
from .validate import HANDLER, HANDLER_MAX

log = logging.getLogger(__name__)

WORKER_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}\Z")
MAX_SLOTS = 10_000
MAX_IN_FLIGHT = 2 * MAX_SLOTS
"""Entries of ``hello.in_flight``: a worker holds at most twice its slots."""
MAX_HANDLERS = 1000
"""Entries of ``hello.handlers``: each round of the stream's group reads them all."""
HANDLER_NAME_MAX = HANDLER_MAX
"""As a job's handler name (:data:`~.validate.HANDLER`, whose characters a
hello's names are held to too): another name matches no job, and one
holding NUL failed every hand-out round of its stream's tenants on
PostgreSQL (its text array refused), logged at ERROR a few times a
second, while a line break in one forged the "connected" log line."""
CAP_KEY = "cap "
"""Prefix of the refusal window of a credential's hellos refused by a cap
(a secret holds no space: never another caller's key)."""


def _duration(seconds: float) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromTimedelta(timedelta(seconds=seconds))
    return message


def _shown(handlers) -> str:
    """Handler names for a log line: the first few, and how many in all."""
    names = sorted(handlers)
    shown = ", ".join(names[:10])
    return f"[{shown}]" if len(names) <= 10 else f"[{shown}, ... ({len(names)} in all)]"


def check_hello(hello: worker_pb2.WorkerHello, credential) -> None:
    """Validate a hello against its credential; raises InvalidArgument or PermissionDenied."""
    if not WORKER_ID.match(hello.worker_id):
        raise InvalidArgument.field("hello.worker_id", "1 to 128 characters of [A-Za-z0-9_.:-]")
    if not 0 <= hello.slots <= MAX_SLOTS:
        raise InvalidArgument.field("hello.slots", f"must be between 0 and {MAX_SLOTS} (0 means 1)")
    if len(hello.in_flight) > MAX_IN_FLIGHT:
        raise InvalidArgument.field("hello.in_flight", f"at most {MAX_IN_FLIGHT} executions")
    if len(hello.handlers) > MAX_HANDLERS or any(not HANDLER.match(name) for name in hello.handlers):
        raise InvalidArgument.field(
            "hello.handlers", f"at most {MAX_HANDLERS} names, each 1 to {HANDLER_NAME_MAX} characters of [A-Za-z0-9_.:-]",
        )
    if not hello.handlers and not hello.http:
        raise InvalidArgument.field("hello.handlers", "a worker must serve at least one handler or HTTP targets")
    if credential.handlers:
        refused = sorted(set(hello.handlers) - set(credential.handlers))
        if refused:
            raise PermissionDenied(f"the worker credential may not serve handlers {refused}")
    if hello.http and not credential.http:
        raise PermissionDenied("the worker credential may not run HTTP targets")


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(
        self,
        auth: Authenticator,
        connections: Connections,
        clock: Clock,
        *,
        server_id: str,
        session_id: str = "",
        heartbeat_interval: float = 5.0,
        heartbeat_timeout: float = 30.0,
        gateway: Gateway | None = None,
        draining: Callable[[], bool] = lambda: False,
        starting: Callable[[], str] = lambda: "",
    ) -> None:
        self.gateway = gateway
        self._draining = draining
        """Whether this server is draining: it then takes no new worker stream."""
        self._starting = starting
        """While this server's start is not done, why (it then takes no worker stream); empty once done."""
        self._auth = auth
        self._connections = connections
        self._clock = clock
        self.reattach_outages = OutageLog(log, "WorkerService.Pull", clock, then="refused; the worker says hello again")
        """Hellos refused because their executions could not be re-attached (the store is down): one line an outage."""
        self._server_id = server_id
        self.session_id = session_id
        self._heartbeat_interval = heartbeat_interval
        self._heartbeat_timeout = heartbeat_timeout
        self.refusals = RefusalLog(now=clock.monotonic)
        """Hellos and streams refused, by (cause, credential id): a worker retrying at once would say each."""

    def _log_refused(self, cause: str, connection: WorkerConnection, message: str, *args) -> None:
        """A hello or a stream refused: at WARNING once a minute per cause and credential, the rest DEBUG."""
        said = self.refusals.refused((cause, connection.credential.id))
        log.log(logging.WARNING if said else logging.DEBUG, message, *args)

    def _over_budget(self, connection: WorkerConnection, error: OverBudget) -> None:
        """End a stream whose credential sent more than its budget of what its streams do not hold."""
        self._log_refused("budget", connection, "worker %s: %s", connection.worker_id, error)
        connection.end(error)

    async def Pull(self, request_iterator, context: grpc.aio.ServicerContext):
        try:
            opened = await self._auth.worker(context)  # a wrong credential is refused before anything is read
            with self._connections.before_hello(opened.id):  # bounded per credential until it says hello
                first = await self._first_message(request_iterator)
            if first is None:
                return
            if first.WhichOneof("message") != "hello":
                raise FailedPrecondition("stream", "the first message must be hello")
            # Checked again now: revoking ends only the streams that said hello,
            # so one opened before the revocation must not say it after.
            credential = await self._auth.worker(context)
            check_hello(first.hello, credential)
        except StreamRefused as error:  # as many of its streams wait for their hello as it may hold
            await self._refuse_past_cap(context, error)
            return
        except TickwheelError as error:
            await abort(context, error)
            return
        if starting := self._starting():  # the worker says hello again with backoff
            await context.abort(grpc.StatusCode.UNAVAILABLE, starting)
            return
        if self._draining():  # a drained worker coming back, or a new one: both belong elsewhere
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"server {self._server_id} is draining: connect to another")
            return
        hello = first.hello
        connection = WorkerConnection(
            worker_id=hello.worker_id,
            credential=credential,
            handlers=frozenset(hello.handlers),
            http=hello.http,
            slots=hello.slots or 1,
            connected_at=self._clock.now(),
            credit=0,  # the hello's credit once the stream is listed and its credential checked there
            last_message=self._clock.monotonic(),
        )
        try:
            self._connections.reserve(connection)
        except StreamRefused as error:
            self._log_refused("cap", connection, "%s (%d hellos refused by a cap so far)", error,
                              self._connections.refused)
            await self._refuse_past_cap(context, error)
            return
        try:
            await self._serve(connection, hello, request_iterator, context)
        finally:
            self._connections.release(connection)

    async def _refuse_past_cap(self, context: grpc.aio.ServicerContext, error: StreamRefused) -> None:
        """Refuse a stream past a cap (``context.abort``, which raises):
        outside its credential's cap window, with ``error`` and a window
        opened for its delay; inside, with the window's answer, held and
        escalated as :meth:`~tickwheel_server.auth.windows.RefusalWindows.refuse` holds."""
        windows = self._auth.windows
        key = CAP_KEY + caller_key(context)
        window = windows.inside(key)
        if window is None:
            error.retry_after = windows.opened(key, error, error.retry_after)
            await abort(context, error)
        else:
            await windows.refuse(window, context.abort, refusal_answer)

    async def _first_message(self, request_iterator) -> worker_pb2.PullRequest | None:
        """The stream's first message (None: it ended without one). A stream
        is counted against its credential's caps and watched for silence
        from its hello on, so one that sends nothing for the heartbeat
        timeout is ended (UNAVAILABLE) rather than kept uncounted for ever."""
        reading = asyncio.ensure_future(anext(aiter(request_iterator), None))
        waiting = asyncio.ensure_future(self._clock.sleep(self._heartbeat_timeout))
        try:
            await asyncio.wait((reading, waiting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            if not reading.done():
                reading.cancel()
        if not reading.done() or reading.cancelled():
            raise Unavailable(f"no hello from the worker within {self._heartbeat_timeout:g} s of the stream's start")
        return reading.result()

    async def _serve(self, connection: WorkerConnection, hello: worker_pb2.WorkerHello, request_iterator,
                     context: grpc.aio.ServicerContext) -> None:
        """The stream after its hello passed the checks and the caps: re-attach, welcome, then serve it."""
        held = [(item.execution_id, item.delivery) for item in hello.in_flight]
        if self.gateway is not None:
            try:
                # A hello listing as many as it may could have been cut: it disowns nothing.
                reattached, rejected = await self.gateway.liveness.reattach(
                    connection, held, listed_all=len(held) < MAX_IN_FLIGHT
                )
            except OverBudget as error:
                self._log_refused("budget", connection, "worker %s refused: %s", hello.worker_id, error)
                await abort(context, error)
                return
            except Unavailable as error:  # this server's session is in doubt: a refusal, not a defect
                self._log_refused("unavailable", connection, "worker %s refused, to say hello again: %s",
                                  hello.worker_id, error)
                await abort(context, error)
                return
            except Exception as error:  # the store is down (UNAVAILABLE): the worker says hello again later
                self.reattach_outages.failed(f"re-attaching worker {hello.worker_id}'s executions", error)
                await abort(context, error)
                return
            self.reattach_outages.ok()
        else:
            reattached, rejected = [], held
        self._connections.add(connection)
        try:
            # Once more, now that the stream is listed: a revocation that ended the listed
            # streams before it dropped the credential from the cache first, so it is refused here.
            await self._auth.worker(context)
        except TickwheelError as error:
            connection.close()
            self._connections.remove(connection)
            if self.gateway is not None:
                self.gateway.liveness.disconnected(connection)
            await abort(context, error)
            return
        connection.credit = connection.slots
        if self.gateway is not None:
            self.gateway.wake()
        log.info(
            "worker %s connected (%d slots, handlers %s; %d executions re-attached, %d rejected)",
            hello.worker_id, connection.slots, _shown(hello.handlers), len(reattached), len(rejected),
        )
        welcome = worker_pb2.ServerWelcome(
            server_id=self._server_id,
            session_id=self.session_id,
            heartbeat_interval=_duration(self._heartbeat_interval),
            heartbeat_timeout=_duration(self._heartbeat_timeout),
            reattached=[worker_pb2.InFlightExecution(execution_id=i, delivery=d) for i, d in reattached],
            rejected=[worker_pb2.InFlightExecution(execution_id=i, delivery=d) for i, d in rejected],
        )
        await connection.send(worker_pb2.PullResponse(welcome=welcome))
        tasks = [
            asyncio.create_task(self._read(connection, request_iterator)),
            asyncio.create_task(self._heartbeats(connection)),
        ]
        try:
            # Closed with a full outbox, the end marker found no room: the
            # writer then ends once it has written what is queued.
            while not (connection.closed.is_set() and connection.outbox.empty()):
                message = await connection.outbox.get()
                if message is None:
                    break
                await self._write(connection, context, message)
        finally:
            connection.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._connections.remove(connection)
            if self.gateway is not None:
                self.gateway.liveness.disconnected(connection)
            log.info("worker %s disconnected", hello.worker_id)
        # Told only now that the stream is gone from the server: a worker that
        # reads nothing never receives the status, which waits behind what it
        # left unread.
        if connection.ended_by is not None:  # revoked, over its budget, not reading: the worker is told why
            await abort(context, connection.ended_by)

    @staticmethod
    async def _write(connection: WorkerConnection, context: grpc.aio.ServicerContext, message) -> None:
        """Write one message; a write still waiting when the server ends the
        stream (:meth:`WorkerConnection.end`: a worker that reads nothing
        has its window full) is given up, and the stream ends."""
        task = asyncio.current_task()
        assert task is not None
        connection.writing = task
        try:
            await context.write(message)
        except asyncio.CancelledError:
            if not connection.write_given_up or task.cancelling() > 1:
                raise
            task.uncancel()  # cancelled by end(): the stream's status follows
        finally:
            connection.writing = None

    async def _read(self, connection: WorkerConnection, request_iterator) -> None:
        try:
            async for request in request_iterator:
                if connection.ended_by is not None:  # nothing the stream sends after its end counts
                    break
                connection.last_message = self._clock.monotonic()
                kind = request.WhichOneof("message")
                if kind == "credit":
                    credits = request.credit.credits
                    if not 0 < credits <= MAX_SLOTS:
                        connection.end(InvalidArgument.field("credit.credits", f"must be between 1 and {MAX_SLOTS}"))
                        return
                    # Never more than the stream's slots: more is what no worker
                    # could run, only pull out of the tenants' other workers' reach.
                    connection.credit = min(connection.credit + credits, connection.slots)
                    if self.gateway is not None:
                        self.gateway.wake()
                elif kind == "heartbeat":
                    listed = request.heartbeat.executions
                    if len(listed) > MAX_IN_FLIGHT:  # more than a worker may hold
                        connection.end(InvalidArgument.field("heartbeat.executions",
                                                             f"at most {MAX_IN_FLIGHT} executions"))
                        return
                    if self.gateway is not None:
                        try:
                            self.gateway.liveness.heartbeat(connection, [(e.execution_id, e.delivery) for e in listed])
                        except OverBudget as error:
                            self._over_budget(connection, error)
                            return
                elif kind == "result" and self.gateway is not None:
                    try:
                        await self.gateway.intake.submit_results(connection, request.result.results)
                    except OverBudget as error:
                        self._over_budget(connection, error)
                        return
                elif kind == "result":
                    acks = [
                        worker_pb2.ResultAck(
                            execution_id=result.execution_id,
                            delivery=result.delivery,
                            accepted=False,
                            reason=NOT_HELD,
                        )
                        for result in request.result.results
                    ]
                    await connection.send(worker_pb2.PullResponse(ack=worker_pb2.ResultAcks(acks=acks)))
                elif kind == "hello":  # a protocol error: the stream ends
                    self._log_refused("second hello", connection, "worker %s sent a second hello: its stream is ended",
                                      connection.worker_id)
                    connection.end(FailedPrecondition("stream", "hello is the first message of a stream, and only that"))
                    return
        finally:
            connection.close()

    async def _heartbeats(self, connection: WorkerConnection) -> None:
        """Every heartbeat interval: a server heartbeat, unless the worker has
        been silent for the heartbeat timeout. Such a stream is ended: a
        frozen or cut-off worker would otherwise keep its credit and be
        handed work that waits a whole timeout to be taken back. A worker
        that is alive reconnects and says what it still holds."""
        while not connection.closed.is_set():
            await self._clock.sleep(self._heartbeat_interval)
            now = self._clock.monotonic()
            if connection.silent(now, self._heartbeat_timeout):
                silent = now - (connection.last_message or now)
                log.warning("worker %s silent for %.1f s: its stream is ended", connection.worker_id, silent)
                connection.end(Unavailable(f"no message from worker {connection.worker_id} for {silent:.1f} s "
                                           f"(the heartbeat timeout is {self._heartbeat_timeout:g} s): reconnect"))
                return
            beat = worker_pb2.ServerHeartbeat()
            beat.sent_at.FromDatetime(self._clock.now())
            await connection.send(worker_pb2.PullResponse(heartbeat=beat))
