"""Jobs that name a business-day calendar, over the real gRPC server, on
the embedded stores and on PostgreSQL + etcd: a run on a holiday moves to
the next business day and history shows both instants; the preview shows
the move; a calendar that jobs name cannot be deleted; an UpdateCalendar
re-decides created runs and says so; hostile calendar fields are refused
naming the field with nothing written."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import grpc
import pytest
from google.protobuf import field_mask_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, calendar_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tickwheel.shared.ids import execution_id

from tests.support.workers import builtin_handlers, running_worker

from .test_dispatch_flow import wait_for_status
from .test_server_api import bearer, violations

UTC = timezone.utc
C, S = calendar_pb2, scheduler_pb2
EVERY_DAY = [1, 2, 3, 4, 5, 6, 7]


@pytest.fixture
async def cluster(server):
    acme, globex = await server.create_tenant("acme"), await server.create_tenant("globex")
    credential = await server.issue_worker_credential(["acme"], http=True)
    async with (
        grpc.aio.insecure_channel(server.address) as channel,
        running_worker(server.address, credential, builtin_handlers(), worker_id="w1", slots=4),
    ):
        yield server, scheduler_pb2_grpc.SchedulerServiceStub(channel), acme, globex, channel


def job_at(at: datetime, rule: int = job_pb2.CALENDAR_RULE_NEXT, calendar: str = "days") -> job_pb2.Job:
    job = job_pb2.Job(
        name="on-a-calendar", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        calendar=job_pb2.JobCalendar(name=calendar, rule=rule),
    )  # fmt: skip
    job.schedule.once_at.FromDatetime(at)
    return job


async def make_calendar(stub, meta, holidays: list[str], name: str = "days") -> C.Calendar:
    made = await stub.CreateCalendar(C.CreateCalendarRequest(
        calendar=C.Calendar(name=name, time_zone="UTC", business_days=EVERY_DAY, holidays=holidays),
        request_id=f"cal-{name}",
    ), metadata=meta)  # fmt: skip
    return made.calendar


async def test_a_run_on_a_holiday_runs_on_the_next_business_day_with_both_instants_in_history(cluster) -> None:
    _, stub, key, _, _ = cluster
    meta = bearer(key)
    moved = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    nominal = moved - timedelta(days=1)  # yesterday, at the same wall time: a holiday of the calendar
    await make_calendar(stub, meta, [nominal.date().isoformat()])
    created = await stub.CreateJob(S.CreateJobRequest(job=job_at(nominal), request_id="r1"), metadata=meta)
    job_id = created.job.id
    [execution] = await wait_for_status(stub, key, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    # The id (the idempotency key) stays the nominal instant; the due instant is the moved one.
    assert execution.id == execution_id(job_id, nominal)
    assert execution.nominal_at.ToDatetime(tzinfo=UTC) == nominal
    assert execution.due_at.ToDatetime(tzinfo=UTC) == moved
    [attempt] = execution.attempts
    assert attempt.started_at.ToDatetime(tzinfo=UTC) >= moved, "never before the moved instant"
    assert attempt.lateness.ToTimedelta() < timedelta(seconds=10), "lateness counts from the moved instant"


async def test_previous_runs_a_holidays_run_on_the_day_before_with_its_nominal_id(cluster) -> None:
    _, stub, key, _, _ = cluster
    meta = bearer(key)
    moved = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    nominal = moved + timedelta(days=1)  # tomorrow, at the same wall time: a holiday of the calendar
    await make_calendar(stub, meta, [nominal.date().isoformat()])
    job = job_at(nominal, rule=job_pb2.CALENDAR_RULE_PREVIOUS)
    created = await stub.CreateJob(S.CreateJobRequest(job=job, request_id="p1"), metadata=meta)
    job_id = created.job.id
    assert created.job.next_run_at.ToDatetime(tzinfo=UTC) == nominal, "the job shows its nominal cursor"
    # The preview, on a twin ten days out: this one may be claimed (its preview then empty) before GetJob.
    later = nominal + timedelta(days=10)
    await make_calendar(stub, meta, [later.date().isoformat()], name="later")
    twin = job_at(later, rule=job_pb2.CALENDAR_RULE_PREVIOUS, calendar="later")
    twin.name = "a-twin-ten-days-out"
    made = await stub.CreateJob(S.CreateJobRequest(job=twin, request_id="p2"), metadata=meta)
    got = await stub.GetJob(S.GetJobRequest(id=made.job.id, next_runs=1), metadata=meta)
    [run] = got.next_runs
    assert (run.nominal_at.ToDatetime(tzinfo=UTC), run.due_at.ToDatetime(tzinfo=UTC)) == (later, later - timedelta(days=1))
    [execution] = await wait_for_status(stub, key, job_id, job_pb2.EXECUTION_STATUS_SUCCEEDED)
    # Run a day before its nominal instant, the id (the idempotency key) still the nominal one.
    assert execution.id == execution_id(job_id, nominal)
    assert execution.nominal_at.ToDatetime(tzinfo=UTC) == nominal
    assert execution.due_at.ToDatetime(tzinfo=UTC) == moved
    [attempt] = execution.attempts
    assert attempt.started_at.ToDatetime(tzinfo=UTC) >= moved, "never before the moved instant"


async def test_the_preview_shows_the_moved_and_the_skipped_runs(cluster) -> None:
    _, stub, key, _, _ = cluster
    meta = bearer(key)
    await make_calendar(stub, meta, ["2031-12-25", "2031-12-26"])
    job = job_pb2.Job(
        name="daily", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 9 25 12 *", time_zone="Europe/London")),
        calendar=job_pb2.JobCalendar(name="days", rule=job_pb2.CALENDAR_RULE_NEXT),
        start_at=datetime(2031, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    job.jitter.exact = True
    created = await stub.CreateJob(S.CreateJobRequest(job=job, request_id="r2"), metadata=meta)
    got = await stub.GetJob(S.GetJobRequest(id=created.job.id, next_runs=2), metadata=meta)
    first, second = got.next_runs
    assert first.nominal_at.ToDatetime(tzinfo=UTC) == datetime(2031, 12, 25, 9, tzinfo=UTC)
    assert first.due_at.ToDatetime(tzinfo=UTC) == datetime(2031, 12, 27, 9, tzinfo=UTC)
    assert "2031-12-25 is not a business day of calendar days" in first.note and not first.skipped
    assert second.nominal_at.ToDatetime(tzinfo=UTC) == datetime(2032, 12, 25, 9, tzinfo=UTC)
    assert second.due_at == second.nominal_at  # 2032-12-25 is a business day of this calendar
    # Under ``previous`` the 2031 run moves to the 24th, shown with its note.
    job.calendar.rule = job_pb2.CALENDAR_RULE_PREVIOUS
    job.ClearField("name")
    job.name = "earlier"
    created = await stub.CreateJob(S.CreateJobRequest(job=job, request_id="r2p"), metadata=meta)
    got = await stub.GetJob(S.GetJobRequest(id=created.job.id, next_runs=1), metadata=meta)
    [first] = got.next_runs
    assert first.nominal_at.ToDatetime(tzinfo=UTC) == datetime(2031, 12, 25, 9, tzinfo=UTC)
    assert first.due_at.ToDatetime(tzinfo=UTC) == datetime(2031, 12, 24, 9, tzinfo=UTC)
    assert "moved to 2031-12-24T09:00:00+00:00" in first.note


async def test_a_calendar_that_jobs_name_cannot_be_deleted(cluster) -> None:
    _, stub, key, _, _ = cluster
    meta = bearer(key)
    await make_calendar(stub, meta, [])
    far = datetime(2031, 6, 1, tzinfo=UTC)
    one = await stub.CreateJob(S.CreateJobRequest(job=job_at(far), request_id="a"), metadata=meta)
    await stub.CreateJob(S.CreateJobRequest(job=job_at(far), request_id="b"), metadata=meta)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.DeleteCalendar(C.DeleteCalendarRequest(name="days"), metadata=meta)
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "2 jobs name it" in caught.value.details()
    await stub.DeleteJob(S.DeleteJobRequest(id=one.job.id), metadata=meta)
    # A job that names another calendar no longer counts (an update changes jobs.calendar).
    await make_calendar(stub, meta, [], name="other")
    jobs = await stub.ListJobs(S.ListJobsRequest(), metadata=meta)
    [left] = jobs.jobs
    await stub.UpdateJob(S.UpdateJobRequest(
        job=job_pb2.Job(id=left.id, version=left.version, calendar=job_pb2.JobCalendar(
            name="other", rule=job_pb2.CALENDAR_RULE_SKIP)),
        update_mask=field_mask_pb2.FieldMask(paths=["calendar"]),
    ), metadata=meta)  # fmt: skip
    await stub.DeleteCalendar(C.DeleteCalendarRequest(name="days"), metadata=meta)


async def test_an_update_of_the_calendar_redecides_created_runs_and_raises_an_alert(cluster) -> None:
    running, stub, key, _, channel = cluster
    meta = bearer(key)
    made = await make_calendar(stub, meta, [])
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=40)  # claimed within the look-ahead
    created = await stub.CreateJob(S.CreateJobRequest(job=job_at(due), request_id="r3"), metadata=meta)
    [claimed] = await wait_for_status(stub, key, created.job.id, job_pb2.EXECUTION_STATUS_SCHEDULED)
    assert claimed.due_at.ToDatetime(tzinfo=UTC) == due
    reply = await stub.UpdateCalendar(C.UpdateCalendarRequest(
        calendar=C.Calendar(name="days", version=made.version, holidays=[due.date().isoformat()]),
        update_mask=field_mask_pb2.FieldMask(paths=["holidays"]),
    ), metadata=meta)  # fmt: skip
    assert (reply.changed_run_count, reply.job_count) == (1, 1)
    [change] = reply.changed_runs
    assert change.execution_id == claimed.id
    assert change.old_due_at.ToDatetime(tzinfo=UTC) == due
    assert change.new_due_at.ToDatetime(tzinfo=UTC) == due + timedelta(days=1)
    [execution] = (await stub.ListExecutions(S.ListExecutionsRequest(job_id=created.job.id), metadata=meta)).executions
    assert execution.id == claimed.id and execution.due_at.ToDatetime(tzinfo=UTC) == due + timedelta(days=1)
    alerts = await admin_pb2_grpc.AdminServiceStub(channel).ListAlerts(
        admin_pb2.ListAlertsRequest(), metadata=running.admin_metadata()
    )
    [alert] = [a for a in alerts.alerts if a.kind == admin_pb2.ALERT_KIND_CALENDAR_RUNS_CHANGED]
    assert alert.tenant == "acme" and claimed.id in alert.details["runs"]


@pytest.mark.parametrize(
    ("calendar", "field", "code"),
    [
        (job_pb2.JobCalendar(name="theirs", rule=job_pb2.CALENDAR_RULE_NEXT), "job.calendar.name", "FAILED_PRECONDITION"),
        (job_pb2.JobCalendar(name="nope", rule=job_pb2.CALENDAR_RULE_NEXT), "job.calendar.name", "FAILED_PRECONDITION"),
        (job_pb2.JobCalendar(name="x" * 65, rule=job_pb2.CALENDAR_RULE_NEXT), "job.calendar.name", "INVALID_ARGUMENT"),
        (job_pb2.JobCalendar(name="x" * 65_000, rule=job_pb2.CALENDAR_RULE_NEXT), "job.calendar.name", "INVALID_ARGUMENT"),
        (job_pb2.JobCalendar(name="da\x00ys", rule=job_pb2.CALENDAR_RULE_NEXT), "job.calendar.name", "INVALID_ARGUMENT"),
        (job_pb2.JobCalendar(name="", rule=job_pb2.CALENDAR_RULE_NEXT), "job.calendar.name", "INVALID_ARGUMENT"),
        (job_pb2.JobCalendar(name="days"), "job.calendar.rule", "INVALID_ARGUMENT"),
        (job_pb2.JobCalendar(name="days", rule=999), "job.calendar.rule", "INVALID_ARGUMENT"),
        (job_pb2.JobCalendar(name="theirs", rule=job_pb2.CALENDAR_RULE_PREVIOUS), "job.calendar.name",
         "FAILED_PRECONDITION"),
        (job_pb2.JobCalendar(name="days", rule=-1), "job.calendar.rule", "INVALID_ARGUMENT"),
    ],
)
async def test_hostile_calendar_fields_are_refused_and_nothing_is_written(cluster, calendar, field, code) -> None:
    _, stub, key, globex, _ = cluster
    meta = bearer(key)
    await make_calendar(stub, meta, [])
    await make_calendar(stub, bearer(globex), [], name="theirs")  # another tenant's: invisible to acme
    job = job_at(datetime(2031, 6, 1, tzinfo=UTC))
    job.calendar.CopyFrom(calendar)
    for call in (
        lambda: stub.CreateJob(S.CreateJobRequest(job=job, request_id="h1"), metadata=meta),
        lambda: stub.BatchCreateJobs(S.BatchCreateJobsRequest(
            items=[S.CreateJobRequest(job=job, request_id="h2")]), metadata=meta),
    ):  # fmt: skip
        try:
            reply = await call()
        except grpc.aio.AioRpcError as error:  # (a NUL byte refuses a whole batch, at items[0].<field>)
            assert error.code().name == code
            if code == "INVALID_ARGUMENT":
                assert any(name.endswith(field) for name in violations(error)), violations(error)
            else:
                assert field in error.details()
        else:
            [result] = reply.results
            assert result.error.code == grpc.StatusCode[code].value[0] and field in result.error.message
    # An update to one of those is refused too.
    valid = await stub.CreateJob(S.CreateJobRequest(job=job_at(datetime(2031, 6, 1, tzinfo=UTC)), request_id="ok"),
                                 metadata=meta)  # fmt: skip
    patch = job_pb2.Job(id=valid.job.id, version=valid.job.version, calendar=calendar)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UpdateJob(S.UpdateJobRequest(job=patch, update_mask=field_mask_pb2.FieldMask(paths=["calendar"])),
                             metadata=meta)  # fmt: skip
    assert caught.value.code().name == code
    if code == "FAILED_PRECONDITION":  # a batch answers the item (a malformed one is refused as UpdateJob is)
        batch = await stub.BatchUpdateJobs(S.BatchUpdateJobsRequest(items=[S.UpdateJobRequest(
            job=patch, update_mask=field_mask_pb2.FieldMask(paths=["calendar"]))]), metadata=meta)  # fmt: skip
        [result] = batch.results
        assert result.error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0] and field in result.error.message
    listed = await stub.ListJobs(S.ListJobsRequest(), metadata=meta)
    assert [j.id for j in listed.jobs] == [valid.job.id]
    assert listed.jobs[0].calendar.name == "days"


async def test_the_dry_run_of_an_update_that_names_a_calendar_shows_the_moved_run(cluster) -> None:
    _, stub, key, _, _ = cluster
    meta = bearer(key)
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(days=10)
    await make_calendar(stub, meta, [at.date().isoformat()])
    plain = job_at(at)
    plain.ClearField("calendar")
    created = await stub.CreateJob(S.CreateJobRequest(job=plain, request_id="r5"), metadata=meta)
    patch = job_pb2.Job(id=created.job.id, version=created.job.version,
                        calendar=job_pb2.JobCalendar(name="days", rule=job_pb2.CALENDAR_RULE_NEXT))  # fmt: skip
    mask = field_mask_pb2.FieldMask(paths=["calendar"])
    reply = await stub.UpdateJob(S.UpdateJobRequest(job=patch, update_mask=mask, validate_only=True), metadata=meta)
    diff = reply.run_diff
    assert (diff.moved_count, diff.added_count, diff.removed_count) == (1, 0, 0)
    [moved] = diff.moved
    assert moved.before.due_at.ToDatetime(tzinfo=UTC) == at
    assert moved.after.due_at.ToDatetime(tzinfo=UTC) == at + timedelta(days=1)
    assert moved.after.nominal_at == moved.before.nominal_at
    skip = job_pb2.Job(id=created.job.id, version=created.job.version,
                       calendar=job_pb2.JobCalendar(name="days", rule=job_pb2.CALENDAR_RULE_SKIP))  # fmt: skip
    reply = await stub.UpdateJob(S.UpdateJobRequest(job=skip, update_mask=mask, validate_only=True), metadata=meta)
    assert (reply.run_diff.removed_count, reply.run_diff.moved_count) == (1, 0)
    earlier = job_pb2.Job(id=created.job.id, version=created.job.version,
                          calendar=job_pb2.JobCalendar(name="days", rule=job_pb2.CALENDAR_RULE_PREVIOUS))  # fmt: skip
    reply = await stub.UpdateJob(S.UpdateJobRequest(job=earlier, update_mask=mask, validate_only=True), metadata=meta)
    [moved] = reply.run_diff.moved
    assert moved.after.due_at.ToDatetime(tzinfo=UTC) == at - timedelta(days=1)
    assert moved.after.nominal_at == moved.before.nominal_at
    # Applied: the job reads its nominal cursor; its next run shows the day before.
    applied = await stub.UpdateJob(S.UpdateJobRequest(job=earlier, update_mask=mask), metadata=meta)
    assert applied.job.next_run_at.ToDatetime(tzinfo=UTC) == at
    got = await stub.GetJob(S.GetJobRequest(id=created.job.id, next_runs=1), metadata=meta)
    assert got.next_runs[0].due_at.ToDatetime(tzinfo=UTC) == at - timedelta(days=1)
