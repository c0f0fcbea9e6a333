"""A tenant pays for the runs its calendar changes make the server decide
again, through the real server on the embedded stores and on PostgreSQL +
etcd.

An UpdateCalendar decides again the created runs of every job naming the
calendar, and the cursor of each (``store/calendaruse.py``): work set by how
many jobs name it, not by the request. A tenant allowed 5 requests a second
names one calendar from 300 every-minute jobs and changes it twice in a
row. The first change runs (a tenant not in debt always makes progress) and
is charged one request per 100 fires
(:data:`~tickwheel_server.auth.ratelimit.FIRES_PER_TOKEN`), a job walked
counting :data:`~tickwheel_server.store.calendaruse.FIRES_PER_JOB`; the second is
refused RESOURCE_EXHAUSTED naming ``requests_per_second`` with the wait in
RetryInfo, and writes nothing: the calendar keeps its version and dates.
Another tenant's calls are not refused meanwhile (its bucket is its own).
Before, every change ran whatever it cost."""

from __future__ import annotations

import asyncio

import grpc
import sqlalchemy as sa
from grpc_status import rpc_status
from tickwheel.v1 import admin_pb2_grpc, calendar_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_paused_span_rate_api import RATE, over_rate
from tests.integration.test_schedule_work_rate_api import every_minute, slow_tenant
from tests.integration.test_server_api import bearer

JOBS = 300
"""Jobs naming the calendar: 30 requests' worth of work a change, more than the bucket of RATE holds."""
EVERY_DAY = [1, 2, 3, 4, 5, 6, 7]


def on_desk(n: int) -> job_pb2.Job:
    job = every_minute(f"desk-{n}")
    job.calendar.name, job.calendar.rule = "desk", job_pb2.CALENDAR_RULE_NEXT
    return job


def stored_calendar(engine: sa.Engine) -> tuple[int, int]:
    """(version, holiday count) of acme's calendar ``desk``, read from the store."""
    with engine.connect() as conn:
        return tuple(conn.execute(sa.text(
            "SELECT version, holiday_count FROM calendars WHERE tenant = 'acme' AND name = 'desk'")).one())


async def test_a_tenant_pays_for_the_runs_its_calendar_changes_decide_again(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        acme = await slow_tenant(admin, server, RATE)
        quiet = await server.create_tenant("quiet")
        made = await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="desk", time_zone="UTC", business_days=EVERY_DAY), request_id="desk",
        ), metadata=bearer(acme))  # fmt: skip
        created = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=[
            scheduler_pb2.CreateJobRequest(job=on_desk(n), request_id=f"desk-{n}") for n in range(JOBS)
        ]), metadata=bearer(acme))  # fmt: skip
        assert all(result.WhichOneof("result") == "job" for result in created.results)
        await asyncio.sleep(1.0 + 2.0 / RATE)  # the setup's tokens back: a full bucket

        def change(version: int, holiday: str) -> calendar_pb2.UpdateCalendarRequest:
            return calendar_pb2.UpdateCalendarRequest(calendar=calendar_pb2.Calendar(
                name="desk", version=version, time_zone="UTC", business_days=EVERY_DAY, holidays=[holiday],
            ))  # fmt: skip

        first = await scheduler.UpdateCalendar(change(made.calendar.version, "2030-01-01"), metadata=bearer(acme))
        assert first.job_count == JOBS and first.calendar.version == made.calendar.version + 1
        with_holiday = stored_calendar(server.server.engine)
        assert with_holiday == (first.calendar.version, 1)

        try:
            await scheduler.UpdateCalendar(change(first.calendar.version, "2030-01-02"), metadata=bearer(acme))
            refused = None
        except grpc.aio.AioRpcError as error:
            refused = rpc_status.from_call(error)
        assert refused is not None, f"a second change of a calendar {JOBS} jobs name, right after the first, is refused"
        assert over_rate(refused), refused
        assert stored_calendar(server.server.engine) == with_holiday, "refused: nothing written"

        # The quiet tenant's calls are its own bucket's.
        await scheduler.ListCalendars(calendar_pb2.ListCalendarsRequest(), metadata=bearer(quiet))
