"""``tickwheel job delete`` / ``update`` / ``pause`` / ``resume`` of many jobs against the scripted
server: the batch calls they send, each id's outcome, the exit status, and
usage errors that send nothing."""

from __future__ import annotations

import json

import grpc
from google.rpc import code_pb2, status_pb2

from tests.unit.sdk.fake_tickwheel import failure
from tests.unit.sdk.test_sdk_batch_changes import _deleted, _updated


def test_delete_of_several_ids_and_a_file_goes_in_batches_in_order(cli, fake, tenant, tmp_path) -> None:
    fake.reply("BatchDeleteJobs", _deleted)
    listed = tmp_path / "ids.txt"
    listed.write_text("# doomed\njob_c\n\n  gone_d  \n" + "".join(f"job_{i}\n" for i in range(1500)))
    result = cli(*tenant, "job", "delete", "job_a", "job_b", "--file", str(listed))
    assert result.code == 1, "gone_d failed"
    calls = fake.requests("BatchDeleteJobs")
    assert [len(call.items) for call in calls] == [1000, 504]
    ids = [item.id for call in calls for item in call.items]
    assert ids[:4] == ["job_a", "job_b", "job_c", "gone_d"] and len(ids) == 1504
    assert result.out.startswith("deleted 1503 of 1504 job(s), 1 failed")
    assert "gone_d: NOT_FOUND" in result.err
    assert fake.requests("DeleteJob") == []


def test_delete_of_one_id_keeps_the_single_call(cli, fake, tenant) -> None:
    from tickwheel.v1 import scheduler_pb2

    fake.reply("DeleteJob", scheduler_pb2.DeleteJobResponse(canceled_executions=2))
    result = cli(*tenant, "job", "delete", "job_a", "--version", "3")
    assert result.code == 0 and "2 execution(s) not started were canceled" in result.out
    assert fake.requests("DeleteJob")[0].version == 3 and fake.requests("BatchDeleteJobs") == []


def test_delete_json_lists_every_failure(cli, fake, tenant) -> None:
    fake.reply("BatchDeleteJobs", _deleted)
    result = cli(*tenant, "--json", "job", "delete", "gone_1", "job_22")
    document = json.loads(result.out)
    assert document["deleted"] == 1 and document["failed"] == 1
    assert document["canceled_executions"] == len("job_22")
    assert document["failures"] == [{"id": "gone_1", "code": "NOT_FOUND", "reason": "job not found"}]


def test_a_call_failing_stops_and_says_what_was_not_sent(cli, fake, tenant, tmp_path) -> None:
    fake.script("BatchDeleteJobs", _deleted)
    fake.reply("BatchDeleteJobs", failure(grpc.StatusCode.PERMISSION_DENIED, "no"))
    listed = tmp_path / "ids.txt"
    listed.write_text("".join(f"job_{i}\n" for i in range(1200)))
    result = cli(*tenant, "job", "delete", "--file", str(listed))
    assert result.code == 1
    assert "deleted 1000 of 1200" in result.out and "200 job(s) not sent" in result.err


def test_update_of_a_file_sends_the_change_to_each_job_at_its_version(cli, fake, tenant, tmp_path) -> None:
    from tickwheel.v1 import scheduler_pb2

    fake.reply("BatchUpdateJobs", _updated)
    listed = tmp_path / "jobs.txt"
    listed.write_text("job_a 3\njob_b 7\ngone_c 1\n")
    result = cli(*tenant, "job", "update", "--file", str(listed), "--name", "renamed", "--label", "team=ops")
    assert result.code == 1 and "updated 2 of 3 job(s), 1 failed" in result.out
    (call,) = fake.requests("BatchUpdateJobs")
    assert [(item.job.id, item.job.version) for item in call.items] == [("job_a", 3), ("job_b", 7), ("gone_c", 1)]
    assert all(item.job.name == "renamed" and dict(item.job.labels) == {"team": "ops"} for item in call.items)
    assert all(sorted(item.update_mask.paths) == ["labels", "name"] for item in call.items)
    assert call.view == scheduler_pb2.JOB_VIEW_BASIC


def test_bulk_usage_errors_send_nothing(cli, fake, tenant, tmp_path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("job_a three\n")
    superscript = tmp_path / "superscript.txt"
    superscript.write_text("job_a \u00b2\n")  # a digit to str.isdigit(), not to int(): a traceback
    cases = [
        ("job", "update", "job_a", "job_b", "--version", "1", "--name", "x"),
        ("job", "update", "--file", str(bad), "--name", "x"),
        ("job", "update", "job_a", "job_b", "--name", "x"),
        ("job", "update", "--file", str(bad), "--tz", "UTC"),
        ("job", "update", "--file", str(bad), "--max-attempts", "3"),
        ("job", "update", "--file", str(bad)),
        ("job", "update", "--file", str(superscript), "--name", "x"),
        ("job", "delete", "job_a", "job_b", "--version", "2"),
        ("job", "delete"),
        ("job", "delete", "--file", str(tmp_path / "missing.txt")),
        ("job", "update", "job_a", "--name", "x"),
    ]
    for argv in cases:
        result = cli(*tenant, *argv)
        assert result.code == 2, (argv, result.err)
    assert fake.calls == []


def _paused(request, _context=None):
    from tickwheel.v1 import job_pb2, scheduler_pb2

    response = scheduler_pb2.BatchPauseJobsResponse()
    for item in request.items:
        if item.id.startswith("gone"):
            response.results.add(error=status_pb2.Status(code=code_pb2.NOT_FOUND, message="job not found"))
        else:
            job = job_pb2.Job(id=item.id, state=job_pb2.JOB_STATE_PAUSED, pause_reason=item.reason)
            response.results.add(job=scheduler_pb2.PauseJobResponse(job=job, held_executions=2))
    return response


def test_pause_and_resume_of_several_ids_go_through_the_batch_calls(cli, fake, tenant) -> None:
    from tickwheel.v1 import job_pb2, scheduler_pb2

    fake.reply("BatchPauseJobs", _paused)
    fake.reply("BatchResumeJobs", lambda request, _ctx=None: scheduler_pb2.BatchResumeJobsResponse(results=[
        scheduler_pb2.BatchResumeJobsResult(job=scheduler_pb2.ResumeJobResponse(
            job=job_pb2.Job(id=item.id), released_executions=1)) for item in request.items
    ]))  # fmt: skip
    paused = cli(*tenant, "job", "pause", "job_a", "gone_b", "job_c", "--reason", "incident 42")
    assert paused.code == 1 and paused.out.startswith("paused 2 of 3 job(s), 1 failed; 4 held executions")
    (call,) = fake.requests("BatchPauseJobs")
    assert [(item.id, item.reason) for item in call.items] == [
        ("job_a", "incident 42"), ("gone_b", "incident 42"), ("job_c", "incident 42")
    ]
    resumed = cli(*tenant, "--json", "job", "resume", "job_a", "job_c")
    assert resumed.code == 0 and json.loads(resumed.out)["released_executions"] == 2
    assert fake.requests("PauseJob") == [] and fake.requests("ResumeJob") == []
    # The report needs outcomes, not definitions: an answer that stays small whatever the payloads.
    assert [c.view for c in fake.requests("BatchPauseJobs") + fake.requests("BatchResumeJobs")] == [
        scheduler_pb2.JOB_VIEW_BASIC, scheduler_pb2.JOB_VIEW_BASIC
    ]


def test_a_short_batch_answer_fails_the_call_not_an_item(cli, fake, tenant) -> None:
    from tickwheel.v1 import scheduler_pb2

    fake.reply("BatchResumeJobs", scheduler_pb2.BatchResumeJobsResponse())
    result = cli(*tenant, "job", "resume", "job_a", "job_b")
    assert result.code == 1 and "2 job(s) not sent" in result.err and "INTERNAL" in result.err


def _over_rate() -> status_pb2.Status:
    """An item refused over the tenant's request rate, with a 1 ms retry delay."""
    from google.protobuf import any_pb2, duration_pb2
    from google.rpc import error_details_pb2

    details = []
    for detail in (error_details_pb2.ErrorInfo(reason="QUOTA_EXCEEDED", metadata={"quota": "requests_per_second"}),
                   error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(nanos=1_000_000))):  # fmt: skip
        packed = any_pb2.Any()
        packed.Pack(detail)
        details.append(packed)
    return status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message="API request rate over 5/s", details=details)


def test_resumes_refused_over_the_request_rate_are_sent_again_after_the_wait(cli, fake, tenant) -> None:
    """A batch resume counts the jobs' paused spans against the tenant's rate:
    the server resumes the first items and refuses the rest, each alone;
    the CLI sends those again once their retry delay has passed, until all
    are applied. A refusal on another quota is reported, not sent again."""
    from tickwheel.v1 import job_pb2, scheduler_pb2

    def answer(applied: int):
        def reply(request, _ctx=None):
            response = scheduler_pb2.BatchResumeJobsResponse()
            for n, item in enumerate(request.items):
                if item.id == "full_x":
                    response.results.add(error=status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message="max_jobs"))
                elif n < applied:
                    response.results.add(job=scheduler_pb2.ResumeJobResponse(job=job_pb2.Job(id=item.id)))
                else:
                    response.results.add(error=_over_rate())
            return response
        return reply

    fake.script("BatchResumeJobs", answer(1), failure(grpc.StatusCode.RESOURCE_EXHAUSTED, "not this quota"))
    result = cli(*tenant, "job", "resume", "job_a", "job_b", "job_c")
    assert result.code == 1 and "not this quota" in result.err, "a call refused on another quota is not waited out"
    assert result.out.startswith("resumed 1 of 3 job(s), 2 failed"), "job_a's resume is reported, the others' refusal"

    fake.calls.clear()
    fake.script("BatchResumeJobs", answer(1), answer(1), answer(1))
    result = cli(*tenant, "job", "resume", "job_a", "full_x", "job_b", "job_c")
    sent = [[item.id for item in call.items] for call in fake.requests("BatchResumeJobs")]
    assert sent == [["job_a", "full_x", "job_b", "job_c"], ["job_b", "job_c"], ["job_c"]]
    assert result.code == 1 and result.out.startswith("resumed 3 of 4 job(s), 1 failed")
    assert "full_x: RESOURCE_EXHAUSTED: max_jobs" in result.err


def test_a_huge_line_in_a_file_of_ids_is_refused_unheld(cli, fake, tenant, tmp_path) -> None:
    """Each line was read whole before its length was checked: a 64 MiB line
    (or ``--file /dev/zero``, one line without end) was held in memory."""
    import tracemalloc

    path = tmp_path / "ids.txt"
    with path.open("wb") as out:
        out.write(b"job_01A\n")
        out.truncate(64 * 2**20)  # NUL bytes to the end: one line of 64 MiB
    tracemalloc.start()
    try:
        result = cli(*tenant, "job", "delete", "--file", str(path))
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.code == 2 and "line 2: longer than 1024" in result.err, result.err
    assert held < 8 * 2**20, held
    assert fake.calls == []
