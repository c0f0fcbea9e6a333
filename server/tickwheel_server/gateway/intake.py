"""Result intake: workers' results checked, queued, recorded and
acknowledged, counted only from the stream that holds their delivery.

A result counts only from the stream that holds its delivery. Each is
checked field by field first (:mod:`.result_check`: a malformed one is
refused naming the field, nothing written); one the stream holds is queued
and its delivery kept alive until it is recorded (:meth:`InFlight.hold_result`),
or watched again when the store refuses it as the worker's error (a wrong
``attempt``: the delivery is requeued when its heartbeats stop, a requeue
that counts towards the poison cap, so a worker that always errs cannot
have the run handed out again and again);
one it does not hold is never applied, only classified by the store within
the credential's tenants (answered like an unknown id otherwise), and costs
the credential's budget (:mod:`.budget`), as do malformed ones. A retry's
ready instant goes into the timer wheel through ``on_retry``, the same
due-time path as any occurrence.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Sequence

from tickwheel.v1 import worker_pb2

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us
from tickwheel.shared.logs import log_execution

from ..errors import FieldViolation
from ..store.executions import ResultIn, Retry
from ..store.outcomes import OutcomeStore
from ..telemetry.metrics import OTHER, OUTCOMES, Metrics
from ..telemetry.refusals import RefusalLog
from .acks import AckBatches
from .budget import OverBudget, UnheldBudget
from .connections import WorkerConnection
from .inflight import Holding, InFlight, Key
from .result_check import read_result
from .results import ResultQueue

log = logging.getLogger(__name__)


class Intake:
    """Takes workers' results (:meth:`submit_results`, :meth:`record`) and
    writes them (:attr:`results`, whose writer the gateway runs). A held
    delivery whose result is recorded leaves ``inflight`` and ``held`` (job
    id, tenant per delivery, shared with the other parts); ``wake()`` runs a
    hand-out round once results were recorded (they may have freed a job or
    a concurrency key), ``on_retry`` gets each retry's ready instant."""

    def __init__(
        self,
        store: OutcomeStore,
        clock: Clock,
        inflight: InFlight[WorkerConnection],
        held: dict[Key, tuple[str, str]],
        budget: UnheldBudget,
        *,
        wake: Callable[[], None],
        on_retry: Callable[[Retry], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._inflight = inflight
        self._held = held
        self._budget = budget
        self._wake = wake
        self._on_retry = on_retry
        self._metrics = metrics
        self.refusals = RefusalLog(now=clock.monotonic)
        """Messages of malformed results, by credential id: each answered, one INFO line a minute a credential."""
        self.results: ResultQueue[WorkerConnection, ResultIn] = ResultQueue(
            self._record_batch, clock, refuse=self._refuse
        )
        """Workers' results, written in large batches after the starts (:mod:`.results`)."""

    async def submit_results(self, connection: WorkerConnection, results: Sequence[worker_pb2.ExecutionResult]) -> None:
        """A worker's results: each malformed one refused at once, the rest
        queued for the writer, which records and acknowledges them (waits
        while the queue is full). Raises :class:`OverBudget` when what the
        stream does not hold exceeds the credential's budget: the results
        past it are neither queued nor acknowledged (the worker sends them
        again), and the stream must end."""
        admitted, over = await self._admit(connection, results)
        if admitted:
            await self.results.submit(connection, admitted)
        if over:
            raise OverBudget(connection.credential.id, self._budget.message(connection.credential.id))

    async def record(self, connection: WorkerConnection, results: Sequence[worker_pb2.ExecutionResult]) -> None:
        """:meth:`submit_results`, but applied and acknowledged now (not queued)."""
        admitted, over = await self._admit(connection, results)
        await self._record_batch([(connection, item) for item in admitted])
        if over:
            raise OverBudget(connection.credential.id, self._budget.message(connection.credential.id))

    async def _admit(
        self, connection: WorkerConnection, results: Sequence[worker_pb2.ExecutionResult]
    ) -> tuple[list[ResultIn], bool]:
        """Check a stream's results and decide, for each, whether the stream
        holds its delivery (then it is pending: its delivery stays alive until
        it is recorded or refused). Refuses the malformed ones now. Returns
        what to record, and whether the credential's budget ran out before
        the end (what is past it is dropped unacknowledged)."""
        now_us = to_us(self._clock.now())
        tenants, may_serve = connection.credential.tenants, connection.credential.may_serve
        admitted: list[ResultIn] = []
        costly: list[tuple[worker_pb2.ExecutionResult, ResultIn | None, Holding | str]] = []
        """Results that cost the budget, each as read (None: malformed) with why it was refused, or what holds it."""
        worker_id, hold = connection.worker_id, self._inflight.hold_result
        for result in results:
            read = read_result(result, now_us, worker_id, tenants, may_serve)
            if isinstance(read, FieldViolation):
                costly.append((result, None, f"invalid result: {read.field}: {read.description}"))
                continue
            holding = hold(connection, (read.execution_id, read.delivery))
            if holding is Holding.HELD:
                admitted.append(read)
            else:
                costly.append((result, read, holding))
        granted = self._budget.take(connection.credential.id, len(costly))
        refused = worker_pb2.PullResponse()
        for result, read, why in costly[:granted]:
            if read is None:
                refused.ack.acks.add(execution_id=result.execution_id, delivery=result.delivery, accepted=False,
                                     reason=why)
            else:  # a second result for a pending one is recorded too: recording is idempotent
                admitted.append(read._replace(held=why is Holding.DUPLICATE))
        if refused.ack.acks:
            first = refused.ack.acks[0]
            said = self.refusals.refused(connection.credential.id)
            log.log(logging.INFO if said else logging.DEBUG,
                    "refused %d malformed results from worker %s (credential %s); the first, for %r: %s",
                    len(refused.ack.acks), connection.worker_id, connection.credential.id,
                    first.execution_id[:64], first.reason)
            await connection.send(refused)
        return admitted, granted < len(costly)

    async def _refuse(self, item: tuple[WorkerConnection, ResultIn], error: Exception) -> None:
        """A result whose write fails for a reason retrying cannot fix: its
        worker is told, and its delivery is watched again (its worker forgot
        it, so it is requeued when the heartbeat timeout passes)."""
        connection, result = item
        key = (result.execution_id, result.delivery)
        if result.held:
            self._inflight.result_refused(key)
        job_id, tenant = self._held.get(key, ("", ""))
        log_execution(log, logging.ERROR, "result of delivery %d from worker %s cannot be recorded: %s: %s",
                      result.delivery, connection.worker_id, type(error).__name__, error,
                      execution=result.execution_id, job=job_id, tenant=tenant)
        reply = worker_pb2.PullResponse()
        reply.ack.acks.add(execution_id=result.execution_id, delivery=result.delivery, accepted=False,
                           reason=f"the server cannot record this result ({type(error).__name__})")
        try:
            await connection.send(reply)
        except Exception:  # noqa: BLE001 - the refusal stands whether or not the worker hears of it
            log.exception("cannot tell worker %s its result was refused", connection.worker_id)

    async def _record_batch(self, items: list[tuple[WorkerConnection, ResultIn]]) -> None:
        """Apply results of any workers in one transaction and acknowledge
        each to its worker, in order."""
        inputs = [result for _, result in items]
        acks = await self._store.record_results(inputs)
        debug = log.isEnabledFor(logging.DEBUG)
        self._wake()  # an execution that ended may have freed its job or a key for the next in line
        replies = AckBatches()
        counted: Counter[tuple[str, int, bool]] = Counter()
        done, held_pop = self._inflight.done, self._held.pop  # bound once: one call each per result
        for (connection, result), ack in zip(items, acks):
            if not result.held:  # never applied: whatever holds that delivery (here or not) keeps it
                if debug:
                    log.debug("result of delivery %d of %r from worker %s, not held by its stream: %s", ack.delivery,
                              ack.execution_id, connection.worker_id, ack.reason or "accepted")
                replies.add(connection, ack.execution_id, ack.delivery, ack.accepted, ack.reason)
                continue
            key = (ack.execution_id, ack.delivery)
            if ack.watch_again:  # still running, and its worker's: requeued (counted) once its heartbeats stop
                self._inflight.result_refused(key)
                held = self._held.get(key)
            else:
                done(key)
                held = held_pop(key, None)
            job_id, tenant = held if held is not None else ("", "")
            if not ack.accepted:
                log_execution(log, logging.INFO, "result of delivery %d from worker %s rejected: %s", ack.delivery,
                              connection.worker_id, ack.reason, execution=ack.execution_id, job=job_id, tenant=tenant)
            elif debug:
                log_execution(log, logging.DEBUG, "result %s (delivery %d) from worker %s",
                              OUTCOMES.get(result.outcome, "unspecified"), ack.delivery, connection.worker_id,
                              execution=ack.execution_id, job=job_id, tenant=tenant)
            if ack.accepted:
                # A delivery re-attached from another server has no tenant here.
                counted[(held[1] if held is not None else OTHER, result.outcome, ack.retry is not None)] += 1
            if ack.retry is not None and self._on_retry is not None:
                self._on_retry(ack.retry)
            replies.add(connection, ack.execution_id, ack.delivery, ack.accepted, ack.reason)
        if self._metrics is not None:
            self._metrics.results(counted)
        await asyncio.gather(*(connection.send(reply) for connection, reply in replies.messages().items()))
