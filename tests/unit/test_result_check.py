"""A worker's result output at the edge of its bound: what `check_result`
lets through is what the store keeps (its first 4 KiB); one byte more is
refused naming the field, before anything is recorded."""

from __future__ import annotations

from tickwheel.v1 import worker_pb2

from tickwheel_server.errors import FieldViolation
from tickwheel_server.store.executions import ResultIn
from tickwheel_server.gateway.result_check import (
    MAX_RETRY_AFTER, OUTPUT_MAX_BYTES, check_result, read_result,
)

NOW_US = 1_796_000_000_000_000


def result(output: bytes) -> worker_pb2.ExecutionResult:
    return worker_pb2.ExecutionResult(execution_id="job_1:2027-01-01T00:00:00Z", delivery=1, attempt=1,
                                      outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED, output=output)


def test_output_up_to_16_kib_passes_and_reaches_the_store_as_is() -> None:
    hostile = (b"\x00'\"\\" + bytes(range(256))) * (OUTPUT_MAX_BYTES // 260) + b"\x00" * (OUTPUT_MAX_BYTES % 260)
    assert len(hostile) == OUTPUT_MAX_BYTES
    assert check_result(result(hostile), NOW_US) is None
    assert read_result(result(hostile), NOW_US, "w1", ("acme",)).output == hostile


def test_one_byte_more_is_refused_naming_output() -> None:
    violation = check_result(result(b"x" * (OUTPUT_MAX_BYTES + 1)), NOW_US)
    assert violation is not None and violation.field == "output"


def _with(**fields) -> worker_pb2.ExecutionResult:
    """A valid result (started a second before NOW_US, with an error text and a
    retry delay), with ``fields`` changed: a timestamp or duration as
    ``(seconds, nanos)``, ``None`` to clear a message field."""
    base = worker_pb2.ExecutionResult(
        execution_id="job_1:2027-01-01T00:00:00Z", delivery=2, attempt=3,
        outcome=worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="boom\x00" + "e" * 5000, output=b"{}",
    )
    base.started_at.seconds, base.started_at.nanos = NOW_US // 1_000_000 - 1, 123_456_789
    base.finished_at.seconds = NOW_US // 1_000_000
    base.retry_after.seconds, base.retry_after.nanos = 90_000, 5_000
    for name, value in fields.items():
        if value is None:
            base.ClearField(name)
        elif isinstance(value, tuple):
            getattr(base, name).seconds, getattr(base, name).nanos = value
        else:
            setattr(base, name, value)
    return base


READ_CASES = {  # name: (fields changed, the field refused or None)
    "valid": ({}, None),
    "no timestamps, no retry": ({"started_at": None, "finished_at": None, "retry_after": None}, None),
    "no error": ({"error": ""}, None),
    "execution_id empty": ({"execution_id": ""}, "execution_id"),
    "execution_id with NUL": ({"execution_id": "job_1\x00"}, "execution_id"),
    "execution_id too long": ({"execution_id": "j" * 257}, "execution_id"),
    "delivery 0": ({"delivery": 0}, "delivery"),
    "attempt negative": ({"attempt": -1}, "attempt"),
    "outcome unknown": ({"outcome": 99}, "outcome"),
    "output too long": ({"output": b"x" * (OUTPUT_MAX_BYTES + 1)}, "output"),
    "retry_after negative": ({"retry_after": (-1, 0)}, "retry_after"),
    "retry_after mixed signs": ({"retry_after": (1, -5)}, "retry_after"),
    "started_at nanos out of range": ({"started_at": (NOW_US // 1_000_000, 1_000_000_000)}, "started_at"),
    "started_at a day and a second ahead": ({"started_at": (NOW_US // 1_000_000 + 86_401, 0)}, "started_at"),
    "started_at two years behind": ({"started_at": (NOW_US // 1_000_000 - 2 * 366 * 86_400, 0)}, "started_at"),
    "started_at beyond year 9999": ({"started_at": (253_402_300_800, 0)}, "started_at"),
    "finished_at invalid": ({"finished_at": (0, -1)}, "finished_at"),
    "two violations: the first named": ({"delivery": 0, "outcome": 99}, "delivery"),
}


def _expected(message: worker_pb2.ExecutionResult) -> ResultIn:
    """What the store should record of a valid ``message``, read field by field here."""
    return ResultIn(
        message.execution_id, message.delivery, message.attempt, message.outcome,
        message.error[:4096].replace("\x00", "\ufffd"), "w1", ("acme", "beta"),
        min(message.retry_after.ToTimedelta(), MAX_RETRY_AFTER) if message.HasField("retry_after") else None,
        message.started_at.ToMicroseconds() if message.HasField("started_at") else None, True, message.output,
    )


def test_read_result_refuses_the_first_field_out_of_bounds_or_reads_every_field() -> None:
    """The gateway's one reading of a result (``read_result``): a hostile
    one is refused naming its first field out of bounds (``check_result``
    says the same); any other is read into what the store records, field for
    field, its text made storable and its retry delay capped."""
    for name, (fields, refused) in READ_CASES.items():
        message = _with(**fields)
        read = read_result(message, NOW_US, "w1", ["acme", "beta"])
        if refused is not None:
            assert isinstance(read, FieldViolation) and read.field == refused, name
            assert check_result(message, NOW_US) == read, name
        else:
            assert check_result(message, NOW_US) is None, name
            assert read == _expected(message), name
    read = read_result(_with(), NOW_US, "w1", ["acme"])
    assert read.error == "boom\ufffd" + "e" * 4091
    assert read.retry_after == MAX_RETRY_AFTER
    assert read.worker_started_at_us == NOW_US - 1_000_000 + 123_456
