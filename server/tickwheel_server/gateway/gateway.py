"""The gateway: hands ready executions to this server's workers and records
their results.

A hand-out round runs when something may be ready: the timer wheel reached a
due instant, a worker granted credit or connected, or the sweep interval
(default 1 s) passed; the sweep is also how this server's workers take work
of partitions other servers own (work stealing). Each round groups the
workers with credit by what they may run and claims, per group, at most their
total credit from the store (one batched statement), then deals the claimed
executions out and sends each worker one batched ``Assignments`` message.

Never early: the claim compares ``ready_at`` with this server's clock. The
server's clock is compared with the database's at start and every minute;
while they differ by more than the tolerance (250 ms) no round hands anything
out, and the log says so.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from datetime import datetime, timedelta

from google.protobuf import timestamp_pb2
from tickwheel.v1 import job_pb2, worker_pb2

from ..api.convert import EXECUTION_ORIGIN_TO_PROTO
from ..clock import Clock
from ..store.handout import Capability, HandedOut, HandoutStore, ResultIn
from .connections import Connections, WorkerConnection

log = logging.getLogger(__name__)

MAX_BATCH = 500


def _ts(micros: int) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromMicroseconds(micros)
    return message


def assignment_for(handed: HandedOut, now: datetime) -> worker_pb2.Assignment:
    """The message a worker receives for one hand-out."""
    job = job_pb2.Job.FromString(handed.spec) if handed.spec else job_pb2.Job()
    timeout = job.timeout.ToTimedelta() if job.HasField("timeout") else timedelta(minutes=5)
    assignment = worker_pb2.Assignment(
        execution_id=handed.id,
        job_id=handed.job_id,
        tenant=handed.tenant,
        nominal_at=_ts(handed.nominal_at_us),
        due_at=_ts(handed.due_at_us),
        attempt=handed.attempt,
        delivery=handed.delivery,
        payload=handed.payload,
        target=job.target,
        missed_count=handed.missed_count,
        origin=EXECUTION_ORIGIN_TO_PROTO.get(handed.origin, 0),
    )
    assignment.deadline_at.FromDatetime(now + timeout)
    return assignment


class Gateway:
    def __init__(
        self,
        store: HandoutStore,
        connections: Connections,
        clock: Clock,
        *,
        owner: str,
        sweep_interval: float = 1.0,
        db_clock=None,
        skew_tolerance: float = 0.25,
        skew_check_interval: float = 60.0,
    ) -> None:
        self._store = store
        self._connections = connections
        self._clock = clock
        self.owner = owner
        self._sweep_interval = sweep_interval
        self._db_clock = db_clock
        self._skew_tolerance = skew_tolerance
        self._skew_check_interval = skew_check_interval
        self._wake = asyncio.Event()
        self.clock_skew: float | None = None
        self.handing_out = True
        self.rounds = 0
        self.round_done = asyncio.Event()

    def wake(self) -> None:
        """Run a hand-out round now (something may be ready)."""
        self._wake.set()

    async def run(self) -> None:
        next_skew_check = self._clock.monotonic()
        while True:
            if self._db_clock is not None and self._clock.monotonic() >= next_skew_check:
                await self._check_skew()
                next_skew_check = self._clock.monotonic() + self._skew_check_interval
            try:
                await self.hand_out_round()
            except Exception:
                log.exception("hand-out round failed; retrying at the next wake-up")
            self.rounds += 1
            self.round_done.set()
            self.round_done = asyncio.Event()
            sleeper = asyncio.create_task(self._clock.sleep(self._sweep_interval))
            waiter = asyncio.create_task(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waiter.cancel()
            self._wake.clear()

    async def _check_skew(self) -> None:
        try:
            db_now = await self._db_clock()
        except Exception as error:
            log.warning("cannot read the database's clock: %s", error)
            return
        skew = (self._clock.now() - db_now).total_seconds()
        self.clock_skew = skew
        ok = abs(skew) <= self._skew_tolerance
        if ok != self.handing_out:
            if ok:
                log.warning("clock skew %.3f s is within %.3f s again: handing out resumes", skew, self._skew_tolerance)
            else:
                log.error(
                    "clock skew %.3f s between this server and the database exceeds %.3f s: "
                    "handing out stops until they agree (never early)", skew, self._skew_tolerance,
                )
        self.handing_out = ok

    async def hand_out_round(self) -> int:
        """One round: returns how many executions were handed out."""
        if not self.handing_out:
            return 0
        groups: dict[Capability, list[WorkerConnection]] = defaultdict(list)
        for connection in self._connections.all():
            if connection.credit > 0 and not connection.draining and not connection.closed.is_set():
                groups[connection.capability].append(connection)
        total = 0
        for capability, members in groups.items():
            want = min(sum(c.credit for c in members), MAX_BATCH)
            # ``now`` decides what is ready; the hand-out instant (lateness,
            # deadlines) is read after the claim reached the store, which may
            # have retried through an outage meanwhile.
            handed = await self._store.claim_ready(self.owner, self._clock.now(), capability, want)
            total += await self._deal(handed, members, self._clock.now())
        return total

    async def _deal(self, handed: list[HandedOut], members: list[WorkerConnection], now: datetime) -> int:
        batches: dict[WorkerConnection, list[worker_pb2.Assignment]] = defaultdict(list)
        unsent: list[tuple[str, int]] = []
        index = 0
        for item in handed:
            receiver = None
            for _ in range(len(members)):
                candidate = members[index % len(members)]
                index += 1
                if candidate.credit > 0 and not candidate.closed.is_set():
                    receiver = candidate
                    break
            if receiver is None:
                unsent.append((item.id, item.delivery))
                continue
            receiver.credit -= 1
            receiver.in_flight[(item.id, item.delivery)] = now
            batches[receiver].append(assignment_for(item, now))
        for connection, assignments in batches.items():
            await connection.send(worker_pb2.PullResponse(assignment=worker_pb2.Assignments(assignments=assignments)))
        if unsent:
            await self._store.release(unsent)
        return len(handed) - len(unsent)

    async def record(self, connection: WorkerConnection, results: list[worker_pb2.ExecutionResult]) -> None:
        """Apply a worker's results and acknowledge each."""
        inputs = [
            ResultIn(
                execution_id=r.execution_id,
                delivery=r.delivery,
                attempt=r.attempt,
                outcome=r.outcome,
                error=r.error,
                worker_id=connection.worker_id,
                handed_out_at=connection.in_flight.get((r.execution_id, r.delivery)),
                retry_after=r.retry_after.ToTimedelta() if r.HasField("retry_after") else None,
            )
            for r in results
        ]
        acks = await self._store.record_results(inputs)
        for ack in acks:
            connection.in_flight.pop((ack.execution_id, ack.delivery), None)
        await connection.send(
            worker_pb2.PullResponse(
                ack=worker_pb2.ResultAcks(
                    acks=[
                        worker_pb2.ResultAck(
                            execution_id=a.execution_id, delivery=a.delivery, accepted=a.accepted, reason=a.reason
                        )
                        for a in acks
                    ]
                )
            )
        )
