"""Quartz's day terms at fixed instants, written out by hand from a calendar
(stated in each case), with Tickwheel's DST rule; and the malformed ones,
refused naming the field."""

from __future__ import annotations

import pytest

from tickwheel_server.schedule import ScheduleError
from tickwheel_server.schedule.cron import parse_cron

from .test_fixed_instants import fires

CASES = [
    # (expression, zone, after, expected fires)
    # 2027: Jan 31 is a Sunday, Feb has 28 days, Apr 30 a Friday; 2028 is a leap year.
    ("0 9 L * *", "UTC", "2027-01-01T00:00:00Z", ["2027-01-31T09:00:00Z", "2027-02-28T09:00:00Z", "2027-03-31T09:00:00Z"]),
    ("0 9 L-1 2 *", "UTC", "2027-01-01T00:00:00Z", ["2027-02-27T09:00:00Z", "2028-02-28T09:00:00Z"]),
    # L-30 is the 1st of a 31-day month only: never in February or 30-day months.
    ("0 0 L-30 * *", "UTC", "2027-01-02T00:00:00Z", ["2027-03-01T00:00:00Z", "2027-05-01T00:00:00Z"]),
    # 1W: 2027-05-01 is a Saturday -> Monday 3rd; 2027-08-01 a Sunday -> Monday 2nd.
    ("0 9 1W 5,8 *", "UTC", "2027-01-01T00:00:00Z", ["2027-05-03T09:00:00Z", "2027-08-02T09:00:00Z"]),
    # 15W: 2027-05-15 Saturday -> Friday 14th; 2027-08-15 Sunday -> Monday 16th.
    ("0 9 15W 5,8 *", "UTC", "2027-01-01T00:00:00Z", ["2027-05-14T09:00:00Z", "2027-08-16T09:00:00Z"]),
    # 31W: 2027-10-31 is a Sunday -> Friday 29th (never Monday 1 Nov); no 31st in September.
    ("0 9 31W 9,10 *", "UTC", "2027-01-01T00:00:00Z", ["2027-10-29T09:00:00Z", "2028-10-31T09:00:00Z"]),
    # LW: Jan 2027 ends on a Sunday -> Friday 29th; Jul 2027 ends on a Saturday -> Friday 30th.
    ("0 9 LW 1,7 *", "UTC", "2027-01-01T00:00:00Z", ["2027-01-29T09:00:00Z", "2027-07-30T09:00:00Z"]),
    # FRI#3: Fridays of Jan 2027 are 1, 8, 15.
    ("0 9 * 1 FRI#3", "UTC", "2027-01-01T00:00:00Z", ["2027-01-15T09:00:00Z", "2028-01-21T09:00:00Z"]),
    # 5#5, a fifth Friday: Jan 2027 (29th), then Apr (30th), Jul (30th); Feb-Mar have none.
    ("0 9 * * 5#5", "UTC", "2027-01-01T00:00:00Z", ["2027-01-29T09:00:00Z", "2027-04-30T09:00:00Z", "2027-07-30T09:00:00Z"]),
    # 0#5 and 7#5 are both a fifth Sunday: Jan 2027 (31st), then May (30th).
    ("0 9 * * 7#5", "UTC", "2027-01-01T00:00:00Z", ["2027-01-31T09:00:00Z", "2027-05-30T09:00:00Z"]),
    # FRIL and 5L: the last Friday; Feb 2027's is the 26th.
    ("0 9 * 2 FRIL", "UTC", "2027-01-01T00:00:00Z", ["2027-02-26T09:00:00Z", "2028-02-25T09:00:00Z"]),
    # Lists, and Vixie's rule: the last day or any Monday (Mondays of Jan 2027: 4, 11, 18, 25).
    ("0 9 L,15 1 *", "UTC", "2027-01-01T00:00:00Z", ["2027-01-15T09:00:00Z", "2027-01-31T09:00:00Z"]),
    ("0 9 L * 1", "UTC", "2027-01-20T00:00:00Z", ["2027-01-25T09:00:00Z", "2027-01-31T09:00:00Z", "2027-02-01T09:00:00Z"]),
    # Both day fields restricted by terms: the 1st weekday or the last Friday of the month.
    ("0 9 1W * FRIL", "UTC", "2027-01-01T00:00:00Z", ["2027-01-01T09:00:00Z", "2027-01-29T09:00:00Z", "2027-02-01T09:00:00Z"]),
    # Europe/London, last Sunday of the month at 01:30 (fixed-time). 2027-03-28 is the
    # spring-forward day (01:00 -> 02:00 BST): the first instant after the gap, 01:00 UTC.
    ("30 1 * 3 SUNL", "Europe/London", "2027-03-01T00:00:00Z", ["2027-03-28T01:00:00Z", "2028-03-26T01:00:00Z"]),
    # 2027-10-31 and 2028-10-29 are fall-back days (01:00-02:00 twice): once, at the first 01:30 (BST).
    ("30 1 * 10 SUNL", "Europe/London", "2027-10-01T00:00:00Z", ["2027-10-31T00:30:00Z", "2028-10-29T00:30:00Z"]),
    # Two fixed times on the last day of October, a fall-back day in 2027 (each once, in BST)
    # and a Tuesday in 2028 (GMT); "* 1 L 10 *" is wild: every minute of both 01:00 hours.
    ("0,30 1 L 10 *", "Europe/London", "2027-10-30T00:00:00Z",
     ["2027-10-31T00:00:00Z", "2027-10-31T00:30:00Z", "2028-10-31T01:00:00Z"]),
    ("*/30 1 L 10 *", "Europe/London", "2027-10-30T00:00:00Z",
     ["2027-10-31T00:00:00Z", "2027-10-31T00:30:00Z", "2027-10-31T01:00:00Z", "2027-10-31T01:30:00Z"]),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), CASES)
def test_day_terms_fire_at_these_instants(expression: str, zone: str, after: str, expected: list[str]) -> None:
    assert fires(expression, zone, after, len(expected)) == expected


@pytest.mark.parametrize(("expression", "message"), [
    ("0 0 L-31 * *", "day-of-month field: 'L-31': n in L-n must be 0 to 30"),
    ("0 0 32W * *", "day-of-month field: '32W': the day in nW must be 1 to 31"),
    ("0 0 0W * *", "day-of-month field: '0W': the day in nW must be 1 to 31"),
    ("0 0 LX * *", "day-of-month field: bad term 'LX'"),
    ("0 0 L/2 * *", "day-of-month field: bad term 'L/2'"),
    ("0 0 1-LW * *", "day-of-month field: bad term '1-LW'"),
    ("0 0 * * 5#6", "day-of-week field: '5#6': k in d#k must be 1 to 5"),
    ("0 0 * * 5#0", "day-of-week field: '5#0': k in d#k must be 1 to 5"),
    ("0 0 * * 8#1", "day-of-week field: 8 is out of range 0-7"),
    ("0 0 * * FRI#", "day-of-week field: bad term 'FRI#'"),
    ("0 0 * * L", "day-of-week field: bad term 'L'"),
    ("0 0 * * 1-5L", "day-of-week field: bad term '1-5L'"),
    ("0 0 * * XYZL", "day-of-week field: 'XYZ' is not a number or a name"),
    ("0 0 L * * ", None),
    ("0 0 30W 2 *", "never fires: the day fields (30W) match no day of Feb"),
    ("0 0 L-29 2 *", "never fires: the day fields (L-29) match no day of Feb"),
])  # fmt: skip
def test_malformed_day_terms_are_refused_naming_the_field(expression: str, message: str | None) -> None:
    if message is None:  # the control: well formed
        parse_cron(expression).resolve()
        return
    with pytest.raises(ScheduleError) as error:
        parse_cron(expression).resolve()
    assert error.value.field == "schedule.cron.expression"
    assert message in str(error.value)


def test_terms_in_lower_case_read_as_upper() -> None:
    assert fires("0 9 * 1 fri#3", "UTC", "2027-01-01T00:00:00Z", 1) == ["2027-01-15T09:00:00Z"]
    assert fires("0 9 lw 1 *", "UTC", "2027-01-01T00:00:00Z", 1) == ["2027-01-29T09:00:00Z"]
