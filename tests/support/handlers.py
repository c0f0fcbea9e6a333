"""Handlers for worker processes started by tests
(``tickwheel worker --handlers tests.support.handlers:register``).

- ``sleep``: runs for ``{"seconds": N}`` of its JSON payload, reporting
  progress, and stops early when canceled.
- ``kill-worker``: kills its own worker process with SIGKILL, every time (a
  poison execution).
- ``echo``: the built-in.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

from tickwheel_worker.handlers import HandlerRegistry, JobContext, register_builtins


async def sleep(ctx: JobContext) -> str:
    seconds = float(json.loads(ctx.payload or b"{}").get("seconds", 1))
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        await ctx.heartbeat(f"{seconds - left:.1f} of {seconds:g} s")
        try:
            await asyncio.wait_for(ctx.canceled.wait(), min(0.2, left))
            return "canceled"
        except TimeoutError:
            pass
    return f"slept {seconds:g} s (delivery {ctx.delivery})"


def kill_worker(ctx: JobContext) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def register(registry: HandlerRegistry) -> None:
    register_builtins(registry)
    registry.register("sleep", sleep)
    registry.register("kill-worker", kill_worker)
