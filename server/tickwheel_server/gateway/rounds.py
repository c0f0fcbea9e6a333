"""Hand-out rounds: this server's workers with credit get the ready
executions they may run, claimed from the store and dealt out in batches.

Each round groups the workers with credit by what they may run and claims,
per group, at most their total credit from the store (one transaction:
weighted fair share across tenants within their caps, overlap policies,
concurrency keys; see :mod:`tickwheel_server.store.handout`), then deals the
claimed executions out and sends each worker one batched ``Assignments``
message. When candidates had to wait or were skipped instead, the group
claims again (a few times at most) so its credit is not left idle until the
next round. Every claim and deal passes the :mod:`.fence` first.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tickwheel.v1 import worker_pb2

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us
from tickwheel.shared.logs import log_execution

from ..store.executions import Capability, HandedOut, HandOutRound
from ..store.queue import ExecutionQueue
from ..telemetry.metrics import Metrics
from ..telemetry.outages import log_failure
from ..telemetry.tracing import Tracing, traceparent_of
from .armed import ArmedQueue
from .assignments import PrebuiltBatches
from .connections import Connections, WorkerConnection
from .fence import Fence, Lease
from .inflight import InFlight, Key

log = logging.getLogger(__name__)

MAX_BATCH = 2000
MAX_PASSES = 4
"""Claims per group and round while candidates are diverted (waited, skipped)."""
MAX_FULL_BATCHES = 20
"""Full batches per group and round before the round yields (and runs again at once)."""


@dataclass(eq=False, slots=True)
class _Batch:
    """One receiver's part of a deal: its message, what it holds, and the
    bookkeeping of its send decided with it (:meth:`Rounds.prepare`), so
    that the send only applies it."""

    message: worker_pb2.PullResponse
    items: list[HandedOut] = field(default_factory=list)
    keys: list[tuple[Key, int]] = field(default_factory=list)
    """((execution id, delivery), partition) of each item: attached at the send."""
    held: dict[Key, tuple[str, str]] = field(default_factory=dict)
    """(job id, tenant) of each item's delivery: noted at the send."""
    lateness: dict[str, list[float]] = field(default_factory=dict)
    """Each item's start lateness (seconds), per tenant: recorded after the send."""


@dataclass(eq=False)
class Prepared:
    """A deal decided and not yet sent (:meth:`Rounds.prepare`)."""

    batches: dict[WorkerConnection, _Batch] = field(default_factory=dict)
    """Per receiver, its message and what it holds."""
    unsent: list[tuple[str, int]] = field(default_factory=list)
    """What found no worker with credit: given back when sent."""
    spans: list = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(batch.items) for batch in self.batches.values())


@dataclass(eq=False)
class _Claiming:
    """A hand-out claim under way."""

    want: int
    claiming: asyncio.Future[HandOutRound] = field(init=False)
    full_take: bool = False
    """Its take moved ``want`` rows: more may be ready."""


class _Chain:
    """One worker group's claims in a hand-out round.

    A claim whose take came back full (its rows locked and moved) starts the
    next at once, from the store's callback, while it decides admission,
    commits and is dealt, and whatever the round is doing meanwhile: the
    next take passes over its rows (SKIP LOCKED), as another server's would.
    At most two claims run at once, at most ``MAX_FULL_BATCHES`` start per
    round, and none after the round ended (:attr:`closed`).

    ``claim(want, on_taken)`` runs one claim of at most ``want`` rows for the
    group; the store calls ``on_taken(count)``, in its own thread, once the
    claim's rows are taken."""

    def __init__(
        self, members: list[WorkerConnection], claim: Callable[[int, Callable[[int], None]], Awaitable[HandOutRound]]
    ) -> None:
        self._members = members
        self._claim = claim
        self.pending: deque[_Claiming] = deque()
        """Started, and not yet taken up by the round, oldest first."""
        self.undealt = 0
        """Rows the claims started and not yet dealt may take: their credit is not spent yet."""
        self.closed = False
        self._started: list[_Claiming] = []

    def room(self) -> int:
        credit = sum(c.credit for c in self._members if not c.closed.is_set())
        return min(credit - self.undealt, MAX_BATCH)

    def start(self, want: int) -> None:
        """Start a claim of ``want`` rows; :meth:`_progress` runs (on the loop)
        once its take is done (:attr:`_Claiming.full_take` set) and once it
        has ended."""
        loop = asyncio.get_running_loop()
        claim = _Claiming(want)

        def took(count: int) -> None:
            claim.full_take = count >= want
            self._progress(claim)

        def on_taken(count: int) -> None:  # in the store's thread, once the claim's rows are taken
            try:
                loop.call_soon_threadsafe(took, count)
            except RuntimeError:  # the loop closed meanwhile (shutting down): nobody waits for it
                pass

        claim.claiming = asyncio.ensure_future(self._claim(want, on_taken))
        claim.claiming.add_done_callback(lambda _: self._progress(claim))
        self._started.append(claim)
        self.pending.append(claim)
        self.undealt += want

    def _progress(self, _claim: _Claiming) -> None:
        if self.closed or len(self._started) >= MAX_FULL_BATCHES:
            return
        newest = self._started[-1]
        failed = newest.claiming.done() and (newest.claiming.cancelled() or newest.claiming.exception() is not None)
        if not newest.full_take or failed:
            return
        if sum(1 for claim in self._started if not claim.claiming.done()) >= 2:
            return  # two under way: the next starts when one of them ends
        more = self.room()
        if more > 0:
            self.start(more)


class Rounds:
    """Runs hand-out rounds (:meth:`hand_out_round`) for the workers of
    ``connections``: what it hands out is attached in ``inflight`` and noted
    in ``held`` (job id, tenant), which the gateway shares with the parts
    that end deliveries. ``backlog(full)`` says whether the round found more
    ready than it could take, ``signal_cancels()`` runs after a round that
    asked running executions to stop (an overlap ``replace``), and ``wake()``
    runs another round at once."""

    def __init__(
        self,
        store: ExecutionQueue,
        connections: Connections,
        clock: Clock,
        fence: Fence,
        inflight: InFlight[WorkerConnection],
        held: dict[Key, tuple[str, str]],
        *,
        wake: Callable[[], None],
        backlog: Callable[[bool], None],
        signal_cancels: Callable[[], Awaitable[int]],
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        armed: ArmedQueue | None = None,
    ) -> None:
        self._store = store
        self._armed = armed
        self._connections = connections
        self._clock = clock
        self._fence = fence
        self._inflight = inflight
        self._held = held
        self._wake = wake
        self._backlog = backlog
        self._signal_cancels = signal_cancels
        self._metrics = metrics
        self._tracing = tracing if tracing is not None and tracing.enabled else None
        self.started = 0
        """Rounds begun (a loan of credit to the dispatcher's claim wakes the next if one began meanwhile)."""
        self.running = 0
        """Rounds under way: one that began before a loan of credit may read its workers' credit during it."""
        self.ready_left = False
        """The last round that claimed ended a group's claims with a full one:
        ready work may be left that its workers' credit did not cover (the
        dispatcher's claim then hands nothing out itself: see :mod:`.claimed`)."""

    async def hand_out_round(self) -> int:
        """One round (:meth:`_hand_out_round`), counted in :attr:`started` and, while it runs, :attr:`running`."""
        self.started += 1
        self.running += 1
        try:
            return await self._hand_out_round()
        finally:
            self.running -= 1

    async def _hand_out_round(self) -> int:
        """One round: returns how many executions were handed out.

        Everything it hands out is stamped with the session current when it
        starts, and only while :meth:`.Fence.refusal` says nothing against it:
        before the round, inside each claim's transaction (a refused claim
        rolls back) and before each deal (refused: the claimed executions
        are given back, none reaches a worker)."""
        if self._store.handout.in_doubt.entries:
            # A hand-out whose COMMIT went unanswered: its rows back first,
            # whether or not this round claims (:mod:`..store.doubt`).
            try:
                await self._store.handout.in_doubt.settle()
            except Exception as error:
                log_failure(log, "undoing hand-outs in doubt failed", error, then="retrying at the next round")
        fence = self._fence
        lease = fence.lease
        refused = fence.refusal(lease)
        fence.note_refusal(refused)
        if refused is not None:
            if self._armed is not None:
                await self._armed.refused(self)
            return 0
        groups = self.groups()
        total = 0
        stopped = 0
        backlog = ready_left = claimed = False
        if self._armed is not None:
            # What was armed for this instant is only started and dealt; the
            # claims below take what is left of the credit.
            total += await self._armed.start_due(groups, lease, self, on_full=self._backlog)
        for capability, members in groups.items():
            if refused is not None:
                break
            diverted_passes = full_batches = 0
            full = False
            claimed = True
            chain = _Chain(
                members, lambda want, on_taken, capability=capability: self._claim(capability, want, lease, on_taken)
            )
            try:
                while True:
                    if not chain.pending:
                        want = chain.room()
                        if want <= 0:
                            break
                        chain.start(want)
                    current = chain.pending.popleft()
                    handed = await current.claiming
                    full = len(handed) >= current.want
                    # Its credit is spent as it is dealt (before the deal's
                    # first await): from here on, credit counts it.
                    chain.undealt -= current.want
                    refused = handed.fenced or fence.refusal(lease)
                    if refused is not None:
                        fence.note_refusal(refused)
                        await self._store.requeues.release([(item.id, item.delivery) for item in handed])
                        break
                    total += await self._deal(handed, members, self._clock.now())
                    stopped += handed.stopped
                    if full:
                        full_batches += 1
                        self._backlog(True)
                        if full_batches >= MAX_FULL_BATCHES:
                            backlog = True
                            self._wake()
                            break
                        continue
                    if not handed.diverted:
                        break
                    diverted_passes += 1
                    if diverted_passes >= MAX_PASSES:
                        break
            finally:
                ready_left = ready_left or full
                chain.closed = True
                for claim in chain.pending:  # the round ended with claims under way: give their rows back
                    await self._give_back(claim.claiming)
        self._backlog(backlog)
        if claimed:  # a round with no credit to claim for learns nothing of what is ready
            self.ready_left = ready_left
        if stopped:
            await self._signal_cancels()
        if self._armed is not None:
            # After the round's sends: arming for the next instants never delays this one.
            await self._armed.expire(lease)
            while await self._armed.arm_ahead(groups, lease):
                # What was just armed for the next second is started now: the
                # loop wakes a second before an instant, which may have passed.
                # An arming cut short for it goes on once that is started.
                total += await self._armed.start_due(groups, lease, self, on_full=self._backlog)
                if not self._armed.arming_cut:
                    break
        return total

    def groups(self) -> dict[Capability, list[WorkerConnection]]:
        """The workers that may be handed work now, by what they may run:
        with credit, not draining, not closed, not silent."""
        groups: dict[Capability, list[WorkerConnection]] = defaultdict(list)
        monotonic, timeout = self._clock.monotonic(), self._inflight.timeout
        for connection in self._connections.all():
            # A stream silent for the heartbeat timeout belongs to a frozen or cut-off
            # worker: what it were given would wait a whole timeout to be taken back.
            if (connection.credit > 0 and not connection.draining and not connection.closed.is_set()
                    and not connection.silent(monotonic, timeout)):
                groups[connection.capability].append(connection)
        return groups

    async def deal(self, handed: list[HandedOut], members: list[WorkerConnection]) -> int:
        """Send ``handed`` (handed out under this server's session) to
        ``members`` with credit, as a round deals what it claimed; what
        finds no credit is given back. How many were sent."""
        return await self._deal(handed, members, self._clock.now())

    async def _claim(
        self, capability: Capability, want: int, lease: Lease, on_taken: Callable[[int], None] | None = None
    ) -> HandOutRound:
        # ``now`` decides what is ready; the hand-out instant (lateness,
        # deadlines) is read after the claim reached the store, which may
        # have retried through an outage meanwhile.
        started = self._clock.monotonic()
        refusal = self._fence.refusal
        handed = await self._store.handout.hand_out_ready(
            lease.owner, self._clock.now(), capability, want, on_taken=on_taken, fence=lambda: refusal(lease)
        )
        if handed and self._metrics is not None:
            self._metrics.claimed("handout", len(handed), self._clock.monotonic() - started)
        return handed

    async def _give_back(self, claiming: asyncio.Future[HandOutRound]) -> None:
        try:
            handed = await asyncio.shield(claiming)
        except Exception as error:
            log_failure(log, "a claim under way when its round failed failed too", error, then="its executions wait")
            return
        if handed:
            await self._store.requeues.release([(item.id, item.delivery) for item in handed])

    def _span(self, spans: list, item: HandedOut, receiver: WorkerConnection):
        """Open the hand-out span of ``item`` (sent to ``receiver``), noted in ``spans`` to end after the send."""
        span = self._tracing.hand_out_span(
            item.trace_context,
            {"tickwheel.execution_id": item.id, "tickwheel.job_id": item.job_id,
             "tickwheel.tenant": item.tenant, "tickwheel.delivery": item.delivery,
             "tickwheel.attempt": item.attempt, "tickwheel.worker_id": receiver.worker_id},
            item.handed_out_at_us * 1000,
        )  # fmt: skip
        spans.append(span)
        return span

    async def _deal(
        self, handed: list[HandedOut], members: list[WorkerConnection], now: datetime,
        prebuilt: Sequence[bytes] | None = None,
    ) -> int:
        """Send ``handed`` to ``members`` with credit now (:meth:`prepare`
        then :meth:`send`); returns how many were sent."""
        return await self.send(self.prepare(handed, members, now, prebuilt))

    def assign(self, count: int, members: list[WorkerConnection]) -> list[WorkerConnection | None]:
        """Choose the receivers of ``count`` executions among ``members``
        with credit, round robin, spending their credit now (None: no
        credit left): a start records each one's worker before it is dealt
        (:meth:`prepare` with ``receivers``; :meth:`refund` gives back the
        credit of those it did not start)."""
        monotonic = self._clock.monotonic()
        timeout = self._inflight.timeout
        # Each eligible member once per pass, one execution each, until the count or their credit runs out.
        eligible = [c for c in members if c.credit > 0 and not c.closed.is_set() and not c.silent(monotonic, timeout)]
        chosen: list[WorkerConnection | None] = []
        while eligible and len(chosen) < count:
            still: list[WorkerConnection] = []
            for candidate in eligible[: count - len(chosen)]:
                chosen.append(candidate)
                candidate.credit -= 1
                if candidate.credit > 0:
                    still.append(candidate)
            eligible = still
        return chosen + [None] * (count - len(chosen))

    @staticmethod
    def refund(receivers: Sequence[WorkerConnection | None]) -> None:
        """Give back the credit :meth:`assign` spent for ``receivers``."""
        for receiver in receivers:
            if receiver is not None:
                receiver.credit += 1

    def prepare(
        self, handed: list[HandedOut], members: list[WorkerConnection], now: datetime,
        prebuilt: Sequence[bytes] | None = None, receivers: Sequence[WorkerConnection | None] | None = None,
    ) -> Prepared:
        """Deal ``handed`` to ``members`` with credit, round robin, one batch
        per worker, to be sent at ``now`` (:meth:`send`): each receiver's
        credit is spent here, what finds none is noted unsent. ``prebuilt``
        (armed executions): each one's Assignment from
        :func:`.assignments.prebuild`, completed here instead of built.
        ``receivers`` (a start, which recorded them): each one's receiver
        from :meth:`assign`, its credit already spent; one whose stream
        closed since is noted unsent (no other worker may get it)."""
        dealt = PrebuiltBatches(to_us(now))  # each worker's assignments as bytes, one parse a batch
        prepared = Prepared()
        batches = prepared.batches
        spans = prepared.spans
        debug = log.isEnabledFor(logging.DEBUG)
        monotonic = self._clock.monotonic()
        index = 0
        # Whether each member's stream is open and not silent: read once, not per
        # execution (nothing runs between here and the end of this loop to change it).
        timeout = self._inflight.timeout
        usable = [] if receivers is not None else [
            not member.closed.is_set() and not member.silent(monotonic, timeout) for member in members
        ]
        count = len(usable)
        for position, item in enumerate(handed):
            receiver = None
            if receivers is not None:
                receiver = receivers[position]
                if receiver is None or receiver.closed.is_set():
                    prepared.unsent.append((item.id, item.delivery))
                    continue
            for _ in range(count):
                at = index % count
                index += 1
                candidate = members[at]
                if candidate.credit > 0 and usable[at]:
                    receiver = candidate
                    break
            if receiver is None:
                prepared.unsent.append((item.id, item.delivery))
                continue
            if receivers is None:
                receiver.credit -= 1
            batch = batches.get(receiver)
            if batch is None:
                batch = batches[receiver] = _Batch(worker_pb2.PullResponse())
            batch.items.append(item)
            key = (item.id, item.delivery)
            batch.keys.append((key, item.partition))
            batch.held[key] = (item.job_id, item.tenant)
            lateness = batch.lateness.get(item.tenant)
            if lateness is None:
                lateness = batch.lateness[item.tenant] = []
            lateness.append((item.handed_out_at_us - max(item.due_at_us, item.ready_at_us)) / 1e6)
            # Untraced here, the worker's span joins the execution's trace directly.
            traceparent = item.trace_context
            if traceparent and self._tracing is not None:
                traceparent = traceparent_of(self._span(spans, item, receiver))
            if prebuilt is not None:
                dealt.add(receiver, item, prebuilt[position], traceparent)
            else:
                dealt.build(receiver, item, traceparent)
            if debug:
                log_execution(log, logging.DEBUG, "handed out (delivery %d, attempt %d) to worker %s", item.delivery,
                              item.attempt, receiver.worker_id, execution=item.id, job=item.job_id, tenant=item.tenant)
        for connection, batch in batches.items():
            dealt.merge_into(connection, batch.message)
        return prepared

    async def send(self, prepared: Prepared) -> int:
        """Send what :meth:`prepare` dealt: each delivery is attached to its
        worker (its heartbeat timeout runs from now), then its batch queued
        on the stream (no result can come before its delivery is attached),
        as :meth:`prepare` decided it. What a
        stream closed meanwhile would have received, and what found no
        credit, is given back. Returns how many were sent."""
        monotonic = self._clock.monotonic()
        unsent = list(prepared.unsent)
        sent_batches: list[_Batch] = []
        for connection, batch in prepared.batches.items():
            if connection.closed.is_set():
                unsent += [(item.id, item.delivery) for item in batch.items]
                continue
            self._inflight.attach_many(connection, batch.keys, connection.worker_id, monotonic)
            self._held.update(batch.held)
            await connection.send(batch.message)  # never waits: a full outbox ends its stream
            sent_batches.append(batch)
        for span in prepared.spans:
            span.end()
        if self._metrics is not None and sent_batches:
            lateness: dict[str, list[float]] = defaultdict(list)
            for batch in sent_batches:
                for tenant, values in batch.lateness.items():
                    lateness[tenant] += values
            self._metrics.handed_out(lateness)
        if unsent:
            await self._store.requeues.release(unsent)
        return sum(len(batch.items) for batch in sent_batches)

    def take_back(self, prepared: Prepared) -> list[tuple[str, int]]:
        """Undo :meth:`prepare` when its batch may not be sent (the fence
        refused): the credit it spent is given back to the receivers; returns
        every (execution id, delivery) it held, for the caller to release."""
        keys = list(prepared.unsent)
        for connection, batch in prepared.batches.items():
            connection.credit += len(batch.items)
            keys += [key for key, _partition in batch.keys]
        for span in prepared.spans:
            span.end()
        prepared.batches.clear()
        prepared.unsent.clear()
        return keys
