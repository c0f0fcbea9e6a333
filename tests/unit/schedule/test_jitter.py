"""Jitter is stable: the same delay for a job id on every server and in
every release (a due instant computed by one server is recomputed by
another), the keyed BLAKE2b hash of the id modulo the window in whole
milliseconds."""

from __future__ import annotations

import hashlib
import random
from datetime import timedelta

import pytest

from tickwheel_server.schedule import jitter_delay, jitter_micros_within


def spelled_out(job_id: str, window: timedelta) -> timedelta:
    window_ms = window // timedelta(milliseconds=1)
    if not job_id or window_ms <= 0:
        return timedelta(0)
    digest = hashlib.blake2b(job_id.encode(), digest_size=8, person=b"tickwheel-jit").digest()
    return timedelta(milliseconds=int.from_bytes(digest, "big") % window_ms)


@pytest.mark.parametrize(("job_id", "window", "delay"), [
    ("job_42", timedelta(seconds=60), timedelta(seconds=22, milliseconds=978)),
    ("job_01KBP7ZQ8M3V5X2Y4Z6A8B0C2D", timedelta(hours=1), timedelta(seconds=313, milliseconds=422)),
    ("é", timedelta(milliseconds=7), timedelta(milliseconds=4)),
    ("", timedelta(seconds=60), timedelta(0)),
    ("job_42", timedelta(microseconds=999), timedelta(0)),
    ("job_42", timedelta(seconds=-1), timedelta(0)),
])  # fmt: skip
def test_pinned_delays(job_id: str, window: timedelta, delay: timedelta) -> None:
    assert jitter_delay(job_id, window) == delay


def test_every_delay_is_the_spelled_out_hash() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        job_id = "".join(rng.choice("abcXYZ019_:é") for _ in range(rng.randint(0, 40)))
        window = timedelta(microseconds=rng.randint(-5, 3_600_000_000))
        assert jitter_delay(job_id, window) == spelled_out(job_id, window)


def test_a_window_in_milliseconds_gives_the_same_delays() -> None:
    """A batch's shape holds its window in whole milliseconds once
    (``validate._Template``); each job's delay is still the hash's."""
    rng = random.Random(11)
    for _ in range(2000):
        job_id = "".join(rng.choice("abcXYZ019_:é") for _ in range(rng.randint(0, 40)))
        window = timedelta(microseconds=rng.randint(-5, 3_600_000_000))
        within = jitter_micros_within(job_id, window // timedelta(milliseconds=1))
        assert timedelta(microseconds=within) == spelled_out(job_id, window)
