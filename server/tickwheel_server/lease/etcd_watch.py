"""A watch on etcd: one ``Watch`` stream that reconnects and resumes where it left off.

A broken stream is opened again (with backoff, on the next endpoint after
``UNAVAILABLE``) and the watch created again from the revision after the
last event delivered, so no event is lost or repeated. A watch etcd cancels
for compaction raises
:class:`~tickwheel_server.lease.types.WatchCompacted`; one cancelled for
any other reason, or refused with a code retrying will not fix, raises
:class:`~tickwheel_server.lease.types.LeaseStoreFatal`.
"""

from __future__ import annotations

import collections
import logging
from typing import Any

import grpc
import grpc.aio
from pyetcd.etcdrpc import kv_pb2, rpc_pb2

from tickwheel.shared.backoff import BackoffSleeper
from tickwheel_server.lease.base import Watch
from tickwheel_server.lease.etcd_transport import (
    REQUIRE_LEADER,
    RETRY_CAP,
    RETRY_INITIAL,
    RETRYABLE_CODES,
    STREAM_BROKEN,
    LocallyCancelled,
    Transport,
    moves_on,
    read,
    translate,
    write,
)
from tickwheel_server.lease.types import EventType, LeaseStoreClosed, LeaseStoreFatal, WatchCompacted, WatchEvent

log = logging.getLogger(__name__)


class EtcdWatch(Watch):
    """A :class:`Watch` of the keys from ``key`` to ``range_end`` (etcd's
    range; empty for ``key`` alone), from ``start_revision`` or, if None,
    from the revision after the one current when the stream was created.

    ``watches`` is the store's set of open watches: this one is in it from
    :meth:`start` to :meth:`aclose`, so that closing the store can end it
    (:meth:`cancel_for_close`).
    """

    def __init__(
        self,
        transport: Transport,
        key: bytes,
        range_end: bytes,
        start_revision: int | None,
        watches: set[EtcdWatch],
    ) -> None:
        self._transport = transport
        self._watches = watches
        self._key = key
        self._range_end = range_end
        self._next_revision = start_revision  # first revision not yet delivered
        self._pending: collections.deque[WatchEvent] = collections.deque()
        self._call: Any = None
        self._call_endpoint = ""
        self._started = False
        self._closed = False
        self._backoff = BackoffSleeper(transport.clock, initial=RETRY_INITIAL, cap=RETRY_CAP)

    def _ending(self) -> bool:
        return self._closed or self._transport.closing

    async def start(self) -> None:
        if self._started:
            return
        self._check_usable()
        self._watches.add(self)
        try:
            await self._connect()
        except LocallyCancelled:
            self._check_usable()
            raise
        self._started = True

    async def _connect(self) -> None:
        """Open a stream and create the watch from ``_next_revision``; ride
        out unavailability (with backoff) until it is created."""
        endpoints = self._transport.endpoints
        while True:
            self._check_usable()
            stubs = endpoints.current()
            call = stubs.watch.Watch(metadata=REQUIRE_LEADER)
            self._call, self._call_endpoint = call, stubs.endpoint
            create = rpc_pb2.WatchCreateRequest(
                key=self._key, range_end=self._range_end, start_revision=self._next_revision or 0
            )
            try:
                await write(call, rpc_pb2.WatchRequest(create_request=create), self._ending)
                response = await read(call, self._ending)
            except grpc.aio.AioRpcError as exc:
                call.cancel()
                self._check_usable()
                if exc.code() not in RETRYABLE_CODES:
                    raise translate(exc, "watch") from exc
                if moves_on(exc):
                    endpoints.failover(stubs.endpoint, f"watch: {exc.code().name}: {exc.details()}")
                await self._backoff.sleep()
                continue
            except STREAM_BROKEN as exc:
                call.cancel()
                self._check_usable()
                endpoints.failover(stubs.endpoint, f"watch: {exc}")
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
            endpoints.answered(stubs.endpoint)
            self._backoff.reset()
            self._add_events(response)
            return

    def _check_usable(self) -> None:
        if self._transport.closing:
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
        except (LeaseStoreClosed, LocallyCancelled):
            if self._closed:
                raise StopAsyncIteration from None
            raise LeaseStoreClosed("lease store closed") from None

    async def _next(self) -> WatchEvent:
        await self.start()
        while not self._pending:
            try:
                response = await read(self._call, self._ending)
            except (grpc.aio.AioRpcError, *STREAM_BROKEN) as exc:
                self._check_usable()
                if isinstance(exc, grpc.aio.AioRpcError) and exc.code() not in RETRYABLE_CODES:
                    raise translate(exc, "watch") from exc
                log.debug("etcd watch stream broke (%s); resuming from revision %s", exc, self._next_revision)
                self._call.cancel()
                if isinstance(exc, grpc.aio.AioRpcError) and moves_on(exc):
                    # e.g. "etcdserver: no leader": this member lost the quorum
                    self._transport.endpoints.failover(
                        self._call_endpoint, f"watch: {exc.code().name}: {exc.details()}"
                    )
                await self._connect()
                continue
            if response.canceled:
                self._call.cancel()
                self._raise_canceled(response)
            self._add_events(response)
        return self._pending.popleft()

    async def aclose(self) -> None:
        self._closed = True
        self._watches.discard(self)
        if self._call is not None:
            self._call.cancel()

    def cancel_for_close(self) -> None:
        """The store is closing: cancel the stream (a pending read then raises
        :class:`~tickwheel_server.lease.types.LeaseStoreClosed`)."""
        if self._call is not None:
            self._call.cancel()
