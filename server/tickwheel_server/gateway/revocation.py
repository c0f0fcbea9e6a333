"""Open Pull streams whose worker credential was revoked are ended.

A stream is authenticated once, when it opens; a credential revoked later
must not keep it working. The server that revokes ends them at once
(:func:`end_streams`, from RevokeWorkerCredential), and tells the others
through the lease store (:mod:`tickwheel_server.cluster.revocations`),
which re-verify the streams of that credential at once
(:meth:`CredentialWatch.check_once` with its id). As the fallback when that
word is lost (etcd cut), :class:`CredentialWatch` re-verifies the
credentials of every open stream on this server, all of them in one store
read, every half of the authenticator's cache time, so a credential revoked
on any server ends its streams here within that cache time (the same bound
as a new call with it).

Ending a stream (:meth:`WorkerConnection.end`) drops what is queued for it
and closes it at once: no hand-out round deals to it any more, no result it
sends after is read, and the worker gets UNAUTHENTICATED. What it held then
follows the lost-worker rule (``Liveness.disconnected``): it waits the
re-attachment grace, which a revoked credential cannot use, and is
requeued.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable

from tickwheel.shared.clock import Clock

from ..auth.authenticator import CACHE_TTL_SECONDS
from ..errors import Unauthenticated
from ..telemetry.outages import OutageLog
from .connections import Connections, WorkerConnection

log = logging.getLogger(__name__)

REVOKED = "the worker credential was revoked: this stream is closed"


def revoked_streams(connections: Iterable[WorkerConnection], live: Collection[str]) -> list[WorkerConnection]:
    """The open streams whose credential is not in ``live`` (pure)."""
    return [c for c in connections if not c.closed.is_set() and c.credential.id not in live]


def end_streams(connections: Iterable[WorkerConnection], credential_ids: Collection[str]) -> int:
    """End every open stream authenticated with one of ``credential_ids``
    with UNAUTHENTICATED; returns how many were ended."""
    ended = 0
    for connection in connections:
        if connection.credential.id in credential_ids and not connection.closed.is_set():
            connection.end(Unauthenticated(REVOKED))
            ended += 1
            log.warning("worker %s's stream ended: its credential %s was revoked",
                        connection.worker_id, connection.credential.id)
    return ended


class CredentialWatch:
    """Re-verifies the credentials of this server's open streams.

    ``live`` answers, in one store read, which of the given credential ids
    are still valid (``WorkerCredentialStore.live``); ``on_revoked`` is told
    the ids found revoked (the authenticator drops them from its cache, so
    a reconnect is refused here at once)."""

    def __init__(
        self,
        connections: Connections,
        live: Callable[[Collection[str]], Awaitable[set[str]]],
        clock: Clock,
        *,
        interval: float = CACHE_TTL_SECONDS / 2,
        on_revoked: Callable[[set[str]], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be > 0")
        self._connections = connections
        self._live = live
        self._clock = clock
        self.outages = OutageLog(log, "credential watch", clock)
        self.interval = interval
        self._on_revoked = on_revoked
        self.checks = 0
        """Passes that read the store (tests await progress on it)."""

    async def check_once(self, credential_ids: Collection[str] | None = None) -> int:
        """One pass: read the open streams' credentials (only those of
        ``credential_ids`` when given: a revocation told by another server),
        end those revoked; returns how many streams were ended. Nothing is
        read when no such stream is open."""
        open_streams = [
            c for c in self._connections.all()
            if not c.closed.is_set() and (credential_ids is None or c.credential.id in credential_ids)
        ]  # fmt: skip
        if not open_streams:
            return 0
        live = await self._live({c.credential.id for c in open_streams})
        self.checks += 1
        # Only the streams whose credentials were read are judged; one
        # opened meanwhile is judged at the next pass.
        revoked = {c.credential.id for c in revoked_streams(open_streams, live)}
        if not revoked:
            return 0
        if self._on_revoked is not None:
            self._on_revoked(revoked)
        return end_streams(open_streams, revoked)

    async def run(self) -> None:
        """:meth:`check_once` every :attr:`interval` seconds until cancelled;
        a failed read is logged and tried again at the next pass."""
        while True:
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.outages.failed("re-verifying the open streams' worker credentials", error)
            else:
                self.outages.ok()
            await self._clock.sleep(self.interval)
