"""``tickwheel cron next``, called as a function with a fake clock."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.schedule import jitter_delay
from tickwheel_server.schedule.cli import cron_next_main


def run(*argv: str, now: datetime | None = None) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    clock = FakeClock(now or datetime(2027, 3, 27, 12, tzinfo=timezone.utc))
    code = cron_next_main(list(argv), clock=clock, stdout=out, stderr=err)
    return code, out.getvalue().splitlines(), err.getvalue()


def test_prints_nominal_instants_in_utc_with_z():
    code, lines, err = run("30 1 * * *", "--tz", "Europe/London", "--count", "3")
    assert (code, err) == (0, "")
    assert lines == ["2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z", "2027-03-30T00:30:00Z"]


def test_defaults_to_five_fires_after_now():
    code, lines, _ = run("0 * * * *", "--tz", "UTC", now=datetime(2027, 1, 1, 10, 0, tzinfo=timezone.utc))
    assert code == 0
    assert lines == [f"2027-01-01T{h}:00:00Z" for h in (11, 12, 13, 14, 15)]


def test_after_is_strict_and_accepts_offsets():
    _, lines, _ = run("0 9 * * *", "--tz", "UTC", "--after", "2027-01-01T09:00:00Z", "--count", "1")
    assert lines == ["2027-01-02T09:00:00Z"]
    _, lines, _ = run("0 9 * * *", "--tz", "UTC", "--after", "2027-01-01T09:30:00+01:00", "--count", "1")
    assert lines == ["2027-01-01T09:00:00Z"]


def test_explain_adds_local_time_and_notes():
    code, lines, _ = run(
        "0,30 2 * * *", "--tz", "America/New_York", "--after", "2027-03-13T12:00:00Z", "--count", "2", "--explain"
    )
    assert code == 0
    assert lines == [
        "2027-03-14T07:00:00Z\t2027-03-14T03:00:00-04:00\t02:00, 02:30 all skipped by the 02:00→03:00 jump: shifted to 03:00",
        "2027-03-15T06:00:00Z\t2027-03-15T02:00:00-04:00",
    ]


def test_explain_says_what_a_wild_job_skipped():
    _, lines, _ = run("*/30 * * * *", "--tz", "Europe/London", "--after", "2027-03-28T00:40:00Z", "--count", "1", "--explain")
    assert lines == ["2027-03-28T01:00:00Z\t2027-03-28T02:00:00+01:00\t01:00, 01:30 skipped by the 01:00→02:00 jump: not caught up"]


def test_job_id_resolves_h_and_prints_due_instants():
    code, lines, _ = run("H 9 * * *", "--tz", "UTC", "--after", "2027-01-01T00:00:00Z", "--count", "2", "--job-id", "job_42")
    assert code == 0
    delay = jitter_delay("job_42", timedelta(seconds=60))
    first = datetime.fromisoformat(lines[0].replace("Z", "+00:00"))
    nominal = first - delay
    assert nominal.hour == 9 and nominal.second == 0 and nominal.microsecond == 0
    assert len(lines) == 2
    same = run("H 9 * * *", "--tz", "UTC", "--after", "2027-01-01T00:00:00Z", "--count", "2", "--job-id", "job_42")[1]
    assert same == lines


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["H * * * *", "--tz", "UTC"], "tickwheel cron next: EXPR: H needs a job id to pick its value (save the job first, or pass one)"),
        (["0 0 30 2 *", "--tz", "UTC"], "tickwheel cron next: EXPR: never fires: day 30 of the month never occurs in Feb"),
        (["61 * * * *", "--tz", "UTC"], "tickwheel cron next: EXPR: minute field: 61 is out of range 0-59"),
        (["\u00b2 * * * *", "--tz", "UTC"], "tickwheel cron next: EXPR: U+00B2 at character 1: a cron expression is ASCII"),
        (["0 0 * * *", "--tz", "Europe/Londn"], "tickwheel cron next: --tz: unknown time zone 'Europe/Londn'"),
        (["0 0 * * *"], "tickwheel cron next: the following arguments are required: --tz"),
        (["0 0 * * *", "--tz", "UTC", "--count", "0"], "tickwheel cron next: --count must be from 1 to 10000"),
        (["0 0 * * *", "--tz", "UTC", "--count", "x"], "tickwheel cron next: argument --count: invalid int value: 'x'"),
        (["0 0 * * *", "--tz", "UTC", "--after", "yesterday"],
         "tickwheel cron next: --after: 'yesterday' is not an RFC 3339 timestamp like 2027-03-28T00:00:00Z"),
        (["0 0 * * *", "--tz", "UTC", "--after", "2027-01-01T00:00:00"],
         "tickwheel cron next: --after: '2027-01-01T00:00:00' needs an offset or Z"),
        (["0 0 * * *", "--tz", "UTC", "--bogus"], "tickwheel cron next: unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(argv, message):
    code, lines, err = run(*argv)
    assert code == 2
    assert lines == []
    assert err == message + "\n"


def test_help():
    code, lines, _ = run("--help")
    assert code == 0 and lines[0].startswith("usage: tickwheel cron next")


def test_explain_says_which_quartz_day_term_named_the_day():
    code, lines, err = run("30 1 1W,L * FRI#3", "--tz", "Europe/London", "--after", "2027-03-01T00:00:00Z",
                           "--count", "3", "--explain")
    assert (code, err) == (0, "")
    assert lines == [
        "2027-03-01T01:30:00Z\t2027-03-01T01:30:00+00:00\tday: 1W: the weekday nearest day 1",
        "2027-03-19T01:30:00Z\t2027-03-19T01:30:00+00:00\tday: FRI#3: the third Friday of the month",
        "2027-03-31T00:30:00Z\t2027-03-31T01:30:00+01:00\tday: L: the last day of the month",
    ]


@pytest.mark.parametrize("expression", ["0 0 L-31 * *", "0 0 32W * *", "0 0 * * 5#6", "0 0 * * 8#1", "0 0 * * 5#0",
                                        "0 0 LX * *"])
def test_malformed_day_terms_exit_2_naming_the_field(expression):
    code, lines, err = run(expression, "--tz", "UTC")
    assert (code, lines) == (2, [])
    assert err.startswith("tickwheel cron next: EXPR: day-of-")
