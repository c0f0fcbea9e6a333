"""What a gRPC client may send the server's port, as channel options (every server on the port uses them).

grpcio's defaults, stated here so that an upgrade cannot move them and so
that the metadata limit is one number: grpcio refuses metadata above its
soft limit (8 KiB) at random, more often the nearer the hard limit (16
KiB) it is; with both at :data:`MAX_METADATA_BYTES` a request's metadata is
accepted or refused the same way every time (RESOURCE_EXHAUSTED, before
any servicer runs). Credentials, ``traceparent`` and the SDKs' own keys
come to a few hundred bytes.
"""

from __future__ import annotations

MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The largest request message of any service (a worker's stream message
too); larger is RESOURCE_EXHAUSTED. The worker's assignment bounds
(``tickwheel_worker.bounds``) rely on a job's payload arriving through one."""
MAX_METADATA_BYTES = 8 * 1024
"""A request's metadata in all (names, values and HTTP/2's own headers)."""

LIMITS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
    ("grpc.max_metadata_size", MAX_METADATA_BYTES),
    ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
)
"""The channel options of every ``grpc.aio.server`` of the port."""
