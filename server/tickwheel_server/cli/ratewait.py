"""Calls the CLI repeats after a refusal over the tenant's request rate.

A call that makes the server compute many schedule fires (a backfill
chunk, an update's dry-run diff, a batch resume's paused spans) pays for
them from the tenant's ``requests_per_second`` (docs/operations.md, "A
tenant's API request rate"), so a run of them soon leaves the tenant owing: the server then
answers RESOURCE_EXHAUSTED on ``requests_per_second`` with a retry delay.
:func:`paced` waits that long and asks again, up to :data:`MAX_RATE_WAITS`
times in a row; any other error, or a longer delay, propagates.
:func:`paced_items` does the same for a batch's items refused alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import grpc
from google.rpc import error_details_pb2

from tickwheel import TickwheelError

__all__ = ["MAX_RATE_WAITS", "paced", "paced_items", "rate_wait"]

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


def paced_items(
    items: Sequence, send: Callable[[list], list[Any]], *, sleep: Callable[[float], None] = time.sleep
) -> tuple[list[Any], str | None]:
    """``send(items)``'s outcomes (one per item, each with ``ok`` and
    ``error``, as the SDK's batch outcomes), for batch resumes and updates:
    the paused spans they count are charged to the tenant's request rate,
    so a call over it is refused whole, and a batch's items past what the
    tenant's bucket held are refused alone (RESOURCE_EXHAUSTED on
    ``requests_per_second``, with a retry delay). Both are sent again once
    the delay has passed (:func:`paced`); each call applies at least its
    first such item, so this gives up only after :data:`MAX_RATE_WAITS`
    calls in a row that applied none. ``send`` must make one call (a
    refused call wrote nothing). A call sending items again that fails
    keeps their last refusals and is returned as the error, with the
    outcomes; the first call's error is raised (nothing was applied)."""
    items = list(items)
    outcomes = list(paced(lambda: send(items), sleep=sleep))
    fruitless = 0
    while fruitless < MAX_RATE_WAITS:
        waits = {i: rate_wait(o.error) for i, o in enumerate(outcomes) if not o.ok}
        again = [i for i, wait in waits.items() if wait is not None]
        if not again:
            break
        sleep(max(waits[i] for i in again))
        try:
            redone = paced(lambda: send([items[i] for i in again]), sleep=sleep)
        except TickwheelError as error:
            return outcomes, str(error)
        for i, outcome in zip(again, redone):
            outcomes[i] = outcome
        fruitless = 0 if any(outcome.ok for outcome in redone) else fruitless + 1
    return outcomes, None
