"""Pure parts of the SDK: message builders, retry arithmetic, option checks."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import grpc
import pytest

from tickwheel import (
    RetryOptions,
    TickwheelError,
    TlsOptions,
    cron_job,
    local_job,
    once_job,
    overlap_policy,
    retry_policy,
)
from tickwheel import _calls
from tickwheel.client import _retry_delay
from tickwheel.v1 import job_pb2


def test_cron_job_sets_schedule_target_and_policies() -> None:
    job = cron_job(
        "nightly",
        "0 2 * * *",
        "Europe/London",
        handler="reports.nightly",
        payload='{"k": 1}',
        exact=True,
        overlap="queue_one",
        misfire="run_all",
        retry=retry_policy(3, initial_backoff=2, max_backoff=timedelta(minutes=1)),
        timeout=timedelta(minutes=10),
        concurrency_keys={"db": 2},
        labels={"team": "data"},
    )
    assert job.schedule.cron.expression == "0 2 * * *" and job.schedule.cron.time_zone == "Europe/London"
    assert job.target.handler.name == "reports.nightly"
    assert job.payload == b'{"k": 1}' and job.jitter.exact
    assert job.overlap_policy == job_pb2.OVERLAP_POLICY_QUEUE_ONE
    assert job.misfire_policy == job_pb2.MISFIRE_POLICY_RUN_ALL
    assert job.retry_policy.max_attempts == 3 and job.retry_policy.max_backoff.seconds == 60
    assert job.timeout.seconds == 600
    assert [(k.key, k.limit) for k in job.concurrency_keys] == [("db", 2)]
    assert dict(job.labels) == {"team": "data"}


def test_once_and_local_jobs() -> None:
    at = datetime(2027, 3, 28, 1, 30, tzinfo=timezone.utc)
    once = once_job("once", at, url="https://example.com/hook", method="PUT", headers={"X-A": "1"})
    assert once.schedule.once_at.ToDatetime(tzinfo=timezone.utc) == at
    assert once.target.http.method == "PUT" and dict(once.target.http.headers) == {"X-A": "1"}
    assert not once.HasField("jitter")
    local = local_job("wall", "2027-03-28T02:30:00", "Europe/Berlin", handler="echo", dst_gap="skip")
    assert local.schedule.local.time_zone == "Europe/Berlin"
    assert local.dst_policy.gap == job_pb2.DST_GAP_POLICY_SKIP


@pytest.mark.parametrize(
    "call",
    [
        lambda: once_job("naive", datetime(2027, 1, 1), handler="echo"),
        lambda: cron_job("two targets", "* * * * *", "UTC", handler="echo", url="https://x"),
        lambda: cron_job("no target", "* * * * *", "UTC"),
        lambda: cron_job("both", "* * * * *", "UTC", handler="echo", exact=True, jitter=5),
        lambda: overlap_policy("sometimes"),
        lambda: _calls.preview_schedule(),
    ],
)
def test_local_mistakes_raise_value_error(call) -> None:
    with pytest.raises(ValueError):
        call()


def test_full_jitter_backoff_bounds() -> None:
    retry = RetryOptions(max_attempts=10, initial_backoff=0.2, max_backoff=1.0)
    assert [retry.backoff(n, rand=lambda: 1.0) for n in range(1, 6)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert retry.backoff(3, rand=lambda: 0.0) == 0.0
    assert retry.backoff(500, rand=lambda: 1.0) == 1.0  # no overflow on huge retry numbers


def test_retry_decision() -> None:
    retry = RetryOptions(max_attempts=3, initial_backoff=1.0, max_backoff=1.0)
    unavailable = TickwheelError(grpc.StatusCode.UNAVAILABLE, "down")
    create = _calls.create_job(job_pb2.Job())
    update = _calls.update_job(job_pb2.Job())
    half = lambda: 0.5  # noqa: E731
    assert _retry_delay(retry, _calls.CREATE_JOB, create, unavailable, 1, None, half) == 0.5
    assert _retry_delay(retry, _calls.UPDATE_JOB, update, unavailable, 1, None, half) is None
    assert _retry_delay(retry, _calls.CREATE_JOB, create, unavailable, 3, None, half) is None  # spent
    assert _retry_delay(retry, _calls.CREATE_JOB, create, unavailable, 1, 0.4, half) is None  # past deadline
    internal = TickwheelError(grpc.StatusCode.INTERNAL, "boom")
    assert _retry_delay(retry, _calls.CREATE_JOB, create, internal, 1, None, half) is None
    dry = _calls.backfill_job("j", datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 2, tzinfo=timezone.utc), dry_run=True)
    assert _calls.BACKFILL_JOB.idempotent(dry) and not _calls.BACKFILL_JOB.idempotent(_calls.backfill_job(
        "j", datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 2, tzinfo=timezone.utc)))


def test_option_validation() -> None:
    assert RetryOptions.coerce(2).max_attempts == 3
    assert RetryOptions.coerce(None).max_attempts == 1
    with pytest.raises(ValueError):
        RetryOptions(max_attempts=0)
    with pytest.raises(ValueError):
        TlsOptions(certificate_chain=b"cert")
    assert TlsOptions(server_name="tw.internal").channel_options() == [
        ("grpc.ssl_target_name_override", "tw.internal")
    ]


def test_error_line_without_violations_or_message() -> None:
    assert str(TickwheelError(grpc.StatusCode.UNIMPLEMENTED, "")) == "UNIMPLEMENTED: (no message)"
    assert str(TickwheelError(grpc.StatusCode.INTERNAL, "two\nlines")) == "INTERNAL: two lines"


def test_a_job_names_a_calendar_and_its_rule_by_name() -> None:
    from tickwheel import builders

    job = builders.cron_job("n", "0 9 * * 1-5", "Europe/London", handler="h",
                            calendar=builders.job_calendar("uk", "next"))  # fmt: skip
    assert (job.calendar.name, job.calendar.rule) == ("uk", job_pb2.CALENDAR_RULE_NEXT)
    once = builders.once_job("o", datetime(2027, 1, 1, tzinfo=timezone.utc), handler="h",
                             calendar=builders.job_calendar("uk", job_pb2.CALENDAR_RULE_SKIP))  # fmt: skip
    assert once.calendar.rule == job_pb2.CALENDAR_RULE_SKIP
    assert not builders.cron_job("n", "0 9 * * *", "UTC", handler="h").HasField("calendar")
    with pytest.raises(ValueError):
        builders.calendar_rule("sometimes")
