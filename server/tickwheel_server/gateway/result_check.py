"""A worker's result checked and bounded field by field before anything of it is queued or written (pure).

Every field of an ``ExecutionResult`` comes from a hostile peer. One that
is out of bounds makes the result refused (:func:`check_result` names the
field), and nothing is written for it; the other results of the same
message are unaffected. Text that PostgreSQL cannot store (NUL) is
replaced, and text longer than its bound is cut (:func:`clean_text`),
rather than refused: an HTTP target answering 500 with NUL bytes in its
body is not the worker's fault, and its result must still end the attempt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import timedelta

from tickwheel.v1 import worker_pb2

from ..errors import FieldViolation
from ..store.executions import ResultIn

EXECUTION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,256}\Z")
"""As execution ids are made: ``<job id>:<RFC 3339 instant>`` or ``<job id>:trigger:<request id>``."""
ERROR_MAX_CHARS = 4096
"""What the store keeps of an error (the contract says 4 KiB; longer text is cut)."""
OUTPUT_MAX_BYTES = 16 * 1024
MAX_RETRY_AFTER = timedelta(hours=24)
"""No retry policy waits longer (``max_backoff`` is at most 24 hours), so a
longer ``retry_after`` is cut to this: the policy's cap would cut it anyway."""
STARTED_AHEAD = timedelta(days=1)
STARTED_BEHIND = timedelta(days=366)
"""``started_at`` must lie within this much of the server's clock: a
worker keeps an unacknowledged result through long outages, but no attempt
started a year ago or tomorrow."""
_STARTED_AHEAD_US = STARTED_AHEAD // timedelta(microseconds=1)
_STARTED_BEHIND_US = STARTED_BEHIND // timedelta(microseconds=1)
TIMESTAMP_SECONDS = (-62_135_596_800, 253_402_300_799)
"""protobuf's Timestamp range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z."""
DURATION_SECONDS = 315_576_000_000
"""protobuf's Duration range, either way (10 000 years)."""
OUTCOMES = frozenset((
    worker_pb2.RESULT_OUTCOME_SUCCEEDED, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE,
    worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, worker_pb2.RESULT_OUTCOME_TIMED_OUT,
    worker_pb2.RESULT_OUTCOME_CANCELED,
))  # fmt: skip


_result_in = ResultIn._make


def _valid_timestamp(seconds: int, nanos: int) -> bool:
    return TIMESTAMP_SECONDS[0] <= seconds <= TIMESTAMP_SECONDS[1] and 0 <= nanos < 1_000_000_000


def _valid_duration(seconds: int, nanos: int) -> bool:
    if not -DURATION_SECONDS <= seconds <= DURATION_SECONDS or not -1_000_000_000 < nanos < 1_000_000_000:
        return False
    return seconds == 0 or nanos == 0 or (seconds > 0) == (nanos > 0)


def check_result(result: worker_pb2.ExecutionResult, now_us: int) -> FieldViolation | None:
    """The first field of ``result`` out of bounds, or None when it may be recorded.

    ``now_us``: the server's clock, which ``started_at`` must lie near."""
    read = read_result(result, now_us, "", ())
    return read if isinstance(read, FieldViolation) else None


def read_result(
    result: worker_pb2.ExecutionResult, now_us: int, worker_id: str, tenants: Sequence[str],
    may_serve: Callable[[str, str | None], bool] | None = None,
) -> ResultIn | FieldViolation:
    """What the store records of ``result`` (``held`` True: the caller
    decides; ``tenants`` and ``may_serve``: the worker credential's, see
    :class:`~tickwheel_server.store.executions.ResultIn`), or its first
    field out of bounds (:func:`check_result`'s answer). Each field is read once: reading a field of a parsed message
    is a call into protobuf each time, and a worker's results are checked by
    the thousand on the event loop."""
    execution_id = result.execution_id
    if not EXECUTION_ID.match(execution_id):
        return FieldViolation("execution_id", "1 to 256 characters of [A-Za-z0-9_.:-], as the assignment gave it")
    delivery = result.delivery
    if delivery < 1:
        return FieldViolation("delivery", "the assignment's delivery number: at least 1")
    attempt = result.attempt
    if attempt < 1:
        return FieldViolation("attempt", "the assignment's attempt number: at least 1")
    outcome = result.outcome
    if outcome not in OUTCOMES:
        return FieldViolation("outcome", "one of SUCCEEDED, FAILED_RETRYABLE, FAILED_PERMANENT, TIMED_OUT, CANCELED")
    output = result.output
    if len(output) > OUTPUT_MAX_BYTES:
        return FieldViolation("output", f"at most {OUTPUT_MAX_BYTES} bytes")
    retry_after = None
    if result.HasField("retry_after"):
        seconds, nanos = result.retry_after.seconds, result.retry_after.nanos
        if not _valid_duration(seconds, nanos) or seconds < 0 or nanos < 0:
            return FieldViolation("retry_after", "a valid duration of at least 0")
        retry_after = min(timedelta(seconds=seconds, microseconds=nanos // 1000), MAX_RETRY_AFTER)
    started_us = None
    if result.HasField("started_at"):
        started = result.started_at
        seconds, nanos = started.seconds, started.nanos
        if not _valid_timestamp(seconds, nanos):
            return FieldViolation("started_at", "a valid timestamp (0001-01-01 to 9999-12-31)")
        started_us = seconds * 1_000_000 + nanos // 1000  # timestamp_us, from the values read
        if not -_STARTED_BEHIND_US <= started_us - now_us <= _STARTED_AHEAD_US:
            return FieldViolation("started_at", "within a year before and a day after the server's clock")
    if result.HasField("finished_at") and not _valid_timestamp(result.finished_at.seconds, result.finished_at.nanos):
        return FieldViolation("finished_at", "a valid timestamp (0001-01-01 to 9999-12-31)")
    error = result.error
    return _result_in((  # every field, in order: no keyword handling (one a result, thousands a batch)
        execution_id, delivery, attempt, outcome, clean_text(error, ERROR_MAX_CHARS) if error else "", worker_id,
        tuple(tenants), retry_after, started_us, True, output, may_serve,
    ))


def clean_text(text: str, limit: int) -> str:
    """``text`` as the store can keep it: at most ``limit`` characters, NUL
    (which PostgreSQL's text refuses) and anything not encodable in UTF-8
    replaced by U+FFFD."""
    text = text[:limit]
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        text = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text

