"""Holiday dates from iCalendar files: all-day events, multi-day spans,
yearly rules with their exceptions, and hostile files refused clearly."""

from __future__ import annotations

from datetime import date

import pytest

from tickwheel_server.cli.ics import MAX_DATES, MAX_ICS_BYTES, IcsError, holidays_from_ics, read_ics

D = date.fromisoformat
UNTIL = D("2030-12-31")


def ics(*events: str) -> bytes:
    body = "".join(f"BEGIN:VEVENT\r\n{event.strip()}\r\nEND:VEVENT\r\n" for event in events)
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tickwheel tests//EN\r\n{body}END:VCALENDAR\r\n".encode()


def event(start: str, *lines: str, uid: str = "u", summary: str = "Holiday") -> str:
    return "\r\n".join([f"UID:{uid}", f"SUMMARY:{summary}", f"DTSTART;VALUE=DATE:{start}", *lines])


def dates(data: bytes, until: date = UNTIL) -> list[str]:
    return [d.isoformat() for d in holidays_from_ics(data, until=until).dates]


def test_all_day_events_become_sorted_distinct_dates() -> None:
    data = ics(event("20261225", uid="a"), event("20260101", uid="b"), event("20261225", uid="c"))
    assert dates(data) == ["2026-01-01", "2026-12-25"]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["DTEND;VALUE=DATE:20261227"], ["2026-12-25", "2026-12-26"]),  # DTEND is exclusive
        (["DURATION:P3D"], ["2026-12-25", "2026-12-26", "2026-12-27"]),
        ([], ["2026-12-25"]),
    ],
)
def test_multi_day_events_expand(lines: list[str], expected: list[str]) -> None:
    assert dates(ics(event("20261225", *lines))) == expected


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # A fixed date every year (month and day from DTSTART), up to the horizon.
        ("RRULE:FREQ=YEARLY", ["2026-12-25", "2027-12-25", "2028-12-25", "2029-12-25", "2030-12-25"]),
        ("RRULE:FREQ=YEARLY;COUNT=2", ["2026-12-25", "2027-12-25"]),
        ("RRULE:FREQ=YEARLY;UNTIL=20281231", ["2026-12-25", "2027-12-25", "2028-12-25"]),
        ("RRULE:FREQ=YEARLY;UNTIL=20281225T000000Z", ["2026-12-25", "2027-12-25", "2028-12-25"]),
        ("RRULE:FREQ=YEARLY;INTERVAL=2", ["2026-12-25", "2028-12-25", "2030-12-25"]),
    ],
)
def test_yearly_rules_expand_within_the_horizon(rule: str, expected: list[str]) -> None:
    assert dates(ics(event("20261225", rule))) == expected


def test_nth_and_last_weekday_rules() -> None:
    thanksgiving = event("20261126", "RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH", uid="t")
    memorial = event("20260525", "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO", uid="m")
    found = dates(ics(thanksgiving, memorial), until=D("2028-12-31"))
    assert found == ["2026-05-25", "2026-11-26", "2027-05-31", "2027-11-25", "2028-05-29", "2028-11-23"]


def test_exdate_rdate_and_overridden_occurrences() -> None:
    new_year = event("20270101", "RRULE:FREQ=YEARLY", "EXDATE;VALUE=DATE:20280101", "RDATE;VALUE=DATE:20280102",
                     uid="ny")  # fmt: skip
    moved = event("20290102", "RECURRENCE-ID;VALUE=DATE:20290101", uid="ny", summary="New Year (observed)")
    assert dates(ics(new_year, moved), until=D("2030-06-30")) == [
        "2027-01-01", "2028-01-02", "2029-01-02", "2030-01-01",
    ]  # fmt: skip


def test_a_rule_that_never_matches_yields_nothing() -> None:
    assert dates(ics(event("20260101", "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30")), until=D("2200-12-31")) == []


def test_cancelled_events_are_counted_and_left_out() -> None:
    result = holidays_from_ics(ics(event("20261225", "STATUS:CANCELLED", uid="a"), event("20261226", uid="b")),
                               until=UNTIL)  # fmt: skip
    assert [d.isoformat() for d in result.dates] == ["2026-12-26"] and result.events == 1 and result.cancelled == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"garbage", "not an iCalendar file"),
        (b"", "not an iCalendar file"),
        (b"\xff\xfe\x00\x01", "not an iCalendar file"),
        (b"BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\nEND:VEVENT\r\n", "not VCALENDAR"),
        (ics("UID:x\r\nDTSTART:20261225T100000Z"), "has a time of day"),
        (ics("UID:x\r\nSUMMARY:no start"), "no DTSTART"),
        (ics(event("2026XX25")), "VEVENT 1 (Holiday): malformed property"),
        (ics(event("99991225")), "outside 1900-01-01 to 2200-12-31"),
        (ics(event("18991225")), "outside 1900-01-01 to 2200-12-31"),
        (ics(event("20261225", "RRULE:FREQ=DAILY")), "only yearly rules"),
        (ics(event("20261225", "RRULE:FREQ=SECONDLY")), "only yearly rules"),
        (ics(event("20261225", "RRULE:FREQ=YEARLY;BYHOUR=1")), "BYHOUR is not imported"),
        (ics(event("20261225", "RRULE:FREQ=YEARLY;BYSETPOS=-1;BYDAY=MO")), "BYSETPOS is not imported"),
        (ics(event("20261225", "RRULE:FREQ=YEARLY;BYMONTH=13")), "BYMONTH is 1 to 12"),
        (ics(event("20261225", "RRULE:FREQ=YEARLY;INTERVAL=0")), "at least 1"),
        (ics(event("18001225", "RRULE:FREQ=YEARLY")), "on or after 1900-01-01"),
        (ics(event("20261225", "DTEND;VALUE=DATE:20261225")), "lasts 0 days"),
        (ics(event("20260101", "DTEND;VALUE=DATE:20280101")), "lasts 730 days"),
        (ics(event("20261225", "DURATION:PT12H")), "not a whole number of days"),
        (ics(event("20261225", "EXDATE;VALUE=DATE:20261225")), "without an RRULE"),
        (ics(event("20261225", "RRULE:FREQ=YEARLY", "EXDATE:20271225T000000Z")), "is not a date"),
    ],
)
def test_hostile_or_unsupported_files_fail_clearly(data: bytes, message: str) -> None:
    with pytest.raises(IcsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        holidays_from_ics(data, until=D("2200-12-31"))


def test_billions_of_occurrences_stop_at_the_cap() -> None:
    # Every day of every year to 2200: ten thousand dates are reached within 28 years, and the import stops there.
    every_day = event("19000101", "RRULE:FREQ=YEARLY;BYDAY=MO,TU,WE,TH,FR,SA,SU")
    with pytest.raises(IcsError, match=f"more than {MAX_DATES} dates"):
        holidays_from_ics(ics(every_day), until=D("2200-12-31"))


def test_too_many_dates_across_events_fail() -> None:
    days = [event(f"{year}0101", "DTEND;VALUE=DATE:" + f"{year + 1}0101", uid=str(year)) for year in range(1901, 1931)]
    with pytest.raises(IcsError, match=f"more than {MAX_DATES} holiday dates"):
        holidays_from_ics(ics(*days), until=UNTIL)


def test_a_huge_file_is_refused_before_parsing(tmp_path) -> None:
    with pytest.raises(IcsError, match="larger than"):
        holidays_from_ics(b" " * (MAX_ICS_BYTES + 1), until=UNTIL)
    big = tmp_path / "big.ics"
    with big.open("wb") as handle:
        handle.truncate(MAX_ICS_BYTES + 10)
    with pytest.raises(IcsError, match="larger than 8 MiB"):
        read_ics(str(big))
    with pytest.raises(IcsError, match="No such file"):
        read_ics(str(tmp_path / "missing.ics"))
