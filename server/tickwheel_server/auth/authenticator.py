"""Who is calling: the credential in ``authorization: Bearer <secret>``.

Three kinds of caller, each allowed on its own service: tenants (API key) on
SchedulerService, workers (worker credential) on WorkerService, operators
(admin token) on AdminService. A credential of the wrong kind gets
PERMISSION_DENIED; none or an unknown one UNAUTHENTICATED.

Verified credentials are cached for a few seconds (bounded), so a hot client
costs one store read per TTL, not one per call. A revocation takes effect at
once on the server that revoked, and on the others as soon as its broadcast
arrives (:mod:`tickwheel_server.cluster.revocations`, which calls
:meth:`Authenticator.forget_revoked`); within the TTL when that broadcast is
lost. An API key is never cached past its expiry, so a rotated key stops
working when its grace ends. A tenant's changed settings (UpdateTenant,
PauseTenant, ResumeTenant), which its API keys' cached principals carry,
are told the same way (:data:`TENANT_CHANGED`): every cached principal of
that tenant is evicted, here at once and on the others when the word
arrives.

Failed authentications are bounded in what they cost (see
:mod:`tickwheel_server.auth.failures`): a secret that failed is refused
again without a store read for a while, and a peer, or all peers together,
over their rate of failures get RESOURCE_EXHAUSTED without one. Nothing is
logged per failed call. A caller refused RESOURCE_EXHAUSTED with a retry
delay (here or by the request rate below) that calls again before it ends
is refused at the edge, before its request is decoded or anything here
runs (:mod:`tickwheel_server.auth.windows`).

A tenant's calls are then counted against its API request rate (see
:mod:`tickwheel_server.auth.ratelimit`) when a limiter is given: over it, the call
fails RESOURCE_EXHAUSTED before the servicer reads or writes anything. The
rate is the tenant's as cached, so a changed quota holds once its word
evicted the tenant's principals (within the TTL when the word is lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections import OrderedDict
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime

import grpc

from tickwheel.shared.clock import Clock

from ..errors import PermissionDenied, QuotaExceeded, RateLimited, Unauthenticated
from .ratelimit import Meter, RequestRateLimiter
from ..store.credentials import WorkerCredential, WorkerCredentialStore
from ..store.tenants import Tenant, TenantStore
from . import failures, tokens
from .failures import FailedAuthentications
from .windows import PEER_KEY, RefusalWindows, caller_key, peer_window_key

CACHE_TTL_SECONDS = 5.0
CACHE_SIZE = 10_000
TENANT_CHANGED = "tnt"
"""The kind of a :class:`Revoked` saying a tenant's settings changed: every
cached principal of that tenant (its API keys') is evicted. Its
``credential_id`` is empty."""


@dataclass(frozen=True)
class Revoked:
    """A credential revoked, or whose expiry moved (a rotated API key), as the
    servers tell each other: its kind (:data:`~.tokens.API_KEY_PREFIX` or
    :data:`~.tokens.WORKER_CREDENTIAL_PREFIX`), its id and a tenant it
    belongs to (the API key's, one of the worker credential's), both as the
    store read them when it revoked. Of kind :data:`TENANT_CHANGED`: the
    tenant (as the store read it back after the change) whose settings
    changed, and no credential id."""

    kind: str
    credential_id: str
    tenant: str


@dataclass(frozen=True)
class TenantPrincipal:
    tenant: Tenant


@dataclass(frozen=True)
class WorkerPrincipal:
    credential: WorkerCredential


@dataclass(frozen=True)
class AdminPrincipal:
    pass


def bearer(context: grpc.aio.ServicerContext) -> str:
    """The bearer secret of a call (as its edge read it, :func:`.tokens.call_bearer`), or Unauthenticated."""
    sent, secret = tokens.call_bearer(context)
    if secret is not None:
        return secret
    if sent:
        raise Unauthenticated("authorization metadata must be 'Bearer <credential>'")
    raise Unauthenticated("missing authorization metadata: send 'authorization: Bearer <credential>'")


def api_key_actor(context: grpc.aio.ServicerContext) -> str:
    """Who a SchedulerService call acts as, as revisions record it:
    ``"api_key:<key id>"`` of its bearer API key. Call it once
    :meth:`Authenticator.tenant` accepted the call (the key is then one
    this server issued)."""
    key_id = tokens.parse_secret(bearer(context), tokens.API_KEY_PREFIX)
    return f"api_key:{key_id}"


def peer_of(context) -> str:
    """The key a call's failures are limited under (:func:`.failures.peer_key`);
    ``unknown`` when the context cannot say."""
    peer = getattr(context, "peer", None)
    try:
        text = peer() if callable(peer) else ""
    except Exception:  # a context without a transport (a test's, a closed call's)
        text = ""
    return failures.peer_key(text if isinstance(text, str) else "")


class Authenticator:
    """Resolves a call's credential to a principal of the kind the service needs."""

    def __init__(
        self,
        tenants: TenantStore,
        workers: WorkerCredentialStore,
        admin_token: str,
        clock: Clock,
        *,
        rate_limiter: RequestRateLimiter | None = None,
        failures: FailedAuthentications | None = None,
        cache_ttl: float | None = None,
        windows: RefusalWindows | None = None,
    ) -> None:
        if not admin_token:
            raise ValueError("an admin token is required")
        self.cache_ttl = CACHE_TTL_SECONDS if cache_ttl is None else cache_ttl
        """Seconds a verified credential is cached (:data:`CACHE_TTL_SECONDS`)."""
        if not self.cache_ttl > 0:
            raise ValueError("cache_ttl must be > 0 seconds")
        self._tenants = tenants
        self._workers = workers
        self._admin_token = admin_token
        self._clock = clock
        self._rate_limiter = rate_limiter
        self._cache: OrderedDict[str, tuple[float, object, tuple[str, str] | None]] = OrderedDict()
        """Secret -> (monotonic instant it is good until, principal, (kind, credential id))."""
        self._ids: dict[tuple[str, str], str] = {}
        """(Kind, credential id) -> its secret in :attr:`_cache` (a revocation evicts without a scan)."""
        self._by_tenant: dict[str, set[str]] = {}
        """Tenant -> the secrets of its API keys in :attr:`_cache` (a changed tenant is evicted without a scan)."""
        self._reading: dict[str, asyncio.Future] = {}
        """Secret -> its store read in flight (:meth:`_read_once`)."""
        self._evictions = 0
        """Bumped by every forget: a verification that read the store before
        one is not cached (the store may have answered before the revocation)."""
        self.failures = failures or FailedAuthentications(clock)
        """Failed authentications: the negative cache and their rate limits (:mod:`.failures`)."""
        self.windows = windows if windows is not None else RefusalWindows(clock)
        """Callers refused with a retry delay, refused again at the edge until it ends (:mod:`.windows`)."""
        self.windows.trusted = self._trusted

    def _trusted(self, secret: str) -> bool:
        """``secret`` verified on this server lately: in the positive cache
        (expired or not), or known to :attr:`failures` as verified."""
        return secret in self._cache or self.failures.verified_lately(failures.secret_digest(secret))

    def _is_admin(self, secret: str) -> bool:
        return hmac.compare_digest(secret.encode(), self._admin_token.encode())

    async def _resolve(self, secret: str, context=None) -> object | None:
        """The principal of ``secret`` or None; RateLimited when the call's
        peer (:func:`peer_of` ``context``) or this server is over its
        failures and the secret is not cached."""
        cached = self._cache.get(secret)
        now = self._clock.monotonic()
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(secret)
            return cached[1]
        peer = peer_of(context)  # only failures are counted by peer: not read for a cached secret
        digest = failures.secret_digest(secret)
        key_id = tokens.parse_secret(secret, tokens.API_KEY_PREFIX)
        worker_id = tokens.parse_secret(secret, tokens.WORKER_CREDENTIAL_PREFIX)
        admin = self._is_admin(secret)
        lookup = None if admin else key_id or worker_id
        reserved = self.failures.check(peer, lookup=lookup, digest=digest)
        try:
            if self.failures.known_bad(digest):
                self.failures.failed(peer, digest, looked_up=False)
                return None
            principal: object | None
            until = now + self.cache_ttl
            evictions = self._evictions
            read = False
            if admin:
                principal = AdminPrincipal()
            elif lookup is not None:
                principal, expires_at, evictions, read = await self._read_once(secret, key_id is not None)
                if expires_at is not None:
                    until = min(until, now + (expires_at - self._clock.now()).total_seconds())
            else:
                principal = None
            if principal is None:
                self.failures.failed(peer, digest, looked_up=read)
            else:
                self.failures.verified(lookup, digest)
        finally:
            if reserved:  # decided: no longer counted in flight
                self.failures.settle(peer, lookup, digest)
        if principal is not None and evictions == self._evictions:
            ident = None
            if key_id is not None:
                ident = (tokens.API_KEY_PREFIX, key_id)
            elif worker_id is not None:
                ident = (tokens.WORKER_CREDENTIAL_PREFIX, worker_id)
            if secret in self._cache:
                self._drop(secret)  # expired: its index entries go with it
            self._cache[secret] = (until, principal, ident)
            if ident is not None:
                self._ids[ident] = secret
            if isinstance(principal, TenantPrincipal):
                self._by_tenant.setdefault(principal.tenant.name, set()).add(secret)
            while len(self._cache) > CACHE_SIZE:
                self._drop(next(iter(self._cache)))
        return principal

    async def _read_once(self, secret: str, api_key: bool) -> tuple[object | None, datetime | None, int, bool]:
        """The store's answer for ``secret`` (an API key's when ``api_key``,
        else a worker credential's): its principal or None, the key's
        expiry, :attr:`_evictions` as the read began (a principal read
        before an eviction is not cached), and whether this call made the
        read. Calls with the same secret while its read is in flight share
        that read: a client sending one unknown secret on a hundred calls at
        once costs one store read, not a hundred (its calls all pass the
        failure limits on one count, :meth:`.failures.FailedAuthentications.check`)."""
        while (reading := self._reading.get(secret)) is not None:
            try:
                return (*await asyncio.shield(reading), False)
            except asyncio.CancelledError:
                if not reading.cancelled():
                    raise  # this call was cancelled
                # The call reading went away before its answer: read again.
        reading = self._reading[secret] = asyncio.get_running_loop().create_future()
        try:
            answer = await self._read(secret, api_key, self._evictions)
        except asyncio.CancelledError:
            reading.cancel()
            raise
        except BaseException as error:
            reading.set_exception(error)
            reading.exception()  # retrieved: the calls sharing it raise it, if any
            raise
        finally:
            if self._reading.get(secret) is reading:
                del self._reading[secret]
        reading.set_result(answer)
        return (*answer, True)

    async def _read(self, secret: str, api_key: bool, evictions: int) -> tuple[object | None, datetime | None, int]:
        if api_key:
            verified = await self._tenants.verify_key_until(secret)
            if verified is None:
                return None, None, evictions
            tenant, expires_at = verified
            return TenantPrincipal(tenant), expires_at, evictions
        credential = await self._workers.verify(secret)
        return (None if credential is None else WorkerPrincipal(credential)), None, evictions

    def _drop(self, secret: str) -> None:
        """Remove ``secret``'s cached principal (and its index entries)."""
        _, principal, ident = self._cache.pop(secret)
        if ident is not None and self._ids.get(ident) == secret:
            del self._ids[ident]
        if isinstance(principal, TenantPrincipal):
            secrets = self._by_tenant.get(principal.tenant.name)
            if secrets is not None:
                secrets.discard(secret)
                if not secrets:
                    del self._by_tenant[principal.tenant.name]

    async def _principal(self, context: grpc.aio.ServicerContext) -> object:
        try:
            try:
                secret = bearer(context)
            except Unauthenticated:
                peer = peer_of(context)
                if self.failures.check(peer, lookup=None):
                    self.failures.failed(peer, None, looked_up=False)
                    self.failures.settle(peer, None)
                raise
            principal = await self._resolve(secret, context)
        except RateLimited as error:
            key = caller_key(context)
            if error.subject.startswith("peer:") and not key.startswith(PEER_KEY):
                self.windows.opened(peer_window_key(context), error, error.retry_after)  # its next secrets too
            error.retry_after = self.windows.opened(key, error, error.retry_after)
            raise
        if principal is None:
            raise Unauthenticated("the credential is not valid (unknown, expired or revoked)")
        return principal

    async def tenant(self, context: grpc.aio.ServicerContext) -> Tenant:
        """The calling tenant; QuotaExceeded when it is over its request rate
        (its caller then refused at the edge until the wait it is told ends,
        :mod:`.windows`)."""
        principal = await self._principal(context)
        if not isinstance(principal, TenantPrincipal):
            raise PermissionDenied("SchedulerService needs a tenant API key")
        if self._rate_limiter is not None:
            try:
                self._rate_limiter.check(principal.tenant.name, principal.tenant.requests_per_second)
            except QuotaExceeded as error:
                if error.retry_after is not None:
                    error.retry_after = self.windows.opened(caller_key(context), error, error.retry_after)
                raise
        return principal.tenant

    def metered(self, tenant: Tenant) -> AbstractAsyncContextManager[Meter]:
        """Around a call's schedule work for ``tenant``: the rate limiter's
        :meth:`~.ratelimit.RequestRateLimiter.metered` (one at a time, paid
        for by the fires counted in the :class:`~.ratelimit.Meter` yielded);
        unmetered without a rate limiter."""
        if self._rate_limiter is None:
            return contextlib.nullcontext(Meter())
        return self._rate_limiter.metered(tenant.name, tenant.requests_per_second)

    async def worker(self, context: grpc.aio.ServicerContext) -> WorkerCredential:
        principal = await self._principal(context)
        if not isinstance(principal, WorkerPrincipal):
            raise PermissionDenied("WorkerService needs a worker credential")
        return principal.credential

    async def admin(self, context: grpc.aio.ServicerContext) -> None:
        principal = await self._principal(context)
        if not isinstance(principal, AdminPrincipal):
            raise PermissionDenied("AdminService needs the admin credential")

    def cached(self) -> int:
        """Principals cached now (expired ones included until replaced)."""
        return len(self._cache)

    def forget(self) -> None:
        """Drop every cached principal (after a revocation by this server, or
        when revocations from the others may have been missed)."""
        self._evictions += 1
        self._cache.clear()
        self._ids.clear()
        self._by_tenant.clear()

    def forget_worker_credentials(self, credential_ids: set[str]) -> None:
        """Drop the cached principals of these worker credentials (found
        revoked by another server): a call with one is verified again."""
        self._evictions += 1
        for ident in credential_ids:
            secret = self._ids.get((tokens.WORKER_CREDENTIAL_PREFIX, ident))
            if secret is not None:
                self._drop(secret)

    def forget_revoked(self, revoked: Revoked) -> int:
        """Drop the cached principal of ``revoked``'s credential if it is one
        of that kind and tenant (an id named with another tenant evicts
        nothing); for :data:`TENANT_CHANGED`, every cached principal of that
        tenant's API keys (worker credentials carry only tenants' names,
        which a tenant's settings do not change). How many were dropped;
        the next call with one is verified in the store again. One
        dictionary look-up (then one removal per principal dropped), no scan."""
        self._evictions += 1
        if revoked.kind == TENANT_CHANGED:
            secrets = self._by_tenant.pop(revoked.tenant, ())
            for secret in secrets:
                self._drop(secret)
            return len(secrets)
        secret = self._ids.get((revoked.kind, revoked.credential_id))
        if secret is None:
            return 0
        principal = self._cache[secret][1]
        if revoked.kind == tokens.API_KEY_PREFIX:
            ours = isinstance(principal, TenantPrincipal) and principal.tenant.name == revoked.tenant
        elif revoked.kind == tokens.WORKER_CREDENTIAL_PREFIX:
            ours = isinstance(principal, WorkerPrincipal) and revoked.tenant in principal.credential.tenants
        else:
            ours = False
        if ours:
            self._drop(secret)
        return int(ours)
