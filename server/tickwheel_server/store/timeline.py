"""Executions newest nominal instant first, read one status group at a time.

No index on ``executions`` holds every status (migration 0014): a hand-out
moves thousands of rows a second from ``scheduled`` to ``running``, and every
index whose predicate a running row satisfies costs that UPDATE one insert
per row. So the statuses fall in four groups, each with its own indexes:

- :data:`TERMINAL` (ended): ``executions_ended_tenant (tenant, nominal_at,
  id)``, ``executions_ended_job (job_id, …)``. None of every tenant's
  (migration 0037): a read of every tenant's goes tenant by tenant
  (:mod:`.ended_walk`), the statement :func:`scans` returns narrowed to each;
- :data:`NOT_STARTED`: ``executions_not_started (nominal_at, id)`` and
  ``executions_not_started_job (job_id, …)``. No tenant index: one led by
  the tenant would hold the very rows of ``executions_tenant_ready``, and
  PostgreSQL was seen to plan a tenant's ready executions as a BitmapAnd of
  it with ``executions_scheduled`` (every ready entry read once per tenant; since
  migration 0030 ``executions_scheduled_tenant``). A
  tenant's executions not started are read from ``executions_not_started``
  with the tenant as a filter;
- :data:`ARMED_GROUP` (armed ahead of their instant, shown as
  ``scheduled``): ``executions_armed (owner, id)`` and
  ``executions_armed_job (job_id, nominal_at, id)``; few, like the running;
- :data:`RUNNING`: the indexes the running state needs anyway,
  ``executions_running (owner, tenant, worker_id)`` (migration 0040) for
  all and for a tenant's (each session's range of the tenant, the
  sessions walked a probe each: :func:`.session_walk.running_rows`),
  ``executions_busy (job_id)`` for a job's.
  Running executions are at most as many as the workers' slots: a read
  takes all of its scope's and sorts them. ``executions_busy`` also holds
  the job's retries waiting (``scheduled``, attempt > 1), which the
  not-started group returns as well: a job's read states the index's own
  predicate and leaves them in (a ``status = 'running'`` beside it lets
  PostgreSQL AND the index with ``executions_running`` read whole), and the
  merge keeps each execution once.

A ``running`` row may have been started ahead of its instant (a server
starts armed rows up to a second before it sends them, stamping
``handed_out_at`` with the send instant: :mod:`.arming`). Until that
instant no worker has it, and a reader whose clock has not reached it sees
it as it was before it was started: ``scheduled`` (:func:`shown`,
:func:`ahead`). A status filter agrees with that: the running group's
statement states the instant condition (:func:`shown_in`), with the same
``now_us`` the caller then shows the rows with.

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
from .engine import Capabilities
from .session_walk import running_rows
from .tables import executions

TERMINAL = ("succeeded", "dead", "canceled")
"""Statuses of executions that ended."""
NOT_STARTED = ("scheduled", "waiting")
"""Statuses of executions that no worker holds: pause, update, delete and
CancelExecution move these to ``canceled`` at once."""
DELETED_REASON = "canceled: job deleted"
"""Why a deleted job's execution ended without running (again)."""
RUNNING = ("running",)
ARMED_GROUP = ("armed",)
"""Executions a server armed for their instant (:mod:`.arming`): read through
``executions_armed_job`` or, without a job, all of them (a few thousand at
most per server) with the scope as a condition. Readers show them as
``scheduled`` (:func:`shown`)."""
GROUPS = (TERMINAL, NOT_STARTED, RUNNING, ARMED_GROUP)
BUSY = ("running", "scheduled")
"""What ``executions_busy`` holds: running executions and retries waiting."""


def is_ahead(status: str, handed_out_at_us: int | None, now_us: int) -> bool:
    """A ``running`` row started ahead of its send instant, which a reader
    at ``now_us`` has not reached: no worker has it yet (:func:`ahead` in SQL)."""
    return status == "running" and handed_out_at_us is not None and handed_out_at_us > now_us


def shown(status: str, handed_out_at_us: int | None, now_us: int) -> str:
    """The status a reader at ``now_us`` sees: an armed execution, and a
    running one started ahead of an instant the reader has not reached, is
    not started yet (``scheduled``)."""
    if status == "armed" or is_ahead(status, handed_out_at_us, now_us):
        return "scheduled"
    return status


def may_show(statuses: Iterable[str]) -> frozenset[str]:
    """Every status a reader may see rows stored with ``statuses`` as (at any instant)."""
    seen = set()
    for status in statuses:
        seen.add("scheduled" if status == "armed" else status)
        if status == "running":
            seen.add("scheduled")  # started ahead
    return frozenset(seen)


def ahead(now_us: int, table=executions) -> ColumnElement:
    """SQL of :func:`is_ahead` for a row known to be ``running``."""
    return sa.and_(table.c.handed_out_at.is_not(None), table.c.handed_out_at > now_us).self_group()


def not_ahead(now_us: int, table=executions) -> ColumnElement:
    """SQL: a ``running`` row a reader at ``now_us`` sees running (its send instant reached)."""
    return sa.or_(table.c.handed_out_at.is_(None), table.c.handed_out_at <= now_us).self_group()


def shown_in(asked: Iterable[str], now_us: int, stored: Iterable[str], table=executions) -> ColumnElement:
    """SQL: the rows stored with one of ``stored`` that a reader at
    ``now_us`` sees (:func:`shown`) with one of the statuses ``asked``."""
    asked, stored = frozenset(asked), tuple(stored)
    parts = []
    plain = [status for status in stored if status != "running" and shown(status, None, now_us) in asked]
    if plain:
        parts.append(status_in(table.c.status, *plain))
    if "running" in stored and asked & {"running", "scheduled"}:
        running = [status_in(table.c.status, "running")]
        if "scheduled" not in asked:
            running.append(not_ahead(now_us, table))
        elif "running" not in asked:
            running.append(ahead(now_us, table))
        parts.append(sa.and_(*running))
    if not parts:
        return sa.false()
    return parts[0] if len(parts) == 1 else sa.or_(*parts).self_group()


def in_group(group: tuple[str, ...], *, by_job: bool = False, table=executions) -> list[ColumnElement]:
    """The conditions that put a statement on ``group``'s indexes. The
    running group of one job (``by_job``) is ``executions_busy``'s
    predicate: its rows are running or :data:`BUSY` retries waiting."""
    if group == RUNNING and by_job:
        retrying = sa.and_(status_in(table.c.status, "scheduled"), table.c.attempt > sa.literal_column("1"))
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
    now_us: int | None = None,
    where: Sequence[ColumnElement] = (),
    before: tuple[int, str] | None = None,
    narrow: bool = True,
    caps: Capabilities | None = None,
) -> list[GroupScan]:
    """One statement per status group that ``statuses`` (empty: all) touch,
    selecting ``columns`` of the executions of ``job_id`` and/or ``tenant``
    (neither: all) that satisfy ``where``, strictly before the key
    ``before`` (nominal µs, id) if given. An execution may come from two of
    them (a job's retry waiting): merge by id. ``statuses`` are what a
    reader at ``now_us`` sees (:func:`shown`; required with a filter), so
    a filter on ``running`` or ``scheduled`` states the send instant of a
    running row started ahead (:func:`shown_in`).

    Some filters are not a range of the group's index: a status filter that
    takes only part of what the statement returns, and a tenant without a
    job for executions not started (they have no tenant index: see the
    module docstring). With ``narrow`` they are conditions of the statement
    (exact, but the scan may pass over any number of executions); without
    it they are left to the caller (:attr:`GroupScan.unfiltered`), so that
    a LIMIT bounds what the statement reads. The running group's are
    always conditions: no index orders running rows, so its statement
    reads its scope's whole (a few, at most the workers' slots) whatever
    the filter, and the filter only shortens what it returns. A tenant's
    running rows without a job are read a session at a time
    (:func:`.session_walk.running_rows`), whose statement depends on the
    engine: ``caps`` is required then."""
    if tenant and not job_id and caps is None:
        raise ValueError("a tenant's executions without a job need the engine's caps")
    asked = frozenset(statuses)
    if asked and now_us is None:
        raise ValueError("a status filter needs the reader's now_us")
    scope = []
    if job_id:
        scope.append(executions.c.job_id == job_id)
    if before is not None:
        # A row comparison is a range bound on every group's (…, nominal_at, id) index.
        scope.append(sa.tuple_(executions.c.nominal_at, executions.c.id) < sa.tuple_(*before))
    found = []
    for group in GROUPS:
        returned = BUSY if group == RUNNING and job_id else group
        if asked and not asked & may_show(returned):
            continue
        conditions = [*scope, *in_group(group, by_job=bool(job_id)), *where]
        filters = []
        if asked and not asked.issuperset(may_show(returned)):
            filters.append(shown_in(asked, now_us, returned))
        if tenant:
            ranged = bool(job_id) or group != NOT_STARTED
            (conditions if ranged else filters).append(executions.c.tenant == tenant)
        exact = narrow or group == RUNNING
        if exact:
            conditions += filters
        if group == RUNNING and tenant and not job_id:
            query = _tenant_running(caps, columns, conditions)
        else:
            query = (
                sa.select(*columns)
                .where(*conditions)
                .order_by(executions.c.nominal_at.desc(), executions.c.id.desc())
            )
        found.append(GroupScan(group, query, unfiltered=bool(filters) and not exact))
    return found


def _tenant_running(caps: Capabilities, columns: Sequence, conditions: Sequence[ColumnElement]) -> Select:
    """``columns`` of the running rows meeting ``conditions`` (a tenant's),
    each session's range of ``executions_running (owner, tenant,
    worker_id)``, newest ``(nominal_at, id)`` first: selected from
    :func:`.session_walk.running_rows`, the sort keys carried under names
    of their own."""
    wanted = sa.select(*columns).selected_columns
    held = running_rows(caps, [*wanted, executions.c.nominal_at.label("sort_nominal_at"),
                               executions.c.id.label("sort_id")], *conditions)
    return sa.select(*(held.c[column.key] for column in wanted)).order_by(
        held.c.sort_nominal_at.desc(), held.c.sort_id.desc()
    )


def newest(conn: Connection, group_scans: Iterable[GroupScan], limit: int) -> list:
    """The ``limit`` rows newest by ``(nominal_at, id)`` across the scans
    (whose columns include both, and which filter in SQL): each scan's first
    ``limit``, merged, each execution once."""
    rows = {row.id: row for scan in group_scans for row in conn.execute(scan.query.limit(limit))}
    return sorted(rows.values(), key=lambda row: (row.nominal_at, row.id), reverse=True)[:limit]
