"""Domain records ↔ protobuf messages. Pure functions, no I/O."""

from __future__ import annotations

import base64
from datetime import datetime, timezone

from google.protobuf import timestamp_pb2
from tickwheel.v1 import admin_pb2, job_pb2

from ..errors import InvalidArgument
from ..store.credentials import WorkerCredential
from ..store.jobs import JobRecord
from ..store.tenants import ApiKey, Tenant

JOB_STATE_TO_PROTO = {
    "active": job_pb2.JOB_STATE_ACTIVE,
    "paused": job_pb2.JOB_STATE_PAUSED,
    "completed": job_pb2.JOB_STATE_COMPLETED,
}
JOB_STATE_FROM_PROTO = {value: key for key, value in JOB_STATE_TO_PROTO.items()}
TENANT_STATE_TO_PROTO = {"active": admin_pb2.TENANT_STATE_ACTIVE, "paused": admin_pb2.TENANT_STATE_PAUSED}


def timestamp(instant: datetime | None) -> timestamp_pb2.Timestamp | None:
    if instant is None:
        return None
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(instant.astimezone(timezone.utc))
    return message


def instant(message: timestamp_pb2.Timestamp) -> datetime:
    return message.ToDatetime(tzinfo=timezone.utc)


def job_to_proto(record: JobRecord) -> job_pb2.Job:
    """The stored definition plus the output-only fields from the record."""
    job = job_pb2.Job.FromString(record.spec)
    job.id = record.id
    job.tenant = record.tenant
    job.state = JOB_STATE_TO_PROTO[record.state]
    job.run_count = record.run_count
    job.version = record.version
    job.tzdata_version = record.tzdata_version
    job.pause_reason = record.pause_reason
    for field, value in (
        ("next_run_at", record.next_run_at),
        ("next_due_at", record.next_due_at),
        ("created_at", record.created_at),
        ("updated_at", record.updated_at),
    ):
        if value is not None:
            getattr(job, field).CopyFrom(timestamp(value))
    return job


def tenant_to_proto(tenant: Tenant) -> admin_pb2.Tenant:
    return admin_pb2.Tenant(
        name=tenant.name,
        weight=tenant.weight,
        max_concurrency=tenant.max_concurrency,
        quotas=admin_pb2.TenantQuotas(
            max_jobs=tenant.max_jobs,
            max_payload_bytes=tenant.max_payload_bytes,
            requests_per_second=tenant.requests_per_second,
        ),
        state=TENANT_STATE_TO_PROTO[tenant.state],
        pause_reason=tenant.pause_reason,
        created_at=timestamp(tenant.created_at),
        version=tenant.version,
    )


def api_key_to_proto(key: ApiKey) -> admin_pb2.ApiKey:
    return admin_pb2.ApiKey(
        id=key.id,
        tenant=key.tenant,
        description=key.description,
        created_at=timestamp(key.created_at),
        expires_at=timestamp(key.expires_at),
    )


def worker_credential_to_proto(credential: WorkerCredential) -> admin_pb2.WorkerCredential:
    return admin_pb2.WorkerCredential(
        id=credential.id,
        tenants=credential.tenants,
        handlers=credential.handlers,
        http=credential.http,
        description=credential.description,
        created_at=timestamp(credential.created_at),
    )


# Page tokens are opaque to clients: base64 of the last key of the page.
_TOKEN_PREFIX = "p1:"


def page_token(last_key: str) -> str:
    return base64.urlsafe_b64encode((_TOKEN_PREFIX + last_key).encode()).decode()


def parse_page_token(token: str) -> str:
    """The key after which the next page starts; INVALID_ARGUMENT `page_token` when not ours."""
    if not token:
        return ""
    try:
        decoded = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        decoded = ""
    if not decoded.startswith(_TOKEN_PREFIX):
        raise InvalidArgument.field("page_token", "not a page token returned by this API")
    return decoded[len(_TOKEN_PREFIX) :]


def page_size(requested: int, *, default: int, maximum: int, field: str = "page_size") -> int:
    if requested < 0:
        raise InvalidArgument.field(field, f"must be between 0 and {maximum}")
    if requested > maximum:
        raise InvalidArgument.field(field, f"at most {maximum}")
    return requested or default
