"""Safe changes through the real gRPC server, on the embedded stores and on
PostgreSQL + etcd: UpdateJob with ``validate_only`` (nothing written, the run
diff), job revisions (ListJobRevisions, GetJob at a revision, rollback), and
the hostile inputs of both (docs/architecture.md, "Job changes")."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from datetime import timedelta

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer, violations
from tickwheel_server.cli.main import main as cli_main

DAY = 86400


@pytest.fixture
async def client(server):
    """(scheduler stub, acme's metadata, globex's metadata, acme's API key id)."""
    acme, globex = await server.create_tenant("acme"), await server.create_tenant("globex")
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield scheduler_pb2_grpc.SchedulerServiceStub(channel), bearer(acme), bearer(globex), acme.split("_")[1]


def cli(*argv: str) -> tuple[int, str, str]:
    """``tickwheel ARGV`` in-process (run it in a thread: it blocks): exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(argv))
    return code, out.getvalue(), err.getvalue()


def daily(expression: str = "0 9 * * *", zone: str = "Europe/London") -> job_pb2.Job:
    return job_pb2.Job(
        name="daily",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone=zone)),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        payload=b"v1",
    )


async def create(scheduler, meta, job: job_pb2.Job | None = None, request_id: str = "c1") -> job_pb2.Job:
    return (await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job or daily(), request_id=request_id), metadata=meta)).job


def change(job: job_pb2.Job, **fields) -> job_pb2.Job:
    patch = job_pb2.Job(id=job.id, version=job.version)
    for name, value in fields.items():
        getattr(patch, name).CopyFrom(value)
    return patch


def dry(patch: job_pb2.Job, paths: list[str], days: int | None = 7) -> scheduler_pb2.UpdateJobRequest:
    request = scheduler_pb2.UpdateJobRequest(
        job=patch, update_mask=field_mask_pb2.FieldMask(paths=paths), validate_only=True
    )
    if days is not None:
        request.diff_window.CopyFrom(duration_pb2.Duration(seconds=days * DAY))
    return request


async def rpc_error(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call
    return error.value


def schedule(expression: str, zone: str) -> job_pb2.Schedule:
    return job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=expression, time_zone=zone))


async def test_validate_only_writes_nothing_and_answers_the_diff(client) -> None:
    scheduler, acme, _, _ = client
    job = await create(scheduler, acme)
    answer = await scheduler.UpdateJob(
        dry(change(job, schedule=schedule("0 9 * * *", "America/New_York")), ["schedule"], days=None), metadata=acme
    )
    # the answer: the changed definition, at the stored version
    assert answer.job.version == job.version and answer.job.schedule.cron.time_zone == "America/New_York"
    diff = answer.run_diff
    window = diff.to_at.ToDatetime() - diff.from_at.ToDatetime()
    assert window == timedelta(days=30) and not diff.window_truncated
    # A zone change keeps the wall time: every run shares a slot except at the window's edges.
    assert diff.unchanged_count == 0 and diff.moved_count >= 29 and diff.added_count + diff.removed_count <= 2
    assert diff.moved_count + diff.removed_count in (30, 31) and len(diff.moved) == diff.moved_count
    for moved in diff.moved:
        assert moved.before.local_time.endswith("T09:00:00+00:00")
        assert moved.after.local_time[10:] in ("T09:00:00-05:00", "T09:00:00-04:00")
        jitter = moved.before.due_at.ToDatetime() - moved.before.nominal_at.ToDatetime()
        assert moved.after.due_at.ToDatetime() - moved.after.nominal_at.ToDatetime() == jitter
    got = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=acme)).job
    assert (got.version, got.schedule.cron.time_zone, got.updated_at) == (job.version, "Europe/London", job.updated_at)
    listed = await scheduler.ListJobRevisions(scheduler_pb2.ListJobRevisionsRequest(id=job.id), metadata=acme)
    assert list(listed.revisions) == []


async def test_the_diff_of_an_expression_change_and_of_a_jitter_change(client) -> None:
    scheduler, acme, _, _ = client
    job = await create(scheduler, acme)
    weekdays = (await scheduler.UpdateJob(
        dry(change(job, schedule=schedule("0 9 * * 1-5", "Europe/London")), ["schedule"]), metadata=acme
    )).run_diff  # fmt: skip
    # seven consecutive days hold five weekdays and two weekend days, whatever today is
    assert (weekdays.unchanged_count, weekdays.removed_count, weekdays.added_count, weekdays.moved_count) == (5, 2, 0, 0)
    hour = (await scheduler.UpdateJob(
        dry(change(job, schedule=schedule("0 10 * * *", "Europe/London")), ["schedule"]), metadata=acme
    )).run_diff  # fmt: skip
    assert (hour.unchanged_count, hour.removed_count, hour.added_count, hour.moved_count) == (0, 7, 7, 0)
    assert all(a.local_time.endswith("T10:00:00+00:00") for a in hour.added)

    # jitter off: every run whose delay was not zero moves to its nominal instant (same occurrence)
    delay = job.next_due_at.ToDatetime() - job.next_run_at.ToDatetime()
    exact = (await scheduler.UpdateJob(dry(change(job, jitter=job_pb2.Jitter(exact=True)), ["jitter"]), metadata=acme)).run_diff
    assert (exact.added_count, exact.removed_count) == (0, 0)
    assert (exact.moved_count, exact.unchanged_count) == ((7, 0) if delay else (0, 7))
    for moved in exact.moved:
        assert moved.before.nominal_at == moved.after.nominal_at == moved.after.due_at
        assert moved.before.due_at.ToDatetime() - moved.before.nominal_at.ToDatetime() == delay


async def test_a_change_of_every_minute_is_bounded(client) -> None:
    scheduler, acme, _, _ = client
    job = await create(scheduler, acme)
    diff = (await scheduler.UpdateJob(
        dry(change(job, schedule=schedule("* * * * *", "Europe/London")), ["schedule"], days=366), metadata=acme
    )).run_diff  # fmt: skip
    assert diff.window_truncated and diff.added_count == 50_000 - diff.unchanged_count
    assert len(diff.added) == 100 and len(diff.removed) == 0
    assert diff.to_at.ToDatetime() - diff.from_at.ToDatetime() < timedelta(days=35)


async def test_validate_only_refuses_what_an_update_refuses(client) -> None:
    scheduler, acme, globex, _ = client
    job = await create(scheduler, acme)
    moved = change(job, schedule=schedule("0 9 * * *", "Asia/Tokyo"))
    theirs = await rpc_error(scheduler.UpdateJob(dry(moved, ["schedule"]), metadata=globex))
    assert theirs.code() == grpc.StatusCode.NOT_FOUND
    stale = job_pb2.Job()
    stale.CopyFrom(moved)
    stale.version = job.version + 1
    conflict = await rpc_error(scheduler.UpdateJob(dry(stale, ["schedule"]), metadata=acme))
    assert conflict.code() == grpc.StatusCode.FAILED_PRECONDITION
    bad = change(job, schedule=schedule("0 25 * * *", "Europe/London"))
    invalid = await rpc_error(scheduler.UpdateJob(dry(bad, ["schedule"]), metadata=acme))
    assert invalid.code() == grpc.StatusCode.INVALID_ARGUMENT and any(f.startswith("job.schedule") for f in violations(invalid))
    big = job_pb2.Job(id=job.id, version=job.version, payload=b"x" * (64 * 1024 + 1))
    quota = await rpc_error(scheduler.UpdateJob(dry(big, ["payload"]), metadata=acme))
    assert quota.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    for seconds in (366 * DAY + 1, -DAY, 59, 315_576_000_000):
        request = dry(moved, ["schedule"], days=None)
        request.diff_window.seconds = seconds
        error = await rpc_error(scheduler.UpdateJob(request, metadata=acme))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "diff_window" in violations(error), seconds
    without = dry(moved, ["schedule"])
    without.validate_only = False
    error = await rpc_error(scheduler.UpdateJob(without, metadata=acme))
    assert "diff_window" in violations(error)
    batch = await scheduler.BatchUpdateJobs(
        scheduler_pb2.BatchUpdateJobsRequest(items=[dry(moved, ["schedule"], days=None)]), metadata=acme
    )
    assert batch.failed_count == 1 and batch.results[0].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "validate_only" in batch.results[0].error.message or batch.results[0].error.details
    got = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=acme)).job
    assert (got.version, got.schedule.cron.time_zone) == (job.version, "Europe/London")


async def test_revisions_list_get_and_rollback(client) -> None:
    scheduler, acme, globex, key_id = client
    job = await create(scheduler, acme)
    v2 = (await scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(
        job=change(job, schedule=schedule("0 10 * * *", "Europe/London")),
        update_mask=field_mask_pb2.FieldMask(paths=["schedule"])), metadata=acme)).job  # fmt: skip
    patch = job_pb2.Job(id=job.id, version=v2.version, payload=b"v3")
    batch = await scheduler.BatchUpdateJobs(scheduler_pb2.BatchUpdateJobsRequest(items=[
        scheduler_pb2.UpdateJobRequest(job=patch, update_mask=field_mask_pb2.FieldMask(paths=["payload"]))]),
        metadata=acme)  # fmt: skip
    v3 = batch.results[0].job.job
    assert v3.version == 3

    listed = (await scheduler.ListJobRevisions(scheduler_pb2.ListJobRevisionsRequest(id=job.id), metadata=acme)).revisions
    assert [(r.version, r.changed_to_version, list(r.update_mask.paths)) for r in listed] == [
        (2, 3, ["payload"]), (1, 2, ["schedule"])
    ]
    assert all(r.changed_by == f"api_key:{key_id}" for r in listed)
    assert listed[1].job.schedule.cron.expression == "0 9 * * *" and listed[1].job.payload == b""  # listed without payload

    at_one = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id, revision=1), metadata=acme)
    assert (at_one.job.version, at_one.job.schedule.cron.expression, at_one.job.payload) == (1, "0 9 * * *", b"v1")
    assert list(at_one.next_runs) == [] and at_one.job.updated_at == job.updated_at
    current = await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id, revision=3), metadata=acme)
    assert current.job.payload == b"v3" and len(current.next_runs) == 5

    # rollback: the revision's definition at the current version, every mutable field
    rollback = at_one.job
    rollback.version = v3.version
    rolled = (await scheduler.UpdateJob(scheduler_pb2.UpdateJobRequest(job=rollback), metadata=acme)).job
    assert (rolled.version, rolled.schedule.cron.expression, rolled.payload) == (4, "0 9 * * *", b"v1")
    newest = (await scheduler.ListJobRevisions(
        scheduler_pb2.ListJobRevisionsRequest(id=job.id, page_size=1), metadata=acme
    ))  # fmt: skip
    assert [r.version for r in newest.revisions] == [3] and newest.next_page_token
    rest = await scheduler.ListJobRevisions(
        scheduler_pb2.ListJobRevisionsRequest(id=job.id, page_size=5, page_token=newest.next_page_token), metadata=acme
    )
    assert [r.version for r in rest.revisions] == [2, 1] and rest.next_page_token == ""


async def test_revision_requests_are_scoped_and_bounded(client) -> None:
    scheduler, acme, globex, _ = client
    job = await create(scheduler, acme)
    await scheduler.UpdateJob(
        scheduler_pb2.UpdateJobRequest(job=job_pb2.Job(id=job.id, version=1, name="renamed"),
                                       update_mask=field_mask_pb2.FieldMask(paths=["name"])), metadata=acme,
    )  # fmt: skip
    for call in (
        scheduler.ListJobRevisions(scheduler_pb2.ListJobRevisionsRequest(id=job.id), metadata=globex),
        scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id, revision=1), metadata=globex),
        scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id, revision=2**62), metadata=acme),
        scheduler.ListJobRevisions(scheduler_pb2.ListJobRevisionsRequest(id="no-such-job"), metadata=acme),
    ):
        assert (await rpc_error(call)).code() == grpc.StatusCode.NOT_FOUND
    for request, field in (
        (scheduler_pb2.ListJobRevisionsRequest(id=job.id, page_size=101), "page_size"),
        (scheduler_pb2.ListJobRevisionsRequest(id=job.id, page_size=-1), "page_size"),
        (scheduler_pb2.ListJobRevisionsRequest(id=job.id, page_token="bm90LW91cnM="), "page_token"),
        (scheduler_pb2.ListJobRevisionsRequest(id=job.id, page_token="x" * 5000), "page_token"),
        (scheduler_pb2.ListJobRevisionsRequest(id="a\x00b"), "id"),
        (scheduler_pb2.ListJobRevisionsRequest(), "id"),
    ):
        error = await rpc_error(scheduler.ListJobRevisions(request, metadata=acme))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and field in violations(error), (request, field)
    negative = await rpc_error(scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id, revision=-1), metadata=acme))
    assert "revision" in violations(negative)


async def test_the_cli_previews_lists_and_rolls_back(server) -> None:
    acme = await server.create_tenant("acme")
    connect = ("--address", server.address, "--api-key", acme)
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job = await create(scheduler, bearer(acme))
        code, out, err = await asyncio.to_thread(
            cli, *connect, "job", "update", job.id, "--version", "1", "--cron", "0 10 * * *", "--dry-run",
            "--diff-window", "7",
        )  # fmt: skip
        assert code == 0, err
        assert "nothing changed" in out and "7 added, 7 removed, 0 moved, 0 unchanged" in out
        code, out, err = await asyncio.to_thread(
            cli, *connect, "--json", "job", "update", job.id, "--version", "1", "--tz", "Asia/Tokyo", "--dry-run"
        )
        assert code == 0, err
        answer = json.loads(out)
        assert answer["runDiff"]["movedCount"] >= 29 and answer["job"]["version"] == "1"
        code, _, err = await asyncio.to_thread(
            cli, *connect, "job", "update", job.id, "--version", "1", "--cron", "0 10 * * *", "--dry-run",
            "--diff-window", "400",
        )  # fmt: skip
        assert code != 0 and "diff_window" in err
        got = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(acme))).job
        assert (got.version, got.schedule.cron.expression) == (1, "0 9 * * *")

        assert (await asyncio.to_thread(cli, *connect, "job", "update", job.id, "--version", "1", "--cron", "0 10 * * *"))[0] == 0
        code, out, err = await asyncio.to_thread(cli, *connect, "job", "revisions", job.id)
        assert code == 0, err
        header, row = out.splitlines()
        assert header.split()[:3] == ["VERSION", "CHANGED", "AT"]
        assert row.split()[0] == "1" and f"api_key:{acme.split('_')[1]}" in row and "schedule" in row
        code, out, err = await asyncio.to_thread(
            cli, *connect, "job", "rollback", job.id, "--to-version", "1", "--dry-run", "--diff-window", "7"
        )
        assert code == 0, err
        assert "stays at version 2" in out and "7 added, 7 removed" in out
        code, out, err = await asyncio.to_thread(cli, *connect, "job", "rollback", job.id, "--to-version", "1")
        assert code == 0, err
        assert "now version 3" in out
        got = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job.id), metadata=bearer(acme))).job
        assert (got.version, got.schedule.cron.expression) == (3, "0 9 * * *")
        code, _, err = await asyncio.to_thread(cli, *connect, "job", "rollback", job.id, "--to-version", str(2**62))
        assert code != 0 and "not found" in err.lower()
