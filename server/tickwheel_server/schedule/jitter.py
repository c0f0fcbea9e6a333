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
from functools import lru_cache

DEFAULT_CRON_WINDOW = timedelta(seconds=60)
MAX_WINDOW = timedelta(hours=1)


@lru_cache(maxsize=1 << 16)
def _delay_ms(job_id: str, window_ms: int) -> int:
    digest = hashlib.blake2b(job_id.encode(), digest_size=8, person=b"tickwheel-jit").digest()
    return int.from_bytes(digest, "big") % window_ms


def jitter_delay(job_id: str, window: timedelta) -> timedelta:
    """The stable delay of ``job_id`` within ``[0, window)``, whole milliseconds.

    Zero when ``job_id`` is empty (an unsaved schedule has no identity to
    hash) or ``window`` is under a millisecond.
    """
    window_ms = window // timedelta(milliseconds=1)
    if not job_id or window_ms <= 0:
        return timedelta(0)
    return timedelta(milliseconds=_delay_ms(job_id, window_ms))
