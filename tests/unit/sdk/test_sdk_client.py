"""The blocking client against a scripted server: credentials on the wire,
request building, error details, retries of idempotent calls only, paging."""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from datetime import date, datetime, timedelta, timezone

import grpc
import pytest

from tests.unit.sdk.fake_tickwheel import FakeTickwheel, failure
from tickwheel import AsyncClient, Client, RetryOptions, TickwheelError, cron_job
from tickwheel.v1 import admin_pb2, execution_pb2, job_pb2, scheduler_pb2

FAST = RetryOptions(max_attempts=4, initial_backoff=0.05, max_backoff=0.08)


def _client(fake: FakeTickwheel, sleeps: list[float] | None = None, **kwargs) -> Client:
    kwargs.setdefault("retries", FAST)
    return Client(
        fake.address,
        api_key=fake.api_key,
        admin_token=fake.admin_token,
        sleep=(sleeps.append if sleeps is not None else lambda _s: None),
        **kwargs,
    )


def _job(job_id: str = "job_01TEST", **fields) -> job_pb2.Job:
    return job_pb2.Job(id=job_id, name="nightly", version=1, **fields)


def test_create_job_sends_bearer_key_and_a_uuid4_request_id(fake: FakeTickwheel) -> None:
    fake.reply("CreateJob", scheduler_pb2.CreateJobResponse(job=_job(), created=True))
    with _client(fake) as client:
        response = client.create_job(cron_job("nightly", "0 2 * * *", "Europe/London", handler="echo"))

    assert response.job.id == "job_01TEST" and response.created
    (call,) = fake.calls
    assert call.metadata["authorization"] == f"Bearer {fake.api_key}"
    assert call.request.job.schedule.cron.time_zone == "Europe/London"
    assert uuid.UUID(call.request.request_id).version == 4


def test_create_job_keeps_the_callers_request_id(fake: FakeTickwheel) -> None:
    fake.reply("CreateJob", scheduler_pb2.CreateJobResponse(job=_job()))
    with _client(fake) as client:
        client.create_job(_job(), request_id="deploy-42")
    assert fake.requests("CreateJob")[0].request_id == "deploy-42"


def test_admin_calls_carry_the_admin_token_not_the_api_key(fake: FakeTickwheel) -> None:
    fake.reply("ClusterStatus", admin_pb2.ClusterStatusResponse(partition_count=256))
    with _client(fake) as client:
        assert client.admin.cluster_status().partition_count == 256
    assert fake.calls[0].metadata["authorization"] == f"Bearer {fake.admin_token}"


def test_a_wrong_key_is_unauthenticated(fake: FakeTickwheel) -> None:
    fake.reply("GetJob", scheduler_pb2.GetJobResponse(job=_job()))
    with Client(fake.address, api_key="tw_wrong") as client, pytest.raises(TickwheelError) as raised:
        client.get_job("job_01TEST")
    assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_field_violations_are_parsed_from_the_status_details(fake: FakeTickwheel) -> None:
    fake.reply(
        "CreateJob",
        failure(
            grpc.StatusCode.INVALID_ARGUMENT,
            "invalid job",
            [("job.schedule.cron.expression", "minute 61 out of range 0-59"), ("job.name", "empty")],
        ),
    )
    with _client(fake) as client, pytest.raises(TickwheelError) as raised:
        client.create_job(cron_job("", "61 * * * *", "UTC", handler="echo"))

    error = raised.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.message == "invalid job"
    assert [(v.field, v.description) for v in error.field_violations] == [
        ("job.schedule.cron.expression", "minute 61 out of range 0-59"),
        ("job.name", "empty"),
    ]
    assert str(error) == (
        "INVALID_ARGUMENT: job.schedule.cron.expression: minute 61 out of range 0-59; job.name: empty (invalid job)"
    )
    assert len(fake.calls) == 1  # not retried


def test_an_error_without_details_has_no_violations(fake: FakeTickwheel) -> None:
    fake.reply("GetJob", failure(grpc.StatusCode.NOT_FOUND, "job job_X not found"))
    with _client(fake) as client, pytest.raises(TickwheelError) as raised:
        client.get_job("job_X")
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    assert raised.value.field_violations == ()
    assert str(raised.value) == "NOT_FOUND: job job_X not found"


def test_unavailable_create_is_retried_with_the_same_request_id_and_backoff(fake: FakeTickwheel) -> None:
    unavailable = failure(grpc.StatusCode.UNAVAILABLE, "store unreachable")
    fake.script("CreateJob", unavailable, unavailable)
    fake.reply("CreateJob", scheduler_pb2.CreateJobResponse(job=_job(), created=True))
    sleeps: list[float] = []
    with _client(fake, sleeps) as client:
        response = client.create_job(_job())

    assert response.created
    request_ids = {r.request_id for r in fake.requests("CreateJob")}
    assert len(fake.requests("CreateJob")) == 3 and len(request_ids) == 1
    # full jitter: retry n waits in [0, min(cap, base * 2^(n-1))]
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 0.05 and 0 <= sleeps[1] <= 0.08


def test_trigger_is_retried_with_one_request_id(fake: FakeTickwheel) -> None:
    fake.script("TriggerJob", failure(grpc.StatusCode.UNAVAILABLE, "down"))
    execution = execution_pb2.Execution(id="job_01TEST:trigger:r1", job_id="job_01TEST")
    fake.reply("TriggerJob", scheduler_pb2.TriggerJobResponse(execution=execution, created=True))
    with _client(fake) as client:
        assert client.trigger_job("job_01TEST", request_id="r1").execution.id == "job_01TEST:trigger:r1"
    assert [r.request_id for r in fake.requests("TriggerJob")] == ["r1", "r1"]


def test_a_non_idempotent_write_is_not_retried(fake: FakeTickwheel) -> None:
    fake.script("UpdateJob", failure(grpc.StatusCode.UNAVAILABLE, "connection reset"))
    fake.reply("UpdateJob", scheduler_pb2.UpdateJobResponse(job=_job()))
    sleeps: list[float] = []
    with _client(fake, sleeps) as client, pytest.raises(TickwheelError) as raised:
        client.update_job(_job(payload=b"{}"), update_mask=["payload"])

    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(fake.requests("UpdateJob")) == 1 and sleeps == []
    assert list(fake.requests("UpdateJob")[0].update_mask.paths) == ["payload"]


def test_retries_stop_after_max_attempts(fake: FakeTickwheel) -> None:
    fake.reply("GetJob", failure(grpc.StatusCode.UNAVAILABLE, "down"))
    sleeps: list[float] = []
    with _client(fake, sleeps) as client, pytest.raises(TickwheelError):
        client.get_job("job_01TEST")
    assert len(fake.requests("GetJob")) == FAST.max_attempts
    assert len(sleeps) == FAST.max_attempts - 1


def test_other_codes_are_not_retried(fake: FakeTickwheel) -> None:
    fake.reply("GetJob", failure(grpc.StatusCode.INTERNAL, "boom"))
    with _client(fake) as client, pytest.raises(TickwheelError):
        client.get_job("job_01TEST")
    assert len(fake.requests("GetJob")) == 1


def test_unreachable_server_is_unavailable_within_the_deadline() -> None:
    with Client("127.0.0.1:1", api_key="k", timeout=2, retries=FAST, sleep=lambda _s: None) as client:
        with pytest.raises(TickwheelError) as raised:
            client.list_jobs()
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE


def test_retries_ride_out_a_server_restart(fake: FakeTickwheel) -> None:
    """A real outage: the server is down for the first attempt and comes back
    (same port) during the first backoff; the read then succeeds."""
    response = scheduler_pb2.GetJobResponse(job=_job())
    fake.reply("GetJob", response)
    restarted: list[FakeTickwheel] = []

    def sleep(seconds: float) -> None:
        if not restarted:
            replacement = FakeTickwheel(port=fake.port)
            replacement.reply("GetJob", response)
            restarted.append(replacement.start())
        time.sleep(seconds)  # the client's own backoff, really waited

    retries = RetryOptions(max_attempts=10, initial_backoff=0.1, max_backoff=0.3)
    with Client(fake.address, fake.api_key, retries=retries, sleep=sleep) as client:
        client.get_job("job_01TEST")  # connected
        fake.stop()
        try:
            assert client.get_job("job_01TEST").job.id == "job_01TEST"
        finally:
            for server in restarted:
                server.stop()
    assert restarted and restarted[0].requests("GetJob")


def test_iter_jobs_follows_page_tokens(fake: FakeTickwheel) -> None:
    fake.script(
        "ListJobs",
        scheduler_pb2.ListJobsResponse(jobs=[_job("job_a"), _job("job_b")], next_page_token="p2"),
        scheduler_pb2.ListJobsResponse(jobs=[_job("job_c")]),
    )
    with _client(fake) as client:
        ids = [job.id for job in client.iter_jobs(state="paused", page_size=2)]

    assert ids == ["job_a", "job_b", "job_c"]
    first, second = fake.requests("ListJobs")
    assert (first.page_token, second.page_token) == ("", "p2")
    assert first.state == job_pb2.JOB_STATE_PAUSED and first.page_size == 2


def test_iter_jobs_and_pages_walk_on_past_an_empty_page_with_a_token(fake: FakeTickwheel) -> None:
    """A filtered page may be short or empty and still carry a token (its
    scan stopped before the end): the iterators walk on to the last page."""
    fake.script(
        "ListJobs",
        scheduler_pb2.ListJobsResponse(next_page_token="p2"),
        scheduler_pb2.ListJobsResponse(jobs=[_job("job_a")], next_page_token="p3"),
        scheduler_pb2.ListJobsResponse(next_page_token="p4"),
        scheduler_pb2.ListJobsResponse(jobs=[_job("job_b")]),
    )
    fake.script(
        "SearchJobs",
        admin_pb2.SearchJobsResponse(next_page_token="s2"),
        admin_pb2.SearchJobsResponse(jobs=[_job("job_c")]),
    )
    with _client(fake) as client:
        ids = [job.id for job in client.iter_jobs(name_prefix="rare", page_size=2)]
        searched = [job.id for page in client.pages(client.admin.search_jobs, name_prefix="rare") for job in page.jobs]

    assert ids == ["job_a", "job_b"] and searched == ["job_c"]
    assert [r.page_token for r in fake.requests("ListJobs")] == ["", "p2", "p3", "p4"]
    assert all(r.name_prefix == "rare" for r in fake.requests("ListJobs") + fake.requests("SearchJobs"))
    assert [r.page_token for r in fake.requests("SearchJobs")] == ["", "s2"]


def test_requests_are_built_from_plain_arguments(fake: FakeTickwheel) -> None:
    fake.reply("BackfillJob", scheduler_pb2.BackfillJobResponse())
    fake.reply("ListExecutions", scheduler_pb2.ListExecutionsResponse())
    fake.reply("IssueWorkerCredential", admin_pb2.IssueWorkerCredentialResponse())
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with _client(fake) as client:
        client.backfill_job("job_1", start, start + timedelta(hours=1), dry_run=True)
        client.list_executions("job_1", statuses=["dead", "succeeded"])
        client.admin.issue_worker_credential(["acme"], handlers=["echo"], http=True)

    backfill = fake.requests("BackfillJob")[0]
    assert backfill.from_at.ToDatetime(tzinfo=timezone.utc) == start and backfill.dry_run
    assert list(fake.requests("ListExecutions")[0].statuses) == [
        job_pb2.EXECUTION_STATUS_DEAD,
        job_pb2.EXECUTION_STATUS_SUCCEEDED,
    ]
    credential = fake.requests("IssueWorkerCredential")[0]
    assert list(credential.tenants) == ["acme"] and list(credential.handlers) == ["echo"] and credential.http


def test_watch_alerts_streams_until_the_server_ends(fake: FakeTickwheel) -> None:
    alerts = [admin_pb2.WatchAlertsResponse(alert=admin_pb2.Alert(id=f"a{i}")) for i in range(3)]
    fake.reply("WatchAlerts", alerts)
    with _client(fake) as client:
        assert [r.alert.id for r in client.admin.watch_alerts(include_open=True)] == ["a0", "a1", "a2"]
    assert fake.requests("WatchAlerts")[0].include_open


def test_with_options_shares_the_channel(fake: FakeTickwheel) -> None:
    fake.reply("GetJob", scheduler_pb2.GetJobResponse(job=_job()))
    with _client(fake) as client:
        patient = client.with_options(timeout=60, retries=0)
        assert patient.timeout == 60 and patient.retries.max_attempts == 1
        assert patient.get_job("job_01TEST").job.id == "job_01TEST"
        patient.close()  # a copy does not close the shared channel
        assert client.get_job("job_01TEST").job.id == "job_01TEST"


def test_methods_document_their_contract() -> None:
    assert "idempotent" in (Client.create_job.__doc__ or "")
    assert "Never retried" in (Client.update_job.__doc__ or "")


def test_a_bound_method_shows_the_builders_signature_and_the_response(fake: FakeTickwheel) -> None:
    async def async_method():
        async with AsyncClient(fake.address, api_key=fake.api_key) as client:
            return client.create_job

    with _client(fake) as client:
        for method in (client.create_job, asyncio.run(async_method())):
            signature = inspect.signature(method)
            assert list(signature.parameters) == ["job", "request_id"]
            assert signature.return_annotation is scheduler_pb2.CreateJobResponse
            assert method.__qualname__.endswith(".create_job") and "idempotent" in (method.__doc__ or "")


def test_calendar_calls_follow_the_retry_rule_of_jobs(fake: FakeTickwheel) -> None:
    """Create carries a request id and is retried with it; reads are
    retried; update and delete are never repeated."""
    from tickwheel import builders
    from tickwheel.v1 import calendar_pb2

    unavailable = failure(grpc.StatusCode.UNAVAILABLE, "down")
    stored = calendar_pb2.Calendar(name="uk", time_zone="Europe/London", version=1)
    fake.script("CreateCalendar", unavailable)
    fake.reply("CreateCalendar", calendar_pb2.CreateCalendarResponse(calendar=stored, created=True))
    fake.script("GetCalendar", unavailable)
    fake.reply("GetCalendar", calendar_pb2.GetCalendarResponse(calendar=stored))
    fake.reply("UpdateCalendar", unavailable)
    fake.reply("DeleteCalendar", unavailable)
    fake.script(
        "ListCalendars",
        calendar_pb2.ListCalendarsResponse(calendars=[stored], next_page_token="p2"),
        calendar_pb2.ListCalendarsResponse(calendars=[calendar_pb2.Calendar(name="us")]),
    )
    sleeps: list[float] = []
    made = builders.calendar("uk", "Europe/London", business_days=["mon", "Friday", 3],
                             holidays=[date(2026, 12, 25), "2026-12-28"])  # fmt: skip
    with _client(fake, sleeps) as client:
        assert client.create_calendar(made).created
        assert client.get_calendar("uk").calendar == stored
        assert [c.name for c in client.iter_calendars(page_size=1)] == ["uk", "us"]
        with pytest.raises(TickwheelError):
            client.update_calendar(stored, update_mask=["holidays"])
        with pytest.raises(TickwheelError):
            client.delete_calendar("uk", version=1)
    first, second = fake.requests("CreateCalendar")
    assert first.request_id and first.request_id == second.request_id
    assert list(first.calendar.business_days) == [1, 5, 3] and list(first.calendar.holidays) == ["2026-12-25", "2026-12-28"]
    assert len(fake.requests("GetCalendar")) == 2
    assert len(fake.requests("UpdateCalendar")) == 1 and len(fake.requests("DeleteCalendar")) == 1
    assert list(fake.requests("UpdateCalendar")[0].update_mask.paths) == ["holidays"]
    assert fake.requests("DeleteCalendar")[0].version == 1
    with pytest.raises(ValueError, match="not a weekday"):
        builders.calendar("uk", "UTC", business_days=["someday"])


def test_preview_update_asks_validate_only_and_is_not_retried(fake: FakeTickwheel) -> None:
    fake.reply("UpdateJob", failure(grpc.StatusCode.UNAVAILABLE, "down"))
    sleeps: list[float] = []
    with _client(fake, sleeps) as client, pytest.raises(TickwheelError):
        client.preview_update(_job(payload=b"{}"), update_mask=["payload"], diff_window=timedelta(days=7))
    (sent,) = fake.requests("UpdateJob")
    assert sent.validate_only and sent.diff_window.ToTimedelta() == timedelta(days=7) and sleeps == []
    assert list(sent.update_mask.paths) == ["payload"]
    with _client(fake) as client, pytest.raises(TickwheelError):
        client.update_job(_job())
    assert not fake.requests("UpdateJob")[-1].validate_only and not fake.requests("UpdateJob")[-1].HasField("diff_window")


def test_revisions_are_read_and_retried(fake: FakeTickwheel) -> None:
    fake.script("ListJobRevisions", failure(grpc.StatusCode.UNAVAILABLE, "down"))
    fake.reply("ListJobRevisions", scheduler_pb2.ListJobRevisionsResponse(
        revisions=[scheduler_pb2.JobRevision(version=1, changed_by="api_key:k")]))  # fmt: skip
    fake.reply("GetJob", scheduler_pb2.GetJobResponse(job=_job()))
    with _client(fake) as client:
        page = client.list_job_revisions("job_01TEST", page_size=5, page_token="t")
        client.get_job("job_01TEST", revision=1)
    assert [r.version for r in page.revisions] == [1] and len(fake.requests("ListJobRevisions")) == 2
    sent = fake.requests("ListJobRevisions")[0]
    assert (sent.id, sent.page_size, sent.page_token) == ("job_01TEST", 5, "t")
    assert fake.requests("GetJob")[0].revision == 1
