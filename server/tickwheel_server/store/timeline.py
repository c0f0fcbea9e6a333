"""Executions newest nominal instant first, read one status group at a time.

No index on ``executions`` holds every status (migration 0014): a hand-out
moves thousands of rows a second from ``scheduled`` to ``running``, and every
index whose predicate a running row satisfies costs that UPDATE one insert
per row. So the statuses fall in four groups, each with its own indexes:

- :data:`TERMINAL` (ended): ``executions_ended (nominal_at, id)``,
  ``executions_ended_tenant (tenant, …)``, ``executions_ended_job (job_id, …)``;
- :data:`NOT_STARTED`: ``executions_not_started (nominal_at, id)`` and
  ``executions_not_started_job (job_id, …)``. No tenant index: one led by
  the tenant would hold the very rows of ``executions_tenant_ready``, and
  PostgreSQL was seen to plan a tenant's ready executions as a BitmapAnd of
  it with ``executions_scheduled`` (every ready entry read once per tenant). A
  tenant's executions not started are read from ``executions_not_started``
  with the tenant as a filter;
- :data:`ARMED_GROUP` (armed ahead of their instant, shown as
  ``scheduled``): ``executions_armed (owner, id)`` and
  ``executions_armed_job (job_id, nominal_at, id)``; few, like the running;
- :data:`RUNNING`: the indexes the running state needs anyway,
  ``executions_owner (owner)`` for all, ``executions_running_tenant
  (tenant)`` for a tenant's, ``executions_busy (job_id)`` for a job's.
  Running executions are at most as many as the workers' slots: a read
  takes all of its scope's and sorts them. ``executions_busy`` also holds
  the job's retries waiting (``scheduled``, attempt > 1), which the
  not-started group returns as well: a job's read states the index's own
  predicate and leaves them in (a ``status = 'running'`` beside it lets
  PostgreSQL AND the index with ``executions_owner`` read whole), and the
  merge keeps each execution once.

A read over several groups is one statement per group, each ordered by
``(nominal_at, id)`` descending under a LIMIT (a range scan that stops there
on the ended and not-started indexes), merged by the caller. Each statement
states its group's predicate as the indexes write it (``status IN (…)``
with literal values), so SQLite, PostgreSQL and CockroachDB each prove the
partial index usable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement, Select

from .isolation import status_in
from .tables import executions

TERMINAL = ("succeeded", "dead", "canceled")
"""Statuses of executions that ended."""
NOT_STARTED = ("scheduled", "waiting")
"""Statuses of executions that no worker holds: pause, update, delete and
CancelExecution move these to ``canceled`` at once."""
RUNNING = ("running",)
ARMED_GROUP = ("armed",)
"""Executions a server armed for their instant (:mod:`.arming`): read through
``executions_armed_job`` or, without a job, all of them (a few thousand at
most per server) with the scope as a condition. Readers show them as
``scheduled`` (:func:`shown`)."""
GROUPS = (TERMINAL, NOT_STARTED, RUNNING, ARMED_GROUP)
BUSY = ("running", "scheduled")
"""What ``executions_busy`` holds: running executions and retries waiting."""


def shown(status: str) -> str:
    """The status a reader sees: an armed execution is not started yet."""
    return "scheduled" if status == "armed" else status


def in_group(group: tuple[str, ...], *, by_job: bool = False, table=executions) -> list[ColumnElement]:
    """The conditions that put a statement on ``group``'s indexes. The
    running group of one job (``by_job``) is ``executions_busy``'s
    predicate: its rows are running or :data:`BUSY` retries waiting."""
    if group == RUNNING and by_job:
        retrying = sa.and_(status_in(table.c.status, "scheduled"), table.c.attempt > 1)
        return [sa.or_(status_in(table.c.status, "running"), retrying).self_group()]
    return [status_in(table.c.status, *group)]


@dataclass(frozen=True)
class GroupScan:
    """One status group's part of a read."""

    group: tuple[str, ...]
    query: Select
    """Ordered by ``(nominal_at, id)`` descending, without a LIMIT."""
    unfiltered: bool
    """The statement returns executions the read does not want (see
    :func:`scans`): the caller keeps those of the statuses and tenant asked for."""


def scans(
    columns: Sequence,
    *,
    job_id: str = "",
    tenant: str = "",
    statuses: Iterable[str] = (),
    where: Sequence[ColumnElement] = (),
    before: tuple[int, str] | None = None,
    narrow: bool = True,
) -> list[GroupScan]:
    """One statement per status group that ``statuses`` (empty: all) touch,
    selecting ``columns`` of the executions of ``job_id`` and/or ``tenant``
    (neither: all) that satisfy ``where``, strictly before the key
    ``before`` (nominal µs, id) if given. An execution may come from two of
    them (a job's retry waiting): merge by id.

    Some filters are not a range of the group's index: a status filter that
    takes only part of what the statement returns, and a tenant without a
    job for executions not started (they have no tenant index: see the
    module docstring). With ``narrow`` they are conditions of the statement
    (exact, but the scan may pass over any number of executions); without
    it they are left to the caller (:attr:`GroupScan.unfiltered`), so that
    a LIMIT bounds what the statement reads."""
    asked = frozenset(statuses)
    scope = []
    if job_id:
        scope.append(executions.c.job_id == job_id)
    if before is not None:
        # A row comparison is a range bound on every group's (…, nominal_at, id) index.
        scope.append(sa.tuple_(executions.c.nominal_at, executions.c.id) < sa.tuple_(*before))
    found = []
    for group in GROUPS:
        wanted = [status for status in group if not asked or shown(status) in asked]
        if not wanted:
            continue
        returned = BUSY if group == RUNNING and job_id else group
        conditions = [*scope, *in_group(group, by_job=bool(job_id)), *where]
        filters = []
        if asked and not asked.issuperset(shown(s) for s in returned):
            filters.append(status_in(executions.c.status, *(s for s in returned if shown(s) in asked)))
        if tenant:
            ranged = bool(job_id) or group != NOT_STARTED
            (conditions if ranged else filters).append(executions.c.tenant == tenant)
        if narrow:
            conditions += filters
        query = (
            sa.select(*columns)
            .where(*conditions)
            .order_by(executions.c.nominal_at.desc(), executions.c.id.desc())
        )
        found.append(GroupScan(group, query, unfiltered=bool(filters) and not narrow))
    return found


def newest(conn: Connection, group_scans: Iterable[GroupScan], limit: int) -> list:
    """The ``limit`` rows newest by ``(nominal_at, id)`` across the scans
    (whose columns include both, and which filter in SQL): each scan's first
    ``limit``, merged, each execution once."""
    rows = {row.id: row for scan in group_scans for row in conn.execute(scan.query.limit(limit))}
    return sorted(rows.values(), key=lambda row: (row.nominal_at, row.id), reverse=True)[:limit]
