"""A worker's result output at the edge of its bound: what `check_result`
lets through is what the store keeps (its first 4 KiB); one byte more is
refused naming the field, before anything is recorded."""

from __future__ import annotations

from tickwheel.v1 import worker_pb2

from tickwheel_server.gateway.result_check import OUTPUT_MAX_BYTES, check_result, result_in

NOW_US = 1_796_000_000_000_000


def result(output: bytes) -> worker_pb2.ExecutionResult:
    return worker_pb2.ExecutionResult(execution_id="job_1:2027-01-01T00:00:00Z", delivery=1, attempt=1,
                                      outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED, output=output)


def test_output_up_to_16_kib_passes_and_reaches_the_store_as_is() -> None:
    hostile = (b"\x00'\"\\" + bytes(range(256))) * (OUTPUT_MAX_BYTES // 260) + b"\x00" * (OUTPUT_MAX_BYTES % 260)
    assert len(hostile) == OUTPUT_MAX_BYTES
    assert check_result(result(hostile), NOW_US) is None
    assert result_in(result(hostile), "w1", ("acme",), held=True).output == hostile


def test_one_byte_more_is_refused_naming_output() -> None:
    violation = check_result(result(b"x" * (OUTPUT_MAX_BYTES + 1)), NOW_US)
    assert violation is not None and violation.field == "output"
