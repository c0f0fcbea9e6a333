"""Deterministic jitter: a stable delay per job, so equal schedules spread out.

A million ``0 0 * * *`` jobs must not land on one second. Each job gets a
delay in ``[0, window)`` from a BLAKE2b hash of its id (never Python's
``hash()``, which changes per process), in whole milliseconds, the same for
every occurrence and on every server. Jitter only delays: the due instant is
the nominal instant plus this delay. Defaults (docs/architecture.md, Semantics: Jitter): 60 s for
cron jobs, none for one-off jobs; ``exact`` turns it off.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

DEFAULT_CRON_WINDOW = timedelta(seconds=60)
MAX_WINDOW = timedelta(hours=1)


_MILLISECOND = timedelta(milliseconds=1)
_HASH = hashlib.blake2b(digest_size=8, person=b"tickwheel-jit")
"""The keyed hash before any input: each delay hashes a copy of it."""


def jitter_delay(job_id: str, window: timedelta) -> timedelta:
    """The stable delay of ``job_id`` within ``[0, window)``, whole milliseconds.

    Zero when ``job_id`` is empty (an unsaved schedule has no identity to
    hash) or ``window`` is under a millisecond. Not cached: most calls are
    for a job id never seen before (a job being created), and a hash costs
    about what a cache lookup and insertion would.
    """
    return timedelta(microseconds=jitter_micros(job_id, window))


def jitter_micros(job_id: str, window: timedelta) -> int:
    """:func:`jitter_delay` in microseconds (a multiple of 1 000), for
    callers that keep instants as microseconds since the epoch."""
    return jitter_micros_within(job_id, window // _MILLISECOND)


def jitter_micros_within(job_id: str, window_ms: int) -> int:
    """:func:`jitter_micros` of a window given in whole milliseconds, for
    callers that hold one window for many jobs (a batch's shape)."""
    if not job_id or window_ms <= 0:
        return 0
    digest = _HASH.copy()
    digest.update(job_id.encode())
    return int.from_bytes(digest.digest(), "big") % window_ms * 1000
