"""Running a real worker in the test's own event loop against a test server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig, register_builtins

CONNECT_WAIT = 20.0


def builtin_handlers() -> HandlerRegistry:
    """A registry holding only the built-in handlers (``echo`` among them)."""
    registry = HandlerRegistry()
    register_builtins(registry)
    return registry


@contextlib.asynccontextmanager
async def running_worker(address: str, credential: str, handlers: HandlerRegistry, **config) -> AsyncIterator[Worker]:
    """A :class:`Worker` serving ``handlers`` on the server at ``address``,
    run as a task of the current loop; ``config`` is the rest of its
    :class:`WorkerConfig`.

    The block starts only once the server has welcomed the worker (so a job
    made due in the block has a worker to go to); on the way out the worker is
    stopped and its task awaited, whatever happened in the block.
    """
    worker = Worker(WorkerConfig(address=address, credential=credential, handlers=handlers, **config))
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.connected.wait(), CONNECT_WAIT)
        yield worker
    finally:
        await worker.stop(1.0)
        await asyncio.gather(task, return_exceptions=True)
