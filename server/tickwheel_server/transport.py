"""What a gRPC client may send the server's port, as channel options (every server on the port uses them);
how the port's services are registered (:class:`GenericOnly`).

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

MAX_STREAMS_PER_CONNECTION = 100
"""Calls open at once on one connection (HTTP/2's
SETTINGS_MAX_CONCURRENT_STREAMS, which the server announces). A gRPC
client queues its calls past it until one ends (a worker needs one Pull
stream and a few unary calls; the CLI and SDKs fewer); a client that
ignores the setting has each stream past it reset (``RST_STREAM``,
ENHANCE_YOUR_CALM) before any servicer runs. grpcio's default set
none: one connection's streams were served by the thousand
(``loadtest/bench_stream_cap.py``)."""
MAX_CONNECTIONS = 4096
"""Connections the port holds at once; one past it is closed as it is
accepted (the client sees UNAVAILABLE and backs off). One a worker process
or client; the process's open-file limit (``ulimit -n``) must exceed it,
with room for the store's and etcd's connections."""


def limits(streams: int = MAX_STREAMS_PER_CONNECTION, connections: int = MAX_CONNECTIONS) -> tuple[tuple[str, int], ...]:
    """The channel options of a port holding at most ``streams`` calls a
    connection and ``connections`` connections (tests take smaller ones)."""
    return (
        ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
        ("grpc.max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.max_concurrent_streams", streams),
        ("grpc.max_allowed_incoming_connections", connections),
    )


LIMITS = limits()
"""The channel options of every ``grpc.aio.server`` of the port (read as
each server starts)."""


class GenericOnly:
    """A ``grpc.aio`` server as a generated ``add_<Service>Servicer_to_server``
    sees it: the service's methods are served through its generic handler
    only, never passed to ``add_registered_method_handlers``.

    grpc.aio's serving loop keeps one request pending in the core per
    registered method and, for every call it takes, waits on all of them
    together (one ``asyncio.wait`` over them: a callback added to and
    removed from each); with the port's services registered that way
    (about 50 methods) that wait was a fixed cost of every call on the
    event loop, whatever the method (loadtest/RESULTS.md, "grpc.aio's
    registered methods"). Served through the generic handlers, the loop waits on one
    pending request, and finding a call's handler costs a dictionary
    lookup per service. What a call is answered does not change: the same
    handlers serve it."""

    def __init__(self, server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers) -> None:
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        """Not registered: the generated code passed the same handlers to
        :meth:`add_generic_rpc_handlers` first."""
