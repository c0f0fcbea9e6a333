"""Business-day calendars over the real gRPC server, on the embedded stores
and on PostgreSQL + etcd: the five RPCs, tenant isolation, versions, and
hostile input answered INVALID_ARGUMENT naming the field with nothing written."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import grpc
import pytest
from google.protobuf import field_mask_pb2
from tickwheel.v1 import calendar_pb2, scheduler_pb2_grpc

from tests.support.server import TICKWHEEL

from .test_server_api import bearer, grpcurl, violations

C = calendar_pb2


def uk(name: str = "uk", **fields) -> C.Calendar:
    values = dict(name=name, time_zone="Europe/London", holidays=["2026-12-25", "2026-12-28", "2026-12-25"],
                  half_days=["2026-12-24"])  # fmt: skip
    values.update(fields)
    return C.Calendar(**values)


@pytest.fixture
async def tenants(server):
    """(acme's stub metadata, globex's stub metadata, a stub)."""
    acme, globex = await server.create_tenant("acme"), await server.create_tenant("globex")
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield bearer(acme), bearer(globex), scheduler_pb2_grpc.SchedulerServiceStub(channel)


async def names(stub, metadata) -> list[str]:
    reply = await stub.ListCalendars(C.ListCalendarsRequest(), metadata=metadata)
    return [c.name for c in reply.calendars]


async def test_create_get_list_update_delete(tenants) -> None:
    acme, _, stub = tenants
    made = await stub.CreateCalendar(C.CreateCalendarRequest(calendar=uk(), request_id="r-1"), metadata=acme)
    assert made.created
    stored = made.calendar
    assert stored.tenant == "acme" and stored.version == 1 and stored.time_zone == "Europe/London"
    assert list(stored.holidays) == ["2026-12-25", "2026-12-28"]  # folded and sorted
    assert list(stored.business_days) == [1, 2, 3, 4, 5] and stored.holiday_count == 2 and stored.half_day_count == 1
    again = await stub.CreateCalendar(
        C.CreateCalendarRequest(calendar=uk(time_zone="UTC"), request_id="r-1"), metadata=acme
    )
    assert not again.created and again.calendar == stored
    got = await stub.GetCalendar(C.GetCalendarRequest(name="uk"), metadata=acme)
    assert got.calendar == stored
    listed = await stub.ListCalendars(C.ListCalendarsRequest(), metadata=acme)
    (summary,) = listed.calendars
    assert summary.name == "uk" and summary.holiday_count == 2 and not summary.holidays
    assert list(summary.business_days) == [1, 2, 3, 4, 5]

    patch = C.Calendar(name="uk", version=1, time_zone="Europe/Dublin", holidays=["2027-01-01"])
    updated = await stub.UpdateCalendar(
        C.UpdateCalendarRequest(calendar=patch, update_mask=field_mask_pb2.FieldMask(paths=["time_zone"])),
        metadata=acme,
    )
    assert updated.calendar.version == 2 and updated.calendar.time_zone == "Europe/Dublin"
    assert list(updated.calendar.holidays) == ["2026-12-28", "2026-12-25"][::-1]  # not in the mask: kept
    await stub.DeleteCalendar(C.DeleteCalendarRequest(name="uk"), metadata=acme)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetCalendar(C.GetCalendarRequest(name="uk"), metadata=acme)
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND


async def test_update_is_validated_as_a_whole_and_needs_the_version(tenants) -> None:
    acme, _, stub = tenants
    await stub.CreateCalendar(C.CreateCalendarRequest(calendar=uk(), request_id="r-1"), metadata=acme)
    mask = field_mask_pb2.FieldMask(paths=["business_days"])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UpdateCalendar(
            C.UpdateCalendarRequest(calendar=C.Calendar(name="uk", version=1, business_days=[1, 2]), update_mask=mask),
            metadata=acme,
        )
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "calendar.half_days[0]" in violations(caught.value)
    two = field_mask_pb2.FieldMask(paths=["business_days", "half_days"])
    updated = await stub.UpdateCalendar(
        C.UpdateCalendarRequest(calendar=C.Calendar(name="uk", version=1, business_days=[1, 2]), update_mask=two),
        metadata=acme,
    )
    assert updated.calendar.version == 2 and list(updated.calendar.business_days) == [1, 2]
    assert not updated.calendar.half_days and list(updated.calendar.holidays) == ["2026-12-25", "2026-12-28"]
    # The same change again changes nothing: no new version.
    same = await stub.UpdateCalendar(
        C.UpdateCalendarRequest(calendar=C.Calendar(name="uk", version=2, business_days=[2, 1]), update_mask=mask),
        metadata=acme,
    )
    assert same.calendar.version == 2
    with pytest.raises(grpc.aio.AioRpcError) as stale:
        await stub.UpdateCalendar(
            C.UpdateCalendarRequest(calendar=C.Calendar(name="uk", version=1, time_zone="UTC"),
                                    update_mask=field_mask_pb2.FieldMask(paths=["time_zone"])),
            metadata=acme,
        )  # fmt: skip
    assert stale.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    for paths, field in ((["name"], "update_mask"), (["version"], "update_mask"), (["nope"], "update_mask")):
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stub.UpdateCalendar(
                C.UpdateCalendarRequest(calendar=C.Calendar(name="uk", version=2),
                                        update_mask=field_mask_pb2.FieldMask(paths=paths)),
                metadata=acme,
            )  # fmt: skip
        assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT and field in violations(bad.value)
    with pytest.raises(grpc.aio.AioRpcError) as unversioned:
        await stub.UpdateCalendar(C.UpdateCalendarRequest(calendar=C.Calendar(name="uk")), metadata=acme)
    assert "calendar.version" in violations(unversioned.value)
    got = await stub.GetCalendar(C.GetCalendarRequest(name="uk"), metadata=acme)
    assert got.calendar.version == 2 and got.calendar.time_zone == "Europe/London"

    with pytest.raises(grpc.aio.AioRpcError) as stale_delete:
        await stub.DeleteCalendar(C.DeleteCalendarRequest(name="uk", version=1), metadata=acme)
    assert stale_delete.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    await stub.DeleteCalendar(C.DeleteCalendarRequest(name="uk", version=2), metadata=acme)
    assert await names(stub, acme) == []
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await stub.CreateCalendar(C.CreateCalendarRequest(calendar=uk(), request_id="r-1"), metadata=acme)
    assert gone.value.code() is grpc.StatusCode.NOT_FOUND


async def test_another_tenants_calendar_is_not_found_exactly_like_an_unknown_one(tenants) -> None:
    acme, globex, stub = tenants
    await stub.CreateCalendar(C.CreateCalendarRequest(calendar=uk(), request_id="r-1"), metadata=acme)
    calls = [
        lambda name: stub.GetCalendar(C.GetCalendarRequest(name=name), metadata=globex),
        lambda name: stub.UpdateCalendar(C.UpdateCalendarRequest(calendar=C.Calendar(name=name, version=1,
                                                                                     time_zone="UTC")),
                                         metadata=globex),
        lambda name: stub.DeleteCalendar(C.DeleteCalendarRequest(name=name), metadata=globex),
    ]  # fmt: skip
    for call in calls:
        answers = []
        for name in ("uk", "unknown"):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call(name)
            answers.append((caught.value.code(), caught.value.details().replace(name, "NAME")))
        assert answers[0] == answers[1] and answers[0][0] is grpc.StatusCode.NOT_FOUND
    assert await names(stub, globex) == []
    got = await stub.GetCalendar(C.GetCalendarRequest(name="uk"), metadata=acme)
    assert got.calendar.version == 1 and got.calendar.time_zone == "Europe/London"


@pytest.mark.parametrize(
    ("calendar", "field"),
    [
        (uk(name="bad\0name"), "calendar.name"),
        (uk(name=""), "calendar.name"),
        (uk(name="x" * 65), "calendar.name"),
        (uk(name="-leading"), "calendar.name"),
        (uk(time_zone="Mars/Olympus_Mons"), "calendar.time_zone"),
        (uk(time_zone=""), "calendar.time_zone"),
        (uk(time_zone="../../etc/passwd"), "calendar.time_zone"),
        (uk(holidays=["2026-01-01"] * 10_001), "calendar.holidays"),
        (uk(half_days=["2026-01-05"] * 10_001), "calendar.half_days"),
        (uk(holidays=["99999-01-01"]), "calendar.holidays[0]"),
        (uk(holidays=["2026-01-01", "2201-01-01"]), "calendar.holidays[1]"),
        (uk(holidays=["1899-12-31"]), "calendar.holidays[0]"),
        (uk(holidays=["2026-02-30"]), "calendar.holidays[0]"),
        (uk(holidays=["20260101"]), "calendar.holidays[0]"),
        (uk(holidays=["2026-12-24"]), "calendar.half_days[0]"),  # the half-day is now a holiday
        (uk(half_days=["2026-12-26"]), "calendar.half_days[0]"),  # a Saturday
        (uk(business_days=[0]), "calendar.business_days[0]"),
        (uk(business_days=[1, 9]), "calendar.business_days[1]"),
    ],
)
async def test_hostile_calendars_are_refused_naming_the_field_and_nothing_is_written(
    tenants, calendar: C.Calendar, field: str
) -> None:
    acme, _, stub = tenants
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateCalendar(C.CreateCalendarRequest(calendar=calendar, request_id="r-1"), metadata=acme)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert field in violations(caught.value), violations(caught.value)
    assert await names(stub, acme) == []
    # The request id was not used up: the same id creates a good calendar.
    made = await stub.CreateCalendar(C.CreateCalendarRequest(calendar=uk(), request_id="r-1"), metadata=acme)
    assert made.created


async def test_bad_names_paging_and_taken_names(tenants) -> None:
    acme, _, stub = tenants
    for call in (stub.GetCalendar(C.GetCalendarRequest(name="a/b"), metadata=acme),
                 stub.DeleteCalendar(C.DeleteCalendarRequest(name=""), metadata=acme)):  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "name" in violations(caught.value)
    for index, name in enumerate(("c", "a", "b")):
        await stub.CreateCalendar(C.CreateCalendarRequest(calendar=uk(name), request_id=f"r{index}"), metadata=acme)
    with pytest.raises(grpc.aio.AioRpcError) as taken:
        await stub.CreateCalendar(C.CreateCalendarRequest(calendar=uk("a"), request_id="other"), metadata=acme)
    assert taken.value.code() is grpc.StatusCode.ALREADY_EXISTS
    first = await stub.ListCalendars(C.ListCalendarsRequest(page_size=2), metadata=acme)
    assert [c.name for c in first.calendars] == ["a", "b"] and first.next_page_token
    rest = await stub.ListCalendars(C.ListCalendarsRequest(page_size=2, page_token=first.next_page_token), metadata=acme)
    assert [c.name for c in rest.calendars] == ["c"] and not rest.next_page_token
    for request, field in ((C.ListCalendarsRequest(page_size=1001), "page_size"),
                           (C.ListCalendarsRequest(page_token="forged"), "page_token")):  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stub.ListCalendars(request, metadata=acme)
        assert field in violations(bad.value)


async def test_grpcurl_creates_and_reads_a_calendar_through_reflection(server) -> None:
    secret = await server.create_tenant("acme")
    auth = f"authorization: Bearer {secret}"
    described = await grpcurl("-plaintext", server.address, "describe", "tickwheel.v1.SchedulerService")
    assert described.returncode == 0 and "rpc CreateCalendar" in described.stdout
    body = json.dumps({"calendar": {"name": "uk", "timeZone": "Europe/London", "businessDays": ["WEEKDAY_MONDAY"],
                                    "holidays": ["2026-12-28"]}, "requestId": "g-1"})  # fmt: skip
    created = await grpcurl("-plaintext", "-H", auth, "-d", body, server.address,
                            "tickwheel.v1.SchedulerService/CreateCalendar")  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["created"] is True
    got = await grpcurl("-plaintext", "-H", auth, "-d", '{"name": "uk"}', server.address,
                        "tickwheel.v1.SchedulerService/GetCalendar")  # fmt: skip
    assert got.returncode == 0, got.stderr
    calendar = json.loads(got.stdout)["calendar"]
    assert calendar["businessDays"] == ["WEEKDAY_MONDAY"] and calendar["holidays"] == ["2026-12-28"]


def _tickwheel(server, key_file: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TICKWHEEL, "--address", server.address, "--api-key-file", str(key_file), "--timeout", "60", *args],
        capture_output=True, text=True, timeout=120, env=os.environ,
    )  # fmt: skip


async def test_the_cli_imports_an_ics_file_and_manages_the_calendar(server, tmp_path: Path) -> None:
    key_file = tmp_path / "api-key"
    key_file.write_text(await server.create_tenant("acme") + "\n")
    ics = tmp_path / "uk.ics"
    ics.write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\n"
        "BEGIN:VEVENT\r\nUID:x\r\nSUMMARY:Christmas\r\nDTSTART;VALUE=DATE:20261225\r\n"
        "DTEND;VALUE=DATE:20261227\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nUID:n\r\nSUMMARY:New Year\r\nDTSTART;VALUE=DATE:20270101\r\nRRULE:FREQ=YEARLY\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    created = await asyncio.to_thread(
        _tickwheel, server, key_file, "calendar", "create", "uk", "--tz", "Europe/London",
        "--holidays-ics", str(ics), "--ics-until", "2028-12-31", "--half-day", "2026-12-24",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines()[-1] == "uk"
    got = await asyncio.to_thread(_tickwheel, server, key_file, "--json", "calendar", "get", "uk")
    calendar = json.loads(got.stdout)["calendar"]
    assert calendar["holidays"] == ["2026-12-25", "2026-12-26", "2027-01-01", "2028-01-01"]
    assert calendar["halfDays"] == ["2026-12-24"] and calendar["version"] == "1"
    # A hostile file: refused before any call, nothing written.
    hostile = tmp_path / "hostile.ics"
    hostile.write_text(ics.read_text().replace("FREQ=YEARLY", "FREQ=SECONDLY;COUNT=999999999"))
    refused = await asyncio.to_thread(
        _tickwheel, server, key_file, "calendar", "update", "uk", "--version", "1", "--holidays-ics", str(hostile)
    )
    assert refused.returncode == 2 and "only yearly rules" in refused.stderr
    stale = await asyncio.to_thread(_tickwheel, server, key_file, "calendar", "update", "uk", "--version", "7",
                                    "--tz", "UTC")  # fmt: skip
    assert stale.returncode == 2 and "FAILED_PRECONDITION" in stale.stderr
    updated = await asyncio.to_thread(_tickwheel, server, key_file, "calendar", "update", "uk", "--version", "1",
                                      "--business-days", "mon,tue,wed,thu", "--no-half-days")  # fmt: skip
    assert updated.returncode == 0 and "now version 2" in updated.stdout, updated.stderr
    listed = await asyncio.to_thread(_tickwheel, server, key_file, "calendar", "list")
    assert "mon,tue,wed,thu" in listed.stdout and "Europe/London" in listed.stdout
    deleted = await asyncio.to_thread(_tickwheel, server, key_file, "calendar", "delete", "uk", "--version", "2")
    assert deleted.returncode == 0, deleted.stderr
    gone = await asyncio.to_thread(_tickwheel, server, key_file, "calendar", "get", "uk")
    assert gone.returncode == 1 and "NOT_FOUND" in gone.stderr
