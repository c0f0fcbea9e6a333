"""This server's armed queue: executions armed a few seconds before their
instant, started a second before it and sent at it (docs/architecture.md,
"Hand-outs decided ahead"; the store's side is :mod:`tickwheel_server.store.arming`).

- :meth:`ArmedQueue.arm_ahead` arms, for each group of this server's
  workers, what is ready within ``ahead`` seconds, at most the group's
  credit not yet spoken for, at most ``limit`` in all and at most
  ``max_bytes`` of memory by :func:`entry_bytes` (one batched statement
  pair per ``batch``); each execution keeps its Assignment serialized
  (:func:`.assignments.prebuild`: the deal only completes and sends it)
  and the capability it was armed for.
- :meth:`ArmedQueue.start_due` runs at the start of every hand-out round.
  It sends the started batches whose instant came (the fence asked first;
  refused, or more than ``disarm_after`` late, they are given back through
  :meth:`~tickwheel_server.store.requeue.RequeueStore.release`); then it
  starts the armed executions ready within their start window by this
  server's clock (``start_ahead`` seconds, or what a burst's starts take at
  the measured rate, at most :data:`MAX_START_WINDOW`) (:meth:`~tickwheel_server.store.arming.ArmStore.start`:
  conditional on this session and delivery, stamped with the instant they
  will be sent at, never before their ready instant, fenced like a claim),
  and deals what the store started (by instant, the tenants of one instant
  interleaved by weight: :func:`interleaved`), up to the credit
  of the workers of their capability, to be sent at that instant; the
  receivers are chosen before the start, which records each row's worker.
  Up to ``start_depth`` starts run at once, and a batch whose instant
  comes while one runs is sent then, not after it.
  From the start on, a started execution is an ordinary running row to
  everyone else (a cancel is signalled to its worker once sent; a server
  that dies before sending leaves it to the reaper, which gives it back at
  once if its worker said hello elsewhere without it, else after the
  grace: :mod:`..store.unheld`).
- :meth:`ArmedQueue.expire` disarms what could not be sent within
  ``disarm_after`` seconds of its instant (no worker with credit) and what
  was armed under a session no longer this server's, so any server's next
  round hands them out.

The queue is keyed by execution id: an execution disarmed by a job change
and armed again by this server carries the same (id, delivery), and the
newer arming (its definition and payload) replaces the older.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from itertools import repeat
from operator import attrgetter
from typing import Protocol

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import from_us, to_us

from ..policy.fairness import Shares
from ..store.arming import Armed, ArmStore, StartRound
from ..store.executions import Capability, HandedOut, stamped, without_payload
from ..store.requeue import RequeueStore
from ..telemetry.outages import log_failure
from .assignments import prebuild
from .connections import WorkerConnection
from .fence import Fence, Lease

log = logging.getLogger(__name__)

DEFAULT_AHEAD = 10.0
DEFAULT_LIMIT = 50_000
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
"""What the armed queue may hold, by :func:`entry_bytes`: 128 MiB holds
:data:`DEFAULT_LIMIT` small executions, and about 1 000 of the largest (a
64 KiB payload and a 64 KiB definition)."""
ENTRY_BYTES = 2048
"""What one armed execution holds besides its payload and its job's
definition (ids, the hand-out tuple, the queue's slots): an upper bound,
checked by tests/conformance/test_armed_queue.py."""
DEFAULT_BATCH = 2_000
DEFAULT_DISARM_AFTER = 2.0
ARM_INTERVAL = 0.25
"""Seconds between arming passes while the last one armed something (a pass
arms batches while they come back full)."""
IDLE_ARM_INTERVAL = 1.0
"""Seconds between arming passes after one that armed nothing: an idle
server probes for what to arm no more often than it claims."""

DEFAULT_START_DEPTH = 2
"""Starts under way at once in a round: one more runs while one waits on
the store, so a burst's batches are started ahead on both of the store's
cores rather than one after another."""

DEFAULT_START_AHEAD = 1.0
MAX_START_AHEAD = 1.0
"""Seconds before its instant an armed execution may be started (written
``running``): within this window a canceling, pausing or deleting writer
finds it started, and its run goes on (docs/architecture.md, "Hand-outs
decided ahead"); so it stays short."""
MAX_START_WINDOW = 3.0
"""Seconds before its instant a burst's start window may open at most
(:meth:`ArmedQueue.start_window_us`): a burst whose starts, at the measured
rate, would not all end within ``start_ahead`` gets the window they need, up
to this bound, so that it is started whole before its instant and only sent
at it."""
START_ROW_US = 100.0
"""What one row of a start is taken to cost at least (µs of a start under
way), whatever arms or starts of at least :data:`_MEASURED_ROWS` rows
measured: 2 000 rows in 0.2 s, a start of a burst's batch on a quiet
two-core machine."""
_MEASURED_ROWS = 500
"""Arms and starts of fewer rows do not update the measured rate: their
fixed cost (round trips, the fence) would count as rows'."""
_WINDOW_MARGIN = 2.0
"""The start window is this many times the starts' time at the measured
pace: the pace is first an arm's, one statement alone, and a start is a
costlier statement (the guard's probes) run two at once beside the
sends and results of what came due before: with a quarter more, a
burst's last starts still ended after its instant (loadtest/RESULTS.md,
"a burst's start window sized by its starts")."""
_SPREAD_US = 10_000
"""A started batch holds executions ready within this many µs (a wheel
tick) of each other, all sent at the latest one's instant."""


class Prepared(Protocol):
    """A deal decided and not yet sent (:meth:`Dealer.prepare`); its length
    is how many executions it sends."""

    def __len__(self) -> int: ...


class Dealer(Protocol):
    """How the queue hands out (:class:`.rounds.Rounds`)."""

    def prepare(self, handed: list[HandedOut], members: list[WorkerConnection], now: datetime,
                prebuilt: Sequence[bytes] | None = None) -> Prepared:
        """Deal ``handed`` (their credit spent) to be sent at ``now``."""

    async def send(self, prepared: Prepared) -> int:
        """Send what :meth:`prepare` dealt; returns how many were sent."""

    def take_back(self, prepared: Prepared) -> list[tuple[str, int]]:
        """Undo :meth:`prepare` (credit back); returns the (id, delivery) pairs to release."""

    def assign(self, count: int, members: list[WorkerConnection]) -> list[WorkerConnection | None]:
        """Choose (and spend the credit of) ``count`` receivers before the start records them."""

    def refund(self, receivers: Sequence[WorkerConnection | None]) -> None:
        """Give back the credit :meth:`assign` spent."""


def entry_bytes(armed: Armed) -> int:
    """What the armed queue counts for ``armed``: :data:`ENTRY_BYTES` and
    what its arming counted (payload and definition: its prebuilt
    Assignment holds the payload and the target, never more)."""
    return ENTRY_BYTES + armed.size


class _Entry:
    __slots__ = ("armed", "capability", "owner", "prebuilt", "ident", "ready_us", "tenant")

    def __init__(self, armed: Armed, capability: Capability, owner: str) -> None:
        handed = armed.handed
        self.prebuilt = prebuild(handed)
        # The payload is in the prebuilt Assignment: not held twice.
        self.armed = Armed(without_payload(handed), armed.beside, armed.size, armed.weight)
        self.capability = capability
        self.owner = owner
        self.ident = handed.id
        """Its execution id, ready instant (µs) and tenant, read per row by every pass: kept at hand."""
        self.ready_us = handed.ready_at_us
        self.tenant = handed.tenant


_start_order = attrgetter("ready_us", "ident")
_ready_of = attrgetter("ready_us")
_tenant_of = attrgetter("tenant")


def credit_of(members: Sequence[WorkerConnection], monotonic: float, timeout: float) -> int:
    """The credit of the members that may be dealt to now."""
    return sum(c.credit for c in members if not c.closed.is_set() and not c.silent(monotonic, timeout))


def interleaved(entries: Iterable[_Entry], now_us: int) -> list[tuple[int, _Entry]]:
    """``entries`` in the order they are started and dealt, each with its
    instant's number: by instant (executions ready within
    :data:`_SPREAD_US` of the instant's earliest, everything ready by
    ``now_us`` one instant), and within an instant the tenants interleaved
    by the hand-out's weighted fair share (:meth:`.fairness.Shares.order`,
    one tenant after another, a tenant of weight 3 three to one of weight
    1), each tenant's oldest first: a quiet tenant's run at a burst's
    instant is in its first start, not its last."""
    # Per entry, only C-level calls where it can be: at a burst's start
    # window this runs over every armed execution of the instant, tens of
    # thousands, and the window's first start waits for it.
    ordered = sorted(entries, key=_start_order)
    instants = [ready if ready > now_us else now_us for ready in map(_ready_of, ordered)]
    shares = Shares()
    out: list[tuple[int, _Entry]] = []
    start = 0
    while start < len(ordered):
        end = bisect.bisect_right(instants, instants[start] + _SPREAD_US, start)
        group = ordered[start:end]
        if len(set(map(_tenant_of, group))) == 1:
            out += zip(repeat(start), group)
        else:
            by_tenant: dict[str, list[_Entry]] = {}
            for entry in group:
                by_tenant.setdefault(entry.tenant, []).append(entry)
            counts = {name: (queued[0].armed.weight, len(queued)) for name, queued in by_tenant.items()}
            taken = {name: iter(queued) for name, queued in by_tenant.items()}
            out += [(start, next(taken[name])) for name in shares.order(counts)]
        start = end
    return out


class ArmedQueue:
    """See the module docstring. ``ahead`` 0 arms nothing (the queue stays
    empty and every round takes today's path alone)."""

    def __init__(
        self,
        store: ArmStore,
        requeues: RequeueStore,
        clock: Clock,
        fence: Fence,
        *,
        ahead: float = DEFAULT_AHEAD,
        limit: int = DEFAULT_LIMIT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        batch: int = DEFAULT_BATCH,
        disarm_after: float = DEFAULT_DISARM_AFTER,
        heartbeat_timeout: float = 30.0,
        start_ahead: float = DEFAULT_START_AHEAD,
        start_depth: int = DEFAULT_START_DEPTH,
    ) -> None:
        if not 0 <= start_ahead <= MAX_START_AHEAD:
            raise ValueError(f"start_ahead must be between 0 and {MAX_START_AHEAD} seconds")
        if start_depth < 1:
            raise ValueError("start_depth must be >= 1")
        if ahead < 0 or limit < 0 or max_bytes < 0 or batch < 1 or disarm_after <= 0:
            raise ValueError("ahead, limit and max_bytes must be >= 0, batch >= 1, disarm_after > 0")
        self._store = store
        self._requeues = requeues
        self._clock = clock
        self._fence = fence
        self.ahead = ahead
        self.limit = limit
        self.max_bytes = max_bytes
        self.bytes = 0
        """What the queue holds now, by :func:`entry_bytes`, and its started
        batches until sent (their messages): arming stops at ``max_bytes``."""
        self.batch = batch
        self.start_depth = start_depth
        """Starts a round keeps under way at once (:meth:`_start_group`)."""
        self.disarm_after = disarm_after
        self._timeout = heartbeat_timeout
        self._start_ahead_us = int(start_ahead * 1_000_000)
        self._ready: list[tuple[int, int, Lease, Prepared, int, int]] = []
        """Heap of (instant, order, lease, dealt batch, its bytes, the start's stamp): started, sent at that instant."""
        self._ready_count = 0
        self._entries: dict[str, _Entry] = {}
        """Every armed execution by id: the truth the structures below index."""
        self._ahead: list[tuple[int, int, _Entry]] = []
        """Heap of (ready instant, arming order, entry) not yet seen due (stale items skipped)."""
        self._ahead_last_us = 0
        """No item of :attr:`_ahead` is ready later than this (an upper bound: kept at each push)."""
        self._order = 0
        self._due: dict[str, _Entry] = {}
        """Entries seen due and not yet started (no credit, or refused)."""
        self._per_capability: Counter[Capability] = Counter()
        self._per_owner: Counter[str] = Counter()
        self._per_second: Counter[int] = Counter()
        """Armed executions by the second of their ready instant: how many a burst's window starts."""
        self.row_us = START_ROW_US
        self._window_logged_us = 0
        """The store's measured cost per row of an arm or a start (µs, a
        moving average over those of at least :data:`_MEASURED_ROWS` rows):
        sizes a burst's start window."""
        self._next_arm = float("-inf")
        self.arming_cut = False
        """The last :meth:`arm_ahead` stopped for a start or a send before
        its room was armed: the caller starts, then arms on."""
        self.started = 0
        """Executions started from this queue (for tests and metrics)."""
        self.disarmed = 0
        """Executions this queue gave back (expired, or disarmed by their start)."""

    def __len__(self) -> int:
        return len(self._entries)

    def _add(self, entry: _Entry) -> None:
        old = self._entries.get(entry.ident)
        if old is not None:
            self._remove(old)
        self._entries[entry.ident] = entry
        self.bytes += entry_bytes(entry.armed)
        self._per_capability[entry.capability] += 1
        self._per_owner[entry.owner] += 1
        self._per_second[entry.ready_us // 1_000_000] += 1
        self._order += 1
        heapq.heappush(self._ahead, (entry.ready_us, self._order, entry))
        if entry.ready_us > self._ahead_last_us:
            self._ahead_last_us = entry.ready_us

    def _remove(self, entry: _Entry) -> None:
        ident = entry.ident
        if self._entries.get(ident) is not entry:
            return
        del self._entries[ident]
        self.bytes -= entry_bytes(entry.armed)
        if self._due.get(ident) is entry:
            del self._due[ident]
        self._per_capability[entry.capability] -= 1
        self._per_owner[entry.owner] -= 1
        if not self._per_owner[entry.owner]:
            del self._per_owner[entry.owner]
        second = entry.ready_us // 1_000_000
        self._per_second[second] -= 1
        if not self._per_second[second]:
            del self._per_second[second]

    def _promote(self, now_us: int) -> None:
        """Move the entries due by ``now_us`` from the heap to :attr:`_due`."""
        ahead = self._ahead
        if ahead and self._ahead_last_us <= now_us:
            # All due (a burst's start window): taken whole, in no order
            # (:func:`interleaved` orders them), not popped one by one.
            entries = self._entries
            self._due.update((entry.ident, entry) for _ready, _order, entry in ahead
                             if entries.get(entry.ident) is entry)
            ahead.clear()
            return
        while self._ahead and self._ahead[0][0] <= now_us:
            _ready, _order, entry = heapq.heappop(self._ahead)
            if self._entries.get(entry.ident) is entry:
                self._due[entry.ident] = entry
        if not self._ahead:
            self._ahead_last_us = 0  # the bound starts again with the next push

    def start_window_us(self, ready_us: int) -> int:
        """How long before ``ready_us`` the start window of what is armed
        for it opens (µs): ``start_ahead``, or for a burst whose starts
        would not end within it the time they take at the measured rate
        (:attr:`row_us`, at least :data:`START_ROW_US`; batches of
        :attr:`batch`, :attr:`start_depth` under way at once, the
        executions armed for that second and the next counted) times
        :data:`_WINDOW_MARGIN`, at most :data:`MAX_START_WINDOW`. Pure
        arithmetic over counts kept as entries come and go."""
        if not self._start_ahead_us:
            return 0
        rows = self._armed_near(ready_us)
        at_once = self.batch * self.start_depth
        if rows <= at_once:
            return self._start_ahead_us
        rounds = -(-rows // at_once)  # the starts, start_depth at a time
        # Never below a quiet machine's start pace: the arms' pace, the
        # first measured, reads below what the starts then take
        # (loadtest/RESULTS.md, "a burst's start window sized by its starts").
        needed = int(rounds * self.batch * max(self.row_us, START_ROW_US) * _WINDOW_MARGIN)
        return min(max(needed, self._start_ahead_us), int(MAX_START_WINDOW * 1_000_000))

    def _armed_near(self, ready_us: int) -> int:
        """The executions armed here ready in the second of ``ready_us`` or the next."""
        second = ready_us // 1_000_000
        return self._per_second.get(second, 0) + self._per_second.get(second + 1, 0)

    def _start_horizon_us(self, now_us: int) -> int:
        """What is ready by this instant may be started at ``now_us``: the
        start window of the earliest ready instant armed here and not yet
        seen due (a burst's, sized by :meth:`start_window_us`)."""
        head = self._head_us()
        if head is None:
            return now_us + self._start_ahead_us
        window_us = self.start_window_us(head)
        if window_us > self._start_ahead_us and head != self._window_logged_us and head - window_us <= now_us:
            self._window_logged_us = head  # once an instant: what a burst's window was, and why
            log.info("start window of the %d executions armed for %s and the second after: %.2f s (%.0f µs a row)",
                     self._armed_near(head),
                     from_us(head).isoformat(), window_us / 1e6, self.row_us)
        return now_us + window_us

    def _head_us(self) -> int | None:
        """The earliest ready instant armed here and not yet seen due (stale items dropped)."""
        while self._ahead and self._entries.get(self._ahead[0][2].ident) is not self._ahead[0][2]:
            heapq.heappop(self._ahead)
        return self._ahead[0][0] if self._ahead else None

    def next_instant_us(self, after_us: int) -> int | None:
        """When this queue has something to do next (µs), or None: the
        earliest of the instants the started batches are sent at and the
        opening of the start window (:meth:`start_window_us`) of the
        earliest ready instant armed here and not yet seen due;
        ``after_us`` if that passed (it waits for a round, which sends or
        starts it)."""
        head = self._head_us()
        # A start window that opened while the round ran (after it looked
        # for what to start) calls for a round now, as a batch's instant does.
        instants = [at for at in (
            head - self.start_window_us(head) if head is not None else None,
            self._ready[0][0] if self._ready else None,
        ) if at is not None]  # fmt: skip
        return max(min(instants), after_us) if instants else None

    async def refused(self, dealer: Dealer) -> int:
        """A round refused by the fence: the started batches whose instant
        came are given back now, and the armed executions whose start window
        opened are noted due (started by the first round it allows, or
        expired), so none wakes the loop again and again while it refuses;
        returns how many were given back."""
        before = self.disarmed
        await self._send_ready(dealer)
        self._promote(self._start_horizon_us(to_us(self._clock.now())))
        return self.disarmed - before

    @property
    def waiting_to_send(self) -> int:
        """Executions started and dealt, waiting for their instant to be sent."""
        return self._ready_count

    async def arm_ahead(self, groups: Mapping[Capability, list[WorkerConnection]], lease: Lease) -> int:
        """Arm what the groups' workers may run that is ready within
        ``ahead`` seconds, in batches while they come back full; returns
        how many were armed. Runs at most every :data:`ARM_INTERVAL`, or
        :data:`IDLE_ARM_INTERVAL` after a pass that armed nothing. Stops
        early (:attr:`arming_cut`; the next call goes on at once) when a
        started batch's instant came or, once it armed some, the start
        window of what it armed opened: the caller starts or sends first."""
        if self.ahead <= 0 or self.limit <= 0 or not groups:
            return 0
        monotonic = self._clock.monotonic()
        if monotonic < self._next_arm:
            return 0
        if self._fence.refusal(lease) is not None:
            return 0
        spoken = self._per_capability
        armed_now = 0
        interrupted = False
        for capability, members in groups.items():
            credit = credit_of(members, monotonic, self._timeout)
            while True:  # batches while they come back full, up to the room
                room = min(self.limit - len(self._entries), self.batch, credit - spoken.get(capability, 0),
                           (self.max_bytes - self.bytes) // ENTRY_BYTES)
                # A started batch's instant came, or (once this pass armed some)
                # what is armed is within start_ahead of its instant: starting
                # comes first. Arming a burst can take its whole window on a
                # busy machine.
                if self._send_due() or (armed_now and self._start_window_open()):
                    interrupted = True
                if room <= 0 or interrupted or self._fence.refusal(lease) is not None:
                    break
                now, began = self._clock.now(), self._clock.monotonic()
                armed = await self._store.arm(lease.owner, now, now + timedelta(seconds=self.ahead), capability, room,
                                              max_bytes=self.max_bytes - self.bytes, row_bytes=ENTRY_BYTES)
                if len(armed) >= _MEASURED_ROWS:  # a burst's arms, seconds before its starts: a first measure
                    self._measured(len(armed), began)
                for item in armed:
                    self._add(_Entry(item, capability, lease.owner))
                armed_now += len(armed)
                if len(armed) < room:
                    break
        self.arming_cut = interrupted
        if not interrupted:  # interrupted, the next call goes on arming
            self._next_arm = monotonic + (ARM_INTERVAL if armed_now else IDLE_ARM_INTERVAL)
        return armed_now

    async def start_due(
        self, groups: Mapping[Capability, list[WorkerConnection]], lease: Lease, dealer: Dealer,
        on_full: Callable[[bool], None] | None = None,
    ) -> int:
        """Send the started batches whose instant came, then start (and
        deal, to be sent at their instant) the armed executions ready
        within their start window (:meth:`start_window_us`) by this
        server's clock, per capability up to its workers' credit; returns
        how many were sent.
        Nothing is sent that the store did not start under its lease, nor
        before its instant: the fence is asked before each start, inside
        its transaction and before the send. ``on_full(True)`` is called
        when a start of a whole batch begins (a burst: results may wait)."""
        sent = await self._send_ready(dealer)
        if not self._entries:
            return sent
        self._promote(self._start_horizon_us(to_us(self._clock.now())))
        due: dict[Capability, list[_Entry]] = {}
        for entry in self._due.values():
            if entry.owner == lease.owner:
                due.setdefault(entry.capability, []).append(entry)
        for capability, entries in due.items():
            members = groups.get(capability)
            if not members:
                continue  # no worker of this kind has credit now: kept until it expires
            waiting = deque(interleaved(entries, to_us(self._clock.now())))
            sent += await self._start_group(waiting, members, lease, dealer, on_full)
        return sent

    def _start_window_open(self) -> bool:
        """An execution armed here and not yet seen due is within
        ``start_ahead`` of its instant. Not a burst's longer window: its
        arming comes first (cut by it, the burst's last arms waited for
        the starts of the rest, past the instant)."""
        head = self._head_us()
        return head is not None and head - self._start_ahead_us <= to_us(self._clock.now())

    def _send_due(self) -> bool:
        """A started batch's instant came."""
        return bool(self._ready) and self._ready[0][0] <= to_us(self._clock.now())

    async def _send_ready(self, dealer: Dealer) -> int:
        """Send the started batches whose instant came (the fence asked
        first: refused, they are given back); returns how many were sent."""
        sent = 0
        while self._ready and self._ready[0][0] <= to_us(self._clock.now()):
            at_us, _order, lease, prepared, held, stamp = heapq.heappop(self._ready)
            self._ready_count -= len(prepared)
            self.bytes -= held
            refused = self._fence.refusal(lease)
            if refused is not None:
                self._fence.note_refusal(refused)
            elif to_us(self._clock.now()) - at_us > self._timeout * 500_000:
                # Held back half a heartbeat timeout, it nears the age at which
                # the safety net requeues running rows no worker holds: its
                # delivery must not reach a worker after that.
                refused = "late"
                log.warning("%d started executions not sent within %g s of their instant: given back",
                            len(prepared), self._timeout / 2)
            if refused is not None:
                self.disarmed += len(prepared)
                # Only rows still stamped by this start: under a dead session
                # the reaper may have given them back and another server
                # handed them out again at the same delivery.
                await self._requeues.release(dealer.take_back(prepared), owner=lease.owner, at_us=stamp)
                continue
            self.started += len(prepared)
            sent += await dealer.send(prepared)
        return sent

    async def _start_group(
        self, waiting: deque[tuple[int, _Entry]], members: list[WorkerConnection], lease: Lease, dealer: Dealer,
        on_full: Callable[[bool], None] | None,
    ) -> int:
        """Start ``waiting`` (:func:`interleaved`) in batches up to the
        members' credit, up to :attr:`start_depth` starts under way at once
        (the credit of a start under way counted as spent from its start),
        each batch dealt while the next ones run, and the started batches
        sent as their instant comes, also while a start is under way. A
        batch holds executions of one instant (ready within
        :data:`_SPREAD_US` of each other), started for the latest of them
        (or now): it is sent at that instant."""
        refusal = self._fence.refusal
        sent = 0

        def launch() -> tuple[list[_Entry], list[WorkerConnection | None], int, asyncio.Future[StartRound]] | None:
            # The receivers are chosen (their credit spent) before the start,
            # which records each row's worker: a hello of that worker
            # elsewhere that does not list it tells the reaper, should this
            # server die before the send, that no worker holds it.
            room = min(credit_of(members, self._clock.monotonic(), self._timeout), self.batch)
            if room <= 0 or not waiting or refusal(lease) is not None:
                return None
            now_us = to_us(self._clock.now())
            group = waiting[0][0]
            chosen: list[_Entry] = []
            while waiting and len(chosen) < room and waiting[0][0] == group:
                chosen.append(waiting.popleft()[1])
            receivers = dealer.assign(len(chosen), members)
            # One that found no credit after all is not started: still due, for a later round.
            kept = [(entry, receiver) for entry, receiver in zip(chosen, receivers) if receiver is not None]
            if not kept:
                return None
            chosen, receivers = [entry for entry, _ in kept], [receiver for _, receiver in kept]
            instant_us = max(now_us, max(e.ready_us for e in chosen))
            if on_full is not None and len(chosen) >= self.batch:
                on_full(True)
            items = [(e.ident, e.armed.handed.delivery, e.armed.beside, r.worker_id)
                     for e, r in zip(chosen, receivers)]
            starting = asyncio.ensure_future(
                self._store.start(lease.owner, items, from_us(instant_us), fence=lambda: refusal(lease))
            )
            if len(items) >= _MEASURED_ROWS:
                starting.add_done_callback(self._measure(len(items), self._clock.monotonic()))
            return chosen, receivers, instant_us, starting

        def fill(under_way: deque) -> bool:
            # Starts side by side: the store's statements of one wait on
            # PostgreSQL while the next runs on another core, and the deal
            # of one runs here meanwhile. Whether one was launched.
            launched = False
            while len(under_way) < self.start_depth and (started := launch()) is not None:
                under_way.append(started)
                launched = True
            return launched

        under_way: deque[tuple[list[_Entry], list[WorkerConnection | None], int, asyncio.Future[StartRound]]]
        under_way = deque()
        undealt: tuple[list[HandedOut], list[WorkerConnection | None], int] | None = None
        fill(under_way)
        try:
            while under_way:
                chosen, receivers, instant_us, starting = under_way[0]
                # The batches started before wait for their instant, not for this start.
                sent += await self._send_while(starting, dealer)
                under_way.popleft()
                try:
                    outcome = await starting
                except BaseException:
                    dealer.refund(receivers)
                    raise
                handed, prebuilt, dealt = self._taken(chosen, outcome, receivers, dealer)
                if outcome.fenced is not None:
                    self._fence.note_refusal(outcome.fenced)
                    return sent
                # The next start goes to the store before this batch is dealt:
                # a deal is the interpreter's work for tens of milliseconds, and
                # the store would idle through it (and through the next deal,
                # when the other start ended meanwhile), a burst's starts then
                # running in pairs with the store idle between them.
                undealt = (handed, dealt, outcome.at_us)
                if fill(under_way):
                    await asyncio.sleep(0)  # its task runs up to the store's thread
                undealt = None
                if handed:  # dealt now to the workers the start recorded, sent at its instant
                    prepared = dealer.prepare(handed, members, from_us(outcome.at_us), prebuilt, dealt)
                    self._order += 1
                    # Sent at the instant it was started for (its stamp may be a
                    # microsecond later: each start's instant is unique).
                    held = sum(len(b) for b in prebuilt) + ENTRY_BYTES * len(prebuilt)  # its messages, until sent
                    heapq.heappush(self._ready, (instant_us, self._order, lease, prepared, held, outcome.at_us))
                    self._ready_count += len(prepared)
                    self.bytes += held
                fill(under_way)  # a start a refund made room for
                sent += await self._send_ready(dealer)
        finally:
            if undealt is not None and undealt[0]:  # stopped before its deal: it goes back too
                handed, dealt, at_us = undealt
                dealer.refund(dealt)
                await self._requeues.release([(h.id, h.delivery) for h in handed], owner=lease.owner, at_us=at_us)
            while under_way:  # stopped with starts under way: what they started goes back
                chosen, receivers, _instant_us, starting = under_way.popleft()
                try:
                    outcome = await asyncio.shield(starting)
                except Exception as error:
                    dealer.refund(receivers)
                    log_failure(log, "a start under way when its round stopped failed too", error,
                                then="its executions wait")
                else:
                    handed, _prebuilt, dealt = self._taken(chosen, outcome, receivers, dealer)
                    dealer.refund(dealt)
                    if handed:
                        await self._requeues.release([(h.id, h.delivery) for h in handed], owner=lease.owner,
                                                     at_us=outcome.at_us)
        return sent

    def _measure(self, rows: int, began: float) -> Callable[[asyncio.Future], None]:
        """A start's callback: its time per row into :attr:`row_us`."""
        def done(starting: asyncio.Future) -> None:
            if not starting.cancelled() and starting.exception() is None:
                self._measured(rows, began)
        return done

    def _measured(self, rows: int, began: float) -> None:
        """An arm or a start of ``rows`` rows, begun at ``began``
        (monotonic), ended now: its time per row into :attr:`row_us`, a
        moving average. A burst's arms, seconds before its window, are the
        first measure of the store's pace at this moment (an arm of 2 000
        costs about what a start of 2 000 does: loadtest/RESULTS.md,
        "the 30 000 burst's two modes"); its starts, the next burst's."""
        sample = (self._clock.monotonic() - began) * 1_000_000 / rows
        self.row_us = 0.7 * self.row_us + 0.3 * sample

    async def _send_while(self, starting: asyncio.Future, dealer: Dealer) -> int:
        """Until ``starting`` is done, send each started batch as its
        instant comes (:meth:`_send_ready`); returns how many were sent."""
        sent = 0
        while not starting.done() and self._ready:
            wait = (self._ready[0][0] - to_us(self._clock.now())) / 1e6
            if wait <= 0:
                sent += await self._send_ready(dealer)
                continue
            instant = asyncio.ensure_future(self._clock.sleep(wait))
            try:
                await asyncio.wait((starting, instant), return_when=asyncio.FIRST_COMPLETED)
            finally:
                instant.cancel()
        return sent

    def _taken(
        self, chosen: list[_Entry], outcome: StartRound, receivers: list[WorkerConnection | None], dealer: Dealer,
    ) -> tuple[list[HandedOut], list[bytes], list[WorkerConnection | None]]:
        """What a start started of ``chosen``, stamped with its instant,
        their prebuilt Assignments and their receivers; the credit of the
        receivers of the rest is given back. Every entry of ``chosen``
        leaves the queue unless the start was fenced (started, disarmed, or
        no longer this session's: the store decided)."""
        if outcome.fenced is not None:  # still armed: kept, sent later or expired
            dealer.refund(receivers)
            return [], [], []
        started = set(outcome.started)
        for entry in chosen:
            self._remove(entry)
        self.disarmed += len(outcome.disarmed)
        picked = [(e, r) for e, r in zip(chosen, receivers) if e.ident in started]
        dealer.refund([r for e, r in zip(chosen, receivers) if e.ident not in started])
        at_us = outcome.at_us
        return ([stamped(e.armed.handed, at_us) for e, _ in picked],
                [e.prebuilt for e, _ in picked], [r for _, r in picked])

    async def give_back(self, dealer: Dealer) -> int:
        """On a graceful stop, once no round runs: release the started
        batches not sent (their delivery back, no attempt recorded: no
        worker saw them) and disarm everything armed, so that the next
        server hands them out at once rather than after the reaper's
        grace; returns how many the store gave back. What fails here is
        left to the reaper (started rows after its grace, armed ones at
        once), as after a crash."""
        given = 0
        while self._ready:
            _at_us, _order, lease, prepared, held, stamp = heapq.heappop(self._ready)
            self._ready_count -= len(prepared)
            self.bytes -= held
            keys = dealer.take_back(prepared)
            await self._requeues.release(keys, owner=lease.owner, at_us=stamp)
            given += len(keys)
        self.disarmed += given
        return given + await self._disarm(self._entries.values())

    async def expire(self, lease: Lease) -> int:
        """Disarm what was not sent within ``disarm_after`` seconds of its
        instant, and what was armed under another session than ``lease``'s;
        returns how many the store gave back."""
        if not self._entries:
            return 0
        now_us = to_us(self._clock.now())
        self._promote(now_us)
        limit_us = now_us - int(self.disarm_after * 1_000_000)
        # Only the due ones can be late; all are read when a session other
        # than the lease's armed some (rare: a new session).
        scanned = self._entries.values() if set(self._per_owner) - {lease.owner} else self._due.values()
        return await self._disarm(
            entry for entry in scanned if entry.owner != lease.owner or entry.ready_us < limit_us
        )

    async def _disarm(self, entries: Iterable[_Entry]) -> int:
        """Disarm ``entries`` in the store, per arming session, and drop
        them from the queue; returns how many the store gave back."""
        stale: dict[str, list[_Entry]] = {}
        for entry in entries:
            stale.setdefault(entry.owner, []).append(entry)
        given = 0
        for owner, entries in stale.items():
            # Kept until the store confirms: a failed disarm is tried again at
            # the next pass, never forgotten while the rows stay armed.
            given += len(await self._store.disarm(
                owner, [(e.ident, e.armed.handed.delivery) for e in entries]
            ))
            for entry in entries:
                self._remove(entry)
        self.disarmed += given
        return given
