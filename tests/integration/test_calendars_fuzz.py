"""Hostile CreateCalendar and UpdateCalendar bytes against the real gRPC
server, on the embedded stores and on PostgreSQL + etcd (the harness of
test_bad_input_api.py): mutated valid messages, random bytes, unknown
fields, invalid UTF-8, and well-formed calendars with hostile values. Every
answer is OK or a status naming what is wrong, never INTERNAL; a failed call
writes nothing; nothing is logged at ERROR; the server still serves."""

from __future__ import annotations

import grpc
from hypothesis import given
from hypothesis import strategies as st
from tickwheel.v1 import calendar_pb2, scheduler_pb2_grpc

from .test_bad_input_api import (  # noqa: F401  (fixtures)
    ANSWERS, FUZZ, TEXT, assert_healthy, call, channel, live, no_errors_logged, raw_requests, tenant_key,
)
from .test_server_api import bearer

C = calendar_pb2
DATES = st.one_of(
    st.dates().map(lambda d: d.isoformat()),
    st.sampled_from(["2026-12-25", "1899-12-31", "2201-01-01", "99999-01-01", "2026-02-30", ""]),
    TEXT,
)


@st.composite
def calendars(draw, name: str) -> C.Calendar:
    return C.Calendar(
        name=draw(st.one_of(st.just(name), TEXT)),
        time_zone=draw(st.one_of(st.sampled_from(["UTC", "Europe/London", "", "Nowhere/Else"]), TEXT)),
        business_days=draw(st.lists(st.integers(-3, 9), max_size=9)),
        holidays=draw(st.lists(DATES, max_size=20)),
        half_days=draw(st.lists(DATES, max_size=5)),
        version=draw(st.integers(-(2**63), 2**63 - 1)),
    )


def stored(channel, key: str) -> list[C.Calendar]:
    stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    return list(stub.ListCalendars(C.ListCalendarsRequest(page_size=1000), metadata=bearer(key), timeout=30).calendars)


def test_fuzzed_create_calendar(live, channel, tenant_key, no_errors_logged) -> None:
    counter = iter(range(1_000_000))
    valid = C.CreateCalendarRequest(
        calendar=C.Calendar(name="zz", time_zone="UTC", holidays=["2026-12-25"]), request_id="fuzz-valid"
    ).SerializeToString()

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        if data.draw(st.booleans(), label="structured"):
            request = C.CreateCalendarRequest(calendar=data.draw(calendars(f"c{next(counter)}")),
                                              request_id=f"fuzz-{next(counter)}")  # fmt: skip
            raw = request.SerializeToString()
        else:
            raw = data.draw(raw_requests(valid, b"zz"), label="raw")
        before = stored(channel, tenant_key)
        code, _ = call(channel, "CreateCalendar", raw, tenant_key)
        assert code in ANSWERS | {grpc.StatusCode.ALREADY_EXISTS}, code
        if code != grpc.StatusCode.OK:
            assert stored(channel, tenant_key) == before, "a failed CreateCalendar wrote a calendar"

    run()
    assert_healthy(live, channel, tenant_key)


def test_fuzzed_update_calendar(live, channel, tenant_key, no_errors_logged) -> None:
    stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    stub.CreateCalendar(C.CreateCalendarRequest(calendar=C.Calendar(name="target", time_zone="UTC"), request_id="t"),
                        metadata=bearer(tenant_key))  # fmt: skip

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        current = stub.GetCalendar(C.GetCalendarRequest(name="target"), metadata=bearer(tenant_key)).calendar
        if data.draw(st.booleans(), label="structured"):
            patch = data.draw(calendars("target"))
            if data.draw(st.booleans()):
                patch.name, patch.version = "target", current.version
            paths = data.draw(st.lists(st.sampled_from(
                ["time_zone", "business_days", "holidays", "half_days", "name", "version", "tenant", "x.y"]
            ), max_size=4))  # fmt: skip
            raw = C.UpdateCalendarRequest(calendar=patch, update_mask={"paths": paths}).SerializeToString()
        else:
            patch = C.Calendar(name="target", version=current.version, time_zone="zz")
            valid = C.UpdateCalendarRequest(calendar=patch, update_mask={"paths": ["time_zone"]}).SerializeToString()
            raw = data.draw(raw_requests(valid, b"zz"), label="raw")
        code, _ = call(channel, "UpdateCalendar", raw, tenant_key)
        assert code in ANSWERS, code
        after = stub.GetCalendar(C.GetCalendarRequest(name="target"), metadata=bearer(tenant_key)).calendar
        if code != grpc.StatusCode.OK:
            assert after == current, "a failed UpdateCalendar changed the calendar"

    run()
    assert_healthy(live, channel, tenant_key)
