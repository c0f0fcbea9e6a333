"""Job ids and stored instants: the fast encodings give what the plain ones give."""

from __future__ import annotations

import base64
import collections
import os
from datetime import datetime, timedelta, timezone
from unittest import mock

import pytest

from tickwheel.shared import ids
from tickwheel.shared.ids import from_us, new_job_id, to_us, ulid

_STANDARD_TO_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", b"0123456789ABCDEFGHJKMNPQRSTVWXYZ")
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def reference_ulid(now: datetime, random: bytes) -> str:
    """The ULID spelled out: 48 bits of whole milliseconds then 80 random
    bits, 128 bits as 26 Crockford characters (two leading zero bits)."""
    millis = (now - EPOCH) // timedelta(milliseconds=1)
    value = (millis << 80) | int.from_bytes(random, "big")
    return base64.b32encode(value.to_bytes(20, "big"))[6:].translate(_STANDARD_TO_CROCKFORD).decode()


@pytest.mark.parametrize("now", [
    EPOCH,
    datetime(2026, 12, 5, 3, 0, 0, 123_456, tzinfo=timezone.utc),
    datetime(2026, 12, 5, 4, 0, 0, 999_999, tzinfo=timezone(timedelta(hours=1))),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc),
])  # fmt: skip
@pytest.mark.parametrize("random", [bytes(10), b"\xff" * 10, bytes(range(10)), b"\x80" + bytes(9)])
def test_ulid_spells_milliseconds_then_randomness_in_crockford(now: datetime, random: bytes) -> None:
    with mock.patch.object(ids, "_random_part", return_value=random):
        assert ulid(now) == reference_ulid(now, random)


def test_ulid_of_random_bits_matches_the_reference() -> None:
    now = datetime(2026, 12, 5, tzinfo=timezone.utc)
    for _ in range(2000):
        random = os.urandom(10)
        with mock.patch.object(ids, "_random_part", return_value=random):
            assert ulid(now) == reference_ulid(now, random)


def test_job_ids_sort_by_creation_millisecond() -> None:
    earlier = new_job_id(datetime(2026, 12, 5, 3, 0, 0, 1000, tzinfo=timezone.utc))
    later = new_job_id(datetime(2026, 12, 5, 3, 0, 0, 2000, tzinfo=timezone.utc))
    assert earlier.startswith("job_") and len(earlier) == 30
    assert earlier < later


def test_ulid_counts_whole_milliseconds_without_float_rounding() -> None:
    # The last datetime's 253 402 300 799 999.999 ms is rounded up by a float division.
    for instant in (datetime(2026, 12, 5, 3, 0, 0, 123_999, tzinfo=timezone.utc),
                    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc)):  # fmt: skip
        millis = 0
        for char in ulid(instant)[:10]:  # the first 10 characters: 50 bits, the 48 of milliseconds
            millis = millis * 32 + "0123456789ABCDEFGHJKMNPQRSTVWXYZ".index(char)
        assert millis == (instant - EPOCH) // timedelta(milliseconds=1)


def test_ulid_refuses_an_instant_before_the_epoch() -> None:
    with pytest.raises(OverflowError):
        ulid(EPOCH - timedelta(seconds=1))


@pytest.mark.parametrize("instant", [
    EPOCH,
    EPOCH - timedelta(microseconds=1),
    datetime(1, 1, 1, tzinfo=timezone.utc),
    datetime(2026, 3, 29, 1, 59, 59, 999_999, tzinfo=timezone.utc),
    datetime(2026, 3, 29, 3, 0, 0, 1, tzinfo=timezone(timedelta(hours=2))),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc),
])  # fmt: skip
def test_to_us_counts_microseconds_since_the_epoch(instant: datetime) -> None:
    assert to_us(instant) == (instant - EPOCH) // timedelta(microseconds=1)
    assert from_us(to_us(instant)) == instant


def test_to_us_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError):
        to_us(datetime(2026, 1, 1))


def test_ulids_read_the_randomness_once_per_block_and_never_reuse_a_part() -> None:
    block = b"".join(index.to_bytes(10, "big") for index in range(ids._RANDOM_AHEAD))
    ids._random_parts.clear()
    with mock.patch.object(ids.os, "urandom", return_value=block) as urandom:
        parts = [ids._random_part() for _ in range(ids._RANDOM_AHEAD)]
    urandom.assert_called_once_with(10 * ids._RANDOM_AHEAD)
    assert sorted(parts) == [block[i : i + 10] for i in range(0, len(block), 10)]
    assert ids._random_part() not in parts  # the next block is read afresh


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_does_not_hand_out_its_parents_random_parts() -> None:
    ids._random_parts.clear()
    ids._random_part()  # the parent now holds the rest of a block
    held = set(ids._random_parts)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.write(write, b"".join(ids._random_part() for _ in range(len(held))))
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        taken = pipe.read()
    os.waitpid(child, 0)
    assert len(taken) == 10 * len(held)
    assert not held & {taken[i : i + 10] for i in range(0, len(taken), 10)}


def low_bits(random: bytes) -> bytes:
    """The 80 bits a batch's id takes from its 16 random bytes: each byte's low five, in order."""
    value = 0
    for byte in random:
        value = value << 5 | byte & 31
    return value.to_bytes(10, "big")


def test_a_batch_of_ids_reads_the_randomness_once_and_spells_each_as_a_ulid() -> None:
    now = datetime(2026, 12, 5, 3, 0, 0, 5_000, tzinfo=timezone.utc)
    randomness = bytes(range(48))
    with mock.patch.object(ids.os, "urandom", return_value=randomness) as urandom:
        batch = ids.new_job_ids(now, 3)
    urandom.assert_called_once_with(48)
    assert batch == ["job_" + reference_ulid(now, low_bits(randomness[i : i + 16])) for i in (0, 16, 32)]


@pytest.mark.parametrize("fill", [0x00, 0xFF, 0x5A, 0xE0])
def test_a_batch_of_ids_spells_every_bit_as_a_ulid(fill: int) -> None:
    """All zeros, all ones, a pattern and only high bits, at the first
    instant and the last a datetime holds: a batch's id is the ULID of
    its time and of its bytes' low five bits."""
    for now in (datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2026, 12, 5, 3, 0, 0, 5_000, tzinfo=timezone.utc),
                datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc)):  # fmt: skip
        randomness = bytes([fill]) * 16 + bytes(range(240, 256))
        with mock.patch.object(ids.os, "urandom", return_value=randomness):
            batch = ids.new_job_ids(now, 2)
        assert batch == ["job_" + reference_ulid(now, low_bits(randomness[i : i + 16])) for i in (0, 16)]
        assert batch[0][:14] == new_job_id(now)[:14]  # the one-id time part


def test_a_random_byte_gives_a_uniform_character() -> None:
    """Each of the 32 characters is the spelling of exactly 8 of the 256
    bytes, so uniform bytes give uniform characters: 80 random bits an id."""
    assert sorted(collections.Counter(ids._CROCKFORD_OF_BYTE).values()) == [8] * 32
    assert set(ids._CROCKFORD_OF_BYTE.decode()) == set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def test_a_batch_of_ids_holds_no_duplicate() -> None:
    batch = ids.new_job_ids(datetime(2026, 12, 5, tzinfo=timezone.utc), 1000)
    assert len(set(batch)) == 1000 and all(len(job_id) == 30 for job_id in batch)
    assert ids.new_job_ids(datetime(2026, 12, 5, tzinfo=timezone.utc), 0) == []


def test_a_partition_is_the_ids_blake2b_from_any_thread() -> None:
    """partition_of hashes each id from a copy of one empty hash: the same
    partition as a BLAKE2b of 8 bytes built per id (the stable hash every
    server and stored row agrees on), whatever ran before it and from
    threads hashing at once."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    from tickwheel.shared.ids import new_job_ids, partition_of

    def reference(job_id: str, count: int) -> int:
        return int.from_bytes(hashlib.blake2b(job_id.encode(), digest_size=8).digest(), "big") % count

    job_ids = new_job_ids(datetime(2026, 12, 7, tzinfo=timezone.utc), 2000) + ["", "é☃", "job_x" * 300]
    assert [partition_of(i, 256) for i in job_ids] == [reference(i, 256) for i in job_ids]
    assert [partition_of(i, 7) for i in job_ids] == [reference(i, 7) for i in job_ids]
    assert partition_of("job_01ARZ3NDEKTSV4RRFFQ69G5FAV", 256) == 211  # pinned: stored rows depend on it
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: partition_of(i, 256), job_ids * 4))
    assert results == [reference(i, 256) for i in job_ids] * 4
