"""Job and request validation, table-tested: every bad field answers
INVALID_ARGUMENT naming it (never an exception from a conversion), text holds
no control or invisible format character, HTTP headers cannot smuggle or
reroute, and one error lists a bounded number of violations."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import grpc
import pytest
from google.protobuf import duration_pb2, timestamp_pb2
from tickwheel.v1 import job_pb2, scheduler_pb2

from tickwheel_server import fields
from tickwheel_server.api import validate
from tickwheel_server.api.scheduler import upcoming
from tickwheel_server.api.status import status_for
from tickwheel_server.api.text import shown, text_problem
from tickwheel_server.errors import MAX_LISTED_BYTES, MAX_LISTED_VIOLATIONS, InvalidArgument
from tickwheel_server.jobspec import schedule_of
from tickwheel_server.schedule import Schedule

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
FAR = 2**62


def stamp(seconds: int, nanos: int = 0) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


def at(*args: int) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(datetime(*args, tzinfo=timezone.utc))
    return message


def span(seconds: int, nanos: int = 0) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=seconds, nanos=nanos)


def job(**fields) -> job_pb2.Job:
    base = job_pb2.Job(
        name="report",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="*/5 * * * *", time_zone="Europe/London")),
        target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/hook")),
    )
    base.MergeFrom(job_pb2.Job(**fields))
    return base


def once(when: timestamp_pb2.Timestamp) -> job_pb2.Job:
    out = job()
    out.schedule.once_at.CopyFrom(when)
    return out


def http(**headers: str) -> job_pb2.Job:
    out = job()
    out.target.http.headers.update(headers)
    return out


def with_header(name: str, value: str = "v") -> job_pb2.Job:
    out = job()
    out.target.http.headers[name] = value
    return out


def violations_of(message: job_pb2.Job) -> dict[str, str]:
    with pytest.raises(InvalidArgument) as error:
        validate.normalise_job(message, NOW)
    return {v.field: v.description for v in error.value.violations}


INVALID = {
    # 13: protobuf's own ranges, before any conversion.
    "timeout 2^62 s": (job(timeout=span(FAR)), "job.timeout"),
    "timeout with nanos of the other sign": (job(timeout=span(60, -1)), "job.timeout"),
    "timeout nanos out of range": (job(timeout=span(0, 2_000_000_000)), "job.timeout"),
    "initial backoff 2^62 s": (job(retry_policy=job_pb2.RetryPolicy(initial_backoff=span(FAR))), "job.retry_policy.initial_backoff"),
    "max backoff 2^62 s": (job(retry_policy=job_pb2.RetryPolicy(max_backoff=span(FAR))), "job.retry_policy.max_backoff"),
    "max backoff -2^62 s": (job(retry_policy=job_pb2.RetryPolicy(max_backoff=span(-FAR))), "job.retry_policy.max_backoff"),
    "misfire threshold 2^62 s": (job(misfire_threshold=span(FAR)), "job.misfire_threshold"),
    "lateness threshold 2^62 s": (job(lateness_threshold=span(FAR)), "job.lateness_threshold"),
    "jitter window 2^62 s": (job(jitter=job_pb2.Jitter(window=span(FAR))), "job.jitter.window"),
    "start_at 2^62 s": (job(start_at=stamp(FAR)), "job.start_at"),
    "start_at negative nanos": (job(start_at=stamp(1_800_000_000, -1)), "job.start_at"),
    "end_at before year 1": (job(end_at=stamp(-FAR)), "job.end_at"),
    "once_at 2^62 s": (once(stamp(FAR)), "job.schedule.once_at"),
    "once_at nanos 10^9": (once(stamp(1_800_000_000, 1_000_000_000)), "job.schedule.once_at"),
    # 13: each field's own bound.
    "initial backoff over 24 h": (job(retry_policy=job_pb2.RetryPolicy(initial_backoff=span(86_401))), "job.retry_policy.initial_backoff"),
    "misfire threshold over 30 days": (job(misfire_threshold=span(31 * 86_400)), "job.misfire_threshold"),
    "lateness threshold over 30 days": (job(lateness_threshold=span(31 * 86_400)), "job.lateness_threshold"),
    "once_at on 9999-12-31": (once(at(9999, 12, 31, 23, 59)), "job.schedule.once_at"),
    "once_at before 1970": (once(at(1969, 12, 31)), "job.schedule.once_at"),
    "start_at in year 1": (job(start_at=at(1, 1, 1)), "job.start_at"),
    # 15: free text.
    "name with NUL": (job(name="a\0b"), "job.name"),
    "name with ESC": (job(name="\x1b[31mred"), "job.name"),
    "name with a newline": (job(name="a\nb"), "job.name"),
    "name with DEL": (job(name="a\x7f"), "job.name"),
    "name with C1 NEL": (job(name="a\x85b"), "job.name"),
    "name with RLO": (job(name="invoice\u202egpj.exe"), "job.name"),
    "name with an isolate": (job(name="a\u2066b\u2069"), "job.name"),
    "name with a zero-width space": (job(name="ad\u200bmin"), "job.name"),
    "name with a BOM": (job(name="\ufeffname"), "job.name"),
    "name with a line separator": (job(name="a\u2028b"), "job.name"),
    "name with a tag character": (job(name="a\U000E0041"), "job.name"),
    "name of 201 characters": (job(name="n" * 201), "job.name"),
    "label value with RLO": (job(labels={"env": "pro\u202edoc"}), "job.labels[env]"),
    "label value with NUL": (job(labels={"env": "a\0"}), "job.labels[env]"),
    "label value of 257 characters": (job(labels={"env": "v" * 257}), "job.labels[env]"),
    "label key upper case": (job(labels={"Env": "x"}), "job.labels[Env]"),
    # 15: HTTP headers.
    "header name with a space": (with_header("X Bad"), "job.target.http.headers[X Bad]"),
    "header name with a colon": (with_header("X:Bad"), "job.target.http.headers[X:Bad]"),
    "header name empty": (with_header(""), "job.target.http.headers[]"),
    "header value with CRLF": (with_header("X-A", "a\r\nInjected: 1"), "job.target.http.headers[X-A]"),
    "header value with LF": (with_header("X-A", "a\nb"), "job.target.http.headers[X-A]"),
    "header value with NUL": (with_header("X-A", "a\0b"), "job.target.http.headers[X-A]"),
    "header value not ASCII": (with_header("X-A", "caf\u00e9"), "job.target.http.headers[X-A]"),
    "header value of 4097 characters": (with_header("X-A", "v" * 4097), "job.target.http.headers[X-A]"),
    "Host": (with_header("Host", "internal.example"), "job.target.http.headers[Host]"),
    "Content-Length": (with_header("content-length", "0"), "job.target.http.headers[content-length]"),
    "Transfer-Encoding": (with_header("Transfer-Encoding", "chunked"), "job.target.http.headers[Transfer-Encoding]"),
    "Connection": (with_header("Connection", "close"), "job.target.http.headers[Connection]"),
    "Tickwheel-Attempt": (with_header("Tickwheel-Attempt", "9"), "job.target.http.headers[Tickwheel-Attempt]"),
    "Tickwheel-anything": (with_header("tickwheel-x", "1"), "job.target.http.headers[tickwheel-x]"),
    "Idempotency-Key": (with_header("Idempotency-Key", "k"), "job.target.http.headers[Idempotency-Key]"),
    "a header named twice": (http(**{"X-A": "1", "x-a": "2"}), "job.target.http.headers[x-a]"),
    "headers over 16 KiB in all": (http(**{f"X-{i}": "v" * 4000 for i in range(5)}), "job.target.http.headers"),
    "URL with a space": (job(target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/a b"))), "job.target.http.url"),
    "URL not ASCII": (job(target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://ex\u00e4mple.com/"))), "job.target.http.url"),
    # 15: length limits on the schedule's strings.
    "cron of 40 007 characters": (job(schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 0" + " " * 40_000 + "* * *"))), "job.schedule.cron.expression"),
    "cron of 513 characters": (job(schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0" + ",0" * 256))), "job.schedule.cron.expression"),
    "cron with Arabic-Indic digits": (job(schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="\u0660 \u0660 * * *"))), "job.schedule.cron.expression"),
    "cron zone of 65 characters": (job(schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 0 * * *", time_zone="Z" * 65))), "job.schedule.cron.time_zone"),
    "local zone of 65 characters": (job(schedule=job_pb2.Schedule(local=job_pb2.LocalTimeSchedule(local_time="2027-01-01T00:00", time_zone="Z" * 65))), "job.schedule.local.time_zone"),
}


@pytest.mark.parametrize("message, field", INVALID.values(), ids=INVALID.keys())
def test_a_bad_field_is_named(message: job_pb2.Job, field: str) -> None:
    found = violations_of(message)
    assert field in found, found


VALID = {
    "every bound at its limit": job(
        name="n" * 200,
        timeout=span(6 * 3600),
        retry_policy=job_pb2.RetryPolicy(initial_backoff=span(86_400), max_backoff=span(86_400)),
        misfire_threshold=span(30 * 86_400),
        lateness_threshold=span(30 * 86_400),
        jitter=job_pb2.Jitter(window=span(3600)),
        start_at=at(1970, 1, 1),
        end_at=at(9998, 12, 31),
        labels={f"k{i}": "v" * 256 for i in range(32)},
    ),
    "names in any script, with joiners": job(name="Rapport quotidien — 日報 — گزارش\u200cها — 👩\u200d💻"),
    "ordinary headers": http(**{"Authorization": "Bearer abc", "X-Api-Key": "k e y\twith tabs", "Content-Type": "application/json", "X-Empty": ""}),
    "a one-off on 1970-01-01": once(at(1970, 1, 1)),
    "a one-off late in 9998": once(at(9998, 12, 31, 22, 59)),
}


@pytest.mark.parametrize("message", VALID.values(), ids=VALID.keys())
def test_valid_jobs_pass(message: job_pb2.Job) -> None:
    validate.normalise_job(message, NOW)


def test_a_label_key_is_shown_short_and_escaped_in_the_field_path() -> None:
    found = violations_of(job(labels={"\u202e" + "k" * 10_000: "x"}))
    (field,) = found
    assert field.startswith("job.labels[") and len(field) < 100 and field.isascii(), field


def test_unknown_fields_count_towards_the_definition_size() -> None:
    bloated = job_pb2.Job.FromString(job().SerializeToString() + b"\xfa\x3e" + b"\x80\x80\x04" + b"x" * 65_536)
    assert "job" in violations_of(bloated)


def test_the_payload_does_not_count_towards_the_definition_size() -> None:
    validate.normalise_job(job(payload=b"x" * 200_000), NOW)


def _every_entry_bad() -> job_pb2.Job:
    """A job whose maps hold as many entries as they may, each one bad twice (key and value)."""
    bad = job(labels={f"BAD{i}": "\0" for i in range(validate.MAX_LABELS)})
    bad.target.http.headers.update({f"bad header {i}": "\r\n" for i in range(validate.MAX_HEADERS)})
    return bad


def test_a_hundred_bad_entries_give_a_bounded_error() -> None:
    with pytest.raises(InvalidArgument) as error:
        validate.normalise_job(_every_entry_bad(), NOW)
    assert 1 < len(error.value.violations) <= MAX_LISTED_VIOLATIONS
    assert error.value.total >= 100
    assert "more violations not listed" in str(error.value)
    code, status = status_for(error.value)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    # Sent twice in the trailers (the message, and the status in base64): a client refuses more than 8 KiB.
    assert len(str(error.value).encode()) + len(status.SerializeToString()) * 4 / 3 < 6000


@pytest.mark.parametrize("make", [validate.normalise_job, lambda job, now: validate.new_job(job, now, "job_x")])
@pytest.mark.parametrize(
    "change, field",
    [
        (lambda j: j.labels.update({f"k{i}": "" for i in range(100_000)}), "job.labels"),
        (lambda j: j.concurrency_keys.extend([job_pb2.ConcurrencyKey()] * 100_000), "job.concurrency_keys"),
        (lambda j: j.target.http.headers.update({f"h{i}": "" for i in range(100_000)}), "job.target.http.headers"),
    ],
    ids=["labels", "concurrency keys", "headers"],
)
def test_a_map_or_list_past_its_bound_is_refused_before_it_is_read(make, change, field) -> None:
    """Past its bound, one violation naming the field, and no entry read or
    copied: upb copies a map slowly (300 000 labels, which fit a 4 MiB
    request, took 4.5 s), and each entry made a violation of its own."""
    bad = job()
    change(bad)
    with pytest.raises(InvalidArgument) as error:
        make(bad, NOW)
    assert [v.field for v in error.value.violations] == [field] and error.value.total == 1


def test_long_violations_are_listed_within_the_byte_budget() -> None:
    labels = {f"BAD KEY {i} " + "\u202e" * 40: "\x01" * 60 for i in range(validate.MAX_LABELS)}
    with pytest.raises(InvalidArgument) as error:
        validate.normalise_job(job(labels=labels), NOW)
    listed = error.value.violations
    assert sum(len(v.field.encode()) + len(v.description.encode()) for v in listed) <= MAX_LISTED_BYTES
    code, status = status_for(error.value)
    assert len(str(error.value).encode()) + len(status.SerializeToString()) * 4 / 3 < 6000


def test_violations_are_cut_to_a_bounded_length() -> None:
    error = InvalidArgument.field("f" * 10_000, "d" * 100_000)
    assert len(error.violations[0].field) <= 160 and len(error.violations[0].description) <= 400


@pytest.mark.parametrize(
    "message, problem",
    [
        (stamp(FAR), "not a valid Timestamp"),
        (stamp(-62_135_596_801), "not a valid Timestamp"),
        (stamp(0, -1), "nanos"),
        (stamp(0, 1_000_000_000), "nanos"),
        (stamp(253_402_300_799, 999_999_999), None),
        (stamp(-62_135_596_800), None),
    ],
)
def test_timestamp_range(message, problem) -> None:
    found = fields.timestamp_problem(message)
    assert (found is None) if problem is None else (problem in found)


@pytest.mark.parametrize(
    "message, valid",
    [
        (span(315_576_000_000), True),
        (span(-315_576_000_000), True),
        (span(315_576_000_001), False),
        (span(-315_576_000_001), False),
        (span(1, -1), False),
        (span(-1, 1), False),
        (span(0, -999_999_999), True),
        (span(0, 1_000_000_000), False),
    ],
)
def test_duration_range(message, valid) -> None:
    assert (fields.duration_problem(message) is None) is valid


@pytest.mark.parametrize(
    "request_, field",
    [
        (scheduler_pb2.BackfillJobRequest(id="j", from_at=at(1, 1, 1), to_at=at(2026, 1, 1)), "from_at"),
        (scheduler_pb2.BackfillJobRequest(id="j", from_at=stamp(-FAR), to_at=stamp(FAR)), "to_at"),
        (scheduler_pb2.BackfillJobRequest(id="j", from_at=at(2026, 1, 1), to_at=at(2025, 1, 1)), "to_at"),
        (scheduler_pb2.BackfillJobRequest(id="j", from_at=at(2026, 1, 1), to_at=at(2027, 1, 1)), "to_at"),
        (scheduler_pb2.BackfillJobRequest(id="j", to_at=at(2026, 1, 1)), "from_at"),
    ],
)
def test_backfill_window_bounds(request_, field) -> None:
    with pytest.raises(InvalidArgument) as error:
        validate.backfill_window(request_, NOW)
    assert field in {v.field for v in error.value.violations}


def test_backfill_window_from_1970() -> None:
    request_ = scheduler_pb2.BackfillJobRequest(id="j", from_at=at(1970, 1, 1), to_at=at(2026, 1, 1))
    assert validate.backfill_window(request_, NOW) == (
        datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 1, tzinfo=timezone.utc)
    )


@pytest.mark.parametrize("message", [stamp(253_402_300_799), at(9999, 1, 1), at(1969, 12, 31, 23, 59), stamp(FAR)])
def test_preview_after_is_bounded(message) -> None:
    with pytest.raises(InvalidArgument) as error:
        validate.bounded_instant(message, "after")
    assert error.value.violations[0].field == "after"


def test_a_preview_ends_at_the_horizon_instead_of_overflowing() -> None:
    every_minute = Schedule.cron("* * * * *", "UTC", job_id="job_x", jitter_window=timedelta(hours=1))
    fires = upcoming(every_minute, datetime(9998, 12, 31, 23, 0, tzinfo=timezone.utc), 1000)
    assert len(fires) == 59 and fires[-1].nominal_at == datetime(9998, 12, 31, 23, 59, tzinfo=timezone.utc)
    last_one_off = Schedule.once(datetime(9998, 12, 31, 23, 59, tzinfo=timezone.utc), job_id="j", jitter_window=timedelta(hours=1))
    assert len(upcoming(last_one_off, NOW, 5)) == 1


def test_schedule_of_an_unsaved_job_names_bad_instants() -> None:
    bad = job(start_at=stamp(FAR), end_at=stamp(0, -5), jitter=job_pb2.Jitter(window=span(1, -1)))
    with pytest.raises(InvalidArgument) as error:
        schedule_of(bad, "")
    assert {v.field for v in error.value.violations} == {"job.start_at", "job.end_at", "job.jitter.window"}


@pytest.mark.parametrize(
    "value, ok",
    [
        ("plain", True), ("", True), ("é 名 گزارش\u200cها 👩\u200d💻", True), ("tab\t", False), ("\0", False),
        ("\x9b", False), ("\u202a", False), ("\u202d", False), ("\u2069", False), ("\u200e", False), ("\u00ad", False),
        ("\u2029", False), ("\U000E0020", False),
    ],
)
def test_free_text(value: str, ok: bool) -> None:
    assert (text_problem(value, 100) is None) is ok


def test_shown_is_short_ascii() -> None:
    assert shown("env") == "env"
    assert shown("\u202e" * 1000).isascii() and len(shown("x" * 1000)) < 80
