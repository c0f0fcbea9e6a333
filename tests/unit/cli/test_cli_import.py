"""``tickwheel job import`` against the scripted server: the jobs each line
builds, request ids stable across runs, every line's fate in the summary,
the failures file, and hostile files (huge lines, NUL bytes, formula
cells, another tenant's ids)."""

from __future__ import annotations

import csv
import io
import json
import threading

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from tests.unit.sdk.fake_tickwheel import FakeTickwheel, failure
from tickwheel.v1 import job_pb2, scheduler_pb2
from tickwheel_server.cli import jobimport
from tickwheel_server.cli.importrows import canonical, derived_request_id


class Store:
    """A BatchCreateJobs that remembers request ids (a repeat answers
    created false) and refuses items named ``bad...`` on ``job.name``."""

    def __init__(self) -> None:
        self.jobs: dict[str, job_pb2.Job] = {}

    def __call__(self, request, _context):
        response = scheduler_pb2.BatchCreateJobsResponse()
        for item in request.items:
            if item.job.name.startswith("bad"):
                detail = any_pb2.Any()
                detail.Pack(error_details_pb2.BadRequest(field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field="job.name", description="no bad names")]))
                response.results.add(error=status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message="invalid",
                                                             details=[detail]))  # fmt: skip
                continue
            seen = item.request_id in self.jobs
            if not seen:
                self.jobs[item.request_id] = job_pb2.Job(id=f"job_{len(self.jobs):04d}", name=item.job.name)
            response.results.add(job=scheduler_pb2.CreateJobResponse(job=self.jobs[item.request_id], created=not seen))
        return response


@pytest.fixture
def store(fake: FakeTickwheel) -> Store:
    answer = Store()
    fake.reply("BatchCreateJobs", answer)
    return answer


def _items(fake: FakeTickwheel) -> list[scheduler_pb2.CreateJobRequest]:
    return [item for request in fake.requests("BatchCreateJobs") for item in request.items]


def _jsonl(tmp_path, *lines: str | bytes, name: str = "jobs.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    return path


def _line(**fields) -> str:
    fields.setdefault("cron", "0 2 * * *")
    fields.setdefault("handler", "echo")
    return json.dumps(fields)


def test_jsonl_lines_become_the_jobs_job_create_would_build(cli, fake, tenant, store, tmp_path) -> None:
    path = _jsonl(tmp_path, _line(name="nightly", tz="Europe/London", payload={"day": "yesterday"}, jitter="1m30s",
                                  overlap="queue_one", max_attempts=3, initial_backoff="2s", labels={"team": "data"},
                                  concurrency_keys={"db": 2}),
                  json.dumps({"name": "ping", "at": "2030-06-01T09:00:00+02:00", "url": "https://example.com/hook",
                              "method": "put", "headers": {"X-Team": "data"}, "exact": True, "max_runs": 0}))
    result = cli(*tenant, "job", "import", str(path))
    assert result.code == 0, result.err
    assert "2 lines, 2 created, 0 already existed, 0 failed" in result.out

    nightly, ping = _items(fake)
    job = nightly.job
    assert (job.name, job.schedule.cron.expression, job.schedule.cron.time_zone) == ("nightly", "0 2 * * *",
                                                                                     "Europe/London")
    assert job.target.handler.name == "echo" and json.loads(job.payload) == {"day": "yesterday"}
    assert job.jitter.window.seconds == 90 and job.overlap_policy == job_pb2.OVERLAP_POLICY_QUEUE_ONE
    assert job.retry_policy.max_attempts == 3 and job.retry_policy.initial_backoff.seconds == 2
    assert dict(job.labels) == {"team": "data"} and (job.concurrency_keys[0].key, job.concurrency_keys[0].limit) == (
        "db", 2)
    assert ping.job.target.http.method == "PUT" and dict(ping.job.target.http.headers) == {"X-Team": "data"}
    assert ping.job.jitter.exact and ping.job.schedule.once_at.seconds > 0


def test_importing_again_creates_nothing_twice(cli, fake, tenant, store, tmp_path) -> None:
    path = _jsonl(tmp_path, *(_line(name=f"job-{i}") for i in range(5)), _line(name="job-0"))
    first = cli(*tenant, "job", "import", str(path))
    assert first.code == 0 and "6 lines, 6 created, 0 already existed" in first.out
    # formatting the same content differently keeps every id
    path.write_text("\n".join(json.dumps(json.loads(x), indent=None, separators=(", ", " : "))
                              for x in path.read_text().splitlines()) + "\n")  # fmt: skip
    again = cli(*tenant, "job", "import", str(path))
    assert again.code == 0 and "6 lines, 0 created, 6 already existed, 0 failed" in again.out

    first_ids = [i.request_id for i in _items(fake)[:6]]
    assert first_ids == [i.request_id for i in _items(fake)[6:]]
    assert len(set(first_ids)) == 6, "identical lines on different lines are different jobs"
    assert first_ids[0] == derived_request_id(1, canonical(json.loads(_line(name="job-0"))))
    assert len(store.jobs) == 6


def test_an_explicit_request_id_is_used_and_checked(cli, fake, tenant, store, tmp_path) -> None:
    path = _jsonl(tmp_path, _line(name="a", request_id="deploy:42"), _line(name="b", request_id="no spaces"),
                  _line(name="c", request_id="x" * 129))
    result = cli(*tenant, "--json", "job", "import", str(path))
    assert result.code == 1
    summary = json.loads(result.out)
    assert [i.request_id for i in _items(fake)] == ["deploy:42"]
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, "request_id"), (3, "request_id")]


def test_the_json_summary_lists_every_failure_with_its_line_field_and_reason(cli, fake, tenant, store,
                                                                              tmp_path) -> None:
    path = _jsonl(tmp_path, _line(name="good"), "{not json", _line(name="bad-name"), "",
                  _line(name="x", max_runs="3"), _line(name="x", overlap="sometimes"), '["a list"]',
                  _line(name="x", cron=None, at="2030-01-01T00:00:00Z", handler=None),
                  _line(name="x", at="2030-01-01T00:00:00Z"), _line(name="x", start_at="tomorrow"),
                  _line(name="x", crno="typo"), _line(name="x", at="now", cron=None))
    result = cli(*tenant, "--json", "job", "import", str(path))
    assert result.code == 1 and result.err == ""
    summary = json.loads(result.out)
    assert set(summary) == {"file", "format", "lines", "created", "existing", "failed", "failures", "failures_file",
                            "call_error"}
    assert (summary["lines"], summary["created"], summary["existing"], summary["failed"]) == (11, 1, 0, 10)
    assert [(f["line"], f["code"], f["field"]) for f in summary["failures"]] == [
        (2, "INVALID_ARGUMENT", ""),
        (3, "INVALID_ARGUMENT", "job.name"),
        (5, "INVALID_ARGUMENT", "max_runs"),
        (6, "INVALID_ARGUMENT", "overlap"),
        (7, "INVALID_ARGUMENT", ""),
        (8, "INVALID_ARGUMENT", "handler"),
        (9, "INVALID_ARGUMENT", "at"),
        (10, "INVALID_ARGUMENT", "start_at"),
        (11, "INVALID_ARGUMENT", "crno"),
        (12, "INVALID_ARGUMENT", "at"),
    ]
    assert summary["failures"][1]["reason"] == "no bad names"
    assert summary["failures"][1]["request_id"].startswith("import-")
    assert [i.job.name for i in _items(fake)] == ["good", "bad-name"], "only well-formed lines are sent"


def test_the_failures_file_holds_the_failed_lines_to_fix_and_import_again(cli, fake, tenant, store,
                                                                           tmp_path) -> None:
    bad_json = '{"name": "broken", '
    path = _jsonl(tmp_path, _line(name="good"), _line(name="bad-1"), bad_json, _line(name="bad-2", request_id="r2"))
    failures = tmp_path / "failed.jsonl"
    result = cli(*tenant, "job", "import", str(path), "--failures", str(failures))
    assert result.code == 1
    assert "line 2: job.name: no bad names (INVALID_ARGUMENT)" in result.out
    assert "line 3: not valid JSON" in result.out
    assert f"failed lines written to {failures}" in result.out

    written = failures.read_text().splitlines()
    sent_id = _items(fake)[1].request_id
    assert json.loads(written[0]) == {**json.loads(_line(name="bad-1")), "request_id": sent_id}
    assert written[1] == bad_json and json.loads(written[2])["request_id"] == "r2"

    # fixed, then imported again: the fixed lines keep the ids they were first sent with
    failures.write_text("\n".join([written[0].replace("bad-1", "fixed-1"), _line(name="broken"),
                                   written[2].replace("bad-2", "fixed-2")]) + "\n")  # fmt: skip
    result = cli(*tenant, "job", "import", str(failures))
    assert result.code == 0 and "3 lines, 3 created" in result.out
    assert [i.request_id for i in _items(fake)[-3:]][::2] == [sent_id, "r2"]


def test_csv_columns_are_the_same_keys_and_a_formula_cell_is_just_data(cli, fake, tenant, store, tmp_path) -> None:
    path = tmp_path / "jobs.csv"
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["name", "cron", "tz", "handler", "labels", "payload", "max_runs", "exact", "id"])
        writer.writerow(["=HYPERLINK(\"http://evil\",\"x\")", "0 2 * * *", "UTC", "echo", '{"team": "data"}',
                         '{"a": 1}', "2", "true", "job_of_someone_else"])  # fmt: skip
        writer.writerow(["@SUM(1+1)", "*/5 * * * *", "", "echo", "", "", "", "", ""])
        writer.writerow(["third", "0 2 * * *", "", "echo", "not json", "", "", "", ""])
        writer.writerow(["fourth", "0 2 * * *", "", "echo", "", "", "two", "", ""])
        writer.writerow(["fifth", "0 2 * * *", "", "echo", "", "", "", "", "", "an extra cell"])
    failures = tmp_path / "failed.csv"
    result = cli(*tenant, "--json", "job", "import", str(path), "--failures", str(failures))
    assert result.code == 1
    summary = json.loads(result.out)
    assert summary["format"] == "csv" and (summary["created"], summary["failed"]) == (2, 3)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(4, "labels"), (5, "max_runs"), (6, "")]
    first, second = _items(fake)
    assert first.job.name == '=HYPERLINK("http://evil","x")' and second.job.name == "@SUM(1+1)"
    assert dict(first.job.labels) == {"team": "data"} and first.job.payload == b'{"a": 1}'
    assert first.job.max_runs == 2 and first.job.jitter.exact and not first.job.id
    rows = list(csv.reader(failures.open(newline="")))
    assert rows[0][-1] == "request_id" and [r[0] for r in rows[1:]] == ["third", "fourth", "fifth"]


def test_an_unknown_csv_column_is_a_usage_error_and_nothing_is_sent(cli, fake, tenant, store, tmp_path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("name,cron,handler,crno\nx,0 2 * * *,echo,\n")
    result = cli(*tenant, "job", "import", str(path))
    assert result.code == 2 and "unknown CSV column 'crno'" in result.err
    assert fake.calls == []


def test_another_tenants_ids_in_a_line_are_ignored(cli, fake, tenant, store, tmp_path) -> None:
    path = _jsonl(tmp_path, _line(name="mine", id="job_01OTHERTENANT", tenant="victim", version=7, state="paused",
                                  created_at="2020-01-01T00:00:00Z"))  # fmt: skip
    result = cli(*tenant, "job", "import", str(path))
    assert result.code == 0, result.out
    (item,) = _items(fake)
    assert (item.job.id, item.job.tenant, item.job.version, item.job.state) == ("", "", 0, 0)
    assert fake.calls[0].metadata["authorization"] == f"Bearer {fake.api_key}"


def test_a_10_mb_line_and_nul_bytes_fail_alone(cli, fake, tenant, store, tmp_path) -> None:
    huge = _line(name="huge", payload="x" * (10 * 1024 * 1024))
    path = _jsonl(tmp_path, _line(name="before"), huge, b'{"name": "raw\x00nul", "cron": "0 2 * * *"}',
                  _line(name="escaped\u0000nul"), _line(name="after"))
    failures = tmp_path / "failed.jsonl"
    result = cli(*tenant, "--json", "job", "import", str(path), "--failures", str(failures))
    assert result.code == 1
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, ""), (3, ""), (4, "name")]
    assert "longer than" in summary["failures"][0]["reason"]
    assert [i.job.name for i in _items(fake)] == ["before", "after"]
    assert failures.stat().st_size < 1024, "the huge line is not copied"


def test_a_huge_csv_cell_fails_its_record_alone(cli, fake, tenant, store, tmp_path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("name,cron,handler,payload\n" + "a,0 2 * * *,echo,\n" + "b,0 2 * * *,echo," + "1" * (10 * 2**20)
                    + "\n" + "c,0 2 * * *,echo,\n")  # fmt: skip
    result = cli(*tenant, "--json", "job", "import", str(path))
    summary = json.loads(result.out)
    assert result.code == 1 and [f["line"] for f in summary["failures"]] == [3]
    assert [i.job.name for i in _items(fake)] == ["a", "c"]


def test_lines_go_in_calls_of_batch_size(cli, fake, tenant, store, tmp_path) -> None:
    path = _jsonl(tmp_path, *(_line(name=f"j{i}") for i in range(5)))
    # One call at a time, so the calls arrive in the file's order.
    assert cli(*tenant, "job", "import", str(path), "--batch-size", "2", "--parallel", "1").code == 0
    assert [len(r.items) for r in fake.requests("BatchCreateJobs")] == [2, 2, 1]
    for size in ("0", "1001"):
        result = cli(*tenant, "job", "import", str(path), "--batch-size", size)
        assert result.code == 2 and "--batch-size" in result.err


def test_a_call_that_fails_fails_its_lines_and_the_rest_are_not_sent(cli, fake, tenant, store, tmp_path) -> None:
    fake.script("BatchCreateJobs", store, *[failure(grpc.StatusCode.UNAVAILABLE, "store down")] * 5)
    path = _jsonl(tmp_path, *(_line(name=f"j{i}") for i in range(6)))
    failures = tmp_path / "failed.jsonl"
    result = cli(*tenant, "--json", "--timeout", "5", "job", "import", str(path), "--batch-size", "2",
                 "--parallel", "1", "--failures", str(failures))  # fmt: skip
    assert result.code == 1
    summary = json.loads(result.out)
    assert summary["created"] == 2 and summary["call_error"].startswith("UNAVAILABLE")
    assert [(f["line"], f["code"]) for f in summary["failures"]] == [
        (3, "UNAVAILABLE"), (4, "UNAVAILABLE"), (5, "ABORTED"), (6, "ABORTED")]
    assert len(fake.requests("BatchCreateJobs")) == 6, "one good call, one retried to the SDK's limit, no more"
    written = [json.loads(x) for x in failures.read_text().splitlines()]
    assert [w["name"] for w in written] == ["j2", "j3", "j4", "j5"]
    assert all(w["request_id"].startswith("import-") for w in written)


class Overlapping:
    """A thread-safe :class:`Store` whose call holding ``first`` waits until
    a call holding ``then`` arrived (so both were in flight at once), then
    answers as ``answer_first`` says (None: as the store would)."""

    def __init__(self, first: str, then: str, answer_first=None) -> None:
        self.store, self.lock = Store(), threading.Lock()
        self.first, self.then, self.answer_first = first, then, answer_first
        self.arrived = threading.Event()
        self.overlapped: list[bool] = []

    def __call__(self, request, context):
        names = {item.job.name for item in request.items}
        if self.first in names:
            self.overlapped.append(self.arrived.wait(10))
            if self.answer_first is not None:
                return self.answer_first
        if self.then in names:
            self.arrived.set()
        with self.lock:
            return self.store(request, context)


def test_calls_go_in_parallel_and_every_outcome_keeps_the_files_order(cli, fake, tenant, tmp_path) -> None:
    answer = Overlapping(first="j0", then="j3")
    fake.reply("BatchCreateJobs", answer)
    path = _jsonl(tmp_path, *(_line(name=name) for name in ("j0", "j1", "bad2", "j3", "bad4", "j5")))
    result = cli(*tenant, "--json", "job", "import", str(path), "--batch-size", "2", "--parallel", "3")
    assert result.code == 1, result.err
    assert answer.overlapped == [True], "the second call was sent before the first was answered"
    summary = json.loads(result.out)
    assert (summary["created"], summary["existing"]) == (4, 0)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(3, "job.name"), (5, "job.name")]
    assert sorted(i.job.name for i in _items(fake)) == ["bad2", "bad4", "j0", "j1", "j3", "j5"]


def test_a_call_failing_beside_others_records_theirs_and_sends_no_more(cli, fake, tenant, tmp_path) -> None:
    answer = Overlapping(first="j0", then="j1",
                         answer_first=failure(grpc.StatusCode.FAILED_PRECONDITION, "tenant is being moved"))
    fake.reply("BatchCreateJobs", answer)
    path = _jsonl(tmp_path, *(_line(name=f"j{i}") for i in range(4)))
    result = cli(*tenant, "--json", "job", "import", str(path), "--batch-size", "1", "--parallel", "2")
    assert result.code == 1
    assert answer.overlapped == [True]
    summary = json.loads(result.out)
    # j1 was in flight beside the failed call: it was created, and says so.
    assert summary["created"] == 1 and summary["call_error"].startswith("FAILED_PRECONDITION")
    assert [(f["line"], f["code"]) for f in summary["failures"]] == [
        (1, "FAILED_PRECONDITION"), (3, "ABORTED"), (4, "ABORTED")]
    assert sorted(i.job.name for i in _items(fake)) == ["j0", "j1"], "nothing sent after the failure was known"


def test_parallel_is_bounded(cli, fake, tenant, store, tmp_path) -> None:
    path = _jsonl(tmp_path, _line(name="a"))
    for parallel in ("0", "17"):
        result = cli(*tenant, "job", "import", str(path), "--parallel", parallel)
        assert result.code == 2 and "--parallel" in result.err
    assert fake.calls == []


def test_stdin_needs_a_format(cli, fake, tenant, store, monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO((_line(name="piped") + "\n").encode())))
    result = cli(*tenant, "job", "import", "-")
    assert result.code == 2 and "--format" in result.err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO((_line(name="piped") + "\n").encode())))
    result = cli(*tenant, "job", "import", "-", "--format", "jsonl")
    assert result.code == 0 and [i.job.name for i in _items(fake)] == ["piped"]


def test_usage_errors_send_nothing(cli, fake, tenant, store, tmp_path) -> None:
    path = _jsonl(tmp_path, _line(name="a"))
    assert cli(*tenant, "job", "import", str(tmp_path / "missing.jsonl")).code == 2
    assert cli(*tenant, "job", "import", str(_jsonl(tmp_path, _line(name="a"), name="jobs.txt"))).code == 2
    result = cli(*tenant, "job", "import", str(path), "--failures", str(path))
    assert result.code == 2 and "must not be the file" in result.err
    assert path.read_text() == _line(name="a") + "\n"
    assert fake.calls == []


def test_no_progress_bar_unless_stderr_is_a_terminal(cli, fake, tenant, store, tmp_path) -> None:
    path = _jsonl(tmp_path, _line(name="a"))
    assert cli(*tenant, "job", "import", str(path)).err == ""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    summary = jobimport.Summary("f", "jsonl", lines=10, created=4, existing=1)
    jobimport.Progress(shown, total_bytes=200).show(summary, 100)
    assert shown.getvalue().startswith("\rimport: [###############") and "50.0% 10 lines: 4 created" in shown.getvalue()


def test_csv_records_keep_their_first_line_number_and_bad_bytes_fail_alone(cli, fake, tenant, store,
                                                                          tmp_path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_bytes(b'name,cron,handler,payload\n'
                     b'a,0 2 * * *,echo,"{\n""text"": 2}"\n'
                     b'b\xff,0 2 * * *,echo,\n'
                     b'c \xef\xbf\xbd,0 2 * * *,echo,\n'
                     b'd,0 2 * * *,echo,"{""bad"": \n"\n')  # fmt: skip
    result = cli(*tenant, "--json", "job", "import", str(path))
    summary = json.loads(result.out)
    assert [(f["line"], f["reason"]) for f in summary["failures"]] == [
        (4, "not UTF-8"), (6, summary["failures"][1]["reason"])]
    assert summary["failures"][1]["field"] == "payload"
    assert [i.job.name for i in _items(fake)] == ["a", "c \ufffd"], "a real U+FFFD is just a character"
    assert json.loads(_items(fake)[0].job.payload) == {"text": 2}


def test_a_row_names_a_calendar_with_its_rule_or_fails_naming_the_missing_one() -> None:
    from tickwheel_server.cli.importrows import RowError, job_from_row

    base = {"name": "n", "cron": "0 9 * * *", "handler": "h"}
    job = job_from_row({**base, "calendar": "uk", "calendar_rule": "next"}, csv=False)
    assert (job.calendar.name, job.calendar.rule) == ("uk", job_pb2.CALENDAR_RULE_NEXT)
    job = job_from_row({**base, "calendar": "uk", "calendar_rule": "previous"}, csv=False)
    assert job.calendar.rule == job_pb2.CALENDAR_RULE_PREVIOUS
    for row, field in (({**base, "calendar": "uk"}, "calendar_rule"), ({**base, "calendar_rule": "skip"}, "calendar"),
                       ({**base, "calendar": "uk", "calendar_rule": "earlier"}, "calendar_rule")):
        with pytest.raises(RowError) as caught:
            job_from_row(row, csv=True)
        assert caught.value.field == field


def test_a_duration_too_large_for_any_clock_fails_its_line_alone(cli, fake, tenant, store, tmp_path) -> None:
    """timedelta's range ends near 2.7 million years: a larger duration (or
    digits that make a float infinite) once raised OverflowError out of the
    import, a traceback after the earlier calls were sent."""
    path = _jsonl(tmp_path, _line(name="before"), _line(name="huge", attempt_timeout="99999999999999h"),
                  _line(name="infinite", jitter="9" * 400 + "s"), _line(name="after"))
    result = cli(*tenant, "--json", "job", "import", str(path))
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, "attempt_timeout"), (3, "jitter")]
    assert "out of range" in summary["failures"][0]["reason"]
    assert [i.job.name for i in _items(fake)] == ["before", "after"]


def test_the_text_summary_never_prints_a_files_control_characters(cli, fake, tenant, store, tmp_path) -> None:
    """A file is the attacker's: a key or value it names is echoed in the
    summary, and a raw ESC there drives the reader's terminal (retitles it,
    clears the screen, hides the lines before)."""
    hostile = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
    path = _jsonl(tmp_path, json.dumps({"name": "x", "cron": "0 2 * * *", "handler": "h", hostile: 1}),
                  _line(name="x", request_id=hostile), _line(name="bad" + hostile))
    result = cli(*tenant, "job", "import", str(path))
    assert result.code == 1
    assert "line 1: " in result.out and "line 2: request_id" in result.out and "line 3: job.name" in result.out
    printed = result.out + result.err
    assert not [c for c in printed if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0], printed
    assert "\\x1b]0;pwned" in result.out, "the key is shown, escaped"


def test_a_file_starting_with_a_utf8_bom_is_read_as_without(cli, fake, tenant, store, tmp_path) -> None:
    """Excel's "CSV UTF-8" and many Windows tools start a file with U+FEFF:
    it is the encoding's mark, not part of the first column's name or of the
    first line's JSON. Elsewhere it stays what it is (a name's character)."""
    path = tmp_path / "jobs.csv"
    path.write_bytes(b"\xef\xbb\xbfname,cron,handler\n\xef\xbb\xbfa,0 2 * * *,echo\n")
    result = cli(*tenant, "job", "import", str(path))
    assert result.code == 0, result.err + result.out
    lines = _jsonl(tmp_path, _line(name="b"), _line(name="c"))
    lines.write_bytes(b"\xef\xbb\xbf" + lines.read_bytes())
    result = cli(*tenant, "job", "import", str(lines))
    assert result.code == 0, result.err + result.out
    assert [i.job.name for i in _items(fake)] == ["\ufeffa", "b", "c"]


# --- hostile files (red team, round 4) ------------------------------------------------------


def test_json_nested_past_the_parsers_depth_fails_its_line_alone(cli, fake, tenant, store, tmp_path) -> None:
    """CPython's json raises RecursionError (not ValueError) about a
    thousand levels down: a line of 100 000 ``[`` once ended the import
    with a traceback, after the earlier calls were sent, and so did a CSV
    payload or labels cell. Nesting is bounded as ``apply -f`` bounds it."""
    deep = "[" * 100_000 + "]" * 100_000
    path = _jsonl(tmp_path, _line(name="before"), '{"name": "deep", "payload": ' + deep + "}",
                  _line(name="nested", payload=json.loads("[" * 65 + "]" * 65)), _line(name="after"))
    result = cli(*tenant, "--json", "job", "import", str(path))
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, ""), (3, "payload")]
    assert all("nested deeper than 64" in f["reason"] for f in summary["failures"]), summary["failures"]
    assert [i.job.name for i in _items(fake)] == ["before", "after"]

    table = tmp_path / "jobs.csv"
    with table.open("w", newline="") as out:
        rows = csv.writer(out)
        rows.writerow(["name", "cron", "handler", "payload", "labels"])
        rows.writerow(["a", "0 2 * * *", "echo", "", ""])
        rows.writerow(["b", "0 2 * * *", "echo", deep, ""])
        rows.writerow(["c", "0 2 * * *", "echo", "", '{"k": ' + deep + "}"])
        rows.writerow(["d", "0 2 * * *", "echo", "", ""])
    result = cli(*tenant, "--json", "job", "import", str(table))
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(3, "payload"), (4, "labels")]
    assert [i.job.name for i in _items(fake)][2:] == ["a", "d"]


def test_a_payload_is_sent_as_the_json_the_line_holds(cli, fake, tenant, store, tmp_path) -> None:
    """A payload was parsed into Python floats and written back: digits past
    a double's were lost (an amount of 12345678901234567890.12 arrived as
    1.2345678901234567e+19), 1e400 arrived as ``Infinity`` and ``NaN`` was
    passed on: neither is JSON, and strict parsers (Go, JavaScript) refuse
    the run's payload. Numbers now arrive as written; NaN and Infinity,
    which no JSON holds, fail the line naming the key, in every format."""
    path = _jsonl(tmp_path, '{"name": "exact", "cron": "0 2 * * *", "handler": "h", '
                            '"payload": {"amount": 12345678901234567890.12, "big": 1e400, "n": -0.0, "i": 7}}',
                  '{"name": "nan", "cron": "0 2 * * *", "handler": "h", "payload": {"x": NaN}}',
                  '{"name": "inf", "cron": "0 2 * * *", "handler": "h", "payload": [-Infinity]}',
                  '{"name": "nan-elsewhere", "cron": "0 2 * * *", "handler": "h", "version": NaN}')
    result = cli(*tenant, "--json", "job", "import", str(path))
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, "payload"), (3, "payload"), (4, "version")]
    (exact,) = _items(fake)
    assert exact.job.payload == b'{"amount":12345678901234567890.12,"big":1E+400,"n":-0.0,"i":7}'

    table = tmp_path / "jobs.csv"
    table.write_text('name,cron,handler,payload\na,0 2 * * *,echo,NaN\nb,0 2 * * *,echo,"[Infinity]"\n'
                     'c,0 2 * * *,echo,1e400\n')
    result = cli(*tenant, "--json", "job", "import", str(table))
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, "payload"), (3, "payload")]
    assert _items(fake)[-1].job.payload == b"1e400", "a CSV payload is sent as its text"


def test_a_key_given_twice_fails_its_line_naming_the_key(cli, fake, tenant, store, tmp_path) -> None:
    """json keeps the last of two equal keys silently: a line naming its
    handler twice, or a label, once ran whichever came last. ``apply -f``
    refuses it in YAML (TOML refuses it itself); import now refuses it too."""
    path = _jsonl(tmp_path, '{"name": "a", "cron": "0 2 * * *", "handler": "safe", "handler": "rm-rf"}',
                  '{"name": "b", "cron": "0 2 * * *", "handler": "h", "labels": {"team": "x", "team": "y"}}',
                  '{"name": "c", "cron": "0 2 * * *", "handler": "h", "payload": {"a": {"b": 1, "b": 2}}}',
                  _line(name="after"))
    result = cli(*tenant, "--json", "job", "import", str(path))
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(1, "handler"), (2, "labels"), (3, "payload")]
    assert "'handler' is given twice" in summary["failures"][0]["reason"]
    assert "'team' is given twice" in summary["failures"][1]["reason"]
    assert [i.job.name for i in _items(fake)] == ["after"]

    table = tmp_path / "jobs.csv"
    table.write_text('name,cron,handler,labels\na,0 2 * * *,echo,"{""t"": ""1"", ""t"": ""2""}"\n')
    summary = json.loads(cli(*tenant, "--json", "job", "import", str(table)).out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, "labels")]


def test_numbers_past_a_fields_range_fail_naming_the_field(cli, fake, tenant, store, tmp_path) -> None:
    """protobuf's ValueError "Value out of range" was reported against the
    whole line (field "")."""
    path = _jsonl(tmp_path, _line(name="a", max_runs=2**63), _line(name="b", max_attempts=2**31),
                  _line(name="c", concurrency_keys={"db": 2**31}), _line(name="d", max_runs=10**30))
    result = cli(*tenant, "--json", "job", "import", str(path))
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [
        (1, "max_runs"), (2, "max_attempts"), (3, "concurrency_keys"), (4, "max_runs")]
    assert _items(fake) == []
    table = tmp_path / "jobs.csv"
    table.write_text(f"name,cron,handler,max_runs\na,0 2 * * *,echo,{2**63}\nb,0 2 * * *,echo,{'9' * 5000}\n")
    summary = json.loads(cli(*tenant, "--json", "job", "import", str(table)).out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, "max_runs"), (3, "max_runs")]


def test_a_lone_surrogate_fails_naming_its_field_and_the_failures_file_is_written(cli, fake, tenant, store,
                                                                                  tmp_path) -> None:
    """``"\\ud800"`` is valid JSON and no Unicode text: protobuf refused it
    as the whole line's error (field ""), and a refused line carrying one in
    an ignored key made ``--failures`` raise UnicodeEncodeError half-way
    through writing. A payload keeps it, escaped, as its JSON said."""
    path = _jsonl(tmp_path, '{"name": "a\\ud800", "cron": "0 2 * * *", "handler": "h"}',
                  '{"name": "b", "cron": "0 2 * * *", "handler": "h", "labels": {"k": "\\udfff"}}',
                  '{"name": "bad", "cron": "0 2 * * *", "handler": "h", "id": "\\ud800"}',
                  '{"name": "c", "cron": "0 2 * * *", "handler": "h", "payload": ["\\ud83d", "\u00e9"]}',
                  _line(name="after"))
    failures = tmp_path / "failed.jsonl"
    result = cli(*tenant, "--json", "job", "import", str(path), "--failures", str(failures))
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [(1, "name"), (2, "labels"), (3, "job.name")]
    assert [i.job.name for i in _items(fake)] == ["bad", "c", "after"]
    assert json.loads(_items(fake)[1].job.payload) == ["\ud83d", "\u00e9"]
    written = [json.loads(line) for line in failures.read_text(encoding="utf-8").splitlines()]
    assert [w["name"] for w in written] == ["a\ud800", "b", "bad"]
    assert written[2]["id"] == "\ud800" and written[2]["request_id"].startswith("import-")


def test_failures_are_not_held_in_memory_line_by_line(cli, fake, tenant, store, tmp_path) -> None:
    """Every failure was kept for the summary: a file of a million failing
    lines held a million records (a 1 GB file of ``{}`` lines, over 100 GB).
    The text summary shows the first failures; ``--json`` still lists them
    all, read back from a temporary file as they are printed. (A line's
    error also held its traceback, whose frames held the line: a cycle only
    the collector freed, thousands of lines late.)"""
    import tracemalloc

    def peak(lines: int) -> int:
        path = tmp_path / f"bad{lines}.jsonl"
        path.write_bytes(b'{"name": "x"}\n' * lines)
        tracemalloc.start()
        try:
            result = cli(*tenant, "job", "import", str(path))
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            assert result.code == 1 and f"{lines} failed" in result.out

    small, large = peak(4_000), peak(40_000)  # both past the lines a full pipeline holds
    assert large < 2 * small, (small, large)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"name": "x"}\n' * 3_000)
    summary = json.loads(cli(*tenant, "--json", "job", "import", str(path)).out)
    assert summary["failed"] == 3_000 and [f["line"] for f in summary["failures"]] == list(range(1, 3_001))
    assert {f["field"] for f in summary["failures"]} == {"cron"}


def test_a_line_whose_job_no_call_carries_fails_alone(cli, fake, tenant, store, tmp_path) -> None:
    """A line under the 4 MiB line bound can still make a job over the 4 MiB
    a request may be (``1E9`` is sent as ``1000000000.0``, as ever): its call was
    refused whole (RESOURCE_EXHAUSTED), every line beside it failed and the
    rest of the file was not sent."""
    big = '{"name": "big", "cron": "0 2 * * *", "handler": "h", "payload": [' + ",".join(["1E9"] * 350_000) + "]}"
    assert len(big) < jobimport.MAX_LINE_BYTES
    path = _jsonl(tmp_path, _line(name="before"), big, _line(name="after"))
    result = cli(*tenant, "--json", "job", "import", str(path), "--parallel", "1")
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    assert [(f["line"], f["code"], f["field"]) for f in summary["failures"]] == [(2, "INVALID_ARGUMENT", "payload")]
    assert "4194304" in summary["failures"][0]["reason"] and summary["call_error"] is None
    assert [i.job.name for i in _items(fake)] == ["before", "after"]


def test_a_csv_record_is_bounded_as_a_line_is_and_the_next_is_read_in_step(cli, fake, tenant, store,
                                                                           tmp_path) -> None:
    """A quoted cell may hold line breaks, so a record spans lines: each line
    was bounded, the record not. Twenty cells of 3 MiB, each broken over
    two lines, made a record of 60 MiB held at once (tracemalloc peaked
    at 85 MB against 44 MB for two). A record now counts as a line; past
    4 MiB the rest of it is read for its quotes alone, so the records
    after it are read in step (a line inside the long cell that looks like
    a record is not one)."""
    import tracemalloc

    def peak(cells: int) -> tuple[int, dict]:
        table = tmp_path / f"wide{cells}.csv"
        cell = '"' + "x" * (3 * 2**20) + '\nevil,0 2 * * *,echo\n' + 'y""' * 1000 + '"'
        table.write_text("name,cron,handler\n" + "a," + ",".join([cell] * cells) + "\n" + "b,0 2 * * *,echo\n")
        tracemalloc.start()
        try:
            result = cli(*tenant, "--json", "job", "import", str(table))
            return tracemalloc.get_traced_memory()[1], json.loads(result.out)
        finally:
            tracemalloc.stop()

    (small, narrow), (large, wide) = peak(2), peak(20)
    assert large < 2 * small, (small, large)
    for summary in narrow, wide:
        assert [(f["line"], f["field"]) for f in summary["failures"]] == [(2, "")], summary["failures"]
        assert "longer than" in summary["failures"][0]["reason"]
    assert [i.job.name for i in _items(fake)] == ["b", "b"]


def test_a_fifo_crlf_lines_and_no_final_newline_are_read_as_a_file(cli, fake, tenant, store, tmp_path) -> None:
    """Guard (red team, round 4): a FIFO has no size (no share of the file
    for the progress line), CRLF ends a line as LF does, and a last line
    without its newline is a line."""
    import os
    import threading

    fifo = tmp_path / "jobs.jsonl"
    os.mkfifo(fifo)
    data = (_line(name="a") + "\r\n" + _line(name="b") + "\n" + _line(name="c")).encode()
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    result = cli(*tenant, "job", "import", str(fifo))
    writer.join()
    assert result.code == 0, result.err + result.out
    assert [i.job.name for i in _items(fake)] == ["a", "b", "c"]
