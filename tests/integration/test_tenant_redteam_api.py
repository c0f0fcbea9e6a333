"""Tenant A's key against tenant B's data, across calls: every Scheduler RPC
that names a job or an execution answers B's id exactly as it answers an id
that does not exist (code, message and details, the id aside), so no answer
tells A that B's id exists; and nothing of B changes. A tenant's creates,
batches and deletes racing at its max_jobs on two servers leave the count
exact."""

from __future__ import annotations

import asyncio
import base64
import random
from datetime import datetime, timedelta, timezone

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import field_mask_pb2, timestamp_pb2
from google.protobuf.message_factory import GetMessageClass
from google.rpc import code_pb2
from tickwheel.v1 import (
    admin_pb2, admin_pb2_grpc, calendar_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2,
)

from tests.support.server import running_server

from .test_batch_create_api import item, job_count
from .test_create_group_commit_api import set_max_jobs
from .test_server_api import bearer, cron_job


def _ts(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def _absent(job_id: str) -> str:
    """An id of the same shape and length that names no job: the ULID's last
    character changed."""
    return job_id[:-1] + ("Z" if job_id[-1] != "Z" else "Y")


def _calls(job_id: str, execution_id: str, calendar: str) -> list[tuple[str, object]]:
    """(method, request) for every Scheduler call that names a job, an execution or a calendar."""
    now = datetime.now(timezone.utc)
    window = dict(from_at=_ts(now - timedelta(days=30)), to_at=_ts(now - timedelta(days=1)))
    mask = field_mask_pb2.FieldMask
    return [
        ("GetJob", scheduler_pb2.GetJobRequest(id=job_id)),
        ("GetJob", scheduler_pb2.GetJobRequest(id=job_id, revision=1)),
        ("ListJobRevisions", scheduler_pb2.ListJobRevisionsRequest(id=job_id)),
        ("GetCalendar", calendar_pb2.GetCalendarRequest(name=calendar)),
        ("UpdateCalendar", calendar_pb2.UpdateCalendarRequest(
            calendar=calendar_pb2.Calendar(name=calendar, version=1, holidays=["2030-01-02"]),
            update_mask=mask(paths=["holidays"]))),
        ("DeleteCalendar", calendar_pb2.DeleteCalendarRequest(name=calendar)),
        ("DeleteCalendar", calendar_pb2.DeleteCalendarRequest(name=calendar, version=5)),
        ("CreateJob", scheduler_pb2.CreateJobRequest(request_id=f"cal-{calendar}", job=_with_calendar(calendar))),
        ("UpdateJob", scheduler_pb2.UpdateJobRequest(job=job_pb2.Job(id=job_id, version=1, name="pwned"),
                                                     update_mask=mask(paths=["name"]))),
        ("UpdateJob", scheduler_pb2.UpdateJobRequest(job=job_pb2.Job(id=job_id, version=9, name="stale"),
                                                     update_mask=mask(paths=["name"]))),
        ("UpdateJob", scheduler_pb2.UpdateJobRequest(job=job_pb2.Job(id=job_id, version=1, name="pwned"),
                                                     update_mask=mask(paths=["name"]), validate_only=True)),
        ("UpdateJob", scheduler_pb2.UpdateJobRequest(
            job=job_pb2.Job(id=job_id, version=1, schedule=cron_job("0 9 * * *", "Asia/Tokyo").schedule),
            update_mask=mask(paths=["schedule"]), validate_only=True)),
        ("DeleteJob", scheduler_pb2.DeleteJobRequest(id=job_id, version=7)),
        ("PauseJob", scheduler_pb2.PauseJobRequest(id=job_id, reason="mine now")),
        ("ResumeJob", scheduler_pb2.ResumeJobRequest(id=job_id)),
        ("TriggerJob", scheduler_pb2.TriggerJobRequest(id=job_id, request_id="probe")),
        ("BackfillJob", scheduler_pb2.BackfillJobRequest(id=job_id, dry_run=True, **window)),
        ("PreviewSchedule", scheduler_pb2.PreviewScheduleRequest(job_id=job_id)),
        ("ListExecutions", scheduler_pb2.ListExecutionsRequest(job_id=job_id)),
        ("ListDeadLetters", scheduler_pb2.ListDeadLettersRequest(job_id=job_id)),
        ("GetExecution", scheduler_pb2.GetExecutionRequest(id=execution_id)),
        ("CancelExecution", scheduler_pb2.CancelExecutionRequest(id=execution_id, reason="mine")),
        ("ReplayDeadLetter", scheduler_pb2.ReplayDeadLetterRequest(execution_id=execution_id)),
        ("BatchUpdateJobs", scheduler_pb2.BatchUpdateJobsRequest(items=[scheduler_pb2.UpdateJobRequest(
            job=job_pb2.Job(id=job_id, version=1, name="pwned"), update_mask=mask(paths=["name"]))])),
        ("BatchDeleteJobs", scheduler_pb2.BatchDeleteJobsRequest(items=[
            scheduler_pb2.DeleteJobRequest(id=job_id), scheduler_pb2.DeleteJobRequest(id=job_id, version=3)])),
        ("BatchPauseJobs", scheduler_pb2.BatchPauseJobsRequest(items=[scheduler_pb2.PauseJobRequest(id=job_id)])),
        ("BatchResumeJobs", scheduler_pb2.BatchResumeJobsRequest(items=[scheduler_pb2.ResumeJobRequest(id=job_id)])),
    ]  # fmt: skip


def _with_calendar(name: str) -> job_pb2.Job:
    job = cron_job("0 9 * * *", "Europe/London")
    job.calendar.CopyFrom(job_pb2.JobCalendar(name=name, rule=job_pb2.CALENDAR_RULE_SKIP))
    return job


async def _answer(scheduler, method: str, request, key: str, ids: tuple[str, ...]) -> tuple:
    """The call's answer as bytes with every one of ``ids`` blanked: a
    status (code, message, details) or a response."""
    try:
        reply = await getattr(scheduler, method)(request, metadata=bearer(key))
        text = repr(reply.SerializeToString(deterministic=True))
        code = "OK"
    except grpc.aio.AioRpcError as error:
        code = error.code().name
        details = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
        text = f"{error.details()}|{details!r}"
    for ident in ids:
        text = text.replace(ident, "<id>")
    return code, text


async def test_another_tenants_ids_answer_as_ids_that_do_not_exist(server) -> None:
    acme, other = await server.create_tenant("acme"), await server.create_tenant("other")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        theirs = (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="t"),
                                            metadata=bearer(other))).job  # fmt: skip
        triggered = (await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=theirs.id, request_id="run"),
                                                metadata=bearer(other))).execution  # fmt: skip
        await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="ukcal", time_zone="Europe/London", holidays=["2030-01-01"]),
            request_id="c"), metadata=bearer(other))  # fmt: skip
        missing = _absent(theirs.id)
        missing_execution = triggered.id.replace(theirs.id, missing)
        ids = (theirs.id, missing, "ukcal", "ukcaZ")
        for (method, probe), (_, control) in zip(_calls(theirs.id, triggered.id, "ukcal"),
                                                 _calls(missing, missing_execution, "ukcaZ")):
            seen = await _answer(scheduler, method, probe, acme, ids)
            expected = await _answer(scheduler, method, control, acme, ids)
            assert seen == expected, f"{method} answers another tenant's id unlike a missing one"

        job = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=theirs.id), metadata=bearer(other))).job
        assert (job.name, job.version, job.state) == ("report", 1, job_pb2.JOB_STATE_ACTIVE), "B's job changed"
        execution = (await scheduler.GetExecution(scheduler_pb2.GetExecutionRequest(id=triggered.id),
                                                  metadata=bearer(other))).execution  # fmt: skip
        assert execution.status == triggered.status and not execution.dead_reason, "B's execution changed"
        calendar = (await scheduler.GetCalendar(calendar_pb2.GetCalendarRequest(name="ukcal"),
                                                metadata=bearer(other))).calendar  # fmt: skip
        assert (calendar.version, list(calendar.holidays)) == (1, ["2030-01-01"]), "B's calendar changed"


@pytest.mark.postgres
@pytest.mark.etcd
async def test_creates_batches_and_deletes_on_two_servers_keep_max_jobs_exact(postgres_url, etcd_endpoint) -> None:
    """A tenant at its max_jobs on two servers: CreateJob (group commits),
    BatchCreateJobs (with repeats of earlier request ids) and BatchDeleteJobs
    at once. Afterwards the count GetTenant reports is the rows, never over
    max_jobs, the jobs are exactly those answered created and not deleted,
    and every quota slot holds (used <= allowance, allowances within the limit)."""
    limit = 40
    async with running_server(postgres_url, etcd_endpoint) as one, running_server(postgres_url, etcd_endpoint) as two:
        key = await one.create_tenant("acme")
        async with grpc.aio.insecure_channel(one.address) as a, grpc.aio.insecure_channel(two.address) as b:
            await set_max_jobs(one, a, limit)
            stubs = [scheduler_pb2_grpc.SchedulerServiceStub(channel) for channel in (a, b)]
            created: dict[str, str] = {}  # request id -> job id, as answered
            deleted: set[str] = set()
            refused = 0
            rng = random.Random(21)

            async def writer(w: int) -> None:
                nonlocal refused
                scheduler = stubs[w % 2]
                for n in range(30):
                    roll = rng.random()
                    if roll < 0.3:
                        rid = f"w{w}-{n}"
                        try:
                            reply = await scheduler.CreateJob(item(rid), metadata=bearer(key))
                        except grpc.aio.AioRpcError as error:
                            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
                            refused += 1
                        else:
                            created.setdefault(rid, reply.job.id)
                            assert created[rid] == reply.job.id
                    elif roll < 0.65:
                        rids = [f"w{w}-{n}-{i}" for i in range(rng.randint(1, 12))] + rng.sample(
                            sorted(created), min(2, len(created)))
                        reply = await scheduler.BatchCreateJobs(
                            scheduler_pb2.BatchCreateJobsRequest(items=[item(r) for r in rids]), metadata=bearer(key))
                        for rid, result in zip(rids, reply.results):
                            if result.HasField("job"):
                                created.setdefault(rid, result.job.job.id)
                                assert created[rid] == result.job.job.id, "a repeat answered another job"
                            elif result.error.code == code_pb2.RESOURCE_EXHAUSTED:
                                refused += 1
                            else:
                                assert result.error.code == code_pb2.NOT_FOUND, result.error  # a deleted job's id
                                assert created[rid] in deleted
                    else:
                        alive = sorted(set(created.values()) - deleted)
                        victims = rng.sample(alive, min(len(alive), rng.randint(1, 6)))
                        if not victims:
                            continue
                        reply = await scheduler.BatchDeleteJobs(scheduler_pb2.BatchDeleteJobsRequest(
                            items=[scheduler_pb2.DeleteJobRequest(id=v) for v in victims + victims[:1]]),
                            metadata=bearer(key))  # fmt: skip
                        for victim, result in zip(victims + victims[:1], reply.results):
                            if result.HasField("deleted"):
                                assert victim not in deleted, "deleted twice"
                                deleted.add(victim)
                            else:
                                assert result.error.code == code_pb2.NOT_FOUND, result.error

            await asyncio.gather(*(writer(w) for w in range(8)))
            assert refused, "the writers reached max_jobs"
            count = await job_count(one, a)
        engine = sa.create_engine(postgres_url)
        try:
            with engine.connect() as conn:
                rows = set(conn.execute(sa.text("SELECT id FROM jobs WHERE tenant = 'acme'")).scalars())
                slots = conn.execute(sa.text(
                    "SELECT used, allowance FROM tenant_quota WHERE tenant = 'acme'")).all()  # fmt: skip
        finally:
            engine.dispose()
        assert rows == set(created.values()) - deleted
        assert count == len(rows) <= limit
        assert all(used <= allowance for used, allowance in slots) and sum(a for _, a in slots) <= limit
        assert sum(used for used, _ in slots) == len(rows)


@pytest.mark.postgres
@pytest.mark.etcd
async def test_one_request_id_sent_to_two_servers_at_once_creates_one_job(postgres_url, etcd_endpoint) -> None:
    """Each request id goes to both servers at the same instant, as CreateJob
    on one and in a BatchCreateJobs on the other (a client retrying through
    another server before the first answered): one job per id, both answers
    name it, exactly one says created."""
    async with running_server(postgres_url, etcd_endpoint) as one, running_server(postgres_url, etcd_endpoint) as two:
        key = await one.create_tenant("acme")
        async with grpc.aio.insecure_channel(one.address) as a, grpc.aio.insecure_channel(two.address) as b:
            first, second = (scheduler_pb2_grpc.SchedulerServiceStub(channel) for channel in (a, b))
            rids = [f"twice-{i}" for i in range(40)]

            async def single(stub, rid: str) -> tuple[str, bool]:
                reply = await stub.CreateJob(item(rid), metadata=bearer(key))
                return reply.job.id, reply.created

            async def batch(stub, chunk: list[str]) -> list[tuple[str, bool]]:
                reply = await stub.BatchCreateJobs(
                    scheduler_pb2.BatchCreateJobsRequest(items=[item(r) for r in chunk]), metadata=bearer(key))
                return [(r.job.job.id, r.job.created) for r in reply.results]

            for n in range(0, len(rids), 8):
                chunk = rids[n:n + 8]
                singles = [single(first if i % 2 else second, rid) for i, rid in enumerate(chunk)]
                batched = batch(second, chunk[::2]), batch(first, chunk[1::2])
                answers = await asyncio.gather(*singles, *batched)
                by_batch = dict(zip(chunk[::2], answers[-2])) | dict(zip(chunk[1::2], answers[-1]))
                for rid, (job_id, created) in zip(chunk, answers[:-2]):
                    other_id, other_created = by_batch[rid]
                    assert job_id == other_id, f"{rid}: two jobs"
                    assert created != other_created, f"{rid}: created twice or by neither"
            assert await job_count(one, a) == len(rids)


DEFAULT_RECEIVE = 4 * 1024 * 1024
"""What a stock gRPC client takes in one message (every SDK keeps the default)."""


async def test_pages_of_jobs_and_runs_at_the_payload_quota_fit_a_default_client(server) -> None:
    """A tenant's jobs each with a payload at the default quota (64 KiB),
    triggered with such payloads too: ListJobs at its default and largest
    page sizes (100 jobs were 6.5 MB), ListExecutions and ListDeadLetters
    answer within what a default client receives, a short page when it must,
    and paging reaches every job and run exactly once."""
    key = await server.create_tenant("acme")
    payload = bytes(range(256)) * 256  # 64 KiB, the default max_payload_bytes
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        made = []
        for n in range(0, 120, 40):
            items = []
            for i in range(n, n + 40):
                job = cron_job()
                job.payload = payload
                items.append(scheduler_pb2.CreateJobRequest(job=job, request_id=f"big-{i}"))
            reply = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=items),
                                                    metadata=bearer(key))  # fmt: skip
            made += [r.job.job.id for r in reply.results]
        assert len(set(made)) == 120

        for page_size in (0, 1000):
            seen, token, pages = [], "", 0
            while True:
                reply = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=page_size, page_token=token),
                                                 metadata=bearer(key))  # fmt: skip
                assert reply.ByteSize() < DEFAULT_RECEIVE and reply.jobs
                assert all(job.payload == payload for job in reply.jobs)
                seen += [job.id for job in reply.jobs]
                pages += 1
                token = reply.next_page_token
                if not token:
                    break
            assert seen == sorted(made) and pages > 1, page_size

        target = made[0]
        for i in range(120):
            await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=target, request_id=f"t{i}", payload=payload),
                                       metadata=bearer(key))  # fmt: skip
        runs, token = [], ""
        while True:
            reply = await scheduler.ListExecutions(
                scheduler_pb2.ListExecutionsRequest(job_id=target, page_size=500, page_token=token),
                metadata=bearer(key))  # fmt: skip
            assert reply.ByteSize() < DEFAULT_RECEIVE and reply.executions
            runs += [execution.id for execution in reply.executions]
            token = reply.next_page_token
            if not token:
                break
        assert len(runs) == len(set(runs)) == 120
        reply = await scheduler.ListDeadLetters(scheduler_pb2.ListDeadLettersRequest(page_size=500),
                                                metadata=bearer(key))  # fmt: skip
        assert reply.ByteSize() < DEFAULT_RECEIVE


async def test_batch_pause_of_jobs_at_the_payload_quota_fits_a_default_client(server) -> None:
    """BatchPauseJobs (as BatchUpdateJobs and BatchResumeJobs) answered each
    item with the job, its payload included: 100 small items pausing jobs
    whose payloads are at the default quota answered 6.5 MB, past what a
    default client receives, the jobs paused and every retry told
    RESOURCE_EXHAUSTED. Now the full answer is refused before anything is
    written, and the basic view (JobView) answers readable
    (``test_batch_view_api.py`` tests every batch so)."""
    key = await server.create_tenant("acme")
    payload = bytes(range(256)) * 256
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        made = []
        for n in range(0, 100, 50):
            items = []
            for i in range(n, n + 50):
                job = cron_job()
                job.payload = payload
                items.append(scheduler_pb2.CreateJobRequest(job=job, request_id=f"big-{i}"))
            reply = await scheduler.BatchCreateJobs(
                scheduler_pb2.BatchCreateJobsRequest(items=items, view=scheduler_pb2.JOB_VIEW_BASIC), metadata=bearer(key)
            )
            made += [r.job.job.id for r in reply.results]
        request = scheduler_pb2.BatchPauseJobsRequest(items=[scheduler_pb2.PauseJobRequest(id=i) for i in made])
        assert request.ByteSize() < 10_000
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await scheduler.BatchPauseJobs(request, metadata=bearer(key))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        listed = await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=1), metadata=bearer(key))
        assert listed.jobs[0].state == job_pb2.JOB_STATE_ACTIVE  # nothing written
        request.view = scheduler_pb2.JOB_VIEW_BASIC
        reply = await scheduler.BatchPauseJobs(request, metadata=bearer(key))
        assert reply.paused_count == 100 and reply.ByteSize() < DEFAULT_RECEIVE


async def test_manual_runs_are_bounded_never_early_and_follow_the_jobs_state(server) -> None:
    """BackfillJob over ten years of a minutely cron is refused whole
    (INVALID_ARGUMENT `to_at`, nothing written); exactly 10 000 occurrences
    are taken, each due at or after its nominal instant and not before the
    call; TriggerJob of a paused job is scheduled (it is asked for, so it runs:
    docs/architecture.md, "Pause holds"), of a deleted one NOT_FOUND as a job
    that never existed. The tenant's rate is raised: each of these calls
    computes about 10 000 fires, a second of the default rate's worth
    (test_schedule_work_rate_api.py)."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        await admin_pb2_grpc.AdminServiceStub(channel).UpdateTenant(admin_pb2.UpdateTenantRequest(
            tenant=admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(requests_per_second=1_000_000)),
            update_mask=field_mask_pb2.FieldMask(paths=["quotas"])),
            metadata=server.admin_metadata())  # fmt: skip
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job = (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=cron_job("* * * * *", "UTC"),
                                                                        request_id="m"),
                                         metadata=bearer(key))).job  # fmt: skip
        end = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(days=1)

        async def backfill(start: datetime, dry_run: bool = False):
            return await scheduler.BackfillJob(scheduler_pb2.BackfillJobRequest(
                id=job.id, from_at=_ts(start), to_at=_ts(end), dry_run=dry_run), metadata=bearer(key))  # fmt: skip

        for start in (end - timedelta(days=3653), end - timedelta(minutes=10_001)):
            try:
                await backfill(start)
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "to_at" in error.details() + repr(
                    error.trailing_metadata())
            else:
                raise AssertionError("a window of more than 10 000 occurrences was taken")
        history = await scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job.id),
                                                 metadata=bearer(key))  # fmt: skip
        # The dispatcher claims the minutes still to come; nothing lies in the refused windows.
        assert not [e for e in history.executions if e.nominal_at.ToDatetime(tzinfo=timezone.utc) < end], \
            "a refused backfill wrote"

        called = datetime.now(timezone.utc)
        done = await backfill(end - timedelta(minutes=10_000))
        assert (done.created_count, done.existing_count, len(done.occurrences)) == (10_000, 0, 10_000)
        page = await scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job.id, page_size=500),
                                              metadata=bearer(key))  # fmt: skip
        assert len(page.executions) == 500
        for execution in page.executions:
            due = execution.due_at.ToDatetime(tzinfo=timezone.utc)
            assert due >= execution.nominal_at.ToDatetime(tzinfo=timezone.utc) and due >= called - timedelta(seconds=1)

        await scheduler.PauseJob(scheduler_pb2.PauseJobRequest(id=job.id), metadata=bearer(key))
        asked = (await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=job.id, request_id="while-paused"),
                                            metadata=bearer(key))).execution  # fmt: skip
        assert asked.status == job_pb2.EXECUTION_STATUS_SCHEDULED
        await scheduler.DeleteJob(scheduler_pb2.DeleteJobRequest(id=job.id), metadata=bearer(key))
        answers = []
        for ident in (job.id, _absent(job.id)):
            try:
                await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=ident, request_id="after"),
                                           metadata=bearer(key))  # fmt: skip
            except grpc.aio.AioRpcError as error:
                answers.append((error.code(), error.details().replace(ident, "<id>")))
        assert answers[0] == answers[1] and answers[0][0] == grpc.StatusCode.NOT_FOUND


async def test_request_ids_and_page_tokens_of_another_tenant_name_nothing_of_it(server) -> None:
    """Globex sends the request ids acme used (CreateJob, BatchCreateJobs,
    CreateCalendar, TriggerJob) and acme's page tokens, replayed and
    re-crafted around acme's keys: each request id makes globex's own (a
    request id is remembered per tenant), each page holds globex's items
    only, and no answer carries an id or a name of acme's."""
    acme, globex = await server.create_tenant("acme"), await server.create_tenant("globex")
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)

        async def make(key: str, who: str) -> tuple[list[str], str, str]:
            job = cron_job()
            job.name = f"{who}-secret"
            one = (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="shared"),
                                             metadata=bearer(key))).job  # fmt: skip
            batch = await scheduler.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=[
                item("batch-shared", job), item("batch-other", job)]), metadata=bearer(key))  # fmt: skip
            await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(name=f"{who}cal", time_zone="UTC", holidays=["2030-01-01"]),
                request_id="shared"), metadata=bearer(key))  # fmt: skip
            await scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(name=f"{who}cal2", time_zone="UTC"), request_id="c2"),
                metadata=bearer(key))  # fmt: skip
            run = await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=one.id, request_id="shared"),
                                             metadata=bearer(key))  # fmt: skip
            await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=one.id, request_id="again"),
                                       metadata=bearer(key))  # fmt: skip
            assert run.created and one.name == f"{who}-secret"
            return [one.id, *(r.job.job.id for r in batch.results)], run.execution.id, f"{who}cal"

        acme_jobs, acme_run, acme_cal = await make(acme, "acme")
        globex_jobs, globex_run, _ = await make(globex, "globex")
        assert not set(acme_jobs) & set(globex_jobs) and acme_run != globex_run
        calendars = await scheduler.ListCalendars(calendar_pb2.ListCalendarsRequest(), metadata=bearer(globex))
        assert [c.name for c in calendars.calendars] == ["globexcal", "globexcal2"]

        def crafted(key: str) -> str:
            return base64.urlsafe_b64encode(f"p1:{key}".encode()).decode()

        first = min(acme_jobs + globex_jobs)
        oldest = (await scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=acme_jobs[0]),
                                                 metadata=bearer(acme))).executions[-1]  # fmt: skip
        tokens = [
            (await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=1), metadata=bearer(acme))).next_page_token,
            (await scheduler.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=acme_jobs[0], page_size=1),
                                            metadata=bearer(acme))).next_page_token,  # fmt: skip
            (await scheduler.ListCalendars(calendar_pb2.ListCalendarsRequest(page_size=1),
                                           metadata=bearer(acme))).next_page_token,  # fmt: skip
            crafted(""), crafted(first[:-1]), crafted("acmecal"), crafted("a"),
            crafted(f"{oldest.nominal_at.ToMicroseconds() + 1}:{oldest.id}z"),
        ]
        assert all(tokens)
        secrets = [*acme_jobs, acme_run, acme_cal, "acme"]
        for token in tokens:
            for method, request in (
                ("ListJobs", scheduler_pb2.ListJobsRequest(page_token=token)),
                ("ListExecutions", scheduler_pb2.ListExecutionsRequest(job_id=globex_jobs[0], page_token=token)),
                ("ListDeadLetters", scheduler_pb2.ListDeadLettersRequest(page_token=token)),
                ("ListCalendars", calendar_pb2.ListCalendarsRequest(page_token=token)),
                ("ListJobRevisions", scheduler_pb2.ListJobRevisionsRequest(id=globex_jobs[0], page_token=token)),
            ):
                code, text = await _answer(scheduler, method, request, globex, ())
                assert code in ("OK", "INVALID_ARGUMENT"), (method, code, text)
                assert not any(secret in text for secret in secrets), (method, token, text)


async def test_every_rpc_refuses_every_credential_but_its_own_kind_and_writes_nothing(server) -> None:
    """Every method of every service, found from the service descriptors
    (so a method added later is attacked too), called with each kind of
    credential it does not take: a tenant API key and a worker credential on
    AdminService, a worker credential and the admin token on SchedulerService,
    a tenant key and the admin token on WorkerService; PERMISSION_DENIED,
    and no credential (a service's first method) UNAUTHENTICATED. Nothing is written: the tenants,
    keys, credentials and jobs are as before."""
    key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"])
    admin_token = server.admin_metadata()[0][1].removeprefix("Bearer ")
    wrong = {
        "AdminService": {"tenant key": key, "worker credential": credential},
        "SchedulerService": {"worker credential": credential, "admin token": admin_token},
        "WorkerService": {"tenant key": key, "admin token": admin_token},
    }
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)

        async def state() -> list:
            tenants = await admin.ListTenants(admin_pb2.ListTenantsRequest(), metadata=server.admin_metadata())
            keys = await admin.ListApiKeys(admin_pb2.ListApiKeysRequest(tenant="acme"), metadata=server.admin_metadata())
            creds = await admin.ListWorkerCredentials(admin_pb2.ListWorkerCredentialsRequest(),
                                                      metadata=server.admin_metadata())  # fmt: skip
            jobs = await admin.SearchJobs(admin_pb2.SearchJobsRequest(), metadata=server.admin_metadata())
            return [m.SerializeToString(deterministic=True) for m in (tenants, keys, creds, jobs)]

        before = await state()
        called = 0
        for file in (admin_pb2, scheduler_pb2, worker_pb2):
            for service in file.DESCRIPTOR.services_by_name.values():
                for index, method in enumerate(service.methods):
                    request_class = GetMessageClass(method.input_type)
                    response_class = GetMessageClass(method.output_type)
                    path = f"/{service.full_name}/{method.name}"
                    # No credential once a service: failed authentications are limited per client address.
                    for who, secret in [*wrong[service.name].items(), *([("no credential", None)] if not index else [])]:
                        metadata = bearer(secret) if secret else None
                        expected = grpc.StatusCode.PERMISSION_DENIED if secret else grpc.StatusCode.UNAUTHENTICATED
                        code = await _status_of(channel, method, path, request_class, response_class, metadata)
                        assert code == expected, f"{path} with {who}: {code}"
                        called += 1
        assert called >= 2 * 45
        assert await state() == before


async def _status_of(channel, method, path: str, request_class, response_class, metadata):
    """The status a call of ``method`` ends with (a stream: after one default message)."""
    serialize, deserialize = request_class.SerializeToString, response_class.FromString
    try:
        if method.client_streaming:
            call = channel.stream_stream(path, request_serializer=serialize, response_deserializer=deserialize)(
                metadata=metadata)
            await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w", handlers=["echo"])))
            async for _ in call:
                pass
        elif method.server_streaming:
            async for _ in channel.unary_stream(path, request_serializer=serialize, response_deserializer=deserialize)(
                    request_class(), metadata=metadata):
                pass
        else:
            await channel.unary_unary(path, request_serializer=serialize, response_deserializer=deserialize)(
                request_class(), metadata=metadata)
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK
