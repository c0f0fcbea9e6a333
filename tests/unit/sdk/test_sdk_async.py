"""The asyncio client: same methods, same retries, same errors."""

from __future__ import annotations

import grpc
import pytest

from tests.unit.sdk.fake_tickwheel import FakeTickwheel, failure
from tickwheel import AsyncClient, RetryOptions, TickwheelError, once_job
from tickwheel.v1 import admin_pb2, job_pb2, scheduler_pb2

FAST = RetryOptions(max_attempts=3, initial_backoff=0.01, max_backoff=0.02)


def _client(fake: FakeTickwheel, sleeps: list[float]) -> AsyncClient:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return AsyncClient(fake.address, fake.api_key, admin_token=fake.admin_token, retries=FAST, sleep=sleep)


async def test_async_create_retries_unavailable_then_succeeds(fake: FakeTickwheel) -> None:
    from datetime import datetime, timezone

    fake.script("CreateJob", failure(grpc.StatusCode.UNAVAILABLE, "down"))
    fake.reply("CreateJob", scheduler_pb2.CreateJobResponse(job=job_pb2.Job(id="job_1"), created=True))
    sleeps: list[float] = []
    async with _client(fake, sleeps) as client:
        job = once_job("once", datetime(2027, 1, 1, tzinfo=timezone.utc), url="https://example.com/hook")
        response = await client.create_job(job)

    assert response.job.id == "job_1"
    first, second = fake.requests("CreateJob")
    assert first.request_id == second.request_id != ""
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 0.01
    assert fake.calls[0].metadata["authorization"] == f"Bearer {fake.api_key}"


async def test_async_update_is_not_retried_and_errors_carry_violations(fake: FakeTickwheel) -> None:
    fake.script("UpdateJob", failure(grpc.StatusCode.UNAVAILABLE, "reset"))
    fake.reply(
        "UpdateJob",
        failure(grpc.StatusCode.INVALID_ARGUMENT, "bad", [("update_mask", "next_run_at is output only")]),
    )
    sleeps: list[float] = []
    async with _client(fake, sleeps) as client:
        with pytest.raises(TickwheelError) as first:
            await client.update_job(job_pb2.Job(id="job_1", version=2))
        with pytest.raises(TickwheelError) as second:
            await client.update_job(job_pb2.Job(id="job_1", version=2), update_mask=["next_run_at"])

    assert first.value.code == grpc.StatusCode.UNAVAILABLE and sleeps == []
    assert second.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [(v.field, v.description) for v in second.value.field_violations] == [
        ("update_mask", "next_run_at is output only")
    ]


async def test_async_iter_jobs_walks_on_past_an_empty_page_with_a_token(fake: FakeTickwheel) -> None:
    """A filtered page may be empty and still carry a token: the async
    iterator walks on to the last page."""
    fake.script(
        "ListJobs",
        scheduler_pb2.ListJobsResponse(next_page_token="p2"),
        scheduler_pb2.ListJobsResponse(next_page_token="p3"),
        scheduler_pb2.ListJobsResponse(jobs=[job_pb2.Job(id="job_a")]),
    )
    async with _client(fake, []) as client:
        ids = [job.id async for job in client.iter_jobs(state="completed")]

    assert ids == ["job_a"]
    assert [r.page_token for r in fake.requests("ListJobs")] == ["", "p2", "p3"]


async def test_async_pages_and_admin_facade(fake: FakeTickwheel) -> None:
    fake.script(
        "ListTenants",
        admin_pb2.ListTenantsResponse(tenants=[admin_pb2.Tenant(name="a")], next_page_token="t"),
        admin_pb2.ListTenantsResponse(tenants=[admin_pb2.Tenant(name="b")]),
    )
    fake.reply("WatchAlerts", [admin_pb2.WatchAlertsResponse(alert=admin_pb2.Alert(id="late-1"))])
    async with _client(fake, []) as client:
        names = [tenant.name async for tenant in client.admin.iter_tenants()]
        alerts = [event.alert.id async for event in client.admin.watch_alerts(kinds=["late"])]

    assert names == ["a", "b"]
    assert alerts == ["late-1"]
    assert list(fake.requests("WatchAlerts")[0].kinds) == [admin_pb2.ALERT_KIND_LATE]
    assert all(c.metadata["authorization"] == f"Bearer {fake.admin_token}" for c in fake.calls)
