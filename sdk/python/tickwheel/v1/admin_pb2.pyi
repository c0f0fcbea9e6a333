import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from tickwheel.v1 import execution_pb2 as _execution_pb2
from tickwheel.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SessionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATE_UNSPECIFIED: _ClassVar[SessionState]
    SESSION_STATE_LIVE: _ClassVar[SessionState]
    SESSION_STATE_LOST: _ClassVar[SessionState]

class TenantState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TENANT_STATE_UNSPECIFIED: _ClassVar[TenantState]
    TENANT_STATE_ACTIVE: _ClassVar[TenantState]
    TENANT_STATE_PAUSED: _ClassVar[TenantState]

class AlertKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALERT_KIND_UNSPECIFIED: _ClassVar[AlertKind]
    ALERT_KIND_LATE: _ClassVar[AlertKind]
    ALERT_KIND_SKIPPED: _ClassVar[AlertKind]
    ALERT_KIND_DEAD_LETTER: _ClassVar[AlertKind]
    ALERT_KIND_POISON: _ClassVar[AlertKind]
    ALERT_KIND_CIRCUIT_OPEN: _ClassVar[AlertKind]
    ALERT_KIND_PARTITION_UNOWNED: _ClassVar[AlertKind]
    ALERT_KIND_CLOCK_SKEW: _ClassVar[AlertKind]
    ALERT_KIND_TZDATA_SHIFT: _ClassVar[AlertKind]
    ALERT_KIND_JOB_UNREADABLE: _ClassVar[AlertKind]
    ALERT_KIND_SCHEDULE_UNCOMPUTABLE: _ClassVar[AlertKind]
    ALERT_KIND_CALENDAR_RUNS_CHANGED: _ClassVar[AlertKind]
    ALERT_KIND_ETCD_NOSPACE: _ClassVar[AlertKind]

class AlertSeverity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALERT_SEVERITY_UNSPECIFIED: _ClassVar[AlertSeverity]
    ALERT_SEVERITY_INFO: _ClassVar[AlertSeverity]
    ALERT_SEVERITY_WARNING: _ClassVar[AlertSeverity]
    ALERT_SEVERITY_CRITICAL: _ClassVar[AlertSeverity]
SESSION_STATE_UNSPECIFIED: SessionState
SESSION_STATE_LIVE: SessionState
SESSION_STATE_LOST: SessionState
TENANT_STATE_UNSPECIFIED: TenantState
TENANT_STATE_ACTIVE: TenantState
TENANT_STATE_PAUSED: TenantState
ALERT_KIND_UNSPECIFIED: AlertKind
ALERT_KIND_LATE: AlertKind
ALERT_KIND_SKIPPED: AlertKind
ALERT_KIND_DEAD_LETTER: AlertKind
ALERT_KIND_POISON: AlertKind
ALERT_KIND_CIRCUIT_OPEN: AlertKind
ALERT_KIND_PARTITION_UNOWNED: AlertKind
ALERT_KIND_CLOCK_SKEW: AlertKind
ALERT_KIND_TZDATA_SHIFT: AlertKind
ALERT_KIND_JOB_UNREADABLE: AlertKind
ALERT_KIND_SCHEDULE_UNCOMPUTABLE: AlertKind
ALERT_KIND_CALENDAR_RUNS_CHANGED: AlertKind
ALERT_KIND_ETCD_NOSPACE: AlertKind
ALERT_SEVERITY_UNSPECIFIED: AlertSeverity
ALERT_SEVERITY_INFO: AlertSeverity
ALERT_SEVERITY_WARNING: AlertSeverity
ALERT_SEVERITY_CRITICAL: AlertSeverity

class ClusterStatusRequest(_message.Message):
    __slots__ = ("top_tenants",)
    TOP_TENANTS_FIELD_NUMBER: _ClassVar[int]
    top_tenants: int
    def __init__(self, top_tenants: _Optional[int] = ...) -> None: ...

class ClusterStatusResponse(_message.Message):
    __slots__ = ("servers", "partitions", "queues", "partition_count", "reaper_server_id", "store_engine", "schema_version", "tzdata_version")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    REAPER_SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    STORE_ENGINE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    TZDATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[ServerStatus]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionStatus]
    queues: _containers.RepeatedCompositeFieldContainer[TenantQueue]
    partition_count: int
    reaper_server_id: str
    store_engine: str
    schema_version: int
    tzdata_version: str
    def __init__(self, servers: _Optional[_Iterable[_Union[ServerStatus, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[PartitionStatus, _Mapping]]] = ..., queues: _Optional[_Iterable[_Union[TenantQueue, _Mapping]]] = ..., partition_count: _Optional[int] = ..., reaper_server_id: _Optional[str] = ..., store_engine: _Optional[str] = ..., schema_version: _Optional[int] = ..., tzdata_version: _Optional[str] = ...) -> None: ...

class ServerStatus(_message.Message):
    __slots__ = ("server_id", "address", "session_id", "started_at", "version", "partitions_owned", "wheel_size", "workers", "clock_skew", "draining", "session_state", "reaper")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_OWNED_FIELD_NUMBER: _ClassVar[int]
    WHEEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_SKEW_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    SESSION_STATE_FIELD_NUMBER: _ClassVar[int]
    REAPER_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    address: str
    session_id: str
    started_at: _timestamp_pb2.Timestamp
    version: str
    partitions_owned: int
    wheel_size: int
    workers: int
    clock_skew: _duration_pb2.Duration
    draining: bool
    session_state: SessionState
    reaper: bool
    def __init__(self, server_id: _Optional[str] = ..., address: _Optional[str] = ..., session_id: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[str] = ..., partitions_owned: _Optional[int] = ..., wheel_size: _Optional[int] = ..., workers: _Optional[int] = ..., clock_skew: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., draining: _Optional[bool] = ..., session_state: _Optional[_Union[SessionState, str]] = ..., reaper: _Optional[bool] = ...) -> None: ...

class PartitionStatus(_message.Message):
    __slots__ = ("partition", "server_id", "epoch")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition: int
    server_id: str
    epoch: int
    def __init__(self, partition: _Optional[int] = ..., server_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class TenantQueue(_message.Message):
    __slots__ = ("tenant", "ready", "running", "oldest_ready_age")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    OLDEST_READY_AGE_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    ready: int
    running: int
    oldest_ready_age: _duration_pb2.Duration
    def __init__(self, tenant: _Optional[str] = ..., ready: _Optional[int] = ..., running: _Optional[int] = ..., oldest_ready_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Tenant(_message.Message):
    __slots__ = ("name", "weight", "max_concurrency", "quotas", "state", "pause_reason", "created_at", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAUSE_REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: int
    max_concurrency: int
    quotas: TenantQuotas
    state: TenantState
    pause_reason: str
    created_at: _timestamp_pb2.Timestamp
    version: int
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., quotas: _Optional[_Union[TenantQuotas, _Mapping]] = ..., state: _Optional[_Union[TenantState, str]] = ..., pause_reason: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class TenantQuotas(_message.Message):
    __slots__ = ("max_jobs", "max_payload_bytes", "requests_per_second", "max_pending_manual_runs")
    MAX_JOBS_FIELD_NUMBER: _ClassVar[int]
    MAX_PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    MAX_PENDING_MANUAL_RUNS_FIELD_NUMBER: _ClassVar[int]
    max_jobs: int
    max_payload_bytes: int
    requests_per_second: int
    max_pending_manual_runs: int
    def __init__(self, max_jobs: _Optional[int] = ..., max_payload_bytes: _Optional[int] = ..., requests_per_second: _Optional[int] = ..., max_pending_manual_runs: _Optional[int] = ...) -> None: ...

class CreateTenantRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class CreateTenantResponse(_message.Message):
    __slots__ = ("tenant", "api_key")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    api_key: IssuedSecret
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., api_key: _Optional[_Union[IssuedSecret, _Mapping]] = ...) -> None: ...

class IssuedSecret(_message.Message):
    __slots__ = ("id", "secret")
    ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    id: str
    secret: str
    def __init__(self, id: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class GetTenantRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetTenantResponse(_message.Message):
    __slots__ = ("tenant", "job_count", "pending_manual_runs")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    JOB_COUNT_FIELD_NUMBER: _ClassVar[int]
    PENDING_MANUAL_RUNS_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    job_count: int
    pending_manual_runs: int
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., job_count: _Optional[int] = ..., pending_manual_runs: _Optional[int] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ("tenants", "next_page_token")
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[Tenant]
    next_page_token: str
    def __init__(self, tenants: _Optional[_Iterable[_Union[Tenant, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateTenantRequest(_message.Message):
    __slots__ = ("tenant", "update_mask")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateTenantResponse(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class PauseTenantRequest(_message.Message):
    __slots__ = ("name", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PauseTenantResponse(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class ResumeTenantRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ResumeTenantResponse(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class ApiKey(_message.Message):
    __slots__ = ("id", "tenant", "description", "created_at", "expires_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant: str
    description: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ..., description: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class IssueApiKeyRequest(_message.Message):
    __slots__ = ("tenant", "description")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    description: str
    def __init__(self, tenant: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class IssueApiKeyResponse(_message.Message):
    __slots__ = ("api_key",)
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    api_key: IssuedSecret
    def __init__(self, api_key: _Optional[_Union[IssuedSecret, _Mapping]] = ...) -> None: ...

class RotateApiKeyRequest(_message.Message):
    __slots__ = ("id", "grace")
    ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    id: str
    grace: _duration_pb2.Duration
    def __init__(self, id: _Optional[str] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RotateApiKeyResponse(_message.Message):
    __slots__ = ("api_key", "old_key_expires_at")
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    OLD_KEY_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    api_key: IssuedSecret
    old_key_expires_at: _timestamp_pb2.Timestamp
    def __init__(self, api_key: _Optional[_Union[IssuedSecret, _Mapping]] = ..., old_key_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("tenant", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("api_keys", "next_page_token")
    API_KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    api_keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    next_page_token: str
    def __init__(self, api_keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WorkerCredential(_message.Message):
    __slots__ = ("id", "tenants", "handlers", "http", "description", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    HANDLERS_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenants: _containers.RepeatedScalarFieldContainer[str]
    handlers: _containers.RepeatedScalarFieldContainer[str]
    http: bool
    description: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenants: _Optional[_Iterable[str]] = ..., handlers: _Optional[_Iterable[str]] = ..., http: _Optional[bool] = ..., description: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class IssueWorkerCredentialRequest(_message.Message):
    __slots__ = ("tenants", "handlers", "http", "description")
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    HANDLERS_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedScalarFieldContainer[str]
    handlers: _containers.RepeatedScalarFieldContainer[str]
    http: bool
    description: str
    def __init__(self, tenants: _Optional[_Iterable[str]] = ..., handlers: _Optional[_Iterable[str]] = ..., http: _Optional[bool] = ..., description: _Optional[str] = ...) -> None: ...

class IssueWorkerCredentialResponse(_message.Message):
    __slots__ = ("credential",)
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    credential: IssuedSecret
    def __init__(self, credential: _Optional[_Union[IssuedSecret, _Mapping]] = ...) -> None: ...

class RevokeWorkerCredentialRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeWorkerCredentialResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkerCredentialsRequest(_message.Message):
    __slots__ = ("tenant", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWorkerCredentialsResponse(_message.Message):
    __slots__ = ("credentials", "next_page_token")
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    credentials: _containers.RepeatedCompositeFieldContainer[WorkerCredential]
    next_page_token: str
    def __init__(self, credentials: _Optional[_Iterable[_Union[WorkerCredential, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchJobsRequest(_message.Message):
    __slots__ = ("tenant", "name_prefix", "state", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name_prefix: str
    state: _job_pb2.JobState
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., name_prefix: _Optional[str] = ..., state: _Optional[_Union[_job_pb2.JobState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchExecutionsRequest(_message.Message):
    __slots__ = ("tenant", "job_id", "statuses", "from_at", "to_at", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    FROM_AT_FIELD_NUMBER: _ClassVar[int]
    TO_AT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    job_id: str
    statuses: _containers.RepeatedScalarFieldContainer[_job_pb2.ExecutionStatus]
    from_at: _timestamp_pb2.Timestamp
    to_at: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., job_id: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[_job_pb2.ExecutionStatus, str]]] = ..., from_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., to_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchExecutionsResponse(_message.Message):
    __slots__ = ("executions", "next_page_token")
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    executions: _containers.RepeatedCompositeFieldContainer[_execution_pb2.Execution]
    next_page_token: str
    def __init__(self, executions: _Optional[_Iterable[_Union[_execution_pb2.Execution, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DrainServerRequest(_message.Message):
    __slots__ = ("server_id", "grace")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    grace: _duration_pb2.Duration
    def __init__(self, server_id: _Optional[str] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class DrainServerResponse(_message.Message):
    __slots__ = ("partitions_released", "workers_drained")
    PARTITIONS_RELEASED_FIELD_NUMBER: _ClassVar[int]
    WORKERS_DRAINED_FIELD_NUMBER: _ClassVar[int]
    partitions_released: int
    workers_drained: int
    def __init__(self, partitions_released: _Optional[int] = ..., workers_drained: _Optional[int] = ...) -> None: ...

class Alert(_message.Message):
    __slots__ = ("id", "kind", "severity", "tenant", "job_id", "execution_id", "server_id", "summary", "details", "raised_at", "last_seen_at", "count", "resolved_at")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    RAISED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_AT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: AlertKind
    severity: AlertSeverity
    tenant: str
    job_id: str
    execution_id: str
    server_id: str
    summary: str
    details: _containers.ScalarMap[str, str]
    raised_at: _timestamp_pb2.Timestamp
    last_seen_at: _timestamp_pb2.Timestamp
    count: int
    resolved_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[_Union[AlertKind, str]] = ..., severity: _Optional[_Union[AlertSeverity, str]] = ..., tenant: _Optional[str] = ..., job_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., server_id: _Optional[str] = ..., summary: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ..., raised_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ..., resolved_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListAlertsRequest(_message.Message):
    __slots__ = ("include_resolved", "kinds", "tenant", "page_size", "page_token")
    INCLUDE_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    include_resolved: bool
    kinds: _containers.RepeatedScalarFieldContainer[AlertKind]
    tenant: str
    page_size: int
    page_token: str
    def __init__(self, include_resolved: _Optional[bool] = ..., kinds: _Optional[_Iterable[_Union[AlertKind, str]]] = ..., tenant: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAlertsResponse(_message.Message):
    __slots__ = ("alerts", "next_page_token")
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    alerts: _containers.RepeatedCompositeFieldContainer[Alert]
    next_page_token: str
    def __init__(self, alerts: _Optional[_Iterable[_Union[Alert, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchAlertsRequest(_message.Message):
    __slots__ = ("kinds", "tenant", "include_open")
    KINDS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_OPEN_FIELD_NUMBER: _ClassVar[int]
    kinds: _containers.RepeatedScalarFieldContainer[AlertKind]
    tenant: str
    include_open: bool
    def __init__(self, kinds: _Optional[_Iterable[_Union[AlertKind, str]]] = ..., tenant: _Optional[str] = ..., include_open: _Optional[bool] = ...) -> None: ...

class WatchAlertsResponse(_message.Message):
    __slots__ = ("alert",)
    ALERT_FIELD_NUMBER: _ClassVar[int]
    alert: Alert
    def __init__(self, alert: _Optional[_Union[Alert, _Mapping]] = ...) -> None: ...

class RecomputeSchedulesRequest(_message.Message):
    __slots__ = ("zones", "dry_run")
    ZONES_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    zones: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    def __init__(self, zones: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RecomputeSchedulesResponse(_message.Message):
    __slots__ = ("tzdata_version", "examined", "shifted")
    TZDATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXAMINED_FIELD_NUMBER: _ClassVar[int]
    SHIFTED_FIELD_NUMBER: _ClassVar[int]
    tzdata_version: str
    examined: int
    shifted: _containers.RepeatedCompositeFieldContainer[ShiftedRun]
    def __init__(self, tzdata_version: _Optional[str] = ..., examined: _Optional[int] = ..., shifted: _Optional[_Iterable[_Union[ShiftedRun, _Mapping]]] = ...) -> None: ...

class ShiftedRun(_message.Message):
    __slots__ = ("job_id", "tenant", "old_next_run_at", "new_next_run_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    OLD_NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    NEW_NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    tenant: str
    old_next_run_at: _timestamp_pb2.Timestamp
    new_next_run_at: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., tenant: _Optional[str] = ..., old_next_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., new_next_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
