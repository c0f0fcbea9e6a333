"""Calls waiting for their request message: bounded per peer and in time.

grpc.aio reads a unary request (the one message of a unary call, and of a
server-streaming call such as a health ``Watch``) before it runs any of a
method's code: a raw HTTP/2 client that sends a call's HEADERS and never
its message had the call held in gRPC's core and asyncio server (about
15 KiB) for as long as it kept the connection, 100 a connection, with no
credential and no Tickwheel code to see it (loadtest/RESULTS.md, "calls
held by their headers"). So the port's methods with a unary request are
served as client-streaming ones (:func:`early`; the wire is the same, a
client cannot tell): their code runs once the HEADERS arrive, meets the
refusal windows and the start's refusal (:mod:`.decoding`), then reads
the message here (:meth:`AwaitedRequests.read`):

- a caller has at most :data:`MAX_PER_PEER` calls waiting for their
  message at once, on all its connections together; one more is refused
  RESOURCE_EXHAUSTED at once, naming the bound. A call's caller is its
  bearer secret when that verified on this server lately
  (:attr:`AwaitedRequests.trusted`, the authenticator's), else its peer
  (:func:`~tickwheel_server.auth.failures.peer_key`: its address, an
  IPv6 one by its /64): a client without a valid credential cannot take
  the bound of a tenant or worker behind the same address (a NAT);
- a message must have arrived whole within :data:`MESSAGE_SECONDS` of the
  call's HEADERS, else the call ends DEADLINE_EXCEEDED: one sweep every
  :data:`SWEEP_SECONDS` (a task of its own, while any call waits) ends the
  calls whose time ran out, so a call waits at most that much longer, and
  a call costs no timer of its own (an ``asyncio.timeout`` a call was a
  timer handle pushed on and cancelled off the loop's heap, every call);
- a call whose client ends its stream without a message is answered
  INVALID_ARGUMENT (gRPC held such a call unanswered for as long as the
  connection lived).

An honest client sends a call's message with its HEADERS: its calls wait
for microseconds, a 4 MiB request on a slow link for seconds. The
bound is per caller, not for the port: a port-wide one would let one
address refuse everyone's calls.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

import grpc

from ..auth import failures, tokens

MAX_PER_PEER = 256
MESSAGE_SECONDS = 20.0
SWEEP_SECONDS = 1.0


class AwaitedRequests:
    """The calls waiting for their request message now, by peer (see the module docstring)."""

    def __init__(
        self, *, per_peer: int = MAX_PER_PEER, seconds: float = MESSAGE_SECONDS, sweep_seconds: float = SWEEP_SECONDS
    ) -> None:
        if per_peer < 1 or not seconds > 0 or not sweep_seconds > 0:
            raise ValueError("per_peer must be >= 1, seconds and sweep_seconds > 0")
        self.per_peer, self.seconds, self.sweep_seconds = per_peer, seconds, sweep_seconds
        self._by_caller: dict[str, int] = {}
        """Calls waiting now, by caller (a trusted secret, or a peer's key)."""
        self._deadlines: dict[asyncio.Task, float] = {}
        """The tasks of the calls waiting now, each with the loop time its message is due by."""
        self._expired: set[asyncio.Task] = set()
        """Tasks the sweep cancelled because their time ran out (they see it as their timeout)."""
        self._sweeper: asyncio.Task | None = None
        self.trusted: Callable[[str], bool] = lambda secret: False
        """Whether a bearer secret verified on this server lately (the
        authenticator's): such a call counts under its secret, not its peer."""
        self.refused = 0
        """Calls refused: their peer had as many waiting as it may."""
        self.timed_out = 0
        """Calls whose message did not arrive in time."""

    def waiting(self) -> int:
        """Calls waiting for their message now."""
        return sum(self._by_caller.values())

    async def read(self, context: grpc.aio.ServicerContext, secret: str | None) -> bytes:
        """The call's request message as sent; refused through
        ``context.abort`` (which raises) past :data:`MAX_PER_PEER` or
        :data:`MESSAGE_SECONDS`, or when the client sent none. ``secret``:
        the call's bearer secret or None, as its edge read it from the
        metadata (:func:`~tickwheel_server.auth.tokens.bearer_secret`)."""
        trusted = secret is not None and self.trusted(secret)
        peer = secret if trusted else failures.peer_key(context.peer() or "")
        held = self._by_caller.get(peer, 0)
        if held >= self.per_peer:
            self.refused += 1
            who = "this credential" if trusted else peer  # never the secret
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{who} has {held} calls waiting for their request message (at most {self.per_peer}): "
                "send a call's message with its headers",
            )  # fmt: skip
        self._by_caller[peer] = held + 1
        task = asyncio.current_task()
        # The loop's clock, not the server's injected one: a transport bound
        # like gRPC's keepalive, kept by the sweep (no timer a call).
        loop = task.get_loop()
        self._deadlines[task] = loop.time() + self.seconds
        sweeper = self._sweeper
        if sweeper is None or sweeper.done() or sweeper.get_loop() is not loop:  # none yet, or a past loop's
            self._sweeper = loop.create_task(self._sweep(), name="awaited requests: sweep")
        timed_out = False
        try:
            message = await context.read()
        except asyncio.CancelledError:
            if task not in self._expired or task.uncancel():
                raise  # cancelled by someone else too (the client, the server's stop)
            self.timed_out += 1
            message = None
            timed_out = True
        finally:
            del self._deadlines[task]
            self._expired.discard(task)
            left = self._by_caller[peer] - 1
            if left:
                self._by_caller[peer] = left
            else:
                del self._by_caller[peer]
        if timed_out:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"the request message did not arrive within {self.seconds:g} s of the call's headers")
        if message is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the call ended without its request message")
        return message

    async def _sweep(self) -> None:
        """Every :attr:`sweep_seconds` while any call waits: cancel the
        calls whose message is past due (their :meth:`read` answers
        DEADLINE_EXCEEDED); ends at a sweep that finds none waiting."""
        while True:
            await asyncio.sleep(self.sweep_seconds)
            if not self._deadlines:
                self._sweeper = None
                return
            now = asyncio.get_running_loop().time()
            for task, deadline in self._deadlines.items():
                if deadline <= now and task not in self._expired:
                    self._expired.add(task)
                    task.cancel()


def early(handler: grpc.RpcMethodHandler, requests: AwaitedRequests) -> grpc.RpcMethodHandler:
    """``handler`` with a unary request served as a client-streaming one:
    its behaviour is called with its request once :meth:`AwaitedRequests.read`
    read it, decoded by the handler's deserializer (bytes that do not
    parse: INVALID_ARGUMENT). A handler with a streaming request is
    returned as it is. For handlers served as they are (health's): the
    guarded services do the same in ``decoding``, after their own checks."""
    if handler.request_streaming:
        return handler
    deserialize = handler.request_deserializer or (lambda raw: raw)
    serialize = handler.response_serializer

    async def request(context):
        raw = await requests.read(context, tokens.bearer_secret(context.invocation_metadata())[1])
        try:
            return deserialize(raw)
        except Exception:  # DecodeError and kin: not this method's message
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the request is not a valid message")

    if handler.unary_unary is not None:
        behaviour = handler.unary_unary

        async def unary_unary(_, context):
            return await behaviour(await request(context), context)

        return grpc.stream_unary_rpc_method_handler(unary_unary, response_serializer=serialize)
    behaviour = handler.unary_stream
    if inspect.isasyncgenfunction(behaviour):

        async def unary_stream(_, context):
            async for response in behaviour(await request(context), context):
                yield response

    else:

        async def unary_stream(_, context):
            return await behaviour(await request(context), context)

    return grpc.stream_stream_rpc_method_handler(unary_stream, response_serializer=serialize)


class EarlyRegistration:
    """What a generated ``add_<Service>Servicer_to_server`` registers
    through for a service served as it is (health): each method handler
    passed :func:`early`, then added to the server as one generic handler
    (never as registered methods: :class:`~tickwheel_server.transport.GenericOnly`
    says why)."""

    def __init__(self, server: grpc.aio.Server, requests: AwaitedRequests) -> None:
        self._server = server
        self._requests = requests

    def add_generic_rpc_handlers(self, handlers) -> None:
        """Ignored: the generated code passes the same handlers, by name, to
        :meth:`add_registered_method_handlers`."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        early_handlers = {name: early(handler, self._requests) for name, handler in handlers.items()}
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, early_handlers),))
