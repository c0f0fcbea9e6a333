"""What the worker keeps of a server's assignment, bounded field by field (pure).

A worker holds up to ``2 * slots`` assignments (and their unacknowledged
results) for as long as they run, so every string, byte string and repeated
field of one is bounded before the worker takes it: a broken or hostile
server could otherwise make it hold ids of megabytes, payloads of the
whole receive limit (64 MiB) each, or timestamps no clock can wait for.
The bounds are far above what a server that keeps the contract sends (its
job ids, tenant names and handler names are validated on creation, its
payloads arrive through requests of at most 4 MiB); an assignment past
one is a protocol error, which ends the stream (the runtime), and nothing
of its message is taken. The TypeScript worker (``sdk/typescript/src/bounds.ts``)
keeps the same bounds; ``sdk/python/README.md`` has them as a table.
"""

from __future__ import annotations

from tickwheel.v1 import worker_pb2

MAX_ID_CHARS = 1024
"""The longest execution id, job id, tenant or traceparent an assignment may carry (the server
makes execution ids of at most 256 characters, tenant names of 63)."""
MAX_HANDLER_CHARS = 200
"""The longest handler name: the contract's (``HandlerTarget.name``, 1 to 200 characters)."""
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
"""The largest payload: a job's reaches the server in a request of at most 4 MiB (gRPC's default)."""
MAX_URL_CHARS = 2048
"""An HTTP target's URL, as the contract bounds it."""
MAX_METHOD_CHARS = 16
MAX_HEADERS = 32
"""An HTTP target's headers, as the contract bounds them: 32, 16 KiB in all (names and values)."""
MAX_HEADERS_CHARS = 16 * 1024
TIMESTAMP_SECONDS = (-62_135_596_800, 253_402_300_799)
"""protobuf's Timestamp range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z."""


def _timestamp_breach(name: str, ts: object) -> str | None:
    seconds, nanos = ts.seconds, ts.nanos  # type: ignore[attr-defined]
    if TIMESTAMP_SECONDS[0] <= seconds <= TIMESTAMP_SECONDS[1] and 0 <= nanos < 1_000_000_000:
        return None
    return f"an assignment's {name} is out of range ({seconds} s, {nanos} ns)"


def assignment_breach(a: worker_pb2.Assignment) -> str | None:
    """What of ``a`` is out of bounds, as the end of a protocol error's line; ``None`` when nothing is."""
    execution_id = a.execution_id
    if not 0 < len(execution_id) <= MAX_ID_CHARS:
        return f"an assignment with an execution id of {len(execution_id)} characters"
    for name, text in (("job id", a.job_id), ("tenant", a.tenant), ("traceparent", a.traceparent)):
        if len(text) > MAX_ID_CHARS:
            return f"an assignment with a {name} of {len(text)} characters"
    if len(a.payload) > MAX_PAYLOAD_BYTES:
        return f"an assignment with a payload of {len(a.payload)} bytes"
    kind = a.target.WhichOneof("kind")
    if kind == "handler":
        if len(a.target.handler.name) > MAX_HANDLER_CHARS:
            return f"an assignment with a handler name of {len(a.target.handler.name)} characters"
    elif kind == "http":
        http = a.target.http
        if len(http.url) > MAX_URL_CHARS:
            return f"an assignment with an HTTP URL of {len(http.url)} characters"
        if len(http.method) > MAX_METHOD_CHARS:
            return f"an assignment with an HTTP method of {len(http.method)} characters"
        if len(http.headers) > MAX_HEADERS:
            return f"an assignment with {len(http.headers)} HTTP headers"
        chars = sum(len(name) + len(value) for name, value in http.headers.items())
        if chars > MAX_HEADERS_CHARS:
            return f"an assignment with HTTP headers of {chars} characters"
    for name in ("nominal_at", "due_at", "deadline_at"):
        if a.HasField(name):
            breach = _timestamp_breach(name, getattr(a, name))
            if breach is not None:
                return breach
    return None
