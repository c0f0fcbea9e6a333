"""Worker credentials: which tenants' and handlers' work a worker may receive."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..auth import tokens
from ..errors import NotFound
from .base import SqlStore, newest_first, one_of
from .peertext import escaped_text
from .tables import tenants, worker_credentials

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
LIVE_BATCH = 1000
"""Credential ids per ``IN`` list of :meth:`WorkerCredentialStore.live`."""
LIST_LIMIT = 1000
"""The most rows one page of :meth:`WorkerCredentialStore.list` covers."""


@dataclass(frozen=True)
class WorkerCredential:
    id: str
    tenants: tuple[str, ...]
    handlers: tuple[str, ...]
    """Empty means any handler."""
    http: bool
    description: str
    created_at: datetime

    def may_serve(self, tenant: str, handler: str | None) -> bool:
        """True when this credential may receive ``tenant``'s execution of
        ``handler`` (None for an HTTP target)."""
        if tenant not in self.tenants:
            return False
        if handler is None:
            return self.http
        return not self.handlers or handler in self.handlers


@dataclass(frozen=True)
class CredentialPage:
    credentials: list[WorkerCredential]
    """Those of the page's rows that serve the tenant asked for."""
    next_key: tuple[datetime, str] | None
    """(created_at, id) of the page's last row, kept or not, when more
    follow it; None for the last page."""


@dataclass(frozen=True)
class IssuedCredential:
    credential: WorkerCredential
    secret: str


def _from_row(row) -> WorkerCredential:
    return WorkerCredential(
        id=row.id,
        tenants=tuple(json.loads(row.tenants)),
        handlers=tuple(json.loads(row.handlers)),
        http=bool(row.http),
        description=escaped_text(row.description),
        created_at=from_us(row.created_at),
    )


class WorkerCredentialStore(SqlStore):
    """Issue, verify, list and revoke worker credentials (hashed at rest)."""

    async def issue(
        self, tenant_names: list[str], handlers: list[str], http: bool, description: str = ""
    ) -> IssuedCredential:
        """A new credential serving ``tenant_names`` (each must exist: NotFound)."""
        now_us = to_us(self.clock.now())
        description = escaped_text(description)  # as the API would have it: kept unless it holds a control
        wanted = sorted(set(tenant_names))
        new = tokens.new_secret(tokens.WORKER_CREDENTIAL_PREFIX)

        def fn(conn: Connection) -> IssuedCredential:
            found = set(conn.scalars(sa.select(tenants.c.name).where(one_of(self.caps, tenants.c.name, wanted))))
            for name in wanted:
                if name not in found:
                    raise NotFound("tenant", name)
            values = dict(
                id=new.id,
                secret_hash=new.secret_hash,
                tenants=json.dumps(wanted),
                handlers=json.dumps(sorted(set(handlers))),
                http=http,
                description=description,
                created_at=now_us,
                revoked_at=None,
            )
            conn.execute(worker_credentials.insert().values(**values))
            return IssuedCredential(
                WorkerCredential(new.id, tuple(wanted), tuple(sorted(set(handlers))), http, description, from_us(now_us)),
                new.secret,
            )

        return await self._tx(fn)

    async def verify(self, secret: str) -> WorkerCredential | None:
        """The credential for a live secret, or None."""
        cred_id = tokens.parse_secret(secret, tokens.WORKER_CREDENTIAL_PREFIX)
        if cred_id is None:
            return None

        def fn(conn: Connection) -> WorkerCredential | None:
            row = conn.execute(sa.select(worker_credentials).where(worker_credentials.c.id == cred_id)).first()
            if row is None or row.revoked_at is not None or not tokens.secret_matches(secret, row.secret_hash):
                return None
            return _from_row(row)

        return await self._tx(fn)

    async def live(self, cred_ids: Collection[str]) -> set[str]:
        """Of ``cred_ids``, those that exist and are not revoked: one
        transaction, whatever their number (``IN`` lists of at most
        :data:`LIVE_BATCH` ids on the primary key). A string that cannot be
        an id (a NUL, too long) is not live and is not sent to the store."""
        wanted = sorted({ident for ident in cred_ids if _ID.fullmatch(ident)})
        if not wanted:
            return set()

        def fn(conn: Connection) -> set[str]:
            found: set[str] = set()
            for start in range(0, len(wanted), LIVE_BATCH):
                found.update(
                    conn.scalars(
                        sa.select(worker_credentials.c.id).where(
                            one_of(self.caps, worker_credentials.c.id, wanted[start : start + LIVE_BATCH]),
                            worker_credentials.c.revoked_at.is_(None),
                        )
                    )
                )
            return found

        return await self._tx(fn, idempotent=True)

    async def revoke(self, cred_id: str) -> WorkerCredential:
        """Revoke now; the credential revoked (its tenants: what the servers
        are told). NotFound when unknown or already revoked."""
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> WorkerCredential:
            row = conn.execute(
                worker_credentials.update()
                .where(worker_credentials.c.id == cred_id, worker_credentials.c.revoked_at.is_(None))
                .values(revoked_at=now_us)
                .returning(*worker_credentials.c)
            ).first()
            if row is None:
                raise NotFound("worker credential", cred_id)
            return _from_row(row)

        return await self._tx(fn)

    async def list(
        self, tenant: str = "", *, after: tuple[datetime, str] | None = None, limit: int = LIST_LIMIT
    ) -> CredentialPage:
        """A page of live credentials, newest first (then by id): the
        ``limit`` rows (at most :data:`LIST_LIMIT`) after ``after`` =
        (created_at, id), the previous page's ``next_key`` (None: the
        first page), read with one more to tell whether another follows.
        Only those serving ``tenant`` when given, chosen by the statement
        (the newest of every tenant's, then the tenant's among them, once
        left a tenant's older ones out of every answer); a row the statement
        picks that does not serve ``tenant`` exactly is read and left out,
        so a page may hold fewer than ``limit`` and still have a next one."""
        size = max(1, min(limit, LIST_LIMIT))
        start = None if after is None else (to_us(after[0]), after[1])

        def fn(conn: Connection) -> CredentialPage:
            query = sa.select(worker_credentials).where(worker_credentials.c.revoked_at.is_(None))
            if tenant:
                # Its name as the JSON list holds it, found case-sensitively
                # (SQLite's LIKE is not); the exact check follows.
                position = sa.func.instr if self.caps.is_sqlite else sa.func.strpos
                query = query.where(position(worker_credentials.c.tenants, json.dumps(tenant)) > 0)
            query = newest_first(query, worker_credentials.c.created_at, worker_credentials.c.id, start)
            read = [_from_row(row) for row in conn.execute(query.limit(size + 1))]
            page = read[:size]
            more = (page[-1].created_at, page[-1].id) if len(read) > size else None
            return CredentialPage([c for c in page if not tenant or tenant in c.tenants], more)

        return await self._tx(fn)
