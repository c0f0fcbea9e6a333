"""Tickwheel's worker runtime: holds a Pull stream, runs targets, reports outcomes.

    from tickwheel_worker import Worker, WorkerConfig, JobContext, PermanentError

    worker = Worker(WorkerConfig(address="127.0.0.1:50051", credential="..."))

    @worker.handler("billing.charge")
    async def charge(ctx: JobContext) -> bytes:
        ...  # ctx.execution_id is the idempotency key

    await worker.run()      # until `await worker.stop(grace)`

``tickwheel worker`` (:func:`tickwheel_worker.cli.worker_main`) runs one from
the command line.
"""

from tickwheel_worker._version import VERSION
from tickwheel_worker.config import WorkerConfig, default_worker_id
from tickwheel_worker.handlers import (
    ECHO_HANDLER_NAME,
    HandlerRegistry,
    JobContext,
    PermanentError,
    echo,
    register_builtins,
)
from tickwheel_worker.http_target import AddressPolicy, allow_all_addresses
from tickwheel_worker.runtime import Worker, WorkerFatalError

__all__ = [
    "ECHO_HANDLER_NAME",
    "VERSION",
    "AddressPolicy",
    "HandlerRegistry",
    "JobContext",
    "PermanentError",
    "Worker",
    "WorkerConfig",
    "WorkerFatalError",
    "allow_all_addresses",
    "default_worker_id",
    "echo",
    "register_builtins",
]
