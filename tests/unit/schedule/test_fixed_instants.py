"""Table tests at fixed instants: what fires when, through real clock changes.

Expected instants are written out by hand from the zone's rules (stated in
each case). Zones whose rules change between tzdata releases (Cairo, Beirut,
Santiago) take their transition from the pinned tzdata in the test, and the
test first checks the premise (a midnight transition) before asserting.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from tickwheel_server.schedule import Engine, GapPolicy, RepeatPolicy, Schedule

from .reference import transitions_in_year

UTC = timezone.utc
ENGINE = Engine()


def z(text: str) -> datetime:
    """An RFC 3339 UTC instant."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def fires(expression: str, zone: str, after: str | datetime, count: int, **fields) -> list[str]:
    schedule = Schedule.cron(expression, zone, exact=True, **fields)
    start = z(after) if isinstance(after, str) else after
    out = []
    for fire in ENGINE.iter_fires(schedule, start):
        out.append(fire.nominal_at.strftime("%Y-%m-%dT%H:%M:%SZ"))
        if len(out) == count:
            break
    return out


CASES = [
    # --- Europe/London 2027: 28 Mar 01:00 GMT -> 02:00 BST (01:00Z); 31 Oct 02:00 BST -> 01:00 GMT (01:00Z).
    ("fixed in gap shifts to 02:00 BST", "30 1 * * *", "Europe/London", "2027-03-27T12:00:00Z", {},
     ["2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"]),
    ("01:00 itself is skipped: fixed shifts", "0 1 * * *", "Europe/London", "2027-03-27T12:00:00Z", {},
     ["2027-03-28T01:00:00Z", "2027-03-29T00:00:00Z"]),
    ("02:30 BST exists", "30 2 * * *", "Europe/London", "2027-03-27T12:00:00Z", {},
     ["2027-03-28T01:30:00Z", "2027-03-29T01:30:00Z"]),
    ("wild skips the gap", "*/30 * * * *", "Europe/London", "2027-03-28T00:00:00Z", {},
     ["2027-03-28T00:30:00Z", "2027-03-28T01:00:00Z", "2027-03-28T01:30:00Z"]),
    ("wild * 1: nothing on the gap day", "* 1 * * *", "Europe/London", "2027-03-28T00:00:00Z", {},
     ["2027-03-29T00:00:00Z", "2027-03-29T00:01:00Z"]),
    ("gap skip policy", "30 1 * * *", "Europe/London", "2027-03-27T12:00:00Z", {"gap": GapPolicy.SKIP},
     ["2027-03-29T00:30:00Z"]),
    ("wild with gap shift", "*/30 1 * * *", "Europe/London", "2027-03-28T00:00:00Z", {"gap": GapPolicy.SHIFT},
     ["2027-03-28T01:00:00Z", "2027-03-29T00:00:00Z"]),
    ("fixed in repeat fires once (croniter fires twice)", "30 1 * * *", "Europe/London", "2027-10-30T12:00:00Z", {},
     ["2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"]),
    ("fixed with repeat both", "30 1 * * *", "Europe/London", "2027-10-30T12:00:00Z", {"repeat": RepeatPolicy.BOTH},
     ["2027-10-31T00:30:00Z", "2027-10-31T01:30:00Z", "2027-11-01T01:30:00Z"]),
    ("wild fires in both halves", "*/30 * * * *", "Europe/London", "2027-10-30T23:45:00Z", {},
     ["2027-10-31T00:00:00Z", "2027-10-31T00:30:00Z", "2027-10-31T01:00:00Z", "2027-10-31T01:30:00Z",
      "2027-10-31T02:00:00Z"]),
    ("wild with repeat once", "*/30 1 * * *", "Europe/London", "2027-10-30T12:00:00Z", {"repeat": RepeatPolicy.ONCE},
     ["2027-10-31T00:00:00Z", "2027-10-31T00:30:00Z", "2027-11-01T01:00:00Z"]),
    ("@hourly is wild: every real hour", "@hourly", "Europe/London", "2027-10-30T23:30:00Z", {},
     ["2027-10-31T00:00:00Z", "2027-10-31T01:00:00Z", "2027-10-31T02:00:00Z"]),
    # --- America/New_York 2027: 14 Mar 02:00 EST -> 03:00 EDT (07:00Z); 7 Nov 02:00 EDT -> 01:00 EST (06:00Z).
    ("NY fixed in gap", "30 2 * * *", "America/New_York", "2027-03-13T12:00:00Z", {},
     ["2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z"]),
    ("two times of one job in one gap: one fire", "0,30 2 * * *", "America/New_York", "2027-03-13T12:00:00Z", {},
     ["2027-03-14T07:00:00Z", "2027-03-15T06:00:00Z", "2027-03-15T06:30:00Z"]),
    ("skipped 02:00 and real 03:00 are one fire", "0 2,3 * * *", "America/New_York", "2027-03-13T12:00:00Z", {},
     ["2027-03-14T07:00:00Z", "2027-03-15T06:00:00Z", "2027-03-15T07:00:00Z"]),
    ("NY wild across the gap", "*/20 * * * *", "America/New_York", "2027-03-14T06:30:00Z", {},
     ["2027-03-14T06:40:00Z", "2027-03-14T07:00:00Z", "2027-03-14T07:20:00Z"]),
    ("NY fixed in repeat", "30 1 * * *", "America/New_York", "2027-11-06T12:00:00Z", {},
     ["2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z"]),
    ("NY wild in repeat", "0 * * * *", "America/New_York", "2027-11-07T04:30:00Z", {},
     ["2027-11-07T05:00:00Z", "2027-11-07T06:00:00Z", "2027-11-07T07:00:00Z"]),
    ("NY every minute across repeat", "* * * * *", "America/New_York", "2027-11-07T05:58:30Z", {},
     ["2027-11-07T05:59:00Z", "2027-11-07T06:00:00Z", "2027-11-07T06:01:00Z"]),
    # --- Australia/Lord_Howe (+10:30 / +11, 30-minute shift).
    # 4 Apr 2027 02:00 +11 -> 01:30 +10:30 (15:00Z on 3 Apr); 3 Oct 2027 02:00 +10:30 -> 02:30 +11 (15:30Z on 2 Oct).
    ("Lord Howe fixed in 30-minute gap", "15 2 * * *", "Australia/Lord_Howe", "2027-10-02T00:00:00Z", {},
     ["2027-10-02T15:30:00Z", "2027-10-03T15:15:00Z"]),
    ("Lord Howe fixed in 30-minute repeat", "45 1 * * *", "Australia/Lord_Howe", "2027-04-03T00:00:00Z", {},
     ["2027-04-03T14:45:00Z", "2027-04-04T15:15:00Z"]),
    ("Lord Howe wild in repeat", "*/15 * * * *", "Australia/Lord_Howe", "2027-04-03T14:20:00Z", {},
     ["2027-04-03T14:30:00Z", "2027-04-03T14:45:00Z", "2027-04-03T15:00:00Z", "2027-04-03T15:15:00Z",
      "2027-04-03T15:30:00Z"]),
    ("Lord Howe wild in gap", "*/15 * * * *", "Australia/Lord_Howe", "2027-10-02T15:10:00Z", {},
     ["2027-10-02T15:15:00Z", "2027-10-02T15:30:00Z", "2027-10-02T15:45:00Z"]),
    # --- Australia/Sydney: 4 Apr 2027 03:00 +11 -> 02:00 +10 (16:00Z on 3 Apr); 3 Oct 02:00 +10 -> 03:00 +11 (16:00Z on 2 Oct).
    ("Sydney fixed in gap", "30 2 * * *", "Australia/Sydney", "2027-10-02T00:00:00Z", {},
     ["2027-10-02T16:00:00Z", "2027-10-03T15:30:00Z"]),
    ("Sydney fixed in repeat", "30 2 * * *", "Australia/Sydney", "2027-04-03T00:00:00Z", {},
     ["2027-04-03T15:30:00Z", "2027-04-04T16:30:00Z"]),
    # --- Pacific/Auckland: 4 Apr 2027 03:00 +13 -> 02:00 +12 (14:00Z on 3 Apr); 26 Sep 02:00 +12 -> 03:00 +13 (14:00Z on 25 Sep).
    ("Auckland fixed in gap", "0 2 * * *", "Pacific/Auckland", "2027-09-25T00:00:00Z", {},
     ["2027-09-25T14:00:00Z", "2027-09-26T13:00:00Z"]),
    ("Auckland fixed in repeat", "15 2 * * *", "Pacific/Auckland", "2027-04-03T00:00:00Z", {},
     ["2027-04-03T13:15:00Z", "2027-04-04T14:15:00Z"]),
    ("Auckland wild in repeat", "*/30 2 * * *", "Pacific/Auckland", "2027-04-03T12:00:00Z", {},
     ["2027-04-03T13:00:00Z", "2027-04-03T13:30:00Z", "2027-04-03T14:00:00Z", "2027-04-03T14:30:00Z",
      "2027-04-04T14:00:00Z"]),
    # --- :30 and :45 offsets.
    ("Kolkata +05:30", "0 9 * * *", "Asia/Kolkata", "2027-06-01T00:00:00Z", {},
     ["2027-06-01T03:30:00Z", "2027-06-02T03:30:00Z"]),
    ("Kolkata late evening is the same UTC day", "30 23 * * *", "Asia/Kolkata", "2027-06-01T00:00:00Z", {},
     ["2027-06-01T18:00:00Z"]),
    ("Kathmandu +05:45", "0 9 * * *", "Asia/Kathmandu", "2027-06-01T00:00:00Z", {},
     ["2027-06-01T03:15:00Z"]),
    ("Kathmandu midnight is the previous UTC day", "0 0 * * *", "Asia/Kathmandu", "2027-06-01T00:00:00Z", {},
     ["2027-06-01T18:15:00Z", "2027-06-02T18:15:00Z"]),
    ("Kathmandu half hours", "*/30 * * * *", "Asia/Kathmandu", "2027-06-01T00:00:00Z", {},
     ["2027-06-01T00:15:00Z", "2027-06-01T00:45:00Z"]),
    # --- Pacific/Apia skipped 30 Dec 2011: 29 Dec 24:00 -10 -> 31 Dec 00:00 +14 (10:00Z on 30 Dec), a 24-hour gap.
    ("Apia daily job across the skipped day", "0 12 * * *", "Pacific/Apia", "2011-12-29T00:00:00Z", {},
     ["2011-12-29T22:00:00Z", "2011-12-30T22:00:00Z"]),
    ("Apia 30 Dec is not caught up", "0 12 30 12 *", "Pacific/Apia", "2011-12-01T00:00:00Z", {},
     ["2012-12-29T22:00:00Z"]),
    ("Apia not caught up even with gap shift", "0 12 30 12 *", "Pacific/Apia", "2011-12-01T00:00:00Z",
     {"gap": GapPolicy.SHIFT}, ["2012-12-29T22:00:00Z"]),
    ("Apia wild across the skipped day", "0 */6 * * *", "Pacific/Apia", "2011-12-30T03:00:00Z", {},
     ["2011-12-30T04:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T16:00:00Z"]),
    # --- Calendar rules (UTC).
    ("DOM or DOW: the 13th or Fridays", "0 0 13 * 5", "UTC", "2027-08-01T00:00:00Z", {},
     ["2027-08-06T00:00:00Z", "2027-08-13T00:00:00Z", "2027-08-20T00:00:00Z", "2027-08-27T00:00:00Z",
      "2027-09-03T00:00:00Z", "2027-09-10T00:00:00Z", "2027-09-13T00:00:00Z", "2027-09-17T00:00:00Z"]),
    ("DOM starting with * is AND: odd days that are Fridays", "0 0 */2 * FRI", "UTC", "2027-08-01T00:00:00Z", {},
     ["2027-08-13T00:00:00Z", "2027-08-27T00:00:00Z", "2027-09-03T00:00:00Z", "2027-09-17T00:00:00Z"]),
    ("the 31st skips short months; after exactly on a fire", "0 0 31 * *", "UTC", "2027-01-31T00:00:00Z", {},
     ["2027-03-31T00:00:00Z", "2027-05-31T00:00:00Z", "2027-07-31T00:00:00Z", "2027-08-31T00:00:00Z",
      "2027-10-31T00:00:00Z", "2027-12-31T00:00:00Z"]),
    ("29 February, and 2100 is not a leap year", "0 0 29 2 *", "UTC", "2027-01-01T00:00:00Z", {},
     ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]),
    ("29 February across 2100", "0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", {},
     ["2104-02-29T00:00:00Z"]),
    ("after exactly on a fire is strictly after", "0 9 * * *", "UTC", "2027-01-01T09:00:00Z", {},
     ["2027-01-02T09:00:00Z"]),
    ("after a microsecond before a fire", "0 9 * * *", "UTC", "2027-01-01T08:59:59.999999Z", {},
     ["2027-01-01T09:00:00Z"]),
    ("weekdays by name, FRI-SUN range", "0 12 * * FRI-SUN", "UTC", "2027-08-02T00:00:00Z", {},
     ["2027-08-06T12:00:00Z", "2027-08-07T12:00:00Z", "2027-08-08T12:00:00Z", "2027-08-13T12:00:00Z"]),
    ("7 is Sunday", "0 12 * * 7", "UTC", "2027-08-02T00:00:00Z", {}, ["2027-08-08T12:00:00Z"]),
    ("stepped range 10-50/20", "10-50/20 0 1 JAN *", "UTC", "2027-01-01T00:00:00Z", {},
     ["2027-01-01T00:10:00Z", "2027-01-01T00:30:00Z", "2027-01-01T00:50:00Z", "2028-01-01T00:10:00Z"]),
    ("@yearly", "@yearly", "UTC", "2027-06-01T00:00:00Z", {}, ["2028-01-01T00:00:00Z"]),
    ("@weekly is Sunday midnight", "@weekly", "UTC", "2027-08-02T00:00:00Z", {}, ["2027-08-08T00:00:00Z"]),
    ("@monthly", "@monthly", "Europe/London", "2027-06-15T00:00:00Z", {}, ["2027-06-30T23:00:00Z"]),
]


@pytest.mark.parametrize(
    ("expression", "zone", "after", "fields", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_fixed_instants(expression, zone, after, fields, expected):
    assert fires(expression, zone, after, len(expected), **fields) == expected


def _midnight_transitions(key: str, year: int) -> tuple[datetime, datetime]:
    """(spring, fall) of ``key`` in ``year`` from the pinned tzdata, checking
    that both happen at local midnight."""
    zone = ZoneInfo(key)
    found = transitions_in_year(key, year)
    spring = [t for t in found if t.astimezone(zone).utcoffset() > (t - timedelta(seconds=1)).astimezone(zone).utcoffset()]
    fall = [t for t in found if t.astimezone(zone).utcoffset() < (t - timedelta(seconds=1)).astimezone(zone).utcoffset()]
    assert len(spring) == 1 and len(fall) == 1, f"{key} {year}: expected one DST start and one end, got {found}"
    # Premise: clocks jump from midnight to 01:00, and go back from midnight to 23:00.
    assert spring[0].astimezone(zone).strftime("%H:%M") == "01:00"
    assert (spring[0] - timedelta(seconds=1)).astimezone(zone).strftime("%H:%M:%S") == "23:59:59"
    assert fall[0].astimezone(zone).strftime("%H:%M") == "23:00"
    assert (fall[0] - timedelta(seconds=1)).astimezone(zone).strftime("%H:%M:%S") == "23:59:59"
    return spring[0], fall[0]


MIDNIGHT_ZONES = [("Africa/Cairo", 2027), ("Asia/Beirut", 2027), ("America/Santiago", 2027)]


@pytest.mark.parametrize(("key", "year"), MIDNIGHT_ZONES)
def test_midnight_spring_forward(key, year):
    spring, _ = _midnight_transitions(key, year)
    zone = ZoneInfo(key)
    day_before = spring - timedelta(hours=12)
    # 00:00 does not exist that day: a fixed-time midnight job fires at 01:00, the first instant after.
    midnight = ENGINE.next_fire(Schedule.cron("0 0 * * *", key, exact=True), day_before)
    assert midnight.nominal_at == spring
    assert spring.astimezone(zone).strftime("%H:%M") == "01:00"
    assert "shifted to 01:00" in midnight.note
    # 00:30 also collapses to 01:00; 01:30 exists and is unaffected.
    assert ENGINE.next_fire(Schedule.cron("30 0 * * *", key, exact=True), day_before).nominal_at == spring
    assert ENGINE.next_fire(Schedule.cron("30 1 * * *", key, exact=True), day_before).nominal_at == spring + timedelta(minutes=30)
    # A wild job skips 00:00 and 00:30: after 23:30 the next fire is the 01:00 that exists.
    wild = fires("*/30 * * * *", key, spring - timedelta(minutes=40), 3)
    assert wild == [
        (spring - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        spring.strftime("%Y-%m-%dT%H:%M:%SZ"),
        (spring + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    ]
    # With the skip policy, midnight that day does not fire at all.
    skipped = ENGINE.next_fire(Schedule.cron("0 0 * * *", key, exact=True, gap=GapPolicy.SKIP), day_before)
    assert skipped.nominal_at == spring + timedelta(hours=23)


@pytest.mark.parametrize(("key", "year"), MIDNIGHT_ZONES)
def test_midnight_fall_back(key, year):
    _, fall = _midnight_transitions(key, year)
    # 23:00-24:00 happens twice: first pass ends at the transition, second starts there.
    first_2330 = fall - timedelta(minutes=30)
    second_2330 = fall + timedelta(minutes=30)
    before = fall - timedelta(hours=6)
    once = fires("30 23 * * *", key, before, 2)
    assert once[0] == first_2330.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert once[1] == (second_2330 + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    both = fires("30 23 * * *", key, before, 2, repeat=RepeatPolicy.BOTH)
    assert both == [first_2330.strftime("%Y-%m-%dT%H:%M:%SZ"), second_2330.strftime("%Y-%m-%dT%H:%M:%SZ")]
    wild = fires("*/30 23 * * *", key, before, 4)
    assert wild == [
        (fall - timedelta(minutes=60)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        first_2330.strftime("%Y-%m-%dT%H:%M:%SZ"),
        fall.strftime("%Y-%m-%dT%H:%M:%SZ"),
        second_2330.strftime("%Y-%m-%dT%H:%M:%SZ"),
    ]
    # Midnight after the repeat happens once, an hour of real time after 23:00 the second time.
    midnight = ENGINE.next_fire(Schedule.cron("0 0 * * *", key, exact=True), before)
    assert midnight.nominal_at == fall + timedelta(hours=1)


def test_notes_say_what_the_dst_rule_did():
    shifted = ENGINE.next_fire(Schedule.cron("0,30 2 * * *", "America/New_York", exact=True), z("2027-03-13T12:00:00Z"))
    assert shifted.note == "02:00, 02:30 all skipped by the 02:00→03:00 jump: shifted to 03:00"
    assert shifted.local_text == "2027-03-14T03:00:00-04:00"
    first = ENGINE.next_fire(Schedule.cron("30 1 * * *", "Europe/London", exact=True), z("2027-10-30T12:00:00Z"))
    assert first.note == "01:30 occurs twice (clocks go back 02:00→01:00): fires at the first only"
    both = ENGINE.preview(
        Schedule.cron("30 1 * * *", "Europe/London", exact=True, repeat=RepeatPolicy.BOTH), z("2027-10-30T12:00:00Z"), 2
    )
    assert [f.note.rsplit(": ", 1)[1] for f in both] == ["first of two fires", "second of two fires"]
    assert [f.local_text for f in both] == ["2027-10-31T01:30:00+01:00", "2027-10-31T01:30:00+00:00"]
    plain = ENGINE.next_fire(Schedule.cron("0 9 * * *", "Europe/London", exact=True), z("2027-06-01T00:00:00Z"))
    assert plain.note == ""
    # Preview also says which wall times a wild job did not catch up.
    wild = ENGINE.preview(Schedule.cron("*/30 * * * *", "Europe/London", exact=True), z("2027-03-28T00:40:00Z"), 1)
    assert wild[0].note == "01:00, 01:30 skipped by the 01:00→02:00 jump: not caught up"
