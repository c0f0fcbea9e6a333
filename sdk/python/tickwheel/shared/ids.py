"""Identifiers and instants as the store keeps them.

Job ids are generated once, at creation (``job_`` + a ULID: 48 bits of
milliseconds, 80 random bits, Crockford base32), so ids sort roughly by
creation time and pages over them are stable. Everything that must be
recognisable when it happens twice is *derived* instead (execution ids from
the job id and the nominal instant).

Instants are stored as integer microseconds since the Unix epoch, UTC, on
every engine: one representation that SQLite, PostgreSQL and CockroachDB
compare identically, with no driver time-zone conversion in between.
"""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)
"""Every 10-bit value as two Crockford characters."""
_PAIR_SHIFTS = tuple(range(120, -1, -10))
_CROCKFORD_OF_BYTE = bytes(_CROCKFORD.encode()[byte & 31] for byte in range(256))
"""Each byte to the Crockford character of its low five bits: a uniformly
random byte gives a uniformly random character (256 is 8 × 32)."""


_RANDOM_AHEAD = 256
"""ULIDs' random parts read from the system at once (:func:`_random_part`)."""
_random_parts: list[bytes] = []


def _random_part() -> bytes:
    """80 fresh random bits, never handed out twice: the system's randomness
    is read for :data:`_RANDOM_AHEAD` ULIDs at a time, since each read
    gives the GIL away (a server's event loop then waits for it behind
    its other threads). ``list.pop`` is atomic, so threads never share a
    part; a forked child drops the parent's (see below)."""
    try:
        return _random_parts.pop()
    except IndexError:
        block = os.urandom(10 * _RANDOM_AHEAD)
        _random_parts.extend(block[i : i + 10] for i in range(10, len(block), 10))
        return block[:10]


# A child must not hand out the parts its parent still holds.
os.register_at_fork(after_in_child=_random_parts.clear)


def ulid(now: datetime) -> str:
    """A 26-character ULID for ``now`` (aware) with 80 random bits."""
    return _ulid(_millis(now), _random_part(), now)


def new_job_id(now: datetime) -> str:
    """A fresh job id: ``job_<ULID>``."""
    return "job_" + ulid(now)


def new_job_ids(now: datetime, count: int) -> list[str]:
    """``count`` fresh job ids for ``now``, ULIDs as :func:`new_job_id`
    makes them (the same time part, 80 random bits), from one read of the
    system's randomness: a read per id can give the GIL away at each (a
    batch's thousand ids waited for it in turn)."""
    # Every id of the batch has the same 48 bits of milliseconds (the first
    # 10 characters); the other 16 are random, each one random byte's low
    # five bits (:data:`_CROCKFORD_OF_BYTE`): 80 random bits, spelled for
    # the whole batch by one bytes.translate (base64.b32encode is a Python
    # loop, most of the ids' cost).
    time_part = "job_" + _ulid(_millis(now), bytes(10), now)[:10]
    spelled = os.urandom(16 * count).translate(_CROCKFORD_OF_BYTE).decode()
    return [time_part + spelled[i : i + 16] for i in range(0, 16 * count, 16)]


def _millis(now: datetime) -> int:
    delta = now - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _ulid(millis: int, random: bytes, now: datetime) -> str:
    value = (millis << 80) | int.from_bytes(random, "big")
    if value >> 128:  # before 1970 (no datetime reaches a ULID's last instant, in year 10889)
        raise OverflowError(f"{now.isoformat()} is outside a ULID's 48 bits of milliseconds")
    # 26 characters of 5 bits are the value's low 130 bits (a ULID's 128,
    # two leading zero bits): 13 pairs of 10 bits, each one table lookup.
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])


def partition_of(job_id: str, partition_count: int) -> int:
    """The partition a job belongs to: a stable hash of its id, never Python's ``hash``."""
    digest = _PARTITION_HASH()
    digest.update(job_id.encode())
    return int.from_bytes(digest.digest(), "big") % partition_count


# An empty 8-byte BLAKE2b copied per id: the same digest as building one
# (``hashlib.blake2b(data, digest_size=8)``), without parsing the
# constructor's keywords each time (a third of an id's cost; a batch
# create hashes every job's id). Never updated itself, so its copies may
# be taken from any thread.
_PARTITION_HASH = hashlib.blake2b(digest_size=8).copy


def to_us(instant: datetime) -> int:
    """Microseconds since the epoch for an aware datetime."""
    if instant.tzinfo is None:
        raise ValueError("naive datetime: instants must be timezone-aware")
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(micros: int) -> datetime:
    """The aware UTC datetime for microseconds since the epoch."""
    return _EPOCH + timedelta(microseconds=micros)


def timestamp_us(ts) -> int:
    """A protobuf ``Timestamp`` as microseconds since the epoch."""
    return ts.seconds * 1_000_000 + ts.nanos // 1000


def set_timestamp_us(ts, micros: int) -> None:
    """Set a protobuf ``Timestamp`` (a message's field, in place) to ``micros``
    since the epoch: no datetime and no Timestamp built and copied (hot
    paths set thousands; see loadtest/RESULTS.md for the cost)."""
    seconds, rest = divmod(micros, 1_000_000)
    ts.seconds = seconds
    ts.nanos = rest * 1000


def execution_id(job_id: str, nominal_at: datetime) -> str:
    """The derived id of a scheduled occurrence: ``<job id>:<nominal instant, RFC 3339 UTC>``."""
    return f"{job_id}:{_instant_text(nominal_at, nominal_at.tzinfo)}"


@lru_cache(maxsize=4096)
def _instant_text(nominal_at: datetime, _zone: tzinfo | None) -> str:
    # Cached: the jobs of a burst share a handful of nominal instants. The
    # zone is part of the key because aware datetimes of one instant in two
    # zones are equal (and hash alike) but print differently.
    text = nominal_at.strftime("%Y-%m-%dT%H:%M:%S")
    if nominal_at.microsecond:
        text += f".{nominal_at.microsecond:06d}"
    return text + "Z"
