"""Lease store: sessions, leased keys, elections with fencing revisions, watches.

The protocol and its contracts are in :mod:`tickwheel_server.lease.base`, its
errors and records in :mod:`tickwheel_server.lease.types`; the
implementations are :mod:`~tickwheel_server.lease.memory` (in-process) and
:mod:`~tickwheel_server.lease.etcd`. Build one with :func:`open_lease_store`.
"""

from __future__ import annotations

from tickwheel_server.lease.base import DEFAULT_SESSION_TTL, LeaseStore, Session, Watch
from tickwheel_server.lease.types import (
    EventType,
    KeyValue,
    LeaseStoreClosed,
    LeaseStoreError,
    LeaseStoreFatal,
    LeaseStoreUnavailable,
    Ownership,
    SessionLost,
    WatchCompacted,
    WatchEvent,
    is_retryable,
)

from tickwheel.shared.clock import Clock

__all__ = [
    "DEFAULT_SESSION_TTL",
    "EventType",
    "KeyValue",
    "LeaseStore",
    "LeaseStoreClosed",
    "LeaseStoreError",
    "LeaseStoreFatal",
    "LeaseStoreUnavailable",
    "Ownership",
    "Session",
    "SessionLost",
    "Watch",
    "WatchCompacted",
    "WatchEvent",
    "is_retryable",
    "open_lease_store",
    "parse_etcd_endpoints",
]


def parse_etcd_endpoints(spec: str) -> list[str]:
    """``"etcd://h1:2379,h2:2379"``, ``"h1:2379,h2:2379"`` or
    ``"http://h1:2379,http://h2:2379"`` -> ``["h1:2379", "h2:2379"]``.

    Each endpoint needs a host and a port in 1..65535 (IPv6 hosts in brackets:
    ``[::1]:2379``). Raises ValueError naming the bad part; ``https://`` is
    refused because TLS to etcd is not supported yet."""
    text = spec.strip()
    if text.startswith("etcd://"):
        text = text[len("etcd://") :]
    if not text:
        raise ValueError(f"etcd endpoints: none given in {spec!r} (expected host:port[,host:port...])")
    endpoints: list[str] = []
    for raw in text.split(","):
        item = raw.strip().rstrip("/")
        if item.startswith("https://"):
            raise ValueError(f"etcd endpoint {raw.strip()!r}: TLS (https://) is not supported yet")
        if item.startswith("http://"):
            item = item[len("http://") :]
        host, sep, port = item.rpartition(":")
        if not sep or not host or "/" in item or (":" in host and not (host.startswith("[") and host.endswith("]"))):
            raise ValueError(f"etcd endpoint {raw.strip()!r} in {spec!r}: expected host:port")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"etcd endpoint {raw.strip()!r} in {spec!r}: port must be 1..65535")
        endpoints.append(f"{host}:{int(port)}")
    return endpoints


def open_lease_store(spec: str, clock: Clock, *, request_timeout: float | None = None) -> LeaseStore:
    """Build the lease store named by ``spec`` (validated here; nothing is
    contacted until the first call):

    * ``"memory"``: the in-process store (``tickwheel dev``, unit tests);
    * ``"etcd://host:port[,host:port...]"`` or plain ``"host:port[,...]"``:
      etcd, trying the endpoints in order. ``request_timeout`` (seconds)
      bounds each etcd call (default 5).

    Close it with ``await store.close()`` (or ``async with``)."""
    if not isinstance(spec, str):
        raise TypeError(f"lease store spec must be a str, got {type(spec).__name__}")
    if spec.strip() == "memory":
        from tickwheel_server.lease.memory import MemoryLeaseStore

        return MemoryLeaseStore(clock)
    endpoints = parse_etcd_endpoints(spec)
    from tickwheel_server.lease.etcd import DEFAULT_REQUEST_TIMEOUT, EtcdLeaseStore

    return EtcdLeaseStore(
        endpoints, clock, request_timeout=DEFAULT_REQUEST_TIMEOUT if request_timeout is None else request_timeout
    )
