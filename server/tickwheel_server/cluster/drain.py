"""DrainServer: a server hands its partitions and its workers to the others
before a rolling restart, and keeps serving API calls meanwhile.

Draining this server (:meth:`Drainer.drain`):

1. Partitions: :meth:`PartitionOwnership.drain` leaves the member set and
   resigns every partition key, so the other servers win them at once at
   higher epochs (no session TTL to wait for); this server acquires nothing
   more until it stops.
2. Workers: every Pull stream is marked draining (the gateway hands it
   nothing more) and sent ``ServerDrain`` with the deadline ``now + grace``:
   the worker finishes what it runs, reports it and reconnects. Streams that
   connect while the server drains are told the same within
   ``recheck`` (0.5 s); a load balancer that checks health sends them
   elsewhere once ``on_drain`` has marked the worker service NOT_SERVING.
3. Its record (:mod:`tickwheel_server.cluster.presence`) says ``draining``.

Idempotent: a second drain releases nothing more and tells only streams
not told yet. There is no undrain: restart the server.

Draining another server: the answering server writes a request under
``/tickwheel/drains/<server id>/<request id>`` (with its own session, so a
request whose asker died vanishes), naming the target's current session;
the target follows that prefix (:meth:`Drainer.run`), drains if the session
is still its own (a request meant for a process that has since restarted is
refused, never applied to its successor) and writes its answer into the same
key; the asker reads it by watch and deletes the key. So DrainServer works
through any server, behind a load balancer too, with nothing but etcd
between servers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from tickwheel.v1 import worker_pb2

from tickwheel.shared.clock import Clock

from ..dispatcher.ownership import PartitionOwnership
from ..errors import FailedPrecondition, NotFound
from ..gateway.connections import Connections, WorkerConnection
from ..lease import EventType, LeaseStore, LeaseStoreError, Session, WatchCompacted
from ..lease.keys import drain_key, drains_prefix, server_key, session_name
from ..telemetry.outages import OutageLog

log = logging.getLogger(__name__)

DEFAULT_ANSWER_TIMEOUT = 10.0
REASON = "server draining (DrainServer): finish, report and reconnect elsewhere"


@dataclass(frozen=True)
class DrainResult:
    partitions_released: int
    workers_drained: int


class DrainUnanswered(Exception):
    """The server asked to drain did not answer in time (it may be stuck,
    or etcd unreachable); nothing is known about whether it drained."""


class Drainer:
    """Drains this server, and asks others to drain (see the module docstring).

    ``session`` returns the server's current etcd session; ``on_drain`` is
    awaited once, after the first drain (the app marks the worker service
    NOT_SERVING in health, and republishes the server's record)."""

    def __init__(
        self,
        ownership: PartitionOwnership,
        connections: Connections,
        leases: LeaseStore,
        session: Callable[[], Session | None],
        clock: Clock,
        *,
        server_id: str,
        on_drain: Callable[[], Awaitable[None]] | None = None,
        answer_timeout: float = DEFAULT_ANSWER_TIMEOUT,
        recheck: float = 0.5,
    ) -> None:
        self._ownership = ownership
        self._connections = connections
        self._leases = leases
        self._session = session
        self._clock = clock
        self.outages = OutageLog(log, "drain requests", clock)
        self.server_id = server_id
        self._on_drain = on_drain
        self._answer_timeout = answer_timeout
        self._recheck = recheck
        self._grace = timedelta(0)
        self._draining = asyncio.Event()
        self._lock = asyncio.Lock()
        self._sends: set[asyncio.Task[None]] = set()

    @property
    def draining(self) -> bool:
        return self._draining.is_set()

    # -- this server --------------------------------------------------------------

    async def drain(self, grace: timedelta) -> DrainResult:
        """Drain this server: partitions released now, workers told to
        finish within ``grace``. Returns what this call released and told."""
        async with self._lock:
            first = not self._draining.is_set()
            self._grace = grace if first else self._grace
            self._draining.set()
            released = await self._ownership.drain()
            told = self._tell_workers()
        if first:
            log.info("draining: %d partitions released, %d workers told (grace %s)", released, told, grace)
            if self._on_drain is not None:
                try:
                    await self._on_drain()
                except Exception:  # the drain happened; what follows it is told, not undone
                    log.exception("draining: the on_drain callback failed")
        return DrainResult(released, told)

    def _tell_workers(self) -> int:
        """Mark every stream not yet draining and queue its ServerDrain; how many."""
        deadline = self._clock.now() + self._grace
        told = 0
        for connection in self._connections.all():
            if connection.draining or connection.closed.is_set():
                continue
            connection.draining = True  # the gateway hands it nothing more
            message = worker_pb2.PullResponse(drain=worker_pb2.ServerDrain(reason=REASON))
            message.drain.deadline_at.FromDatetime(deadline)
            try:
                connection.outbox.put_nowait(message)
            except asyncio.QueueFull:  # a slow stream gets it after what is queued
                self._send_later(connection, message)
            told += 1
        return told

    def _send_later(self, connection: WorkerConnection, message: worker_pb2.PullResponse) -> None:
        task = asyncio.create_task(connection.send(message))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    # -- other servers ------------------------------------------------------------

    async def request(self, server_id: str, grace: timedelta) -> DrainResult:
        """Ask server ``server_id`` (not this one) to drain, and wait for its
        answer. NotFound when it is not alive; FailedPrecondition when it
        restarted between the lookup and its answer; DrainUnanswered when
        it does not answer within the timeout."""
        target = await self._leases.get(server_key(server_id))
        if target is None or not target.lease:
            raise NotFound("server", server_id)
        session = self._session()
        if session is None or session.lost.is_set():
            raise DrainUnanswered("this server has no etcd session right now")
        key = drain_key(server_id, secrets.token_hex(8))
        request = {
            "grace_us": grace // timedelta(microseconds=1),
            "session": session_name(target.lease),
            "asked_by": self.server_id,
        }
        revision = await self._leases.put(key, json.dumps(request), session=session)
        try:
            async with asyncio.timeout(self._answer_timeout):
                while True:
                    try:
                        async with self._leases.watch(key, start_revision=revision + 1) as events:
                            async for event in events:
                                if event.type is EventType.DELETE:
                                    raise DrainUnanswered(f"the drain request for {server_id} vanished unanswered")
                                answered = _drain_answer(server_id, event.value)
                                if answered is not None:
                                    return answered
                    except WatchCompacted:
                        # etcd's history was compacted under the watch: read the key as it is, watch from there
                        revision = await self._leases.current_revision()
                        kv = await self._leases.get(key)
                        if kv is None:
                            raise DrainUnanswered(f"the drain request for {server_id} vanished unanswered") from None
                        answered = _drain_answer(server_id, kv.value)
                        if answered is not None:
                            return answered
        except TimeoutError:
            raise DrainUnanswered(
                f"server {server_id} did not answer the drain request within {self._answer_timeout:g} s"
            ) from None
        finally:
            try:
                await self._leases.delete(key)
            except LeaseStoreError as error:
                log.debug("drain request %s left for its session to remove: %s", key, error)
        raise DrainUnanswered(f"the watch on the drain request for {server_id} ended")  # pragma: no cover

    async def run(self) -> None:
        """Until cancelled: answer drain requests addressed to this server,
        and once draining, tell streams that connected since."""
        await asyncio.gather(self._follow_requests(), self._recheck_loop())

    async def _follow_requests(self) -> None:
        """The requests present, then every new one (by watch)."""
        prefix = drains_prefix(self.server_id)
        while True:
            try:
                revision = await self._leases.current_revision()
                for kv in await self._leases.get_prefix(prefix):
                    await self._answer(kv.key, kv.value)
                self.outages.ok()
                async with self._leases.watch(prefix, prefix=True, start_revision=revision + 1) as events:
                    async for event in events:
                        if event.type is EventType.PUT:
                            await self._answer(event.key, event.value)
            except WatchCompacted:
                continue
            except LeaseStoreError as error:
                self.outages.failed("following drain requests", error)
                await self._clock.sleep(1.0)

    async def _recheck_loop(self) -> None:
        await self._draining.wait()
        while True:
            await self._clock.sleep(self._recheck)
            async with self._lock:
                told = self._tell_workers()
            if told:
                log.info("draining: told %d newly connected workers to reconnect elsewhere", told)

    async def _answer(self, key: str, value: bytes) -> None:
        try:
            request = json.loads(value)
        except ValueError:
            log.warning("ignoring a malformed drain request at %s", key)
            return
        if not isinstance(request, dict) or "result" in request or "error" in request:
            return  # an answer (ours) or not a request
        session = self._session()
        if session is None or session.lost.is_set():
            return  # the asker times out; a new session refuses it below
        mine = session_name(session.id)
        if request.get("session") != mine:
            request["error"] = (
                f"the request was for session {request.get('session')}, but this server runs under {mine} "
                "(it restarted or renewed its session): ask again"
            )
        else:
            grace = timedelta(microseconds=int(request.get("grace_us", 0)))
            result = await self.drain(grace)
            request["result"] = {
                "partitions_released": result.partitions_released, "workers_drained": result.workers_drained,
            }
        try:
            await self._leases.put(key, json.dumps(request), session=session)
        except LeaseStoreError as error:
            log.warning("cannot answer the drain request %s: %s", key, error)


def _drain_answer(server_id: str, value: bytes) -> DrainResult | None:
    """The result a drain request's value carries once answered (None while
    it is still the request); FailedPrecondition for an answered error."""
    answer = json.loads(value)
    if "error" in answer:
        raise FailedPrecondition(f"server {server_id!r}", answer["error"])
    if "result" in answer:
        result = answer["result"]
        return DrainResult(int(result["partitions_released"]), int(result["workers_drained"]))
    return None
