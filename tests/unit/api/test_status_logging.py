"""A store outage fails every API call; the log gets one line a method a
minute, not one a call, and one when calls are answered again
(``api/status.py``: ``rpc``, on :class:`~tickwheel_server.telemetry.outages.OutageLog`)."""

from __future__ import annotations

import logging

import grpc
import pytest
from google.rpc import error_details_pb2

from tickwheel_server.api import status
from tickwheel_server.store.errors import AmbiguousCommitError, StoreUnavailableError
from tickwheel_server.telemetry.outages import STILL_EVERY


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
    monkeypatch.setattr(status, "_outages", {})
    return now


async def test_calls_refused_in_an_outage_log_one_line_a_minute_then_count_the_rest(caplog, clock) -> None:
    servicer, context = _Servicer(), _Context()
    with caplog.at_level(logging.WARNING, logger=status.log.name):
        for _ in range(500):
            with pytest.raises(_Aborted):
                await servicer.CreateJob(None, context)
        assert context.codes == [grpc.StatusCode.UNAVAILABLE] * 500, "every call is still refused"
        lines = [r.getMessage() for r in caplog.records if "store unavailable" in r.getMessage()]
        assert len(lines) == 1 and "_Servicer.CreateJob" in lines[0] and "StoreUnavailableError" in lines[0]
        clock[0] += STILL_EVERY - 1
        with pytest.raises(_Aborted):
            await servicer.CreateJob(None, context)
        assert len([r for r in caplog.records if "store unavailable" in r.getMessage()]) == 1
        clock[0] += 1
        with pytest.raises(_Aborted):
            await servicer.CreateJob(None, context)
    lines = [r.getMessage() for r in caplog.records if "store unavailable" in r.getMessage()]
    assert len(lines) == 2 and "still failing for 60 s (502 failures)" in lines[1], "it counts the calls refused"
    assert lines[0].endswith("; refused UNAVAILABLE")
    assert all(r.exc_info is None for r in caplog.records), "an outage is one line, no traceback"


class _Recovering:
    def __init__(self) -> None:
        self.down = True

    @status.rpc
    async def GetJob(self, request, context):  # noqa: N802 (gRPC's naming)
        if self.down:
            raise StoreUnavailableError("store unreachable after 10 attempts: OperationalError", attempts=10)
        return "the job"


async def test_the_first_call_answered_after_an_outage_logs_its_end(caplog, clock) -> None:
    servicer, context = _Recovering(), _Context()
    with caplog.at_level(logging.INFO, logger=status.log.name):
        for _ in range(3):
            with pytest.raises(_Aborted):
                await servicer.GetJob(None, context)
        clock[0] += 5
        servicer.down = False
        assert await servicer.GetJob(None, context) == "the job"
        assert await servicer.GetJob(None, context) == "the job"
    ended = [r for r in caplog.records if "recovered" in r.getMessage()]
    assert len(ended) == 1 and ended[0].levelno == logging.INFO
    assert "_Recovering.GetJob: recovered after 5 s (3 failures)" in ended[0].getMessage()


class _Unanswered:
    @status.rpc
    async def UpdateJob(self, request, context):  # noqa: N802 (gRPC's naming)
        raise AmbiguousCommitError("the connection was lost during COMMIT: OperationalError")


async def test_a_commit_gone_unanswered_is_unavailable_saying_it_may_have_been_made(caplog, clock) -> None:
    servicer, context = _Unanswered(), _Context()
    with caplog.at_level(logging.WARNING, logger=status.log.name):
        for _ in range(20):
            with pytest.raises(_Aborted) as aborted:
                await servicer.UpdateJob(None, context)
    assert context.codes == [grpc.StatusCode.UNAVAILABLE] * 20, "not INTERNAL: the store went away"
    assert "may or may not have been made" in str(aborted.value) and "request id" in str(aborted.value)
    assert all(r.exc_info is None for r in caplog.records), "no traceback: the store's outage, not a bug"
    assert len(caplog.records) == 1 and "_Unanswered.UpdateJob" in caplog.records[0].getMessage()
    code, answer = status.status_for(AmbiguousCommitError("lost"))
    info = error_details_pb2.ErrorInfo()
    assert code == grpc.StatusCode.UNAVAILABLE and answer.details[0].Unpack(info)
    assert info.reason == "COMMIT_OUTCOME_UNKNOWN", "a client can tell it from a refusal that wrote nothing"
