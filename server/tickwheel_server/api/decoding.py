"""Request decoding at the gRPC edge: bytes that are not the method's message
answer INVALID_ARGUMENT, never reach a servicer, and are not stored.

grpc.aio calls a method's request deserializer before any servicer code
runs; one that raises makes the call answer UNKNOWN with the exception's
class and logs a traceback at ERROR, for every call, before authentication.
:func:`guard` wraps a server's registration so that each method of a service
gets a deserializer that never raises: bytes that do not parse (malformed
wire data, a string field that is not UTF-8, nesting too deep) become a
:class:`Refused` value, which the wrapped handler answers with
INVALID_ARGUMENT "the request is not a valid <Message>: ..." (a BadRequest
on the empty path: the request as a whole) without calling the servicer.
On a streaming method every message of the stream is guarded; a bad one
ends the stream with that status. Such refusals are logged at WARNING at
most once a minute per service, with a count
(:class:`~tickwheel_server.telemetry.refusals.RefusalLog`).
A unary method may answer with :class:`Serialized` bytes of its response
message, which go out as they are.

With ``discard_unknown`` (the default) every decoded request loses its
unknown fields (fields of a newer contract, or bytes smuggled in under
unused numbers): what this server does not know it neither stores nor
echoes. WorkerService turns it off: its messages are read field by field,
never stored whole, and the Pull stream is a hot path. With ``refuse_nul``
(tenant and operator services), a string field anywhere in the request
holding U+0000 is refused too, naming the field: no such string is ever
meaningful and PostgreSQL cannot store one.

With ``starting`` (tenant and operator services), every call is refused
with UNAVAILABLE and the start's refusal ("starting: waiting for etcd at
…") until ``starting.done``: before the request is looked at, its caller
authenticated or anything read or written (:mod:`tickwheel_server.waiting`).

With ``windows`` (every service), a call whose caller
(:func:`~tickwheel_server.auth.windows.caller_key`) was refused with a
retry delay that has not ended is refused again with that status, before
its request is decoded (a unary method's request is decoded in its
handler, after this check, not as gRPC's deserializer) or its credential
checked (:mod:`tickwheel_server.auth.windows`); a stream (a worker's Pull,
WatchAlerts) as it opens, before its servicer runs.

A method with a unary request (every unary method, and WatchAlerts) is
served as a client-streaming one: its code runs once the call's HEADERS
arrive, so the checks above come before its message is even awaited,
and the message is then read under :class:`~.awaited.AwaitedRequests`'
bounds (per peer, and in time): gRPC held a call whose message never came
before any of this ran (:mod:`.awaited`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Protocol

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from ..auth.tokens import read_at_edge
from ..auth.windows import RefusalWindows, secret_key
from ..errors import FieldViolation, InvalidArgument
from ..telemetry.refusals import RefusalLog
from .awaited import AwaitedRequests
from .status import abort, refusal_answer

log = logging.getLogger(__name__)

_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE


class Starting(Protocol):
    """A server's start, as the guard sees it: ``done`` is read once a call."""

    done: bool

    def refusal(self) -> str:
        """The message of a call refused while the start is not done."""


class _Started:
    """A start that is done: the guard of a service that waits for none."""

    done = True

    def refusal(self) -> str:
        return ""


STARTED = _Started()


class Refused:
    """A request refused while decoding: the error its call answers with;
    ``undecodable`` when the bytes did not parse (those are logged)."""

    __slots__ = ("error", "undecodable")

    def __init__(self, error: InvalidArgument, undecodable: bool) -> None:
        self.error = error
        self.undecodable = undecodable


NUL_SEARCHED = 65_536
"""At most this many list and map entries of one request are searched for
NUL: a hostile request holds a zero byte (in a bytes field, say) and lists
up to its 4 MiB (hundreds of thousands of entries, each a Python step
here); past this many, the field being searched is named unsearched
(:data:`UNSEARCHED`). Far above what any valid request lists (the API's
count bounds refuse such a request anyway), so a valid one is searched whole."""

UNSEARCHED = f"not searched for NUL (U+0000): the request holds a zero byte and more than {NUL_SEARCHED} list entries"


def nul_fields(message: Message, prefix: str = "") -> list[str]:
    """The paths of the string fields of ``message`` (nested messages, lists
    and maps included) that hold U+0000; past :data:`NUL_SEARCHED` entries
    searched, the field being searched then, marked ``" (unsearched)"``
    (the search stops there)."""
    found: list[str] = []
    _search(message, prefix, found, [NUL_SEARCHED])
    return found


def _search(message: Message, prefix: str, found: list[str], left: list[int]) -> bool:
    """:func:`nul_fields` into ``found``, ``left[0]`` entries left to
    search; False once they ran out (the search is over)."""
    for field, value in message.ListFields():
        path = f"{prefix}{field.name}"
        if field.is_repeated:
            left[0] -= len(value)
            if left[0] < 0:
                found.append(f"{path} (unsearched)")
                return False
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field, value_field = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            for key, item in value.items():
                if (key_field.type == _STRING and "\0" in key) or (value_field.type == _STRING and "\0" in item):
                    found.append(path)
                    break
                if value_field.type == _MESSAGE and not _search(item, f"{path}.", found, left):
                    return False
        elif field.type == _STRING:
            items = value if field.is_repeated else (value,)
            found += [path for item in items if "\0" in item][:1]
        elif field.type == _MESSAGE:
            if field.is_repeated:
                for index, item in enumerate(value):
                    if not _search(item, f"{path}[{index}].", found, left):
                        return False
            elif not _search(value, f"{path}.", found, left):
                return False
    return True


def decoder(
    message_class: type[Message], *, refuse_nul: bool, discard_unknown: bool = True
) -> Callable[[bytes], Message | Refused]:
    """A request deserializer that never raises: the message (without its
    unknown fields when ``discard_unknown``), or :class:`Refused`."""
    name = message_class.DESCRIPTOR.full_name
    upb_prefix = f"Error parsing message with type '{name}'"

    def decode(raw: bytes) -> Message | Refused:
        try:
            message = message_class.FromString(raw)
        except Exception as error:  # DecodeError, RecursionError, ...: not this message, whatever the cause
            reason = str(error)
            if reason.startswith(upb_prefix):
                reason = reason[len(upb_prefix) :].lstrip(": ")
            reason = reason or "malformed wire data"
            return Refused(InvalidArgument.field("", f"the request is not a valid {name}: {reason}"), True)
        if discard_unknown:
            message.DiscardUnknownFields()
        if refuse_nul and b"\0" in raw:  # a NUL in a string is a zero byte on the wire: most requests have none
            paths = nul_fields(message)
            if paths:
                return Refused(InvalidArgument([_nul_violation(p) for p in paths]), False)
        return message

    return decode


def _nul_violation(path: str) -> FieldViolation:
    if path.endswith(" (unsearched)"):
        return FieldViolation(path.removesuffix(" (unsearched)"), UNSEARCHED)
    return FieldViolation(path, "may not contain NUL (U+0000)")


class Serialized:
    """A unary method's response already serialized as its message (built
    from serialized parts, :mod:`.batchanswer`): ``data`` is sent as it
    is, rather than parsed into the message only to be serialized again."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def _passing_serialized(serialize: Callable[[Message], bytes]) -> Callable[[Message | Serialized], bytes]:
    def serialized(response: Message | Serialized) -> bytes:
        return response.data if type(response) is Serialized else serialize(response)

    return serialized


def _guard_handler(
    handler: grpc.RpcMethodHandler, method: str, refusals: RefusalLog, *, refuse_nul: bool, discard_unknown: bool,
    starting: Starting, windows: RefusalWindows | None = None,
    awaited: AwaitedRequests | None = None,
) -> grpc.RpcMethodHandler:
    awaited = awaited or AwaitedRequests()
    message_class = handler.request_deserializer.__self__
    decode = decoder(message_class, refuse_nul=refuse_nul, discard_unknown=discard_unknown)
    serialize = handler.response_serializer
    service = method.rpartition("/")[0]

    async def refuse(context, refused: Refused) -> None:
        if refused.undecodable and (count := refusals.refused(service)):
            log.warning(
                "%s: refused %d request(s) that were not valid messages since the last such line; latest %s: %s",
                service, count, method, refused.error,
            )  # fmt: skip
        await abort(context, refused.error)

    async def not_yet(context) -> None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, starting.refusal())

    async def opening(context) -> str | None:
        """At a call's start, before its servicer runs or (a unary call) its
        request is decoded: refused while starting, or inside its caller's
        window. The call's bearer secret (None without one), read from its
        metadata once for the window, the request's read and the servicer's
        authenticator (:func:`~tickwheel_server.auth.tokens.call_bearer`)."""
        if not starting.done:
            await not_yet(context)
        _, secret = read_at_edge(context)
        if windows is not None and (window := windows.refusing(context, secret_key(secret, context))) is not None:
            await windows.refuse(window, context.abort, refusal_answer)
        return secret

    if handler.unary_unary is not None:
        behaviour = handler.unary_unary

        async def unary_unary(_, context):
            secret = await opening(context)  # a call refused here is never read nor decoded
            request = decode(await awaited.read(context, secret))
            if type(request) is Refused:
                await refuse(context, request)
            return await behaviour(request, context)

        return grpc.stream_unary_rpc_method_handler(unary_unary, response_serializer=_passing_serialized(serialize))

    async def checked(requests, context):
        async for request in requests:
            if type(request) is Refused:
                await refuse(context, request)
            yield request

    if handler.unary_stream is not None:
        behaviour = handler.unary_stream
        if inspect.isasyncgenfunction(behaviour):

            async def unary_stream(_, context):
                request = decode(await awaited.read(context, await opening(context)))
                if type(request) is Refused:
                    await refuse(context, request)
                async for response in behaviour(request, context):
                    yield response

        else:

            async def unary_stream(_, context):
                request = decode(await awaited.read(context, await opening(context)))
                if type(request) is Refused:
                    await refuse(context, request)
                return await behaviour(request, context)

        return grpc.stream_stream_rpc_method_handler(unary_stream, response_serializer=serialize)
    if handler.stream_unary is not None:
        behaviour = handler.stream_unary

        async def stream_unary(requests, context):
            await opening(context)
            return await behaviour(checked(requests, context), context)

        return grpc.stream_unary_rpc_method_handler(
            stream_unary, request_deserializer=decode, response_serializer=serialize
        )
    behaviour = handler.stream_stream
    if inspect.isasyncgenfunction(behaviour):

        async def stream_stream(requests, context):
            await opening(context)
            async for response in behaviour(checked(requests, context), context):
                yield response

    else:

        async def stream_stream(requests, context):
            await opening(context)
            return await behaviour(checked(requests, context), context)

    return grpc.stream_stream_rpc_method_handler(
        stream_stream, request_deserializer=decode, response_serializer=serialize
    )


class _GuardedRegistration:
    """What a generated ``add_<Service>Servicer_to_server`` registers through:
    the method handlers it passes are guarded, then added to the server as
    one generic handler (never as registered methods:
    :class:`~tickwheel_server.transport.GenericOnly` says why)."""

    def __init__(
        self, server: grpc.aio.Server, refuse_nul: bool, discard_unknown: bool, starting: Starting,
        windows: RefusalWindows | None, requests: AwaitedRequests,
    ) -> None:
        self._server = server
        self._requests = requests
        self._refuse_nul = refuse_nul
        self._discard_unknown = discard_unknown
        self._starting = starting
        self._windows = windows

    def add_generic_rpc_handlers(self, handlers) -> None:
        """Ignored: the generated code passes the same handlers, by name, to
        :meth:`add_registered_method_handlers`, which guards them."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        refusals = RefusalLog()  # keyed by the service: one key
        guarded = {
            name: _guard_handler(
                handler, f"{service}/{name}", refusals, refuse_nul=self._refuse_nul,
                discard_unknown=self._discard_unknown, starting=self._starting, windows=self._windows,
                awaited=self._requests,
            )  # fmt: skip
            for name, handler in handlers.items()
        }
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, guarded),))


def guard(
    server: grpc.aio.Server, *, refuse_nul: bool = True, discard_unknown: bool = True, starting: Starting = STARTED,
    windows: RefusalWindows | None = None, requests: AwaitedRequests | None = None,
) -> _GuardedRegistration:
    """Pass this instead of ``server`` to a generated
    ``add_<Service>Servicer_to_server``: the service's methods are registered
    with guarded request decoding, refused while ``starting`` is not done,
    and refused inside their caller's ``windows`` (a stream as it opens),
    a unary request read under ``requests``' bounds (the server's one, shared
    by its services; a service's own when None) (see the module docstring)."""
    return _GuardedRegistration(server, refuse_nul, discard_unknown, starting, windows, requests or AwaitedRequests())
