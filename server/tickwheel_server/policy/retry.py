"""Retry backoff: full jitter (docs/architecture.md, Semantics: Retries). Pure."""

from __future__ import annotations

import random
from datetime import timedelta


def backoff_ceiling(attempt: int, initial: timedelta, cap: timedelta) -> timedelta:
    """The most attempt ``attempt`` (>= 2) waits: min(cap, initial · 2^(attempt-2))."""
    if attempt < 2:
        raise ValueError("attempt 1 does not wait")
    exponent = min(attempt - 2, 62)
    return min(cap, initial * (2**exponent))


def backoff_delay(
    attempt: int, initial: timedelta, cap: timedelta, rng: random.Random, retry_after: timedelta | None = None
) -> timedelta:
    """How long attempt ``attempt`` waits: uniform in [0, ceiling] (full
    jitter), but no less than the target's ``retry_after`` within the cap."""
    ceiling = backoff_ceiling(attempt, initial, cap)
    delay = timedelta(seconds=rng.uniform(0.0, ceiling.total_seconds()))
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return delay
