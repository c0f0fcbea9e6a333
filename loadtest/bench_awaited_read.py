"""Benchmark: what ``api.awaited.AwaitedRequests.read`` costs a unary call
whose message is already there (an honest client's: it sends the message
with its headers), in process, without a server.

``--calls`` reads one at a time on one event loop, each with a fake
context whose ``read`` answers at once; the figures: CPU µs a read
(``time.thread_time``, the best of ``--repeat`` rounds, the fake's own
cost included, the same in every tree) and the loop timers set a read
(``loop.call_at`` calls: ``asyncio.timeout`` sets one, a sweep's sleep
one a second).

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_awaited_read.py [--calls 200000] [--repeat 3] [--smoke]

Prints one JSON object. Run it with another tree's ``PYTHONPATH`` to
compare trees; ``--smoke`` runs tiny sizes so CI keeps it alive.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

from tickwheel_server.api.awaited import AwaitedRequests


class Context:
    def peer(self) -> str:
        return "ipv4:10.0.0.1:5000"

    async def read(self) -> bytes:
        return b"m"


async def rounds(calls: int, repeat: int) -> dict:
    loop = asyncio.get_running_loop()
    timers = 0
    call_at = loop.call_at

    def counting(*args, **kwargs):
        nonlocal timers
        timers += 1
        return call_at(*args, **kwargs)

    loop.call_at = counting
    awaited, context, best = AwaitedRequests(), Context(), float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        for _ in range(calls):
            await awaited.read(context, None)
        best = min(best, time.thread_time() - started)
    return {"cpu_us_a_read": round(best / calls * 1e6, 3), "timers_a_read": round(timers / (calls * repeat), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.repeat = 100, 1
    report = {"benchmark": "awaited_read", "smoke": args.smoke, "calls": args.calls, "repeat": args.repeat,
              "load": round(os.getloadavg()[0], 2), **asyncio.run(rounds(args.calls, args.repeat))}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
