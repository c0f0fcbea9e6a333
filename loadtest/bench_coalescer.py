"""Benchmark: CreateJob's group commit (``coalescer.py``) in process, with a
fake write: what grouping costs a call, and how closed-loop callers group.

    .venv/bin/python loadtest/bench_coalescer.py [--gather-max-ms 5] [--callers 16] [--write-ms 2]
                                                 [--think-ms 0.5] [--seconds 3]

Prints one JSON object:

- ``cpu_us_per_call``: CPU microseconds (this process) a call costs
  through ``CreateCoalescer.create`` with a write that answers at once:
  ``lone`` (one call at a time) and ``group_16`` (16 at once), best of 5
  rounds. The store, validation and gRPC are not in it.
- ``closed_loop``: ``--callers`` callers, each sending its next call
  ``--think-ms`` after its answer (its round trip), against a write that
  takes ``--write-ms`` (a sleep) plus ``--write-ms-per-call`` a call, for
  ``--seconds``: calls a write (mean, and the share of writes by size),
  calls/s, and each call's latency (p50, p99, ms). ``gather_max_ms`` 0 is
  the group commit without the gather; the run gives both, ``off`` and
  ``on``, in one process one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter

from tickwheel_server.coalescer import CreateCoalescer


class Job:
    __slots__ = ("tenant", "spec")

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.spec = b"x" * 120


async def answer_now(tenant, items):
    return [None] * len(items)


async def cpu_per_call(gather_max_s: float) -> dict:
    job = Job("acme")
    out = {}
    for name, width, rounds in (("lone", 1, 3000), ("group_16", 16, 300)):
        best = float("inf")
        for _ in range(5):
            coalescer = CreateCoalescer(answer_now, gather_max_s=gather_max_s)
            started = time.process_time()
            for k in range(rounds):
                await asyncio.gather(*(coalescer.create(job, f"r{k}-{i}") for i in range(width)))
            best = min(best, (time.process_time() - started) / (rounds * width) * 1e6)
        out[name] = round(best, 2)
    return out


async def closed_loop(args: argparse.Namespace, gather_max_s: float) -> dict:
    sizes: list[int] = []
    latencies: list[float] = []

    async def write(tenant, items):
        sizes.append(len(items))
        await asyncio.sleep((args.write_ms + args.write_ms_per_call * len(items)) / 1000)
        return [None] * len(items)

    coalescer = CreateCoalescer(write, gather_max_s=gather_max_s)
    job = Job("acme")
    stop = time.monotonic() + args.seconds

    async def caller(c: int) -> int:
        done = 0
        while time.monotonic() < stop:
            started = time.perf_counter()
            await coalescer.create(job, f"c{c}-{done}")
            latencies.append(time.perf_counter() - started)
            done += 1
            await asyncio.sleep(args.think_ms / 1000)
        return done

    began = time.monotonic()
    calls = sum(await asyncio.gather(*(caller(c) for c in range(args.callers))))
    elapsed = time.monotonic() - began
    ordered = sorted(latencies)
    by_size = Counter(sizes)
    return {
        "calls_per_s": round(calls / elapsed),
        "writes": len(sizes),
        "calls_per_write": round(statistics.mean(sizes), 2),
        "writes_by_size": {str(size): round(n / len(sizes), 3) for size, n in sorted(by_size.items())},
        "latency_ms": {"p50": round(ordered[len(ordered) // 2] * 1000, 2),
                       "p99": round(ordered[int(len(ordered) * 0.99)] * 1000, 2)},
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gather-max-ms", type=float, default=5.0, help="the gather's bound in 'on' (default 5)")
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--write-ms", type=float, default=2.0, help="a write's fixed duration (default 2)")
    parser.add_argument("--write-ms-per-call", type=float, default=0.05, help="a write's duration a call (default 0.05)")
    parser.add_argument("--think-ms", type=float, default=0.5, help="a caller's round trip (default 0.5)")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    result = {"args": vars(args), "cpu_us_per_call": {}, "closed_loop": {}}
    for arm, bound in (("off", 0.0), ("on", args.gather_max_ms / 1000)):
        result["cpu_us_per_call"][arm] = await cpu_per_call(bound)
        result["closed_loop"][arm] = await closed_loop(args, bound)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
