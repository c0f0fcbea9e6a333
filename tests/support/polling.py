"""Waiting, in tests, for something another process or task brings about."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

WAIT = 30.0


async def eventually(check: Callable[[], T | Awaitable[T]], what: str, timeout: float = WAIT,
                     interval: float = 0.05) -> T:
    """Call ``check()`` (awaiting what it returns if that is awaitable) every
    ``interval`` seconds until it gives something truthy, and return that;
    fail naming ``what`` (and the last value) after ``timeout`` seconds.

    For state the test can only observe from outside (through the API, the
    store or a log): where a component offers an event, await that instead.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    value = None
    while asyncio.get_running_loop().time() < deadline:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"not within {timeout:.0f} s: {what} (last: {value!r})")
