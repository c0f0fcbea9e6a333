"""Reads for operators, across tenants: queue depths for ClusterStatus and
the execution search behind SearchExecutions. Reads only, each a bounded
range scan on an index; none takes a lock a dispatcher or gateway waits on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from .base import SqlStore, one_of
from .history import EXECUTION_STATUSES, ExecutionRecord, _attempts_of, execution_from_row
from .tables import executions
from .ended_walk import newest_ended
from .session_walk import running_rows
from .timeline import TERMINAL, not_ahead, scans, shown

READY_COUNT_CAP = 100_000
"""A tenant's ready executions are counted up to this many (a deeper queue
reads as this figure), so one tenant's flood costs a bounded scan."""
SEARCH_SCAN = 10_000
"""At most this many executions of a status group are examined for one page
of a search that wants only part of what the group's index range holds (a
status filter; a tenant's executions not started); a page that ends there
may hold fewer than asked, with a token to continue."""

# The tenants with any scheduled execution, by a loose index scan of
# executions_tenant_ready (one descent per tenant); for each, its ready
# executions counted up to the cap (a range scan on the same index) and its
# oldest ready instant (one more descent).
_QUEUES = sa.text(
    "WITH RECURSIVE present (tenant) AS ("
    "SELECT (SELECT e.tenant FROM executions AS e WHERE e.status = 'scheduled' ORDER BY e.tenant LIMIT 1) "
    "UNION ALL "
    "SELECT (SELECT e.tenant FROM executions AS e WHERE e.status = 'scheduled' AND e.tenant > p.tenant "
    "ORDER BY e.tenant LIMIT 1) FROM present AS p WHERE p.tenant IS NOT NULL"
    "), depth (tenant, ready, oldest) AS ("
    "SELECT p.tenant, "
    "(SELECT count(*) FROM (SELECT 1 AS one FROM executions AS e WHERE e.status = 'scheduled' "
    "AND e.tenant = p.tenant AND e.ready_at <= :now LIMIT :cap) AS r), "
    "(SELECT e.ready_at FROM executions AS e WHERE e.status = 'scheduled' AND e.tenant = p.tenant "
    "ORDER BY e.ready_at LIMIT 1) "
    "FROM present AS p WHERE p.tenant IS NOT NULL"
    ") "
    "SELECT tenant, ready, oldest FROM depth ORDER BY ready DESC, tenant LIMIT :top"
)
# (Tenants with nothing ready sort last and are dropped afterwards: a WHERE
# on ``ready`` would make PostgreSQL, which inlines the CTE, count twice.)


@dataclass(frozen=True)
class TenantQueue:
    tenant: str
    ready: int
    """Scheduled with ``ready_at`` at or before now (at most :data:`READY_COUNT_CAP`)."""
    running: int
    """Running, a row started ahead of a send instant after ``now`` left out (not running yet to any reader)."""
    oldest_ready_at: datetime


@dataclass(frozen=True)
class SearchPage:
    executions: tuple[ExecutionRecord, ...]
    """Newest nominal instant first (ties by id, descending), each with its attempts."""
    next_key: tuple[datetime, str] | None
    """(nominal instant, id) the next page continues before; None on the last page."""


class OperationsStore(SqlStore):
    """Cross-tenant reads for the Admin service. Every method is one transaction."""

    async def queues(self, now: datetime, top: int) -> list[TenantQueue]:
        """The ``top`` tenants with the most ready executions (ties by
        name), with how many of theirs run and their oldest ready instant.

        Bounded: one descent of ``executions_tenant_ready`` per tenant with
        scheduled work, a range scan of at most :data:`READY_COUNT_CAP`
        entries per tenant, and a count of the top tenants' running
        executions, each session's range of them in ``executions_running``
        (:func:`.session_walk.running_rows`). ``now`` is the caller's
        clock (one clock decides "ready", and "running": a row started ahead
        of a send instant after it is not counted, as readers show it not
        started)."""
        if top < 1:
            raise ValueError("top must be >= 1")
        now_us = to_us(now)

        def fn(conn: Connection) -> list[TenantQueue]:
            depths = [
                row for row in conn.execute(_QUEUES, {"now": now_us, "cap": READY_COUNT_CAP, "top": top}) if row.ready
            ]
            if not depths:
                return []
            names = [row.tenant for row in depths]
            held = running_rows(self.caps, [executions.c.tenant], one_of(self.caps, executions.c.tenant, names),
                                not_ahead(now_us))
            running = dict(conn.execute(sa.select(held.c.tenant, sa.func.count()).group_by(held.c.tenant)).all())
            return [
                TenantQueue(row.tenant, row.ready, running.get(row.tenant, 0), from_us(row.oldest)) for row in depths
            ]

        return await self._tx(fn, idempotent=True)

    async def search_executions(
        self,
        *,
        tenant: str = "",
        job_id: str = "",
        statuses: Iterable[str] = (),
        from_at: datetime | None = None,
        to_at: datetime | None = None,
        before_key: tuple[datetime, str] | None = None,
        limit: int = 50,
        scan: int = SEARCH_SCAN,
    ) -> SearchPage:
        """One page of executions of any tenant, newest nominal instant first.

        - Optional filters: ``tenant``, ``job_id``, ``statuses`` (empty: all),
          nominal instant in [``from_at``, ``to_at``).
        - Paged by the key (nominal instant, id), descending; ``before_key``
          is the previous page's :attr:`SearchPage.next_key`.
        - One statement per status group the filter wants, merged (see
          :mod:`.timeline`): a backwards range scan from ``before_key`` (or
          ``to_at``) with a LIMIT on the group's index of the job or the
          tenant, or of all (``executions_not_started``; the ended ones of
          all tenant by tenant on ``executions_ended_tenant``, each tenant's
          newest merged: :func:`.ended_walk.newest_ended`); the running ones
          of the scope, sorted.
          A group of which the scan wants only part (a status filter; the
          tenant's executions not started, read from
          ``executions_not_started``) is examined ``scan`` executions at
          most: a page that reaches that bound without ``limit`` matches
          ends there, with a ``next_key`` to go on from.
        - Each execution with its attempts (one primary-key query per page).
        - Statuses as a reader at this store's clock sees them, the filter
          included (:func:`.timeline.shown`: a run started ahead of its send
          instant is ``scheduled`` until then).
        """
        if limit < 1 or scan < limit + 1:
            raise ValueError("limit must be >= 1 and scan > limit")
        wanted = frozenset(statuses)
        unknown = wanted - set(EXECUTION_STATUSES)
        if unknown:
            raise ValueError(f"unknown execution statuses {sorted(unknown)}")
        from_us_ = None if from_at is None else to_us(from_at)
        to_us_ = None if to_at is None else to_us(to_at)
        key = None if before_key is None else (to_us(before_key[0]), before_key[1])
        e = executions

        def fn(conn: Connection) -> SearchPage:
            now_us = to_us(self.clock.now())  # one reader's clock: for the filter and what is shown
            span = []
            if from_us_ is not None:
                span.append(e.c.nominal_at >= from_us_)
            if to_us_ is not None:
                span.append(e.c.nominal_at < to_us_)
            by_id, cuts = {}, []
            # Every index ends in (nominal_at, id): a row comparison is a range
            # bound, so a page deep inside a group of executions sharing one
            # instant (a million jobs at midnight) starts where the last one ended.
            for part in scans([e.c.id, e.c.nominal_at, e.c.status, e.c.tenant, e.c.handed_out_at], job_id=job_id,
                              tenant=tenant, statuses=wanted, now_us=now_us, where=span, before=key,
                              narrow=False, caps=self.caps):  # fmt: skip
                budget = scan if part.unfiltered else limit + 1
                if part.group == TERMINAL and not tenant and not job_id:  # no index of every tenant's (0037)
                    rows = newest_ended(conn, part.query, budget, key=lambda row: (row.nominal_at, row.id))
                else:
                    rows = conn.execute(part.query.limit(budget)).all()
                by_id.update((row.id, row) for row in rows)  # a job's retry waiting comes twice
                if len(rows) == budget:
                    cuts.append((rows[-1].nominal_at, rows[-1].id))
            # A group cut by its LIMIT was read down to its last row only: the
            # merge is exact down to the highest such cut, and ends there.
            floor = max(cuts, default=None)
            seen = sorted(
                (row for row in by_id.values() if floor is None or (row.nominal_at, row.id) >= floor),
                key=lambda row: (row.nominal_at, row.id), reverse=True,
            )  # fmt: skip
            matches = [
                row for row in seen
                if (not wanted or shown(row.status, row.handed_out_at, now_us) in wanted)
                and (not tenant or row.tenant == tenant)
            ]
            if len(matches) > limit:
                page, last = matches[:limit], matches[limit - 1]
            elif floor is not None:
                page, last = matches, seen[-1]
            else:
                page, last = matches, None
            if not page:
                return SearchPage((), None if last is None else (from_us(last.nominal_at), last.id))
            ids = [row.id for row in page]
            rows = {row.id: row for row in conn.execute(sa.select(e).where(one_of(self.caps, e.c.id, ids)))}
            found = _attempts_of(conn, [ident for ident in ids if ident in rows])
            records = tuple(
                execution_from_row(rows[ident], found[ident], now_us=now_us) for ident in ids if ident in rows
            )
            return SearchPage(records, None if last is None else (from_us(last.nominal_at), last.id))

        return await self._tx(fn, idempotent=True)
