"""Whether a protobuf Timestamp or Duration holds a valid value: the checks
every reader of a message runs before converting it (conversion raises on an
invalid one). Pure; below the API, the stores and the job definition."""

from __future__ import annotations

from google.protobuf import duration_pb2, timestamp_pb2

TIMESTAMP_MIN_SECONDS = -62_135_596_800
"""0001-01-01T00:00:00Z, the first instant a protobuf Timestamp may hold."""
TIMESTAMP_MAX_SECONDS = 253_402_300_799
"""9999-12-31T23:59:59Z, the last second a protobuf Timestamp may hold."""
DURATION_MAX_SECONDS = 315_576_000_000
"""About 10 000 years: the longest protobuf Duration, either sign."""
_NANOS = 1_000_000_000


def timestamp_problem(message: timestamp_pb2.Timestamp) -> str | None:
    """Why ``message`` is not a valid protobuf Timestamp, or None when it is.
    Checked before any conversion, which would raise on it."""
    if not TIMESTAMP_MIN_SECONDS <= message.seconds <= TIMESTAMP_MAX_SECONDS:
        return "not a valid Timestamp: must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"
    if not 0 <= message.nanos < _NANOS:
        return "not a valid Timestamp: nanos must be between 0 and 999999999"
    return None


def duration_problem(message: duration_pb2.Duration) -> str | None:
    """Why ``message`` is not a valid protobuf Duration (seconds within
    ±315 576 000 000, nanos within ±999 999 999 and of the same sign as
    seconds), or None when it is."""
    seconds, nanos = message.seconds, message.nanos
    if not -DURATION_MAX_SECONDS <= seconds <= DURATION_MAX_SECONDS:
        return "not a valid Duration: must be within ±315576000000 seconds"
    if not -_NANOS < nanos < _NANOS:
        return "not a valid Duration: nanos must be within ±999999999"
    if (seconds > 0 and nanos < 0) or (seconds < 0 and nanos > 0):
        return "not a valid Duration: seconds and nanos must have the same sign"
    return None
