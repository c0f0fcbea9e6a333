"""Instants into protobuf Timestamps: what ``FromDatetime`` gives, to the
microsecond, before and after the epoch and in any zone; a job answered
from its record, in place or as a new message."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from google.protobuf import timestamp_pb2
from tickwheel.v1 import job_pb2, scheduler_pb2

from tickwheel_server.api.convert import fill_job, job_to_proto, set_timestamp, timestamp
from tickwheel_server.store.jobrecords import JobRecord


@pytest.mark.parametrize("instant", [
    datetime(1970, 1, 1, tzinfo=timezone.utc),
    datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc),
    datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc),
    datetime(2026, 12, 5, 3, 0, 0, 123_456, tzinfo=timezone.utc),
    datetime(2026, 12, 5, 3, 0, 0, 5, tzinfo=timezone(timedelta(hours=-9, minutes=-30))),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc),
])  # fmt: skip
def test_set_timestamp_is_from_datetime(instant: datetime) -> None:
    expected = timestamp_pb2.Timestamp()
    expected.FromDatetime(instant)
    message = timestamp_pb2.Timestamp()
    set_timestamp(message, instant)
    assert message == expected == timestamp(instant)
    assert message.ToDatetime(tzinfo=timezone.utc) == instant


def test_a_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError):
        set_timestamp(timestamp_pb2.Timestamp(), datetime(2026, 1, 1))


def _record(spec: bytes) -> JobRecord:
    at = datetime(2026, 12, 5, 3, 0, tzinfo=timezone.utc)
    return JobRecord(
        id="job_1", tenant="acme", partition=0, name="x", state="active", spec=spec, time_zone="UTC",
        next_run_at=at, next_due_at=at, run_count=0, tzdata_version="2025b", pause_reason="", version=1,
        created_at=at, updated_at=at, paused_at=None,
    )  # fmt: skip


@pytest.mark.parametrize("spec", [b"\x1a\x01x\xff", b"\x1a\x05x"])  # a name, then bytes that do not parse
def test_a_definition_that_does_not_parse_answers_the_output_fields_alone(spec: bytes) -> None:
    response = scheduler_pb2.CreateJobResponse(created=True)
    fill_job(response.job, _record(spec))
    assert response.job == job_to_proto(_record(spec))
    assert response.job.name == "" and response.job.id == "job_1" and response.job.state == job_pb2.JOB_STATE_ACTIVE


def test_a_page_holds_what_fits_a_default_client_and_never_nothing() -> None:
    from tickwheel_server.api.convert import PAGE_BYTES, fitting

    def job(size: int) -> job_pb2.Job:
        return job_pb2.Job(id="job_x", payload=b"p" * size)

    assert fitting([]) == 0
    assert fitting([job(10)] * 1000) == 1000, "small jobs: the whole page"
    big = [job(64 * 1024)] * 100
    kept = fitting(big)
    assert 40 < kept < 100 and sum(j.ByteSize() for j in big[:kept]) <= PAGE_BYTES
    assert sum(j.ByteSize() for j in big[: kept + 1]) > PAGE_BYTES - 6 * (kept + 1)
    assert fitting([job(5 * 1024 * 1024), job(1)]) == 1, "a first item past the budget is still answered alone"


def test_a_cut_history_page_continues_after_its_last_execution_kept() -> None:
    from tickwheel_server.api.convert import executions_answer
    from tickwheel_server.store.history import ExecutionPage, ExecutionRecord

    now = datetime(2026, 6, 1, tzinfo=timezone.utc)

    def run(i: int) -> ExecutionRecord:
        return ExecutionRecord(
            id=f"job_x:{i}", job_id="job_x", tenant="t", partition=0, origin="trigger",
            nominal_at=now - timedelta(minutes=i), due_at=now, ready_at=now, attempt=1, delivery=0,
            status="scheduled", owner=None, worker_id=None, missed_count=0, reap_count=0,
            payload=b"p" * (64 * 1024), error="", dead_reason="", created_at=now, finished_at=None,
        )  # fmt: skip

    page = ExecutionPage(executions=tuple(run(i) for i in range(100)), skips=(), more=False)
    answer, cut = executions_answer(page)
    assert 40 < len(answer) < 100 and cut.more and cut.executions == page.executions[: len(answer)]
    assert cut.next_key == (page.executions[len(answer) - 1].nominal_at, answer[-1].id)
    small = ExecutionPage(executions=page.executions[:3], skips=(), more=False)
    assert executions_answer(small)[1] is small
