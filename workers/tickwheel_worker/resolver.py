"""Name lookups of HTTP targets, bounded by the call's deadline and capped per tenant.

``socket.getaddrinfo`` cannot be interrupted: a tenant whose target's name
server answers slowly, or never, would hold the HTTP call's thread, and so
its worker slot, past the job's deadline (a cancel or the deadline shuts
the call's sockets, and a lookup has none). Here each lookup runs in a
daemon thread of its own; the call waits for it at most until its
deadline, or until it is aborted, and then abandons it: the call ends
(TIMED_OUT, or CANCELED) and its slot is free, while the lookup's thread
finishes on its own in the background.

A lookup still under way after its call gave up on it holds a thread
until the name server answers, and says that name server is slow or
hung. So they are capped: while ``per_tenant`` lookups of one tenant's
targets are abandoned and still under way (``total`` of all tenants'),
a new lookup of that tenant (of any) is not started, and its call fails
at once, retryably (the job's retry policy applies): one tenant's hung
resolver then costs its own HTTP jobs, not the slots and threads of
other tenants' jobs on the same worker. Lookups a call still waits for
are not capped here: each holds a slot, and the slots bound them, so a
burst against a healthy resolver never meets the cap.
"""

from __future__ import annotations

import concurrent.futures
import socket
import threading
from collections.abc import Callable
from typing import Any

from tickwheel_worker.threads import DaemonThreads

DEFAULT_ABANDONED_PER_TENANT = 8
"""Lookups of one tenant's targets abandoned and still under way before its
new ones fail at once: a healthy resolver never leaves one (it answers
within any deadline), so a few tell a hung one, and hold a few threads."""
DEFAULT_ABANDONED = 64
"""The same over all tenants: a credential serving many tenants with hung
resolvers holds a bounded number of threads."""

Lookup = Callable[[str, int], list[tuple[Any, ...]]]
"""``(host, port) -> getaddrinfo's list`` for TCP: blocking, may hang."""


def system_lookup(host: str, port: int) -> list[tuple[Any, ...]]:
    """The system's resolver (``socket.getaddrinfo``), TCP addresses only."""
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


class ResolverBusy(OSError):
    """Too many lookups were abandoned and are still under way: nothing was looked up (a retryable failure)."""


class LookupTimeout(TimeoutError):
    """The lookup did not answer before the call's deadline; it was abandoned."""


class LookupAborted(OSError):
    """The call was aborted (canceled, or its deadline passed) while its lookup ran; it was abandoned."""


class _Lookup:
    """One lookup's state, under the resolver's lock."""

    __slots__ = ("tenant", "done", "abandoned")

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.done = False
        self.abandoned = False


class Resolver:
    """Runs lookups in daemon threads, waited for until the call's timeout
    or abort, and refuses to start more of a tenant whose abandoned lookups
    are still under way (see the module). Thread-safe."""

    def __init__(
        self,
        lookup: Lookup = system_lookup,
        *,
        per_tenant: int = DEFAULT_ABANDONED_PER_TENANT,
        total: int = DEFAULT_ABANDONED,
    ) -> None:
        if per_tenant < 1 or total < 1:
            raise ValueError("per_tenant and total must be at least 1")
        self._lookup = lookup
        self.per_tenant = per_tenant
        self.total = total
        self._lock = threading.Lock()
        self._abandoned_of: dict[str, int] = {}
        """Abandoned lookups still under way, per tenant (no entry at 0)."""
        self._abandoned = 0
        self._threads = DaemonThreads()

    def abandoned(self, tenant: str | None = None) -> int:
        """Lookups abandoned by their calls and still under way, of ``tenant`` or in all."""
        with self._lock:
            return self._abandoned if tenant is None else self._abandoned_of.get(tenant, 0)

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
            held = self._abandoned_of.get(tenant, 0)
            if held >= self.per_tenant:
                raise ResolverBusy(f"not called: {held} lookups of tenant {tenant}'s target hosts outlived their "
                                   f"calls and are still under way (a slow or hung name server); {host} not looked up")
            if self._abandoned >= self.total:
                raise ResolverBusy(f"not called: {self._abandoned} lookups of target hosts outlived their calls and "
                                   f"are still under way on this worker; {host} not looked up")
        state = _Lookup(tenant)
        gate: concurrent.futures.Future[None] = concurrent.futures.Future()
        answer = self._threads.submit(self._run, state, host, port, name="tickwheel-lookup")
        answer.add_done_callback(lambda _: _open(gate))
        waiting(gate)
        try:
            gate.result(timeout)
        except concurrent.futures.CancelledError:
            self._abandon(state)
            raise LookupAborted(f"looking up {host} abandoned: the call was aborted") from None
        except concurrent.futures.TimeoutError:
            self._abandon(state)
            raise LookupTimeout(f"looking up {host} took more than {timeout:.3g} s; abandoned") from None
        return answer.result()

    def _run(self, state: _Lookup, host: str, port: int) -> list[tuple[Any, ...]]:
        try:
            return self._lookup(host, port)
        finally:
            with self._lock:
                state.done = True
                if state.abandoned:
                    self._count(state.tenant, -1)

    def _abandon(self, state: _Lookup) -> None:
        with self._lock:
            if not state.done:  # one that answered meanwhile holds nothing
                state.abandoned = True
                self._count(state.tenant, 1)

    def _count(self, tenant: str, change: int) -> None:
        """Under the lock: the abandoned lookups of ``tenant`` and in all change by ``change``."""
        left = self._abandoned_of.get(tenant, 0) + change
        if left:
            self._abandoned_of[tenant] = left
        else:
            del self._abandoned_of[tenant]
        self._abandoned += change


def _open(gate: concurrent.futures.Future[None]) -> None:
    """Let the waiter go on (unless it was aborted meanwhile)."""
    try:
        gate.set_result(None)
    except concurrent.futures.InvalidStateError:  # cancelled by an abort: nobody waits
        pass


DEFAULT_RESOLVER = Resolver()
"""The system's resolver with the default caps (a worker's HTTP calls share it)."""
