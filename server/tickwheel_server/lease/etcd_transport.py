"""The gRPC connection to etcd: a channel per endpoint, failover between them, calls and stream steps.

Endpoints are tried in order. A unary call that fails with ``UNAVAILABLE``
or its deadline moves to the next endpoint and is retried there, at most
once per endpoint, then raises
:class:`~tickwheel_server.lease.types.LeaseStoreUnavailable`. A call's
whole time is ``request_timeout`` (real time, enforced by gRPC), shared
between the endpoints: each try gets ``request_timeout / len(endpoints)``,
so a member that stopped answering (frozen, cut off) costs one slice and
the call is still answered by the next member within the timeout. A try
that ran out its slice may still have been applied; the calls are safe to
repeat (puts, deletes, revokes, the elections' compare-and-create, which
recognises the session's own key), except a lease grant, whose lease is
then never used and expires with its TTL, as after a caller's own retry.

Every call and stream carries etcd's ``hasleader`` metadata
(:data:`REQUIRE_LEADER`, the Go client's ``WithRequireLeader``): a member
cut off from the quorum has no leader, and answers a unary call
``UNAVAILABLE: etcdserver: no leader`` at once instead of blocking (a
write) or answering from its stale copy; it cancels a watch or keep-alive
stream the same way when it loses its leader, instead of leaving the
stream open and silent. Both move to the next endpoint.

Watch streams are opened on :meth:`Endpoints.current`; a session's
keep-alive stream on a channel of its own (:func:`dial`), which it abandons
and dials again when the connection stops answering. Streams are read and
written with :func:`read` and :func:`write`, and move on with
:meth:`Endpoints.failover`. A switch is logged once per outage: the first
move away from an endpoint that had answered, and the first answer after
(:meth:`Endpoints.answered`); the moves between (every endpoint down) at
debug level.

Only the generated stubs of etcd-sdk-python (``pyetcd.etcdrpc``) are used;
see :mod:`tickwheel_server.lease.etcd` for why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio
from pyetcd.etcdrpc import rpc_pb2_grpc

from tickwheel.shared.clock import Clock
from tickwheel_server.lease.types import (
    LeaseStoreClosed,
    LeaseStoreError,
    LeaseStoreFatal,
    LeaseStoreUnavailable,
    SessionLost,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_INITIAL = 0.05
RETRY_CAP = 1.0
"""Waits between tries of a keep-alive or a watch: full jitter, from
``RETRY_INITIAL`` seconds, doubling, at most ``RETRY_CAP`` (a keep-alive
also at most a quarter of its TTL)."""

RETRYABLE_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
    }
)
"""Codes after which the same request may succeed later (possibly elsewhere)."""

FAILOVER_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
"""Codes that say "this endpoint is no good right now": move to the next one."""

REQUIRE_LEADER = (("hasleader", "true"),)
"""gRPC metadata asking etcd to refuse (``UNAVAILABLE: etcdserver: no
leader``) rather than serve a request, or keep a stream open, on a member
that has no leader (see the module docstring)."""


def is_deadline(exc: grpc.aio.AioRpcError) -> bool:
    """The call's deadline passed: ``DEADLINE_EXCEEDED``, or etcd's own
    answer when it noticed the deadline first (``UNKNOWN: context deadline
    exceeded``)."""
    code = exc.code()
    return code is grpc.StatusCode.DEADLINE_EXCEEDED or (
        code is grpc.StatusCode.UNKNOWN and "deadline exceeded" in (exc.details() or "")
    )


def moves_on(exc: grpc.aio.AioRpcError) -> bool:
    """Whether ``exc`` says the endpoint, not the request, is at fault."""
    return exc.code() in FAILOVER_CODES or is_deadline(exc)

_CHANNEL_OPTIONS = [
    # Reconnect quickly after an etcd restart instead of gRPC's default
    # exponential backoff up to two minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Notice a dead connection that sends no RST; etcd's default enforcement
    # allows pings every 5 s.
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


class StreamEnded(Exception):
    """etcd closed a stream without a status (treated like UNAVAILABLE)."""


class LocallyCancelled(Exception):
    """A stream we cancelled ourselves (its watch or the store was closed)."""


STREAM_BROKEN = (StreamEnded, grpc.aio.UsageError, asyncio.InvalidStateError)
"""Ways a stream can break besides a gRPC status: all mean "open a new one"."""


async def read(call: Any, ending: Callable[[], bool]) -> Any:
    """The next message of a stream; :class:`StreamEnded` at its end.

    grpc.aio raises ``asyncio.CancelledError`` when reading a call that was
    cancelled locally; when that is our own doing (``ending()``) and not a
    cancellation of the current task, it becomes :class:`LocallyCancelled`;
    otherwise (the channel was closed under it, :meth:`Endpoints.redial`)
    :class:`StreamEnded`."""
    try:
        response = await call.read()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling() == 0:
            if ending():
                raise LocallyCancelled() from None
            raise StreamEnded("stream cancelled: its channel was closed") from None
        raise
    if response is grpc.aio.EOF:
        raise StreamEnded("stream ended")
    return response


async def write(call: Any, message: Any, ending: Callable[[], bool]) -> None:
    """Send ``message`` on a stream; a local cancellation as in :func:`read`."""
    try:
        await call.write(message)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if ending() and (task is None or task.cancelling() == 0):
            raise LocallyCancelled() from None
        raise


def translate(exc: grpc.aio.AioRpcError, what: str) -> LeaseStoreError:
    """The lease store error a gRPC status stands for: an unknown lease is
    :class:`SessionLost`, a retryable code unavailable, anything else fatal."""
    code, details = exc.code(), exc.details() or ""
    message = f"etcd {what}: {code.name}: {details}"
    if code is grpc.StatusCode.NOT_FOUND and "lease not found" in details:
        return SessionLost(message)
    if code in RETRYABLE_CODES:
        return LeaseStoreUnavailable(message)
    return LeaseStoreFatal(message)


async def within(clock: Clock, seconds: float, work: Awaitable[T]) -> T:
    """``work``'s result, or TimeoutError after ``seconds`` of ``clock`` time
    (``work`` is then cancelled)."""
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        raise TimeoutError(f"no answer within {seconds:.2f}s")
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@dataclass(slots=True)
class Stubs:
    """The stubs of one endpoint's channel."""

    endpoint: str
    channel: grpc.aio.Channel
    kv: rpc_pb2_grpc.KVStub
    lease: rpc_pb2_grpc.LeaseStub
    watch: rpc_pb2_grpc.WatchStub
    maintenance: rpc_pb2_grpc.MaintenanceStub


def dial(endpoint: str, *, own_connection: bool = False) -> Stubs:
    """A channel to ``endpoint`` and its stubs. With ``own_connection`` the
    channel never shares gRPC's process-wide connection to the endpoint: it
    opens a TCP connection of its own, which closing the channel abandons
    (what a session does with a connection that stopped answering)."""
    options = _CHANNEL_OPTIONS + ([("grpc.use_local_subchannel_pool", 1)] if own_connection else [])
    channel = grpc.aio.insecure_channel(endpoint, options=options)
    return Stubs(
        endpoint,
        channel,
        rpc_pb2_grpc.KVStub(channel),
        rpc_pb2_grpc.LeaseStub(channel),
        rpc_pb2_grpc.WatchStub(channel),
        rpc_pb2_grpc.MaintenanceStub(channel),
    )


class Endpoints:
    """One lazily created channel per endpoint and the one in use now."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = list(endpoints)
        self._index = 0
        self._stubs: dict[str, Stubs] = {}
        self._retiring: dict[asyncio.Task[None], grpc.aio.Channel] = {}
        self._failing = False
        """True from a failover until an endpoint answers again."""

    @property
    def in_use(self) -> str:
        """The endpoint calls and streams go to now."""
        return self.endpoints[self._index]

    def current(self) -> Stubs:
        """The stubs of :attr:`in_use` (its channel is created on first use)."""
        endpoint = self.in_use
        stubs = self._stubs.get(endpoint)
        if stubs is None:
            stubs = self._stubs[endpoint] = dial(endpoint)
        return stubs

    def redial(self, endpoint: str, grace: float, *, stubs: Stubs | None = None) -> None:
        """``endpoint``'s connection stopped answering (a deadline passed):
        later calls go to a new channel with a connection of its own, and the
        old channel is closed after ``grace`` seconds (calls still on it then
        are cancelled; a stream read then raises :class:`StreamEnded`).
        Nothing happens if there is no channel to ``endpoint`` yet, or if
        ``stubs`` (the ones that failed) were already replaced."""
        old = self._stubs.get(endpoint)
        if old is None or (stubs is not None and old is not stubs):
            return
        self._stubs[endpoint] = dial(endpoint, own_connection=True)
        log.info("etcd endpoint %s stopped answering; dialling it again", endpoint)
        task = asyncio.get_running_loop().create_task(self._retire(old.channel, grace))
        self._retiring[task] = old.channel
        task.add_done_callback(lambda done: self._retiring.pop(done, None))

    @staticmethod
    async def _retire(channel: grpc.aio.Channel, grace: float) -> None:
        await asyncio.sleep(grace)
        await channel.close()

    def failover(self, endpoint: str, why: str = "") -> None:
        """``endpoint`` failed (``why``): use the next one (unless someone
        already moved). Logged at info level once per outage, then at debug
        level until :meth:`answered`."""
        if self.in_use == endpoint and len(self.endpoints) > 1:
            self._index = (self._index + 1) % len(self.endpoints)
            level = logging.DEBUG if self._failing else logging.INFO
            self._failing = True
            log.log(level, "etcd endpoint %s failed%s; switching to %s", endpoint, f" ({why})" if why else "", self.in_use)

    def answered(self, endpoint: str) -> None:
        """``endpoint`` answered: the outage, if any, is over (logged once)."""
        if self._failing and endpoint == self.in_use:
            self._failing = False
            log.info("etcd endpoint %s answers; using it", endpoint)

    async def close(self) -> None:
        stubs, self._stubs = list(self._stubs.values()), {}
        retiring, self._retiring = dict(self._retiring), {}
        for task in retiring:
            task.cancel()
        for channel in [s.channel for s in stubs] + list(retiring.values()):
            await channel.close()


class Transport:
    """What the store, its sessions and its watches share: the endpoints,
    the clock, unary calls with failover, and the store's closing state.

    Closing has two steps: :meth:`begin_close` (``closing``: no new session
    or watch, open watches end) while sessions still revoke their leases,
    then :meth:`close` (``closed``: channels closed, every call raises
    :class:`LeaseStoreClosed`).
    """

    def __init__(self, endpoints: Sequence[str], clock: Clock, request_timeout: float) -> None:
        if request_timeout <= 0:
            raise ValueError(f"request_timeout must be > 0, got {request_timeout!r}")
        self.endpoints = Endpoints(endpoints)
        self.clock = clock
        self.request_timeout = request_timeout
        self.closing = False
        self.closed = False

    @property
    def try_timeout(self) -> float:
        """The deadline of one try of a unary call: the request timeout
        shared between the endpoints. A channel being replaced
        (:meth:`Endpoints.redial`) is closed a second after it, when every
        call on it has had its answer or its deadline."""
        return self.request_timeout / len(self.endpoints.endpoints)

    def begin_close(self) -> None:
        self.closing = True

    async def call(self, pick: Callable[[Stubs], Callable[..., Any]], request: Any, what: str) -> Any:
        """One unary call with failover: retried on the next endpoint after
        ``UNAVAILABLE`` or a try's deadline, at most once per endpoint, each
        try given its share of ``request_timeout`` (the module docstring)."""
        if self.closed:
            raise LeaseStoreClosed("lease store closed")
        endpoints = self.endpoints
        last: grpc.aio.AioRpcError | None = None
        for _ in range(len(endpoints.endpoints)):
            stubs = endpoints.current()
            try:
                response = await pick(stubs)(request, timeout=self.try_timeout, metadata=REQUIRE_LEADER)
            except asyncio.CancelledError:
                # closing the channels cancels calls in flight (grpc.aio raises
                # CancelledError for those), unlike a cancellation of the task
                task = asyncio.current_task()
                if self.closed and (task is None or task.cancelling() == 0):
                    raise LeaseStoreClosed("lease store closed") from None
                raise
            except grpc.aio.AioRpcError as exc:
                if self.closed:
                    raise LeaseStoreClosed("lease store closed") from exc
                if not moves_on(exc):
                    raise translate(exc, what) from exc
                if is_deadline(exc):
                    endpoints.redial(stubs.endpoint, self.try_timeout + 1, stubs=stubs)
                endpoints.failover(stubs.endpoint, f"{what}: {exc.code().name}: {exc.details()}")
                last = exc
                continue
            endpoints.answered(stubs.endpoint)
            return response
        assert last is not None
        raise LeaseStoreUnavailable(
            f"etcd {what}: no endpoint answered ({', '.join(endpoints.endpoints)}): "
            f"{last.code().name}: {last.details()}"
        ) from last

    async def close(self) -> None:
        """Refuse calls from now on and close every channel."""
        self.closed = True
        await self.endpoints.close()
