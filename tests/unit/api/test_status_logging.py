"""A store outage fails every API call; the log gets one line a method a
minute, not one a call (``api/status.py``: ``rpc``)."""

from __future__ import annotations

import logging

import grpc
import pytest

from tickwheel_server.api import status
from tickwheel_server.store.errors import StoreUnavailableError


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self) -> None:
        self.codes: list[grpc.StatusCode] = []

    async def abort(self, code, message, trailing_metadata=()):
        self.codes.append(code)
        raise _Aborted(message)


class _Servicer:
    @status.rpc
    async def CreateJob(self, request, context):  # noqa: N802 (gRPC's naming)
        raise StoreUnavailableError("store unreachable after 10 attempts: OperationalError", attempts=10)


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(status.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(status, "_unavailable", {})
    return now


async def test_calls_refused_in_an_outage_log_one_line_a_minute_then_count_the_rest(caplog, clock) -> None:
    servicer, context = _Servicer(), _Context()
    with caplog.at_level(logging.WARNING, logger="tickwheel.server"):
        for _ in range(500):
            with pytest.raises(_Aborted):
                await servicer.CreateJob(None, context)
        assert context.codes == [grpc.StatusCode.UNAVAILABLE] * 500, "every call is still refused"
        lines = [r.getMessage() for r in caplog.records if "store unavailable" in r.getMessage()]
        assert len(lines) == 1 and "_Servicer.CreateJob" in lines[0] and "StoreUnavailableError" in lines[0]
        clock[0] += status.UNAVAILABLE_QUIET - 1
        with pytest.raises(_Aborted):
            await servicer.CreateJob(None, context)
        assert len([r for r in caplog.records if "store unavailable" in r.getMessage()]) == 1
        clock[0] += 1
        with pytest.raises(_Aborted):
            await servicer.CreateJob(None, context)
    lines = [r.getMessage() for r in caplog.records if "store unavailable" in r.getMessage()]
    assert len(lines) == 2 and "(500 more calls refused since the last line)" in lines[1]
    assert all(r.exc_info is None for r in caplog.records), "an outage is one line, no traceback"
