"""The dispatcher's cache of parsed job definitions: by job id, valid for one
version, least recently used out first, bounded by entries and payload bytes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tickwheel.v1 import job_pb2

from tickwheel_server.schedule import ScheduleKind
from tickwheel_server.store.dispatch import ClaimSpecCache, claim_spec


def spec(payload: bytes = b"", *, expression: str = "*/5 * * * *", http: bool = False) -> bytes:
    job = job_pb2.Job(
        name="j", schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone="UTC")),
        payload=payload, misfire_policy=job_pb2.MISFIRE_POLICY_RUN_ALL, misfire_run_all_limit=7,
    )
    if http:
        job.target.http.url = "https://example.com/hook"
    else:
        job.target.handler.name = "billing.charge"
    job.misfire_threshold.FromTimedelta(timedelta(seconds=90))
    return job.SerializeToString()


def test_a_definition_is_read_as_the_claim_needs_it() -> None:
    parsed = claim_spec("job_1", spec(b"x"))
    assert parsed.schedule.kind is ScheduleKind.CRON and parsed.schedule.expression == "*/5 * * * *"
    assert parsed.schedule.job_id == "job_1", "H and jitter are seeded by the job's id"
    assert (parsed.policy, parsed.threshold, parsed.run_all_limit) == ("run_all", timedelta(seconds=90), 7)
    assert (parsed.handler, parsed.payload) == ("billing.charge", b"x")
    assert claim_spec("job_1", spec(http=True)).handler is None


def test_the_same_version_is_parsed_once_and_a_new_version_again() -> None:
    cache = ClaimSpecCache()
    first = cache.get("job_1", 1, spec(b"v1"))
    assert cache.get("job_1", 1, spec(b"v1")) is first
    assert (cache.misses, cache.hits) == (1, 1)
    second = cache.get("job_1", 2, spec(b"v2"))
    assert second.payload == b"v2" and (cache.misses, len(cache)) == (2, 1)
    assert cache.payload_bytes == 2


def test_the_least_recently_used_goes_first_when_full() -> None:
    cache = ClaimSpecCache(max_entries=2)
    a = cache.get("a", 1, spec())
    cache.get("b", 1, spec())
    assert cache.get("a", 1, spec()) is a  # a is now the most recent
    cache.get("c", 1, spec())
    assert len(cache) == 2
    misses = cache.misses
    assert cache.get("a", 1, spec()) is a and cache.misses == misses, "a stayed"
    cache.get("b", 1, spec())
    assert cache.misses == misses + 1, "b went"


def test_payload_bytes_are_bounded_and_a_payload_over_the_bound_is_not_kept() -> None:
    cache = ClaimSpecCache(max_payload_bytes=10)
    cache.get("a", 1, spec(b"123456"))
    cache.get("b", 1, spec(b"123456"))
    assert (len(cache), cache.payload_bytes) == (1, 6), "a went to make room for b"
    big = cache.get("c", 1, spec(b"x" * 11))
    assert big.payload == b"x" * 11, "parsed all the same"
    assert (len(cache), cache.payload_bytes) == (1, 6)


@pytest.mark.parametrize("bounds", [dict(max_entries=0), dict(max_payload_bytes=-1)])
def test_bounds_are_checked(bounds) -> None:
    with pytest.raises(ValueError):
        ClaimSpecCache(**bounds)
