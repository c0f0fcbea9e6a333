"""Name lookups of HTTP targets, bounded by the call's deadline and capped per tenant.

``socket.getaddrinfo`` cannot be interrupted: a tenant whose target's name
server answers slowly, or never, would hold the HTTP call's thread, and so
its worker slot, past the job's deadline (a cancel or the deadline shuts
the call's sockets, and a lookup has none). Here each lookup runs in a
daemon thread of its own; the call waits for it at most until its
deadline, or until it is aborted, and then abandons it: the call ends
(TIMED_OUT, or CANCELED) and its slot is free, while the lookup's thread
finishes on its own in the background.

Abandoned lookups still hold a thread each until the resolver answers, so
they are capped: at most ``per_tenant`` lookups of one tenant's targets
under way at once (abandoned ones included) and ``total`` in all. A lookup
past a cap is not started: the call fails at once, retryably (the job's
retry policy applies), so one tenant's slow resolver costs its own HTTP
jobs, not the slots and threads of other tenants' jobs on the same worker.
"""

from __future__ import annotations

import concurrent.futures
import socket
import threading
from collections.abc import Callable
from typing import Any

from tickwheel_worker.threads import DaemonThreads

DEFAULT_LOOKUPS_PER_TENANT = 8
"""Lookups of one tenant's targets under way at once, abandoned ones included:
a healthy resolver answers in milliseconds, so a few at a time serve any
rate a worker's slots can run, and a hung one holds at most this many threads."""
DEFAULT_LOOKUPS = 64
"""Lookups under way at once on one worker, all tenants: so a credential
serving many tenants with hung resolvers holds a bounded number of threads."""

Lookup = Callable[[str, int], list[tuple[Any, ...]]]
"""``(host, port) -> getaddrinfo's list`` for TCP: blocking, may hang."""


def system_lookup(host: str, port: int) -> list[tuple[Any, ...]]:
    """The system's resolver (``socket.getaddrinfo``), TCP addresses only."""
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


class ResolverBusy(OSError):
    """A cap on lookups under way was reached: nothing was looked up (a retryable failure)."""


class LookupTimeout(TimeoutError):
    """The lookup did not answer before the call's deadline; it was abandoned."""


class LookupAborted(OSError):
    """The call was aborted (canceled, or its deadline passed) while its lookup ran; it was abandoned."""


class Resolver:
    """Runs lookups in daemon threads, at most ``per_tenant`` of one tenant
    and ``total`` in all under way at once. Thread-safe."""

    def __init__(
        self,
        lookup: Lookup = system_lookup,
        *,
        per_tenant: int = DEFAULT_LOOKUPS_PER_TENANT,
        total: int = DEFAULT_LOOKUPS,
    ) -> None:
        if per_tenant < 1 or total < 1:
            raise ValueError("per_tenant and total must be at least 1")
        self._lookup = lookup
        self.per_tenant = per_tenant
        self.total = total
        self._lock = threading.Lock()
        self._of: dict[str, int] = {}
        """Lookups under way per tenant (no entry at 0)."""
        self._under_way = 0
        self._threads = DaemonThreads()

    def under_way(self, tenant: str | None = None) -> int:
        """Lookups under way (abandoned ones included), of ``tenant`` or in all."""
        with self._lock:
            return self._under_way if tenant is None else self._of.get(tenant, 0)

    def resolve(
        self, tenant: str, host: str, port: int, timeout: float,
        waiting: Callable[[concurrent.futures.Future[None]], None] = lambda gate: None,
    ) -> list[tuple[Any, ...]]:
        """``host``'s addresses, waiting at most ``timeout`` seconds.
        ``waiting`` is handed the future the caller waits on before the
        wait begins: cancelling it (from any thread) abandons the lookup at
        once (:class:`LookupAborted`). Raises :class:`ResolverBusy` past a
        cap (nothing started), :class:`LookupTimeout` when the lookup is
        still under way at ``timeout``, and whatever the lookup raised."""
        with self._lock:
            held = self._of.get(tenant, 0)
            if held >= self.per_tenant:
                raise ResolverBusy(f"not called: {held} lookups of tenant {tenant}'s target hosts are under way, "
                                   f"the most a worker runs at once (a slow name server?); {host} not looked up")
            if self._under_way >= self.total:
                raise ResolverBusy(f"not called: {self._under_way} lookups of target hosts are under way on this "
                                   f"worker, the most it runs at once; {host} not looked up")
            self._of[tenant] = held + 1
            self._under_way += 1
        gate: concurrent.futures.Future[None] = concurrent.futures.Future()
        try:
            answer = self._threads.submit(self._run, tenant, host, port, name=f"tickwheel-lookup-{tenant}")
        except BaseException:
            self._done(tenant)
            raise
        answer.add_done_callback(lambda _: _open(gate))
        waiting(gate)
        try:
            gate.result(timeout)
        except concurrent.futures.CancelledError:
            raise LookupAborted(f"looking up {host} abandoned: the call was aborted") from None
        except concurrent.futures.TimeoutError:
            raise LookupTimeout(f"looking up {host} took more than {timeout:.3g} s; abandoned") from None
        return answer.result()

    def _run(self, tenant: str, host: str, port: int) -> list[tuple[Any, ...]]:
        try:
            return self._lookup(host, port)
        finally:
            self._done(tenant)

    def _done(self, tenant: str) -> None:
        with self._lock:
            left = self._of[tenant] - 1
            if left:
                self._of[tenant] = left
            else:
                del self._of[tenant]
            self._under_way -= 1


def _open(gate: concurrent.futures.Future[None]) -> None:
    """Let the waiter go on (unless it was aborted meanwhile)."""
    try:
        gate.set_result(None)
    except concurrent.futures.InvalidStateError:  # cancelled by an abort: nobody waits
        pass


DEFAULT_RESOLVER = Resolver()
"""The system's resolver with the default caps (a worker's HTTP calls share it)."""
