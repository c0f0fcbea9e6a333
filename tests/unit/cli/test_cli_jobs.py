"""``tickwheel job ...`` and ``dlq ...`` against the scripted server: the
requests the flags build, and what is printed."""

from __future__ import annotations

import io
import json
import sys
import uuid
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from google.protobuf import timestamp_pb2

from tests.unit.sdk.fake_tickwheel import failure
from tickwheel.v1 import execution_pb2, job_pb2, scheduler_pb2
from tickwheel_server.cli.main import main


def _ts(text: str) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(datetime.fromisoformat(text))
    return ts


def _stored(job_id: str = "job_01NEW", **fields) -> job_pb2.Job:
    job = job_pb2.Job(id=job_id, name="nightly", state=job_pb2.JOB_STATE_ACTIVE, version=1, **fields)
    job.next_run_at.CopyFrom(_ts("2026-06-01T02:00:00+00:00"))
    return job


def test_job_create_builds_the_job_and_prints_its_id_last(cli, fake, tenant) -> None:
    fake.reply("CreateJob", lambda request, _ctx: scheduler_pb2.CreateJobResponse(
        job=_stored(schedule=request.job.schedule), created=True))  # fmt: skip
    result = cli(
        "job", "create", "--name", "nightly", "--cron", "0 2 * * *", "--tz", "Europe/London",
        "--handler", "reports.nightly", "--payload", '{"day": "yesterday"}', "--jitter", "1m30s",
        "--overlap", "queue_one", "--max-attempts", "3", "--initial-backoff", "2s",
        "--label", "team=data", "--concurrency-key", "db=2", *tenant,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert result.last_line == "job_01NEW"
    assert "created" in result.out

    request = fake.requests("CreateJob")[0]
    job = request.job
    assert uuid.UUID(request.request_id).version == 4
    assert (job.name, job.schedule.cron.expression, job.schedule.cron.time_zone) == (
        "nightly", "0 2 * * *", "Europe/London")  # fmt: skip
    assert job.target.handler.name == "reports.nightly"
    assert json.loads(job.payload) == {"day": "yesterday"}
    assert job.jitter.window.seconds == 90
    assert job.overlap_policy == job_pb2.OVERLAP_POLICY_QUEUE_ONE
    assert job.retry_policy.max_attempts == 3 and job.retry_policy.initial_backoff.seconds == 2
    assert dict(job.labels) == {"team": "data"} and job.concurrency_keys[0].limit == 2


def test_job_create_one_off_with_url_and_request_id(cli, fake, tenant) -> None:
    fake.reply("CreateJob", scheduler_pb2.CreateJobResponse(job=_stored("job_01ONCE"), created=False))
    result = cli(*tenant, "job", "create", "--name", "ping", "--at", "2026-06-01T09:00:00+02:00",
                 "--url", "https://example.com/hook", "--method", "put", "--header", "X-Team: data",
                 "--request-id", "deploy-7", "--exact")  # fmt: skip
    assert result.code == 0, result.err
    assert result.last_line == "job_01ONCE"
    assert "already created by this request id" in result.out
    request = fake.requests("CreateJob")[0]
    assert request.request_id == "deploy-7"
    assert request.job.schedule.once_at.ToDatetime(tzinfo=timezone.utc) == datetime(2026, 6, 1, 7, tzinfo=timezone.utc)
    assert request.job.target.http.method == "PUT"
    assert dict(request.job.target.http.headers) == {"X-Team": "data"}
    assert request.job.jitter.exact


def test_job_create_json_is_only_the_document(cli, fake, tenant) -> None:
    fake.reply("CreateJob", scheduler_pb2.CreateJobResponse(job=_stored(), created=True))
    result = cli(*tenant, "--json", "job", "create", "--name", "n", "--cron", "* * * * *", "--handler", "echo")
    assert json.loads(result.out)["job"]["id"] == "job_01NEW"


def test_job_update_builds_the_mask_from_the_flags_given(cli, fake, tenant) -> None:
    fake.reply("UpdateJob", lambda request, _ctx: scheduler_pb2.UpdateJobResponse(job=request.job))
    result = cli(*tenant, "job", "update", "job_01NEW", "--version", "4", "--payload", "[]",
                 "--overlap", "allow", "--attempt-timeout", "10m")  # fmt: skip
    assert result.code == 0, result.err
    request = fake.requests("UpdateJob")[0]
    assert (request.job.id, request.job.version) == ("job_01NEW", 4)
    assert sorted(request.update_mask.paths) == ["overlap_policy", "payload", "timeout"]
    assert request.job.timeout.seconds == 600
    assert fake.requests("GetJob") == []  # whole fields need no read


def test_job_update_of_the_zone_alone_keeps_the_stored_expression(cli, fake, tenant) -> None:
    stored = _stored("job_01NEW", schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="*/5 * * * *", time_zone="UTC")))
    fake.reply("GetJob", scheduler_pb2.GetJobResponse(job=stored))
    fake.reply("UpdateJob", lambda request, _ctx: scheduler_pb2.UpdateJobResponse(job=request.job))
    assert cli(*tenant, "job", "update", "job_01NEW", "--version", "1", "--tz", "Asia/Tokyo").code == 0
    request = fake.requests("UpdateJob")[0]
    assert list(request.update_mask.paths) == ["schedule"]
    assert request.job.schedule.cron.expression == "*/5 * * * *"
    assert request.job.schedule.cron.time_zone == "Asia/Tokyo"


def test_job_update_without_fields_is_a_usage_error(cli, fake, tenant) -> None:
    result = cli(*tenant, "job", "update", "job_01NEW", "--version", "1")
    assert result.code == 2 and "nothing to update" in result.err and fake.calls == []


def test_job_trigger_prints_the_execution_id_last(cli, fake, tenant) -> None:
    execution = execution_pb2.Execution(id="job_01NEW:trigger:r-1", job_id="job_01NEW",
                                        status=job_pb2.EXECUTION_STATUS_SCHEDULED)  # fmt: skip
    fake.reply("TriggerJob", scheduler_pb2.TriggerJobResponse(execution=execution, created=True))
    result = cli(*tenant, "job", "trigger", "job_01NEW", "--request-id", "r-1", "--payload", '{"a":1}',
                 "--allow-overlap")  # fmt: skip
    assert result.code == 0, result.err
    assert result.last_line == "job_01NEW:trigger:r-1"
    request = fake.requests("TriggerJob")[0]
    assert (request.request_id, request.payload, request.allow_overlap) == ("r-1", b'{"a":1}', True)


def test_job_pause_resume_delete(cli, fake, tenant) -> None:
    fake.reply("PauseJob", scheduler_pb2.PauseJobResponse(job=_stored(), held_executions=2))
    fake.reply("ResumeJob", scheduler_pb2.ResumeJobResponse(job=_stored(), released_executions=3))
    fake.reply("DeleteJob", scheduler_pb2.DeleteJobResponse(canceled_executions=1))
    paused = cli(*tenant, "job", "pause", "job_01NEW", "--reason", "maintenance")
    assert "2 execution(s) not started are held" in paused.out
    assert "3 held execution(s) released" in cli(*tenant, "job", "resume", "job_01NEW").out
    assert cli(*tenant, "job", "delete", "job_01NEW", "--version", "7").code == 0
    assert fake.requests("PauseJob")[0].reason == "maintenance"
    assert fake.requests("DeleteJob")[0].version == 7


def test_job_list_walks_pages_and_merges_them_for_json(cli, fake, tenant) -> None:
    fake.script(
        "ListJobs",
        scheduler_pb2.ListJobsResponse(jobs=[_stored("job_a")], next_page_token="p2"),
        scheduler_pb2.ListJobsResponse(jobs=[_stored("job_b")]),
    )
    result = cli(*tenant, "job", "list", "--state", "active", "--name-prefix", "night", "--json")
    assert [job["id"] for job in json.loads(result.out)["jobs"]] == ["job_a", "job_b"]
    first = fake.requests("ListJobs")[0]
    assert first.state == job_pb2.JOB_STATE_ACTIVE and first.name_prefix == "night"


def test_job_history_table(cli, fake, tenant) -> None:
    attempt = execution_pb2.Attempt(attempt=2, status=execution_pb2.ATTEMPT_STATUS_FAILED, error="HTTP 503")
    attempt.lateness.FromTimedelta(timedelta(milliseconds=350))
    execution = execution_pb2.Execution(id="job_a:2026-06-01T02:00:00Z", attempt=2, error="HTTP 503",
                                        status=job_pb2.EXECUTION_STATUS_DEAD, attempts=[attempt])  # fmt: skip
    execution.nominal_at.CopyFrom(_ts("2026-06-01T02:00:00+00:00"))
    skip = execution_pb2.SkipRange(count=3, reason=execution_pb2.SKIP_REASON_OVERLAP)
    fake.reply("ListExecutions", scheduler_pb2.ListExecutionsResponse(executions=[execution], skips=[skip]))
    result = cli(*tenant, "job", "history", "job_a", "--status", "dead", "canceled", "--limit", "5")
    assert result.code == 0, result.err
    header, row = result.out.splitlines()[:2]
    assert header.split()[:3] == ["EXECUTION", "NOMINAL", "(UTC)"]
    assert "dead" in row and "350ms" in row and "HTTP 503" in row
    assert "3 occurrence(s)" in result.out and "overlap" in result.out
    request = fake.requests("ListExecutions")[0]
    assert list(request.statuses) == [job_pb2.EXECUTION_STATUS_DEAD, job_pb2.EXECUTION_STATUS_CANCELED]
    assert request.page_size == 5
    assert "attempts:" not in result.out


def test_job_history_with_attempts_and_a_time_range(cli, fake, tenant) -> None:
    attempt = execution_pb2.Attempt(attempt=1, status=execution_pb2.ATTEMPT_STATUS_FAILED, worker_id="w-7",
                                    error="HTTP 503")  # fmt: skip
    attempt.started_at.CopyFrom(_ts("2026-06-01T02:00:01+00:00"))
    attempt.finished_at.CopyFrom(_ts("2026-06-01T02:00:03+00:00"))
    attempt.lateness.FromTimedelta(timedelta(milliseconds=1500))
    execution = execution_pb2.Execution(id="job_a:2026-06-01T02:00:00Z", attempt=1, attempts=[attempt],
                                        status=job_pb2.EXECUTION_STATUS_SCHEDULED)  # fmt: skip
    fake.reply("ListExecutions", scheduler_pb2.ListExecutionsResponse(executions=[execution]))
    result = cli(*tenant, "job", "history", "job_a", "--attempts", "--from", "2026-06-01T00:00:00Z",
                 "--to", "2026-06-02T00:00:00Z")  # fmt: skip
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = lines[lines.index("attempts:") + 1]
    assert header.split()[:2] == ["EXECUTION", "ATTEMPT"] and "WORKER" in header
    [row] = [line for line in lines[lines.index("attempts:") + 2:] if line.startswith("job_a:")]
    for shown in ("2026-06-01T02:00:01Z", "2026-06-01T02:00:03Z", "1.5s", "w-7", "failed", "HTTP 503"):
        assert shown in row, (shown, row)
    request = fake.requests("ListExecutions")[0]
    assert request.from_at.ToJsonString() == "2026-06-01T00:00:00Z"
    assert request.to_at.ToJsonString() == "2026-06-02T00:00:00Z"


def test_job_preview_of_an_unsaved_expression(cli, fake, tenant) -> None:
    fire = job_pb2.ScheduledFire(local_time="2026-06-01T09:00:00+09:00")
    fire.nominal_at.CopyFrom(_ts("2026-06-01T00:00:00+00:00"))
    fake.reply("PreviewSchedule", scheduler_pb2.PreviewScheduleResponse(fires=[fire], tzdata_version="2026a"))
    result = cli(*tenant, "job", "preview", "--cron", "0 9 * * *", "--tz", "Asia/Tokyo", "--count", "1")
    assert result.code == 0, result.err
    assert "2026-06-01T00:00:00Z" in result.out and "+09:00" in result.out
    request = fake.requests("PreviewSchedule")[0]
    assert request.job.schedule.cron.time_zone == "Asia/Tokyo" and request.count == 1


def test_dlq_list_and_replay(cli, fake, tenant) -> None:
    dead = execution_pb2.Execution(id="job_a:x", job_id="job_a", dead_reason="attempts exhausted")
    fake.reply("ListDeadLetters", scheduler_pb2.ListDeadLettersResponse(executions=[dead]))
    fake.reply("ReplayDeadLetter", scheduler_pb2.ReplayDeadLetterResponse(execution=dead))
    listing = cli(*tenant, "dlq", "list", "--job", "job_a")
    assert "attempts exhausted" in listing.out
    assert fake.requests("ListDeadLetters")[0].job_id == "job_a"
    assert cli(*tenant, "dlq", "replay", "job_a:x").code == 0
    assert fake.requests("ReplayDeadLetter")[0].execution_id == "job_a:x"


def _minute_backfill(cap: int):
    """A BackfillJob that refuses windows of more than ``cap`` minutes, as
    the server refuses more than 10 000 occurrences."""

    def handle(request, _context):
        start = request.from_at.ToDatetime(tzinfo=timezone.utc)
        end = request.to_at.ToDatetime(tzinfo=timezone.utc)
        first = start.replace(second=0, microsecond=0)
        if first < start:
            first += timedelta(minutes=1)
        minutes = []
        while first < end:
            minutes.append(first)
            first += timedelta(minutes=1)
        if len(minutes) > cap:
            return failure(grpc.StatusCode.INVALID_ARGUMENT, "window too large",
                           [("to_at", f"the window holds {len(minutes)} occurrences; at most {cap}")])  # fmt: skip
        response = scheduler_pb2.BackfillJobResponse(created_count=len(minutes))
        for minute in minutes:
            occurrence = response.occurrences.add(execution_id=f"job_a:{minute:%Y-%m-%dT%H:%M:%SZ}")
            occurrence.nominal_at.FromDatetime(minute)
        return response

    return handle


def test_backfill_bisects_windows_over_the_cap_and_shows_progress(cli, fake, tenant) -> None:
    fake.reply("BackfillJob", _minute_backfill(cap=100))
    result = cli(*tenant, "job", "backfill", "job_a", "--from", "2026-01-01T00:00:00Z",
                 "--to", "2026-01-01T10:00:00Z", "--json")  # fmt: skip
    assert result.code == 0, result.err

    merged = json.loads(result.out)
    ids = [o["executionId"] for o in merged["occurrences"]]
    assert len(ids) == 600 == len(set(ids)) and int(merged["createdCount"]) == 600
    assert ids == sorted(ids)
    accepted = [r for r in fake.requests("BackfillJob")]
    assert len(accepted) < 40  # bisected, then walked at the width that worked
    assert result.err == ""  # no progress line unless stderr is a terminal


def test_backfill_shows_its_progress_on_a_terminal(fake, tenant, monkeypatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake.reply("BackfillJob", _minute_backfill(cap=100))
    shown = Terminal()
    monkeypatch.setattr(sys, "stderr", shown)
    code = main([*tenant, "job", "backfill", "job_a", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T10:00:00Z"])
    assert code == 0
    assert shown.getvalue().startswith("\rbackfill: ") and "100.0% through 2026-01-01T10:00:00Z" in shown.getvalue()


def test_backfill_other_invalid_argument_is_not_bisected(cli, fake, tenant) -> None:
    fake.reply("BackfillJob", failure(grpc.StatusCode.INVALID_ARGUMENT, "bad",
                                      [("to_at", "must not be in the future")]))  # fmt: skip
    result = cli(*tenant, "job", "backfill", "job_a", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z")
    assert result.code == 2 and len(fake.requests("BackfillJob")) == 1
    assert result.err == "error: INVALID_ARGUMENT: to_at: must not be in the future (bad)\n"


def test_backfill_dry_run_table(cli, fake, tenant) -> None:
    fake.reply("BackfillJob", _minute_backfill(cap=1000))
    result = cli(*tenant, "job", "backfill", "job_a", "--from", "2026-01-01T00:00:00Z",
                 "--to", "2026-01-01T00:03:00Z", "--dry-run")  # fmt: skip
    assert result.code == 0 and fake.requests("BackfillJob")[0].dry_run
    assert result.out.count("job_a:2026-01-01T00:0") == 3
    assert result.err == ""  # one chunk: no progress line


def test_job_update_dry_run_prints_the_diff_and_writes_through_validate_only(cli, fake, tenant) -> None:
    def answer(request, _ctx):
        fire = job_pb2.ScheduledFire(local_time="2027-01-11T10:00:00+00:00")
        fire.nominal_at.FromSeconds(1_799_661_600)
        diff = scheduler_pb2.RunDiff(added=[fire], added_count=3, removed_count=0, unchanged_count=2)
        return scheduler_pb2.UpdateJobResponse(job=request.job, run_diff=diff)

    fake.reply("UpdateJob", answer)
    result = cli(*tenant, "job", "update", "job_01NEW", "--version", "4", "--payload", "[]", "--dry-run",
                 "--diff-window", "7")  # fmt: skip
    assert result.code == 0, result.err
    request = fake.requests("UpdateJob")[0]
    assert request.validate_only and request.diff_window.seconds == 7 * 86400
    assert "3 added, 0 removed, 0 moved, 2 unchanged" in result.out and "(first 1 of 3)" in result.out
    assert "2027-01-11T10:00:00+00:00" in result.out


def test_job_update_dry_run_refuses_a_batch_and_a_window_alone(cli, fake, tenant) -> None:
    assert cli(*tenant, "job", "update", "a", "b", "--version", "1", "--payload", "[]", "--dry-run").code == 2
    assert cli(*tenant, "job", "update", "a", "--version", "1", "--payload", "[]", "--diff-window", "3").code == 2
    assert fake.calls == []


def test_job_rollback_updates_to_the_revision_at_the_current_version(cli, fake, tenant) -> None:
    old = _stored("job_01NEW")
    old.name, old.version = "before", 2

    def get(request, _ctx):
        job = _stored("job_01NEW")
        job.name, job.version = "now", 5
        return scheduler_pb2.GetJobResponse(job=old if request.revision == 2 else job)

    fake.reply("GetJob", get)
    fake.reply("UpdateJob", lambda request, _ctx: scheduler_pb2.UpdateJobResponse(job=request.job))
    result = cli(*tenant, "job", "rollback", "job_01NEW", "--to-version", "2")
    assert result.code == 0, result.err
    (sent,) = fake.requests("UpdateJob")
    assert (sent.job.name, sent.job.version, list(sent.update_mask.paths), sent.validate_only) == ("before", 5, [], False)
    assert cli(*tenant, "job", "rollback", "job_01NEW", "--to-version", "2", "--diff-window", "3").code == 2


def test_job_create_names_a_calendar_and_its_rule(cli, fake, tenant) -> None:
    fake.reply("CreateJob", lambda request, _ctx: scheduler_pb2.CreateJobResponse(job=_stored(), created=True))
    result = cli(*tenant, "job", "create", "--name", "n", "--cron", "0 9 * * *", "--handler", "h",
                 "--calendar", "uk", "--calendar-rule", "next")  # fmt: skip
    assert result.code == 0, result.err
    job = fake.requests("CreateJob")[0].job
    assert (job.calendar.name, job.calendar.rule) == ("uk", job_pb2.CALENDAR_RULE_NEXT)
    alone = cli(*tenant, "job", "create", "--name", "n", "--cron", "0 9 * * *", "--handler", "h", "--calendar", "uk")
    assert alone.code == 2 and "--calendar-rule" in alone.err
    previous = cli(*tenant, "job", "create", "--name", "n", "--cron", "0 9 * * *", "--handler", "h",
                   "--calendar", "uk", "--calendar-rule", "previous")  # fmt: skip
    assert previous.code == 0, previous.err
    assert fake.requests("CreateJob")[1].job.calendar.rule == job_pb2.CALENDAR_RULE_PREVIOUS
    unknown = cli(*tenant, "job", "create", "--name", "n", "--cron", "0 9 * * *", "--handler", "h",
                  "--calendar", "uk", "--calendar-rule", "earlier")  # fmt: skip
    assert unknown.code == 2 and len(fake.requests("CreateJob")) == 2


def test_job_update_of_the_rule_alone_keeps_the_stored_calendar_and_no_calendar_clears_it(cli, fake, tenant) -> None:
    stored = _stored("job_01NEW", calendar=job_pb2.JobCalendar(name="uk", rule=job_pb2.CALENDAR_RULE_NEXT))
    fake.reply("GetJob", scheduler_pb2.GetJobResponse(job=stored))
    fake.reply("UpdateJob", lambda request, _ctx: scheduler_pb2.UpdateJobResponse(job=request.job))
    assert cli(*tenant, "job", "update", "job_01NEW", "--version", "1", "--calendar-rule", "skip").code == 0
    request = fake.requests("UpdateJob")[0]
    assert list(request.update_mask.paths) == ["calendar"]
    assert (request.job.calendar.name, request.job.calendar.rule) == ("uk", job_pb2.CALENDAR_RULE_SKIP)
    assert cli(*tenant, "job", "update", "job_01NEW", "--version", "2", "--no-calendar").code == 0
    cleared = fake.requests("UpdateJob")[1]
    assert list(cleared.update_mask.paths) == ["calendar"] and not cleared.job.HasField("calendar")


def test_job_get_shows_a_run_the_calendar_skips(cli, fake, tenant) -> None:
    fire = job_pb2.ScheduledFire(nominal_at=_ts("2027-03-27T09:00:00+00:00"), due_at=_ts("2027-03-27T09:00:00+00:00"),
                                 note="2027-03-27 is not a business day of calendar uk", skipped=True)  # fmt: skip
    fake.reply("GetJob", scheduler_pb2.GetJobResponse(job=_stored(), next_runs=[fire]))
    result = cli(*tenant, "job", "get", "job_01NEW")
    assert result.code == 0, result.err
    [row] = [line for line in result.out.splitlines() if "2027-03-27" in line]
    assert "skipped" in row and "not a business day of calendar uk" in row


def test_a_duration_past_any_clock_is_a_usage_error_not_a_traceback(cli, fake, tenant) -> None:
    for value in ("99999999999999h", "9" * 400 + "s"):
        result = cli(*tenant, "job", "create", "--name", "x", "--cron", "0 2 * * *", "--handler", "h",
                     "--attempt-timeout", value)
        assert result.code == 2 and "out of range" in result.err and "Traceback" not in result.err
    assert fake.calls == []


def test_a_targets_error_text_never_drives_the_readers_terminal(cli, fake, tenant) -> None:
    """An attempt's error is what a worker wrote, for an HTTP target the start
    of the target's response body: anyone who runs the target's URL decides
    it. ``job get``, ``job history`` (with its attempts) and ``dlq list``
    show it with every non-printable character escaped."""
    hostile = "HTTP 500 \x1b]0;owned\x07\x1b[2J\x1b[1A\x9b2K\u202etxt.exe\x7f"
    attempt = execution_pb2.Attempt(attempt=1, status=execution_pb2.ATTEMPT_STATUS_FAILED, error=hostile,
                                    worker_id="w\x1b[8m")  # fmt: skip
    execution = execution_pb2.Execution(id="job_a:2026-06-01T02:00:00Z", job_id="job_a", attempt=1, error=hostile,
                                        status=job_pb2.EXECUTION_STATUS_DEAD, attempts=[attempt])  # fmt: skip
    execution.nominal_at.CopyFrom(_ts("2026-06-01T02:00:00+00:00"))
    job = _stored(last_run=job_pb2.LastRun(execution_id=execution.id, status=job_pb2.EXECUTION_STATUS_DEAD,
                                            error=hostile))  # fmt: skip
    fake.reply("GetJob", scheduler_pb2.GetJobResponse(job=job))
    fake.reply("ListExecutions", scheduler_pb2.ListExecutionsResponse(executions=[execution]))
    fake.reply("ListDeadLetters", scheduler_pb2.ListDeadLettersResponse(executions=[execution]))
    for argv in (("job", "get", "job_a"), ("job", "history", "job_a", "--attempts"), ("dlq", "list")):
        result = cli(*tenant, *argv)
        assert result.code == 0, result.err
        raw = [c for c in result.out if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0 or c == "\u202e"]
        assert not raw, (argv, result.out)
        assert "HTTP 500 \\x1b]0;owned" in result.out, argv


def test_job_get_shows_a_multi_line_error_as_indented_lines_and_nothing_raw(cli, fake, tenant) -> None:
    """A handler's traceback is stored escaped (``\\n``): ``job get`` shows
    each escaped line break as one, the lines after the first indented under
    the value, so none passes for a line of the CLI's own; a raw row (stored
    by an older release) shows its LF as a break too and every other control
    escaped; a name or pause reason stored raw is escaped."""
    traceback = 'Traceback (most recent call last):\\n  File "h.py", line 3\\r\\nValueError: bad \\x1b[2J'
    raw = "first\n\x1b]0;owned\x07last run: forged\r\u202e"
    for error, lines in ((traceback, ['Traceback (most recent call last):', '  File "h.py", line 3',
                                      "ValueError: bad \\x1b[2J"]),
                         (raw, ["first", "\\x1b]0;owned\\x07last run: forged\\r\\u202e"])):
        job = _stored(last_run=job_pb2.LastRun(execution_id="job_a:x", status=job_pb2.EXECUTION_STATUS_DEAD,
                                                error=error), pause_reason="p\u202e")  # fmt: skip
        job.name = "n\x1b[8m"
        fake.reply("GetJob", scheduler_pb2.GetJobResponse(job=job))
        result = cli(*tenant, "job", "get", "job_a")
        assert result.code == 0, result.err
        assert not [c for c in result.out if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0 or c == "\u202e"]
        out = result.out.splitlines()
        [at] = [i for i, line in enumerate(out) if line.startswith("last run:")]
        assert out[at].endswith(": " + lines[0])
        indent = out[at].index("job_a:x")
        assert out[at + 1 : at + len(lines)] == [" " * indent + line for line in lines[1:]], result.out
        assert "n\\x1b[8m" in result.out and not any(line.startswith("last run: forged") for line in out)


def test_printable_escapes_controls_and_keeps_what_names_may_hold() -> None:
    from tickwheel_server.cli.output import printable

    assert printable("a\x1b[2Jb\x9bc\u202ed\u2028") == "a\\x1b[2Jb\\x9bc\\u202ed\\u2028"
    family, hindi = "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\u0915\u094d\u200d\u0937 r\u00e9sum\u00e9 \u2026"
    assert printable(family) == family and printable(hindi) == hindi


def _over_rate(seconds: float, quota: str = "requests_per_second"):
    from google.protobuf import duration_pb2
    from google.rpc import error_details_pb2
    from tickwheel import TickwheelError

    retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(nanos=int(seconds * 1e9)))
    info = error_details_pb2.ErrorInfo(reason="QUOTA_EXCEEDED", metadata={"quota": quota})
    return TickwheelError(grpc.StatusCode.RESOURCE_EXHAUSTED, "tenant 'acme': API request rate over 5/s",
                          details=(info, retry))  # fmt: skip


def test_backfill_waits_out_the_request_rate_its_chunks_are_charged_and_asks_again() -> None:
    """Each chunk's fires are charged to the tenant's request rate: a chunk
    refused over it is asked again after the server's retry delay, not lost
    and not bisected; another quota's refusal propagates."""
    from tickwheel import TickwheelError
    from tickwheel_server.cli.backfill import backfill_in_chunks

    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    window = (start, start + timedelta(hours=2))
    asked: list[tuple[datetime, datetime]] = []
    waited: list[float] = []
    refusals = iter([_over_rate(0.25), _over_rate(0.5), None, _over_rate(0.25, quota="max_pending_manual_runs")])

    def call(lo: datetime, hi: datetime) -> scheduler_pb2.BackfillJobResponse:
        asked.append((lo, hi))
        refusal = next(refusals)
        if refusal is not None:
            raise refusal
        return scheduler_pb2.BackfillJobResponse(created_count=1)

    merged, chunks = backfill_in_chunks(call, *window, sleep=waited.append)
    assert (chunks, merged.created_count) == (1, 1) and waited == [0.25, 0.5] and asked == [window] * 3
    with pytest.raises(TickwheelError):
        backfill_in_chunks(call, *window, sleep=waited.append)
    assert waited == [0.25, 0.5], "another quota is not waited out"


@pytest.mark.parametrize("payload, reason", [
    ("[" * 100_000, "nested deeper than 64"),
    ('{"amount": NaN}', "NaN is not JSON"),
    ('{"a": 1, "a": 2}', "given twice"),
    ('"\udcff"', "not UTF-8"),  # a byte of argv that is not UTF-8, as Python decodes it
])  # fmt: skip
def test_a_hostile_payload_flag_is_a_usage_error_and_nothing_is_sent(cli, fake, tenant, payload, reason) -> None:
    """``--payload`` was checked with json.loads: 100 000 ``[`` raised
    RecursionError out of the command (a traceback), NaN and a key given
    twice were sent, and argv's non-UTF-8 bytes raised UnicodeEncodeError."""
    result = cli(*tenant, "job", "trigger", "job_01NEW", "--payload", payload)
    assert result.code == 2 and reason in result.err, result.err
    assert fake.calls == []


@pytest.mark.parametrize("source", ["big", "/dev/zero"])
def test_a_payload_file_larger_than_any_request_is_refused_unread(cli, fake, tenant, tmp_path, source) -> None:
    """``--payload-file`` was read whole: ``/dev/zero`` grew without end and
    a 64 MiB file was sent, for the server to refuse (RESOURCE_EXHAUSTED)."""
    path = source
    if source == "big":
        with (tmp_path / "payload.bin").open("wb") as out:
            out.truncate(64 * 2**20)
        path = str(tmp_path / "payload.bin")
    result = cli(*tenant, "job", "trigger", "job_01NEW", "--payload-file", path)
    assert result.code == 2 and "more than 4194304 bytes" in result.err, result.err
    assert fake.calls == []
