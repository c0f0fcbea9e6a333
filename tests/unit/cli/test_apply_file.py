"""`tickwheel apply`'s file and plan, pure: TOML and YAML read into jobs with
their lines, every hostile file refused with its line, job and key, the
jobs checked with the server's rules, and the plan matching stored jobs by
name (create, update of the fields that differ, unchanged, delete only
with prune, conflicts)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tickwheel.v1 import job_pb2
from tickwheel_server.cli import applyfile, applyplan
from tickwheel_server.cli.applyfile import MAX_FILE_BYTES, MAX_JOBS, FileError

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)

TOML = b"""\
# two jobs
[[jobs]]
name = "nightly"
cron = "0 2 * * *"
tz = "Europe/London"
handler = "report"
payload = { day = "yesterday", n = 3 }
labels = { team = "data" }

[[jobs]]
name = "once"
at = 2031-01-01T00:00:00Z
url = "https://example.com/hook"
headers = { "X-Team" = "data" }
version = 4
"""

YAML = b"""\
jobs:
  - name: nightly
    cron: "0 2 * * *"
    tz: Europe/London
    handler: report
    payload: {day: yesterday, n: 3}
    labels: {team: data}
  - name: once
    at: 2031-01-01T00:00:00Z
    url: https://example.com/hook
    headers: {X-Team: data}
    version: 4
"""


def _problems(data: bytes, fmt: str) -> list[applyfile.Problem]:
    with pytest.raises(FileError) as caught:
        applyfile.read(data, fmt)
    return caught.value.problems


@pytest.mark.parametrize("data,fmt", [(TOML, "toml"), (YAML, "yaml")])
def test_both_formats_declare_the_same_jobs_with_their_lines(data: bytes, fmt: str) -> None:
    nightly, once = applyfile.read(data, fmt)
    assert (nightly.name, nightly.version, once.name, once.version) == ("nightly", None, "once", 4)
    assert nightly.job.schedule.cron.expression == "0 2 * * *" and nightly.job.schedule.cron.time_zone == "Europe/London"
    assert nightly.job.payload == b'{"day":"yesterday","n":3}' and dict(nightly.job.labels) == {"team": "data"}
    assert once.job.schedule.once_at.ToDatetime(tzinfo=timezone.utc) == datetime(2031, 1, 1, tzinfo=timezone.utc)
    assert dict(once.job.target.http.headers) == {"X-Team": "data"}
    assert (nightly.line, once.line) == ((2, 10) if fmt == "toml" else (2, 8))
    assert once.key_lines["url"] == (13 if fmt == "toml" else 10)


def test_the_same_jobs_in_either_format_have_the_same_request_ids() -> None:
    toml_ids = [applyplan.request_id(d) for d in applyfile.read(TOML, "toml")]
    yaml_ids = [applyplan.request_id(d) for d in applyfile.read(YAML, "yaml")]
    assert toml_ids == yaml_ids and len(set(toml_ids)) == 2
    assert all(i.startswith("apply-") and len(i) <= 128 for i in toml_ids)
    (first,) = applyfile.read(b'[[jobs]]\nname = "a"\ncron = "0 3 * * *"\nhandler = "h"\n', "toml")
    (edited,) = applyfile.read(b'[[jobs]]\nname = "a"\ncron = "0 4 * * *"\nhandler = "h"\n', "toml")
    assert applyplan.request_id(first) != applyplan.request_id(edited)
    assert applyplan.request_id(first, 1) == applyplan.request_id(first) + "-2"


def test_a_name_declared_twice_is_refused_naming_both() -> None:
    data = b'[[jobs]]\nname = "a"\ncron = "* * * * *"\nhandler = "h"\n\n[[jobs]]\nname = "a"\ncron = "1 * * * *"\nhandler = "h"\n'
    (problem,) = _problems(data, "toml")
    assert (problem.line, problem.field) == (7, "name")
    assert "jobs[0]" in problem.reason and "line 1" in problem.reason
    assert problem.text("jobs.toml").startswith('jobs.toml:7: jobs[1] "a": name: declared twice')


def test_a_file_over_the_bound_is_refused_unparsed() -> None:
    data = b"jobs = []\n" + b"#" * (10 * 1024 * 1024)
    (problem,) = _problems(data, "toml")
    assert f"at most {MAX_FILE_BYTES}" in problem.reason


def test_too_many_jobs_are_refused() -> None:
    data = b"jobs = [" + b",".join([b'{name="x"}'] * (MAX_JOBS + 1)) + b"]\n"
    (problem,) = _problems(data, "toml")
    assert problem.field == "jobs" and f"at most {MAX_JOBS}" in problem.reason


@pytest.mark.parametrize("fmt", ["toml", "yaml"])
def test_a_nul_byte_is_refused_with_its_line(fmt: str) -> None:
    data = (TOML if fmt == "toml" else YAML).replace(b"report", b"rep\x00ort")
    (problem,) = _problems(data, fmt)
    assert problem.line == (6 if fmt == "toml" else 5) and "NUL" in problem.reason


@pytest.mark.parametrize("data,fmt", [
    (b'[[jobs]]\nname = "a\\u0000b"\ncron = "* * * * *"\nhandler = "h"\n', "toml"),
    (b'jobs:\n  - name: "a\\0b"\n    cron: "* * * * *"\n    handler: h\n', "yaml"),
])  # fmt: skip
def test_an_escaped_nul_in_a_value_is_refused_naming_the_key(data: bytes, fmt: str) -> None:
    (problem,) = _problems(data, fmt)
    assert (problem.line, problem.field) == (2, "name") and "NUL" in problem.reason


@pytest.mark.parametrize("data,fmt,line,key", [
    (b'[[jobs]]\nname = "a"\ncron = "* * * * *"\nhandler = "h"\ncrno = "x"\n', "toml", 5, "crno"),
    (b'jobs:\n  - name: a\n    cron: "* * * * *"\n    handler: h\n    request_id: r1\n', "yaml", 5, "request_id"),
    (b'[[jobs]]\nname = "a"\ncron = "* * * * *"\nhandler = "h"\nstate = "paused"\n', "toml", 5, "state"),
])  # fmt: skip
def test_unknown_keys_are_refused_with_the_key_named(data: bytes, fmt: str, line: int, key: str) -> None:
    (problem,) = _problems(data, fmt)
    assert (problem.line, problem.where, problem.field) == (line, 'jobs[0] "a"', key)
    assert "unknown key" in problem.reason


def test_an_unknown_top_level_key_and_a_missing_jobs_list_are_refused() -> None:
    (problem,) = _problems(b'jobs = []\nprune = true\n', "toml")
    assert problem.field == "prune"
    (problem,) = _problems(b"", "toml")
    assert problem.field == "jobs" and "required" in problem.reason
    (problem,) = _problems(b"- a\n- b\n", "yaml")
    assert "mapping" in problem.reason
    assert applyfile.read(b"jobs = []\n", "toml") == [] and applyfile.read(b"jobs: []\n", "yaml") == []


@pytest.mark.parametrize("data,reason", [
    (b"a: &x [1]\njobs: *x\n", "aliases"),
    (b"jobs: !!python/object:os.system []\n", "tag"),
    (b"jobs: []\njobs: []\n", "given twice"),
    (b"jobs:\n  - name: a\n    name: b\n", "given twice"),
    (b"jobs:\n  - {<<: {name: a}, cron: '* * * * *'}\n", "merge"),
    (b"jobs: [" + b"[" * 100 + b"]" * 100 + b"]\n", "nested"),
    (b"jobs: [\n", "not valid YAML"),
    (b"jobs: []\n---\njobs: []\n", "not valid YAML"),
])  # fmt: skip
def test_hostile_yaml_is_refused(data: bytes, reason: str) -> None:
    (problem,) = _problems(data, "yaml")
    assert reason in problem.reason and problem.line is not None


@pytest.mark.parametrize("depth", [65, 500, 100_000])
@pytest.mark.parametrize("fmt", ["toml", "yaml"])
def test_a_payload_nested_past_the_bound_is_refused_not_a_crash(fmt: str, depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    if fmt == "toml":
        data = b'[[jobs]]\nname = "a"\ncron = "* * * * *"\nhandler = "h"\npayload = ' + nested + b"\n"
    else:
        data = b'jobs:\n  - name: a\n    cron: "* * * * *"\n    handler: h\n    payload: ' + nested + b"\n"
    (problem,) = _problems(data, fmt)
    assert "nested deeper than 64" in problem.reason


def test_invalid_toml_and_utf8_name_their_line() -> None:
    (problem,) = _problems(b'jobs = []\nx = \n', "toml")
    assert problem.line == 2 and "not valid TOML" in problem.reason
    (problem,) = _problems(b'jobs = []\n# \xff\n', "toml")
    assert problem.line == 2 and "UTF-8" in problem.reason


def test_every_bad_job_is_listed_not_only_the_first() -> None:
    data = (b'[[jobs]]\nname = "a"\nhandler = "h"\n\n'  # no schedule
            b'[[jobs]]\nname = "b"\ncron = "* * * * *"\nhandler = 3\n'
            b'[[jobs]]\nname = "c"\ncron = "* * * * *"\nhandler = "h"\nversion = 0\n'
            b'[[jobs]]\nname = "d"\nat = 2031-01-01T00:00:00\nhandler = "h"\n')  # fmt: skip
    problems = _problems(data, "toml")
    assert [(p.where, p.field, p.line) for p in problems] == [
        ('jobs[0] "a"', "cron", 1), ('jobs[1] "b"', "handler", 8), ('jobs[2] "c"', "version", 13),
        ('jobs[3] "d"', "at", 16)]


def test_a_name_too_long_is_refused_by_the_servers_rules_naming_the_key() -> None:
    data = b'[[jobs]]\nname = "' + b"n" * 201 + b'"\ncron = "* * * * *"\nhandler = "h"\n'
    declared = applyfile.read(data, "toml")
    normalised, problems = applyplan.check(declared, NOW)
    assert normalised == [None]
    assert [(p.line, p.field) for p in problems] == [(2, "name")] and "job.name" in problems[0].reason


def test_the_servers_rules_name_the_files_key() -> None:
    data = (b'[[jobs]]\nname = "a"\ncron = "61 * * * *"\nhandler = "h"\n'
            b'[[jobs]]\nname = "b"\ncron = "* * * * *"\ntz = "Mars/Olympus"\nhandler = "h"\n'
            b'[[jobs]]\nname = "c"\ncron = "* * * * *"\nhandler = "h"\nmax_attempts = 1000\n'
            b'[[jobs]]\nname = "d"\ncron = "* * * * *"\nurl = "ftp://x"\n')  # fmt: skip
    _, problems = applyplan.check(applyfile.read(data, "toml"), NOW)
    assert [(p.where, p.field) for p in problems] == [
        ('jobs[0] "a"', "cron"), ('jobs[1] "b"', "tz"), ('jobs[2] "c"', "max_attempts"), ('jobs[3] "d"', "url")]
    assert [p.line for p in problems] == [3, 8, 14, 18]


def _stored(normalised: job_pb2.Job, job_id: str, version: int) -> job_pb2.Job:
    job = job_pb2.Job()
    job.CopyFrom(normalised)
    job.id, job.version, job.tenant = job_id, version, "acme"
    job.state = job_pb2.JOB_STATE_ACTIVE
    job.run_count = 7
    job.next_run_at.FromDatetime(datetime(2026, 6, 2, 1, 0))
    return job


def _plan(data: bytes, stored: list[job_pb2.Job], prune: bool = False) -> list[applyplan.Step]:
    declared = applyfile.read(data, "toml")
    normalised, problems = applyplan.check(declared, NOW)
    assert problems == []
    return applyplan.plan(declared, normalised, stored, prune=prune)


def test_the_plan_creates_updates_keeps_and_deletes_only_with_prune() -> None:
    base = b'[[jobs]]\nname = "same"\ncron = "0 2 * * *"\nhandler = "h"\n'
    declared = applyfile.read(base, "toml")
    normalised, _ = applyplan.check(declared, NOW)
    same = _stored(normalised[0], "j1", 3)
    edited = _stored(normalised[0], "j2", 5)
    edited.name = "edited"
    gone = _stored(normalised[0], "j3", 1)
    gone.name = "gone"
    data = base + (b'[[jobs]]\nname = "edited"\ncron = "0 3 * * *"\nhandler = "h"\npayload = 1\n'
                   b'[[jobs]]\nname = "new"\ncron = "0 2 * * *"\nhandler = "h"\n')  # fmt: skip
    steps = _plan(data, [same, edited, gone])
    assert [(s.action, s.name, s.fields) for s in steps] == [
        ("unchanged", "same", []), ("update", "edited", ["schedule", "payload"]), ("create", "new", [])]
    pruned = _plan(data, [same, edited, gone], prune=True)
    assert [(s.action, s.name) for s in pruned][-1] == ("delete", "gone") and pruned[-1].stored.id == "j3"
    assert pruned[-1].as_json()["version"] == 1


def test_defaults_the_file_leaves_out_are_not_a_change() -> None:
    explicit = (b'[[jobs]]\nname = "a"\ncron = "0 2 * * *"\ntz = "UTC"\nhandler = "h"\noverlap = "skip"\n'
                b'misfire = "run_once"\nmax_attempts = 5\nattempt_timeout = "5m"\nmisfire_threshold = "60s"\n')
    declared = applyfile.read(explicit, "toml")
    normalised, _ = applyplan.check(declared, NOW)
    stored = _stored(normalised[0], "j1", 2)
    stored.misfire_run_all_limit = 7  # a field a file cannot set: not compared, not sent
    (step,) = _plan(b'[[jobs]]\nname = "a"\ncron = "0 2 * * *"\nhandler = "h"\n', [stored])
    assert (step.action, step.fields) == ("unchanged", [])


def test_conflicts_a_stale_version_a_vanished_job_and_a_shared_name() -> None:
    data = (b'[[jobs]]\nname = "stale"\ncron = "0 2 * * *"\nhandler = "h"\nversion = 2\n'
            b'[[jobs]]\nname = "vanished"\ncron = "0 2 * * *"\nhandler = "h"\nversion = 1\n'
            b'[[jobs]]\nname = "twice"\ncron = "0 2 * * *"\nhandler = "h"\n'
            b'[[jobs]]\nname = "current"\ncron = "0 2 * * *"\nhandler = "h"\nversion = 4\n')  # fmt: skip
    declared = applyfile.read(data, "toml")
    normalised, _ = applyplan.check(declared, NOW)
    stale = _stored(normalised[0], "j1", 3)
    twice_a, twice_b = _stored(normalised[2], "j2", 1), _stored(normalised[2], "j3", 1)
    current = _stored(normalised[3], "j4", 4)
    steps = applyplan.plan(declared, normalised, [stale, twice_a, twice_b, current], prune=False)
    assert [s.action for s in steps] == ["conflict", "conflict", "conflict", "unchanged"]
    assert "version 2" in steps[0].reason and "version 3" in steps[0].reason
    assert "no job has this name" in steps[1].reason
    assert "2 jobs have this name (j2, j3)" in steps[2].reason


@pytest.mark.parametrize("path,key", [
    ("job.schedule.cron.expression", "cron"), ("job.schedule.cron.time_zone", "tz"), ("job.schedule.once_at", "at"),
    ("job.target.http.headers[\"Host\"]", "headers"), ("job.retry_policy.max_backoff", "max_backoff"),
    ("job.concurrency_keys[2].limit", "concurrency_keys"), ("job.timeout", "attempt_timeout"), ("job", ""),
    ("job.labels", "labels"),
])  # fmt: skip
def test_a_server_field_path_names_the_files_key(path: str, key: str) -> None:
    assert applyplan.file_key(path) == key


@pytest.mark.parametrize("fmt", ["toml", "yaml"])
def test_a_payloads_numbers_are_sent_as_written(fmt: str) -> None:
    """A payload's numbers went through Python floats: an amount of
    12345678901234567890.12 was sent as 1.2345678901234567e+19. A number a
    float holds is sent as before (1.50 as 1.5), any other with its digits;
    NaN and infinity are refused naming the payload."""
    numbers = "{ amount = 12345678901234567890.12, price = 1.50, tiny = 1.0e-400 }" if fmt == "toml" else \
        "{amount: 12345678901234567890.12, price: 1.50, tiny: 1.0e-400}"
    head = b'[[jobs]]\nname = "a"\ncron = "* * * * *"\nhandler = "h"\npayload = ' if fmt == "toml" else \
        b'jobs:\n  - name: a\n    cron: "* * * * *"\n    handler: h\n    payload: '
    (job,) = applyfile.read(head + numbers.encode() + b"\n", fmt)
    assert job.job.payload == b'{"amount":12345678901234567890.12,"price":1.5,"tiny":1.0E-400}'
    for bad in (("nan", "inf") if fmt == "toml" else (".nan", "-.inf")):
        (problem,) = _problems(head + bad.encode() + b"\n", fmt)
        assert problem.field == "payload", problem
