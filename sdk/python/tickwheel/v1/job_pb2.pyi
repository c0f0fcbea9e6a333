import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CalendarRule(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CALENDAR_RULE_UNSPECIFIED: _ClassVar[CalendarRule]
    CALENDAR_RULE_ONLY: _ClassVar[CalendarRule]
    CALENDAR_RULE_NEXT: _ClassVar[CalendarRule]
    CALENDAR_RULE_PREVIOUS: _ClassVar[CalendarRule]
    CALENDAR_RULE_SKIP: _ClassVar[CalendarRule]

class DstGapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DST_GAP_POLICY_UNSPECIFIED: _ClassVar[DstGapPolicy]
    DST_GAP_POLICY_AUTO: _ClassVar[DstGapPolicy]
    DST_GAP_POLICY_SHIFT: _ClassVar[DstGapPolicy]
    DST_GAP_POLICY_SKIP: _ClassVar[DstGapPolicy]

class DstRepeatPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DST_REPEAT_POLICY_UNSPECIFIED: _ClassVar[DstRepeatPolicy]
    DST_REPEAT_POLICY_AUTO: _ClassVar[DstRepeatPolicy]
    DST_REPEAT_POLICY_ONCE: _ClassVar[DstRepeatPolicy]
    DST_REPEAT_POLICY_BOTH: _ClassVar[DstRepeatPolicy]

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_POLICY_UNSPECIFIED: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_SKIP: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_QUEUE_ONE: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_ALLOW: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_REPLACE: _ClassVar[OverlapPolicy]

class MisfirePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MISFIRE_POLICY_UNSPECIFIED: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_RUN_ONCE: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_RUN_ALL: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_SKIP: _ClassVar[MisfirePolicy]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_ACTIVE: _ClassVar[JobState]
    JOB_STATE_PAUSED: _ClassVar[JobState]
    JOB_STATE_COMPLETED: _ClassVar[JobState]

class ExecutionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXECUTION_STATUS_UNSPECIFIED: _ClassVar[ExecutionStatus]
    EXECUTION_STATUS_SCHEDULED: _ClassVar[ExecutionStatus]
    EXECUTION_STATUS_WAITING: _ClassVar[ExecutionStatus]
    EXECUTION_STATUS_RUNNING: _ClassVar[ExecutionStatus]
    EXECUTION_STATUS_SUCCEEDED: _ClassVar[ExecutionStatus]
    EXECUTION_STATUS_DEAD: _ClassVar[ExecutionStatus]
    EXECUTION_STATUS_CANCELED: _ClassVar[ExecutionStatus]
CALENDAR_RULE_UNSPECIFIED: CalendarRule
CALENDAR_RULE_ONLY: CalendarRule
CALENDAR_RULE_NEXT: CalendarRule
CALENDAR_RULE_PREVIOUS: CalendarRule
CALENDAR_RULE_SKIP: CalendarRule
DST_GAP_POLICY_UNSPECIFIED: DstGapPolicy
DST_GAP_POLICY_AUTO: DstGapPolicy
DST_GAP_POLICY_SHIFT: DstGapPolicy
DST_GAP_POLICY_SKIP: DstGapPolicy
DST_REPEAT_POLICY_UNSPECIFIED: DstRepeatPolicy
DST_REPEAT_POLICY_AUTO: DstRepeatPolicy
DST_REPEAT_POLICY_ONCE: DstRepeatPolicy
DST_REPEAT_POLICY_BOTH: DstRepeatPolicy
OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy
OVERLAP_POLICY_SKIP: OverlapPolicy
OVERLAP_POLICY_QUEUE_ONE: OverlapPolicy
OVERLAP_POLICY_ALLOW: OverlapPolicy
OVERLAP_POLICY_REPLACE: OverlapPolicy
MISFIRE_POLICY_UNSPECIFIED: MisfirePolicy
MISFIRE_POLICY_RUN_ONCE: MisfirePolicy
MISFIRE_POLICY_RUN_ALL: MisfirePolicy
MISFIRE_POLICY_SKIP: MisfirePolicy
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_ACTIVE: JobState
JOB_STATE_PAUSED: JobState
JOB_STATE_COMPLETED: JobState
EXECUTION_STATUS_UNSPECIFIED: ExecutionStatus
EXECUTION_STATUS_SCHEDULED: ExecutionStatus
EXECUTION_STATUS_WAITING: ExecutionStatus
EXECUTION_STATUS_RUNNING: ExecutionStatus
EXECUTION_STATUS_SUCCEEDED: ExecutionStatus
EXECUTION_STATUS_DEAD: ExecutionStatus
EXECUTION_STATUS_CANCELED: ExecutionStatus

class Job(_message.Message):
    __slots__ = ("id", "tenant", "name", "schedule", "dst_policy", "jitter", "start_at", "end_at", "max_runs", "target", "payload", "timeout", "retry_policy", "overlap_policy", "misfire_policy", "misfire_threshold", "misfire_run_all_limit", "lateness_threshold", "concurrency_keys", "labels", "state", "next_run_at", "next_due_at", "run_count", "version", "tzdata_version", "last_run", "created_at", "updated_at", "pause_reason", "calendar")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    DST_POLICY_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    START_AT_FIELD_NUMBER: _ClassVar[int]
    END_AT_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_POLICY_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_POLICY_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_RUN_ALL_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LATENESS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEYS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    NEXT_DUE_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_COUNT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TZDATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    PAUSE_REASON_FIELD_NUMBER: _ClassVar[int]
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant: str
    name: str
    schedule: Schedule
    dst_policy: DstPolicy
    jitter: Jitter
    start_at: _timestamp_pb2.Timestamp
    end_at: _timestamp_pb2.Timestamp
    max_runs: int
    target: Target
    payload: bytes
    timeout: _duration_pb2.Duration
    retry_policy: RetryPolicy
    overlap_policy: OverlapPolicy
    misfire_policy: MisfirePolicy
    misfire_threshold: _duration_pb2.Duration
    misfire_run_all_limit: int
    lateness_threshold: _duration_pb2.Duration
    concurrency_keys: _containers.RepeatedCompositeFieldContainer[ConcurrencyKey]
    labels: _containers.ScalarMap[str, str]
    state: JobState
    next_run_at: _timestamp_pb2.Timestamp
    next_due_at: _timestamp_pb2.Timestamp
    run_count: int
    version: int
    tzdata_version: str
    last_run: LastRun
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    pause_reason: str
    calendar: JobCalendar
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ..., name: _Optional[str] = ..., schedule: _Optional[_Union[Schedule, _Mapping]] = ..., dst_policy: _Optional[_Union[DstPolicy, _Mapping]] = ..., jitter: _Optional[_Union[Jitter, _Mapping]] = ..., start_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_runs: _Optional[int] = ..., target: _Optional[_Union[Target, _Mapping]] = ..., payload: _Optional[bytes] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., overlap_policy: _Optional[_Union[OverlapPolicy, str]] = ..., misfire_policy: _Optional[_Union[MisfirePolicy, str]] = ..., misfire_threshold: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., misfire_run_all_limit: _Optional[int] = ..., lateness_threshold: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., concurrency_keys: _Optional[_Iterable[_Union[ConcurrencyKey, _Mapping]]] = ..., labels: _Optional[_Mapping[str, str]] = ..., state: _Optional[_Union[JobState, str]] = ..., next_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_count: _Optional[int] = ..., version: _Optional[int] = ..., tzdata_version: _Optional[str] = ..., last_run: _Optional[_Union[LastRun, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pause_reason: _Optional[str] = ..., calendar: _Optional[_Union[JobCalendar, _Mapping]] = ...) -> None: ...

class JobCalendar(_message.Message):
    __slots__ = ("name", "rule")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    name: str
    rule: CalendarRule
    def __init__(self, name: _Optional[str] = ..., rule: _Optional[_Union[CalendarRule, str]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("cron", "once_at", "local")
    CRON_FIELD_NUMBER: _ClassVar[int]
    ONCE_AT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    cron: CronSchedule
    once_at: _timestamp_pb2.Timestamp
    local: LocalTimeSchedule
    def __init__(self, cron: _Optional[_Union[CronSchedule, _Mapping]] = ..., once_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., local: _Optional[_Union[LocalTimeSchedule, _Mapping]] = ...) -> None: ...

class CronSchedule(_message.Message):
    __slots__ = ("expression", "time_zone")
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    expression: str
    time_zone: str
    def __init__(self, expression: _Optional[str] = ..., time_zone: _Optional[str] = ...) -> None: ...

class LocalTimeSchedule(_message.Message):
    __slots__ = ("local_time", "time_zone")
    LOCAL_TIME_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    local_time: str
    time_zone: str
    def __init__(self, local_time: _Optional[str] = ..., time_zone: _Optional[str] = ...) -> None: ...

class DstPolicy(_message.Message):
    __slots__ = ("gap", "repeat")
    GAP_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    gap: DstGapPolicy
    repeat: DstRepeatPolicy
    def __init__(self, gap: _Optional[_Union[DstGapPolicy, str]] = ..., repeat: _Optional[_Union[DstRepeatPolicy, str]] = ...) -> None: ...

class Jitter(_message.Message):
    __slots__ = ("exact", "window")
    EXACT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    exact: bool
    window: _duration_pb2.Duration
    def __init__(self, exact: _Optional[bool] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ("http", "handler")
    HTTP_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    http: HttpTarget
    handler: HandlerTarget
    def __init__(self, http: _Optional[_Union[HttpTarget, _Mapping]] = ..., handler: _Optional[_Union[HandlerTarget, _Mapping]] = ...) -> None: ...

class HttpTarget(_message.Message):
    __slots__ = ("url", "method", "headers")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    url: str
    method: str
    headers: _containers.ScalarMap[str, str]
    def __init__(self, url: _Optional[str] = ..., method: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class HandlerTarget(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "initial_backoff", "max_backoff")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    MAX_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    initial_backoff: _duration_pb2.Duration
    max_backoff: _duration_pb2.Duration
    def __init__(self, max_attempts: _Optional[int] = ..., initial_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ConcurrencyKey(_message.Message):
    __slots__ = ("key", "limit")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    key: str
    limit: int
    def __init__(self, key: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class LastRun(_message.Message):
    __slots__ = ("execution_id", "nominal_at", "status", "finished_at", "error")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    nominal_at: _timestamp_pb2.Timestamp
    status: ExecutionStatus
    finished_at: _timestamp_pb2.Timestamp
    error: str
    def __init__(self, execution_id: _Optional[str] = ..., nominal_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[ExecutionStatus, str]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class ScheduledFire(_message.Message):
    __slots__ = ("nominal_at", "due_at", "local_time", "note", "skipped")
    NOMINAL_AT_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_TIME_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    nominal_at: _timestamp_pb2.Timestamp
    due_at: _timestamp_pb2.Timestamp
    local_time: str
    note: str
    skipped: bool
    def __init__(self, nominal_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., local_time: _Optional[str] = ..., note: _Optional[str] = ..., skipped: _Optional[bool] = ...) -> None: ...
