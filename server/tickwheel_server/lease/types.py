"""What the lease store protocol speaks in: its errors, its records, the checks on its arguments.

The protocol itself (:class:`~tickwheel_server.lease.base.LeaseStore`,
:class:`~tickwheel_server.lease.base.Session`,
:class:`~tickwheel_server.lease.base.Watch`) is in
:mod:`tickwheel_server.lease.base`; every implementation raises and returns
what is defined here. Keys are ``str`` (UTF-8 on the wire); values are
``bytes`` (a ``str`` value is encoded as UTF-8).
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tickwheel_server.lease.base import Session


# --------------------------------------------------------------------------- errors


class LeaseStoreError(Exception):
    """Base of every lease-store error. ``retryable`` says whether the same call
    may succeed later without the caller changing anything."""

    retryable = False


class LeaseStoreUnavailable(LeaseStoreError):
    """The store could not be reached or did not answer in time (connection
    refused, no leader, request timed out, every endpoint down).

    Retryable with backoff. The operation may or may not have been applied:
    ``put`` and ``delete`` are safe to repeat; ``try_acquire`` is safe to
    repeat because a key already held under the caller's own session is
    adopted; a repeated ``open_session`` may leave an orphan lease that expires
    by its TTL."""

    retryable = True


class LeaseStoreFatal(LeaseStoreError):
    """The store refused the request for a reason retrying will not fix
    (invalid argument, permission denied, unsupported server). A bug or a
    configuration error."""


class LeaseStoreClosed(LeaseStoreFatal):
    """The store (or a watch) was used after :meth:`LeaseStore.close`."""


class SessionLost(LeaseStoreError):
    """The session's lease is gone or can no longer be trusted (expired,
    revoked, closed, or not renewed within its TTL). Every ownership held under
    it is void. Not retryable with this session: open a new one."""


class WatchCompacted(LeaseStoreError):
    """A watch asked for history the store no longer keeps. Read the current
    state and watch again from ``current_revision() + 1``."""

    def __init__(self, message: str, compact_revision: int) -> None:
        super().__init__(message)
        self.compact_revision = compact_revision


def is_retryable(exc: BaseException) -> bool:
    """True when ``exc`` is a lease-store error worth retrying with backoff."""
    return isinstance(exc, LeaseStoreError) and exc.retryable


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class KeyValue:
    """A key as stored.

    ``create_revision`` is the store revision of the put that created the key
    (it survives later puts and changes only if the key is deleted and created
    again); ``mod_revision`` that of the latest put; ``version`` counts puts
    since creation (1 after the create); ``lease`` is the session id the key is
    attached to, 0 for none."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


class EventType(enum.Enum):
    PUT = "put"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change seen by a watch.

    ``revision`` is the store revision of the change (for a put, the key's new
    mod revision). ``value`` and ``create_revision`` are empty/0 for a delete.
    Keys deleted together (a session ending) share one revision."""

    type: EventType
    key: str
    value: bytes
    revision: int
    create_revision: int = 0


@dataclass(frozen=True, slots=True, eq=False)
class Ownership:
    """Proof of holding ``key`` under ``session``.

    ``fencing_revision`` is the key's create revision: strictly greater than
    that of every earlier owner of the key. Pass it along with every write made
    as owner (for partitions, it becomes the fencing epoch checked in SQL).
    The ownership ends when the key is deleted (:meth:`LeaseStore.resign`) or
    the session is lost; ``lost`` fires in the latter case."""

    key: str
    value: bytes
    fencing_revision: int
    session: "Session"

    @property
    def lost(self) -> asyncio.Event:
        return self.session.lost


# --------------------------------------------------------------------------- checks


def to_bytes(value: bytes | str) -> bytes:
    """``value`` as the bytes stored (a ``str`` encoded as UTF-8), or TypeError."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"lease store values are bytes or str, not {type(value).__name__}")


def validate_ttl(ttl: int) -> int:
    """``ttl`` as whole seconds >= 1, or ValueError."""
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
        raise ValueError(f"session ttl must be a whole number of seconds >= 1, got {ttl!r}")
    return ttl


def validate_revision(revision: int) -> int:
    """``revision`` as a whole number >= 1, or ValueError."""
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise ValueError(f"a store revision is a whole number >= 1, got {revision!r}")
    return revision


def validate_key(key: str) -> str:
    """``key`` if it is a non-empty ``str``, or ValueError."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"lease store keys are non-empty str, got {key!r}")
    return key


def prefix_range_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``
    (etcd's range_end for a prefix); ``b"\\0"`` means "to the end"."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"
