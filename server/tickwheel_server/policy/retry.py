"""Retry backoff of a job's attempts (docs/architecture.md, Semantics: Retries). Pure.

The wait is :func:`tickwheel.shared.backoff.full_jitter` with the job's
``initial_backoff`` and ``max_backoff``; attempt 2 (the first retry) is step 0.
"""

from __future__ import annotations

import random
from datetime import timedelta

from tickwheel.shared.backoff import full_jitter


def backoff_delay(
    attempt: int, initial: timedelta, cap: timedelta, rng: random.Random, retry_after: timedelta | None = None
) -> timedelta:
    """How long attempt ``attempt`` (>= 2) waits: uniform in [0, ceiling] (full
    jitter), but no less than the target's ``retry_after`` within the cap."""
    if attempt < 2:
        raise ValueError("attempt 1 does not wait")
    seconds = full_jitter(attempt - 2, initial=initial.total_seconds(), cap=cap.total_seconds(), rng=rng)
    delay = timedelta(seconds=seconds)
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return delay
