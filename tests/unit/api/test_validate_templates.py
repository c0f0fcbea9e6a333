"""new_job's validated templates: a job validated from a template gets what
validating it in full gives (definition, schedule, first fire, or the same
violations), whatever its name, labels and payload, the zone, the instant
of the call, the job id (H, jitter) and the server's target policy; the
cache stays bounded."""

from __future__ import annotations

import asyncio
import ipaddress
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from google.protobuf import duration_pb2, timestamp_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import to_us
from tickwheel.shared.targets import DEFAULT_POLICY, TargetPolicy
from tickwheel_server.api import scheduler, validate
from tickwheel_server.errors import InvalidArgument
from tickwheel_server.jobspec import key_limits
from tickwheel_server.schedule import Fire, Schedule, first_fire

# 2027-03-28 01:00 UTC Europe/Berlin springs forward; 2027-03-14 America/New_York does.
BEFORE_BERLIN_GAP = datetime(2027, 3, 27, 12, 0, tzinfo=timezone.utc)
AFTER_BERLIN_GAP = datetime(2027, 3, 28, 12, 0, tzinfo=timezone.utc)
NOW = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def empty_cache():
    validate._TEMPLATES.clear()
    yield
    validate._TEMPLATES.clear()


def cron(expression: str, zone: str = "UTC", name: str = "report", **fields) -> job_pb2.Job:
    job = job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone=zone)),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="report")),
    )
    job.MergeFrom(job_pb2.Job(**fields))
    return job


def in_full(job: job_pb2.Job, now: datetime, job_id: str, policy: TargetPolicy = DEFAULT_POLICY):
    """What validating ``job`` without any template gives: its answer or its violations."""
    try:
        return validate._normalise(job, now, "job", policy, job_id)
    except InvalidArgument as error:
        return error.violations


def cached(job: job_pb2.Job, now: datetime, job_id: str, policy: TargetPolicy = DEFAULT_POLICY):
    try:
        return validate.new_job(job, now, job_id, target_policy=policy)
    except InvalidArgument as error:
        return error.violations


def test_a_second_job_of_the_same_shape_comes_from_the_template() -> None:
    first = cached(cron("0 3 * * *", name="a", payload=b"1"), NOW, "job_A")
    second = cached(cron("0 3 * * *", name="b", payload=b"22"), NOW, "job_B")
    assert len(validate._TEMPLATES) == 1
    assert second == in_full(cron("0 3 * * *", name="b", payload=b"22"), NOW, "job_B")
    assert first[2].nominal_at == second[2].nominal_at
    assert first[2].due_at != second[2].due_at  # each job's own jitter


def test_one_cron_in_two_zones_in_one_batch_fires_at_each_zones_instant() -> None:
    berlin = cached(cron("0 9 * * *", "Europe/Berlin"), NOW, "job_A")
    new_york = cached(cron("0 9 * * *", "America/New_York"), NOW, "job_B")
    berlin_again = cached(cron("0 9 * * *", "Europe/Berlin", name="again"), NOW, "job_C")
    assert berlin[2].nominal_at == datetime(2027, 3, 2, 8, 0, tzinfo=timezone.utc)
    assert new_york[2].nominal_at == datetime(2027, 3, 1, 14, 0, tzinfo=timezone.utc)
    assert berlin_again == in_full(cron("0 9 * * *", "Europe/Berlin", name="again"), NOW, "job_C")


def test_one_cron_across_calls_either_side_of_each_zones_dst_change() -> None:
    # The same shapes asked again later: the first fire is recomputed for the new instant.
    utc = timezone.utc
    expected = {
        # Berlin's 02:30 on 2027-03-28 does not exist: it fires at the gap's end (03:00 CEST).
        ("Europe/Berlin", BEFORE_BERLIN_GAP): (datetime(2027, 3, 28, 1, 0, tzinfo=utc), 7200, True),
        ("Europe/Berlin", AFTER_BERLIN_GAP): (datetime(2027, 3, 29, 0, 30, tzinfo=utc), 7200, False),
        ("America/New_York", BEFORE_BERLIN_GAP): (datetime(2027, 3, 28, 6, 30, tzinfo=utc), -14400, False),
        ("America/New_York", AFTER_BERLIN_GAP): (datetime(2027, 3, 29, 6, 30, tzinfo=utc), -14400, False),
    }
    for call in (1, 2):
        for (zone, now), (nominal, offset, noted) in expected.items():
            job = cron("30 2 * * *", zone, name=f"call{call}")
            answer = cached(job, now, f"job_{call}")
            assert answer == in_full(job, now, f"job_{call}")
            assert (answer[2].nominal_at, answer[2].utc_offset, bool(answer[2].note)) == (nominal, offset, noted)
    assert len(validate._TEMPLATES) == 2


def test_a_later_call_past_the_end_is_refused_though_an_earlier_one_was_not() -> None:
    end = timestamp_pb2.Timestamp()
    end.FromDatetime(datetime(2027, 3, 3, tzinfo=timezone.utc))
    job = cron("0 3 * * *", end_at=end)
    assert isinstance(cached(job, NOW, "job_A"), tuple)
    later = NOW + timedelta(days=2)
    assert cached(job, later, "job_B") == in_full(job, later, "job_B")
    assert [v.field for v in cached(job, later, "job_B")] == ["job.schedule"]
    assert isinstance(cached(job, NOW, "job_C"), tuple)  # and back: the memo follows the instant asked


def test_h_fires_are_each_jobs_own() -> None:
    answers = [cached(cron("H H * * *", name=f"j{i}"), NOW, f"job_{i}") for i in range(20)]
    assert len(validate._TEMPLATES) == 1
    assert len({answer[2].nominal_at for answer in answers}) > 1
    for i, answer in enumerate(answers):
        assert answer == in_full(cron("H H * * *", name=f"j{i}"), NOW, f"job_{i}")


def test_h_that_never_fires_for_one_job_is_refused_for_that_job_only() -> None:
    # H(28-31) in February: days 28 and (in leap years) 29 exist, 30 and 31 never do.
    shape = "0 0 H(28-31) 2 *"
    answers = {f"job_{i}": cached(cron(shape, name=f"j{i}"), NOW, f"job_{i}") for i in range(40)}
    refused = [job_id for job_id, answer in answers.items() if isinstance(answer, list)]
    assert refused and len(refused) < len(answers)
    for i, (job_id, answer) in enumerate(answers.items()):
        assert answer == in_full(cron(shape, name=f"j{i}"), NOW, job_id)


def test_a_template_of_one_target_policy_does_not_answer_for_another() -> None:
    private = job_pb2.Job(
        name="hook",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 3 * * *")),
        target=job_pb2.Target(http=job_pb2.HttpTarget(url="http://10.1.2.3/hook")),
    )
    allowing = TargetPolicy(allowed=(ipaddress.ip_network("10.0.0.0/8"),))
    assert isinstance(cached(private, NOW, "job_A", allowing), tuple)
    refused = cached(private, NOW, "job_B", DEFAULT_POLICY)
    assert [v.field for v in refused] == ["job.target.http.url"]
    assert isinstance(cached(private, NOW, "job_C", TargetPolicy(allowed=(ipaddress.ip_network("10.0.0.0/8"),))), tuple)


@pytest.mark.parametrize(("values", "valid"), [
    ([], True),
    (["r"], True),
    (["r-1", "r.2", "r:3", "R_4", "x" * 128], True),
    (["r", ""], False),
    (["r", "x" * 129], False),
    (["r", "bad id"], False),
    (["r\n1"], False),  # one id holding the separator: two valid-looking lines
    (["r", "r\n"], False),
    (["\n"], False),
    (["r\x00"], False),
    (["é"], False),
])  # fmt: skip
def test_a_batchs_request_ids_are_valid_together_only_when_each_is(values: list[str], valid: bool) -> None:
    assert validate.request_ids_valid(values) is valid
    each = True
    for value in values:
        try:
            validate.check_request_id(value)
        except InvalidArgument:
            each = False
    assert each is valid


def test_one_shape_with_its_headers_in_another_order_answers_as_in_full() -> None:
    """The shape's key is the job serialized as it comes (not
    deterministically): a map in another order may make a template of its
    own, never another shape's answer."""
    def job(headers: list[tuple[str, str]], name: str) -> job_pb2.Job:
        made = job_pb2.Job(
            name=name,
            schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 3 * * *", time_zone="UTC")),
            target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/hook", method="POST")),
        )
        for key, value in headers:
            made.target.http.headers[key] = value
        return made

    pairs = [(f"X-H{i}", f"v{i}") for i in range(6)]
    for k, headers in enumerate([pairs, pairs[::-1], pairs[2:] + pairs[:2], pairs[:3] + [("X-H9", "w")]]):
        assert cached(job(headers, f"n{k}"), NOW, f"job_{k}") == in_full(job(headers, f"n{k}"), NOW, f"job_{k}")


@pytest.mark.parametrize("name", ["", "x" * 201, "bad\x00name", "rtl\u202eoverride"])
def test_a_bad_name_is_refused_from_the_template_as_in_full(name: str) -> None:
    assert isinstance(cached(cron("0 3 * * *", name="good"), NOW, "job_A"), tuple)
    answer = cached(cron("0 3 * * *", name=name), NOW, "job_B")
    assert answer == in_full(cron("0 3 * * *", name=name), NOW, "job_B")
    assert [v.field for v in answer] == ["job.name"]


def test_output_only_fields_are_cleared_whatever_the_template() -> None:
    assert isinstance(cached(cron("0 3 * * *"), NOW, "job_A"), tuple)
    job = cron("0 3 * * *", name="other", id="job_forged", tenant="someone-else", run_count=7, version=9)
    answer = cached(job, NOW, "job_B")
    assert answer == in_full(job, NOW, "job_B")
    assert not answer[0].id and not answer[0].tenant and answer[0].run_count == 0


def test_the_cache_is_bounded_and_skips_large_definitions() -> None:
    for i in range(validate.MAX_TEMPLATES + 10):
        assert isinstance(cached(cron(f"{i % 60} {i // 60 % 24} * * *"), NOW, f"job_{i}"), tuple)
        assert len(validate._TEMPLATES) <= validate.MAX_TEMPLATES
    validate._TEMPLATES.clear()
    large = cron("0 3 * * *")
    large.target.CopyFrom(job_pb2.Target(http=job_pb2.HttpTarget(
        url="https://example.com/hook", headers={f"X-H{i}": "v" * 400 for i in range(12)})))  # fmt: skip
    assert isinstance(cached(large, NOW, "job_L"), tuple)
    assert len(validate._TEMPLATES) == 0


def test_labels_are_each_jobs_own_and_checked_each_time() -> None:
    first = cached(cron("0 3 * * *", labels={"team": "ops", "n": "1"}), NOW, "job_A")
    second = cached(cron("0 3 * * *", labels={"n": "2"}), NOW, "job_B")
    bare = cached(cron("0 3 * * *"), NOW, "job_C")
    bad = cron("0 3 * * *", labels={"Bad Key": "x", "ok": "line\nbreak", **{f"k{i}": "v" for i in range(20)}})
    crowded = cron("0 3 * * *", labels={"Bad Key": "x", **{f"k{i}": "v" for i in range(40)}})
    assert len(validate._TEMPLATES) == 1
    assert dict(first[0].labels) == {"team": "ops", "n": "1"} and dict(second[0].labels) == {"n": "2"}
    assert not bare[0].labels
    assert cached(bad, NOW, "job_D") == in_full(bad, NOW, "job_D")
    assert {v.field for v in cached(bad, NOW, "job_D")} == {"job.labels[Bad Key]", "job.labels[ok]"}
    # Past the bound the count alone is refused, before an entry is read (validate.check_counts).
    assert cached(crowded, NOW, "job_E") == in_full(crowded, NOW, "job_E")
    assert [v.field for v in cached(crowded, NOW, "job_E")] == ["job.labels"]


_ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "Nope/Zone"])
_EXPRESSIONS = st.sampled_from(["0 3 * * *", "*/15 * * * *", "30 2 * * *", "H H * * *", "0 0 H(28-31) 2 *",
                                "0 0 30 2 *", "bad", "H/20 2 * * 0"])  # fmt: skip


@st.composite
def jobs(draw) -> job_pb2.Job:
    job = cron(draw(_EXPRESSIONS), draw(_ZONES), name=draw(st.sampled_from(["a", "b", "", "x\x00"])),
               payload=draw(st.binary(max_size=8)))  # fmt: skip
    if draw(st.booleans()):
        job.jitter.CopyFrom(job_pb2.Jitter(window=duration_pb2.Duration(seconds=draw(st.integers(-5, 4000)))))
    job.jitter.exact = draw(st.booleans())
    job.dst_policy.gap = draw(st.sampled_from([0, 1, 2, 3, 99]))
    job.dst_policy.repeat = draw(st.sampled_from([0, 1, 2, 3]))
    if draw(st.booleans()):
        job.end_at.FromDatetime(draw(st.sampled_from([NOW + timedelta(days=1), NOW + timedelta(days=40)])))
    if draw(st.booleans()):
        job.start_at.FromDatetime(NOW + timedelta(days=draw(st.integers(0, 30))))
    job.max_runs = draw(st.integers(-1, 3))
    job.labels.update(draw(st.dictionaries(st.sampled_from(["a", "b", "Bad", "x" * 64]),
                                           st.sampled_from(["", "v", "\x00", "w" * 257]), max_size=3)))  # fmt: skip
    return job


_FIRES = [datetime(2027, 3, 2, 3, 0, tzinfo=timezone.utc), datetime(2027, 3, 28, 1, 0, tzinfo=timezone.utc),
          datetime(2027, 3, 28, 6, 30, tzinfo=timezone.utc)]  # fmt: skip
"""Fires of the expressions above: 03:00 UTC, Berlin's 02:30 shifted by the gap, New York's 02:30."""
_INSTANTS = st.one_of(
    st.sampled_from([NOW, BEFORE_BERLIN_GAP, AFTER_BERLIN_GAP]),
    st.builds(lambda fire, micros: fire + timedelta(microseconds=micros), st.sampled_from(_FIRES),
              st.sampled_from([-1, 0, 1])),  # fmt: skip
    # Near a fire and either side of it: the memo of the last call's first
    # fire answers a later call only while that fire is still ahead.
    st.builds(lambda base, seconds, micros: base + timedelta(seconds=seconds, microseconds=micros),
              st.sampled_from([NOW, BEFORE_BERLIN_GAP]), st.integers(-3600, 2 * 86400),
              st.sampled_from([0, 1, 999_999])),  # fmt: skip
)


@given(st.lists(st.tuples(jobs(), _INSTANTS), min_size=1, max_size=12))
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_templates_answer_as_validating_in_full(calls) -> None:
    """Whatever the shapes and the instants asked, in any order (later,
    earlier, at a fire, a microsecond either side of one)."""
    validate._TEMPLATES.clear()
    for index, (job, now) in enumerate(calls):
        job_id = f"job_{index:04d}"
        assert cached(job, now, job_id) == in_full(job, now, job_id)


@pytest.mark.parametrize(("expression", "zone", "fire"), [
    ("0 3 * * *", "UTC", datetime(2027, 3, 2, 3, 0, tzinfo=timezone.utc)),
    ("30 2 * * *", "Europe/Berlin", datetime(2027, 3, 28, 1, 0, tzinfo=timezone.utc)),  # shifted by the gap
    ("*/15 * * * *", "America/New_York", datetime(2027, 3, 2, 3, 0, tzinfo=timezone.utc)),
])
def test_calls_up_to_a_fire_and_past_it_answer_as_in_full(expression: str, zone: str, fire: datetime) -> None:
    """One shape asked at instants walking up to its first fire, at it,
    past it, and back (a clock stepped back): each answer is what
    validating in full at that instant gives; at the fire itself the
    first fire is the next one (fires are strictly after ``now``)."""
    job = cron(expression, zone)
    micro = timedelta(microseconds=1)
    for index, now in enumerate([fire - timedelta(hours=1), fire - micro, fire, fire + micro, fire - timedelta(hours=2),
                                 fire - micro, fire + timedelta(days=1)]):  # fmt: skip
        answer = cached(job, now, f"job_{index}")
        assert answer == in_full(job, now, f"job_{index}"), now
        assert answer[2].nominal_at > now


def test_the_first_fire_without_jitter_is_the_engines() -> None:
    answer = cached(cron("0 3 * * *", "Europe/Berlin"), NOW, "job_A")
    expected = first_fire(Schedule.cron("0 3 * * *", "Europe/Berlin", job_id="job_A"), NOW)
    assert answer[2] == expected and isinstance(answer[2], Fire)


_TARGETS = st.sampled_from([
    job_pb2.Target(handler=job_pb2.HandlerTarget(name="report")),
    job_pb2.Target(handler=job_pb2.HandlerTarget(name="bad name")),
    job_pb2.Target(),
    job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/hook", method="post", headers={"X-A": "1"})),
    job_pb2.Target(http=job_pb2.HttpTarget(url="http://10.1.2.3/hook", headers={"Host": "x", "x-a": "\n"})),
])
# A newline joins a batch's ids for their one check (validate.request_ids_valid): ids holding one are refused.
_REQUEST_IDS = st.sampled_from(["r", "r-1", "r.2", "r:3", "", "bad id", "x" * 129, "r\x00", "é", "r\n1", "r\n", "\n"])


@st.composite
def shapes(draw) -> job_pb2.Job:
    """A job of :func:`jobs`' kinds with its other fields valid or not
    (target, retry policy, timeout, keys, output-only fields), or, as
    often, a valid one, so that items share validated templates."""
    if draw(st.booleans()):
        job = cron(draw(st.sampled_from(["0 3 * * *", "H H * * *", "*/15 * * * *", "0 0 H(28-31) 2 *"])),
                   draw(st.sampled_from(["UTC", "Europe/Berlin"])))  # fmt: skip
        if draw(st.booleans()):
            job.target.CopyFrom(job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/hook")))
        for key in draw(st.lists(st.sampled_from(["k1", "k2"]), max_size=2, unique=True)):
            job.concurrency_keys.add(key=key, limit=2)
        return job
    job = draw(jobs())
    job.target.CopyFrom(draw(_TARGETS))
    if draw(st.booleans()):
        job.retry_policy.max_attempts = draw(st.sampled_from([0, 3, 101]))
        job.retry_policy.initial_backoff.CopyFrom(duration_pb2.Duration(seconds=draw(st.sampled_from([0, 1, 90000]))))
    if draw(st.booleans()):
        job.timeout.CopyFrom(duration_pb2.Duration(seconds=draw(st.sampled_from([-1, 0, 30, 86400]))))
    for key, limit in draw(st.lists(st.tuples(st.sampled_from(["k", "k", "bad key"]), st.integers(0, 2)), max_size=3)):
        job.concurrency_keys.add(key=key, limit=limit)
    if draw(st.booleans()):
        job.id, job.run_count = "job_forged", 4
    return job


@st.composite
def batch_items(draw) -> list[tuple[job_pb2.Job, str]]:
    """A BatchCreateJobs call's items: a few shapes (:func:`shapes`), each
    item one of them with its own name, payload, labels and request id,
    each valid or not."""
    pool = draw(st.lists(shapes(), min_size=1, max_size=3))
    items = []
    for _ in range(draw(st.integers(1, 12))):
        job = job_pb2.Job()
        job.CopyFrom(draw(st.sampled_from(pool)))
        job.name = draw(st.sampled_from(["a", "b", "c", "é" * 3, "", "x\x00", "y" * 201]))
        job.payload = draw(st.sampled_from([b"", b"1", b"\x00" * 300]))
        job.labels.clear()
        job.labels.update(draw(st.dictionaries(st.sampled_from(["a", "b", "c", "Bad"]),
                                               st.sampled_from(["", "v", "w", "\x00"]), max_size=2)))  # fmt: skip
        items.append((job, draw(_REQUEST_IDS)))
    return items


def _full_answer(job: job_pb2.Job, raw_request_id: str, now: datetime, job_id: str):
    """One item validated alone and in full: its violations, or what the batch's columns must hold for it."""
    try:
        request_id = validate.check_request_id(raw_request_id)
        out, schedule, fire = validate._normalise(job, now, "job", DEFAULT_POLICY, job_id)
    except InvalidArgument as error:
        return error.violations
    return (job_id, request_id, job.name, out, validate.zone_of(schedule), to_us(fire.nominal_at), to_us(fire.due_at),
            len(job.payload), key_limits(out))  # fmt: skip


@given(batch_items(), _INSTANTS)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_batchs_items_answer_each_as_validating_it_alone_in_full(monkeypatch, items, now) -> None:
    """BatchCreateJobs' validation (the servicer's ``_new_jobs``, through
    the shapes) gives every item what validating it alone and in full
    gives: the same violations in the same order with the same messages,
    or the same columns (definition, zone, instants, key limits)."""
    validate._TEMPLATES.clear()
    job_ids = [f"job_{index:04d}" for index in range(len(items))]
    monkeypatch.setattr(scheduler, "new_job_ids", lambda at, count: job_ids[:count])
    servicer = SimpleNamespace(_target_policy=DEFAULT_POLICY)
    sent = [job_pb2.Job.FromString(job.SerializeToString()) for job, _ in items]
    batch, accepted, refused = asyncio.run(
        scheduler.SchedulerServicer._new_jobs(servicer, "acme", [(job, rid, now) for job, rid in items])
    )
    assert [job for job, _ in items] == sent, "the request's jobs are left as they came"
    validate._TEMPLATES.clear()
    full = [_full_answer(job, rid, now, job_id) for (job, rid), job_id in zip(items, job_ids)]
    assert sorted([*accepted, *refused]) == list(range(len(items)))
    for k, index in enumerate(accepted):
        expected = full[index]
        assert not isinstance(expected, list), expected
        got = (batch.ids[k], batch.request_ids[k], batch.names[k], job_pb2.Job.FromString(batch.specs[k]), batch.zones[k],
               batch.next_runs[k], batch.next_dues[k], batch.payload_sizes[k], batch.key_limits[k])  # fmt: skip
        assert got == expected
        assert len(batch.specs[k]) == expected[3].ByteSize()
    for index, error in refused.items():
        assert isinstance(error, InvalidArgument)
        assert error.violations == full[index]
