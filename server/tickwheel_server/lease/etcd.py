"""The lease store on a real etcd cluster (v3 API over gRPC).

Why our own client: the server is asyncio, and the Python etcd clients (etcd3
0.12 and its maintained fork etcd-sdk-python, imported as ``pyetcd``) are
synchronous; etcd3 0.12 also only imports with protobuf in its slow
pure-Python mode. So we use only the *generated stubs* that etcd-sdk-python
ships (``pyetcd.etcdrpc``: ``KVStub``, ``LeaseStub``, ``WatchStub`` and their
messages, which work under the upb protobuf runtime and on a ``grpc.aio``
channel) and write the small async client below on top: unary KV/Lease calls
with endpoint failover, a ``LeaseKeepAlive`` bidi stream per session, and
``Watch`` streams that resume from the last revision seen.

Behaviour worth knowing:

* Endpoints are tried in order; a call that fails with ``UNAVAILABLE`` moves
  to the next endpoint and is retried there once per endpoint, then raises
  :class:`LeaseStoreUnavailable`. Every unary call has a deadline
  (``request_timeout``, real time, enforced by gRPC).
* A session sends a keep-alive every ``ttl / 3`` seconds (of the injected
  clock; give this store the :class:`~tickwheel.shared.clock.SystemClock`, as
  etcd measures TTLs in real time). A response with ``TTL <= 0`` means etcd
  expired the lease: ``lost`` is set. If no keep-alive succeeds for ``ttl``
  seconds, counted from when the last successful one was *sent*, ``lost`` is
  set as well, so the holder stops no later than etcd could expire the lease.
* etcd restarts: etcd keeps leases across a restart (and extends them by a
  TTL when it comes back). If keep-alives resume within the TTL the session
  simply survives; otherwise the holder sees ``lost`` and must open a new
  session (``lost`` is final). Closing the lost session still tries to revoke
  its lease, so keys an etcd restart kept alive do not linger for another TTL.
* Watches reconnect (with backoff, on the next endpoint) and resume from the
  revision after the last event delivered, so no event is lost or repeated.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio
from pyetcd.etcdrpc import kv_pb2, rpc_pb2, rpc_pb2_grpc

from tickwheel.shared.backoff import BackoffSleeper
from tickwheel.shared.clock import Clock
from tickwheel_server.lease.base import DEFAULT_SESSION_TTL, LeaseStore, Session, Watch
from tickwheel_server.lease.types import (
    EventType,
    KeyValue,
    LeaseStoreClosed,
    LeaseStoreError,
    LeaseStoreFatal,
    LeaseStoreUnavailable,
    Ownership,
    SessionLost,
    WatchCompacted,
    WatchEvent,
    prefix_range_end,
    to_bytes,
    validate_key,
    validate_ttl,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_REQUEST_TIMEOUT = 5.0

# Waits between tries of a keep-alive or a watch: full jitter, from 50 ms,
# doubling, at most 1 s (a keep-alive also at most a quarter of its TTL).
_RETRY_INITIAL = 0.05
_RETRY_CAP = 1.0

# Codes after which the same request may succeed later (possibly elsewhere).
_RETRYABLE_CODES = frozenset(
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

# Codes that say "this endpoint is no good right now": move to the next one.
_FAILOVER_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

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


class _StreamEnded(Exception):
    """etcd closed a stream without a status (treated like UNAVAILABLE)."""


class _LocallyCancelled(Exception):
    """A stream we cancelled ourselves (its watch or the store was closed)."""


# Ways a stream can break besides a gRPC status: all mean "open a new one".
_STREAM_BROKEN = (_StreamEnded, grpc.aio.UsageError, asyncio.InvalidStateError)


async def _read(call: Any, ending: Callable[[], bool]) -> Any:
    """The next message of a stream; _StreamEnded at its end.

    grpc.aio raises ``asyncio.CancelledError`` when reading a call that was
    cancelled locally; when that is our own doing (``ending()``) and not a
    cancellation of the current task, it becomes :class:`_LocallyCancelled`."""
    try:
        response = await call.read()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if ending() and (task is None or task.cancelling() == 0):
            raise _LocallyCancelled() from None
        raise
    if response is grpc.aio.EOF:
        raise _StreamEnded("stream ended")
    return response


async def _write(call: Any, message: Any, ending: Callable[[], bool]) -> None:
    try:
        await call.write(message)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if ending() and (task is None or task.cancelling() == 0):
            raise _LocallyCancelled() from None
        raise


def _translate(exc: grpc.aio.AioRpcError, what: str) -> LeaseStoreError:
    code, details = exc.code(), exc.details() or ""
    message = f"etcd {what}: {code.name}: {details}"
    if code is grpc.StatusCode.NOT_FOUND and "lease not found" in details:
        return SessionLost(message)
    if code in _RETRYABLE_CODES:
        return LeaseStoreUnavailable(message)
    return LeaseStoreFatal(message)


async def _within(clock: Clock, seconds: float, work: Awaitable[T]) -> T:
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
class _Stubs:
    endpoint: str
    channel: grpc.aio.Channel
    kv: rpc_pb2_grpc.KVStub
    lease: rpc_pb2_grpc.LeaseStub
    watch: rpc_pb2_grpc.WatchStub


class _Endpoints:
    """One lazily created channel per endpoint and the one in use now."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = list(endpoints)
        self._index = 0
        self._stubs: dict[str, _Stubs] = {}

    def current(self) -> _Stubs:
        endpoint = self.endpoints[self._index]
        stubs = self._stubs.get(endpoint)
        if stubs is None:
            channel = grpc.aio.insecure_channel(endpoint, options=_CHANNEL_OPTIONS)
            stubs = _Stubs(
                endpoint,
                channel,
                rpc_pb2_grpc.KVStub(channel),
                rpc_pb2_grpc.LeaseStub(channel),
                rpc_pb2_grpc.WatchStub(channel),
            )
            self._stubs[endpoint] = stubs
        return stubs

    def failover(self, endpoint: str) -> None:
        """``endpoint`` failed: use the next one (unless someone already moved)."""
        if self.endpoints[self._index] == endpoint and len(self.endpoints) > 1:
            self._index = (self._index + 1) % len(self.endpoints)
            log.info("etcd endpoint %s failed; switching to %s", endpoint, self.endpoints[self._index])

    async def close(self) -> None:
        stubs, self._stubs = list(self._stubs.values()), {}
        for s in stubs:
            await s.channel.close()


# --------------------------------------------------------------------------- session


class EtcdSession(Session):
    """An etcd lease kept alive over a ``LeaseKeepAlive`` stream; see
    :class:`Session` and the module docstring."""

    def __init__(self, store: "EtcdLeaseStore", lease_id: int, ttl: int, expires_at: float) -> None:
        super().__init__()
        self.id = lease_id
        self.ttl = ttl
        self.renewals = 0
        """Successful keep-alives so far (for diagnostics and tests)."""
        self._store = store
        self._expires_at = expires_at  # store clock's monotonic time
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def alive_until(self) -> float:
        return self._expires_at

    def _monotonic(self) -> float:
        return self._store._clock.monotonic()

    def _start(self, keepalive: bool) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._watchdog(), name=f"etcd-lease-watchdog-{self.id:x}"))
        if keepalive:
            self._tasks.append(loop.create_task(self._keepalive(), name=f"etcd-lease-keepalive-{self.id:x}"))

    async def _watchdog(self) -> None:
        clock = self._store._clock
        while not self.lost.is_set():
            remaining = self._expires_at - clock.monotonic()
            if remaining <= 0:
                self._mark_lost(f"lease not renewed within its TTL ({self.ttl}s)")
                self._stop_tasks()
                return
            await clock.sleep(remaining)

    async def _keepalive(self) -> None:
        store, clock = self._store, self._store._clock
        interval = self.ttl / 3
        backoff = BackoffSleeper(clock, initial=_RETRY_INITIAL, cap=min(_RETRY_CAP, self.ttl / 4))
        request = rpc_pb2.LeaseKeepAliveRequest(ID=self.id)
        while not self.lost.is_set():
            stubs = store._endpoints.current()
            call = stubs.lease.LeaseKeepAlive()

            async def round_trip() -> rpc_pb2.LeaseKeepAliveResponse:
                await _write(call, request, self.lost.is_set)
                return await _read(call, self.lost.is_set)

            try:
                while not self.lost.is_set():
                    sent_at = clock.monotonic()
                    response = await _within(clock, interval, round_trip())
                    if response.TTL <= 0:
                        self._mark_lost("lease expired (etcd answered the keep-alive with TTL 0)")
                        self._stop_tasks()
                        return
                    self._expires_at = max(self._expires_at, sent_at + response.TTL)
                    self.renewals += 1
                    backoff.reset()
                    await clock.sleep(interval)
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in _RETRYABLE_CODES:
                    self._mark_lost(f"keep-alive refused: {exc.code().name}: {exc.details()}")
                    self._stop_tasks()
                    return
                log.debug("lease %x keep-alive via %s failed: %s", self.id, stubs.endpoint, exc.code().name)
                if exc.code() in _FAILOVER_CODES:
                    store._endpoints.failover(stubs.endpoint)
                await backoff.sleep()
            except (*_STREAM_BROKEN, TimeoutError, _LocallyCancelled) as exc:
                log.debug("lease %x keep-alive via %s failed: %s", self.id, stubs.endpoint, exc)
                store._endpoints.failover(stubs.endpoint)
                await backoff.sleep()
            finally:
                call.cancel()

    def _stop_tasks(self) -> None:
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._mark_lost("closed")
        self._stop_tasks()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._store._sessions.discard(self)
        if self._store._closed_for_calls:
            return
        try:
            await self._store._call(
                lambda s: s.lease.LeaseRevoke, rpc_pb2.LeaseRevokeRequest(ID=self.id), "lease revoke"
            )
        except SessionLost:
            pass  # already expired or revoked
        except LeaseStoreError as exc:
            log.warning("could not revoke lease %x (its keys expire with its TTL): %s", self.id, exc)


# --------------------------------------------------------------------------- watch


class _EtcdWatch(Watch):
    def __init__(self, store: "EtcdLeaseStore", key: bytes, range_end: bytes, start_revision: int | None) -> None:
        self._store = store
        self._key = key
        self._range_end = range_end
        self._next_revision = start_revision  # first revision not yet delivered
        self._pending: collections.deque[WatchEvent] = collections.deque()
        self._call: Any = None
        self._started = False
        self._closed = False
        self._backoff = BackoffSleeper(store._clock, initial=_RETRY_INITIAL, cap=_RETRY_CAP)

    def _ending(self) -> bool:
        return self._closed or self._store._closed

    async def start(self) -> None:
        if self._started:
            return
        self._check_usable()
        self._store._watches.add(self)
        try:
            await self._connect()
        except _LocallyCancelled:
            self._check_usable()
            raise
        self._started = True

    async def _connect(self) -> None:
        """Open a stream and create the watch from ``_next_revision``; ride
        out unavailability (with backoff) until it is created."""
        store = self._store
        while True:
            self._check_usable()
            stubs = store._endpoints.current()
            call = stubs.watch.Watch()
            self._call = call
            create = rpc_pb2.WatchCreateRequest(
                key=self._key, range_end=self._range_end, start_revision=self._next_revision or 0
            )
            try:
                await _write(call, rpc_pb2.WatchRequest(create_request=create), self._ending)
                response = await _read(call, self._ending)
            except grpc.aio.AioRpcError as exc:
                call.cancel()
                self._check_usable()
                if exc.code() not in _RETRYABLE_CODES:
                    raise _translate(exc, "watch") from exc
                if exc.code() in _FAILOVER_CODES:
                    store._endpoints.failover(stubs.endpoint)
                await self._backoff.sleep()
                continue
            except _STREAM_BROKEN:
                call.cancel()
                self._check_usable()
                store._endpoints.failover(stubs.endpoint)
                await self._backoff.sleep()
                continue
            except BaseException:
                call.cancel()
                raise
            if response.canceled or not response.created:
                call.cancel()
                self._raise_canceled(response)
            if self._next_revision is None:
                self._next_revision = response.header.revision + 1
            self._backoff.reset()
            self._add_events(response)
            return

    def _check_usable(self) -> None:
        if self._store._closed:
            raise LeaseStoreClosed("lease store closed")
        if self._closed:
            raise LeaseStoreClosed("watch is closed")

    def _raise_canceled(self, response: rpc_pb2.WatchResponse) -> None:
        if response.compact_revision:
            raise WatchCompacted(
                f"etcd watch from revision {self._next_revision}: history compacted up to "
                f"{response.compact_revision}",
                response.compact_revision,
            )
        raise LeaseStoreFatal(f"etcd canceled the watch: {response.cancel_reason or 'no reason given'}")

    def _add_events(self, response: rpc_pb2.WatchResponse) -> None:
        floor = self._next_revision or 0
        last = 0
        for event in response.events:
            revision = event.kv.mod_revision
            if revision < floor:
                continue  # already delivered before a reconnection
            if event.type == kv_pb2.Event.DELETE:
                self._pending.append(WatchEvent(EventType.DELETE, event.kv.key.decode(), b"", revision))
            else:
                self._pending.append(
                    WatchEvent(EventType.PUT, event.kv.key.decode(), event.kv.value, revision, event.kv.create_revision)
                )
            last = max(last, revision)
        if last:
            self._next_revision = last + 1

    async def __anext__(self) -> WatchEvent:
        if self._closed:
            raise StopAsyncIteration
        try:
            return await self._next()
        except (LeaseStoreClosed, _LocallyCancelled):
            if self._closed:
                raise StopAsyncIteration from None
            raise LeaseStoreClosed("lease store closed") from None

    async def _next(self) -> WatchEvent:
        await self.start()
        while not self._pending:
            try:
                response = await _read(self._call, self._ending)
            except (grpc.aio.AioRpcError, *_STREAM_BROKEN) as exc:
                self._check_usable()
                if isinstance(exc, grpc.aio.AioRpcError) and exc.code() not in _RETRYABLE_CODES:
                    raise _translate(exc, "watch") from exc
                log.debug("etcd watch stream broke (%s); resuming from revision %s", exc, self._next_revision)
                self._call.cancel()
                await self._connect()
                continue
            if response.canceled:
                self._call.cancel()
                self._raise_canceled(response)
            self._add_events(response)
        return self._pending.popleft()

    async def aclose(self) -> None:
        self._closed = True
        self._store._watches.discard(self)
        if self._call is not None:
            self._call.cancel()

    def _cancel_for_close(self) -> None:
        if self._call is not None:
            self._call.cancel()


# --------------------------------------------------------------------------- store


class EtcdLeaseStore(LeaseStore):
    """:class:`LeaseStore` on etcd; see the module docstring.

    ``endpoints`` are ``host:port`` strings (plaintext gRPC). Channels are
    created on first use, inside the running event loop; nothing is contacted
    at construction. ``request_timeout`` is the deadline of each unary call.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        clock: Clock,
        *,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        if request_timeout <= 0:
            raise ValueError(f"request_timeout must be > 0, got {request_timeout!r}")
        self._endpoints = _Endpoints(endpoints)
        self._clock = clock
        self._request_timeout = request_timeout
        self._sessions: set[EtcdSession] = set()
        self._watches: set[_EtcdWatch] = set()
        self._closed = False
        self._closed_for_calls = False

    @property
    def endpoints(self) -> list[str]:
        return list(self._endpoints.endpoints)

    # -- calls ----------------------------------------------------------------------

    async def _call(self, pick: Callable[[_Stubs], Callable[..., Any]], request: Any, what: str) -> Any:
        """One unary call with failover: retried on the next endpoint after
        UNAVAILABLE, at most once per endpoint."""
        if self._closed_for_calls:
            raise LeaseStoreClosed("lease store closed")
        last: grpc.aio.AioRpcError | None = None
        for _ in range(len(self._endpoints.endpoints)):
            stubs = self._endpoints.current()
            try:
                return await pick(stubs)(request, timeout=self._request_timeout)
            except asyncio.CancelledError:
                # closing the channels cancels calls in flight (grpc.aio raises
                # CancelledError for those), unlike a cancellation of the task
                task = asyncio.current_task()
                if self._closed_for_calls and (task is None or task.cancelling() == 0):
                    raise LeaseStoreClosed("lease store closed") from None
                raise
            except grpc.aio.AioRpcError as exc:
                if self._closed_for_calls:
                    raise LeaseStoreClosed("lease store closed") from exc
                if exc.code() not in _FAILOVER_CODES:
                    raise _translate(exc, what) from exc
                self._endpoints.failover(stubs.endpoint)
                last = exc
                if exc.code() is not grpc.StatusCode.UNAVAILABLE:
                    break  # a deadline already spent its time; let the caller decide
        assert last is not None
        raise LeaseStoreUnavailable(
            f"etcd {what}: no endpoint answered ({', '.join(self._endpoints.endpoints)}): "
            f"{last.code().name}: {last.details()}"
        ) from last

    async def _session_call(self, session: Session, pick: Callable[[_Stubs], Callable[..., Any]], request: Any, what: str) -> Any:
        session.raise_if_lost()
        try:
            return await self._call(pick, request, what)
        except SessionLost as exc:
            session._mark_lost(f"etcd no longer knows the lease ({exc})")
            if isinstance(session, EtcdSession):
                session._stop_tasks()
            raise session._lost_error() from exc

    @staticmethod
    def _kv(kv: kv_pb2.KeyValue) -> KeyValue:
        return KeyValue(kv.key.decode(), kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)

    # -- sessions ---------------------------------------------------------------------

    async def open_session(self, ttl: int = DEFAULT_SESSION_TTL, *, keepalive: bool = True) -> EtcdSession:
        validate_ttl(ttl)
        if self._closed:
            raise LeaseStoreClosed("lease store closed")
        sent_at = self._clock.monotonic()
        response = await self._call(lambda s: s.lease.LeaseGrant, rpc_pb2.LeaseGrantRequest(TTL=ttl), "lease grant")
        if response.error:
            raise LeaseStoreFatal(f"etcd lease grant: {response.error}")
        session = EtcdSession(self, response.ID, response.TTL, sent_at + response.TTL)
        self._sessions.add(session)
        session._start(keepalive)
        return session

    # -- keys ---------------------------------------------------------------------------

    async def put(self, key: str, value: bytes | str, *, session: Session | None = None) -> int:
        request = rpc_pb2.PutRequest(key=validate_key(key).encode(), value=to_bytes(value))
        if session is None:
            response = await self._call(lambda s: s.kv.Put, request, "put")
        else:
            request.lease = session.id
            response = await self._session_call(session, lambda s: s.kv.Put, request, "put")
        return response.header.revision

    async def get(self, key: str) -> KeyValue | None:
        request = rpc_pb2.RangeRequest(key=validate_key(key).encode())
        response = await self._call(lambda s: s.kv.Range, request, "get")
        return self._kv(response.kvs[0]) if response.kvs else None

    async def get_prefix(self, prefix: str) -> list[KeyValue]:
        raw = prefix.encode()
        request = rpc_pb2.RangeRequest(
            key=raw or b"\0",
            range_end=prefix_range_end(raw),
            sort_order=rpc_pb2.RangeRequest.ASCEND,
            sort_target=rpc_pb2.RangeRequest.KEY,
        )
        response = await self._call(lambda s: s.kv.Range, request, "get prefix")
        return [self._kv(kv) for kv in response.kvs]

    async def delete(self, key: str) -> bool:
        request = rpc_pb2.DeleteRangeRequest(key=validate_key(key).encode())
        response = await self._call(lambda s: s.kv.DeleteRange, request, "delete")
        return response.deleted > 0

    async def current_revision(self) -> int:
        request = rpc_pb2.RangeRequest(key=b"\0", limit=1, count_only=True)
        response = await self._call(lambda s: s.kv.Range, request, "revision")
        return response.header.revision

    def watch(self, key: str, *, prefix: bool = False, start_revision: int | None = None) -> Watch:
        if self._closed:
            raise LeaseStoreClosed("lease store closed")
        if prefix:
            raw = key.encode()
            return _EtcdWatch(self, raw or b"\0", prefix_range_end(raw), start_revision)
        return _EtcdWatch(self, validate_key(key).encode(), b"", start_revision)

    # -- elections --------------------------------------------------------------------

    async def _acquire_once(self, key: str, value: bytes, session: Session) -> tuple[Ownership | None, int]:
        raw = validate_key(key).encode()
        request = rpc_pb2.TxnRequest(
            compare=[
                rpc_pb2.Compare(
                    result=rpc_pb2.Compare.EQUAL, target=rpc_pb2.Compare.CREATE, key=raw, create_revision=0
                )
            ],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=raw, value=value, lease=session.id))],
            failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=raw))],
        )
        response = await self._session_call(session, lambda s: s.kv.Txn, request, "acquire")
        revision = response.header.revision
        if response.succeeded:
            return Ownership(key, value, revision, session), revision
        kvs = response.responses[0].response_range.kvs
        if kvs and kvs[0].lease == session.id:
            return Ownership(key, kvs[0].value, kvs[0].create_revision, session), revision
        return None, revision

    async def _delete_if_created_at(self, key: str, create_revision: int) -> bool:
        raw = validate_key(key).encode()
        request = rpc_pb2.TxnRequest(
            compare=[
                rpc_pb2.Compare(
                    result=rpc_pb2.Compare.EQUAL,
                    target=rpc_pb2.Compare.CREATE,
                    key=raw,
                    create_revision=create_revision,
                )
            ],
            success=[rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=raw))],
        )
        response = await self._call(lambda s: s.kv.Txn, request, "resign")
        return bool(response.succeeded and response.responses[0].response_delete_range.deleted)

    # -- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for watch in list(self._watches):
            watch._cancel_for_close()
        self._watches.clear()
        await asyncio.gather(*(session.close() for session in list(self._sessions)), return_exceptions=True)
        self._closed_for_calls = True
        await self._endpoints.close()
