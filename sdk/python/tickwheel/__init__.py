"""Tickwheel's Python SDK: a thin hand-written client over the generated
``tickwheel.v1`` stubs.

>>> from tickwheel import Client, cron_job
>>> client = Client("127.0.0.1:50051", api_key="tw_...")
>>> job = client.create_job(cron_job("nightly", "0 2 * * *", "Europe/London", handler="echo")).job

Generated messages and stubs live in ``tickwheel.v1`` (``job_pb2``,
``scheduler_pb2``, ...); every client method returns those messages.

The names below are loaded on first use, so importing the generated
``tickwheel.v1`` modules (as the server and the worker do) does not load the
client and its dependencies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwheel.builders import (
        cron_job,
        dst_policy,
        duration,
        execution_status,
        handler_target,
        http_target,
        job_state,
        local_job,
        misfire_policy,
        once_job,
        overlap_policy,
        retry_policy,
        timestamp,
    )
    from tickwheel.batch import CreateOutcome, DeleteOutcome, UpdateOutcome
    from tickwheel.client import Admin, AsyncAdmin, AsyncClient, Client
    from tickwheel.errors import FieldViolation, TickwheelError
    from tickwheel.options import DEFAULT_RETRY, RetryOptions, TlsOptions

_EXPORTS = {
    "tickwheel.builders": (
        "cron_job", "dst_policy", "duration", "execution_status", "handler_target", "http_target",
        "job_state", "local_job", "misfire_policy", "once_job", "overlap_policy", "retry_policy", "timestamp",
    ),
    "tickwheel.batch": ("CreateOutcome", "DeleteOutcome", "UpdateOutcome"),
    "tickwheel.client": ("Admin", "AsyncAdmin", "AsyncClient", "Client"),
    "tickwheel.errors": ("FieldViolation", "TickwheelError"),
    "tickwheel.options": ("DEFAULT_RETRY", "RetryOptions", "TlsOptions"),
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwheel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
