import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from tickwheel.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecutionOrigin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXECUTION_ORIGIN_UNSPECIFIED: _ClassVar[ExecutionOrigin]
    EXECUTION_ORIGIN_SCHEDULED: _ClassVar[ExecutionOrigin]
    EXECUTION_ORIGIN_TRIGGER: _ClassVar[ExecutionOrigin]
    EXECUTION_ORIGIN_BACKFILL: _ClassVar[ExecutionOrigin]

class AttemptStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTEMPT_STATUS_UNSPECIFIED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_RUNNING: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_SUCCEEDED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_FAILED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_TIMED_OUT: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_LOST: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_CANCELED: _ClassVar[AttemptStatus]

class SkipReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SKIP_REASON_UNSPECIFIED: _ClassVar[SkipReason]
    SKIP_REASON_OVERLAP: _ClassVar[SkipReason]
    SKIP_REASON_MISFIRE: _ClassVar[SkipReason]
    SKIP_REASON_JOB_PAUSED: _ClassVar[SkipReason]
    SKIP_REASON_TENANT_PAUSED: _ClassVar[SkipReason]
    SKIP_REASON_CALENDAR: _ClassVar[SkipReason]
    SKIP_REASON_BACKLOG: _ClassVar[SkipReason]
EXECUTION_ORIGIN_UNSPECIFIED: ExecutionOrigin
EXECUTION_ORIGIN_SCHEDULED: ExecutionOrigin
EXECUTION_ORIGIN_TRIGGER: ExecutionOrigin
EXECUTION_ORIGIN_BACKFILL: ExecutionOrigin
ATTEMPT_STATUS_UNSPECIFIED: AttemptStatus
ATTEMPT_STATUS_RUNNING: AttemptStatus
ATTEMPT_STATUS_SUCCEEDED: AttemptStatus
ATTEMPT_STATUS_FAILED: AttemptStatus
ATTEMPT_STATUS_TIMED_OUT: AttemptStatus
ATTEMPT_STATUS_LOST: AttemptStatus
ATTEMPT_STATUS_CANCELED: AttemptStatus
SKIP_REASON_UNSPECIFIED: SkipReason
SKIP_REASON_OVERLAP: SkipReason
SKIP_REASON_MISFIRE: SkipReason
SKIP_REASON_JOB_PAUSED: SkipReason
SKIP_REASON_TENANT_PAUSED: SkipReason
SKIP_REASON_CALENDAR: SkipReason
SKIP_REASON_BACKLOG: SkipReason

class Execution(_message.Message):
    __slots__ = ("id", "job_id", "tenant", "origin", "nominal_at", "due_at", "ready_at", "attempt", "delivery", "status", "owner", "worker_id", "error", "dead_reason", "missed_count", "payload", "attempts", "created_at", "finished_at", "reap_count")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_AT_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    READY_AT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DEAD_REASON_FIELD_NUMBER: _ClassVar[int]
    MISSED_COUNT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    REAP_COUNT_FIELD_NUMBER: _ClassVar[int]
    id: str
    job_id: str
    tenant: str
    origin: ExecutionOrigin
    nominal_at: _timestamp_pb2.Timestamp
    due_at: _timestamp_pb2.Timestamp
    ready_at: _timestamp_pb2.Timestamp
    attempt: int
    delivery: int
    status: _job_pb2.ExecutionStatus
    owner: str
    worker_id: str
    error: str
    dead_reason: str
    missed_count: int
    payload: bytes
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    created_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    reap_count: int
    def __init__(self, id: _Optional[str] = ..., job_id: _Optional[str] = ..., tenant: _Optional[str] = ..., origin: _Optional[_Union[ExecutionOrigin, str]] = ..., nominal_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ready_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempt: _Optional[int] = ..., delivery: _Optional[int] = ..., status: _Optional[_Union[_job_pb2.ExecutionStatus, str]] = ..., owner: _Optional[str] = ..., worker_id: _Optional[str] = ..., error: _Optional[str] = ..., dead_reason: _Optional[str] = ..., missed_count: _Optional[int] = ..., payload: _Optional[bytes] = ..., attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reap_count: _Optional[int] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ("attempt", "delivery", "status", "started_at", "finished_at", "lateness", "worker_id", "error", "output")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    LATENESS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    delivery: int
    status: AttemptStatus
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    lateness: _duration_pb2.Duration
    worker_id: str
    error: str
    output: bytes
    def __init__(self, attempt: _Optional[int] = ..., delivery: _Optional[int] = ..., status: _Optional[_Union[AttemptStatus, str]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lateness: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., worker_id: _Optional[str] = ..., error: _Optional[str] = ..., output: _Optional[bytes] = ...) -> None: ...

class SkipRange(_message.Message):
    __slots__ = ("job_id", "from_at", "to_at", "count", "reason", "created_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_AT_FIELD_NUMBER: _ClassVar[int]
    TO_AT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    from_at: _timestamp_pb2.Timestamp
    to_at: _timestamp_pb2.Timestamp
    count: int
    reason: SkipReason
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., from_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., to_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ..., reason: _Optional[_Union[SkipReason, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
