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
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime

from tickwheel.v1 import worker_pb2

from ..errors import Unavailable
from ..store.credentials import WorkerCredential
from ..store.executions import Capability

OUTBOX_SIZE = 1024


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
        it runs that the credential allows, HTTP if both say so."""
        allowed = self.credential.handlers
        handlers = tuple(sorted(h for h in self.handlers if not allowed or h in allowed))
        return Capability(tuple(sorted(self.credential.tenants)), handlers, self.http and self.credential.http)

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
    """Registry of the live Pull streams on this server."""

    def __init__(self) -> None:
        self._by_worker: dict[tuple[str, str], WorkerConnection] = {}

    def add(self, connection: WorkerConnection) -> WorkerConnection | None:
        """Register ``connection``; returns the stream it replaces (same
        credential and worker id), now closed."""
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
