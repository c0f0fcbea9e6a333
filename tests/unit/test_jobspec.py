"""The one job definition type: read once per (job id, version) into what
the claim, the hand-out and the outcomes need, defaults filled in, through
a bounded LRU that never serves an old version."""

from __future__ import annotations

from datetime import timedelta

import pytest
from google.protobuf.message import DecodeError
from tickwheel.v1 import job_pb2

from tickwheel_server.jobspec import NO_DEFINITION, DefinitionCache, JobDefinition, calendar_ref
from tickwheel_server.policy.outcome import RetryPolicy
from tickwheel_server.schedule import ScheduleKind


def spec(payload: bytes = b"", *, expression: str = "*/5 * * * *", http: bool = False, **fields) -> bytes:
    fields.setdefault("misfire_run_all_limit", 7)
    job = job_pb2.Job(
        name="j", schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone="UTC")),
        payload=payload, misfire_policy=job_pb2.MISFIRE_POLICY_RUN_ALL, **fields,
    )
    if http:
        job.target.http.url = "https://Example.com:8443/hook"
    else:
        job.target.handler.name = "billing.charge"
    job.misfire_threshold.FromTimedelta(timedelta(seconds=90))
    return job.SerializeToString()


def test_a_definition_is_read_as_the_claim_needs_it() -> None:
    parsed = JobDefinition.parse("job_1", 3, spec(b"x"))
    assert parsed.problem is None and parsed.version == 3
    assert parsed.schedule.kind is ScheduleKind.CRON and parsed.schedule.expression == "*/5 * * * *"
    assert parsed.schedule.job_id == "job_1", "H and jitter are seeded by the job's id"
    assert (parsed.misfire_policy, parsed.misfire_threshold, parsed.run_all_limit) == ("run_all", timedelta(seconds=90), 7)
    assert (parsed.handler, parsed.payload) == ("billing.charge", b"x")
    http = JobDefinition.parse("job_1", 1, spec(http=True))
    assert (http.handler, http.breaker_host) == (None, "example.com")
    assert parsed.breaker_host == ""


def test_what_a_definition_leaves_unset_gets_the_defaults() -> None:
    parsed = JobDefinition.parse("job_1", 1, spec())
    assert parsed.retry == RetryPolicy(5, timedelta(seconds=1), timedelta(hours=1))
    assert parsed.timeout_us == 5 * 60 * 1_000_000
    assert parsed.rules.overlap == "skip" and parsed.rules.keys == ()
    assert parsed.lateness_threshold == timedelta(minutes=5)
    for empty in (NO_DEFINITION, JobDefinition.parse("job_1", 1, None), JobDefinition.parse("job_1", 1, b"")):
        assert empty.retry == RetryPolicy(5, timedelta(seconds=1), timedelta(hours=1))
        assert (empty.timeout_us, empty.target.WhichOneof("kind"), empty.breaker_host) == (300_000_000, None, "")
        assert empty.retry_or_problem() == empty.retry


def test_what_a_definition_names_wins_over_the_defaults() -> None:
    retry = job_pb2.RetryPolicy(max_attempts=2)
    retry.initial_backoff.FromTimedelta(timedelta(seconds=3))
    retry.max_backoff.FromTimedelta(timedelta(seconds=30))
    timeout = job_pb2.Job().timeout
    timeout.FromTimedelta(timedelta(seconds=7))
    parsed = JobDefinition.parse("job_1", 1, spec(retry_policy=retry, timeout=timeout))
    assert parsed.retry_or_problem() == RetryPolicy(2, timedelta(seconds=3), timedelta(seconds=30))
    assert parsed.timeout_us == 7_000_000
    only_attempts = JobDefinition.parse("job_1", 1, spec(retry_policy=job_pb2.RetryPolicy(max_attempts=9)))
    assert only_attempts.retry == RetryPolicy(9, timedelta(seconds=1), timedelta(hours=1))


def test_bytes_that_do_not_parse_are_a_problem_for_the_claim_and_the_retry_and_empty_for_the_hand_out() -> None:
    damaged = JobDefinition.parse("job_1", 1, b"\xff\xff\xff")
    assert damaged.problem.startswith("the definition does not parse")
    assert damaged.target.WhichOneof("kind") is None and damaged.timeout_us == 300_000_000
    assert damaged.retry_or_problem().startswith("the definition does not parse")
    with pytest.raises(DecodeError):
        damaged.host()


def test_a_backoff_out_of_range_fails_only_the_retry() -> None:
    retry = job_pb2.RetryPolicy(max_attempts=3)
    retry.max_backoff.seconds = 10**14  # past timedelta's range
    parsed = JobDefinition.parse("job_1", 1, spec(retry_policy=retry))
    assert parsed.problem is None and parsed.unparsed is None
    assert parsed.retry_or_problem().startswith("retry_policy: a value out of range")


def test_a_stored_lateness_threshold_out_of_range_reads_as_the_default() -> None:
    # Only a damaged row or a newer version can store one (the API bounds it
    # to 30 days): the lateness watch then uses the default, the claim and the
    # retry are untouched.
    threshold = job_pb2.Job().lateness_threshold
    threshold.seconds = 10**14  # past timedelta's range
    parsed = JobDefinition.parse("job_1", 1, spec(lateness_threshold=threshold))
    assert parsed.lateness_threshold == timedelta(minutes=5)
    assert parsed.problem is None and isinstance(parsed.retry_or_problem(), RetryPolicy)


def test_a_value_the_claim_cannot_obey_is_a_problem() -> None:
    assert "outside 1..10000" in JobDefinition.parse("j", 1, spec(misfire_run_all_limit=10_001)).problem
    unknown = job_pb2.Job.FromString(spec())
    unknown.ClearField("target")
    assert "no target" in JobDefinition.parse("j", 1, unknown.SerializeToString()).problem
    assert "expression" in JobDefinition.parse("j", 1, spec(expression="*" * 513)).problem


def test_the_same_version_is_parsed_once_and_a_new_version_never_served_stale() -> None:
    cache = DefinitionCache()
    first = cache.get("job_1", 1, spec(b"v1"))
    assert cache.get("job_1", 1, spec(b"v1")) is first
    assert (cache.misses, cache.hits) == (1, 1)
    second = cache.get("job_1", 2, spec(b"v2"))
    assert second.payload == b"v2" and (cache.misses, len(cache)) == (2, 1)
    assert cache.get("job_1", 2, spec(b"v2")) is second
    assert cache.payload_bytes == 2
    other = cache.get("job_2", 1, spec(b"v1"))
    assert other is not first and other.job_id == "job_2", "keyed by job id: the schedule is seeded by it"


def test_the_least_recently_used_goes_first_when_full() -> None:
    cache = DefinitionCache(max_entries=2)
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
    cache = DefinitionCache(max_payload_bytes=10)
    cache.get("a", 1, spec(b"123456"))
    cache.get("b", 1, spec(b"123456"))
    assert (len(cache), cache.payload_bytes) == (1, 6), "a went to make room for b"
    big = cache.get("c", 1, spec(b"x" * 11))
    assert big.payload == b"x" * 11, "parsed all the same"
    assert (len(cache), cache.payload_bytes) == (1, 6)


def test_many_jobs_stay_within_the_bound() -> None:
    cache = DefinitionCache(max_entries=50)
    for n in range(500):
        cache.get(f"job_{n}", 1, spec())
    assert len(cache) == 50


@pytest.mark.parametrize("bounds", [dict(max_entries=0), dict(max_payload_bytes=-1)])
def test_bounds_are_checked(bounds) -> None:
    with pytest.raises(ValueError):
        DefinitionCache(**bounds)


_PREVIOUS = job_pb2.JobCalendar(name="holidays", rule=job_pb2.CALENDAR_RULE_PREVIOUS)


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (job_pb2.Job(name="plain", payload=b"{}"), ("", False)),
        (job_pb2.Job(name="skip", calendar=job_pb2.JobCalendar(name="holidays")), ("holidays", False)),
        (job_pb2.Job(name="previous", calendar=_PREVIOUS), ("holidays", True)),
        (job_pb2.Job(name="empty", calendar=job_pb2.JobCalendar()), ("", False)),
        # The tag's byte inside another field is not the field.
        (job_pb2.Job(name="binary", payload=b"\xfa\x01\x05\n\x01c\x10\x03"), ("", False)),
        (job_pb2.Job(name="both", payload=b"\xfa\xfa", calendar=_PREVIOUS), ("holidays", True)),
    ],
)
def test_calendar_ref_reads_the_definitions_calendar(job: job_pb2.Job, expected: tuple[str, bool]) -> None:
    assert calendar_ref(job.SerializeToString()) == expected


def test_calendar_ref_of_bytes_that_do_not_parse_is_none() -> None:
    assert calendar_ref(b"\xfa\x01\xff") == ("", False)


def _schedule_the_classmethods_way(job: job_pb2.Job, job_id: str):
    """What ``schedule_of`` built through the Schedule classmethods and
    protobuf's own conversions, before it read each field once."""
    from datetime import timezone

    from tickwheel_server.jobspec import _GAP, _REPEAT
    from tickwheel_server.schedule import Schedule, parse_local_time

    def at(message, name):
        return getattr(message, name).ToDatetime(tzinfo=timezone.utc) if message.HasField(name) else None

    common = dict(
        gap=_GAP[job.dst_policy.gap], repeat=_REPEAT[job.dst_policy.repeat], exact=job.jitter.exact,
        jitter_window=job.jitter.window.ToTimedelta() if job.jitter.HasField("window") else None,
        start_at=at(job, "start_at"), end_at=at(job, "end_at"), max_runs=job.max_runs, job_id=job_id,
    )
    kind = job.schedule.WhichOneof("kind")
    if kind == "cron":
        return Schedule.cron(job.schedule.cron.expression, job.schedule.cron.time_zone or "UTC", **common)
    if kind == "once_at":
        return Schedule.once(at(job.schedule, "once_at"), **common)
    return Schedule.local(parse_local_time(job.schedule.local.local_time), job.schedule.local.time_zone, **common)


def _job(**fields) -> job_pb2.Job:
    job = job_pb2.Job(name="j", **fields)
    job.target.handler.name = "h"
    return job


@pytest.mark.parametrize("job", [
    _job(schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="*/5 * * * *"))),
    _job(schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 9 * * 1-5", time_zone="Europe/Paris")),
         jitter=job_pb2.Jitter(exact=True), max_runs=3,
         dst_policy=job_pb2.DstPolicy(gap=job_pb2.DST_GAP_POLICY_SKIP, repeat=job_pb2.DST_REPEAT_POLICY_BOTH)),
    _job(schedule=job_pb2.Schedule(once_at=dict(seconds=1_900_000_000, nanos=123_456_789))),
    _job(schedule=job_pb2.Schedule(once_at=dict(seconds=1_900_000_000, nanos=999_999_999)),
         start_at=dict(seconds=1_800_000_000, nanos=1), end_at=dict(seconds=1_950_000_000, nanos=999)),
    _job(schedule=job_pb2.Schedule(local=job_pb2.LocalTimeSchedule(local_time="2031-03-30T02:30:00",
                                                               time_zone="Europe/Paris")),
         jitter=job_pb2.Jitter(window=dict(seconds=59, nanos=999_999_999))),
])
def test_a_schedule_reads_as_the_classmethods_and_protobufs_conversions_read_it(job: job_pb2.Job) -> None:
    from tickwheel_server.jobspec import schedule_of

    assert schedule_of(job, "job_1") == _schedule_the_classmethods_way(job, "job_1")


def test_a_schedules_violations_are_listed_in_the_fields_order() -> None:
    from tickwheel_server.errors import InvalidArgument
    from tickwheel_server.jobspec import schedule_of

    job = _job(schedule=job_pb2.Schedule(once_at=dict(seconds=-5)), jitter=job_pb2.Jitter(window=dict(seconds=7200)),
               start_at=dict(seconds=2_000_000_000), end_at=dict(seconds=1_000_000_000, nanos=-1),
               dst_policy=job_pb2.DstPolicy(gap=99, repeat=98), max_runs=-1)
    with pytest.raises(InvalidArgument) as raised:
        schedule_of(job, "job_1", field="jobs[0]")
    assert [violation.field for violation in raised.value.violations] == [
        "jobs[0].end_at", "jobs[0].dst_policy.gap", "jobs[0].dst_policy.repeat", "jobs[0].jitter.window",
        "jobs[0].max_runs", "jobs[0].schedule.once_at",
    ]


@pytest.mark.parametrize("seconds,nanos", [
    (0, 0), (300, 0), (1, 999_999_999), (-1, -999_999_999), (0, -1_500), (0, 1_500), (-5, -1), (315_576_000_000, 0),
])
def test_a_duration_reads_as_protobufs_conversions_read_it(seconds: int, nanos: int) -> None:
    from google.protobuf import duration_pb2

    from tickwheel_server.jobspec import _duration, _duration_us

    duration = duration_pb2.Duration(seconds=seconds, nanos=nanos)
    assert _duration_us(duration) == duration.ToMicroseconds()
    assert _duration(duration) == duration.ToTimedelta()
    parsed = JobDefinition.parse("job_1", 1, spec(timeout=duration))
    assert parsed.timeout_us == duration.ToMicroseconds()


@pytest.mark.parametrize("seconds,nanos,problem", [
    (0, 0, None),
    (253_370_764_799, 999_999_999, None),  # the last instant before 9999-01-01
    (253_370_764_800, 0, "must be between 1970-01-01T00:00:00Z and 9999-01-01T00:00:00Z (exclusive)"),
    (-1, 999_999_999, "must be between 1970-01-01T00:00:00Z and 9999-01-01T00:00:00Z (exclusive)"),
    (0, -1, "not a valid Timestamp: nanos must be between 0 and 999999999"),
    (5, 1_000_000_000, "not a valid Timestamp: nanos must be between 0 and 999999999"),
    (253_402_300_800, 0, "not a valid Timestamp: must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"),
    (-62_135_596_801, 0, "not a valid Timestamp: must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"),
])
def test_an_instant_at_and_past_the_bounds_reads_as_protobufs_conversion_or_is_refused(
    seconds: int, nanos: int, problem: str | None,
) -> None:
    from datetime import timezone

    from tickwheel_server.errors import InvalidArgument
    from tickwheel_server.jobspec import schedule_of

    job = _job(schedule=job_pb2.Schedule(once_at=dict(seconds=seconds, nanos=nanos)))
    if problem is None:
        assert schedule_of(job, "job_1").at == job.schedule.once_at.ToDatetime(tzinfo=timezone.utc)
        return
    with pytest.raises(InvalidArgument) as raised:
        schedule_of(job, "job_1")
    assert [(v.field, v.description) for v in raised.value.violations] == [("job.schedule.once_at", problem)]
    assert JobDefinition.parse("job_1", 1, job.SerializeToString()).problem == str(raised.value)



def test_parse_after_a_miss_keeps_it_within_the_bounds_and_replaces_another_version() -> None:
    """``parse`` (what the claim calls for a job :meth:`cached` just missed)
    keeps the definition as ``get`` would, under the same bounds, and an
    entry of another version is replaced, never served."""
    cache = DefinitionCache(max_entries=2, max_payload_bytes=10)
    assert cache.cached("a", 1) is None
    a = cache.parse("a", 1, spec(b"1234"))
    assert cache.cached("a", 1) is a and (cache.misses, cache.hits) == (1, 1)
    newer = cache.parse("a", 2, spec(b"12"))
    assert cache.cached("a", 1) is None and cache.cached("a", 2) is newer
    assert (len(cache), cache.payload_bytes) == (1, 2)
    cache.parse("b", 1, spec(b"12345678"))
    assert (len(cache), cache.payload_bytes) == (2, 10)
    cache.parse("c", 1, spec(b"1"))
    assert cache.cached("a", 2) is None and len(cache) == 2 and cache.payload_bytes <= 10, "the oldest went"
    big = cache.parse("d", 1, spec(b"x" * 11))
    assert big.payload == b"x" * 11 and cache.cached("d", 1) is None, "parsed, not kept: over the bytes' bound"
    broken = cache.parse("e", 1, b"\xff\xff\xff")
    assert broken.problem is not None and broken.unparsed is not None
