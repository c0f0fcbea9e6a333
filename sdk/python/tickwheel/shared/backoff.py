"""Exponential backoff with full jitter: the one implementation.

Every wait between retries in Tickwheel (a job's retry, the store's 40001
retry, the lease and ownership loops, the worker's reconnect) is drawn here:
uniform in ``[0, min(cap, initial * 2**step)]`` seconds, where ``step``
counts the waits already made since the last success (0 for the first).
Full jitter spreads contenders that failed at the same instant, so a fleet
does not retry in step. Callers keep their own parameters and say how their
count maps to ``step``.

:func:`ceiling` and :func:`full_jitter` are pure (the randomness comes from the
``rng`` passed in). :class:`BackoffSleeper` applies them to a loop that waits
on a :class:`~tickwheel.shared.clock.Clock` after each failure and starts over
after a success. Standard library only: the worker imports this too.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tickwheel.shared.clock import Clock

# Past this many doublings every ceiling is at its cap (initial >= 2**-1000 s),
# and 2.0**step stays finite.
_MAX_STEP = 1000


def ceiling(step: int, *, initial: float, cap: float) -> float:
    """The longest wait, in seconds, after ``step`` (>= 0) earlier waits:
    ``min(cap, initial * 2**step)``. Never overflows, however large ``step``;
    ``initial`` and ``cap`` are >= 0 (a cap below ``initial`` simply wins)."""
    if step < 0:
        raise ValueError("step must be >= 0")
    if initial < 0 or cap < 0:
        raise ValueError("backoff needs initial >= 0 and cap >= 0")
    return min(cap, initial * 2.0 ** min(step, _MAX_STEP))


def full_jitter(step: int, *, initial: float, cap: float, rng: random.Random) -> float:
    """A wait, in seconds, after ``step`` (>= 0) earlier waits: uniform in
    ``[0, ceiling(step)]``, drawn with one ``rng.uniform`` call."""
    return rng.uniform(0.0, ceiling(step, initial=initial, cap=cap))


class BackoffSleeper:
    """Waits out :func:`full_jitter` delays on a clock, for a retrying loop.

    Contract: each :meth:`sleep` waits ``full_jitter(step)`` on ``clock`` and
    then counts one more step; :meth:`reset` (call it after a success) makes
    the next wait start again from ``step`` 0. Not shared between tasks.
    """

    def __init__(self, clock: Clock, *, initial: float, cap: float, rng: random.Random | None = None) -> None:
        if initial <= 0 or cap < initial:
            raise ValueError("BackoffSleeper needs initial > 0 and cap >= initial")
        self._clock = clock
        self._initial = initial
        self._cap = cap
        self._rng = rng or random.Random()
        self._step = 0

    def reset(self) -> None:
        """The last try succeeded: the next wait is short again."""
        self._step = 0

    def next_delay(self) -> float:
        """Draw the next wait and count the step (what :meth:`sleep` waits)."""
        delay = full_jitter(self._step, initial=self._initial, cap=self._cap, rng=self._rng)
        self._step = min(self._step + 1, _MAX_STEP)
        return delay

    async def sleep(self) -> None:
        """Wait the next delay on the clock."""
        await self._clock.sleep(self.next_delay())


async def kept_running(
    part: Callable[[], Awaitable[None]], clock: Clock, log: logging.Logger, what: str, *, initial: float, cap: float
) -> None:
    """Await ``part()`` until it returns; each time it raises an exception
    (not a cancellation), log it as ``"<what>: <part> failed; starting it
    again"`` and start it again after a :class:`BackoffSleeper` wait."""
    backoff = BackoffSleeper(clock, initial=initial, cap=cap)
    while True:
        try:
            await part()
            return
        except Exception:
            log.exception("%s: %s failed; starting it again", what, getattr(part, "__name__", part))
            await backoff.sleep()
