"""A server started while its store or etcd is down: it waits for them.

A scheduler's process is started by a supervisor (systemd, Kubernetes) that
knows nothing of the order its dependencies come up in. Rather than exit
(and be restarted in a loop whose delay grows) or hang silently, a server
whose store or etcd does not answer at start:

- binds its gRPC address at once and serves ``grpc.health.v1`` there as
  ``NOT_SERVING`` (the whole server and each service), so a load balancer
  or probe sees a live process that is not ready; every other call is
  refused with ``UNAVAILABLE`` naming what it waits for;
- logs one WARNING line a retry naming what it waits for (the store or
  etcd), its address (the store URL without its password) and the error's
  first line, and retries with capped, jittered backoff;
- once both answer, closes that placeholder and starts as usual on the same
  port (then ``SERVING``).

A step of the start after the real server bound its port (publishing this
server's record in etcd) is waited for the same way, with no placeholder:
the real server's health says ``NOT_SERVING`` until the whole start is done
(:meth:`WaitingForDependencies.bound`), and it answers no call but health's
and reflection's meanwhile: every SchedulerService and AdminService call
(and the console's ``/api/``) is refused with ``UNAVAILABLE`` "starting:
…", as the placeholder's are, and worker streams likewise. A call answered
there would act for a server whose partitions, fence and record are not up
yet; refused, it is retried (the SDKs retry UNAVAILABLE) and answered once
the start is done. The check is one attribute read a call
(:attr:`WaitingForDependencies.done`).

Only a known outage (:func:`~tickwheel_server.telemetry.outages.outage_of`)
is waited for: a bad URL, a refused password, a schema that lacks
migrations or any other error still ends the start with its message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tickwheel.shared.backoff import BackoffSleeper
from tickwheel.shared.clock import Clock

from . import transport
from .telemetry.outages import one_line, outage_of

log = logging.getLogger("tickwheel.server")

T = TypeVar("T")

RETRY_INITIAL = 0.5
"""Seconds before the first retry of a dependency that did not answer at start."""
RETRY_CAP = 10.0
"""The longest wait between two retries at start (and so between two of its log lines)."""


class _RefuseWhileWaiting(grpc.GenericRpcHandler):
    """Every method but health's: ``UNAVAILABLE``, saying what the server waits for."""

    def __init__(self, reason: Callable[[], str]) -> None:
        self._reason = reason

    def service(self, handler_call_details):
        if handler_call_details.method.startswith(f"/{health.SERVICE_NAME}/"):
            return None

        async def refuse(_requests, context):
            await context.abort(grpc.StatusCode.UNAVAILABLE, self._reason())

        # Client-streaming: refused at its HEADERS, never waiting for a
        # message (gRPC held a unary call whose message never came: api/awaited.py).
        return grpc.stream_unary_rpc_method_handler(refuse)


class WaitingForDependencies:
    """The start's waits for the store and etcd, and the health-only
    placeholder served on the gRPC address meanwhile."""

    def __init__(
        self, clock: Clock, bind: Callable[[grpc.aio.Server], int], services: list[str],
        *, on_wait: Callable[[], None] = lambda: None,
        health_servicer: Callable[[], health.aio.HealthServicer] = health.aio.HealthServicer,
        registration: Callable[[grpc.aio.Server], object] = transport.GenericOnly,
    ) -> None:
        self._clock = clock
        self._health = health_servicer
        """Makes the placeholder's health servicer (the server's bounds its Watch streams: ``api/openstreams.py``)."""
        self._registration = registration
        """What health is registered through on the placeholder (the server's
        reads its requests itself, bounded: ``api/awaited.py``)."""
        self._bind = bind
        self._services = services
        self._on_wait = on_wait
        self._server: grpc.aio.Server | None = None
        self._bound = False
        self.port: int | None = None
        """The port health answers NOT_SERVING on while the start waits: the
        placeholder's (the real server binds it again), or the real
        server's once :meth:`bound`; None before either."""
        self.waiting_for = ""
        """What the start waits for now ("the store at URL"), for the
        refusals' message; empty while it waits for nothing."""
        self.done = False
        """True once the whole start is done: until then the API refuses
        every call with :meth:`refusal` (one read of this a call, no lock)."""

    def bound(self, port: int) -> None:
        """The real server holds ``port`` now (its health NOT_SERVING until
        the start is done): a wait from here on serves no placeholder."""
        self.port = port
        self._bound = True

    async def until_up(self, what: str, address: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``'s result, retried with backoff while it fails with a
        known outage of ``what`` ("the store", "etcd") at ``address``; any
        other error is raised."""
        backoff = BackoffSleeper(self._clock, initial=RETRY_INITIAL, cap=RETRY_CAP)
        failures = 0
        while True:
            try:
                result = await attempt()
            except Exception as error:
                if outage_of(error) is None:
                    raise
                failures += 1
                self.waiting_for = f"{what} at {address}"
                await self._serve_health()
                self._on_wait()
                delay = backoff.next_delay()
                log.warning(
                    "waiting for %s at %s (try %d): %s; health NOT_SERVING on port %d; retrying in %.1f s",
                    what, address, failures, one_line(error), self.port, delay,
                )
                await self._clock.sleep(delay)
            else:
                self.waiting_for = ""
                if failures:
                    log.info("%s at %s answers after %d failed tries", what, address, failures)
                return result

    def refusal(self) -> str:
        """The message of a call refused while the start is not done."""
        return f"starting: waiting for {self.waiting_for}" if self.waiting_for else "starting"

    async def _serve_health(self) -> None:
        if self._server is not None or self._bound:
            return
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0), *transport.LIMITS])
        placeholder = self._health()
        health_pb2_grpc.add_HealthServicer_to_server(placeholder, self._registration(server))
        server.add_generic_rpc_handlers((_RefuseWhileWaiting(self.refusal),))
        self.port = self._bind(server)
        for name in ["", *self._services]:
            await placeholder.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await server.start()
        self._server = server

    async def close(self) -> None:
        """Stop the placeholder (if one was started), freeing its port."""
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop(0)
