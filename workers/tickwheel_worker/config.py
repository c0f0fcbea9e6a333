"""The worker's configuration, validated when it is built."""

from __future__ import annotations

import os
import re
import secrets
import socket
from dataclasses import dataclass, field
from typing import Any

import grpc

from tickwheel_worker.handlers import HandlerRegistry
from tickwheel_worker.http_target import AddressPolicy
from tickwheel_worker.resolver import DEFAULT_RESOLVER, Resolver

from tickwheel.shared.targets import DEFAULT_POLICY

WORKER_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}\Z")
MAX_SLOTS = 10_000


def default_worker_id() -> str:
    """``<hostname>-<pid>-<6 random hex>``: unique per process, readable in logs."""
    host = re.sub(r"[^A-Za-z0-9_.:-]", "-", socket.gethostname()) or "worker"
    suffix = f"-{os.getpid()}-{secrets.token_hex(3)}"
    return host[: 128 - len(suffix)] + suffix


@dataclass
class WorkerConfig:
    """How a worker connects and what it runs. ValueError from the constructor on bad values."""

    address: str
    """Required. The server's ``host:port`` (any gRPC target string)."""
    credential: str
    """Required. The worker credential, sent as ``authorization: Bearer <credential>``."""
    worker_id: str = field(default_factory=default_worker_id)
    """Stable for this process across reconnects; 1-128 of ``[A-Za-z0-9_.:-]``."""
    handlers: HandlerRegistry = field(default_factory=HandlerRegistry)
    """The named handlers this worker runs; their names go in every hello."""
    http: bool = True
    """Run HTTP targets."""
    slots: int = 4
    """Executions run at once (1 to 10 000); also the initial credit of every stream."""
    tls: bool = False
    """Use TLS. Implied by ``root_certificates`` and the client certificate;
    without roots the system's are used."""
    root_certificates: bytes | None = None
    """PEM CA bundle that signs the server's certificate (implies TLS)."""
    certificate_chain: bytes | None = None
    """PEM client certificate chain, for servers that require mutual TLS
    (implies TLS). Given together with ``private_key``."""
    private_key: bytes | None = field(default=None, repr=False)
    """PEM private key of ``certificate_chain``."""
    reconnect_initial_backoff: float = 0.2
    """Seconds; the first reconnect waits uniform in [0, this]."""
    reconnect_max_backoff: float = 15.0
    """Seconds; the reconnect backoff (doubling per failed attempt, full jitter) never exceeds this."""
    default_heartbeat_interval: float = 5.0
    """Seconds between heartbeats when the welcome does not say."""
    server_silence_intervals: float = 3.0
    """The server is presumed dead after this many heartbeat intervals without a message from it."""
    welcome_timeout: float = 10.0
    """Seconds to wait for the welcome after hello before giving up on the stream."""
    cancel_grace: float = 2.0
    """Seconds a canceled handler has to return on its own before it is cancelled."""
    address_policy: AddressPolicy = DEFAULT_POLICY
    """Checked for every resolved address of an HTTP target before connecting
    (see ``http_target``). The default refuses loopback, link-local, private,
    unspecified and reserved addresses; allow networks with
    ``tickwheel.shared.targets.TargetPolicy.allowing([...])``."""
    tracer: Any = None
    """An OpenTelemetry ``Tracer``: each target call becomes a client span,
    child of the server's hand-out span, and the target receives its
    ``traceparent``. None: the hand-out's traceparent is passed on as is."""
    resolver: Resolver = DEFAULT_RESOLVER
    """Looks up HTTP targets' host names (``tickwheel_worker.resolver``):
    each lookup bounded by its call's deadline and abandoned past it; while
    8 of one tenant's (64 of all) are abandoned and still under way, that
    tenant's calls fail retryably at once. ``Resolver(per_tenant=N,
    total=M)`` changes the caps; the default is shared by the process's
    workers."""

    def __post_init__(self) -> None:
        if not self.address:
            raise ValueError("address is required (host:port of a Tickwheel server)")
        if not self.credential:
            raise ValueError("credential is required (a worker credential)")
        if not WORKER_ID_RE.match(self.worker_id):
            raise ValueError("worker_id must be 1 to 128 characters of [A-Za-z0-9_.:-]")
        if not isinstance(self.handlers, HandlerRegistry):
            raise TypeError("handlers must be a HandlerRegistry")
        if not 1 <= self.slots <= MAX_SLOTS:
            raise ValueError(f"slots must be between 1 and {MAX_SLOTS}, got {self.slots}")
        for name in ("reconnect_initial_backoff", "default_heartbeat_interval", "welcome_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.reconnect_max_backoff < self.reconnect_initial_backoff:
            raise ValueError("reconnect_max_backoff must be >= reconnect_initial_backoff")
        if self.server_silence_intervals < 1:
            raise ValueError("server_silence_intervals must be >= 1")
        if self.cancel_grace < 0:
            raise ValueError("cancel_grace must be >= 0")
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("certificate_chain and private_key go together (mutual TLS)")
        for name, marker in (("root_certificates", b"CERTIFICATE"), ("certificate_chain", b"CERTIFICATE"),
                             ("private_key", b"PRIVATE KEY")):
            value = getattr(self, name)
            if value is not None and not (b"-----BEGIN " in value and marker + b"-----" in value):
                raise ValueError(f"{name} must be PEM (a -----BEGIN ...{marker.decode()}----- block)")
        if self.root_certificates is not None or self.certificate_chain is not None:
            self.tls = True

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """The TLS credentials of the channel to the server (when ``tls``)."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )
