"""Job revisions: the definitions applied updates replaced, kept, read and pruned.

An applied update of a job (UpdateJob, a BatchUpdateJobs item, a rollback)
keeps the definition it replaced as one ``job_revisions`` row, keyed by
(job id, the version replaced), with the change that replaced it: when,
who (``changed_by``), its update mask and the version it produced. The row
is written in the update's own transaction (:func:`keep_revisions`, called
by :mod:`.jobbatch` and :meth:`.jobs.JobStore.update`), and in that same
transaction a job's revisions beyond the newest :data:`KEEP` are deleted:
one statement reads the versions of the changed jobs (a range scan of the
primary key, at most ``KEEP`` + the batch's rows per job) and one deletes
those past the newest ``KEEP``. Deleting a job deletes its revisions
(:func:`delete_revisions`, in the delete's transaction). Pauses and
resumes move a job's version without changing its definition: they keep
no revision. See docs/architecture.md, "Job changes".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..errors import NotFound
from .base import SqlStore, chunks, one_of
from .engine import capabilities
from .jobrecords import JobRecord
from .tables import job_revisions, jobs

KEEP = 100
"""Revisions kept per job: the newest ones."""
CHUNK = 500
"""Job ids bound in one statement."""
MASK_SEPARATOR = ","
"""Joins the update mask's paths in ``update_mask`` (a path never holds one)."""


@dataclass(frozen=True)
class Revision:
    """A job's definition at ``version`` and the change that replaced it.

    ``version_at`` is when that version was written; ``changed_at``,
    ``changed_by`` and ``update_mask`` (empty: every mutable field) describe
    the change, which produced ``changed_to_version``."""

    job_id: str
    tenant: str
    version: int
    name: str
    spec: bytes
    version_at: datetime
    changed_at: datetime
    changed_by: str
    update_mask: tuple[str, ...]
    changed_to_version: int


def revision_of(before: JobRecord, after: JobRecord, *, changed_by: str, update_mask: Sequence[str]) -> Revision:
    """The revision an applied update from ``before`` to ``after`` keeps."""
    return Revision(
        job_id=before.id, tenant=before.tenant, version=before.version, name=before.name, spec=before.spec,
        version_at=before.updated_at, changed_at=after.updated_at, changed_by=changed_by,
        update_mask=tuple(update_mask), changed_to_version=after.version,
    )


def keep_revisions(conn: Connection, revisions: Sequence[Revision]) -> None:
    """Insert ``revisions`` (one statement) and delete, for each job they
    name, its revisions beyond the newest :data:`KEEP`, in ``conn``'s
    transaction."""
    if not revisions:
        return
    conn.execute(
        job_revisions.insert(),
        [
            dict(
                job_id=r.job_id, tenant=r.tenant, version=r.version, name=r.name, spec=r.spec,
                version_at=to_us(r.version_at), changed_at=to_us(r.changed_at), changed_by=r.changed_by,
                update_mask=MASK_SEPARATOR.join(r.update_mask), changed_to_version=r.changed_to_version,
            )
            for r in revisions
        ],
    )
    for chunk in chunks(sorted({r.job_id for r in revisions}), CHUNK):
        rank = (
            sa.func.row_number()
            .over(partition_by=job_revisions.c.job_id, order_by=job_revisions.c.version.desc())
            .label("rank")
        )
        ranked = (
            sa.select(job_revisions.c.job_id, job_revisions.c.version, rank)
            .where(one_of(capabilities(conn), job_revisions.c.job_id, chunk))
            .subquery()
        )
        # The newest revision past the KEEP-th of each job: it and every older one go.
        cut = conn.execute(
            sa.select(ranked.c.job_id, sa.func.max(ranked.c.version))
            .where(ranked.c.rank > KEEP)
            .group_by(ranked.c.job_id)
        ).all()
        if cut:
            conn.execute(
                sa.delete(job_revisions).where(
                    job_revisions.c.job_id == sa.bindparam("b_job_id"),
                    job_revisions.c.version <= sa.bindparam("b_version"),
                ),
                [{"b_job_id": job_id, "b_version": version} for job_id, version in cut],
            )


def delete_revisions(conn: Connection, tenant: str, job_ids: Sequence[str]) -> None:
    """Delete the revisions of ``tenant``'s jobs ``job_ids``, in ``conn``'s transaction."""
    for chunk in chunks(list(job_ids), CHUNK):
        conn.execute(sa.delete(job_revisions).where(
            job_revisions.c.tenant == tenant, one_of(capabilities(conn), job_revisions.c.job_id, chunk)
        ))


def _revision(row) -> Revision:
    return Revision(
        job_id=row.job_id, tenant=row.tenant, version=row.version, name=row.name, spec=bytes(row.spec),
        version_at=from_us(row.version_at), changed_at=from_us(row.changed_at), changed_by=row.changed_by,
        update_mask=tuple(p for p in row.update_mask.split(MASK_SEPARATOR) if p),
        changed_to_version=row.changed_to_version,
    )


def _check_job(conn: Connection, tenant: str, job_id: str) -> None:
    found = conn.execute(sa.select(jobs.c.id).where(jobs.c.tenant == tenant, jobs.c.id == job_id)).first()
    if found is None:
        raise NotFound("job", job_id)


class RevisionStore(SqlStore):
    """The revisions of every tenant's jobs; every method is scoped to one
    tenant, and a job of another tenant is NotFound, like a missing one."""

    async def list(self, tenant: str, job_id: str, *, before_version: int = 0, limit: int = 20) -> list[Revision]:
        """Up to ``limit`` revisions of ``tenant``'s job ``job_id``, newest
        first, with versions below ``before_version`` (0: from the newest).
        NotFound when the job is not ``tenant``'s."""

        def fn(conn: Connection) -> list[Revision]:
            _check_job(conn, tenant, job_id)
            query = sa.select(job_revisions).where(job_revisions.c.job_id == job_id, job_revisions.c.tenant == tenant)
            if before_version:
                query = query.where(job_revisions.c.version < before_version)
            query = query.order_by(job_revisions.c.version.desc()).limit(limit)
            return [_revision(row) for row in conn.execute(query)]

        return await self._tx(fn)

    async def get(self, tenant: str, job_id: str, version: int) -> Revision:
        """The revision of ``tenant``'s job ``job_id`` at ``version``;
        NotFound when the job is not ``tenant``'s or keeps no such revision."""

        def fn(conn: Connection) -> Revision:
            _check_job(conn, tenant, job_id)
            row = conn.execute(
                sa.select(job_revisions).where(
                    job_revisions.c.job_id == job_id, job_revisions.c.tenant == tenant,
                    job_revisions.c.version == version,
                )
            ).first()
            if row is None:
                raise NotFound("revision", f"{job_id}@{version}")
            return _revision(row)

        return await self._tx(fn)
