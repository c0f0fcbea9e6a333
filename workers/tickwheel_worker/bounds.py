"""What the worker keeps of a server's assignment, bounded field by field (pure).

A worker holds up to ``2 * slots`` assignments (and their unacknowledged
results, and their ids in every heartbeat and hello) for as long as they
run, so every string, byte string and repeated field of one is bounded
before the worker takes it: a broken or hostile server could otherwise make
it hold ids of megabytes or payloads of the whole receive limit (64 MiB)
each. The bounds are far above what a server that keeps the contract sends
(its job ids, tenant names and handler names are validated on creation, its
payloads arrive through requests of at most 4 MiB); an assignment past one
is a protocol error, which ends the stream (the runtime), and nothing of
its message is taken.

Every assignment passes here, so the check reads what the attempt has read
already (its context's strings): a handful of ``len`` calls, no field of the
message read twice. Timestamps are fixed-size and not checked: one out of
protobuf's range fails the attempt where it is converted, and a deadline
out of range never comes. The TypeScript worker (``sdk/typescript/src/bounds.ts``)
and the Go and Java workers keep the same bounds; every SDK's README has them
as one table.
"""

from __future__ import annotations

from tickwheel.v1 import job_pb2, worker_pb2

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
MAX_DURATION_SECONDS = 315_576_000_000
"""protobuf's Duration range, 10 000 years either way: a welcome's heartbeat interval out of it is a
protocol error (as in the other workers)."""


def valid_duration(seconds: int, nanos: int) -> bool:
    """True when a Duration of ``seconds`` and ``nanos`` lies in protobuf's range."""
    return -MAX_DURATION_SECONDS <= seconds <= MAX_DURATION_SECONDS and -1_000_000_000 < nanos < 1_000_000_000


def breach(
    execution_id: str, job_id: str, tenant: str, traceparent: str, payload: bytes, handler: str,
    http: job_pb2.HttpTarget | None,
) -> str | None:
    """What of an assignment with these fields is out of bounds, as the end of a protocol error's
    line; ``None`` when nothing is. ``handler``: the handler name ("" for another target);
    ``http``: the HTTP target, ``None`` for another."""
    if (
        0 < len(execution_id) <= MAX_ID_CHARS
        and len(job_id) <= MAX_ID_CHARS
        and len(tenant) <= MAX_ID_CHARS
        and len(traceparent) <= MAX_ID_CHARS
        and len(payload) <= MAX_PAYLOAD_BYTES
        and len(handler) <= MAX_HANDLER_CHARS
    ):
        return None if http is None else _http_breach(http)
    if not 0 < len(execution_id) <= MAX_ID_CHARS:
        return f"an assignment with an execution id of {len(execution_id)} characters"
    for name, text in (("job id", job_id), ("tenant", tenant), ("traceparent", traceparent)):
        if len(text) > MAX_ID_CHARS:
            return f"an assignment with a {name} of {len(text)} characters"
    if len(payload) > MAX_PAYLOAD_BYTES:
        return f"an assignment with a payload of {len(payload)} bytes"
    return f"an assignment with a handler name of {len(handler)} characters"


def _http_breach(http: job_pb2.HttpTarget) -> str | None:
    url, method, headers = http.url, http.method, http.headers
    if len(url) > MAX_URL_CHARS:
        return f"an assignment with an HTTP URL of {len(url)} characters"
    if len(method) > MAX_METHOD_CHARS:
        return f"an assignment with an HTTP method of {len(method)} characters"
    if len(headers) > MAX_HEADERS:
        return f"an assignment with {len(headers)} HTTP headers"
    chars = sum(len(name) + len(value) for name, value in headers.items())
    if chars > MAX_HEADERS_CHARS:
        return f"an assignment with HTTP headers of {chars} characters"
    return None


def assignment_breach(a: worker_pb2.Assignment) -> str | None:
    """:func:`breach` of ``a``, reading its fields (the runtime passes what its attempt read)."""
    target = a.target
    kind = target.WhichOneof("kind")
    return breach(a.execution_id, a.job_id, a.tenant, a.traceparent, a.payload,
                  target.handler.name if kind == "handler" else "", target.http if kind == "http" else None)
