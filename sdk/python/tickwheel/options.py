"""Typed connection options for the Tickwheel clients: TLS and retries.

Both are validated when they are built, so a bad option fails at
construction, not on the first call.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from tickwheel.shared.backoff import ceiling
from tickwheel.shared.smallfiles import read_small

__all__ = ["DEFAULT_RETRY", "RetryOptions", "TlsOptions"]


@dataclass(frozen=True)
class TlsOptions:
    """TLS for the channel to the server. Without a ``TlsOptions`` the client
    connects in plaintext.

    ``TlsOptions()`` verifies the server against the system roots;
    ``TlsOptions.from_files("ca.pem")`` against a private CA; add
    ``client_cert`` and ``client_key`` for a server that requires mutual TLS.
    Values must be PEM: anything else is refused here rather than failing
    every call with UNAVAILABLE.
    """

    root_certificates: bytes | None = None
    """PEM CA bundle that signs the server's certificate; ``None`` uses the
    system roots."""

    certificate_chain: bytes | None = None
    """PEM client certificate chain, for servers that require mutual TLS.
    Must be given together with ``private_key``."""

    private_key: bytes | None = field(default=None, repr=False)
    """PEM private key of ``certificate_chain`` (kept out of ``repr``)."""

    server_name: str | None = None
    """Overrides the host name checked against the server's certificate
    (``grpc.ssl_target_name_override``); ``None`` checks the address's host."""

    def __post_init__(self) -> None:
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("TlsOptions: certificate_chain and private_key go together")
        for name, marker in (
            ("root_certificates", b"CERTIFICATE"),
            ("certificate_chain", b"CERTIFICATE"),
            ("private_key", b"PRIVATE KEY"),
        ):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, bytes):
                raise TypeError(f"TlsOptions.{name}: PEM bytes, not {type(value).__name__}")
            if not (b"-----BEGIN " in value and marker + b"-----" in value):
                raise ValueError(f"TlsOptions.{name}: not PEM (no -----BEGIN ...{marker.decode()}----- block)")

    @classmethod
    def from_files(
        cls,
        ca_cert: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
        *,
        server_name: str | None = None,
    ) -> TlsOptions:
        """Reads PEM files, each at most
        :data:`~tickwheel.shared.smallfiles.MAX_SMALL_FILE_BYTES`. Raises
        ``OSError`` when a file cannot be read or is larger (``/dev/zero``)
        and ``ValueError`` when only one of the client certificate and key
        is given or a file is not PEM."""
        return cls(
            root_certificates=read_small(ca_cert) if ca_cert else None,
            certificate_chain=read_small(client_cert) if client_cert else None,
            private_key=read_small(client_key) if client_key else None,
            server_name=server_name,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """The gRPC channel credentials these options describe."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )

    def channel_options(self) -> list[tuple[str, str]]:
        """Extra channel arguments (the server-name override, when set)."""
        if self.server_name:
            return [("grpc.ssl_target_name_override", self.server_name)]
        return []


@dataclass(frozen=True)
class RetryOptions:
    """How a call that failed with a retryable status is retried.

    Only calls that are safe to repeat are ever retried: reads, and writes
    made idempotent by a request id (CreateJob, TriggerJob). Other writes
    (UpdateJob, DeleteJob, ...) fail on the first error, because a reply lost
    after the server committed would otherwise apply them twice.

    Retry ``n`` (from 1) waits a uniformly random time in
    ``[0, min(max_backoff, initial_backoff * 2**(n-1))]`` (full jitter), and
    never past the call's overall deadline.
    """

    max_attempts: int = 5
    """Attempts in total, including the first; 1 disables retries."""

    initial_backoff: float = 0.2
    """Seconds: the upper bound of the first retry's wait."""

    max_backoff: float = 5.0
    """Seconds: the cap of any single wait."""

    retryable_codes: frozenset[grpc.StatusCode] = field(
        default_factory=lambda: frozenset({grpc.StatusCode.UNAVAILABLE})
    )
    """Status codes that may be retried. UNAVAILABLE means the request did not
    reach a server that could act on it, or the connection broke."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryOptions.max_attempts must be at least 1")
        if self.initial_backoff < 0 or self.max_backoff < self.initial_backoff:
            raise ValueError("RetryOptions: need 0 <= initial_backoff <= max_backoff")

    @classmethod
    def coerce(cls, value: RetryOptions | int | None) -> RetryOptions:
        """Accepts a ``RetryOptions``, an ``int`` number of retries after the
        first attempt (0 disables retries), or ``None`` (no retries)."""
        if isinstance(value, RetryOptions):
            return value
        if value is None:
            return cls(max_attempts=1)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return cls(max_attempts=value + 1)
        raise TypeError(f"retries must be RetryOptions, a non-negative int or None, not {value!r}")

    def backoff(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry number ``retry`` (1 for the first retry).

        Pure given ``rand``: ``rand() * min(max_backoff, initial_backoff * 2**(retry-1))``.
        """
        if retry < 1:
            raise ValueError("retry counts from 1")
        return rand() * ceiling(retry - 1, initial=self.initial_backoff, cap=self.max_backoff)


DEFAULT_RETRY = RetryOptions()
"""Five attempts, waits bounded by 0.2 s, 0.4 s, 0.8 s, 1.6 s; UNAVAILABLE only."""
