"""Liveness of what this server's workers hold: lost deliveries requeued,
re-attachments taken over, cancel requests passed on.

The gateway watches what its workers hold (:mod:`.inflight`): a delivery
whose heartbeats stop for the heartbeat timeout, or whose stream closed and
was not re-attached within the grace, is requeued through the store (same
id, the next hand-out is delivery + 1), and a worker still holding a stuck
one is told to cancel it. A worker that reconnects reports what it still
runs or has a result for; the deliveries of its credential's tenants still
running (and not held here by another worker's live stream) are re-attached
to this server's session, the rest are rejected.

The safety net: every few seconds the gateway reads (a page at a time,
through the ``executions_owner`` index) the running executions stamped with
its session, and requeues those that nothing here holds (no :mod:`.inflight`
entry: a hand-out whose commit was reported as failed but happened, a deal
that raised after the commit) once they were handed out longer than the
heartbeat timeout ago and were seen unheld in two passes. Such requeues do
not count towards the poison cap.

Cancel requests: about once a second (and at once after a round of its own
made one) the gateway reads the running executions stamped with its session
that someone asked to stop (CancelExecution on any server, an overlap
``replace``) and sends each holding worker one ``CancelExecutions``; the
worker's CANCELED result ends them. Every 5 s it also wakes the waiters of
concurrency keys that have free slots (a safety net under the wake-ups made
where slots are given back).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence

from tickwheel.v1 import worker_pb2

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us
from tickwheel.shared.logs import log_execution

from ..errors import Unavailable
from ..store.executions import Lost, RequeueResult
from ..store.requeue import RequeueStore
from ..telemetry.metrics import Metrics
from ..telemetry.outages import OutageLog
from .budget import OverBudget, UnheldBudget
from .connections import WorkerConnection
from .fence import SESSION_MARGIN, Fence
from .inflight import InFlight, Key
from .result_check import EXECUTION_ID

log = logging.getLogger(__name__)

ORPHAN_PAGE = 1000
"""Running executions the safety net reads per pass."""
MARKING_BURST = 200.0
MARKING_RATE = 20.0
"""Hellos per worker credential (this server) that mark what their worker
does not hold: each reads the credential's tenants' running rows, so a
credential reconnecting in a loop is held to this many reads a second
(bursts of :data:`MARKING_BURST`, a fleet reconnecting after a server's
death); past it a hello goes on without marking, and what it would have
marked waits the reaper's grace as before."""


class Liveness:
    """Keeps ``inflight`` true to what this server's workers hold and the
    store true to it: heartbeats, departures and re-attachments in, lost
    deliveries requeued, cancel requests passed on. ``held`` (job id,
    tenant per delivery, shared with the other parts) is forgotten for
    what it takes back; ``wake()`` runs a hand-out round."""

    def __init__(
        self,
        store: RequeueStore,
        clock: Clock,
        fence: Fence,
        inflight: InFlight[WorkerConnection],
        held: dict[Key, tuple[str, str]],
        budget: UnheldBudget,
        *,
        wake: Callable[[], None],
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self.outages = OutageLog(log, "liveness", clock)
        self._fence = fence
        self._inflight = inflight
        self._held = held
        self._budget = budget
        self._marking = UnheldBudget(clock, rate=MARKING_RATE, burst=MARKING_BURST)
        self._wake = wake
        self._metrics = metrics
        self.requeued = 0
        self.canceled = 0
        """Deliveries whose workers this gateway told to cancel them (cancel requests)."""
        self._orphan_cursor = ""
        self._suspects: dict[Key, float] = {}
        """Running deliveries stamped with this session that nothing here held
        when last read: key -> monotonic instant first seen so."""
        self._suspects_seen: set[Key] = set()
        self.orphans_requeued = 0

    def heartbeat(self, connection: WorkerConnection, keys: Sequence[Key]) -> None:
        """A worker's heartbeat: the deliveries it lists are alive. Those its
        stream does not hold cost the credential's budget, as results not
        held do (a worker lists only what it runs, give or take one that
        was just requeued; an entry listed twice costs too): raises
        :class:`OverBudget` once it has none left."""
        renewed = self._inflight.beat(connection, set(keys), self._clock.monotonic())
        unheld = len(keys) - renewed
        credential = connection.credential.id
        if unheld and self._budget.take(credential, unheld) < unheld:
            raise OverBudget(credential, self._budget.message(credential))

    def disconnected(self, connection: WorkerConnection) -> None:
        """A stream closed: what it held waits the grace for a re-attachment."""
        held = self._inflight.detach(connection, self._clock.monotonic())
        if held:
            log.info("worker %s left with %d executions in flight; requeued unless re-attached within %g s",
                     connection.worker_id, held, self._inflight.grace)

    async def reattach(
        self, connection: WorkerConnection, held: Sequence[Key], *, listed_all: bool = True,
    ) -> tuple[list[Key], list[Key]]:
        """Take over what a reconnecting worker still runs (or has a result
        for); returns (re-attached, rejected). Only deliveries of its
        credential's tenants and handlers still running at that delivery
        are taken, never one held here by a live stream of another worker or
        dealt to another; the rest are rejected, an unknown id and another
        tenant's alike, and cost the credential's budget. Raises
        :class:`OverBudget` when the credential has none left, and
        :class:`Unavailable` while this server's session is in doubt (a
        re-attachment stamps the session: under a dying one the reaper
        would take the work back and it would run twice; the worker says
        hello again, here or elsewhere); nothing is read then.

        ``listed_all`` (the hello is not cut at its bound): in the same
        transaction, the rows of its tenants dealt to this worker id under
        another session within the heartbeat timeout that it does not list
        are marked as not held (:mod:`..store.unheld`), for the reaper to
        give back at once should that session be dead; a hello listing
        nothing does that alone, and a failure there is logged, never the
        hello's; at most :data:`MARKING_RATE` such hellos a second per
        credential (bursts of :data:`MARKING_BURST`) mark anything. Nothing
        is written if the stream ends first."""
        marks = listed_all and self._marking.take(connection.credential.id, 1) == 1
        if not held and not marks:
            return [], []
        since_us = to_us(self._clock.now()) - int(self._inflight.timeout * 1_000_000) if marks else None
        ended: list[bool] = []

        def still_open() -> bool:
            return not ended and not connection.closed.is_set()

        if not held:
            try:
                await self._store.reattach(self._fence.owner, connection.worker_id, [],
                                           tenants=connection.credential.tenants, disown_since_us=since_us,
                                           still_open=still_open, may_serve=connection.credential.may_serve)
            except asyncio.CancelledError:
                ended.append(True)
                raise
            except Exception as error:  # the hello goes on: what it would have marked waits the grace
                self.outages.failed(f"noting what worker {connection.worker_id} does not hold", error)
            return [], []
        credential = connection.credential.id
        if self._budget.exhausted(credential):
            raise OverBudget(credential, self._budget.message(credential))
        session = self._fence.lease.session
        if session is not None and not session.surely_alive(SESSION_MARGIN * session.ttl):
            raise Unavailable(f"server session {self._fence.owner} is in doubt: cannot re-attach executions "
                              "now; say hello again shortly or to another server")
        wanted: list[Key] = []
        for key in held:
            holder = self._inflight.holder(key)
            if EXECUTION_ID.match(key[0]) and key[1] >= 1 and (holder is None or holder.identity == connection.identity):
                wanted.append(key)
        try:
            taken = await self._store.reattach(
                self._fence.owner, connection.worker_id, wanted, tenants=connection.credential.tenants,
                disown_since_us=since_us, still_open=still_open, may_serve=connection.credential.may_serve,
            ) if wanted or since_us is not None else []
        except asyncio.CancelledError:
            ended.append(True)  # asked before the commit: the transaction, still in its thread, rolls back
            raise
        monotonic = self._clock.monotonic()
        attached: list[Key] = []
        for item in taken:
            key = (item.execution_id, item.delivery)
            self._inflight.attach(connection, key, item.partition, connection.worker_id, monotonic)
            attached.append(key)
        kept = set(attached)
        rejected = [key for key in held if key not in kept]
        self._budget.take(credential, len(rejected))
        return attached, rejected

    async def run(self, interval: float = 1.0, stalled_interval: float = 5.0) -> None:
        """About every ``interval``: requeue the deliveries whose worker went
        silent or away, and tell workers about cancel requests; every
        ``stalled_interval``, wake waiters left asleep beside free key slots
        or behind a job with nothing running (:meth:`RequeueStore.wake_stalled`)
        and requeue what runs under this session with nothing here holding
        it (:meth:`requeue_orphans`)."""
        next_stalled = self._clock.monotonic() + stalled_interval
        while True:
            failed = False
            try:
                await self.requeue_expired()
            except Exception as error:
                failed = True
                self.outages.failed("requeuing lost executions", error)
            try:
                await self.signal_cancels()
            except Exception as error:
                failed = True
                self.outages.failed("reading cancel requests", error)
            if self._clock.monotonic() >= next_stalled:
                next_stalled = self._clock.monotonic() + stalled_interval
                try:
                    if await self._store.wake_stalled():
                        self._wake()
                except Exception as error:
                    failed = True
                    self.outages.failed("waking stalled waiters", error)
                try:
                    await self.requeue_orphans()
                except Exception as error:
                    failed = True
                    self.outages.failed("requeuing unheld running executions", error)
            if not failed:
                self.outages.ok()
            await self._clock.sleep(interval)

    async def requeue_orphans(self, page: int = ORPHAN_PAGE) -> RequeueResult:
        """One pass of the safety net: read the next ``page`` of running
        executions stamped with this session (:meth:`RequeueStore.running_under`,
        wrapping around at the end) and requeue each that

        - nothing here holds (no :mod:`.inflight` entry: no worker of this
          server runs it, none has a result for it waiting to be recorded),
        - was handed out more than the heartbeat timeout ago (a claim that
          committed and is not dealt yet is younger), and
        - was found so in an earlier pass too (a re-attachment committed
          and not yet entered here is seen held by the next pass).

        These are hand-outs that reached no worker although their commit
        happened: a commit reported as failed, a deal that raised. The
        requeue is conditional on the owner and delivery read, does not
        count towards the poison cap and wakes a round. Skipped while this
        server's session is in doubt. An execution left so is requeued
        within the heartbeat timeout and two passes (with every
        ``page`` more running executions here, one pass more)."""
        lease = self._fence.lease
        if lease.session is not None and not lease.session.surely_alive(SESSION_MARGIN * lease.session.ttl):
            return RequeueResult()
        rows = await self._store.running_under(lease.owner, self._orphan_cursor, page)
        wrapped = len(rows) < page
        self._orphan_cursor = "" if wrapped else rows[-1].execution_id
        now_us, now = to_us(self._clock.now()), self._clock.monotonic()
        cutoff_us = now_us - int(self._inflight.timeout * 1_000_000)
        lost: list[Lost] = []
        for row in rows:
            key = (row.execution_id, row.delivery)
            if key in self._inflight or row.handed_out_at_us is None or row.handed_out_at_us > cutoff_us:
                self._suspects.pop(key, None)
                continue
            self._suspects_seen.add(key)
            if key not in self._suspects:
                self._suspects[key] = now
            elif now > self._suspects[key]:
                lost.append(Lost(row.execution_id, row.delivery,
                                 f"running under session {lease.owner} with no worker of this server holding it",
                                 row.worker_id))
        if wrapped:  # a whole cycle read: forget suspects it did not find again
            self._suspects = {key: at for key, at in self._suspects.items() if key in self._suspects_seen}
            self._suspects_seen = set()
        if not lost or lease is not self._fence.lease:
            return RequeueResult()
        result = await self._store.requeue(lease.owner, lost, counts=False)
        for item in lost:
            self._suspects.pop((item.execution_id, item.delivery), None)
        taken = {retry.execution_id for retry in result.requeued} | set(result.canceled)
        for item in lost:
            if item.execution_id in taken:
                log_execution(log, logging.WARNING, "delivery %d requeued: %s", item.delivery, item.reason,
                              execution=item.execution_id, job="", tenant="")
        if self._metrics is not None:
            self._metrics.requeued("orphan", len(result.requeued))
        if result.requeued or result.canceled:
            self.orphans_requeued += len(result.requeued)
            self._wake()
        return result

    async def signal_cancels(self) -> int:
        """Send each worker holding a delivery someone asked to stop one
        ``CancelExecutions`` (once per attachment); returns how many were told."""
        requests = await self._store.cancel_requests(self._fence.owner)
        if not requests:
            return 0
        reasons = {(r.execution_id, r.delivery): r.reason for r in requests}
        told = 0
        for connection, keys in self._inflight.to_cancel(reasons).values():
            by_reason: dict[str, list[Key]] = defaultdict(list)
            for key in keys:
                by_reason[reasons[key]].append(key)
            for reason, group in sorted(by_reason.items()):
                await connection.send(
                    worker_pb2.PullResponse(
                        cancel=worker_pb2.CancelExecutions(
                            executions=[worker_pb2.InFlightExecution(execution_id=i, delivery=d) for i, d in group],
                            reason=reason,
                        )
                    )
                )
                told += len(group)
        if told:
            self.canceled += told
            log.info("told workers to cancel %d executions", told)
        return told

    async def requeue_expired(self) -> RequeueResult:
        """One pass of :meth:`run`."""
        expired = self._inflight.expired(self._clock.monotonic())
        if not expired:
            return RequeueResult()
        result = await self._store.requeue(
            self._fence.owner,
            [Lost(e.key[0], e.key[1], e.reason, e.worker_id) for e in expired],
            counts=True,
        )
        stuck: dict[WorkerConnection, list[Key]] = defaultdict(list)
        for item in expired:
            self._inflight.done(item.key)
            job_id, tenant = self._held.pop(item.key, ("", ""))
            log_execution(log, logging.INFO, "delivery %d taken back from worker %s: %s", item.key[1],
                          item.worker_id or "?", item.reason, execution=item.key[0], job=job_id, tenant=tenant)
            if item.connection is not None and not item.connection.closed.is_set():
                stuck[item.connection].append(item.key)
        for connection, keys in stuck.items():
            await connection.send(
                worker_pb2.PullResponse(
                    cancel=worker_pb2.CancelExecutions(
                        executions=[worker_pb2.InFlightExecution(execution_id=i, delivery=d) for i, d in keys],
                        reason="no heartbeat within the timeout: requeued",
                    )
                )
            )
        for letter in result.dead:
            log_execution(log, logging.WARNING, "dead-lettered as poison: %s", letter.reason,
                          execution=letter.execution_id, job=letter.job_id, tenant=letter.tenant)
        if self._metrics is not None:
            self._metrics.requeued("worker", len(result.requeued))
        if result.requeued or result.dead:
            self.requeued += len(result.requeued)
            log.warning(
                "requeued %d executions whose worker died or stopped heartbeating; %d dead-lettered as poison",
                len(result.requeued), len(result.dead),
            )
            self._wake()
        return result

