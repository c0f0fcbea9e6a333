"""A page of jobs with their cursors (ListJobs, SearchJobs): on
PostgreSQL, a tenant's page, filtered or not, is a statement whose plan
does not depend on the planner's row estimates and reads no row of
another tenant.

On PostgreSQL a page's plan was the planner's pick among paths whose
costs turn on two guesses, and both guesses go wrong in a store people
use:

- How many jobs the tenant has. A table never analysed (between a bulk
  load and autovacuum's analyse of it), or a tenant that grew since the
  last analyse, is estimated at a few hundred rows. With the page's LIMIT
  known (a custom plan: psycopg's first executions of a text on a
  connection, and PostgreSQL's first five of a prepared one) the planner
  then reads every job of the tenant after the cursor through a bitmap
  scan, joins each to its cursor, and sorts them for the first page: a
  tenant's first pages read all its jobs each, less as the cursor moved,
  until each pooled connection settled on the generic plan.
- Which tenant. The generic plan cannot tell tenants apart (it prices
  ``tenant = $n`` at one tenant's share of the table); with a few tenants
  it walks ``jobs_pkey`` in id order filtering the tenant and merge-joins
  the cursors, so a tenant with one job beside a large one read the whole
  table for its one page, with a state or name filter as without.

So, on PostgreSQL, a tenant's page is shaped so that every plan of it reads the
tenant's ``jobs_tenant (tenant, id)`` range in index order and each row's
cursor by its key, and stops at the page:

- the tenant is a range of one value (``tenant >= :t AND tenant <= :t``)
  ordered by ``(tenant, id)``: an equality would make the tenant a
  constant of the ordering, which ``jobs_pkey`` (id) then provides too;
  ordered by both columns only an index leading with the tenant provides
  the order, and the range bounds its scan to the tenant on both sides;
- the LIMIT is a scalar subquery, which the planner cannot read, so it
  prices every plan for a tenth of the rows it estimates whatever the
  page size (as a generic plan prices a bound LIMIT): a path that must
  read and sort everything before its first row never wins over the index
  scan that stops at the page;
- each cursor is a LATERAL subquery on ``job_cursors``' key with ``LIMIT
  1``, which PostgreSQL cannot flatten into a join, so it is a lookup by
  key per row read (a hash or merge join could read every cursor);
- it runs without JIT, as every statement of the server's PostgreSQL
  sessions does (:func:`.sessionoptions.postgres_options`, at connect time): priced
  for a tenth of a large tenant's rows, its plan passes
  ``jit_above_cost``, and compiling it took longer than reading the page.

Its filters (migration 0034 for the first):

- ``paused``: also ``jobs.state = 'paused'`` as a literal, the predicate
  of ``jobs_tenant_paused (tenant, id)``, which holds the paused jobs only
  and gives the same order: the page reads the tenant's paused jobs, not
  all its jobs until it finds a page of them. Only job writes (pause,
  resume, their batches) set or clear ``paused``, and they write both rows,
  so ``jobs.state`` is exact for it; the cursor's state is checked too;
- ``active``, ``completed``: the cursor's state (a claim completes a job
  in its cursor only, so ``jobs.state`` says nothing of it), tested on each
  row read. An index for them would be on the claim's hot table
  (``job_cursors``);
- a name prefix (``LIKE`` with its wildcards escaped): tested on each row
  read.

Those two read the tenant's jobs in order, a job and its cursor at a
time, until the page is full: a rare state or prefix over a large tenant
would read all its jobs. So such a page (:func:`_scanned_page`) reads at
most :data:`PAGE_SCAN` jobs, a subquery over the tenant's range with that
LIMIT, and when the page is short a second statement reads the same
range's index entries for the last of them: the page answers what it
found and where its scan stopped (:class:`JobPage`), and ListJobs and
SearchJobs a token from there. The API's page allows it
(``ListJobsResponse``: "at most this many jobs", an empty token only on
the last page; AIP-158): a client walks the tokens to the end as before,
some pages short or empty.

SearchJobs without a tenant, unfiltered, keeps the plain join: no tenant
to misjudge, it merge-joins the two primary keys from ``after_id``, a page
of each (fewer reads than a lookup per row), and stops at the page.
Filtered, it would read every tenant's jobs until a page of them matched
(a rare state or prefix: the whole table in one call), so it scans as a
tenant's filtered page does: at most :data:`PAGE_SCAN` jobs of
``jobs_pkey`` after ``after_id``, each cursor by key, and where the scan
stopped when that leaves it short. SQLite (no LATERAL) and CockroachDB
(its own optimizer, not run here) keep the plain join, and a filtered
page there (a tenant's or every tenant's, paused too: no
``jobs_tenant_paused`` is read) joins the same :data:`PAGE_SCAN` jobs to
their cursors by key, with the same short pages.

``tests/conformance/test_generic_plans.py`` checks the plans of a first
and a deep page over 100 000 jobs of several tenants, of a first page
with each filter, never analysed and analysed, custom and generic, and of
every tenant's filtered walk to a job at the end;
``tests/conformance/test_stores.py`` and
``tests/integration/test_server_api.py`` walk short pages.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .engine import Capabilities
from .jobrecords import JOB_WITH_CURSOR, RECORD_COLUMNS, JobRecord, job_records, record_columns
from .tables import job_cursors, jobs

PAGE_SCAN = 10_000
"""Jobs a filtered page reads at most, a tenant's or every tenant's, on
every engine (a tenant's page of paused jobs on PostgreSQL excepted: it
reads paused jobs only). A page the scan ends before it fills is short,
and says where the scan stopped (:class:`JobPage`)."""


@dataclass(frozen=True)
class JobPage:
    """A page of jobs, and, when a filtered page's scan stopped at
    :data:`PAGE_SCAN` jobs before it filled, the id of the last job it
    read: the next page starts after it (an empty ``scanned_to`` when
    the page is full or nothing follows)."""

    jobs: list[JobRecord]
    scanned_to: str = ""


def _cursor_of(job: sa.FromClause) -> sa.FromClause:
    """``job``'s cursor by its key, one lookup per job row (a LATERAL
    subquery with ``LIMIT 1``, never flattened into a join)."""
    return (
        sa.select(job_cursors.c.state, job_cursors.c.next_run_at, job_cursors.c.next_due_at, job_cursors.c.run_count,
                  job_cursors.c.next_nominal_at)
        .where(job_cursors.c.job_id == job.c.id)
        .limit(sa.literal_column("1"))
        .lateral("job_cursor")
    )  # fmt: skip


_CURSOR = _cursor_of(jobs)
"""A job's cursor by its key (:func:`_cursor_of`), beside ``jobs``."""

_PAGE_COLUMNS = record_columns(_CURSOR)
""":data:`.jobrecords.RECORD_COLUMNS`, the cursor's from :data:`_CURSOR`."""


def read_page(
    conn: Connection, caps: Capabilities, *, tenant: str, after_id: str, limit: int, state: str, name_prefix: str
) -> JobPage:
    """Up to ``limit`` jobs (of ``tenant``, or of every tenant when it is
    empty) with ids after ``after_id``, by id, each with its cursor; only
    those in ``state`` and whose name starts with ``name_prefix`` when
    given. The caller validates ``state`` and bounds ``limit`` (at most
    :data:`PAGE_SCAN`). A filtered page is :func:`_scanned_page` (a
    tenant's paused jobs on PostgreSQL excepted), a tenant's other page on
    PostgreSQL :func:`_fixed_page` (the module's docstring)."""
    if state or name_prefix:
        if caps.is_postgres and tenant and state == "paused":  # its own index: the paused jobs only
            return JobPage(job_records(conn.execute(_fixed_page(tenant, after_id, limit, state, name_prefix))))
        # Any other filtered page, of a tenant or of every tenant, on any
        # engine: at most PAGE_SCAN jobs read, and where the scan stopped
        # when that leaves the page short.
        lateral = caps.is_postgres
        found = job_records(conn.execute(_scanned_page(tenant, after_id, limit, state, name_prefix, lateral)))
        if len(found) >= limit:
            return JobPage(found)
        scanned = _scan_ids(tenant, after_id, lateral).limit(_scan_limit(lateral)).subquery("scanned")
        read, last = conn.execute(sa.select(sa.func.count(), sa.func.max(scanned.c.id))).one()
        return JobPage(found, last if read >= PAGE_SCAN else "")
    if caps.is_postgres and tenant:
        return JobPage(job_records(conn.execute(_fixed_page(tenant, after_id, limit, state, name_prefix))))
    # Every tenant's page unfiltered, or another engine's: the plain join,
    # the range on both sides (a merge join bound on one side only reads
    # the cursors' key from the first job on every page); it stops at the
    # page. Without a tenant no estimate misleads the planner.
    query = sa.select(*RECORD_COLUMNS).select_from(JOB_WITH_CURSOR).where(
        jobs.c.id > after_id, job_cursors.c.job_id > after_id
    )
    if tenant:
        query = query.where(jobs.c.tenant == tenant)
    return JobPage(job_records(conn.execute(query.order_by(jobs.c.id).limit(limit))))


_PAUSED = sa.text("jobs.state = 'paused'")
"""``jobs_tenant_paused``'s predicate word for word (migration 0034): a
literal, which a generic plan can prove the index's (a bound state it
cannot)."""


def _unread(name: str, value: int) -> sa.ScalarSelect:
    """``value`` as a scalar subquery, which the planner cannot read (a
    LIMIT of it is priced at a tenth of the rows estimated)."""
    return sa.select(sa.cast(sa.bindparam(name, value), sa.Integer)).scalar_subquery()


def _scan_ids(tenant: str, after_id: str, lateral: bool) -> sa.Select:
    """The ids a filtered page scans, after ``after_id`` in index order:
    ``tenant``'s (on PostgreSQL its ``jobs_tenant`` range, the tenant a
    range of one value: the module's docstring), or every tenant's by
    ``jobs_pkey`` when ``tenant`` is empty."""
    query = sa.select(jobs.c.id).where(jobs.c.id > after_id)
    if not tenant:
        return query.order_by(jobs.c.id)
    if not lateral:
        return query.where(jobs.c.tenant == tenant).order_by(jobs.c.id)
    one = sa.bindparam("page_tenant", tenant)
    return query.where(jobs.c.tenant >= one, jobs.c.tenant <= one).order_by(jobs.c.tenant, jobs.c.id)


def _scan_limit(lateral: bool) -> sa.ScalarSelect | sa.BindParameter:
    """:data:`PAGE_SCAN`, unread by PostgreSQL's planner (:func:`_unread`)."""
    return _unread("page_scan", PAGE_SCAN) if lateral else sa.bindparam("page_scan", PAGE_SCAN)


def _filtered(query: sa.Select, job: sa.FromClause, cursor: sa.FromClause, state: str, name_prefix: str) -> sa.Select:
    if state:  # the cursor's state is the job's (a claim completes a job in its cursor only)
        query = query.where(cursor.c.state == state)
    if name_prefix:
        query = query.where(job.c.name.startswith(name_prefix, autoescape=True))
    return query


def _fixed_page(tenant: str, after_id: str, limit: int, state: str, name_prefix: str) -> sa.Select:
    """The page of ``tenant`` whose every plan reads the tenant's range of
    ``jobs_tenant`` (of ``jobs_tenant_paused`` for paused jobs) in order
    and each cursor by key, and no row of another tenant (the module's
    docstring)."""
    one = sa.bindparam("page_tenant", tenant)
    query = (
        sa.select(*_PAGE_COLUMNS).select_from(jobs.join(_CURSOR, sa.true()))
        .where(jobs.c.id > after_id, jobs.c.tenant >= one, jobs.c.tenant <= one)
    )
    if state == "paused":  # set by job writes only, which write both rows: the index finds them
        query = query.where(_PAUSED)
    query = _filtered(query, jobs, _CURSOR, state, name_prefix)
    return query.order_by(jobs.c.tenant, jobs.c.id).limit(_unread("page_limit", limit))


def _scanned_page(
    tenant: str, after_id: str, limit: int, state: str, name_prefix: str, lateral: bool
) -> sa.Select:
    """A filtered page from the first :data:`PAGE_SCAN` jobs after
    ``after_id`` (``tenant``'s, or every tenant's): on PostgreSQL
    (``lateral``) those read as :func:`_fixed_page` reads them, each cursor
    by key; elsewhere joined to their cursors by key. The filters are
    tested on each."""
    ids = _scan_ids(tenant, after_id, lateral)
    scanned = ids.with_only_columns(*jobs.c).limit(_scan_limit(lateral)).subquery("scanned")
    if lateral:
        cursor = _cursor_of(scanned)
        joined = scanned.join(cursor, sa.true())
    else:
        cursor = job_cursors
        joined = scanned.join(job_cursors, job_cursors.c.job_id == scanned.c.id)
    query = sa.select(*record_columns(cursor, scanned)).select_from(joined)
    query = _filtered(query, scanned, cursor, state, name_prefix)
    order = (scanned.c.tenant, scanned.c.id) if lateral and tenant else (scanned.c.id,)
    return query.order_by(*order).limit(_unread("page_limit", limit) if lateral else limit)
