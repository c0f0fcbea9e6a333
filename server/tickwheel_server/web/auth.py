"""The console's callers, checked by the server's Authenticator.

The Authenticator reads a gRPC call's ``authorization`` metadata; an HTTP
request's ``Authorization`` header is handed to it in that shape
(:class:`HeaderMetadata`), so the console accepts exactly the credentials
the gRPC API accepts, with the same cache and the same revocation delay.
Its errors become HTTP statuses: no credential or an unknown one 401 (with
``WWW-Authenticate: Bearer``), a valid one of the wrong kind 403, and a
tenant over its API request rate (the rate the gRPC API refuses with
RESOURCE_EXHAUSTED; console requests count against it too) 429 with the
limit in the message and ``Retry-After: 1``, since the tenant's bucket
refills every second. A client over its failed authentications (see
``auth.failures``; counted by its address, as on the gRPC port) gets 429
too; a request without a usable credential counts as one, as a gRPC call
without one does.

Every request meets its caller's refusal window first, as a gRPC call does
at the edge (:mod:`tickwheel_server.auth.windows`: the window of its
bearer secret, or of its address when it sent none or a secret that did
not verify here lately): inside one it is answered 429 with the window's
``Retry-After`` before its credential is checked or a bucket touched, and
one that keeps asking is held and told a longer wait, as gRPC callers
are. The windows are the gRPC port's own: a caller refused on one is
refused on the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..api.status import refusal_answer, retry_delay
from ..auth.authenticator import Authenticator
from ..errors import PermissionDenied, QuotaExceeded, RateLimited, Unauthenticated
from ..store.tenants import Tenant
from .router import HttpError, Request

CHALLENGE = (("WWW-Authenticate", 'Bearer realm="tickwheel"'),)
RETRY_AFTER = (("Retry-After", "1"),)


@dataclass(frozen=True)
class HeaderMetadata:
    """An HTTP request's credential as the metadata of a gRPC call: what
    :class:`Authenticator` reads through ``invocation_metadata()``."""

    secret: str | None
    """None: the request carried no usable credential (no metadata then)."""
    address: str = ""
    """The client's ``host:port`` (:attr:`Request.peer`): failed
    authentications are limited per client address, as on the gRPC port."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return () if self.secret is None else (("authorization", f"Bearer {self.secret}"),)

    def peer(self) -> str:
        """The address as gRPC names a peer (``ipv4:HOST:PORT``, ``ipv6:[HOST]:PORT``)."""
        host, _, port = self.address.rpartition(":")
        if not host:
            return ""
        return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


@dataclass(frozen=True)
class Principal:
    """Who signed in to the console: a tenant (``tenant`` set) or the operator."""

    kind: str
    """``tenant`` or ``admin``."""
    tenant: str = ""


def credential_of(request: Request) -> HeaderMetadata:
    """The request's bearer credential; 401 when there is none or the header is malformed."""
    value = request.header("authorization")
    if not value:
        raise HttpError(401, "missing Authorization header: send 'Authorization: Bearer <credential>'", CHALLENGE)
    scheme, _, secret = value.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise HttpError(401, "the Authorization header must be 'Bearer <credential>'", CHALLENGE)
    return HeaderMetadata(secret.strip(), request.peer)


def _unauthenticated(error: Unauthenticated) -> HttpError:
    return HttpError(401, str(error), CHALLENGE)


def retry_after(seconds: float | None) -> tuple[tuple[str, str], ...]:
    """A ``Retry-After`` header of ``seconds`` rounded up (at least 1; 1 when unknown)."""
    return (("Retry-After", str(max(1, math.ceil(seconds or 1.0)))),)


def _over_rate(error: QuotaExceeded | RateLimited) -> HttpError:
    return HttpError(429, str(error), retry_after(error.retry_after))


async def _refuse(code, message: str, trailing_metadata=()) -> None:
    """A window's answer (``context.abort``'s shape) as the 429 it is over HTTP."""
    raise HttpError(429, message, retry_after(retry_delay(trailing_metadata)))


async def admitted(auth: Authenticator, request: Request) -> HeaderMetadata:
    """The request's credential, once it met its caller's refusal window
    (429 inside one, held as gRPC calls are when it keeps asking); 401 when
    it carries none or a malformed header, counted as a failed
    authentication of its address (429 once that address spent its
    failures)."""
    value = request.header("authorization")
    scheme, _, secret = value.partition(" ")
    usable = scheme.lower() == "bearer" and bool(secret.strip())
    metadata = HeaderMetadata(secret.strip() if usable else None, request.peer)
    window = auth.windows.refusing(metadata)
    if window is not None:
        await auth.windows.refuse(window, _refuse, refusal_answer)
    if usable:
        return metadata
    try:
        await auth.admin(metadata)  # no credential: counted against the address, refused
    except RateLimited as error:
        raise _over_rate(error) from None
    except Unauthenticated:
        pass
    return credential_of(request)  # raises its 401


async def tenant_of(auth: Authenticator, request: Request) -> Tenant:
    """The tenant whose API key the request carries; 401, or 403 for an
    admin token or a worker credential, or 429 over the tenant's request rate."""
    metadata = await admitted(auth, request)
    try:
        return await auth.tenant(metadata)
    except Unauthenticated as error:
        raise _unauthenticated(error) from None
    except (QuotaExceeded, RateLimited) as error:
        raise _over_rate(error) from None
    except PermissionDenied:
        raise HttpError(403, "the tenant views need a tenant API key") from None


async def require_admin(auth: Authenticator, request: Request) -> None:
    """Nothing when the request carries the admin token; 401, or 403 for a
    tenant API key or a worker credential."""
    metadata = await admitted(auth, request)
    try:
        await auth.admin(metadata)
    except Unauthenticated as error:
        raise _unauthenticated(error) from None
    except RateLimited as error:
        raise _over_rate(error) from None
    except PermissionDenied:
        raise HttpError(403, "the cluster view needs the admin token") from None


async def principal_of(auth: Authenticator, request: Request) -> Principal:
    """A tenant or the operator; 401, or 403 for a worker credential (a
    worker has no view in the console), or 429 for a tenant over its
    request rate."""
    metadata = await admitted(auth, request)
    try:
        return Principal("tenant", (await auth.tenant(metadata)).name)
    except Unauthenticated as error:
        raise _unauthenticated(error) from None
    except (QuotaExceeded, RateLimited) as error:
        raise _over_rate(error) from None
    except PermissionDenied:
        pass
    try:
        await auth.admin(metadata)
    except PermissionDenied:
        raise HttpError(
            403, "a worker credential cannot open the console: use a tenant API key or the admin token"
        ) from None
    return Principal("admin")
