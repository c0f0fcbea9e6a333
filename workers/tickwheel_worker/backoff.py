"""Reconnect backoff: full jitter, capped (a pure function)."""

from __future__ import annotations

import random


def reconnect_delay(failures: int, *, initial: float, cap: float, rng: random.Random) -> float:
    """Seconds to wait before reconnect attempt number ``failures + 1``.

    Uniform in ``[0, min(cap, initial * 2**failures)]`` ("full jitter"), so a
    fleet of workers that lost the same server does not reconnect in step.
    ``failures`` counts consecutive attempts that never got a welcome; it is 0
    right after a session that did, so a drained worker comes back quickly.
    """
    if failures < 0:
        raise ValueError("failures must be >= 0")
    ceiling = min(cap, initial * (2 ** min(failures, 62)))
    return rng.uniform(0.0, ceiling)
