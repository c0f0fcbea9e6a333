"""The worker's configuration, validated when it is built."""

from __future__ import annotations

import os
import re
import secrets
import socket
from dataclasses import dataclass, field

from tickwheel_worker.handlers import HandlerRegistry
from tickwheel_worker.http_target import AddressPolicy, allow_all_addresses

WORKER_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
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
    """Use TLS. Implied by ``root_certificates``; without them the system roots are used."""
    root_certificates: bytes | None = None
    """PEM roots that sign the server's certificate (implies TLS)."""
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
    address_policy: AddressPolicy = allow_all_addresses
    """Checked for every resolved address of an HTTP target (see ``http_target``)."""

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
        if self.root_certificates is not None:
            self.tls = True
