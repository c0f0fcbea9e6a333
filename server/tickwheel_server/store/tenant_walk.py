"""Which tenants have scheduled work, for workers that may serve many
tenants: a bounded loose index scan with a rotating start (docs/architecture.md,
"Fair share when armed", "Finding the tenants with work").

A hand-out round and an arming pass first ask which of their workers'
tenants have work in their window. For a short tenant list that is one
probe of ``executions_tenant_ready`` per tenant named. A worker group that
may serve thousands of tenants would pay a probe for each of them every pass,
whether they have work or not, so instead :meth:`TenantWalk.visit` skips
from tenant to tenant along ``executions_tenant_ready`` (a recursive CTE,
each step one descent to the next tenant that has any ``scheduled`` row),
reading for each tenant it passes its first ready instant after ``since``
(one more descent) and its settings: a tenant with nothing scheduled costs
nothing, and a pass visits at most ``steps`` tenants whatever the count.

When a pass stops at its bound, the next one starts after the last tenant
it visited and wraps round to the first (a second statement at most), so
with more tenants with scheduled work than one pass visits, each is visited
within ``ceil(tenants / steps)`` passes: none is starved. The start is kept
per worker group (its :class:`.executions.Capability`) in memory, this
server's alone, as the fair-share passes are; the comparisons of names are
the database's, never Python's (collations differ). Statements both
PostgreSQL and CockroachDB run (and SQLite).

Tenants whose scheduled rows all lie outside the window (parked: retries
backing off, runs due later) are steps of that walk too, so with more of
them than a pass visits, a run that just became ready would be found only
once the rotation reached its tenant. So every pass first walks the
*ready side* (:meth:`TenantWalk.by_ready`): the distinct (ready
instant, tenant) pairs of the rows in the window, oldest first, along
``executions_scheduled_tenant (ready_at, tenant, partition)`` (migration
0030), each step two descents (the next pair's instant, its tenant), at most
:data:`READY_STEPS` a pass, from a rotating start as well. Parked rows are
outside its range, so they cost it nothing; a tenant's burst at one
instant is one step. When that walk covers the whole window (it began at
the window's start and reached its end) it has seen every tenant with work
in it, and the tenant walk is not run. Only when more pairs are ready than
it visits (a backlog spread over many instants) does the pass also run the
tenant walk, which then keeps any tenant from waiting behind another's
backlog longer than its rotation.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Hashable
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

WALK_ABOVE = 64
"""A worker group that may serve more tenants than this finds those with
work by the walk instead of one probe per tenant named."""

WALK_STEPS = 1024
"""Tenants with scheduled work one pass visits at most (two descents each)."""

READY_STEPS = 64
"""(Ready instant, tenant) pairs in the window one pass's ready-side walk visits at most (two descents each)."""

_MAX_STARTS = 1024
"""Worker groups whose start is kept; beyond, they are forgotten (the next pass starts at the first tenant)."""


class Visited(NamedTuple):
    """A tenant a walk passed: it has a ``scheduled`` execution."""

    name: str
    weight: int | None
    """None: the tenant is paused (or its row is gone)."""
    max_concurrency: int | None
    first: int | None
    """Its earliest ``ready_at`` after the walk's ``since`` (its oldest without one); None: none."""


@functools.lru_cache(maxsize=None)
def _statement(after: bool, upto: bool, since: bool) -> sa.TextClause:
    start = "AND e.tenant > :after " if after else ""
    stop = "AND w.tenant < :upto " if upto else ""
    window = "AND e.ready_at > :since " if since else ""
    return sa.text(
        "WITH RECURSIVE walk (tenant, n) AS ("
        f"SELECT (SELECT e.tenant FROM executions AS e WHERE e.status = 'scheduled' {start}"
        "ORDER BY e.tenant LIMIT 1), 1 "
        "UNION ALL "
        "SELECT (SELECT e.tenant FROM executions AS e WHERE e.status = 'scheduled' AND e.tenant > w.tenant "
        "ORDER BY e.tenant LIMIT 1), w.n + 1 "
        f"FROM walk AS w WHERE w.tenant IS NOT NULL AND w.n < :steps {stop}"
        ") "
        # A tenant's settings (by primary key: a join may scan all tenants) only if it has work;
        # besides those, only the last tenant visited comes back (where the next walk starts).
        "SELECT v.tenant, v.n, v.first, "
        "CASE WHEN v.first <= :until THEN (SELECT t.weight FROM tenants AS t WHERE t.name = v.tenant "
        "AND t.state <> 'paused') END AS weight, "
        "CASE WHEN v.first <= :until THEN (SELECT t.max_concurrency FROM tenants AS t WHERE t.name = v.tenant) "
        "END AS max_concurrency "
        "FROM (SELECT w.tenant, w.n, (SELECT e.ready_at FROM executions AS e WHERE e.status = 'scheduled' "
        f"AND e.tenant = w.tenant {window}ORDER BY e.ready_at LIMIT 1) AS first "
        f"FROM walk AS w {'WHERE w.tenant IS NULL OR w.tenant <= :upto ' if upto else ''}"
        # A LIMIT (every row: the steps and the end): computed once, not inlined into each use of ``first``.
        "LIMIT :rows) AS v "
        # The end (a NULL tenant) comes back too: it tells how many were visited.
        "WHERE v.first <= :until OR v.n = :steps OR v.tenant IS NULL "
        "ORDER BY v.n"
    )


@functools.lru_cache(maxsize=None)
def _ready_statement(after: bool, since: bool) -> sa.TextClause:
    window = "e.status = 'scheduled' AND e.ready_at <= :until " + ("AND e.ready_at > :since " if since else "")

    def following(column: str, bound: str) -> str:
        # The next entry of executions_scheduled_tenant in the window after ``bound`` (one descent).
        return (f"(SELECT e.{column} FROM executions AS e WHERE {window}{bound}"
                "ORDER BY e.ready_at, e.tenant LIMIT 1)")

    start = "AND (e.ready_at, e.tenant) > (:after_at, :after_tenant) " if after else ""
    step = "AND (e.ready_at, e.tenant) > (w.r, w.t) "
    return sa.text(
        "WITH RECURSIVE ready (r, t, n) AS ("
        f"SELECT {following('ready_at', start)}, {following('tenant', start)}, 1 "
        "UNION ALL "
        f"SELECT {following('ready_at', step)}, {following('tenant', step)}, w.n + 1 "
        "FROM ready AS w WHERE w.r IS NOT NULL AND w.n < :steps"
        ") "
        # Each tenant passed once, with its settings (by primary key) and its earliest instant passed...
        "SELECT d.t, d.r, 0 AS n, "
        "(SELECT tw.weight FROM tenants AS tw WHERE tw.name = d.t AND tw.state <> 'paused') AS weight, "
        "(SELECT tm.max_concurrency FROM tenants AS tm WHERE tm.name = d.t) AS max_concurrency "
        "FROM (SELECT w.t, MIN(w.r) AS r FROM ready AS w WHERE w.t IS NOT NULL GROUP BY w.t) AS d "
        "UNION ALL "
        # ... and the last pair (where the next walk starts) or the end (a NULL instant).
        "SELECT w.t, w.r, w.n, NULL, NULL FROM ready AS w WHERE w.r IS NULL OR w.n = :steps"
    )


class TenantWalk:
    """One store's walks: their bounds and, per worker group, where the next ones start (thread-safe)."""

    def __init__(self, above: int = WALK_ABOVE, steps: int = WALK_STEPS, ready_steps: int = READY_STEPS) -> None:
        if steps < 1 or ready_steps < 1:
            raise ValueError("a walk visits at least one tenant")
        self.above = above
        self.steps = steps
        self.ready_steps = ready_steps
        self._starts: dict[Hashable, str] = {}
        self._ready_starts: dict[Hashable, tuple[int, str]] = {}
        self._lock = threading.Lock()

    def applies(self, named: int) -> bool:
        """Whether a group naming ``named`` tenants walks rather than probes each."""
        return named > self.above

    def visit(self, conn: Connection, group: Hashable, until: int, since: int | None = None) -> list[Visited]:
        """The tenants with an execution ``scheduled`` and ready after
        ``since`` (if given) and by ``until``: every one of them when the
        ready side's walk covers the window; otherwise those it passed
        (up to :attr:`ready_steps` pairs) and those among up to
        :attr:`steps` tenants with any scheduled execution, visited in the
        database's order of names from after where ``group``'s last walk
        stopped, wrapping round to the first."""
        ready, whole = self.by_ready(conn, group, until, since)
        found: dict[str, Visited] = {}
        for t in ready if whole else self.by_tenant(conn, group, until, since) + ready:
            known = found.get(t.name)
            if known is None or (known.first is not None and t.first < known.first):
                found[t.name] = t
        return [found[name] for name in sorted(found)]

    def by_ready(
        self, conn: Connection, group: Hashable, until: int, since: int | None,
    ) -> tuple[list[Visited], bool]:
        """The tenants of up to :attr:`ready_steps` (ready instant, tenant)
        pairs in the window, from after where ``group``'s last such walk
        stopped, wrapping round to the window's start; and whether they are
        all the window holds (one statement walked it from its start to its end)."""
        with self._lock:
            after = self._ready_starts.get(group)
        found, cut, visited = self._run_ready(conn, after, self.ready_steps, since, until)
        whole = cut is None and after is None
        if cut is None and after is not None and visited < self.ready_steps:
            # The end reached: round again from the window's start (pairs seen twice are harmless).
            wrapped, cut, _visited = self._run_ready(conn, None, self.ready_steps - visited, since, until)
            found += wrapped
            whole = cut is None
        with self._lock:
            if cut is None:
                self._ready_starts.pop(group, None)
            else:
                if len(self._ready_starts) >= _MAX_STARTS and group not in self._ready_starts:
                    self._ready_starts.clear()
                self._ready_starts[group] = cut
        return found, whole

    def _run_ready(
        self, conn: Connection, after: tuple[int, str] | None, steps: int, since: int | None, until: int,
    ) -> tuple[list[Visited], tuple[int, str] | None, int]:
        """One statement: the tenants it passed (with their settings and
        earliest instant passed), the last pair if it stopped at ``steps``
        (else None: the end reached), and how many pairs it visited."""
        parameters: dict = {"steps": steps, "until": until}
        if after is not None:
            parameters["after_at"], parameters["after_tenant"] = after
        if since is not None:
            parameters["since"] = since
        rows = conn.execute(_ready_statement(after is not None, since is not None), parameters).all()
        found, cut, visited = [], None, steps
        for tenant, at, n, weight, max_concurrency in rows:
            if n == 0:
                found.append(Visited(tenant, weight, max_concurrency, at))
            elif at is None:
                visited = n - 1
            else:
                cut = (at, tenant)
        return found, cut, visited

    def by_tenant(self, conn: Connection, group: Hashable, until: int, since: int | None) -> list[Visited]:
        """The tenants with work in the window among up to :attr:`steps`
        tenants with any scheduled execution, from after where ``group``'s
        last tenant walk stopped, wrapping round to the first."""
        with self._lock:
            after = self._starts.get(group)
        rows, cut, visited = self._run(conn, after, None, self.steps, since, until)
        if cut is None and after is not None:
            # The end reached: round again from the first, up to where this walk began.
            wrapped, cut, _visited = self._run(conn, None, after, self.steps - visited, since, until)
            rows += wrapped
        with self._lock:
            if cut is None:
                self._starts.pop(group, None)  # every tenant visited: the next walk starts at the first
            else:
                if len(self._starts) >= _MAX_STARTS and group not in self._starts:
                    self._starts.clear()
                self._starts[group] = cut
        return [row for row in rows if row.first is not None and row.first <= until]

    def _run(
        self, conn: Connection, after: str | None, upto: str | None, steps: int, since: int | None, until: int,
    ) -> tuple[list[Visited], str | None, int]:
        """One statement: the tenants it visited with work, the last it
        visited if it stopped at ``steps`` (else None), and how many it visited."""
        if steps <= 0:
            return [], None, 0
        parameters: dict = {"steps": steps, "rows": steps + 1, "until": until}
        if after is not None:
            parameters["after"] = after
        if upto is not None:
            parameters["upto"] = upto
        if since is not None:
            parameters["since"] = since
        statement = _statement(after is not None, upto is not None, since is not None)
        rows = conn.execute(statement, parameters).all()
        visited = steps
        cut = None
        if rows and rows[-1][0] is None:
            visited = rows[-1][1] - 1
        elif rows and rows[-1][1] == steps:
            cut = rows[-1][0]
        found = [Visited(tenant, weight, max_concurrency, first)
                 for tenant, _n, first, weight, max_concurrency in rows if tenant is not None]
        return found, cut, visited
