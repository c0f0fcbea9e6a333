"""Job revisions on the wire: a kept definition as GetJob and ListJobRevisions answer it, and their page tokens."""

from __future__ import annotations

from google.protobuf import field_mask_pb2
from google.protobuf.message import DecodeError
from tickwheel.v1 import job_pb2, scheduler_pb2

from ..errors import InvalidArgument
from ..store.jobrecords import JobRecord
from ..store.revisions import Revision
from . import convert


def revision_job(revision: Revision, current: JobRecord) -> job_pb2.Job:
    """The job as it was at ``revision.version``: the kept definition with
    ``id``, ``tenant``, ``version``, ``created_at`` (``current``'s) and
    ``updated_at`` (when that version was written); other output-only
    fields unset. A definition this server cannot parse gives those alone."""
    try:
        job = job_pb2.Job.FromString(revision.spec)
    except DecodeError:
        job = job_pb2.Job()
    job.id = revision.job_id
    job.tenant = revision.tenant
    job.version = revision.version
    if current.created_at is not None:
        convert.set_timestamp(job.created_at, current.created_at)
    convert.set_timestamp(job.updated_at, revision.version_at)
    return job


def revision_to_proto(revision: Revision, current: JobRecord) -> scheduler_pb2.JobRevision:
    """A ListJobRevisions entry: :func:`revision_job` without its payload."""
    job = revision_job(revision, current)
    job.ClearField("payload")
    return scheduler_pb2.JobRevision(
        version=revision.version, job=job, changed_at=convert.timestamp(revision.changed_at),
        changed_by=revision.changed_by, update_mask=field_mask_pb2.FieldMask(paths=list(revision.update_mask)),
        changed_to_version=revision.changed_to_version,
    )


def page_token(version: int) -> str:
    return convert.page_token(f"rev:{version}")


def parse_page_token(token: str) -> int:
    """The version below which the next page starts (0: the first page);
    INVALID_ARGUMENT ``page_token`` when not one of ours."""
    key = convert.parse_page_token(token)
    if not key:
        return 0
    kind, _, version = key.partition(":")
    if kind != "rev" or not (version.isascii() and version.isdigit()) or len(version) > 19 or not 0 < int(version) < 2**63:
        raise InvalidArgument.field("page_token", "not a page token returned by this API")
    return int(version)
