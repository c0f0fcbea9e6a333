"""Cron syntax: what parses to what, H, wild/fixed classes, and precise errors."""

from __future__ import annotations

from collections import Counter

import pytest

from tickwheel_server.schedule import ScheduleError
from tickwheel_server.schedule.cron import CronMatcher, parse_cron


def sets(expression: str, job_id: str | None = None):
    f = parse_cron(expression).resolve(job_id)
    return sorted(f.minutes), sorted(f.hours), sorted(f.days), sorted(f.months), sorted(f.weekdays)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("*/15 * * * *", ([0, 15, 30, 45], list(range(24)), list(range(1, 32)), list(range(1, 13)), list(range(7)))),
        ("10-50/20 2,4 1-3 JAN,mar mon-fri", ([10, 30, 50], [2, 4], [1, 2, 3], [1, 3], [1, 2, 3, 4, 5])),
        ("5/20 0 * * 7", ([5, 25, 45], [0], list(range(1, 32)), list(range(1, 13)), [0])),
        ("0 0 * * 5-7", ([0], [0], list(range(1, 32)), list(range(1, 13)), [0, 5, 6])),
        ("0 0 * * FRI-SUN", ([0], [0], list(range(1, 32)), list(range(1, 13)), [0, 5, 6])),
        ("0 0 * * 0-7", ([0], [0], list(range(1, 32)), list(range(1, 13)), list(range(7)))),
        ("00 09 * * *", ([0], [9], list(range(1, 32)), list(range(1, 13)), list(range(7)))),
        ("@daily", ([0], [0], list(range(1, 32)), list(range(1, 13)), list(range(7)))),
        ("@MIDNIGHT", ([0], [0], list(range(1, 32)), list(range(1, 13)), list(range(7)))),
        ("@weekly", ([0], [0], list(range(1, 32)), list(range(1, 13)), [0])),
        ("@monthly", ([0], [0], [1], list(range(1, 13)), list(range(7)))),
        ("@annually", ([0], [0], [1], [1], list(range(7)))),
        ("  0   12  *  *  *  ", ([0], [12], list(range(1, 32)), list(range(1, 13)), list(range(7)))),
    ],
)
def test_parses(expression, expected):
    assert sets(expression) == expected


@pytest.mark.parametrize(
    ("expression", "wild"),
    [
        ("*/15 * * * *", True),
        ("0 */2 * * *", True),
        ("* 1 * * *", True),
        ("H/15 1 * * *", True),
        ("@hourly", True),
        ("30 1 * * *", False),
        ("0,30 2 * * *", False),
        ("H 3 * * *", False),
        ("H(0-29) 3 * * *", False),
        ("0-59 1 * * *", False),
        ("@daily", False),
    ],
)
def test_wild_or_fixed(expression, wild):
    assert parse_cron(expression).wild is wild


def test_day_rule_flags():
    assert parse_cron("0 0 13 * 5").resolve().days_or
    assert not parse_cron("0 0 */2 * 5").resolve().days_or
    assert not parse_cron("0 0 13 * *").resolve().days_or


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "empty cron expression"),
        ("* * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 4"),
        ("0 * * * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 6"),
        ("60 * * * *", "minute field: 60 is out of range 0-59"),
        ("0 24 * * *", "hour field: 24 is out of range 0-23"),
        ("0 0 0 * *", "day-of-month field: 0 is out of range 1-31"),
        ("0 0 32 * *", "day-of-month field: 32 is out of range 1-31"),
        ("0 0 * 13 *", "month field: 13 is out of range 1-12"),
        ("0 0 * * 8", "day-of-week field: 8 is out of range 0-7"),
        ("*/0 * * * *", "minute field: bad step '0': must be a whole number from 1 to 60"),
        ("*/61 * * * *", "minute field: bad step '61': must be a whole number from 1 to 60"),
        ("0 */x * * *", "hour field: bad step 'x': must be a whole number from 1 to 24"),
        ("50-10 * * * *", "minute field: range '50-10' is backwards"),
        ("0 0 * JANUARY *", "month field: 'JANUARY' is not a number or a name"),
        ("0 0 * * MON-", "day-of-week field: '' is not a number or a name"),
        ("1,,2 * * * *", "minute field: empty list item"),
        ("-1 * * * *", "minute field: '' is not a number"),
        ("H(30-10) * * * *", "minute field: range 'H(30-10)' is backwards"),
        ("H(0-60) * * * *", "minute field: 60 is out of range 0-59"),
        ("Hx * * * *", "minute field: bad H form 'Hx' (use H, H(A-B), H/STEP or H(A-B)/STEP)"),
        ("@reboot", "unknown macro '@reboot' (known: @yearly @annually @monthly @weekly @daily @midnight @hourly)"),
        ("0 0 * * * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 7"),
        # Other scripts' digits and spaces: str.isdigit() took "²" and int() raised ValueError (an
        # uncaught traceback from `tickwheel cron next`); "٣", U+3000 and \d took Arabic digits as 3.
        ("\u00b2 * * * *", "U+00B2 at character 1: a cron expression is ASCII"),
        ("*/\u00b2 * * * *", "U+00B2 at character 3: a cron expression is ASCII"),
        ("H(\u00b9-5) * * * *", "U+00B9 at character 3: a cron expression is ASCII"),
        ("0 \u0663 * * *", "U+0663 at character 3: a cron expression is ASCII"),
        ("0 0 L-\u0663 * *", "U+0663 at character 7: a cron expression is ASCII"),
        ("0\u30000 * * *", "U+3000 at character 2: a cron expression is ASCII"),
        ("0 0 * * \u041cON", "U+041C at character 9: a cron expression is ASCII"),
    ],
)
def test_errors_name_field_and_reason(expression, reason):
    with pytest.raises(ScheduleError) as caught:
        parse_cron(expression)
    assert caught.value.field == "schedule.cron.expression"
    assert caught.value.job_field == "job.schedule.cron.expression"
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("0 0 30 2 *", "never fires: day 30 of the month never occurs in Feb"),
        ("59 23 31 2 *", "never fires: day 31 of the month never occurs in Feb"),
        ("0 0 31 4,6,9,11 *", "never fires: day 31 of the month never occurs in Apr, Jun, Sep, Nov"),
        ("0 0 30,31 FEB *", "never fires: days 30,31 of the month never occur in Feb"),
    ],
)
def test_never_fires(expression, reason):
    with pytest.raises(ScheduleError) as caught:
        parse_cron(expression).resolve()
    assert caught.value.reason == reason


def test_a_restricted_weekday_rescues_an_impossible_day():
    # Both day fields restricted: either matches, so Fridays in February fire.
    assert parse_cron("0 0 30 2 5").resolve().days_or


def test_h_is_stable_per_job_and_spreads():
    first = sets("H H * * *", "job_01")
    assert sets("H H * * *", "job_01") == first
    minutes = Counter(sets("H * * * *", f"job_{i}")[0][0] for i in range(6000))
    assert set(minutes) == set(range(60))
    assert max(minutes.values()) < 3 * 6000 / 60  # roughly even, no hot minute


def test_h_forms():
    for i in range(200):
        job = f"job_{i}"
        (minute,), (hour,), _, _, _ = sets("H(0-29) H(9-17) * * *", job)
        assert 0 <= minute <= 29 and 9 <= hour <= 17
        stepped = sets("H/15 * * * *", job)[0]
        assert len(stepped) == 4 and stepped[0] < 15 and all(b - a == 15 for a, b in zip(stepped, stepped[1:]))
        ranged = sets("H(10-40)/10 * * * *", job)[0]
        assert ranged[0] in range(10, 20) and all(10 <= m <= 40 for m in ranged)
        (day,) = sets("0 0 H * *", job)[2]
        assert 1 <= day <= 28  # so it fires every month


def test_h_fields_are_independent():
    pairs = {tuple(x[0] for x in sets("H H * * *", f"job_{i}")[:2]) for i in range(300)}
    assert len({m - h for m, h in pairs}) > 30  # not the same value in both fields


def test_h_needs_a_job_id():
    with pytest.raises(ScheduleError) as caught:
        parse_cron("H * * * *").resolve(None)
    assert caught.value.field == "schedule.cron.expression"
    assert "job id" in caught.value.reason


def test_names_are_not_mistaken_for_h():
    assert not parse_cron("0 0 * * THU").uses_h
    assert sets("0 0 * * THU")[4] == [4]


def test_matcher_finds_every_matching_minute_of_a_day():
    matcher = CronMatcher(parse_cron("*/7 9-10 * * *").resolve())
    day = 20000 * 1440  # a day, in wall minutes since 1970
    found = []
    m = matcher.next_match(day)
    while m is not None and m < day + 1440:
        found.append(m - day)
        m = matcher.next_match(m + 1)
    expected = [h * 60 + mm for h in (9, 10) for mm in range(0, 60, 7)]
    assert found == expected
    assert all(matcher.matches(day + x) for x in expected)
    assert not matcher.matches(day + 9 * 60 + 1)
