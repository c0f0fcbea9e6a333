"""Capacity model: a deterministic discrete-event simulation of a Tickwheel
cluster through a top-of-the-minute peak, with the costs the benchmarks measured.

What is modelled (``docs/architecture.md``, Dispatch and Workers and failures):

* ``--servers`` servers share ``--partitions`` partitions, balanced to within
  one. Each server's dispatcher claims, every tick (1 s, a seeded phase per
  server), the due occurrences of its partitions up to ``--lookahead`` ahead,
  in batches of ``--claim-batch`` in (partition, due) order, batch after batch
  while they come back full; then sleeps a tick. A claimed occurrence is an
  execution in the store from the claim's end, and its due instant goes into
  the server's timer wheel (``--wheel-tick`` slots).
* The executions table is the queue, shared by every server: a hand-out
  (woken by the server's wheel at a due slot, and by its sweep every
  ``--sweep`` seconds) takes up to ``--handout-batch`` ready rows of any
  partition, never one due more than ``--start-ahead`` after the take's
  instant, at most ``--handout-in-flight`` takes per server at once; the
  server deals them and the workers start them. A row claimed ahead is taken
  up to ``--start-ahead`` before it is due (the server starts armed runs a
  second ahead: written ``running`` and dealt, sent only at the instant), so
  the take's store and server work falls before the instant and only the
  send at it. Lateness is measured at the worker's start, from the due
  instant; the hand-out instant (the send: the take's end or the due
  instant, whichever is later, as ``handed_out_at`` records it) is reported
  beside it.
* Results go back to the server that dealt them and are written in batches of
  up to ``--result-batch`` by one writer per server; while that server's last
  take was full (a hand-out backlog) the writer waits up to ``--result-defer``
  from the oldest queued result, unless half of ``--result-queue`` is queued.
* Costs are CPU seconds per execution (claim, hand-out, result) on three kinds
  of resource: the store (``--db-cores`` cores, FIFO, a transaction on one
  core, as a PostgreSQL backend runs it), each server's event loop (one
  thread), and the workers (``--worker-cores``). ``--shared-cores`` puts all of
  them on one pool of that many cores (the benchmarks' single 2-core box; a
  server's work still runs on one thread at a time). ``--rtt`` is added to
  every store call and to every hand-out and result on the wire.
* ``--kill-server-at T`` kills server 0 at T: its takes not committed are
  rolled back (their rows ready again), rows it took but had not dealt stay
  stamped with its session until the reaper requeues them (its first pass
  after the lease expired sees the owner dead, a pass one session TTL of
  grace later requeues: about two TTLs), except, with ``--release-unsent
  1`` (the default, as built), those it had started ahead of their instant:
  their workers said hello elsewhere without them, and that first pass
  gives them back (about one TTL); its queued results are sent
  again by the workers to the next server; its partitions move to the
  survivors (balanced) when its lease expires (one ``--ttl`` after its last
  keep-alive, sent every TTL/3) plus up to a tick, and
  their new owners read their scheduled executions into their wheels and
  claim what was not claimed yet. Other servers' sweeps take its partitions'
  ready rows meanwhile.

The load: ``--peak`` occurrences due at ``--peak-at`` (spread over
``--peak-window``), ``--peaks`` times ``--peak-period`` apart, over a
background of ``--jobs`` × ``--runs-per-job-per-day`` spread evenly;
``--warm`` starts with the background's first look-ahead claimed, as a
cluster that was already running has it.

Not modelled: fair share between tenants, caps and keys (one tenant), worker
credit (enough slots, as ``bench_burst.py`` gives), retries, the CPU a take
spends waiting on locks, a worker's stream moving to another server, and a
claim's cost growing with the jobs stored (taken as constant per job).

The defaults are the costs measured on the project's 2-core machine
(``loadtest/RESULTS.md``, "after session 19" and "the capacity model's
inputs again"; how each is derived: ``docs/capacity.md``). A hand-out's
cost is the arm's and the start's together, taken at the take (the arm
runs up to ``arm_ahead`` earlier in the server: the model puts that work
later than it falls, which is the pessimistic side). Prints JSON; the same arguments and ``--seed`` give the
same output.

    .venv/bin/python loadtest/simulate.py --shared-cores 2 --peak 10000 --peak-at 40
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
from collections import deque
from dataclasses import dataclass, fields

# Measured per-execution costs, milliseconds of CPU, of a run claimed
# ahead, armed and started a second ahead (a cron job's path, and the
# peak's): loadtest/RESULTS.md, "after session 19" and "the capacity
# model's inputs again"; docs/capacity.md, "What one execution costs", says
# how each is split. The hand-out is the arm and the start together.
DB_CLAIM_MS = 0.033
DB_HANDOUT_MS = 0.044
DB_RESULT_MS = 0.021
SERVER_CLAIM_MS = 0.028
SERVER_HANDOUT_MS = 0.058
SERVER_RESULT_MS = 0.018
WORKER_MS = 0.022


@dataclass(frozen=True)
class Config:
    """One simulated cluster and load. Times in seconds, costs in ms of CPU per execution."""

    servers: int = 1
    partitions: int = 256
    db_cores: float = 2.0
    worker_cores: float = 4.0
    shared_cores: float = 0.0
    rtt: float = 0.0
    jobs: int = 10_000
    runs_per_job_per_day: float = 0.0
    peak: int = 10_000
    peak_at: float = 40.0
    peak_window: float = 0.0
    peaks: int = 1
    peak_period: float = 60.0
    horizon: float = 30.0
    max_late: float = 600.0
    tick: float = 1.0
    lookahead: float = 60.0
    claim_batch: int = 1000
    handout_batch: int = 2000
    handout_in_flight: int = 2
    sweep: float = 1.0
    wheel_tick: float = 0.01
    ttl: float = 10.0
    reaper_every: float = 2.0
    start_ahead: float = 1.0
    result_batch: int = 2000
    result_defer: float = 1.0
    result_queue: int = 20_000
    db_claim_ms: float = DB_CLAIM_MS
    db_handout_ms: float = DB_HANDOUT_MS
    db_result_ms: float = DB_RESULT_MS
    server_claim_ms: float = SERVER_CLAIM_MS
    server_handout_ms: float = SERVER_HANDOUT_MS
    server_result_ms: float = SERVER_RESULT_MS
    worker_ms: float = WORKER_MS
    deal_share: float = 0.5
    kill_server_at: float | None = None
    release_unsent: int = 1
    warm: int = 0
    seed: int = 1

    def __post_init__(self) -> None:
        if self.servers < 1 or self.partitions < 1:
            raise ValueError("servers and partitions must be >= 1")
        if self.kill_server_at is not None and self.servers < 2:
            raise ValueError("kill_server_at needs at least 2 servers")
        for name in ("db_cores", "worker_cores", "tick", "sweep", "wheel_tick", "ttl", "reaper_every"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        for name in ("claim_batch", "handout_batch", "handout_in_flight", "result_batch", "result_queue", "peaks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if not 0 <= self.deal_share <= 1:
            raise ValueError("deal_share must be within [0, 1]")
        if self.release_unsent not in (0, 1):
            raise ValueError("release_unsent must be 0 or 1")
        if not 0 <= self.start_ahead <= 30:
            raise ValueError("start_ahead must be within [0, 30] seconds")
        if self.shared_cores < 0 or self.rtt < 0 or self.peak < 0 or self.jobs < 0:
            raise ValueError("shared_cores, rtt, peak and jobs must be >= 0")

    @property
    def background_rate(self) -> float:
        """Occurrences per second besides the peak: each job's runs a day, spread evenly."""
        return self.jobs * self.runs_per_job_per_day / 86_400


class Pool:
    """Cores that run work first come, first served, each piece on one core."""

    def __init__(self, cores: float) -> None:
        whole = max(1, math.ceil(cores))
        self.speed = cores / whole  # a fractional pool: whole cores, each that much slower
        self.cores = cores
        self.free = [0.0] * whole
        self.busy = 0.0

    def run(self, at: float, cpu: float) -> float:
        """Start ``cpu`` seconds of work at ``at`` or when a core frees; its end."""
        if cpu <= 0:
            return at
        earliest = heapq.heappop(self.free)
        finish = max(at, earliest) + cpu / self.speed
        heapq.heappush(self.free, finish)
        self.busy += cpu
        return finish


class Lane:
    """One thread (a server's event loop): its work runs one piece at a time, on its pool."""

    def __init__(self, pool: Pool | None) -> None:
        self.pool = pool
        self.free = 0.0
        self.busy = 0.0
        self.by_second: dict[int, float] = {}

    def run(self, at: float, cpu: float) -> float:
        start = max(at, self.free)
        self.free = self.pool.run(start, cpu) if self.pool is not None else start + cpu
        self.busy += cpu
        start, second = self.free - cpu, math.floor(self.free - cpu)
        while cpu > 0 and second < self.free:  # busy seconds by second of the run (ends aligned)
            self.by_second[second] = self.by_second.get(second, 0.0) + min(self.free, second + 1) - max(start, second)
            second += 1
        return self.free


@dataclass
class Server:
    index: int
    lane: Lane
    alive: bool = True
    partitions: set[int] | None = None
    backlog: bool = False
    writing: bool = False
    write_check_at: float | None = None
    results: deque | None = None  # (arrived at, count)
    queued: int = 0
    claiming: bool = False
    claim_generation: int = 0
    open_takes: dict | None = None  # take number -> rows, not committed yet
    dealing: dict | None = None  # take number -> rows, committed, not dealt yet
    waiting: dict | None = None  # send number -> rows dealt, held until their due instant


class Simulation:
    """Runs one :class:`Config` to its end; :meth:`run` returns the figures."""

    def __init__(self, config: Config) -> None:
        self.c = config
        self.rng = random.Random(config.seed)
        shared = Pool(config.shared_cores) if config.shared_cores else None
        self.db = shared or Pool(config.db_cores)
        self.workers = shared or Pool(config.worker_cores)
        self.shared = shared
        self.servers = [Server(i, Lane(shared)) for i in range(config.servers)]
        for s in self.servers:
            s.partitions, s.results, s.open_takes, s.dealing, s.waiting = set(), deque(), {}, {}, {}
        self.db_cpu = 0.0
        self.db_by_second: dict[int, float] = {}
        for p in range(config.partitions):
            self.servers[p % config.servers].partitions.add(p)
        self.events: list = []
        self.seq = 0
        self.now = 0.0
        self._make_occurrences()

    # ------------------------------------------------------------ set-up

    def _make_occurrences(self) -> None:
        c, rng = self.c, self.rng
        dues = [c.peak_at + k * c.peak_period + (rng.random() * c.peak_window if c.peak_window else 0.0)
                for k in range(c.peaks) for _ in range(c.peak)]
        self.peak_count = len(dues)
        end = c.peak_at + (c.peaks - 1) * c.peak_period + c.peak_window + c.horizon
        background = int(c.background_rate * end)
        dues += sorted(rng.random() * end for _ in range(background))
        self.due = dues
        self.partition = [rng.randrange(c.partitions) for _ in dues]
        n = len(dues)
        self.taken_at = [math.nan] * n  # the hand-out instant
        self.started_at = [math.nan] * n
        self.starts = [0] * n
        # Per partition, the occurrences not claimed yet, in due order.
        self.unclaimed: list[deque[int]] = [deque() for _ in range(c.partitions)]
        for i in sorted(range(n), key=dues.__getitem__):
            self.unclaimed[self.partition[i]].append(i)
        self.pending: list[tuple[float, int]] = []  # (eligible at, occurrence): claimed, not yet ready
        self.ready: list[tuple[float, int]] = []  # (due, occurrence): ready, not taken
        self.stamped_dead: list[int] = []  # taken by the dead server, not dealt
        self.ahead: set[int] = set()  # taken before due (started ahead)
        self.released: list[int] = []  # started ahead by the dead server, never sent, given back without the grace
        self.moved: set[int] = set()  # partitions of the killed server
        self.killed_at: float | None = None
        self.reaped: list[int] = []  # taken by the dead server, not dealt: requeued by the reaper
        self.last_due = max(dues, default=0.0)
        self.warm_claimed: list[int] = []
        if c.warm:  # the background due within the first look-ahead: claimed before the run began
            for queue in self.unclaimed:
                kept = deque(i for i in queue if i < self.peak_count or dues[i] > c.lookahead)
                self.warm_claimed += [i for i in queue if i >= self.peak_count and dues[i] <= c.lookahead]
                queue.clear()
                queue.extend(kept)
            for i in self.warm_claimed:
                heapq.heappush(self.pending, (self._eligible(i, 0.0), i))

    # ------------------------------------------------------------ the event loop

    def at(self, time: float, action, *args) -> None:
        self.seq += 1
        heapq.heappush(self.events, (time, self.seq, action, args))

    def run(self) -> dict:
        c = self.c
        for s in self.servers:
            phase = self.rng.random()
            self.at(phase * c.tick, self.claim, s, 0)
            self.at(phase * c.sweep, self.sweep, s)
        if c.kill_server_at is not None:
            self.at(c.kill_server_at, self.kill, self.servers[0])
        owner = {p: s for s in self.servers for p in s.partitions}
        by_server: dict[int, list[float]] = {}
        for i in self.warm_claimed:
            by_server.setdefault(owner[self.partition[i]].index, []).append(self._eligible(i, 0.0))
        for index, times in by_server.items():
            self._wake(self.servers[index], times)
        limit = self.last_due + c.max_late
        self.remaining = len(self.due)
        while self.events and self.remaining:
            time, _, action, args = heapq.heappop(self.events)
            if time > limit:
                break
            self.now = time
            action(*args)
        return self.figures()

    # ------------------------------------------------------------ the store

    def store(self, at: float, cpu: float) -> float:
        """A store transaction sent at ``at``: when its answer is back."""
        self.db_cpu += cpu
        finish = self.db.run(at + self.c.rtt, cpu)
        start = finish - cpu / self.db.speed
        second = math.floor(start)
        while cpu > 0 and second < finish:  # core-seconds of store work by second of the run
            share = min(finish, second + 1) - max(start, second)
            self.db_by_second[second] = self.db_by_second.get(second, 0.0) + share * self.db.speed
            second += 1
        return finish + self.c.rtt

    # ------------------------------------------------------------ the dispatcher

    def claim(self, s: Server, generation: int) -> None:
        """One claim batch of ``s``'s partitions; the next at once if it was full, else after a tick."""
        if not s.alive or generation != s.claim_generation:
            return
        s.claiming = True
        c, now = self.c, self.now
        horizon = now + c.lookahead
        batch: list[int] = []
        for p in sorted(s.partitions):
            queue = self.unclaimed[p]
            while queue and len(batch) < c.claim_batch and self.due[queue[0]] <= horizon:
                batch.append(queue.popleft())
            if len(batch) >= c.claim_batch:
                break
        n = len(batch)
        committed = self.store(now, n * c.db_claim_ms / 1000)
        done = s.lane.run(committed, n * c.server_claim_ms / 1000)
        self.at(done, self.claimed, s, batch, n == c.claim_batch)

    def claimed(self, s: Server, batch: list[int], full: bool) -> None:
        if not s.alive:  # died before its claim ended: the transaction rolled back
            for i in reversed(batch):
                self.unclaimed[self.partition[i]].appendleft(i)
            return
        s.claiming = False
        eligible = [self._eligible(i, self.now) for i in batch]
        for when, i in zip(eligible, batch):
            heapq.heappush(self.pending, (when, i))
        self._wake(s, eligible)
        self.at(self.now if full else self.now + self.c.tick, self.claim, s, s.claim_generation)

    def _eligible(self, i: int, now: float) -> float:
        """When occurrence ``i``, claimed at ``now``, may be taken: up to ``start_ahead`` before it is due."""
        return max(self.due[i] - self.c.start_ahead, now)

    def _wake(self, s: Server, times: list[float]) -> None:
        """Put due instants into ``s``'s wheel: a hand-out at each slot that holds one."""
        tick = self.c.wheel_tick
        for slot in sorted({math.ceil(t / tick - 1e-9) for t in times}):
            self.at(max(slot * tick, self.now), self.hand_out, s)

    # ------------------------------------------------------------ the gateway

    def sweep(self, s: Server) -> None:
        if not s.alive:
            return
        self.hand_out(s)
        self.at(self.now + self.c.sweep, self.sweep, s)

    def _refresh_ready(self) -> None:
        while self.pending and self.pending[0][0] <= self.now:
            _, i = heapq.heappop(self.pending)
            heapq.heappush(self.ready, (self.due[i], i))

    def hand_out(self, s: Server) -> None:
        """Start takes while ready rows wait and fewer than the limit are in flight."""
        if not s.alive:
            return
        c = self.c
        self._refresh_ready()
        while self.ready and len(s.open_takes) < c.handout_in_flight:
            batch = [heapq.heappop(self.ready)[1] for _ in range(min(c.handout_batch, len(self.ready)))]
            for i in batch:
                self.taken_at[i] = max(self.now, self.due[i])  # the send instant, as handed_out_at
                if self.due[i] > self.now:
                    self.ahead.add(i)  # started ahead: its worker is recorded by the start
            self.seq += 1
            s.open_takes[self.seq] = batch
            s.backlog = len(batch) == c.handout_batch
            taken = self.store(self.now, len(batch) * c.db_handout_ms / 1000)
            # The rows read and admission decided in the server before the commit.
            committed = s.lane.run(taken, len(batch) * c.server_handout_ms * (1 - c.deal_share) / 1000)
            self.at(committed, self.committed, s, self.seq)
        if not self.ready:
            s.backlog = False  # the next take would come back short

    def committed(self, s: Server, take: int) -> None:
        c = self.c
        if not s.alive:
            return  # rolled back at the death (see kill)
        batch = s.open_takes.pop(take)
        s.dealing[take] = batch
        dealt = s.lane.run(self.now, len(batch) * c.server_handout_ms * c.deal_share / 1000)
        self.at(dealt, self.dealt, s, take)
        self.hand_out(s)  # the chain: the next take once this one is in
        if not s.backlog:
            self.write(s)

    def dealt(self, s: Server, take: int) -> None:
        c = self.c
        if not s.alive:
            return  # stamped with the dead session (see kill)
        batch = s.dealing.pop(take)
        # Sent at once if due, else held and sent at the instant, by wheel slot (never before a row's due).
        slots: dict[int, list[int]] = {}
        for i in batch:
            slot = 0 if self.due[i] <= self.now else math.ceil(self.due[i] / c.wheel_tick - 1e-9)
            slots.setdefault(slot, []).append(i)
        for rows in (slots[slot] for slot in sorted(slots)):
            self.seq += 1
            s.waiting[self.seq] = rows
            self.at(max(self.now, max(self.due[i] for i in rows)), self.send, s, self.seq)

    def send(self, s: Server, key: int) -> None:
        c = self.c
        if not s.alive:
            return  # started under the dead session, never sent (see kill)
        rows = s.waiting.pop(key)
        last = self.now
        for i in rows:
            start = self.workers.run(self.now + c.rtt, c.worker_ms / 1000)
            self.started_at[i] = start
            self.starts[i] += 1
            self.remaining -= 1
            last = max(last, start)
        self.at(last + c.rtt, self.result_arrived, s, len(rows))

    # ------------------------------------------------------------ results

    def result_arrived(self, s: Server, count: int) -> None:
        target = s if s.alive else self._survivor(s)
        target.results.append((self.now, count))
        target.queued += count
        self.write(target)

    def write(self, s: Server) -> None:
        """Write a batch of results now, or come back when the deferral ends."""
        c = self.c
        if not s.alive or s.writing or not s.queued:
            return
        oldest = s.results[0][0]
        if s.backlog and self.now < oldest + c.result_defer and s.queued < c.result_queue // 2:
            if s.write_check_at != oldest + c.result_defer:
                s.write_check_at = oldest + c.result_defer
                self.at(s.write_check_at, self.write, s)
            return
        n = 0
        while s.results and n < c.result_batch:
            arrived, count = s.results.popleft()
            take = min(count, c.result_batch - n)
            if take < count:
                s.results.appendleft((arrived, count - take))
            n += take
        s.queued -= n
        s.writing = True
        written = self.store(self.now, n * c.db_result_ms / 1000)
        done = s.lane.run(written, n * c.server_result_ms / 1000)
        self.at(done, self.written, s)

    def written(self, s: Server) -> None:
        s.writing = False
        self.write(s)

    # ------------------------------------------------------------ a server dies

    def _survivor(self, dead: Server) -> Server:
        alive = [s for s in self.servers if s.alive]
        return alive[dead.index % len(alive)]

    def kill(self, s: Server) -> None:
        c = self.c
        s.alive = False
        self.killed_at = self.now
        self.moved = set(s.partitions)
        # Takes not committed roll back when its connections drop; those
        # committed and not dealt stay stamped with its session until reaped.
        for batch in s.open_takes.values():
            for i in batch:
                self.taken_at[i] = math.nan
                heapq.heappush(self.ready, (self.due[i], i))
        for batch in [*s.dealing.values(), *s.waiting.values()]:
            self.stamped_dead.extend(batch)
        if c.release_unsent:
            # Started ahead, their worker recorded: its hello at a survivor (it
            # reconnects within a second or two, before the lease expires) does
            # not list them, and the reaper gives them back at its first pass
            # after the expiry, without the grace.
            self.released = [i for i in self.stamped_dead if i in self.ahead]
            self.stamped_dead = [i for i in self.stamped_dead if i not in self.ahead]
        self.reaped = list(self.stamped_dead)
        s.open_takes, s.dealing, s.waiting = {}, {}, {}
        survivor = self._survivor(s)
        while s.results:
            _arrived, count = s.results.popleft()
            survivor.results.append((self.now, count))
            survivor.queued += count
        s.queued = 0
        self.write(survivor)
        # etcd expires the lease one TTL after the last keep-alive it got (sent every TTL/3).
        expiry = self.now + c.ttl - self.rng.random() * c.ttl / 3
        self.at(expiry + self.rng.random() * c.tick, self.move, s)
        # The reaper's first pass after the expiry sees the owner dead; the pass
        # one grace (a session TTL) later requeues what is still stamped with it.
        seen_dead = expiry + self.rng.random() * c.reaper_every
        if self.released:
            self.at(seen_dead, self.release)
        self.at(seen_dead + math.ceil(c.ttl / c.reaper_every) * c.reaper_every, self.reap)

    def release(self) -> None:
        for i in self.released:
            heapq.heappush(self.ready, (self.due[i], i))
        for s in self.servers:
            self.hand_out(s)

    def reap(self) -> None:
        for i in self.stamped_dead:
            heapq.heappush(self.ready, (self.due[i], i))
        self.stamped_dead = []
        for s in self.servers:
            self.hand_out(s)

    def move(self, dead: Server) -> None:
        alive = [s for s in self.servers if s.alive]
        for p in sorted(dead.partitions):  # balanced within one, as the ownership plan is
            min(alive, key=lambda s: (len(s.partitions), s.index)).partitions.add(p)
        dead.partitions = set()
        owner = {p: s for s in alive for p in s.partitions}
        gained: dict[int, list[float]] = {}
        horizon = self.now + 2 * self.c.lookahead
        for eligible, i in self.pending:  # the new owners' wheels read the gained partitions' executions
            if self.partition[i] in self.moved and eligible <= horizon:
                gained.setdefault(owner[self.partition[i]].index, []).append(eligible)
        for index, times in gained.items():
            self._wake(self.servers[index], times)
        for s in alive:  # their wheels read the gained partitions' executions; an ownership change wakes the claim
            self.at(self.now, self.hand_out, s)
            if not s.claiming:
                s.claim_generation += 1
                self.at(self.now, self.claim, s, s.claim_generation)

    # ------------------------------------------------------------ figures

    def figures(self) -> dict:
        c = self.c
        n = len(self.due)
        started = [i for i in range(n) if self.starts[i]]
        early = sum(1 for i in started if self.started_at[i] < self.due[i] or self.taken_at[i] < self.due[i])
        peak = [i for i in range(self.peak_count) if self.starts[i]]

        def lateness(indices: list[int], at: list[float]) -> dict | None:
            if not indices:
                return None
            values = sorted(at[i] - self.due[i] for i in indices)
            def pick(q: float) -> float:
                return round(values[min(len(values) - 1, math.ceil(q * len(values)) - 1)], 4)

            return {"p50": pick(0.50), "p99": pick(0.99), "max": round(values[-1], 4), "count": len(values)}

        per_second: dict[int, int] = {}
        for i in started:
            second = math.floor(self.started_at[i])
            per_second[second] = per_second.get(second, 0) + 1
        end = max((self.started_at[i] for i in started), default=0.0)
        peak_end = max((self.started_at[i] for i in peak), default=c.peak_at)
        span = max(end, 1e-9)
        first_end = max((self.started_at[i] for i in peak if i < c.peak), default=c.peak_at)
        window = (math.floor(c.peak_at), max(first_end, math.floor(c.peak_at) + 1.0))  # the first peak
        cores = c.shared_cores or c.db_cores
        out = {
            "config": {f.name: getattr(c, f.name) for f in fields(c)},
            "occurrences": n,
            "background_per_s": round(c.background_rate, 1),
            "started": len(started),
            "started_twice": sum(1 for i in started if self.starts[i] > 1),
            "not_started": n - len(started),
            "early": early,
            "peak": {
                "occurrences": self.peak_count,
                "lateness_at_start_s": lateness(peak, self.started_at),
                "lateness_at_hand_out_s": lateness(peak, self.taken_at),
                "drain_per_s": round(len(peak) / max(peak_end - c.peak_at, 1e-9), 1) if peak and c.peaks == 1 else None,
                "each": [lateness(peak[k * c.peak:(k + 1) * c.peak], self.started_at) for k in range(c.peaks)]
                if c.peaks > 1 and len(peak) == self.peak_count else None,
            },
            "all": {"lateness_at_start_s": lateness(started, self.started_at)},
            "executions_per_s_max": max(per_second.values(), default=0),
            "store": {
                "cores": c.shared_cores or c.db_cores,
                "utilisation": round(self.db_cpu / (cores * span), 3),
                "cpu_s": round(self.db_cpu, 3),
                "busiest_second_utilisation": round(max(self.db_by_second.values(), default=0.0) / cores, 3),
                "peak_utilisation": round(sum(v for k, v in self.db_by_second.items() if window[0] <= k + 0.5 < window[1])
                                          / (cores * max(1, sum(1 for k in self.db_by_second
                                                                 if window[0] <= k + 0.5 < window[1]))), 3),
                "peak_window_s": [round(window[0], 3), round(window[1], 3)],
            },
            "servers": {
                "busiest_utilisation": round(max(s.lane.busy for s in self.servers) / span, 3),
                "busiest_second_utilisation": round(max(max(s.lane.by_second.values(), default=0.0)
                                                        for s in self.servers), 3),
                "cpu_s": round(sum(s.lane.busy for s in self.servers), 3),
            },
            "simulated_s": round(end, 3),
        }
        if self.shared is not None:
            out["store"]["shared_with_servers_and_workers"] = True
        if self.killed_at is not None:
            moved = [i for i in started if self.partition[i] in self.moved and self.due[i] >= self.killed_at]
            out["killed"] = {
                "at": self.killed_at,
                "partitions_moved": len(self.moved),
                "reaped_lateness_at_start_s": lateness([i for i in self.reaped if self.starts[i]], self.started_at),
                "released_lateness_at_start_s": lateness([i for i in self.released if self.starts[i]],
                                                         self.started_at),
                "their_lateness_at_start_s": lateness(moved, self.started_at),
                "others_lateness_at_start_s": lateness(
                    [i for i in started if self.partition[i] not in self.moved], self.started_at),
            }
        return out


def simulate(config: Config) -> dict:
    """The figures of one run of ``config`` (deterministic for its seed)."""
    return Simulation(config).run()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    helps = {
        "servers": "tickwheel servers", "partitions": "partitions (default 256)",
        "db_cores": "store cores (PostgreSQL; a CockroachDB cluster's cores divided by its cost ratio, docs/capacity.md)",
        "worker_cores": "cores of all workers together", "shared_cores": "one pool of cores for store, servers and workers (0: off)",
        "rtt": "network round trip added to each store call and each hand-out and result (s)",
        "jobs": "stored jobs", "runs_per_job_per_day": "each job's runs a day, spread evenly (the background load)",
        "peak": "occurrences due at the peak", "peak_at": "the peak's due instant (s from the start; 0: due at once)",
        "peak_window": "peak occurrences spread evenly over this many seconds (0: one instant)",
        "peaks": "how many peaks, one every --peak-period (a minutely peak's next claim meets its hand-out)",
        "horizon": "background occurrences go on this long after the peak (s)",
        "max_late": "stop this long after the last due instant (s)",
        "kill_server_at": "kill server 0 at this instant (s)",
        "release_unsent": "1: what the killed server started ahead and never sent goes back at the reaper's first pass "
                          "after its lease expired (its workers said hello elsewhere without it); 0: after the grace",
        "warm": "1: the cluster was running before, so the background due within the first look-ahead is claimed already",
        "start_ahead": "a row claimed ahead is taken (started) up to this long before it is due, sent at its instant (s)",
        "deal_share": "share of the server's hand-out CPU spent after the commit, dealing (an assumption: not measured)",
    }
    for f in fields(Config):
        flag = "--" + f.name.replace("_", "-")
        kind = float if f.type in ("float", "float | None") else int
        default = f.default
        text = helps.get(f.name, f.name.replace("_", " "))
        parser.add_argument(flag, type=kind, default=default, help=f"{text} (default {default})")
    args = parser.parse_args(argv)
    try:
        config = Config(**vars(args))
    except ValueError as error:
        parser.error(str(error))
    print(json.dumps(simulate(config), indent=2))


if __name__ == "__main__":
    main()
