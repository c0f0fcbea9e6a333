"""Tenants and their API keys (one aggregate: a key never outlives its tenant)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..auth import tokens
from ..errors import AlreadyExists, NotFound, VersionConflict
from . import quota
from .base import SqlStore, newest_first
from .peertext import escaped_text
from .tables import api_keys, tenants

DEFAULT_MAX_JOBS = 100_000
DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024
DEFAULT_REQUESTS_PER_SECOND = 100
DEFAULT_MAX_PENDING_MANUAL_RUNS = 100_000
"""Ten Backfill calls of the most occurrences one may cover (``api.scheduler``), as max_jobs defaults to 100 000."""

KEY_LIST_LIMIT = 1001
"""The most keys one :meth:`TenantStore.list_keys` reads: a page of at
most 1000 (the API's largest) and one more to tell that another follows."""

LIMIT_MAX_JOBS = 1_000_000_000
"""The largest ``max_jobs`` an operator may set: far above what a store
holds for one tenant, and small enough that no sum of units overflows."""
LIMIT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
"""The largest ``max_payload_bytes``: the largest message a gRPC server
takes by default, so no payload over it can arrive anyway."""
LIMIT_REQUESTS_PER_SECOND = 1_000_000
"""The largest ``requests_per_second``."""
LIMIT_MAX_PENDING_MANUAL_RUNS = 10_000_000
"""The largest ``max_pending_manual_runs``: a queue the hand-out scans
every tenant share could hold that many of one tenant's runs."""


@dataclass(frozen=True)
class Tenant:
    name: str
    weight: int = 1
    max_concurrency: int = 0
    max_jobs: int = DEFAULT_MAX_JOBS
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    requests_per_second: int = DEFAULT_REQUESTS_PER_SECOND
    max_pending_manual_runs: int = DEFAULT_MAX_PENDING_MANUAL_RUNS
    state: str = "active"
    pause_reason: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    version: int = 0


@dataclass(frozen=True)
class ApiKey:
    id: str
    tenant: str
    description: str
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True)
class IssuedKey:
    key: ApiKey
    secret: str


def _tenant_from_row(row) -> Tenant:
    return Tenant(
        name=row.name,
        weight=row.weight,
        max_concurrency=row.max_concurrency,
        max_jobs=row.max_jobs,
        max_payload_bytes=row.max_payload_bytes,
        requests_per_second=row.requests_per_second,
        max_pending_manual_runs=row.max_pending_manual_runs,
        state=row.state,
        pause_reason=escaped_text(row.pause_reason),
        created_at=from_us(row.created_at),
        updated_at=from_us(row.updated_at),
        version=row.version,
    )


def _key_from_row(row) -> ApiKey:
    return ApiKey(
        id=row.id,
        tenant=row.tenant,
        description=escaped_text(row.description),
        created_at=from_us(row.created_at),
        expires_at=None if row.expires_at is None else from_us(row.expires_at),
    )


def _get_tenant(conn: Connection, name: str) -> Tenant:
    query = sa.select(tenants).where(tenants.c.name == name)
    row = conn.execute(query).first()
    if row is None:
        raise NotFound("tenant", name)
    return _tenant_from_row(row)


def _insert_key(conn: Connection, tenant: str, description: str, now_us: int) -> IssuedKey:
    description = escaped_text(description)  # as the API would have it: kept as it is unless it holds a control
    new = tokens.new_secret(tokens.API_KEY_PREFIX)
    conn.execute(
        api_keys.insert().values(
            id=new.id,
            tenant=tenant,
            secret_hash=new.secret_hash,
            description=description,
            created_at=now_us,
            expires_at=None,
        )
    )
    return IssuedKey(ApiKey(new.id, tenant, description, from_us(now_us), None), new.secret)


class TenantStore(SqlStore):
    """Tenants and API keys.

    Keys are stored as SHA-256 hashes only; the secret exists in the reply to
    the call that issued it and nowhere else.
    """

    async def create(self, tenant: Tenant, *, key_description: str = "initial key") -> tuple[Tenant, IssuedKey]:
        """Create ``tenant`` (its name, weight, cap and quotas) with its first API key.

        Raises AlreadyExists when the name is taken; nothing is written then.
        """
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> tuple[Tenant, IssuedKey]:
            if conn.execute(sa.select(tenants.c.name).where(tenants.c.name == tenant.name)).first():
                raise AlreadyExists("tenant", tenant.name)
            conn.execute(
                tenants.insert().values(
                    name=tenant.name,
                    weight=tenant.weight,
                    max_concurrency=tenant.max_concurrency,
                    max_jobs=tenant.max_jobs,
                    max_payload_bytes=tenant.max_payload_bytes,
                    requests_per_second=tenant.requests_per_second,
                    max_pending_manual_runs=tenant.max_pending_manual_runs,
                    state="active",
                    pause_reason="",
                    created_at=now_us,
                    updated_at=now_us,
                    version=1,
                )
            )
            quota.redeal(conn, self.caps, tenant.name)
            quota.redeal(conn, self.caps, tenant.name, rows=quota.MANUAL_RUNS)
            issued = _insert_key(conn, tenant.name, key_description, now_us)
            return _get_tenant(conn, tenant.name), issued

        return await self._tx(fn)

    async def get(self, name: str) -> Tenant:
        """The tenant, or NotFound."""
        return await self._tx(lambda conn: _get_tenant(conn, name))

    async def get_counted(self, name: str) -> tuple[Tenant, int, int]:
        """The tenant, its job count (:meth:`job_count`) and its manual runs
        waiting to start (what its ``max_pending_manual_runs`` slots count),
        read in one transaction: the counts are of the tenant as returned.
        NotFound."""

        def fn(conn: Connection) -> tuple[Tenant, int, int]:
            tenant = _get_tenant(conn, name)
            return tenant, quota.job_count(conn, name), quota.counted(conn, name, rows=quota.MANUAL_RUNS)

        return await self._tx(fn)

    async def job_count(self, name: str) -> int:
        """How many jobs the tenant has (what its quota slots count); 0 for
        an unknown tenant."""
        return await self._tx(lambda conn: quota.job_count(conn, name))

    async def list(self, *, after: str = "", limit: int = 100) -> list[Tenant]:
        """Up to ``limit`` tenants with names after ``after``, by name."""

        def fn(conn: Connection) -> list[Tenant]:
            query = sa.select(tenants).where(tenants.c.name > after).order_by(tenants.c.name).limit(limit)
            return [_tenant_from_row(row) for row in conn.execute(query)]

        return await self._tx(fn)

    async def update(self, name: str, *, expected_version: int = 0, **changes) -> Tenant:
        """Change settings (weight, max_concurrency, max_jobs, max_payload_bytes,
        requests_per_second, max_pending_manual_runs, state, pause_reason).
        ``expected_version`` 0 skips the optimistic check; otherwise a stale
        one raises VersionConflict. A changed quota counted in slots is
        dealt again in the same transaction."""
        allowed = {"weight", "max_concurrency", "max_jobs", "max_payload_bytes", "requests_per_second",
                   "max_pending_manual_runs", "state", "pause_reason"}
        unknown = set(changes) - allowed
        if unknown:
            raise ValueError(f"not tenant settings: {sorted(unknown)}")
        if "pause_reason" in changes:
            changes["pause_reason"] = escaped_text(changes["pause_reason"])
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> Tenant:
            current = _get_tenant(conn, name)
            if expected_version and expected_version != current.version:
                raise VersionConflict(f"tenant {name!r}", expected_version, current.version)
            if all(getattr(current, field) == value for field, value in changes.items()):
                return current
            conn.execute(
                tenants.update()
                .where(tenants.c.name == name)
                .values(**changes, updated_at=now_us, version=current.version + 1)
            )
            for rows in (quota.JOBS, quota.MANUAL_RUNS):
                if rows.name in changes and changes[rows.name] != getattr(current, rows.name):
                    quota.redeal(conn, self.caps, name, rows=rows)
            return replace(current, **changes, updated_at=from_us(now_us), version=current.version + 1)

        return await self._tx(fn)

    async def pause(self, name: str, reason: str = "") -> Tenant:
        """Set the tenant ``paused`` with ``reason``; NotFound when unknown.

        Only the tenant's row changes, whatever its number of jobs: while it
        is paused the dispatcher's claims skip its occurrences as they come
        due (``tenant_paused`` ranges, no execution) and the hand-out holds
        back its executions already created. Pausing a paused tenant again
        with the same reason changes nothing (not even its version); with
        another reason it replaces the reason.
        """
        return await self.update(name, state="paused", pause_reason=reason)

    async def resume(self, name: str) -> Tenant:
        """Set the tenant ``active`` again and clear its reason; NotFound when
        unknown, unchanged when not paused. Nothing else is written: the next
        claims plan its jobs from their cursors, which the paused claims kept
        moving, so they continue at their next run not yet skipped."""
        return await self.update(name, state="active", pause_reason="")

    async def issue_key(self, tenant: str, description: str = "") -> IssuedKey:
        """A new API key for an existing tenant (NotFound otherwise)."""
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> IssuedKey:
            _get_tenant(conn, tenant)
            return _insert_key(conn, tenant, description, now_us)

        return await self._tx(fn)

    async def rotate_key(self, key_id: str, grace: timedelta) -> tuple[IssuedKey, datetime]:
        """Issue a replacement for ``key_id``; the old key expires after ``grace``.

        Returns the new key and the old key's expiry. NotFound for an unknown
        or already expired key.
        """
        now = self.clock.now()
        now_us, expires_us = to_us(now), to_us(now + grace)

        def fn(conn: Connection) -> tuple[IssuedKey, datetime]:
            old = self._live_key(conn, key_id, now_us)
            expiry = expires_us if old.expires_at is None else min(expires_us, to_us(old.expires_at))
            conn.execute(api_keys.update().where(api_keys.c.id == key_id).values(expires_at=expiry))
            return _insert_key(conn, old.tenant, old.description, now_us), from_us(expiry)

        return await self._tx(fn)

    async def revoke_key(self, key_id: str) -> ApiKey:
        """Make ``key_id`` stop working now; the key as it was (its tenant).
        NotFound when unknown or expired."""
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> ApiKey:
            key = self._live_key(conn, key_id, now_us)
            conn.execute(api_keys.update().where(api_keys.c.id == key_id).values(expires_at=now_us))
            return key

        return await self._tx(fn)

    async def list_keys(
        self, tenant: str, *, after: tuple[datetime, str] | None = None, limit: int = KEY_LIST_LIMIT
    ) -> list[ApiKey]:
        """The tenant's keys that have not expired, newest first (then by
        id): the ``limit`` (at most :data:`KEY_LIST_LIMIT`) after ``after`` =
        (created_at, id) of the last key of the previous page. NotFound
        when the tenant does not exist."""
        now_us = to_us(self.clock.now())
        start = None if after is None else (to_us(after[0]), after[1])

        def fn(conn: Connection) -> list[ApiKey]:
            _get_tenant(conn, tenant)
            query = (
                sa.select(api_keys)
                .where(api_keys.c.tenant == tenant)
                .where(sa.or_(api_keys.c.expires_at.is_(None), api_keys.c.expires_at > now_us))
            )
            query = newest_first(query, api_keys.c.created_at, api_keys.c.id, start).limit(min(limit, KEY_LIST_LIMIT))
            return [_key_from_row(row) for row in conn.execute(query)]

        return await self._tx(fn)

    async def verify_key(self, secret: str) -> Tenant | None:
        """The tenant a live API key belongs to, or None for anything else."""
        verified = await self.verify_key_until(secret)
        return None if verified is None else verified[0]

    async def verify_key_until(self, secret: str) -> tuple[Tenant, datetime | None] | None:
        """The tenant a live API key belongs to and when the key stops working
        (None: until revoked or rotated), or None for anything else. A caller
        caching the answer must not cache it past that instant: a rotated
        key's grace ends there."""
        key_id = tokens.parse_secret(secret, tokens.API_KEY_PREFIX)
        if key_id is None:
            return None
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> tuple[Tenant, datetime | None] | None:
            row = conn.execute(sa.select(api_keys).where(api_keys.c.id == key_id)).first()
            if row is None or not tokens.secret_matches(secret, row.secret_hash):
                return None
            if row.expires_at is not None and row.expires_at <= now_us:
                return None
            return _get_tenant(conn, row.tenant), None if row.expires_at is None else from_us(row.expires_at)

        return await self._tx(fn)

    @staticmethod
    def _live_key(conn: Connection, key_id: str, now_us: int) -> ApiKey:
        row = conn.execute(sa.select(api_keys).where(api_keys.c.id == key_id)).first()
        if row is None or (row.expires_at is not None and row.expires_at <= now_us):
            raise NotFound("api key", key_id)
        return _key_from_row(row)
