"""Calls the CLI repeats after a refusal over the tenant's request rate.

A call that makes the server compute many schedule fires (a backfill
chunk, an update's dry-run diff) pays for them from the tenant's
``requests_per_second`` (docs/operations.md, "A tenant's API request
rate"), so a run of them soon leaves the tenant owing: the server then
answers RESOURCE_EXHAUSTED on ``requests_per_second`` with a retry delay.
:func:`paced` waits that long and asks again, up to :data:`MAX_RATE_WAITS`
times in a row; any other error, or a longer delay, propagates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import grpc
from google.rpc import error_details_pb2

from tickwheel import TickwheelError

__all__ = ["MAX_RATE_WAITS", "paced", "rate_wait"]

T = TypeVar("T")

MAX_RATE_WAITS = 20
"""Refusals over the tenant's request rate in a row :func:`paced` waits out."""
MAX_RATE_WAIT = timedelta(minutes=2)
"""The longest retry delay it waits: past it the refusal propagates."""


def rate_wait(error: TickwheelError) -> float | None:
    """Seconds to wait when ``error`` is RESOURCE_EXHAUSTED over the
    tenant's ``requests_per_second`` with a retry delay (at most
    :data:`MAX_RATE_WAIT`); None for any other error."""
    if error.code != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    quotas = [d.metadata.get("quota") for d in error.details if isinstance(d, error_details_pb2.ErrorInfo)]
    delays = [d.retry_delay.ToTimedelta() for d in error.details if isinstance(d, error_details_pb2.RetryInfo)]
    if "requests_per_second" not in quotas or not delays or delays[0] > MAX_RATE_WAIT:
        return None
    return delays[0].total_seconds()


def paced(call: Callable[[], T], *, sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, asked again after each refusal over the tenant's request
    rate once its retry delay has passed (:func:`rate_wait`)."""
    for waits in range(MAX_RATE_WAITS + 1):
        try:
            return call()
        except TickwheelError as error:
            wait = rate_wait(error)
            if wait is None or waits == MAX_RATE_WAITS:
                raise
            sleep(wait)
    raise AssertionError("unreachable")
