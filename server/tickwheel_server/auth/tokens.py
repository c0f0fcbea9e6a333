"""Credential secrets: how they look, and how they are stored.

A secret is ``<prefix>_<id>_<random>``: the id locates the stored row, the
random part (32 bytes, URL-safe base64) is the secret proper. The store keeps
only SHA-256 of the whole secret; the random part has 256 bits of entropy, so
a fast hash is enough and a slow password hash would only cost CPU on every
call. Comparison is constant-time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from contextvars import ContextVar
from dataclasses import dataclass

API_KEY_PREFIX = "twk"
WORKER_CREDENTIAL_PREFIX = "tww"


@dataclass(frozen=True)
class NewSecret:
    id: str
    secret: str
    secret_hash: bytes


def _random_part(nbytes: int) -> str:
    return base64.urlsafe_b64encode(os.urandom(nbytes)).rstrip(b"=").decode()


def new_secret(prefix: str) -> NewSecret:
    """A fresh credential with a random 16-character id."""
    ident = _random_part(12).replace("-", "x").replace("_", "y")
    secret = f"{prefix}_{ident}_{_random_part(32)}"
    return NewSecret(id=ident, secret=secret, secret_hash=hash_secret(secret))


def hash_secret(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def parse_secret(secret: str, prefix: str) -> str | None:
    """The id inside ``secret`` when it has the shape of a ``prefix`` credential, else None."""
    parts = secret.split("_", 2)
    if len(parts) != 3 or parts[0] != prefix or not parts[1] or not parts[2]:
        return None
    return parts[1]


def secret_matches(secret: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_secret(secret), bytes(stored_hash))


def bearer_secret(metadata) -> tuple[bool, str | None]:
    """(whether the call sent ``authorization`` metadata, its bearer secret)
    from a call's invocation metadata: the secret of ``Bearer <secret>``
    (stripped), None when there is no such header or it is not that form."""
    for key, value in metadata or ():
        if key == "authorization":
            scheme, _, secret = value.partition(" ")
            secret = secret.strip()
            return True, secret if scheme.lower() == "bearer" and secret else None
    return False, None


_EDGE_READ: ContextVar[tuple[object, bool, str | None] | None] = ContextVar("tickwheel_edge_bearer", default=None)
"""The call whose edge read its bearer secret in this task, with what it read."""


def read_at_edge(context) -> tuple[bool, str | None]:
    """:func:`bearer_secret` of a call's metadata, read at its edge
    (``api/decoding.py``) and kept for the rest of the call's task, where
    :func:`call_bearer` answers it without reading the metadata again."""
    read = bearer_secret(context.invocation_metadata())
    _EDGE_READ.set((context, *read))
    return read


def call_bearer(context) -> tuple[bool, str | None]:
    """:func:`bearer_secret` of ``context``'s metadata: what its edge read
    (:func:`read_at_edge`) when this task serves that call, else read now
    (a call that passed no edge: a test's, another task's)."""
    read = _EDGE_READ.get()
    if read is not None and read[0] is context:
        return read[1], read[2]
    return bearer_secret(context.invocation_metadata())
