"""Benchmark: the timer wheel against a heapq with lazy deletion, in one run.

    .venv/bin/python loadtest/bench_wheel.py [--timers N] [--look-ahead S] [--seed S] [--smoke]

Prints one JSON object. Both structures get the same timers (keys shaped
like execution ids, ``job_<ULID>:<instant>``, due within the look-ahead,
60 s by default), through the same API: ``insert`` all of them, ``cancel`` a
tenth (random keys), then drain by calling ``pop_due`` every 10 ms of fake
time (the wheel's tick) until both are empty. Measured single-threaded, the
garbage collector paused during each timed loop (as ``bench_next_fire``):

- ``inserts_per_s``, ``cancels_per_s``; ``pops_per_s``: timers handed out
  per second spent in ``pop_due`` (its empty calls included);
- ``bytes_per_timer``: what the structure allocates per held timer, by
  ``tracemalloc`` over a separate untimed build (keys and instants exist
  before it starts, as they do when the store hands them over);
- ``gc_tracked_per_timer``: objects per timer the garbage collector keeps
  scanning after a collection (the wheel's tuples of str/int are untracked;
  the heap's mutable entries are not).

Two insertion orders: ``claim`` (the headline figures): timers arrive as the
dispatcher claims them, in batches of 1000 in due order, shuffled within a
batch; ``random``: arbitrary order, so every access in the drain is a cache
miss for both structures.

The baseline is the lazy-deletion recipe of the ``heapq`` documentation: a
heap of ``[due, seq, key, payload]`` entries plus a ``key -> entry`` index,
cancel marks the entry removed, ``pop_due`` pops while the top is due. It
fires at the exact instant, the wheel at the next 10 ms tick (never early).

``--smoke`` runs 10 000 timers over a 10 s look-ahead in about a second, so
CI keeps the script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import itertools
import json
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Hashable
from typing import Any

from tickwheel_server.wheel import TimerWheel

T0 = 1_798_761_600_000_000  # 2027-01-01T00:00:00Z, microseconds
STEP_US = 10_000
CLAIM_BATCH = 1000


class HeapTimers:
    """The baseline: ``heapq`` with lazy deletion (the recipe in the heapq docs)."""

    _REMOVED = object()

    def __init__(self, now_us: int) -> None:
        self._heap: list[list[Any]] = []
        self._index: dict[Hashable, list[Any]] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._index)

    def insert(self, key: Hashable, due_us: int, payload: Any = None) -> None:
        old = self._index.get(key)
        if old is not None:
            old[2] = self._REMOVED
        entry = [due_us, next(self._seq), key, payload]
        self._index[key] = entry
        heapq.heappush(self._heap, entry)

    def cancel(self, key: Hashable) -> bool:
        entry = self._index.pop(key, None)
        if entry is None:
            return False
        entry[2] = self._REMOVED
        return True

    def pop_due(self, now_us: int) -> list[tuple[Hashable, int, Any]]:
        heap, index, removed = self._heap, self._index, self._REMOVED
        out = []
        while heap and heap[0][0] <= now_us:
            due_us, _, key, payload = heapq.heappop(heap)
            if key is not removed:
                del index[key]
                out.append((key, due_us, payload))
        return out


STRUCTURES: dict[str, Callable[[int], Any]] = {"wheel": TimerWheel, "heapq": HeapTimers}


def build_workload(timers: int, order: str, look_ahead_us: int, seed: int) -> tuple[list[str], list[int], list[str]]:
    """Keys, due instants (in insertion order) and the keys to cancel."""
    rnd = random.Random(seed)
    bits = rnd.getrandbits
    if order == "claim":
        batches = -(-timers // CLAIM_BATCH)
        width = look_ahead_us // batches
        dues = [T0 + (i // CLAIM_BATCH) * width + bits(32) % width for i in range(timers)]
    else:
        dues = [T0 + bits(32) % look_ahead_us for _ in range(timers)]
    keys = [f"job_01J{bits(64):016X}{i:07d}:2027-01-01T00:00:00Z" for i in range(timers)]
    for key in keys:
        hash(key)  # str caches its hash: computed here, not in a timed loop
    cancels = rnd.sample(keys, timers // 10)
    return keys, dues, cancels


def _timed(loop: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    gc.disable()
    try:
        began = time.perf_counter()
        result = loop()
        return time.perf_counter() - began, result
    finally:
        gc.enable()


def measure_speed(make: Callable[[int], Any], keys: list[str], dues: list[int], cancels: list[str]) -> dict:
    structure = make(T0)
    insert, cancel, pop_due = structure.insert, structure.cancel, structure.pop_due

    def insert_all() -> None:
        for key, due_us in zip(keys, dues):
            insert(key, due_us, None)

    def cancel_some() -> int:
        return sum(map(cancel, cancels))

    def drain() -> tuple[int, int, bool]:
        popped = calls = 0
        ordered = True
        last = 0
        now = T0
        while len(structure):
            now += STEP_US
            batch = pop_due(now)
            calls += 1
            if batch:
                popped += len(batch)
                ordered = ordered and last <= batch[0][1] and all(
                    a[1] <= b[1] for a, b in zip(batch, batch[1:])
                ) and batch[-1][1] <= now
                last = batch[-1][1]
        return popped, calls, ordered

    insert_s, _ = _timed(insert_all)
    cancel_s, cancelled = _timed(cancel_some)
    drain_s, (popped, calls, ordered) = _timed(drain)
    assert cancelled == len(cancels) and popped == len(keys) - cancelled, "lost or extra timers"
    assert ordered, "handed out early or out of due order"
    return {
        "inserts_per_s": round(len(keys) / insert_s),
        "cancels_per_s": round(len(cancels) / cancel_s),
        "pops_per_s": round(popped / drain_s),
        "pop_due_calls": calls,
    }


def measure_memory(make: Callable[[int], Any], keys: list[str], dues: list[int]) -> dict:
    gc.collect()
    tracked_before = len(gc.get_objects())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        structure = make(T0)
        insert = structure.insert
        for key, due_us in zip(keys, dues):
            insert(key, due_us, None)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    gc.collect()
    tracked = len(gc.get_objects()) - tracked_before
    del structure
    return {"bytes_per_timer": round(held / len(keys), 1), "gc_tracked_per_timer": round(tracked / len(keys), 3)}


def run_order(order: str, timers: int, look_ahead_us: int, seed: int) -> dict:
    keys, dues, cancels = build_workload(timers, order, look_ahead_us, seed)
    figures = {name: {**measure_speed(make, keys, dues, cancels), **measure_memory(make, keys, dues)}
               for name, make in STRUCTURES.items()}
    wheel, heap = figures["wheel"], figures["heapq"]
    figures["wheel_vs_heapq"] = {
        "inserts": round(wheel["inserts_per_s"] / heap["inserts_per_s"], 2),
        "cancels": round(wheel["cancels_per_s"] / heap["cancels_per_s"], 2),
        "pops": round(wheel["pops_per_s"] / heap["pops_per_s"], 2),
        "bytes": round(wheel["bytes_per_timer"] / heap["bytes_per_timer"], 2),
    }
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=1_000_000, help="timers per structure (default 1 000 000)")
    parser.add_argument(
        "--look-ahead", type=float, default=60.0, help="seconds the due instants spread over (default 60)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.timers, args.look_ahead = 10_000, 10.0
    if args.timers < CLAIM_BATCH:
        parser.error(f"--timers must be at least {CLAIM_BATCH}")
    look_ahead_us = int(args.look_ahead * 1_000_000)
    if look_ahead_us < STEP_US * (args.timers // CLAIM_BATCH):
        parser.error("--look-ahead too short for that many claim batches")
    claim = run_order("claim", args.timers, look_ahead_us, args.seed)
    random_order = run_order("random", args.timers, look_ahead_us, args.seed)
    geometry = TimerWheel(T0).geometry
    report = {
        "benchmark": "wheel",
        "smoke": args.smoke,
        "timers": args.timers,
        "cancelled": args.timers // 10,
        "look_ahead_s": args.look_ahead,
        "pop_due_every_ms": STEP_US // 1000,
        "geometry": {
            "tick_ms": geometry.tick_us / 1000,
            "slots_per_level": geometry.slots_per_level,
            "levels": geometry.levels,
            "span_s": geometry.span_us / 1_000_000,
        },
        "wheel": claim["wheel"],
        "heapq": claim["heapq"],
        "wheel_vs_heapq": claim["wheel_vs_heapq"],
        "random_order": random_order,
        "python": platform.python_version(),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
