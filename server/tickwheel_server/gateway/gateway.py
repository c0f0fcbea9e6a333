"""The gateway: hands ready executions to this server's workers and records
their results.

A hand-out round runs when something may be ready: the timer wheel reached a
due instant, a worker granted credit or connected, results were recorded
(they may have freed a job or a concurrency key), or the sweep interval
(default 1 s) passed; the sweep is also how this server's workers take work
of partitions other servers own (work stealing). Each round groups the
workers with credit by what they may run and claims, per group, at most their
total credit from the store (one transaction: weighted fair share across
tenants within their caps, overlap policies, concurrency keys; see
:mod:`tickwheel_server.store.handout`), then deals the claimed executions out
and sends each worker one batched ``Assignments`` message. When candidates
had to wait or were skipped instead, the group claims again (a few times at
most) so its credit is not left idle until the next round.

Never early: the claim compares ``ready_at`` with this server's clock. The
server's clock is compared with the database's before the first round and
every minute (every second while the comparison fails, is too slow to
decide, or finds them apart); nothing is handed out before a first
conclusive comparison, while they differ by more than the tolerance (250 ms),
once the last conclusive one is older than two minutes, or after this
server's wall clock was stepped (until a new comparison, made at once): the
rules are :mod:`.clockguard`'s. The log says so, and ``on_skew`` raises a
clock-skew alert (resolved when they agree again).

Fenced by the session: every hand-out is stamped with this server's session
(``owner``), which the reaper treats as dead once its lease is gone. So a
round hands out only while that session surely lives (its
:meth:`~tickwheel_server.lease.base.Session.surely_alive`, by this server's
monotonic clock, with a margin of a quarter of its TTL): checked before the
round, inside each claim's transaction just before it commits (a refusal
rolls it back: nothing was handed out), and again before the claimed
executions are dealt (a refusal gives them back). A process frozen past its
TTL (SIGSTOP, a GC pause, a suspended VM) wakes to a clock past that
instant, so it hands nothing out under the dead session, whatever task runs
first; it resumes once the server holds a new session
(:meth:`Gateway.use_session`). The clock guard is checked at the same three
points.

The gateway also watches what its workers hold (:mod:`.inflight`): a
delivery whose heartbeats stop for the heartbeat timeout, or whose stream
closed and was not re-attached within the grace, is requeued through the
store (same id, the next hand-out is delivery + 1), and a worker still
holding a stuck one is told to cancel it. A worker that reconnects reports
what it still runs or has a result for; the deliveries of its credential's
tenants still running (and not held here by another worker's live stream)
are re-attached to this server's session, the rest are rejected.

A result counts only from the stream that holds its delivery. Each is
checked field by field first (:mod:`.result_check`: a malformed one is
refused naming the field, nothing written); one the stream holds is queued
and its delivery kept alive until it is recorded (:meth:`InFlight.hold_result`);
one it does not hold is never applied, only classified by the store within
the credential's tenants (answered like an unknown id otherwise), and costs
the credential's budget (:mod:`.budget`), as do malformed ones. A retry's ready instant goes into
the timer wheel through ``on_retry``, the same due-time path as any
occurrence.

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
worker's CANCELED result ends them. Every 30 s it also wakes the waiters of
concurrency keys that have free slots (a safety net under the wake-ups made
where slots are given back).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tickwheel.v1 import worker_pb2

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import set_timestamp_us, to_us
from tickwheel.shared.logs import log_execution

from ..errors import Unavailable
from ..lease.base import Session
from ..store.handout import (
    Capability, Claimed, Definition, HandedOut, HandoutStore, Lost, RequeueResult, ResultIn, Retry,
)
from ..telemetry.metrics import OTHER, OUTCOMES, Metrics
from ..telemetry.tracing import Tracing, traceparent_of
from ..wire import EXECUTION_ORIGIN_TO_PROTO
from . import clockguard
from .budget import DEFAULT_BURST, DEFAULT_RATE, OverBudget, UnheldBudget
from .connections import Connections, WorkerConnection
from .inflight import Holding, InFlight, Key
from .result_check import EXECUTION_ID, check_result, result_in
from .results import ResultQueue

log = logging.getLogger(__name__)

MAX_BATCH = 2000
MAX_PASSES = 4
"""Claims per group and round while candidates are diverted (waited, skipped)."""
MAX_FULL_BATCHES = 20
"""Full batches per group and round before the round yields (and runs again at once)."""


DEFAULT_TIMEOUT_US = 5 * 60 * 1_000_000
"""A job's run time limit when it names none: 5 minutes."""

SESSION_MARGIN = 0.25
"""Hand out only while the session surely lives for this part of its TTL more."""
SKEW_RETRY_INTERVAL = 1.0
"""Seconds between comparisons of the clocks while hand-out waits for one."""
CLOCK_STEP = 0.1
"""Seconds the wall clock may move against the monotonic clock before the
clocks are compared again (NTP slews at most 0.5 ms/s: 60 ms in two minutes)."""
ORPHAN_PAGE = 1000
"""Running executions the safety net reads per pass."""


_NO_DEFINITION = Definition.parse(b"")
"""For an execution whose job was deleted while it was ready."""


def add_assignment(batch: worker_pb2.PullResponse, handed: HandedOut, now_us: int) -> worker_pb2.Assignment:
    """Add to ``batch`` the assignment a worker receives for one hand-out
    (``now_us``: when it is sent, which starts its run time limit). Built
    in place in the batch: an Assignment built apart is copied whole when
    it is put in one."""
    definition = handed.definition or _NO_DEFINITION
    assignment = batch.assignment.assignments.add(
        execution_id=handed.id,
        job_id=handed.job_id,
        tenant=handed.tenant,
        attempt=handed.attempt,
        delivery=handed.delivery,
        payload=handed.payload,
        target=definition.target,
        missed_count=handed.missed_count,
        origin=EXECUTION_ORIGIN_TO_PROTO.get(handed.origin, 0),
    )
    set_timestamp_us(assignment.nominal_at, handed.nominal_at_us)
    set_timestamp_us(assignment.due_at, handed.due_at_us)
    timeout_us = DEFAULT_TIMEOUT_US if definition.timeout_us is None else definition.timeout_us
    set_timestamp_us(assignment.deadline_at, now_us + timeout_us)
    return assignment


@dataclass(eq=False)
class _Claiming:
    """A hand-out claim under way."""

    want: int
    claiming: asyncio.Future[Claimed] = field(init=False)
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
        self, members: list[WorkerConnection], claim: Callable[[int, Callable[[int], None]], Awaitable[Claimed]]
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


@dataclass(frozen=True)
class _Lease:
    """What a round hands out under: the owner it stamps and the session that
    name stands for (None: not fenced by a session, as in unit tests)."""

    owner: str
    session: Session | None


class Gateway:
    def __init__(
        self,
        store: HandoutStore,
        connections: Connections,
        clock: Clock,
        *,
        owner: str,
        session: Session | None = None,
        sweep_interval: float = 1.0,
        db_clock=None,
        skew_tolerance: float = 0.25,
        skew_check_interval: float = 60.0,
        skew_max_age: float | None = None,
        on_skew: Callable[[float | None, bool], Awaitable[None]] | None = None,
        heartbeat_timeout: float = 30.0,
        reattach_grace: float = 10.0,
        on_retry: Callable[[Retry], None] | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        unheld_rate: float = DEFAULT_RATE,
        unheld_burst: float = DEFAULT_BURST,
    ) -> None:
        self._store = store
        self._connections = connections
        self._clock = clock
        self._lease = _Lease(owner, session)
        self._sweep_interval = sweep_interval
        self._db_clock = db_clock
        self._skew_tolerance = skew_tolerance
        self._skew_check_interval = skew_check_interval
        self._skew_max_age = 2 * skew_check_interval if skew_max_age is None else skew_max_age
        self._clock_check: clockguard.ClockCheck | None = None
        """The last conclusive comparison of the clocks (None: none yet)."""
        self._next_skew_check = clock.monotonic()
        self._step_seen: clockguard.ClockCheck | None = None
        """The check after which a wall-clock step was last noticed (one re-check each)."""
        self._skew_reported: tuple[bool, float] | None = None
        """(within tolerance, monotonic instant) of the last ``on_skew`` call."""
        self._refused: str | None = None
        """Why hand-out stopped, as last logged (None: it runs)."""
        self._on_skew = on_skew
        """Called after every check that changes the verdict (and every
        ``skew_check_interval`` while it is not good) with (skew in seconds,
        or None if the clocks could not be compared; within tolerance):
        raises or resolves the alert."""
        self._on_retry = on_retry
        self._metrics = metrics
        self._tracing = tracing if tracing is not None and tracing.enabled else None
        self._held: dict[Key, tuple[str, str]] = {}
        """(job id, tenant) of each delivery this gateway handed out and still tracks (metrics and logs)."""
        self.inflight: InFlight[WorkerConnection] = InFlight(timeout=heartbeat_timeout, grace=reattach_grace)
        self.requeued = 0
        self.canceled = 0
        """Deliveries whose workers this gateway told to cancel them (cancel requests)."""
        self._orphan_cursor = ""
        self._suspects: dict[Key, float] = {}
        """Running deliveries stamped with this session that nothing here held
        when last read: key -> monotonic instant first seen so."""
        self._suspects_seen: set[Key] = set()
        self.orphans_requeued = 0
        self._wake = asyncio.Event()
        self.clock_skew: float | None = None
        self.rounds = 0
        self.round_done = asyncio.Event()
        self.results: ResultQueue[WorkerConnection, ResultIn] = ResultQueue(
            self._record_batch, clock, refuse=self._refuse
        )
        """Workers' results, written in large batches after the starts (:mod:`.results`)."""
        self.budget = UnheldBudget(clock, rate=unheld_rate, burst=unheld_burst)
        """What each worker credential may send that none of its streams holds (:mod:`.budget`)."""

    def wake(self) -> None:
        """Run a hand-out round now (something may be ready)."""
        self._wake.set()

    # -- the fences: session and clock -------------------------------------------------------------

    @property
    def owner(self) -> str:
        """The session name hand-outs are stamped with."""
        return self._lease.owner

    @owner.setter
    def owner(self, owner: str) -> None:
        self._lease = _Lease(owner, self._lease.session)

    @property
    def session(self) -> Session | None:
        return self._lease.session

    def use_session(self, session: Session, owner: str) -> None:
        """Hand out under ``session`` (named ``owner`` in the store) from now
        on. The server calls it once the executions stamped with its previous
        session were re-stamped with this one. Rounds and claims under way
        keep the session they started with, and their fence refuses it."""
        self._lease = _Lease(owner, session)
        self.wake()

    def refusal(self, lease: "_Lease | None" = None) -> str | None:
        """Why nothing may be handed out under ``lease`` (the current one by
        default) now, or None if it may: its session is not surely alive
        for a quarter of its TTL more, or the clock guard refuses
        (:mod:`.clockguard`). Safe to call from any thread: a claim's
        transaction calls it just before committing."""
        session = (lease or self._lease).session
        if session is not None and not session.surely_alive(SESSION_MARGIN * session.ttl):
            return f"session {session.id:x} is lost or in doubt ({session.lost_reason or 'not renewed in time'})"
        return self._clock_refusal()

    def _clock_refusal(self) -> str | None:
        if self._db_clock is None:
            return None
        return clockguard.refusal(
            self._clock_check, self._clock.now(), self._clock.monotonic(), tolerance=self._skew_tolerance,
            max_age=self._skew_max_age, step=CLOCK_STEP,
        )

    @property
    def handing_out(self) -> bool:
        """True if a round started now would hand out."""
        return self.refusal() is None

    def _note_refusal(self, refused: str | None) -> None:
        """Log when hand-out stops and when it resumes (once each)."""
        if refused == self._refused:
            return
        if refused is None:
            log.warning("handing out resumes (session %s)", self.owner)
        else:
            log.error("handing out stops: %s", refused)
        self._refused = refused

    async def run(self) -> None:
        """Hand out at every wake-up and every sweep, and write the workers'
        results (:attr:`results`) beside it, until cancelled."""
        writer = asyncio.create_task(self.results.run(), name="tickwheel-results")
        try:
            await self._hand_out_forever()
        finally:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)

    async def _hand_out_forever(self) -> None:
        while True:
            if self._db_clock is not None:
                await self._check_skew_if_due()
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

    async def _check_skew_if_due(self) -> None:
        """Compare the clocks when the last comparison is a minute old, and
        at once after a wall-clock step; while the guard refuses, every
        second."""
        stepped = self._clock_refusal() == clockguard.STEPPED
        if stepped and self._clock_check is not self._step_seen:
            self._step_seen = self._clock_check
            log.warning("this server's wall clock was stepped: comparing it with the database's again")
            self._next_skew_check = self._clock.monotonic()
        if self._clock.monotonic() < self._next_skew_check:
            return
        good = await self._check_skew()
        refused = self._clock_refusal()
        again = self._skew_check_interval if good and refused is None else SKEW_RETRY_INTERVAL
        self._next_skew_check = self._clock.monotonic() + again

    async def _check_skew(self) -> bool:
        """Read the database's clock once and judge (:func:`clockguard.judge`);
        True if the comparison was conclusive (whatever it found)."""
        before, before_mono = self._clock.now(), self._clock.monotonic()
        try:
            db_now = await self._db_clock()
        except Exception as error:
            log.warning("cannot read the database's clock: %s", error)
            await self._report_skew(None)
            return False
        after, after_mono = self._clock.now(), self._clock.monotonic()
        check = clockguard.judge(before, before_mono, after, after_mono, db_now, tolerance=self._skew_tolerance)
        if check is None:
            log.info("the database's clock took %.3f s to read (or this server's clock moved meanwhile): "
                     "clock skew not checked this time", after_mono - before_mono)
            await self._report_skew(None)
            return False
        previous, self._clock_check = self._clock_check, check
        self.clock_skew = check.skew
        ok = check.within(self._skew_tolerance)
        was_ok = previous is None or previous.within(self._skew_tolerance)
        if not ok and was_ok:
            log.error(
                "clock skew %.3f s between this server and the database exceeds %.3f s: "
                "handing out stops until they agree (never early)", check.skew, self._skew_tolerance,
            )
        elif ok and not was_ok:
            log.warning("clock skew %.3f s is within %.3f s again", check.skew, self._skew_tolerance)
        await self._report_skew(check.skew, ok)
        return True

    async def _report_skew(self, skew: float | None, ok: bool = False) -> None:
        """Tell ``on_skew`` a verdict: a good one once, a bad one when it
        starts and again every check interval while it lasts. An
        inconclusive comparison (``skew`` None) is a bad verdict only once
        the guard refuses for want of a conclusive one."""
        if self._on_skew is None:
            return
        if skew is None:
            if self._clock_refusal() not in (clockguard.NOT_CHECKED, clockguard.STALE):
                return  # the last conclusive verdict still holds
            ok = False
        now = self._clock.monotonic()
        last = self._skew_reported
        if last is not None and last[0] == ok and (ok or now - last[1] < self._skew_check_interval):
            return
        try:
            await self._on_skew(skew, ok)
        except Exception:
            log.exception("cannot record the clock-skew alert")
            return
        self._skew_reported = (ok, now)

    async def hand_out_round(self) -> int:
        """One round: returns how many executions were handed out.

        Everything it hands out is stamped with the session current when it
        starts, and only while :meth:`refusal` says nothing against it:
        before the round, inside each claim's transaction (a refused claim
        rolls back) and before each deal (refused: the claimed executions
        are given back, none reaches a worker)."""
        lease = self._lease
        refused = self.refusal(lease)
        self._note_refusal(refused)
        if refused is not None:
            return 0
        groups: dict[Capability, list[WorkerConnection]] = defaultdict(list)
        for connection in self._connections.all():
            if connection.credit > 0 and not connection.draining and not connection.closed.is_set():
                groups[connection.capability].append(connection)
        total = 0
        stopped = 0
        backlog = False
        for capability, members in groups.items():
            if refused is not None:
                break
            diverted_passes = full_batches = 0
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
                    refused = handed.fenced or self.refusal(lease)
                    if refused is not None:
                        self._note_refusal(refused)
                        await self._store.release([(item.id, item.delivery) for item in handed])
                        break
                    total += await self._deal(handed, members, self._clock.now())
                    stopped += handed.stopped
                    if full:
                        full_batches += 1
                        self.results.backlog(True)
                        if full_batches >= MAX_FULL_BATCHES:
                            backlog = True
                            self.wake()
                            break
                        continue
                    if not handed.diverted:
                        break
                    diverted_passes += 1
                    if diverted_passes >= MAX_PASSES:
                        break
            finally:
                chain.closed = True
                for claim in chain.pending:  # the round ended with claims under way: give their rows back
                    await self._give_back(claim.claiming)
        self.results.backlog(backlog)
        if stopped:
            await self.signal_cancels()
        return total

    async def _claim(
        self, capability: Capability, want: int, lease: _Lease, on_taken: Callable[[int], None] | None = None
    ) -> Claimed:
        # ``now`` decides what is ready; the hand-out instant (lateness,
        # deadlines) is read after the claim reached the store, which may
        # have retried through an outage meanwhile.
        started = self._clock.monotonic()
        handed = await self._store.claim_ready(
            lease.owner, self._clock.now(), capability, want, on_taken=on_taken, fence=lambda: self.refusal(lease)
        )
        if handed and self._metrics is not None:
            self._metrics.claimed("handout", len(handed), self._clock.monotonic() - started)
        return handed

    async def _give_back(self, claiming: asyncio.Future[Claimed]) -> None:
        try:
            handed = await asyncio.shield(claiming)
        except Exception:
            log.exception("a claim under way when its round failed failed too")
            return
        if handed:
            await self._store.release([(item.id, item.delivery) for item in handed])

    async def _deal(self, handed: list[HandedOut], members: list[WorkerConnection], now: datetime) -> int:
        batches: dict[WorkerConnection, worker_pb2.PullResponse] = {}
        unsent: list[tuple[str, int]] = []
        spans = []
        debug = log.isEnabledFor(logging.DEBUG)
        monotonic = self._clock.monotonic()
        now_us = to_us(now)
        lateness: dict[str, list[float]] = defaultdict(list)
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
            self.inflight.attach(receiver, (item.id, item.delivery), item.partition, receiver.worker_id, monotonic)
            self._held[(item.id, item.delivery)] = (item.job_id, item.tenant)
            lateness[item.tenant].append((item.handed_out_at_us - max(item.due_at_us, item.ready_at_us)) / 1e6)
            batch = batches.get(receiver)
            if batch is None:
                batch = batches[receiver] = worker_pb2.PullResponse()
            assignment = add_assignment(batch, item, now_us)
            if item.trace_context:
                if self._tracing is not None:
                    span = self._tracing.hand_out_span(
                        item.trace_context,
                        {"tickwheel.execution_id": item.id, "tickwheel.job_id": item.job_id,
                         "tickwheel.tenant": item.tenant, "tickwheel.delivery": item.delivery,
                         "tickwheel.attempt": item.attempt, "tickwheel.worker_id": receiver.worker_id},
                        item.handed_out_at_us * 1000,
                    )  # fmt: skip
                    spans.append(span)
                    assignment.traceparent = traceparent_of(span)
                else:  # not traced here: the worker's span joins the execution's trace directly
                    assignment.traceparent = item.trace_context
            if debug:
                log_execution(log, logging.DEBUG, "handed out (delivery %d, attempt %d) to worker %s", item.delivery,
                              item.attempt, receiver.worker_id, execution=item.id, job=item.job_id, tenant=item.tenant)
        for connection, batch in batches.items():
            await connection.send(batch)
        for span in spans:
            span.end()
        if self._metrics is not None and lateness:
            self._metrics.handed_out(lateness)
        if unsent:
            await self._store.release(unsent)
        return len(handed) - len(unsent)

    # -- what workers hold ------------------------------------------------------------------------

    def heartbeat(self, connection: WorkerConnection, keys: Sequence[Key]) -> None:
        """A worker's heartbeat: the deliveries it lists are alive."""
        self.inflight.beat(connection, keys, self._clock.monotonic())

    def disconnected(self, connection: WorkerConnection) -> None:
        """A stream closed: what it held waits the grace for a re-attachment."""
        held = self.inflight.detach(connection, self._clock.monotonic())
        if held:
            log.info("worker %s left with %d executions in flight; requeued unless re-attached within %g s",
                     connection.worker_id, held, self.inflight.grace)

    async def reattach(self, connection: WorkerConnection, held: Sequence[Key]) -> tuple[list[Key], list[Key]]:
        """Take over what a reconnecting worker still runs (or has a result
        for); returns (re-attached, rejected). Only deliveries of its
        credential's tenants still running at that delivery are taken, never
        one held here by a live stream of another worker; the rest are
        rejected, an unknown id and another tenant's alike, and cost the
        credential's budget. Raises :class:`OverBudget` when the credential
        has none left, and :class:`Unavailable` while this server's session
        is in doubt (a re-attachment stamps the session: under a dying one
        the reaper would take the work back and it would run twice; the
        worker says hello again, here or elsewhere); nothing is read then."""
        if not held:
            return [], []
        credential = connection.credential.id
        if self.budget.exhausted(credential):
            raise OverBudget(credential, self.budget.message(credential))
        session = self._lease.session
        if session is not None and not session.surely_alive(SESSION_MARGIN * session.ttl):
            raise Unavailable(f"server session {self.owner} is in doubt: cannot re-attach executions now; "
                              "say hello again shortly or to another server")
        wanted: list[Key] = []
        for key in held:
            holder = self.inflight.holder(key)
            if EXECUTION_ID.match(key[0]) and key[1] >= 1 and (holder is None or holder.identity == connection.identity):
                wanted.append(key)
        taken = await self._store.reattach(
            self.owner, connection.worker_id, wanted, tenants=connection.credential.tenants
        ) if wanted else []
        monotonic = self._clock.monotonic()
        attached: list[Key] = []
        for item in taken:
            key = (item.execution_id, item.delivery)
            self.inflight.attach(connection, key, item.partition, connection.worker_id, monotonic)
            attached.append(key)
        kept = set(attached)
        rejected = [key for key in held if key not in kept]
        self.budget.take(credential, len(rejected))
        return attached, rejected

    async def run_liveness(self, interval: float = 1.0, stalled_interval: float = 5.0) -> None:
        """About every ``interval``: requeue the deliveries whose worker went
        silent or away, and tell workers about cancel requests; every
        ``stalled_interval``, wake waiters left asleep beside free key slots
        or behind a job with nothing running (:meth:`HandoutStore.wake_stalled`)
        and requeue what runs under this session with nothing here holding
        it (:meth:`requeue_orphans`)."""
        next_stalled = self._clock.monotonic() + stalled_interval
        while True:
            try:
                await self.requeue_expired()
            except Exception:
                log.exception("requeuing lost executions failed; retrying")
            try:
                await self.signal_cancels()
            except Exception:
                log.exception("reading cancel requests failed; retrying")
            if self._clock.monotonic() >= next_stalled:
                next_stalled = self._clock.monotonic() + stalled_interval
                try:
                    if await self._store.wake_stalled():
                        self.wake()
                except Exception:
                    log.exception("waking stalled waiters failed; retrying")
                try:
                    await self.requeue_orphans()
                except Exception:
                    log.exception("requeuing unheld running executions failed; retrying")
            await self._clock.sleep(interval)

    async def requeue_orphans(self, page: int = ORPHAN_PAGE) -> RequeueResult:
        """One pass of the safety net: read the next ``page`` of running
        executions stamped with this session (:meth:`HandoutStore.running_under`,
        wrapping around at the end) and requeue each that

        - nothing here holds (no :attr:`inflight` entry: no worker of this
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
        lease = self._lease
        if lease.session is not None and not lease.session.surely_alive(SESSION_MARGIN * lease.session.ttl):
            return RequeueResult()
        rows = await self._store.running_under(lease.owner, self._orphan_cursor, page)
        wrapped = len(rows) < page
        self._orphan_cursor = "" if wrapped else rows[-1].execution_id
        now_us, now = to_us(self._clock.now()), self._clock.monotonic()
        cutoff_us = now_us - int(self.inflight.timeout * 1_000_000)
        lost: list[Lost] = []
        for row in rows:
            key = (row.execution_id, row.delivery)
            if key in self.inflight or row.handed_out_at_us is None or row.handed_out_at_us > cutoff_us:
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
        if not lost or lease is not self._lease:
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
            self.wake()
        return result

    async def signal_cancels(self) -> int:
        """Send each worker holding a delivery someone asked to stop one
        ``CancelExecutions`` (once per attachment); returns how many were told."""
        requests = await self._store.cancel_requests(self.owner)
        if not requests:
            return 0
        reasons = {(r.execution_id, r.delivery): r.reason for r in requests}
        told = 0
        for connection, keys in self.inflight.to_cancel(reasons).values():
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
        """One pass of :meth:`run_liveness`."""
        expired = self.inflight.expired(self._clock.monotonic())
        if not expired:
            return RequeueResult()
        result = await self._store.requeue(
            self.owner,
            [Lost(e.key[0], e.key[1], e.reason, e.worker_id) for e in expired],
            counts=True,
        )
        stuck: dict[WorkerConnection, list[Key]] = defaultdict(list)
        for item in expired:
            self.inflight.done(item.key)
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
            self.wake()
        return result

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
            raise OverBudget(connection.credential.id, self.budget.message(connection.credential.id))

    async def record(self, connection: WorkerConnection, results: Sequence[worker_pb2.ExecutionResult]) -> None:
        """:meth:`submit_results`, but applied and acknowledged now (not queued)."""
        admitted, over = await self._admit(connection, results)
        await self._record_batch([(connection, item) for item in admitted])
        if over:
            raise OverBudget(connection.credential.id, self.budget.message(connection.credential.id))

    async def _admit(
        self, connection: WorkerConnection, results: Sequence[worker_pb2.ExecutionResult]
    ) -> tuple[list[ResultIn], bool]:
        """Check a stream's results and decide, for each, whether the stream
        holds its delivery (then it is pending: its delivery stays alive until
        it is recorded or refused). Refuses the malformed ones now. Returns
        what to record, and whether the credential's budget ran out before
        the end (what is past it is dropped unacknowledged)."""
        now_us = to_us(self._clock.now())
        tenants = connection.credential.tenants
        admitted: list[ResultIn] = []
        costly: list[tuple[worker_pb2.ExecutionResult, Holding | str]] = []
        """Results that cost the budget, each with why it was refused, or what holds it."""
        for result in results:
            violation = check_result(result, now_us)
            if violation is not None:
                costly.append((result, f"invalid result: {violation.field}: {violation.description}"))
                continue
            holding = self.inflight.hold_result(connection, (result.execution_id, result.delivery))
            if holding is Holding.HELD:
                admitted.append(result_in(result, connection.worker_id, tenants, held=True))
            else:
                costly.append((result, holding))
        granted = self.budget.take(connection.credential.id, len(costly))
        refused = worker_pb2.PullResponse()
        for result, why in costly[:granted]:
            if isinstance(why, str):
                refused.ack.acks.add(execution_id=result.execution_id, delivery=result.delivery, accepted=False,
                                     reason=why)
            else:  # a second result for a pending one is recorded too: recording is idempotent
                admitted.append(result_in(result, connection.worker_id, tenants, held=why is Holding.DUPLICATE))
        if refused.ack.acks:
            first = refused.ack.acks[0]
            log.info("refused %d malformed results from worker %s (credential %s); the first, for %r: %s",
                     len(refused.ack.acks), connection.worker_id, connection.credential.id,
                     first.execution_id[:64], first.reason)
            await connection.send(refused)
        if granted < len(costly):
            log.warning("worker %s: %s", connection.worker_id, self.budget.message(connection.credential.id))
        return admitted, granted < len(costly)

    async def _refuse(self, item: tuple[WorkerConnection, ResultIn], error: Exception) -> None:
        """A result whose write fails for a reason retrying cannot fix: its
        worker is told, and its delivery is watched again (its worker forgot
        it, so it is requeued when the heartbeat timeout passes)."""
        connection, result = item
        key = (result.execution_id, result.delivery)
        if result.held:
            self.inflight.result_refused(key)
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
        self.wake()  # an execution that ended may have freed its job or a key for the next in line
        replies: dict[WorkerConnection, worker_pb2.PullResponse] = {}
        counted: Counter[tuple[str, int, bool]] = Counter()
        for (connection, result), ack in zip(items, acks):
            if not result.held:  # never applied: whatever holds that delivery (here or not) keeps it
                if debug:
                    log.debug("result of delivery %d of %r from worker %s, not held by its stream: %s", ack.delivery,
                              ack.execution_id, connection.worker_id, ack.reason or "accepted")
                reply = replies.get(connection)
                if reply is None:
                    reply = replies[connection] = worker_pb2.PullResponse()
                reply.ack.acks.add(
                    execution_id=ack.execution_id, delivery=ack.delivery, accepted=ack.accepted, reason=ack.reason
                )
                continue
            self.inflight.done((ack.execution_id, ack.delivery))
            held = self._held.pop((ack.execution_id, ack.delivery), None)
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
            reply = replies.get(connection)
            if reply is None:
                reply = replies[connection] = worker_pb2.PullResponse()
            reply.ack.acks.add(  # in place: a message built apart is copied whole into the batch
                execution_id=ack.execution_id, delivery=ack.delivery, accepted=ack.accepted, reason=ack.reason
            )
        if self._metrics is not None:
            self._metrics.results(counted)
        await asyncio.gather(*(connection.send(reply) for connection, reply in replies.items()))
