"""``tickwheel calendar ...`` against the scripted server: the requests the
flags build (an .ics file's holidays among them), and what is printed."""

from __future__ import annotations

import json

import grpc

from tests.unit.sdk.fake_tickwheel import failure
from tickwheel.v1 import calendar_pb2

ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//tickwheel tests//EN\r
BEGIN:VEVENT\r
UID:xmas\r
SUMMARY:Christmas\r
DTSTART;VALUE=DATE:20261225\r
DTEND;VALUE=DATE:20261227\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:ny\r
SUMMARY:New Year\r
DTSTART;VALUE=DATE:20270101\r
RRULE:FREQ=YEARLY\r
END:VEVENT\r
END:VCALENDAR\r
"""


def _echo_create(request, _ctx) -> calendar_pb2.CreateCalendarResponse:
    stored = calendar_pb2.Calendar()
    stored.CopyFrom(request.calendar)
    stored.version, stored.holiday_count, stored.half_day_count = 1, len(stored.holidays), len(stored.half_days)
    return calendar_pb2.CreateCalendarResponse(calendar=stored, created=True)


def test_create_imports_the_ics_file_beside_the_dates_given(cli, fake, tenant, tmp_path) -> None:
    fake.reply("CreateCalendar", _echo_create)
    path = tmp_path / "uk.ics"
    path.write_text(ICS)
    result = cli(
        "calendar", "create", "uk", "--tz", "Europe/London", "--business-days", "mon,tue,wed,thu,fri",
        "--holiday", "2026-08-31", "--holidays-ics", str(path), "--ics-until", "2028-12-31",
        "--half-day", "2026-12-24", "--request-id", "r-1", *tenant,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert result.last_line == "uk"
    assert "imported 4 holiday dates from 2 events" in result.err
    (request,) = fake.requests("CreateCalendar")
    assert request.request_id == "r-1" and request.calendar.time_zone == "Europe/London"
    assert list(request.calendar.business_days) == [1, 2, 3, 4, 5]
    assert list(request.calendar.holidays) == [
        "2026-08-31", "2026-12-25", "2026-12-26", "2027-01-01", "2028-01-01",
    ]  # fmt: skip
    assert list(request.calendar.half_days) == ["2026-12-24"]


def test_a_hostile_ics_file_is_a_usage_error_and_nothing_is_sent(cli, fake, tenant, tmp_path) -> None:
    path = tmp_path / "bad.ics"
    path.write_text(ICS.replace("FREQ=YEARLY", "FREQ=SECONDLY"))
    result = cli("calendar", "create", "uk", "--tz", "UTC", "--holidays-ics", str(path), *tenant)
    assert result.code == 2
    assert "--holidays-ics" in result.err and "only yearly rules" in result.err
    assert fake.requests("CreateCalendar") == []
    missing = cli("calendar", "create", "uk", "--tz", "UTC", "--holidays-ics", str(tmp_path / "nope.ics"), *tenant)
    assert missing.code == 2 and "No such file" in missing.err


def test_bad_flags_are_usage_errors(cli, fake, tenant) -> None:
    for argv in (["--business-days", "mon,someday"], ["--holiday", "2026-13-01"], ["--half-day", "soon"],
                 ["--ics-until", "2030-01-01"]):  # fmt: skip
        result = cli("calendar", "create", "uk", "--tz", "UTC", *argv, *tenant)
        assert result.code == 2, (argv, result.err)
    assert fake.requests("CreateCalendar") == []


def test_update_builds_the_mask_from_the_flags_given(cli, fake, tenant) -> None:
    fake.reply("UpdateCalendar", calendar_pb2.UpdateCalendarResponse(calendar=calendar_pb2.Calendar(name="uk", version=4)))
    result = cli("calendar", "update", "uk", "--version", "3", "--business-days", "sun,mon", "--no-holidays", *tenant)
    assert result.code == 0, result.err
    (request,) = fake.requests("UpdateCalendar")
    assert list(request.update_mask.paths) == ["business_days", "holidays"]
    assert request.calendar.version == 3 and list(request.calendar.business_days) == [7, 1]
    assert not request.calendar.holidays
    assert "now version 4" in result.out
    nothing = cli("calendar", "update", "uk", "--version", "3", *tenant)
    assert nothing.code == 2 and "nothing to update" in nothing.err


def test_get_list_and_delete_print(cli, fake, tenant) -> None:
    stored = calendar_pb2.Calendar(name="uk", time_zone="Europe/London", business_days=[1, 2, 3, 4, 5],
                                   holidays=["2026-12-25"], holiday_count=1, version=2)  # fmt: skip
    fake.reply("GetCalendar", calendar_pb2.GetCalendarResponse(calendar=stored))
    fake.reply("ListCalendars", calendar_pb2.ListCalendarsResponse(calendars=[stored]))
    fake.reply("DeleteCalendar", calendar_pb2.DeleteCalendarResponse())
    got = cli("calendar", "get", "uk", *tenant)
    assert got.code == 0 and "mon,tue,wed,thu,fri" in got.out and "1: 2026-12-25" in got.out
    listed = cli("calendar", "list", "--json", *tenant)
    assert json.loads(listed.out)["calendars"][0]["name"] == "uk"
    deleted = cli("calendar", "delete", "uk", "--version", "2", *tenant)
    assert deleted.code == 0 and fake.requests("DeleteCalendar")[0].version == 2


def test_a_stale_version_exits_2(cli, fake, tenant) -> None:
    fake.reply("DeleteCalendar", failure(grpc.StatusCode.FAILED_PRECONDITION, "calendar 'uk': version 1 is stale"))
    result = cli("calendar", "delete", "uk", "--version", "1", *tenant)
    assert result.code == 2 and "FAILED_PRECONDITION" in result.err


def test_update_prints_the_runs_it_moved_or_dropped(cli, fake, tenant) -> None:
    reply = calendar_pb2.UpdateCalendarResponse(
        calendar=calendar_pb2.Calendar(name="uk", version=2), changed_run_count=3, job_count=2,
    )
    moved = reply.changed_runs.add(execution_id="job_1:2027-03-27T09:00:00Z", job_id="job_1")
    moved.old_due_at.FromJsonString("2027-03-30T08:00:00Z")
    moved.new_due_at.FromJsonString("2027-03-27T09:00:00Z")
    dropped = reply.changed_runs.add(execution_id="job_2:2027-03-27T09:00:00Z", job_id="job_2")
    dropped.old_due_at.FromJsonString("2027-03-27T09:00:00Z")
    fake.reply("UpdateCalendar", reply)
    result = cli("calendar", "update", "uk", "--version", "1", "--holiday", "2027-03-27", *tenant)
    assert result.code == 0, result.err
    assert "3 created run(s) of its 2 job(s) moved or dropped (the first 2 below)" in result.out
    assert "job_1:2027-03-27T09:00:00Z" in result.out and "dropped (canceled)" in result.out
