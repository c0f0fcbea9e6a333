"""Definitions read once per shape (``DefinitionShapes``): a job whose
definition differs from one already read only in name, payload, labels and
schedule gets the same :class:`JobDefinition` a full parse gives, every
attribute and every default, including what its own schedule makes wrong."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from tickwheel.v1 import job_pb2

from tickwheel_server.jobspec import DefinitionCache, DefinitionShapes, JobDefinition

_ATTRIBUTES = tuple(name for name in JobDefinition.__slots__ if not name.startswith("_")) + (
    "retry", "retry_problem", "breaker_host", "lateness_threshold", "target_delimited",
)


def _read(definition: JobDefinition) -> dict[str, object]:
    """Everything a reader can read of ``definition``."""
    seen: dict[str, object] = {name: getattr(definition, name) for name in _ATTRIBUTES}
    seen["retry_or_problem"] = definition.retry_or_problem()
    try:
        seen["host"] = definition.host()
    except Exception as error:  # noqa: BLE001 - what it raises is part of the answer
        seen["host"] = (type(error), str(error))
    return seen


def _at(year: int, seconds: int = 0, nanos: int = 0) -> dict:
    stamp = datetime(year, 1, 1, tzinfo=timezone.utc)
    return {"seconds": int(stamp.timestamp()) + seconds, "nanos": nanos}


SCHEDULES = {
    "once": job_pb2.Schedule(once_at=_at(2026, 7, 500_000)),
    "once at the epoch": job_pb2.Schedule(once_at=_at(1970)),
    "once out of range": job_pb2.Schedule(once_at=_at(9999)),
    "once with bad nanos": job_pb2.Schedule(once_at={"seconds": 10, "nanos": -1}),
    "cron": job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="*/5 * * * *", time_zone="Europe/Paris")),
    "cron without zone": job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 3 * * *")),
    "cron empty": job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="  ")),
    "cron not printable": job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="* * * * *\x01")),
    "cron zone too long": job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="* * * * *", time_zone="Z" * 65)),
    "local": job_pb2.Schedule(local=job_pb2.LocalTimeSchedule(local_time="2027-03-28T02:30:00", time_zone="Europe/Berlin")),
    "local bad time": job_pb2.Schedule(local=job_pb2.LocalTimeSchedule(local_time="tomorrow", time_zone="UTC")),
    "local without zone": job_pb2.Schedule(local=job_pb2.LocalTimeSchedule(local_time="2027-01-01T00:00:00")),
    "none": None,
}


def _shape(name: str) -> job_pb2.Job:
    """A definition without name, payload, labels and schedule."""
    job = job_pb2.Job()
    job.target.handler.name = "echo"
    if name == "plain":
        return job
    if name == "normalised":  # as the API stores a one-off (bench_e2e's)
        job.dst_policy.gap, job.dst_policy.repeat = job_pb2.DST_GAP_POLICY_AUTO, job_pb2.DST_REPEAT_POLICY_AUTO
        job.timeout.FromTimedelta(timedelta(minutes=5))
        job.retry_policy.max_attempts = 5
        job.retry_policy.initial_backoff.FromTimedelta(timedelta(seconds=1))
        job.retry_policy.max_backoff.FromTimedelta(timedelta(hours=1))
        job.overlap_policy = job_pb2.OVERLAP_POLICY_SKIP
        job.misfire_policy = job_pb2.MISFIRE_POLICY_RUN_ONCE
        job.misfire_threshold.FromTimedelta(timedelta(seconds=60))
        job.misfire_run_all_limit = 100
        job.lateness_threshold.FromTimedelta(timedelta(minutes=5))
        return job
    if name == "everything set":
        job.target.http.url = "https://Hooks.Example.com:8443/run"
        job.timeout.FromTimedelta(timedelta(seconds=42, microseconds=7))
        job.retry_policy.max_attempts = 2
        job.retry_policy.initial_backoff.FromTimedelta(timedelta(seconds=3))
        job.overlap_policy = job_pb2.OVERLAP_POLICY_ALLOW
        job.misfire_policy = job_pb2.MISFIRE_POLICY_RUN_ALL
        job.misfire_threshold.FromTimedelta(timedelta(seconds=90))
        job.misfire_run_all_limit = 7
        job.lateness_threshold.FromTimedelta(timedelta(seconds=11))
        job.concurrency_keys.add(key="db", limit=3)
        job.concurrency_keys.add(key="api", limit=0)
        job.jitter.window.FromTimedelta(timedelta(seconds=30))
        job.dst_policy.gap, job.dst_policy.repeat = job_pb2.DST_GAP_POLICY_SKIP, job_pb2.DST_REPEAT_POLICY_BOTH
        job.start_at.FromDatetime(datetime(2026, 1, 1))
        job.end_at.FromDatetime(datetime(2030, 1, 1))
        job.max_runs = 12
        return job
    if name == "exact, misfire skip":
        job.jitter.exact = True
        job.misfire_policy = job_pb2.MISFIRE_POLICY_SKIP
        job.dst_policy.gap = job_pb2.DST_GAP_POLICY_SHIFT
        return job
    if name == "calendar previous":
        job.calendar.name, job.calendar.rule = "uk-banks", job_pb2.CALENDAR_RULE_PREVIOUS
        return job
    if name == "retry out of range":  # the claim reads it; the outcome of a failure cannot
        job.retry_policy.max_backoff.seconds = 10**12
        return job
    if name == "lateness out of range":
        job.lateness_threshold.seconds = 10**12
        return job
    # Shapes the claim cannot read whatever the schedule: read in full each time.
    if name == "negative threshold":
        job.misfire_threshold.seconds = -1
    elif name == "unknown misfire policy":
        job.misfire_policy = 99
    elif name == "no target":
        job.ClearField("target")
    elif name == "calendar misnamed":
        job.calendar.name, job.calendar.rule = "-x", job_pb2.CALENDAR_RULE_ONLY
    elif name == "jitter too wide":
        job.jitter.window.FromTimedelta(timedelta(hours=2))
    elif name == "ends before it starts":
        job.start_at.FromDatetime(datetime(2030, 1, 1))
        job.end_at.FromDatetime(datetime(2026, 1, 1))
    elif name == "unknown gap policy":
        job.dst_policy.gap = 42
    elif name == "run-all limit too high":
        job.misfire_run_all_limit = 10_001
    else:
        raise AssertionError(name)
    return job


CLEAN = ("plain", "normalised", "everything set", "exact, misfire skip", "calendar previous", "retry out of range",
         "lateness out of range")
UNCLEAN = ("negative threshold", "unknown misfire policy", "no target", "calendar misnamed", "jitter too wide",
           "ends before it starts", "unknown gap policy", "run-all limit too high")


def _spec(shape: str, schedule: str, name: str, payload: bytes, labels: dict[str, str] | None = None) -> bytes:
    job = _shape(shape)
    job.name, job.payload = name, payload
    if SCHEDULES[schedule] is not None:
        job.schedule.CopyFrom(SCHEDULES[schedule])
    job.labels.update(labels or {})
    return job.SerializeToString()


@pytest.mark.parametrize("shape", CLEAN + UNCLEAN)
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_a_job_of_a_shape_already_read_reads_as_a_full_parse(shape: str, schedule: str) -> None:
    shapes = DefinitionShapes()
    # Its shape is read first, from another job of it (another name, payload, labels and schedule).
    sibling = _spec(shape, "once", "first", b"p" * 300, {"team": "a"})
    assert _read(shapes.parse("job_0", 1, sibling)) == _read(JobDefinition.parse("job_0", 1, sibling))
    spec = _spec(shape, schedule, "second", b"{}", {"team": "b", "tier": "1"})
    shaped, full = shapes.parse("job_1", 4, spec), JobDefinition.parse("job_1", 4, spec)
    assert _read(shaped) == _read(full)
    assert len(shapes) == 1, "the second job's shape is the first one's"
    if shape in CLEAN:
        assert shaped.target is shapes.parse("job_2", 1, sibling).target, "read once for the shape"


def test_the_shortcut_is_taken_for_clean_shapes_only() -> None:
    shapes = DefinitionShapes()
    first, second = _spec("normalised", "once", "a", b"1"), _spec("normalised", "cron", "b", b"2")
    one, two = shapes.parse("job_a", 1, first), shapes.parse("job_b", 1, second)
    assert one._job is two._job and one.target_delimited is two.target_delimited
    assert (one.payload, two.payload) == (b"1", b"2")
    assert (one.schedule.job_id, two.schedule.job_id) == ("job_a", "job_b")
    bad_one, bad_two = (shapes.parse(f"job_{n}", 1, _spec("negative threshold", "once", n, b"")) for n in "cd")
    assert bad_one._job is not bad_two._job, "a shape with a problem is read in full each time"


def test_bytes_that_do_not_parse_and_empty_definitions_read_as_a_full_parse() -> None:
    shapes = DefinitionShapes()
    for spec in (b"\xff\xff", b"", None):
        assert _read(shapes.parse("job_1", 2, spec)) == _read(JobDefinition.parse("job_1", 2, spec))
    assert len(shapes) == 0


def test_shapes_are_bounded() -> None:
    shapes = DefinitionShapes(max_shapes=2, max_key_bytes=64)
    for limit in (1, 2, 3):
        job = _shape("plain")
        job.misfire_run_all_limit = limit
        shapes.parse("job", 1, job.SerializeToString())
    assert len(shapes) == 1, "a full table is emptied, then refills"
    long = _shape("plain")
    long.target.handler.name = "h" * 100
    definition = shapes.parse("job", 1, long.SerializeToString())
    assert definition.handler == "h" * 100 and len(shapes) == 1, "a shape over the key bound is not kept"
    with pytest.raises(ValueError):
        DefinitionShapes(max_shapes=0)


def test_the_definition_cache_reads_through_shapes() -> None:
    cache = DefinitionCache()
    specs = [_spec("normalised", "once", f"job {n}", str(n).encode()) for n in range(3)]
    parsed = [cache.parse(f"job_{n}", 1, spec) for n, spec in enumerate(specs)]
    assert [_read(p) for p in parsed] == [_read(JobDefinition.parse(f"job_{n}", 1, s)) for n, s in enumerate(specs)]
    assert parsed[0]._job is parsed[2]._job


class _CountingJob:
    """``job_pb2.Job`` whose ``FromString`` counts the definitions parsed whole."""

    parsed: list[bytes] = []

    @classmethod
    def FromString(cls, data: bytes) -> job_pb2.Job:  # noqa: N802 - protobuf's name
        cls.parsed.append(bytes(data))
        return job_pb2.Job.FromString(data)


@pytest.fixture
def counted(monkeypatch) -> list[bytes]:
    from types import SimpleNamespace

    from tickwheel_server import jobspec

    _CountingJob.parsed = []
    monkeypatch.setattr(jobspec, "job_pb2", SimpleNamespace(Job=_CountingJob, Schedule=job_pb2.Schedule))
    return _CountingJob.parsed


@pytest.mark.parametrize("shape", CLEAN)
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_a_job_whose_tail_was_seen_reads_as_a_full_parse_without_parsing_it(shape, schedule, counted) -> None:
    shapes = DefinitionShapes()
    labels = {"team": "a"}
    sibling = _spec(shape, "once", "first", b"p" * 300, labels)
    assert _read(shapes.parse("job_0", 1, sibling)) == _read(JobDefinition.parse("job_0", 1, sibling))
    spec = _spec(shape, schedule, "another name", b"p" * 300, labels)  # the same tail: payload, labels, the rest
    counted.clear()
    shaped = shapes.parse("job_1", 4, spec)
    if schedule == "none":  # no schedule field: no opening, read as before
        assert spec in counted
    else:
        assert spec not in counted, "read through its tail: only its schedule parsed"
    assert _read(shaped) == _read(JobDefinition.parse("job_1", 4, spec))
    assert shaped.payload == b"p" * 300 and shaped.schedule is None or shaped.schedule.job_id == "job_1"


def test_a_definition_that_opens_otherwise_is_read_as_before(counted) -> None:
    shapes = DefinitionShapes()
    long_name = _spec("normalised", "once", "n" * 200, b"{}")  # a length of two bytes
    no_schedule = _spec("normalised", "none", "a", b"{}")
    for spec in (long_name, long_name, no_schedule, no_schedule):
        counted.clear()
        shaped = shapes.parse("job_1", 1, spec)
        assert counted[0] == spec, "parsed whole"
        assert _read(shaped) == _read(JobDefinition.parse("job_1", 1, spec))


def test_a_tail_with_a_schedule_of_its_own_is_never_kept(counted) -> None:
    shapes = DefinitionShapes()
    # Not as the API writes it: a second schedule field after the rest, which a parse merges into the first.
    late = job_pb2.Job(schedule=SCHEDULES["cron"]).SerializeToString()
    first = _spec("normalised", "once", "a", b"{}") + late
    second = _spec("normalised", "local", "b", b"{}") + late
    for job_id, spec in (("job_1", first), ("job_2", second), ("job_2", second)):
        counted.clear()
        shaped = shapes.parse(job_id, 1, spec)
        assert counted[0] == spec, "parsed whole each time"
        full = JobDefinition.parse(job_id, 1, spec)
        assert _read(shaped) == _read(full) and full.schedule.kind.value == "cron"
    assert not shapes._tails


def test_tails_are_bounded() -> None:
    shapes = DefinitionShapes(max_shapes=2, max_key_bytes=200)
    for n in range(3):
        shapes.parse("job", 1, _spec("plain", "once", "a", str(n).encode()))
    assert len(shapes._tails) == 1, "a full table is emptied, then refills"
    shapes.parse("job", 1, _spec("plain", "once", "a", b"x" * 300))
    assert len(shapes._tails) == 1, "a tail over the key bound is not kept"


def test_tails_that_keep_missing_are_left_alone_for_a_while_and_answers_stay_full_parses(counted) -> None:
    shapes = DefinitionShapes(max_shapes=4, tails_off_for=6)
    specs = [_spec("normalised", "once", "a", str(n).encode()) for n in range(16)]  # a payload each: every tail new
    for n, spec in enumerate(specs[:5]):
        assert _read(shapes.parse(f"job_{n}", 1, spec)) == _read(JobDefinition.parse(f"job_{n}", 1, spec))
    assert len(shapes._tails) == 1, "four kept and none read: emptied, and tails left alone"
    for n, spec in enumerate(specs[5:10], 5):  # the five definitions after the one that emptied them
        assert _read(shapes.parse(f"job_{n}", 1, spec)) == _read(JobDefinition.parse(f"job_{n}", 1, spec))
    assert len(shapes._tails) == 1, "none kept meanwhile"
    shapes.parse("job_10", 1, specs[10])
    counted.clear()
    shapes.parse("job_10", 1, specs[10])
    assert specs[10] not in counted, "kept and read again once the while is over"
