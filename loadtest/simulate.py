"""Capacity model: a deterministic discrete-event simulation of a Tickwheel
cluster through a top-of-the-minute peak, with the costs the benchmarks measured.

What is modelled (``docs/architecture.md``, Dispatch, "Hand-outs decided
ahead", "Claims side by side" and Workers and failures):

* ``--servers`` servers share ``--partitions`` partitions, balanced to within
  one. Each server's dispatcher claims in ``--claim-lanes`` lanes, each on a
  contiguous run of its partitions in order, one claim in flight a lane:
  every tick (1 s, a seeded phase per server) a lane claims its partitions'
  occurrences due up to ``--lookahead`` ahead, in batches of
  ``--claim-batch`` in (partition, due) order, batch after batch while they
  come back full; then sleeps a tick. A claimed occurrence is an execution
  in the store from the claim's end, and its due instant goes into the
  server's timer wheel (``--wheel-tick`` slots). One due by the claim's
  instant is inserted handed out and sent once the claim commits (worker
  credit taken as enough).
* The executions table is the queue, shared by every server. Each server
  *arms* (``--arm-every`` apart) claimed rows of any partition ready within
  ``--arm-ahead``, oldest first, ``--arm-batch`` a statement while they come
  back full, at most ``--arm-limit`` armed at once; an armed row is that
  server's. It *starts* them (written ``running``, dealt to its workers)
  inside the *start window* of the earliest instant it armed, batches of
  ``--arm-batch`` rows ready within a wheel tick of each other,
  ``--start-depth`` starts under way at once, and sends each batch at its
  instant. The window is ``--start-ahead``, or, when the rows armed for
  that second and the next need more than one round of starts, those
  rounds × ``--arm-batch`` × the µs a row the server measured of its arms
  and starts of 500 rows or more (a moving average, never below
  ``--start-row-us``) × ``--window-margin``, at most ``--max-start-window``
  (``gateway/armed.py``, ``ArmedQueue.start_window_us``).
* What no server armed is taken by a hand-out round at its instant (woken
  by the server's wheel at a due slot, and by its sweep every ``--sweep``
  seconds): up to ``--handout-batch`` ready rows of any partition, at most
  ``--handout-in-flight`` takes per server at once, dealt after the commit
  and sent then. Lateness is measured at the worker's start, from the due
  instant; the hand-out instant (the send, as ``handed_out_at`` records
  it) is reported beside it.
* Results go back to the server that dealt them and are written in batches of
  up to ``--result-batch`` by one writer per server; while that server's last
  take was full (a hand-out backlog) the writer waits up to ``--result-defer``
  from the oldest queued result, unless half of ``--result-queue`` is queued.
* Costs are CPU seconds per execution (claim, arm, start, round, result) on
  three kinds of resource: the store (``--db-cores`` cores, FIFO, a
  transaction on one core, as a PostgreSQL backend runs it), each server's
  interpreter (one thread: its lanes' claims, arms, starts, deals and
  results queue on it), and the workers (``--worker-cores``).
  ``--shared-cores`` puts all of them on one pool of that many cores (the
  benchmarks' single 2-core box). ``--rtt`` is added to every store call
  and to every hand-out and result on the wire.
* ``--kill-server-at T`` kills server 0 at T: its transactions not committed
  roll back; what it armed and had not started is disarmed by the reaper's
  first pass after its lease expired (one ``--ttl`` after its last
  keep-alive, sent every TTL/3); rows it started and had not sent are given
  back at that pass too with ``--release-unsent 1`` (the default, as built:
  the start recorded their worker, which said hello elsewhere without
  them), rows a round took at their instant and had not sent a grace (one
  TTL, rounded up to reaper passes) later; its queued results are sent
  again by the workers to the next server; its partitions move to the
  survivors (balanced) at the expiry plus up to a tick, and their new
  owners read their executions into their wheels and claim what was not
  claimed yet. Other servers' arms and rounds take its partitions' claimed
  rows meanwhile.

The load: ``--peak`` occurrences due at ``--peak-at`` (spread over
``--peak-window``), ``--peaks`` times ``--peak-period`` apart, over a
background of ``--jobs`` × ``--runs-per-job-per-day`` spread evenly;
``--warm`` starts with the background's first look-ahead claimed, as a
cluster that was already running has it.

Not modelled: fair share between tenants, caps and keys (one tenant), worker
credit (enough slots, as ``bench_burst.py`` gives), retries, lock waits, the
arm's memory bound (small payloads: only ``--arm-limit`` binds), a worker's
stream moving to another server, and a claim's cost growing with the jobs
stored (taken as constant per job).

The default costs, and the section of ``loadtest/RESULTS.md`` each comes
from, are in ``docs/capacity.md``, "What one execution costs". Prints JSON;
the same arguments and ``--seed`` give the same output.

    .venv/bin/python loadtest/simulate.py --shared-cores 2 --peak 10000 --peak-at 40
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
from collections import Counter, deque
from dataclasses import dataclass, fields

# Measured per-execution costs, milliseconds of CPU, of a run claimed
# ahead, armed, started ahead and sent at its instant (a cron job's path,
# and the peak's): docs/capacity.md, "What one execution costs", says
# which measurement each comes from and how it is split. A round's take
# (a row no server armed) is taken as an arm and a start together.
DB_CLAIM_MS = 0.054
DB_ARM_MS = 0.033
DB_START_MS = 0.041
DB_RESULT_MS = 0.030
SERVER_CLAIM_MS = 0.024
SERVER_ARM_MS = 0.021
SERVER_START_MS = 0.039
SERVER_RESULT_MS = 0.021
WORKER_MS = 0.033


@dataclass(frozen=True)
class Config:
    """One simulated cluster and load. Times in seconds, costs in ms of CPU per execution."""

    servers: int = 1
    partitions: int = 256
    db_cores: float = 2.0
    worker_cores: float = 4.0
    slots: int = 0
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
    claim_lanes: int = 2
    claim_batch: int = 1000
    arm_ahead: float = 10.0
    arm_every: float = 0.25
    arm_batch: int = 2000
    arm_limit: int = 50_000
    start_ahead: float = 1.0
    start_depth: int = 2
    start_row_us: float = 100.0
    window_margin: float = 2.0
    max_start_window: float = 3.0
    handout_batch: int = 2000
    handout_in_flight: int = 2
    sweep: float = 1.0
    wheel_tick: float = 0.01
    ttl: float = 10.0
    reaper_every: float = 2.0
    result_batch: int = 2000
    result_defer: float = 1.0
    result_queue: int = 20_000
    db_claim_ms: float = DB_CLAIM_MS
    db_arm_ms: float = DB_ARM_MS
    db_start_ms: float = DB_START_MS
    db_handout_ms: float = DB_ARM_MS + DB_START_MS
    db_result_ms: float = DB_RESULT_MS
    server_claim_ms: float = SERVER_CLAIM_MS
    server_arm_ms: float = SERVER_ARM_MS
    server_start_ms: float = SERVER_START_MS
    server_handout_ms: float = SERVER_ARM_MS + SERVER_START_MS
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
        for name in ("db_cores", "worker_cores", "tick", "sweep", "wheel_tick", "ttl", "reaper_every", "arm_every",
                     "start_row_us", "window_margin"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        for name in ("claim_batch", "claim_lanes", "handout_batch", "handout_in_flight", "result_batch",
                     "result_queue", "peaks", "arm_batch", "arm_limit", "start_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if not 0 <= self.deal_share <= 1:
            raise ValueError("deal_share must be within [0, 1]")
        if self.release_unsent not in (0, 1):
            raise ValueError("release_unsent must be 0 or 1")
        if not 0 <= self.start_ahead <= self.max_start_window <= 30:
            raise ValueError("start_ahead and max_start_window must be within 0 <= start_ahead <= max_start_window <= 30")
        if not 0 <= self.arm_ahead <= 60:
            raise ValueError("arm_ahead must be within [0, 60] seconds")
        if self.shared_cores < 0 or self.rtt < 0 or self.peak < 0 or self.jobs < 0 or self.slots < 0:
            raise ValueError("shared_cores, rtt, peak, jobs and slots must be >= 0")

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
    """One thread (a server's interpreter): its work runs one piece at a time, on its pool."""

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
    claiming: set | None = None  # claim lanes with a claim in flight
    claim_generation: int = 0
    open_takes: dict | None = None  # take number -> rows, not committed yet
    dealing: dict | None = None  # take number -> rows, committed, not dealt yet
    waiting: dict | None = None  # send number -> rows dealt, held until their due instant
    armed: list | None = None  # heap of (due, occurrence) armed here, not yet seen due
    per_second: Counter | None = None  # armed here and not started, by second of their instant
    to_start: deque | None = None  # seen due (inside a start window), not started yet
    armed_count: int = 0  # armed here and not started (the arm's limit)
    arming: bool = False
    starts: dict | None = None  # start number -> rows, its transaction not committed
    row_us: float = 0.0  # the store's measured µs a row of an arm or a start
    window_check_at: float | None = None
    windows: list | None = None  # (instant, window s, rows) of each burst window opened longer than start_ahead
    credit: float = math.inf  # its workers' slots
    spoken: int = 0  # of them: armed, started or taken here and not ended (the worker gives the slot back)


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
            s.claiming, s.armed, s.per_second, s.to_start, s.starts = set(), [], Counter(), deque(), {}
            s.row_us, s.windows = config.start_row_us, []
            s.credit = config.slots / config.servers if config.slots else math.inf
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
        self.taken_at = [math.nan] * n  # the hand-out instant (the send)
        self.started_at = [math.nan] * n  # the worker's start
        self.starts = [0] * n
        self.armed_by = [-1] * n  # the server that armed it (-1: none)
        self.start_committed = [math.nan] * n  # when its start (written running, ahead of its instant) committed
        self.claimed_at = [math.nan] * n
        # Per partition, the occurrences not claimed yet, in due order.
        self.unclaimed: list[deque[int]] = [deque() for _ in range(c.partitions)]
        for i in sorted(range(n), key=dues.__getitem__):
            self.unclaimed[self.partition[i]].append(i)
        self.queued: list[tuple[float, int]] = []  # (due, occurrence): claimed, neither armed nor taken
        self.stamped_dead: list[int] = []  # taken at their instant by the dead server, not sent
        self.ahead: set[int] = set()  # started ahead (their worker recorded by the start)
        self.released: list[int] = []  # started ahead by the dead server, never sent, given back without the grace
        self.disarmed: list[int] = []  # armed by the dead server, not started: disarmed by the reaper
        self.moved: set[int] = set()  # partitions of the killed server
        self.killed_at: float | None = None
        self.reaped: list[int] = []  # taken by the dead server at their instant, not sent: requeued by the reaper
        self.last_due = max(dues, default=0.0)
        self.warm_claimed: list[int] = []
        if c.warm:  # the background due within the first look-ahead: claimed before the run began
            for queue in self.unclaimed:
                kept = deque(i for i in queue if i < self.peak_count or dues[i] > c.lookahead)
                self.warm_claimed += [i for i in queue if i >= self.peak_count and dues[i] <= c.lookahead]
                queue.clear()
                queue.extend(kept)
            for i in self.warm_claimed:
                self.claimed_at[i] = 0.0
                heapq.heappush(self.queued, (dues[i], i))

    # ------------------------------------------------------------ the event loop

    def at(self, time: float, action, *args) -> None:
        self.seq += 1
        heapq.heappush(self.events, (time, self.seq, action, args))

    def run(self) -> dict:
        c = self.c
        for s in self.servers:
            phase = self.rng.random()
            for lane in range(c.claim_lanes):
                self.at(phase * c.tick, self.claim, s, lane, 0)
            self.at(phase * c.sweep, self.sweep, s)
            if c.arm_ahead > 0:
                self.at(phase * c.arm_every, self.arm, s)
        if c.kill_server_at is not None:
            self.at(c.kill_server_at, self.kill, self.servers[0])
        owner = {p: s for s in self.servers for p in s.partitions}
        by_server: dict[int, list[float]] = {}
        for i in self.warm_claimed:
            by_server.setdefault(owner[self.partition[i]].index, []).append(self.due[i])
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

    def lane_partitions(self, s: Server, lane: int) -> list[int]:
        """Claim lane ``lane``'s contiguous run of ``s``'s partitions (``dispatcher.split_lanes``)."""
        ordered = sorted(s.partitions)
        count = max(1, min(self.c.claim_lanes, len(ordered)))
        if lane >= count:
            return []
        size, extra = divmod(len(ordered), count)
        start = lane * size + min(lane, extra)
        return ordered[start:start + size + (1 if lane < extra else 0)]

    def claim(self, s: Server, lane: int, generation: int) -> None:
        """One claim batch of a lane of ``s``; the lane's next at once if it was full, else after a tick."""
        if not s.alive or generation != s.claim_generation or lane in s.claiming:
            return
        s.claiming.add(lane)
        c, now = self.c, self.now
        horizon = now + c.lookahead
        batch: list[int] = []
        for p in self.lane_partitions(s, lane):
            queue = self.unclaimed[p]
            while queue and len(batch) < c.claim_batch and self.due[queue[0]] <= horizon:
                batch.append(queue.popleft())
            if len(batch) >= c.claim_batch:
                break
        n = len(batch)
        committed = self.store(now, n * c.db_claim_ms / 1000)
        done = s.lane.run(committed, n * c.server_claim_ms / 1000)
        self.at(done, self.claimed, s, lane, batch, now, n == c.claim_batch)

    def claimed(self, s: Server, lane: int, batch: list[int], began: float, full: bool) -> None:
        if not s.alive:  # died before its claim ended: the transaction rolled back
            for i in reversed(batch):
                self.unclaimed[self.partition[i]].appendleft(i)
            return
        s.claiming.discard(lane)
        straight = [i for i in batch if self.due[i] <= began]  # inserted handed out, sent once committed
        for i in batch:
            self.claimed_at[i] = self.now
            if self.due[i] > began:
                heapq.heappush(self.queued, (self.due[i], i))
        if straight:
            s.spoken += len(straight)
            for i in straight:
                self.taken_at[i] = self.now
            self.send_rows(s, straight)
        self._wake(s, [self.due[i] for i in batch if self.due[i] > began])
        self.at(self.now if full else self.now + self.c.tick, self.claim, s, lane, s.claim_generation)

    def _wake(self, s: Server, times: list[float]) -> None:
        """Put due instants into ``s``'s wheel: a hand-out round at each slot that holds one."""
        tick = self.c.wheel_tick
        for slot in sorted({math.ceil(t / tick - 1e-9) for t in times}):
            self.at(max(slot * tick, self.now), self.hand_out, s)

    # ------------------------------------------------------------ arming ahead

    def arm(self, s: Server) -> None:
        """One arming pass of ``s`` (every ``arm_every``): claimed rows ready within
        ``arm_ahead``, oldest first, a statement of up to ``arm_batch`` while full."""
        if not s.alive:
            return
        if not s.arming:
            self._arm_batch(s)
        self.at(self.now + self.c.arm_every, self.arm, s)

    def _arm_batch(self, s: Server) -> None:
        c = self.c
        room = int(min(c.arm_batch, c.arm_limit - s.armed_count, s.credit - s.spoken))
        horizon = self.now + c.arm_ahead
        batch: list[int] = []
        while self.queued and len(batch) < room and self.queued[0][0] <= horizon:
            batch.append(heapq.heappop(self.queued)[1])
        if not batch:
            return
        s.arming = True
        for i in batch:
            self.armed_by[i] = s.index
        s.armed_count += len(batch)
        s.spoken += len(batch)
        began = self.now
        done = self.store(self.now, len(batch) * c.db_arm_ms / 1000)
        done = s.lane.run(done, len(batch) * c.server_arm_ms / 1000)
        self.at(done, self.armed_now, s, batch, began)

    def armed_now(self, s: Server, batch: list[int], began: float) -> None:
        if not s.alive:  # rolled back at the death: claimed rows again, anyone's to arm or take
            for i in batch:
                self.armed_by[i] = -1
                heapq.heappush(self.queued, (self.due[i], i))
            return
        s.arming = False
        self._measured(s, len(batch), began)
        for i in batch:
            heapq.heappush(s.armed, (self.due[i], i))
            s.per_second[math.floor(self.due[i])] += 1
        self.start_due(s)
        if len(batch) == self.c.arm_batch:
            self._arm_batch(s)  # full: the pass goes on

    def _measured(self, s: Server, rows: int, began: float) -> None:
        """An arm or a start of ``rows`` rows sent at ``began``, ended now: its µs a row into the moving average."""
        if rows >= 500:
            s.row_us = 0.7 * s.row_us + 0.3 * (self.now - began) * 1e6 / rows

    def start_window(self, s: Server, due: float) -> float:
        """How long before ``due`` the start window of what ``s`` armed for it opens (s)."""
        c = self.c
        if not c.start_ahead:
            return 0.0
        second = math.floor(due)
        rows = s.per_second.get(second, 0) + s.per_second.get(second + 1, 0)
        at_once = c.arm_batch * c.start_depth
        if rows <= at_once:
            return c.start_ahead
        rounds = -(-rows // at_once)
        needed = rounds * c.arm_batch * max(s.row_us, c.start_row_us) * c.window_margin / 1e6
        return min(max(needed, c.start_ahead), c.max_start_window)

    def start_due(self, s: Server) -> None:
        """Start what ``s`` armed inside the start window of its earliest instant, ``start_depth`` at once."""
        c = self.c
        if not s.alive:
            return
        while s.armed:
            due = s.armed[0][0]
            window = self.start_window(s, due)
            if due - window > self.now + 1e-9:
                if s.window_check_at is None or s.window_check_at > due - window or s.window_check_at < self.now:
                    s.window_check_at = due - window
                    self.at(due - window, self.start_due, s)
                break
            if window > c.start_ahead and (not s.windows or s.windows[-1][0] != due):
                s.windows.append((due, round(window, 4), s.per_second.get(math.floor(due), 0)
                                  + s.per_second.get(math.floor(due) + 1, 0)))
            # Never short of the head itself: now + window may round a hair below it.
            horizon = max(self.now + window, due)
            while s.armed and s.armed[0][0] <= horizon:
                s.to_start.append(heapq.heappop(s.armed)[1])
        while s.to_start and len(s.starts) < c.start_depth:
            first = self.due[s.to_start[0]]
            batch = []
            while s.to_start and len(batch) < c.arm_batch and self.due[s.to_start[0]] <= first + c.wheel_tick:
                batch.append(s.to_start.popleft())
            for i in batch:
                s.per_second[math.floor(self.due[i])] -= 1
            s.armed_count -= len(batch)
            self.seq += 1
            s.starts[self.seq] = batch
            began = self.now
            done = self.store(self.now, len(batch) * c.db_start_ms / 1000)
            self.at(done, self.started, s, self.seq, began)

    def started(self, s: Server, key: int, began: float) -> None:
        c = self.c
        if not s.alive:
            return  # rolled back at the death: still armed by it (see kill)
        batch = s.starts.pop(key)
        self._measured(s, len(batch), began)
        for i in batch:
            self.ahead.add(i)
            self.start_committed[i] = self.now
        self.start_due(s)  # the next start under way before this one's deal
        dealt = s.lane.run(self.now, len(batch) * c.server_start_ms / 1000)
        self.seq += 1
        s.waiting[self.seq] = batch
        self.at(max(dealt, max(self.due[i] for i in batch)), self.send, s, self.seq)

    # ------------------------------------------------------------ the gateway's rounds

    def sweep(self, s: Server) -> None:
        if not s.alive:
            return
        self.hand_out(s)
        self.at(self.now + self.c.sweep, self.sweep, s)

    def hand_out(self, s: Server) -> None:
        """Take rows no server armed, ready by now, while fewer than the limit are in flight."""
        if not s.alive:
            return
        c = self.c
        self.start_due(s)
        while (self.queued and self.queued[0][0] <= self.now and len(s.open_takes) < c.handout_in_flight
               and s.spoken < s.credit):
            batch = []
            room = min(c.handout_batch, s.credit - s.spoken)
            while self.queued and self.queued[0][0] <= self.now and len(batch) < room:
                batch.append(heapq.heappop(self.queued)[1])
            s.spoken += len(batch)
            self.seq += 1
            s.open_takes[self.seq] = batch
            s.backlog = len(batch) == c.handout_batch
            taken = self.store(self.now, len(batch) * c.db_handout_ms / 1000)
            # The rows read and admission decided in the server before the commit.
            committed = s.lane.run(taken, len(batch) * c.server_handout_ms * (1 - c.deal_share) / 1000)
            self.at(committed, self.committed, s, self.seq)
        if not self.queued or self.queued[0][0] > self.now:
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
        if not s.alive:
            return  # stamped with the dead session (see kill)
        batch = s.dealing.pop(take)
        for i in batch:
            self.taken_at[i] = self.now
        self.send_rows(s, batch)

    def send(self, s: Server, key: int) -> None:
        if not s.alive:
            return  # started under the dead session, never sent (see kill)
        rows = s.waiting.pop(key)
        for i in rows:
            self.taken_at[i] = self.now  # the send instant, as handed_out_at records it
        self.send_rows(s, rows)

    def send_rows(self, s: Server, rows: list[int]) -> None:
        c = self.c
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
        s.spoken -= count  # the workers' slots free again: a round may take what waits
        if s.alive and self.queued and self.queued[0][0] <= self.now:
            self.hand_out(s)
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
        # A round's takes not committed roll back when its connections drop;
        # those committed and not dealt stay stamped with its session until reaped.
        for batch in s.open_takes.values():
            for i in batch:
                heapq.heappush(self.queued, (self.due[i], i))
        self.stamped_dead = [i for batch in s.dealing.values() for i in batch]
        # Armed and not started (a start not committed leaves its rows armed):
        # the reaper disarms them at its first pass after the lease expired.
        self.disarmed = [i for _, i in s.armed] + list(s.to_start) + [i for b in s.starts.values() for i in b]
        started = [i for batch in s.waiting.values() for i in batch]
        if c.release_unsent:
            # Started ahead, their worker recorded: its hello at a survivor (it
            # reconnects within a second or two, before the lease expires) does
            # not list them, and the reaper gives them back at its first pass
            # after the expiry, without the grace.
            self.released = started
        else:
            self.stamped_dead += started
        self.reaped = list(self.stamped_dead)
        s.open_takes, s.dealing, s.waiting, s.starts, s.armed, s.to_start = {}, {}, {}, {}, [], deque()
        alive = [other for other in self.servers if other.alive]
        for other in alive:  # its workers say hello to the others: their slots with them
            other.credit += s.credit / len(alive)
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
        # The reaper's first pass after the expiry sees the owner dead: it disarms
        # what it armed and gives back what it started and never sent; the pass
        # one grace (a session TTL) later requeues what is still stamped with it.
        seen_dead = expiry + self.rng.random() * c.reaper_every
        if self.released or self.disarmed:
            self.at(seen_dead, self.release)
        self.at(seen_dead + math.ceil(c.ttl / c.reaper_every) * c.reaper_every, self.reap)

    def release(self) -> None:
        for i in [*self.released, *self.disarmed]:
            self.armed_by[i] = -1
            heapq.heappush(self.queued, (self.due[i], i))
        for s in self.servers:
            self.hand_out(s)

    def reap(self) -> None:
        for i in self.stamped_dead:
            heapq.heappush(self.queued, (self.due[i], i))
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
        for due, i in self.queued:  # the new owners' wheels read the gained partitions' executions
            if self.partition[i] in self.moved and due <= horizon:
                gained.setdefault(owner[self.partition[i]].index, []).append(due)
        for index, times in gained.items():
            self._wake(self.servers[index], times)
        for s in alive:  # an ownership change wakes the claim of every lane (their runs of partitions change)
            self.at(self.now, self.hand_out, s)
            s.claim_generation += 1
            for lane in range(self.c.claim_lanes):
                if lane not in s.claiming:
                    self.at(self.now, self.claim, s, lane, s.claim_generation)

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
            "started_ahead": len(self.ahead),
            "peak": {
                "occurrences": self.peak_count,
                "lateness_at_start_s": lateness(peak, self.started_at),
                "lateness_at_hand_out_s": lateness(peak, self.taken_at),
                "armed": sum(1 for i in range(self.peak_count) if i in self.ahead),
                "drain_per_s": round(len(peak) / max(peak_end - c.peak_at, 1e-9), 1) if peak and c.peaks == 1 else None,
                "each": [lateness(peak[k * c.peak:(k + 1) * c.peak], self.started_at) for k in range(c.peaks)]
                if c.peaks > 1 and len(peak) == self.peak_count else None,
            },
            "all": {"lateness_at_start_s": lateness(started, self.started_at)},
            "executions_per_s_max": max(per_second.values(), default=0),
            "start_windows": {str(s.index): [list(w) for w in s.windows[:8]] for s in self.servers if s.windows},
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
            stranded = {*self.reaped, *self.released, *self.disarmed}  # what the dead server held
            moved = [i for i in started if self.partition[i] in self.moved and self.due[i] >= self.killed_at]
            out["killed"] = {
                "at": self.killed_at,
                "partitions_moved": len(self.moved),
                "reaped_lateness_at_start_s": lateness([i for i in self.reaped if self.starts[i]], self.started_at),
                "released_lateness_at_start_s": lateness([i for i in self.released if self.starts[i]],
                                                         self.started_at),
                "disarmed_lateness_at_start_s": lateness([i for i in self.disarmed if self.starts[i]],
                                                         self.started_at),
                "their_lateness_at_start_s": lateness(moved, self.started_at),
                "others_lateness_at_start_s": lateness(
                    [i for i in started if self.partition[i] not in self.moved], self.started_at),
                "not_stranded_lateness_at_start_s": lateness(
                    [i for i in started if self.due[i] >= self.killed_at and i not in stranded], self.started_at),
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
        "worker_cores": "cores of all workers together",
        "slots": "all workers' slots together, split evenly among the servers: a server arms and takes at most its "
                 "workers' slots not spoken for (0: enough)", "shared_cores": "one pool of cores for store, servers and workers (0: off)",
        "rtt": "network round trip added to each store call and each hand-out and result (s)",
        "jobs": "stored jobs", "runs_per_job_per_day": "each job's runs a day, spread evenly (the background load)",
        "peak": "occurrences due at the peak", "peak_at": "the peak's due instant (s from the start; 0: due at once)",
        "peak_window": "peak occurrences spread evenly over this many seconds (0: one instant)",
        "peaks": "how many peaks, one every --peak-period (a minutely peak's next claim meets its hand-out)",
        "horizon": "background occurrences go on this long after the peak (s)",
        "max_late": "stop this long after the last due instant (s)",
        "claim_lanes": "claims in flight per server, each on a contiguous run of its partitions",
        "arm_ahead": "rows ready within this are armed by a server (s; 0: arming off, every row takes a round at its instant)",
        "arm_every": "a server's arming passes this far apart (s)",
        "arm_batch": "rows an arm statement, and a start's batch",
        "arm_limit": "armed executions a server holds at most",
        "start_ahead": "an armed row is started up to this long before its instant (s; a burst's window may be longer)",
        "start_depth": "starts under way at once per server",
        "start_row_us": "the floor of the measured µs a row that sizes a burst's start window",
        "window_margin": "a burst's start window is its starts' time at the measured pace times this",
        "max_start_window": "a burst's start window opens at most this long before its instant (s)",
        "kill_server_at": "kill server 0 at this instant (s)",
        "release_unsent": "1: what the killed server started ahead and never sent goes back at the reaper's first pass "
                          "after its lease expired (its workers said hello elsewhere without it); 0: after the grace",
        "warm": "1: the cluster was running before, so the background due within the first look-ahead is claimed already",
        "db_handout_ms": "store ms a row of a round's take (a row no server armed)",
        "server_handout_ms": "server ms a row of a round's take (a row no server armed)",
        "deal_share": "share of a round's server CPU spent after the commit, dealing (an assumption: not measured)",
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
