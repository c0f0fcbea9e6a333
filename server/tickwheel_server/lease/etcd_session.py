"""A session on etcd: one lease kept alive over a ``LeaseKeepAlive`` stream, and lost in time.

* A session sends a keep-alive every ``ttl / 10`` seconds (of the injected
  clock; give the store the :class:`~tickwheel.shared.clock.SystemClock`, as
  etcd measures TTLs in real time). A response with ``TTL <= 0`` means etcd
  expired the lease: ``lost`` is set. If no keep-alive succeeds for ``ttl``
  seconds, counted from when the last successful one was *sent*, ``lost`` is
  set as well, so the holder stops no later than etcd could expire the lease.
* etcd restarts: etcd keeps leases across a restart (and extends them by a
  TTL when it comes back). If keep-alives resume within the TTL the session
  simply survives; otherwise the holder sees ``lost`` and must open a new
  session (``lost`` is final). Closing the lost session still tries to revoke
  its lease, so keys an etcd restart kept alive do not linger for another TTL.
* Cuts: the keep-alive stream has a channel (and TCP connection) of its
  own, and each round trip must be answered within
  ``max(ttl / 10, ROUND_TRIP_FLOOR)``, and a retry waits at most
  ``ttl / 40`` (0.05 s at least). A cut that sends no reset leaves the
  connection looking open until gRPC's keepalive notices, later than the
  TTL; so an unanswered round trip abandons the connection and dials again
  (and has the store's shared channel to that endpoint dialled again,
  :meth:`~tickwheel_server.lease.etcd_transport.Endpoints.redial`). A cut
  shorter than the TTL less ``ttl / 10 + max(ttl / 10, 0.5 s, 1.2 s) +
  ttl / 40`` (a renewal period, noticing the cut has healed or gRPC's
  reconnect backoff after a reset, a retry's backoff) keeps the session
  (docs/architecture.md, Leases).
"""

from __future__ import annotations

import asyncio
import logging

import grpc
import grpc.aio
from pyetcd.etcdrpc import rpc_pb2

from tickwheel.shared.backoff import BackoffSleeper
from tickwheel_server.lease.base import Session
from tickwheel_server.lease.etcd_transport import (
    REQUIRE_LEADER,
    RETRY_CAP,
    RETRY_INITIAL,
    RETRYABLE_CODES,
    STREAM_BROKEN,
    LocallyCancelled,
    Stubs,
    Transport,
    dial,
    moves_on,
    read,
    within,
    write,
)
from tickwheel_server.lease.types import LeaseStoreError, SessionLost

log = logging.getLogger(__name__)

KEEPALIVES_PER_TTL = 10
"""A session renews its lease every ``ttl / KEEPALIVES_PER_TTL`` seconds, so
that a cut of the network starting just after a renewal has most of the
TTL to heal (see the module docstring)."""

ROUND_TRIP_FLOOR = 0.5
"""Seconds: a keep-alive round trip (connecting included) is given
``max(ttl / KEEPALIVES_PER_TTL, ROUND_TRIP_FLOOR)``; unanswered by then, the
session abandons its connection and dials etcd again."""


class EtcdSession(Session):
    """An etcd lease kept alive over a ``LeaseKeepAlive`` stream; see
    :class:`Session` and the module docstring.

    Built by :meth:`~tickwheel_server.lease.etcd.EtcdLeaseStore.open_session`
    once etcd granted the lease, which then calls :meth:`start`. ``sessions``
    is the store's set of open sessions: this one leaves it when closed.
    """

    def __init__(
        self, transport: Transport, lease_id: int, ttl: int, expires_at: float, sessions: set[EtcdSession]
    ) -> None:
        super().__init__()
        self.id = lease_id
        self.ttl = ttl
        self.renewals = 0
        """Successful keep-alives so far (for diagnostics and tests)."""
        self._transport = transport
        self._sessions = sessions
        self._expires_at = expires_at  # transport clock's monotonic time
        self._tasks: list[asyncio.Task[None]] = []
        self._revoked = False
        """True once a close's revoke was answered or given up (and said so)."""

    @property
    def alive_until(self) -> float:
        return self._expires_at

    def _monotonic(self) -> float:
        return self._transport.clock.monotonic()

    def start(self, keepalive: bool) -> None:
        """Start the watchdog that sets ``lost`` once the lease may have
        expired, and (with ``keepalive``) the renewals."""
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._watchdog(), name=f"etcd-lease-watchdog-{self.id:x}"))
        if keepalive:
            renewals = loop.create_task(self._keepalive(), name=f"etcd-lease-keepalive-{self.id:x}")
            renewals.add_done_callback(self._renewals_ended)
            self._tasks.append(renewals)

    def _renewals_ended(self, task: asyncio.Task[None]) -> None:
        """Log a keep-alive task that died of an error of its own: the
        watchdog still sets ``lost`` once the lease may have expired, but an
        operator must see why renewals stopped, not only that the session
        was lost a TTL later."""
        if task.cancelled() or task.exception() is None or self.lost.is_set():
            return
        log.error(
            "lease %x: renewals stopped on an unexpected error; the session is lost within its TTL (%.1f s)",
            self.id, self.ttl, exc_info=task.exception(),
        )

    def expire(self, reason: str) -> None:
        """etcd no longer knows the lease: set ``lost`` and stop renewing."""
        self._mark_lost(reason)
        self._stop_tasks()

    async def _watchdog(self) -> None:
        clock = self._transport.clock
        while not self.lost.is_set():
            remaining = self._expires_at - clock.monotonic()
            if remaining <= 0:
                self.expire(f"lease not renewed within its TTL ({self.ttl}s)")
                return
            await clock.sleep(remaining)

    async def _keepalive(self) -> None:
        transport, clock = self._transport, self._transport.clock
        interval = self.ttl / KEEPALIVES_PER_TTL
        deadline = max(interval, ROUND_TRIP_FLOOR)
        cap = max(RETRY_INITIAL, min(RETRY_CAP, self.ttl / 40))
        backoff = BackoffSleeper(clock, initial=RETRY_INITIAL, cap=cap)
        request = rpc_pb2.LeaseKeepAliveRequest(ID=self.id)
        stubs: Stubs | None = None
        failing = False  # a failure was logged at info level; the next are debug until a renewal
        try:
            while not self.lost.is_set():
                if stubs is None or stubs.endpoint != transport.endpoints.in_use:
                    if stubs is not None:
                        await stubs.channel.close()
                    stubs = dial(transport.endpoints.in_use, own_connection=True)
                call = stubs.lease.LeaseKeepAlive(metadata=REQUIRE_LEADER)

                async def round_trip() -> rpc_pb2.LeaseKeepAliveResponse:
                    await write(call, request, self.lost.is_set)
                    return await read(call, self.lost.is_set)

                try:
                    while not self.lost.is_set():
                        sent_at = clock.monotonic()
                        response = await within(clock, deadline, round_trip())
                        if response.TTL <= 0:
                            self.expire("lease expired (etcd answered the keep-alive with TTL 0)")
                            return
                        self._expires_at = max(self._expires_at, sent_at + response.TTL)
                        self.renewals += 1
                        if failing:
                            failing = False
                            log.info("lease %x renewed again via %s", self.id, stubs.endpoint)
                        transport.endpoints.answered(stubs.endpoint)
                        backoff.reset()
                        await clock.sleep(interval)
                except grpc.aio.AioRpcError as exc:
                    if exc.code() not in RETRYABLE_CODES:
                        self.expire(f"keep-alive refused: {exc.code().name}: {exc.details()}")
                        return
                    why = f"{exc.code().name}: {exc.details()}"
                    log.log(logging.DEBUG if failing else logging.INFO, "lease %x keep-alive via %s failed: %s",
                            self.id, stubs.endpoint, why)  # fmt: skip
                    failing = True
                    if moves_on(exc):
                        transport.endpoints.failover(stubs.endpoint, f"keep-alive: {why}")
                    await backoff.sleep()
                except (*STREAM_BROKEN, TimeoutError, LocallyCancelled) as exc:
                    # A connection that stopped answering (no RST on a silent
                    # cut) would hold every new stream too until gRPC's
                    # keepalive noticed, longer than the TTL: abandon it.
                    log.log(logging.DEBUG if failing else logging.INFO,
                            "lease %x keep-alive via %s failed (%s); dialling again", self.id, stubs.endpoint, exc)
                    failing = True
                    if isinstance(exc, TimeoutError):
                        # The store's shared connection to that endpoint is
                        # likely as silent: its watches and calls move too.
                        transport.endpoints.redial(stubs.endpoint, transport.try_timeout + 1)
                    transport.endpoints.failover(stubs.endpoint, f"keep-alive: {exc or type(exc).__name__}")
                    await stubs.channel.close()
                    stubs = None
                    await backoff.sleep()
                finally:
                    call.cancel()
        finally:
            if stubs is not None:
                await stubs.channel.close()

    def _stop_tasks(self) -> None:
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()

    async def close(self) -> None:
        """Stop the renewals and revoke the lease. A close cancelled before
        the revoke was answered (a stop or a failed start cancels the
        session loop that was revoking a lost session) leaves the revoke
        owed: the next close sends it again, and a revoke that cannot be
        sent is logged, never dropped in silence."""
        if self._revoked:
            return
        self.closed = True
        self._mark_lost("closed")
        self._stop_tasks()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._sessions.discard(self)
        if self._transport.closed:
            self._revoked = True
            log.warning("could not revoke lease %x (its keys expire with its TTL): the lease store is closed", self.id)
            return
        try:
            await self._transport.call(
                lambda s: s.lease.LeaseRevoke, rpc_pb2.LeaseRevokeRequest(ID=self.id), "lease revoke"
            )
        except SessionLost:
            pass  # already expired or revoked
        except LeaseStoreError as exc:
            log.warning("could not revoke lease %x (its keys expire with its TTL): %s", self.id, exc)
        self._revoked = True
