"""The workers connected to this server, each with its Pull stream's outbox.

One writer per stream: everything sent to a worker goes through its bounded
outbox, so heartbeats, acks, drains and assignments never interleave writes
on one stream. Nothing waits for room in an outbox: the loops every worker
shares (the result writer, hand-out rounds, cancels) put into it, and a
stream whose outbox is full, its worker reading nothing of what it asked
for, is ended (UNAVAILABLE, as a silent one), so one worker that does not
read stalls no one else.

A stream is known by its credential and its worker id: a worker saying
hello with the worker id of another credential's worker is a different
worker, and never closes that one's stream.

What one credential may hold here is capped (:class:`StreamCaps`): its
streams, the server's streams, and the slots its streams state (each
stream's credit never exceeds its slots, ``api.worker``). A hello past a
cap is refused with RESOURCE_EXHAUSTED naming it; the streams already open
are left alone. Each stream costs the server whether it runs anything or
not: its tasks, its buffers, and a pass in every hand-out round of its
group (loadtest/RESULTS.md, "Streams and credit a credential may hold").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from tickwheel.v1 import worker_pb2

from ..errors import RateLimited, Unavailable
from ..store.credentials import WorkerCredential
from ..store.executions import Capability

OUTBOX_SIZE = 1024

DEFAULT_MAX_STREAMS = 4000
"""Worker streams one server holds: twice the design's whole fleet at its
peak (2 000 workers, DESIGN.md), so the fleet fits on one server after the
others died, with room for a reconnect wave."""
DEFAULT_MAX_STREAMS_PER_CREDENTIAL = 1000
"""Streams one worker credential holds on one server: half the design's
peak fleet sharing one credential on one server; a larger fleet raises it
or uses more credentials. Past it a credential's idle streams would cost
every tenant's rounds on the server, not only its own."""
DEFAULT_MAX_SLOTS_PER_CREDENTIAL = 50_000
"""The sum of ``hello.slots`` over one credential's streams on one server:
what its workers may be handed at once there (1 000 streams of 50 slots).
A stream's credit never exceeds its slots, so this bounds the credential's
credit on the server, and what it can pull of its tenants' backlog."""


class StreamRefused(RateLimited):
    """A hello past one of :class:`StreamCaps`: refused with RESOURCE_EXHAUSTED, nothing else changed."""


@dataclass(frozen=True)
class StreamCaps:
    """What one server takes of worker streams; each cap at least 1 (checked by ``ServerConfig``)."""

    max_streams: int = DEFAULT_MAX_STREAMS
    """Streams the server holds (``--max-worker-streams``)."""
    max_streams_per_credential: int = DEFAULT_MAX_STREAMS_PER_CREDENTIAL
    """Streams one credential holds on the server (``--max-streams-per-credential``)."""
    max_slots_per_credential: int = DEFAULT_MAX_SLOTS_PER_CREDENTIAL
    """The slots its streams state, summed (``--max-slots-per-credential``)."""


@dataclass(eq=False)
class WorkerConnection:
    """One worker's stream as the server sees it."""

    worker_id: str
    credential: WorkerCredential
    handlers: frozenset[str]
    http: bool
    slots: int
    connected_at: datetime
    credit: int = 0
    last_message: float | None = None
    """Monotonic instant of the last message the worker sent (any kind); None:
    not tracked (a connection made outside the Pull servicer, in tests). A
    stream silent for the heartbeat timeout is handed nothing (the gateway's
    rounds) and ended (``api.worker``)."""
    draining: bool = False
    outbox: asyncio.Queue[worker_pb2.PullResponse | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=OUTBOX_SIZE)
    )
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    ended_by: Exception | None = None
    """Why the server ended the stream (:meth:`end`): its status to the worker."""
    writing: asyncio.Task | None = None
    """The stream's writer while it waits for a write to go out (its worker's
    window full): :meth:`end` cancels that wait, so an ended stream that its
    worker does not read is not kept open by its last write."""
    write_given_up: bool = False
    """:meth:`end` cancelled the writer's wait (any other cancel of it is not ours to absorb)."""
    counted: bool = False
    """Counted against the caps (:meth:`Connections.reserve`) until :meth:`Connections.release`."""
    _capability: tuple | None = field(default=None, repr=False)
    """(credential, handlers, http, the :class:`Capability` they make): every hand-out round asks each
    stream of its group, and what it asks changes only at hello."""

    def silent(self, now: float, timeout: float) -> bool:
        """Nothing came from the worker for ``timeout`` seconds up to the
        monotonic instant ``now`` (never, when not tracked)."""
        return self.last_message is not None and now - self.last_message >= timeout

    @property
    def identity(self) -> tuple[str, str]:
        """(credential id, worker id): what a reconnect of this worker has in common with this stream."""
        return self.credential.id, self.worker_id

    @property
    def capability(self) -> Capability:
        """What this worker may receive: its credential's tenants, the handlers
        it runs that the credential allows, HTTP if both say so. Made once
        for the fields it is made of (compared by identity: a field replaced
        makes it again)."""
        credential, handlers, http = self.credential, self.handlers, self.http
        cached = self._capability
        if cached is not None and cached[0] is credential and cached[1] is handlers and cached[2] is http:
            return cached[3]
        allowed = credential.handlers
        made = Capability(
            tuple(sorted(credential.tenants)),
            tuple(sorted(h for h in handlers if not allowed or h in allowed)),
            http and credential.http,
        )
        self._capability = (credential, handlers, http, made)
        return made

    async def send(self, message: worker_pb2.PullResponse) -> None:
        """Queue ``message``; never waits. An outbox already full (the
        worker reads nothing of its stream: :data:`OUTBOX_SIZE` messages
        wait behind what its HTTP/2 window holds) ends the stream: what is
        queued is dropped and what the stream held follows the lost-worker
        rule, as for a stream cut off. Waiting for room instead would stall
        every worker's results and hand-outs behind this one's."""
        if self.closed.is_set():
            return
        try:
            self.outbox.put_nowait(message)
        except asyncio.QueueFull:
            self.end(Unavailable(f"worker {self.worker_id} reads nothing of its stream "
                                 f"({OUTBOX_SIZE} messages wait unread): reconnect"))

    def end(self, error: Exception) -> None:
        """End the stream now with ``error`` as its status (a revoked
        credential): what is queued and not yet written is dropped, so no
        assignment, ack or cancel reaches the worker after this call; what
        the stream held then follows the lost-worker rule when it closes."""
        if self.ended_by is None:
            self.ended_by = error
        while not self.outbox.empty():
            self.outbox.get_nowait()
        self.closed.set()
        self.outbox.put_nowait(None)
        if self.writing is not None and self.writing is not asyncio.current_task() and not self.write_given_up:
            self.write_given_up = True
            self.writing.cancel()

    def close(self) -> None:
        """Ask the stream's writer to finish after what is queued."""
        if not self.closed.is_set():
            self.closed.set()
            try:
                self.outbox.put_nowait(None)
            except asyncio.QueueFull:
                pass


class Connections:
    """Registry of the live Pull streams on this server, and the caps on them (:class:`StreamCaps`)."""

    def __init__(self, caps: StreamCaps | None = None, *, server_id: str = "") -> None:
        self.caps = caps or StreamCaps()
        self._server_id = server_id
        self._by_worker: dict[tuple[str, str], WorkerConnection] = {}
        self._counted = 0
        """Streams counted: registered, or reserved while their hello is answered."""
        self._streams_of: dict[str, int] = {}
        """Streams counted per credential id (no entry at 0)."""
        self._slots_of: dict[str, int] = {}
        """Their slots, summed, per credential id (no entry at 0)."""
        self._replacing: dict[tuple[str, str], WorkerConnection] = {}
        """The reserved stream that will replace each identity's registered one
        (one hello at a time per identity may pass a full stream cap)."""
        self._waiting_of: dict[str, int] = {}
        """Streams waiting for their hello, per credential id (no entry at 0)."""
        self.refused = 0
        """Hellos refused by a cap (and streams refused while waiting for theirs)."""

    def waiting_for_hello(self) -> int:
        """Streams waiting for their hello now (:meth:`before_hello`)."""
        return sum(self._waiting_of.values())

    @contextlib.contextmanager
    def before_hello(self, credential_id: str) -> Iterator[None]:
        """Around an authenticated stream's wait for its hello (up to the
        heartbeat timeout): at most ``max_streams_per_credential`` of one
        credential's streams wait at once on this server, one more is
        refused (:class:`StreamRefused`) as it opens. Counted apart from the
        streams that said hello, so that a worker replacing its stream at
        the cap is not refused before its hello says so."""
        waiting = self._waiting_of.get(credential_id, 0)
        if waiting >= self.caps.max_streams_per_credential:
            self.refused += 1
            where = f"server {self._server_id}" if self._server_id else "this server"
            raise StreamRefused(f"worker_credential:{credential_id}",
                                f"worker credential {credential_id} has {waiting} streams waiting for their hello "
                                f"on {where}, its cap (max_streams_per_credential = "
                                f"{self.caps.max_streams_per_credential})", retry_after=5.0)  # fmt: skip
        self._waiting_of[credential_id] = waiting + 1
        try:
            yield
        finally:
            left = self._waiting_of[credential_id] - 1
            if left:
                self._waiting_of[credential_id] = left
            else:
                del self._waiting_of[credential_id]

    def reserve(self, connection: WorkerConnection) -> None:
        """Count ``connection`` against the caps before its hello is
        answered; raises :class:`StreamRefused` (nothing counted) when it
        would pass one. A reconnect of a worker whose stream is still
        registered (same credential and worker id) replaces that stream
        (:meth:`add`): it passes a full stream cap, one hello at a time,
        since the count goes back once the old stream ends. Every reserved
        connection must be released (:meth:`release`)."""
        assert not connection.counted
        credential = connection.credential.id
        identity = connection.identity
        previous = self._by_worker.get(identity)
        replaces = previous is not None and identity not in self._replacing
        caps = self.caps
        streams = self._streams_of.get(credential, 0)
        slots = self._slots_of.get(credential, 0) - (previous.slots if replaces and previous.counted else 0)
        where = f"server {self._server_id}" if self._server_id else "this server"
        if not replaces and self._counted >= caps.max_streams:
            self._refuse(connection, f"{where} holds {self._counted} worker streams, its cap "
                                     f"(max_worker_streams = {caps.max_streams}): connect to another server")
        if not replaces and streams >= caps.max_streams_per_credential:
            self._refuse(connection, f"worker credential {credential} holds {streams} streams on {where}, its cap "
                                     f"(max_streams_per_credential = {caps.max_streams_per_credential})")
        if slots + connection.slots > caps.max_slots_per_credential:
            self._refuse(connection, f"worker credential {credential}'s streams on {where} state {slots} slots; "
                                     f"{connection.slots} more would pass its cap "
                                     f"(max_slots_per_credential = {caps.max_slots_per_credential})")
        if replaces:
            self._replacing[identity] = connection
        connection.counted = True
        self._counted += 1
        self._streams_of[credential] = streams + 1
        self._slots_of[credential] = self._slots_of.get(credential, 0) + connection.slots

    def _refuse(self, connection: WorkerConnection, description: str) -> None:
        self.refused += 1
        raise StreamRefused(f"worker_credential:{connection.credential.id}",
                            f"worker {connection.worker_id} refused: {description}", retry_after=5.0)

    def release(self, connection: WorkerConnection) -> None:
        """Stop counting ``connection`` (its stream ended, or its hello was refused). Idempotent."""
        self._forget_replacing(connection)
        if not connection.counted:
            return
        connection.counted = False
        credential = connection.credential.id
        self._counted -= 1
        for counts, amount in ((self._streams_of, 1), (self._slots_of, connection.slots)):
            left = counts[credential] - amount
            if left:
                counts[credential] = left
            else:
                del counts[credential]

    def _forget_replacing(self, connection: WorkerConnection) -> None:
        if self._replacing.get(connection.identity) is connection:
            del self._replacing[connection.identity]

    def held_by(self, credential_id: str) -> tuple[int, int]:
        """(streams, slots) counted for the credential on this server."""
        return self._streams_of.get(credential_id, 0), self._slots_of.get(credential_id, 0)

    def add(self, connection: WorkerConnection) -> WorkerConnection | None:
        """Register ``connection``; returns the stream it replaces (same
        credential and worker id), now closed."""
        self._forget_replacing(connection)
        previous = self._by_worker.get(connection.identity)
        self._by_worker[connection.identity] = connection
        if previous is not None:
            previous.close()
        return previous

    def remove(self, connection: WorkerConnection) -> None:
        if self._by_worker.get(connection.identity) is connection:
            del self._by_worker[connection.identity]

    def __len__(self) -> int:
        return len(self._by_worker)

    def all(self) -> list[WorkerConnection]:
        return list(self._by_worker.values())

    async def drain(self, deadline: datetime, reason: str) -> None:
        """Tell every worker to finish and reconnect elsewhere before ``deadline``."""
        message = worker_pb2.PullResponse(drain=worker_pb2.ServerDrain(reason=reason))
        message.drain.deadline_at.FromDatetime(deadline)
        for connection in self.all():
            try:
                connection.outbox.put_nowait(message)
            except asyncio.QueueFull:
                pass
