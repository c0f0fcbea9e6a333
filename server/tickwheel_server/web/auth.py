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
too.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    secret: str
    address: str = ""
    """The client's ``host:port`` (:attr:`Request.peer`): failed
    authentications are limited per client address, as on the gRPC port."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.secret}"),)

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


def _over_rate(error: QuotaExceeded | RateLimited) -> HttpError:
    return HttpError(429, str(error), RETRY_AFTER)


async def tenant_of(auth: Authenticator, request: Request) -> Tenant:
    """The tenant whose API key the request carries; 401, or 403 for an
    admin token or a worker credential, or 429 over the tenant's request rate."""
    try:
        return await auth.tenant(credential_of(request))
    except Unauthenticated as error:
        raise _unauthenticated(error) from None
    except (QuotaExceeded, RateLimited) as error:
        raise _over_rate(error) from None
    except PermissionDenied:
        raise HttpError(403, "the tenant views need a tenant API key") from None


async def require_admin(auth: Authenticator, request: Request) -> None:
    """Nothing when the request carries the admin token; 401, or 403 for a
    tenant API key or a worker credential."""
    try:
        await auth.admin(credential_of(request))
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
    metadata = credential_of(request)
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
