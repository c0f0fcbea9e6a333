"""The streams that answer without a credential, bounded per peer and in all.

Health (``grpc.health.v1.Health/Watch``) and reflection
(``ServerReflectionInfo``, v1alpha and v1) answer any caller, by design: a
load balancer's health check and grpcurl carry no credential. Both are
streams the caller may keep open as long as it likes, so before these
bounds one peer with no credential could hold as many as the port takes
(4 096 connections of 100 streams), each a task and its request in the
server's memory: a Watch of a service name of 1 MiB held that megabyte
for as long as the stream lived, 400 MiB a connection
(``loadtest/bench_peer_hold.py``). Now:

- a peer (:func:`~tickwheel_server.auth.failures.peer_key`: its address,
  an IPv6 address by its /64) holds at most :data:`MAX_PER_PEER` such
  streams open at once, and the server :data:`MAX_OPEN` in all; past
  either, a stream is refused RESOURCE_EXHAUSTED as it opens, naming the
  bound (a health checker needs one Watch, grpcurl one reflection stream);
- a Watch names a service of at most :data:`MAX_SERVICE_NAME` characters
  (INVALID_ARGUMENT ``service`` otherwise; the server's own names are a few
  dozen).

Health's unary Check is not held and not counted.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
from grpc_health.v1 import health

from ..auth import failures

MAX_PER_PEER = 32
MAX_OPEN = 1024
MAX_SERVICE_NAME = 256


class OpenStreams:
    """The credential-less streams open now, by peer (see the module docstring)."""

    def __init__(self, *, per_peer: int = MAX_PER_PEER, overall: int = MAX_OPEN) -> None:
        if per_peer < 1 or overall < 1:
            raise ValueError("per_peer and overall must be >= 1")
        self.per_peer, self.overall = per_peer, overall
        self._by_peer: dict[str, int] = {}
        self.open = 0
        """Streams open now."""
        self.refused = 0
        """Streams refused as they opened."""

    @contextlib.asynccontextmanager
    async def holding(self, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        """Around a stream's life: counted while it is open; refused
        RESOURCE_EXHAUSTED (``context.abort``, which raises) when its peer
        or the server holds as many as it may."""
        peer = failures.peer_key(context.peer() or "")
        held = self._by_peer.get(peer, 0)
        if held >= self.per_peer or self.open >= self.overall:
            self.refused += 1
            why = (f"{peer} holds {held} streams without a credential open (at most {self.per_peer})"
                   if held >= self.per_peer else f"the server holds {self.open} such streams (at most {self.overall})")
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{why}: close one before opening another")
        self._by_peer[peer] = held + 1
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1
            left = self._by_peer[peer] - 1
            if left:
                self._by_peer[peer] = left
            else:
                del self._by_peer[peer]


class BoundedHealth(health.aio.HealthServicer):
    """grpc_health's servicer, its Watch streams counted in ``streams`` and
    their service names bounded."""

    def __init__(self, streams: OpenStreams) -> None:
        super().__init__()
        self._streams = streams

    async def Watch(self, request, context) -> None:  # noqa: N802 - the gRPC method's name
        if len(request.service) > MAX_SERVICE_NAME:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"service: a service name is at most {MAX_SERVICE_NAME} characters")
        async with self._streams.holding(context):
            await super().Watch(request, context)
