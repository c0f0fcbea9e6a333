"""The job store's records: what it takes and returns, and a job row read as one.

:class:`JobRecord` is a job as stored; :class:`NewJob` is what the API
decides and hands to :class:`~tickwheel_server.store.jobs.JobStore`, and
:class:`NewJobs` the same for a batch, column by column (the
plans of a job change, ``CursorView``, ``Reschedule`` and ``SkippedSpan``,
are :mod:`tickwheel_server.policy.jobchanges`'). :func:`job_record`
and :func:`get_job` are the one place a ``jobs`` row becomes a record:
the row joined to its cursor (``job_cursors``, migration 0032) by
:data:`JOB_WITH_CURSOR`, whose state is the job's; :func:`write_cursors`
writes cursors as a job write leaves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..errors import NotFound
from .base import tuples
from .peertext import escaped_text
from .tables import job_cursors, jobs

JOB_STATES = ("active", "paused", "completed")


@dataclass(frozen=True)
class NewJob:
    """What the API decided for a job about to be created."""

    id: str
    tenant: str
    name: str
    spec: bytes
    time_zone: str
    next_run_at: datetime | None
    next_due_at: datetime | None
    tzdata_version: str
    payload_size: int
    key_limits: tuple[tuple[str, int], ...] | None = None
    """The (key, limit) pairs of the definition's ``concurrency_keys``, as
    the API read them when it validated ``spec`` (so the store need not
    parse it again); None: the store reads them from ``spec``."""


@dataclass(eq=False)
class NewJobs:
    """Jobs about to be created for ``tenant``, one per index of every
    column (what :class:`NewJob` holds, instants as microseconds since the
    epoch, plus each job's request id and the concurrency-key limits its
    definition names): what a batch hands to
    :meth:`~tickwheel_server.store.jobs.JobStore.create_batch` without a
    Python object per job. Append with :meth:`add`; columns stay equal in
    length."""

    tenant: str
    ids: list[str] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    specs: list[bytes] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    next_runs: list[int | None] = field(default_factory=list)
    next_dues: list[int | None] = field(default_factory=list)
    tzdata: list[str] = field(default_factory=list)
    payload_sizes: list[int] = field(default_factory=list)
    key_limits: list[tuple[tuple[str, int], ...]] = field(default_factory=list)
    """Per job, the (key, limit) pairs of its ``concurrency_keys``."""

    def __len__(self) -> int:
        return len(self.ids)

    def add(
        self, job_id: str, request_id: str, name: str, spec: bytes, zone: str, next_run: int | None,
        next_due: int | None, tzdata: str, payload_size: int, key_limits: tuple[tuple[str, int], ...],
    ) -> None:  # fmt: skip
        self.ids.append(job_id)
        self.request_ids.append(request_id)
        self.names.append(name)
        self.specs.append(spec)
        self.zones.append(zone)
        self.next_runs.append(next_run)
        self.next_dues.append(next_due)
        self.tzdata.append(tzdata)
        self.payload_sizes.append(payload_size)
        self.key_limits.append(key_limits)

    @classmethod
    def of_rows(cls, tenant: str, rows: list[tuple], tzdata: str) -> NewJobs:
        """The batch of ``rows``, each (id, request id, name, spec, zone,
        next run, next due, payload size, key limits) as :meth:`add` takes
        them, every job with ``tzdata``: the columns made by one pass over
        the rows each, not a call a job."""
        if not rows:
            return cls(tenant)
        ids, request_ids, names, specs, zones, next_runs, next_dues, payload_sizes, key_limits = map(list, zip(*rows))
        return cls(tenant, ids, request_ids, names, specs, zones, next_runs, next_dues, [tzdata] * len(rows),
                   payload_sizes, key_limits)  # fmt: skip

    @classmethod
    def of(cls, tenant: str, items, key_limits) -> NewJobs:
        """The batch of ``items`` ((:class:`NewJob`, request id) pairs of
        ``tenant``), ``key_limits(job)`` giving each job's key limits;
        ValueError when a job is another tenant's."""
        batch = cls(tenant)
        for job, request_id in items:
            if job.tenant != tenant:
                raise ValueError("every job must be the tenant's")
            batch.add(
                job.id, request_id, job.name, job.spec, job.time_zone, _us(job.next_run_at), _us(job.next_due_at),
                job.tzdata_version, job.payload_size, key_limits(job),
            )  # fmt: skip
        return batch

    def state(self, index: int) -> str:
        """The state job ``index`` is created in: active unless it has no fire."""
        return "active" if self.next_runs[index] is not None else "completed"

    def record(self, index: int, partition: int, created_at: datetime) -> JobRecord:
        """The record of job ``index`` as created at ``created_at`` in
        ``partition``: what reading its row back gives."""
        return JobRecord(
            id=self.ids[index], tenant=self.tenant, partition=partition, name=self.names[index],
            state=self.state(index), spec=self.specs[index], time_zone=self.zones[index],
            next_run_at=_opt(self.next_runs[index]), next_due_at=_opt(self.next_dues[index]), run_count=0,
            tzdata_version=self.tzdata[index], pause_reason="", version=1, created_at=created_at,
            updated_at=created_at, paused_at=None,
        )  # fmt: skip


def _us(at: datetime | None) -> int | None:
    return None if at is None else to_us(at)


@dataclass(frozen=True)
class JobRecord:
    """A job as stored (instants in UTC). ``next_run_at`` is the nominal
    cursor (``jobs.next_nominal_at`` when a ``previous`` rule keeps an
    earlier scan key in ``jobs.next_run_at``)."""

    id: str
    tenant: str
    partition: int
    name: str
    state: str
    spec: bytes
    time_zone: str
    next_run_at: datetime | None
    next_due_at: datetime | None
    run_count: int
    tzdata_version: str
    pause_reason: str
    version: int
    created_at: datetime
    updated_at: datetime
    paused_at: datetime | None = None


def _opt(micros: int | None) -> datetime | None:
    return None if micros is None else from_us(micros)


def job_record(row) -> JobRecord:
    """The record of a ``jobs`` row."""
    return JobRecord(
        id=row.id,
        tenant=row.tenant,
        partition=row.partition,
        name=row.name,
        state=row.state,
        spec=bytes(row.spec),
        time_zone=row.time_zone,
        next_run_at=_opt(row.next_nominal_at if row.next_nominal_at is not None else row.next_run_at),
        next_due_at=_opt(row.next_due_at),
        run_count=row.run_count,
        tzdata_version=row.tzdata_version,
        pause_reason=escaped_text(row.pause_reason),
        version=row.version,
        created_at=from_us(row.created_at),
        updated_at=from_us(row.updated_at),
        paused_at=_opt(row.paused_at),
    )


JOB_WITH_CURSOR = jobs.join(job_cursors, job_cursors.c.job_id == jobs.c.id)
"""A job and its cursor (one each, written in one transaction), by primary key."""

JOB_COLUMNS = (
    *(column for column in jobs.c if column.name != "state"), job_cursors.c.state, job_cursors.c.next_run_at,
    job_cursors.c.next_due_at, job_cursors.c.run_count, job_cursors.c.next_nominal_at,
)  # fmt: skip
"""A job's row as :func:`job_record` reads it: ``jobs``' columns with the cursor's (and its state)."""


def select_jobs() -> sa.Select:
    """SELECT :data:`JOB_COLUMNS` FROM :data:`JOB_WITH_CURSOR` (add the WHERE)."""
    return sa.select(*JOB_COLUMNS).select_from(JOB_WITH_CURSOR)


def record_columns(cursor: sa.FromClause, job: sa.FromClause = jobs) -> tuple:
    """What :func:`job_records` reads, in :class:`JobRecord`'s field order:
    ``job``'s columns (``jobs``, or a subquery of its columns), the
    cursor's from ``cursor`` (``job_cursors``, or a subquery of its
    columns)."""
    c, j = cursor.c, job.c
    return (
        j.id, j.tenant, j.partition, j.name, c.state, j.spec, j.time_zone,
        sa.func.coalesce(c.next_nominal_at, c.next_run_at).label("next_run_at"),
        c.next_due_at, c.run_count, j.tzdata_version, j.pause_reason,
        j.version, j.created_at, j.updated_at, j.paused_at,
    )  # fmt: skip


RECORD_COLUMNS = record_columns(job_cursors)
"""What :func:`job_records` reads (FROM :data:`JOB_WITH_CURSOR`), in :class:`JobRecord`'s field order."""

_WRITE_CURSOR = (
    job_cursors.update()
    .where(job_cursors.c.job_id == sa.bindparam("b_id"), job_cursors.c.tenant == sa.bindparam("b_tenant"))
    .values(
        state=sa.bindparam("b_state"), version=sa.bindparam("b_version"), next_run_at=sa.bindparam("b_run"),
        next_due_at=sa.bindparam("b_due"), run_count=sa.bindparam("b_runs"), next_nominal_at=None,
    )
)


def cursor_values(record: JobRecord) -> dict:
    """The cursor row's values (bound as :func:`write_cursors` takes them)
    for a job write that leaves ``record``: its nominal cursor, which
    :func:`.calendarcursor.rekey_previous` then turns into a ``previous``
    job's scan key."""
    return dict(
        b_id=record.id, b_tenant=record.tenant, b_state=record.state, b_version=record.version,
        b_run=_us(record.next_run_at), b_due=_us(record.next_due_at), b_runs=record.run_count,
    )


def write_cursors(conn: Connection, records) -> None:
    """Write the cursors of ``records`` (:func:`cursor_values`), each
    scoped to its tenant's job; in the transaction that writes the jobs."""
    rows = [cursor_values(record) for record in records]
    if rows:
        conn.execute(_WRITE_CURSOR, rows)


def job_records(result) -> list[JobRecord]:
    """The records of a result selecting :data:`RECORD_COLUMNS`, read as the
    driver's plain tuples: a page of a listing is a thousand rows, and
    SQLAlchemy's ``Row`` objects, read by name, cost more than the records
    built from them."""
    return [
        JobRecord(
            job_id, tenant, partition, name, state, bytes(spec), zone,
            None if next_run is None else from_us(next_run), None if next_due is None else from_us(next_due),
            run_count, tzdata, pause_reason, version, from_us(created), from_us(updated),
            None if paused is None else from_us(paused),
        )
        for (job_id, tenant, partition, name, state, spec, zone, next_run, next_due, run_count, tzdata, pause_reason,
             version, created, updated, paused) in tuples(result)
    ]  # fmt: skip


def get_job(conn: Connection, tenant: str, job_id: str, *, share: bool = False) -> JobRecord:
    """``tenant``'s job ``job_id``, or NotFound (also for another tenant's job).

    ``share``: the row stays share-locked until the transaction ends, where
    the engine has row locks: a change of the job (delete, pause) that
    locks it waits for this transaction, and reads what it wrote.
    """
    query = select_jobs().where(jobs.c.id == job_id, jobs.c.tenant == tenant)
    if share and conn.dialect.name != "sqlite":
        query = query.with_for_update(read=True)
    row = conn.execute(query).first()
    if row is None:
        raise NotFound("job", job_id)
    return job_record(row)
