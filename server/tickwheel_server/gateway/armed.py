"""This server's armed queue: executions armed a few seconds before their
instant, started and sent at it (docs/architecture.md, "Hand-outs decided
ahead"; the store's side is :mod:`tickwheel_server.store.arming`).

- :meth:`ArmedQueue.arm_ahead` arms, for each group of this server's
  workers, what is ready within ``ahead`` seconds, at most the group's
  credit not yet spoken for, at most ``limit`` in all and at most
  ``max_bytes`` of memory by :func:`entry_bytes` (one batched statement
  pair per ``batch``); each execution keeps its Assignment serialized
  (:func:`.assignments.prebuild`: the deal only completes and sends it)
  and the capability it was armed for.
- :meth:`ArmedQueue.start_due` runs at the start of every hand-out round:
  the armed executions due by this server's clock are started in the store
  (:meth:`~tickwheel_server.store.arming.ArmStore.start`: conditional on
  this session and delivery, never before their ready instant, fenced like
  a claim), and only what the store started is dealt, oldest ready first,
  up to the credit of the workers of their capability. A refusal of the
  fence between the start and the deal gives the started rows back
  (:meth:`~tickwheel_server.store.requeue.RequeueStore.release`).
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
import heapq
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from ..store.arming import Armed, ArmStore, StartRound
from ..store.executions import Capability, HandedOut
from ..store.requeue import RequeueStore
from .assignments import prebuild
from .connections import WorkerConnection
from .fence import Fence, Lease

log = logging.getLogger(__name__)

DEFAULT_AHEAD = 3.0
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

Deal = Callable[[list[HandedOut], list[WorkerConnection], datetime, list[bytes]], Awaitable[int]]
"""Send executions to workers, each with its prebuilt Assignment; returns how many were sent."""


def entry_bytes(armed: Armed) -> int:
    """What the armed queue counts for ``armed``: :data:`ENTRY_BYTES` and
    what its arming counted (payload and definition: its prebuilt
    Assignment holds the payload and the target, never more)."""
    return ENTRY_BYTES + armed.size


class _Entry:
    __slots__ = ("armed", "capability", "owner", "prebuilt")

    def __init__(self, armed: Armed, capability: Capability, owner: str) -> None:
        self.prebuilt = prebuild(armed.handed)
        # The payload is in the prebuilt Assignment: not held twice.
        self.armed = armed._replace(handed=armed.handed._replace(payload=b""))
        self.capability = capability
        self.owner = owner


def credit_of(members: Sequence[WorkerConnection], monotonic: float, timeout: float) -> int:
    """The credit of the members that may be dealt to now."""
    return sum(c.credit for c in members if not c.closed.is_set() and not c.silent(monotonic, timeout))


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
    ) -> None:
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
        """What the queue holds now, by :func:`entry_bytes` (never above ``max_bytes``)."""
        self.batch = batch
        self.disarm_after = disarm_after
        self._timeout = heartbeat_timeout
        self._entries: dict[str, _Entry] = {}
        """Every armed execution by id: the truth the structures below index."""
        self._ahead: list[tuple[int, int, _Entry]] = []
        """Heap of (ready instant, arming order, entry) not yet seen due (stale items skipped)."""
        self._order = 0
        self._due: dict[str, _Entry] = {}
        """Entries seen due and not yet started (no credit, or refused)."""
        self._per_capability: Counter[Capability] = Counter()
        self._per_owner: Counter[str] = Counter()
        self._next_arm = float("-inf")
        self.started = 0
        """Executions started from this queue (for tests and metrics)."""
        self.disarmed = 0
        """Executions this queue gave back (expired, or disarmed by their start)."""

    def __len__(self) -> int:
        return len(self._entries)

    def _add(self, entry: _Entry) -> None:
        old = self._entries.get(entry.armed.handed.id)
        if old is not None:
            self._remove(old)
        self._entries[entry.armed.handed.id] = entry
        self.bytes += entry_bytes(entry.armed)
        self._per_capability[entry.capability] += 1
        self._per_owner[entry.owner] += 1
        self._order += 1
        heapq.heappush(self._ahead, (entry.armed.handed.ready_at_us, self._order, entry))

    def _remove(self, entry: _Entry) -> None:
        ident = entry.armed.handed.id
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

    def _promote(self, now_us: int) -> None:
        """Move the entries due by ``now_us`` from the heap to :attr:`_due`."""
        while self._ahead and self._ahead[0][0] <= now_us:
            _ready, _order, entry = heapq.heappop(self._ahead)
            if self._entries.get(entry.armed.handed.id) is entry:
                self._due[entry.armed.handed.id] = entry

    def next_instant_us(self, after_us: int) -> int | None:
        """The earliest ready instant armed here and not yet seen due, if
        later than ``after_us`` (µs); else None."""
        while self._ahead and self._entries.get(self._ahead[0][2].armed.handed.id) is not self._ahead[0][2]:
            heapq.heappop(self._ahead)
        if self._ahead and self._ahead[0][0] > after_us:
            return self._ahead[0][0]
        return None

    async def arm_ahead(self, groups: Mapping[Capability, list[WorkerConnection]], lease: Lease) -> int:
        """Arm what the groups' workers may run that is ready within
        ``ahead`` seconds, in batches while they come back full; returns
        how many were armed. Runs at most every :data:`ARM_INTERVAL`, or
        :data:`IDLE_ARM_INTERVAL` after a pass that armed nothing."""
        if self.ahead <= 0 or self.limit <= 0 or not groups:
            return 0
        monotonic = self._clock.monotonic()
        if monotonic < self._next_arm:
            return 0
        if self._fence.refusal(lease) is not None:
            return 0
        spoken = self._per_capability
        armed_now = 0
        for capability, members in groups.items():
            credit = credit_of(members, monotonic, self._timeout)
            while True:  # batches while they come back full, up to the room
                room = min(self.limit - len(self._entries), self.batch, credit - spoken.get(capability, 0),
                           (self.max_bytes - self.bytes) // ENTRY_BYTES)
                if room <= 0 or self._fence.refusal(lease) is not None:
                    break
                now = self._clock.now()
                armed = await self._store.arm(lease.owner, now, now + timedelta(seconds=self.ahead), capability, room,
                                              max_bytes=self.max_bytes - self.bytes, row_bytes=ENTRY_BYTES)
                for item in armed:
                    self._add(_Entry(item, capability, lease.owner))
                armed_now += len(armed)
                if len(armed) < room:
                    break
        self._next_arm = monotonic + (ARM_INTERVAL if armed_now else IDLE_ARM_INTERVAL)
        return armed_now

    async def start_due(
        self, groups: Mapping[Capability, list[WorkerConnection]], lease: Lease, deal: Deal,
        on_full: Callable[[bool], None] | None = None,
    ) -> int:
        """Start and deal the armed executions due by this server's clock,
        per capability up to its workers' credit; returns how many were
        dealt. Nothing is dealt that the store did not start under
        ``lease``: the fence is asked before the start, inside its
        transaction and before the deal. ``on_full(True)`` is called when a
        start of a whole batch begins (a burst: results may wait)."""
        if not self._entries:
            return 0
        self._promote(to_us(self._clock.now()))
        due: dict[Capability, list[_Entry]] = {}
        for entry in self._due.values():
            if entry.owner == lease.owner:
                due.setdefault(entry.capability, []).append(entry)
        dealt = 0
        for capability, entries in due.items():
            members = groups.get(capability)
            if not members:
                continue  # no worker of this kind has credit now: kept until it expires
            entries.sort(key=lambda e: (e.armed.handed.ready_at_us, e.armed.handed.id))
            dealt += await self._start_group(deque(entries), members, lease, deal, on_full)
        return dealt

    async def _start_group(
        self, waiting: deque[_Entry], members: list[WorkerConnection], lease: Lease, deal: Deal,
        on_full: Callable[[bool], None] | None,
    ) -> int:
        """Start ``waiting`` in batches up to the members' credit, each next
        start under way while the previous batch is dealt (its credit
        counted as spent from its start)."""
        refusal = self._fence.refusal
        reserved = 0
        dealt = 0

        def launch() -> tuple[list[_Entry], asyncio.Future[StartRound]] | None:
            nonlocal reserved
            room = min(credit_of(members, self._clock.monotonic(), self._timeout) - reserved, self.batch)
            if room <= 0 or not waiting or refusal(lease) is not None:
                return None
            chosen = [waiting.popleft() for _ in range(min(room, len(waiting)))]
            reserved += len(chosen)
            if on_full is not None and len(chosen) >= self.batch:
                on_full(True)
            items = [(e.armed.handed.id, e.armed.handed.delivery, e.armed.beside) for e in chosen]
            return chosen, asyncio.ensure_future(
                self._store.start(lease.owner, items, self._clock.now(), fence=lambda: refusal(lease))
            )

        current = launch()
        try:
            while current is not None:
                chosen, starting = current
                current = None
                outcome = await starting
                reserved -= len(chosen)
                handed, prebuilt = self._taken(chosen, outcome)
                if outcome.fenced is not None:
                    self._fence.note_refusal(outcome.fenced)
                    return dealt
                refused = refusal(lease) if handed else None
                if refused is not None:
                    self._fence.note_refusal(refused)
                    await self._requeues.release([(h.id, h.delivery) for h in handed])
                    return dealt
                reserved += len(handed)
                current = launch()  # the next start runs while this batch is dealt
                if handed:
                    self.started += len(handed)
                    dealt += await deal(handed, members, self._clock.now(), prebuilt)
                reserved -= len(handed)
        finally:
            if current is not None:  # stopped with a start under way: what it started goes back
                chosen, starting = current
                try:
                    outcome = await asyncio.shield(starting)
                except Exception:
                    log.exception("a start under way when its round stopped failed too")
                else:
                    handed, _prebuilt = self._taken(chosen, outcome)
                    if handed:
                        await self._requeues.release([(h.id, h.delivery) for h in handed])
        return dealt

    def _taken(self, chosen: list[_Entry], outcome: StartRound) -> tuple[list[HandedOut], list[bytes]]:
        """What a start started of ``chosen``, stamped with its instant, and
        their prebuilt Assignments; every entry of ``chosen`` leaves the
        queue unless the start was fenced (started, disarmed, or no longer
        this session's: the store decided)."""
        if outcome.fenced is not None:  # still armed: kept, sent later or expired
            return [], []
        started = set(outcome.started)
        for entry in chosen:
            self._remove(entry)
        self.disarmed += len(outcome.disarmed)
        entries = [e for e in chosen if e.armed.handed.id in started]
        return [e.armed.handed._replace(handed_out_at_us=outcome.at_us) for e in entries], [e.prebuilt for e in entries]

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
        stale: dict[str, list[_Entry]] = {}
        for entry in scanned:
            if entry.owner != lease.owner or entry.armed.handed.ready_at_us < limit_us:
                stale.setdefault(entry.owner, []).append(entry)
        given = 0
        for owner, entries in stale.items():
            # Kept until the store confirms: a failed disarm is tried again at
            # the next pass, never forgotten while the rows stay armed.
            given += len(await self._store.disarm(
                owner, [(e.armed.handed.id, e.armed.handed.delivery) for e in entries]
            ))
            for entry in entries:
                self._remove(entry)
        self.disarmed += given
        return given
