import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from tickwheel.v1 import calendar_pb2 as _calendar_pb2
from tickwheel.v1 import execution_pb2 as _execution_pb2
from tickwheel.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_VIEW_UNSPECIFIED: _ClassVar[JobView]
    JOB_VIEW_BASIC: _ClassVar[JobView]
    JOB_VIEW_FULL: _ClassVar[JobView]
JOB_VIEW_UNSPECIFIED: JobView
JOB_VIEW_BASIC: JobView
JOB_VIEW_FULL: JobView

class CreateJobRequest(_message.Message):
    __slots__ = ("job", "request_id")
    JOB_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    request_id: str
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateJobResponse(_message.Message):
    __slots__ = ("job", "created")
    JOB_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    created: bool
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class BatchCreateJobsRequest(_message.Message):
    __slots__ = ("items", "view")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[CreateJobRequest]
    view: JobView
    def __init__(self, items: _Optional[_Iterable[_Union[CreateJobRequest, _Mapping]]] = ..., view: _Optional[_Union[JobView, str]] = ...) -> None: ...

class BatchCreateJobsResponse(_message.Message):
    __slots__ = ("results", "created_count", "existing_count", "failed_count")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXISTING_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILED_COUNT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchCreateJobsResult]
    created_count: int
    existing_count: int
    failed_count: int
    def __init__(self, results: _Optional[_Iterable[_Union[BatchCreateJobsResult, _Mapping]]] = ..., created_count: _Optional[int] = ..., existing_count: _Optional[int] = ..., failed_count: _Optional[int] = ...) -> None: ...

class BatchCreateJobsResult(_message.Message):
    __slots__ = ("job", "error")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job: CreateJobResponse
    error: _status_pb2.Status
    def __init__(self, job: _Optional[_Union[CreateJobResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("id", "next_runs", "revision")
    ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUNS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    id: str
    next_runs: int
    revision: int
    def __init__(self, id: _Optional[str] = ..., next_runs: _Optional[int] = ..., revision: _Optional[int] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job", "next_runs")
    JOB_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUNS_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    next_runs: _containers.RepeatedCompositeFieldContainer[_job_pb2.ScheduledFire]
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., next_runs: _Optional[_Iterable[_Union[_job_pb2.ScheduledFire, _Mapping]]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "state", "name_prefix")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    state: _job_pb2.JobState
    name_prefix: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., state: _Optional[_Union[_job_pb2.JobState, str]] = ..., name_prefix: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateJobRequest(_message.Message):
    __slots__ = ("job", "update_mask", "validate_only", "diff_window")
    JOB_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    DIFF_WINDOW_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    update_mask: _field_mask_pb2.FieldMask
    validate_only: bool
    diff_window: _duration_pb2.Duration
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., validate_only: _Optional[bool] = ..., diff_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class UpdateJobResponse(_message.Message):
    __slots__ = ("job", "run_diff")
    JOB_FIELD_NUMBER: _ClassVar[int]
    RUN_DIFF_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    run_diff: RunDiff
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., run_diff: _Optional[_Union[RunDiff, _Mapping]] = ...) -> None: ...

class RunDiff(_message.Message):
    __slots__ = ("from_at", "to_at", "window_truncated", "added", "added_count", "removed", "removed_count", "moved", "moved_count", "unchanged_count")
    FROM_AT_FIELD_NUMBER: _ClassVar[int]
    TO_AT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    ADDED_COUNT_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_COUNT_FIELD_NUMBER: _ClassVar[int]
    MOVED_FIELD_NUMBER: _ClassVar[int]
    MOVED_COUNT_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_COUNT_FIELD_NUMBER: _ClassVar[int]
    from_at: _timestamp_pb2.Timestamp
    to_at: _timestamp_pb2.Timestamp
    window_truncated: bool
    added: _containers.RepeatedCompositeFieldContainer[_job_pb2.ScheduledFire]
    added_count: int
    removed: _containers.RepeatedCompositeFieldContainer[_job_pb2.ScheduledFire]
    removed_count: int
    moved: _containers.RepeatedCompositeFieldContainer[MovedRun]
    moved_count: int
    unchanged_count: int
    def __init__(self, from_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., to_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window_truncated: _Optional[bool] = ..., added: _Optional[_Iterable[_Union[_job_pb2.ScheduledFire, _Mapping]]] = ..., added_count: _Optional[int] = ..., removed: _Optional[_Iterable[_Union[_job_pb2.ScheduledFire, _Mapping]]] = ..., removed_count: _Optional[int] = ..., moved: _Optional[_Iterable[_Union[MovedRun, _Mapping]]] = ..., moved_count: _Optional[int] = ..., unchanged_count: _Optional[int] = ...) -> None: ...

class MovedRun(_message.Message):
    __slots__ = ("before", "after")
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    before: _job_pb2.ScheduledFire
    after: _job_pb2.ScheduledFire
    def __init__(self, before: _Optional[_Union[_job_pb2.ScheduledFire, _Mapping]] = ..., after: _Optional[_Union[_job_pb2.ScheduledFire, _Mapping]] = ...) -> None: ...

class ListJobRevisionsRequest(_message.Message):
    __slots__ = ("id", "page_size", "page_token")
    ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    page_size: int
    page_token: str
    def __init__(self, id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListJobRevisionsResponse(_message.Message):
    __slots__ = ("revisions", "next_page_token")
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[JobRevision]
    next_page_token: str
    def __init__(self, revisions: _Optional[_Iterable[_Union[JobRevision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class JobRevision(_message.Message):
    __slots__ = ("version", "job", "changed_at", "changed_by", "update_mask", "changed_to_version")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    CHANGED_AT_FIELD_NUMBER: _ClassVar[int]
    CHANGED_BY_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    CHANGED_TO_VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    job: _job_pb2.Job
    changed_at: _timestamp_pb2.Timestamp
    changed_by: str
    update_mask: _field_mask_pb2.FieldMask
    changed_to_version: int
    def __init__(self, version: _Optional[int] = ..., job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., changed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., changed_by: _Optional[str] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., changed_to_version: _Optional[int] = ...) -> None: ...

class BatchUpdateJobsRequest(_message.Message):
    __slots__ = ("items", "view")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[UpdateJobRequest]
    view: JobView
    def __init__(self, items: _Optional[_Iterable[_Union[UpdateJobRequest, _Mapping]]] = ..., view: _Optional[_Union[JobView, str]] = ...) -> None: ...

class BatchUpdateJobsResponse(_message.Message):
    __slots__ = ("results", "updated_count", "failed_count")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILED_COUNT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchUpdateJobsResult]
    updated_count: int
    failed_count: int
    def __init__(self, results: _Optional[_Iterable[_Union[BatchUpdateJobsResult, _Mapping]]] = ..., updated_count: _Optional[int] = ..., failed_count: _Optional[int] = ...) -> None: ...

class BatchUpdateJobsResult(_message.Message):
    __slots__ = ("job", "error")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job: UpdateJobResponse
    error: _status_pb2.Status
    def __init__(self, job: _Optional[_Union[UpdateJobResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class DeleteJobRequest(_message.Message):
    __slots__ = ("id", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: str
    version: int
    def __init__(self, id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class DeleteJobResponse(_message.Message):
    __slots__ = ("canceled_executions",)
    CANCELED_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    canceled_executions: int
    def __init__(self, canceled_executions: _Optional[int] = ...) -> None: ...

class BatchDeleteJobsRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[DeleteJobRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[DeleteJobRequest, _Mapping]]] = ...) -> None: ...

class BatchDeleteJobsResponse(_message.Message):
    __slots__ = ("results", "deleted_count", "failed_count")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILED_COUNT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchDeleteJobsResult]
    deleted_count: int
    failed_count: int
    def __init__(self, results: _Optional[_Iterable[_Union[BatchDeleteJobsResult, _Mapping]]] = ..., deleted_count: _Optional[int] = ..., failed_count: _Optional[int] = ...) -> None: ...

class BatchDeleteJobsResult(_message.Message):
    __slots__ = ("deleted", "error")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    deleted: DeleteJobResponse
    error: _status_pb2.Status
    def __init__(self, deleted: _Optional[_Union[DeleteJobResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class PauseJobRequest(_message.Message):
    __slots__ = ("id", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PauseJobResponse(_message.Message):
    __slots__ = ("job", "canceled_executions", "held_executions")
    JOB_FIELD_NUMBER: _ClassVar[int]
    CANCELED_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    HELD_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    canceled_executions: int
    held_executions: int
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., canceled_executions: _Optional[int] = ..., held_executions: _Optional[int] = ...) -> None: ...

class BatchPauseJobsRequest(_message.Message):
    __slots__ = ("items", "view")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[PauseJobRequest]
    view: JobView
    def __init__(self, items: _Optional[_Iterable[_Union[PauseJobRequest, _Mapping]]] = ..., view: _Optional[_Union[JobView, str]] = ...) -> None: ...

class BatchPauseJobsResponse(_message.Message):
    __slots__ = ("results", "paused_count", "failed_count")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILED_COUNT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchPauseJobsResult]
    paused_count: int
    failed_count: int
    def __init__(self, results: _Optional[_Iterable[_Union[BatchPauseJobsResult, _Mapping]]] = ..., paused_count: _Optional[int] = ..., failed_count: _Optional[int] = ...) -> None: ...

class BatchPauseJobsResult(_message.Message):
    __slots__ = ("job", "error")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job: PauseJobResponse
    error: _status_pb2.Status
    def __init__(self, job: _Optional[_Union[PauseJobResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class ResumeJobRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ResumeJobResponse(_message.Message):
    __slots__ = ("job", "skipped", "released_executions")
    JOB_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    skipped: _execution_pb2.SkipRange
    released_executions: int
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., skipped: _Optional[_Union[_execution_pb2.SkipRange, _Mapping]] = ..., released_executions: _Optional[int] = ...) -> None: ...

class BatchResumeJobsRequest(_message.Message):
    __slots__ = ("items", "view")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ResumeJobRequest]
    view: JobView
    def __init__(self, items: _Optional[_Iterable[_Union[ResumeJobRequest, _Mapping]]] = ..., view: _Optional[_Union[JobView, str]] = ...) -> None: ...

class BatchResumeJobsResponse(_message.Message):
    __slots__ = ("results", "resumed_count", "failed_count")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILED_COUNT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchResumeJobsResult]
    resumed_count: int
    failed_count: int
    def __init__(self, results: _Optional[_Iterable[_Union[BatchResumeJobsResult, _Mapping]]] = ..., resumed_count: _Optional[int] = ..., failed_count: _Optional[int] = ...) -> None: ...

class BatchResumeJobsResult(_message.Message):
    __slots__ = ("job", "error")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job: ResumeJobResponse
    error: _status_pb2.Status
    def __init__(self, job: _Optional[_Union[ResumeJobResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class TriggerJobRequest(_message.Message):
    __slots__ = ("id", "request_id", "payload", "allow_overlap")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    ALLOW_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    id: str
    request_id: str
    payload: bytes
    allow_overlap: bool
    def __init__(self, id: _Optional[str] = ..., request_id: _Optional[str] = ..., payload: _Optional[bytes] = ..., allow_overlap: _Optional[bool] = ...) -> None: ...

class TriggerJobResponse(_message.Message):
    __slots__ = ("execution", "created")
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    execution: _execution_pb2.Execution
    created: bool
    def __init__(self, execution: _Optional[_Union[_execution_pb2.Execution, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class BackfillJobRequest(_message.Message):
    __slots__ = ("id", "from_at", "to_at", "dry_run", "allow_overlap")
    ID_FIELD_NUMBER: _ClassVar[int]
    FROM_AT_FIELD_NUMBER: _ClassVar[int]
    TO_AT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    ALLOW_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    id: str
    from_at: _timestamp_pb2.Timestamp
    to_at: _timestamp_pb2.Timestamp
    dry_run: bool
    allow_overlap: bool
    def __init__(self, id: _Optional[str] = ..., from_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., to_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dry_run: _Optional[bool] = ..., allow_overlap: _Optional[bool] = ...) -> None: ...

class BackfillJobResponse(_message.Message):
    __slots__ = ("occurrences", "created_count", "existing_count")
    OCCURRENCES_FIELD_NUMBER: _ClassVar[int]
    CREATED_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXISTING_COUNT_FIELD_NUMBER: _ClassVar[int]
    occurrences: _containers.RepeatedCompositeFieldContainer[BackfillOccurrence]
    created_count: int
    existing_count: int
    def __init__(self, occurrences: _Optional[_Iterable[_Union[BackfillOccurrence, _Mapping]]] = ..., created_count: _Optional[int] = ..., existing_count: _Optional[int] = ...) -> None: ...

class BackfillOccurrence(_message.Message):
    __slots__ = ("execution_id", "nominal_at", "already_exists")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_AT_FIELD_NUMBER: _ClassVar[int]
    ALREADY_EXISTS_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    nominal_at: _timestamp_pb2.Timestamp
    already_exists: bool
    def __init__(self, execution_id: _Optional[str] = ..., nominal_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., already_exists: _Optional[bool] = ...) -> None: ...

class PreviewScheduleRequest(_message.Message):
    __slots__ = ("job_id", "job", "after", "count")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job: _job_pb2.Job
    after: _timestamp_pb2.Timestamp
    count: int
    def __init__(self, job_id: _Optional[str] = ..., job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ...) -> None: ...

class PreviewScheduleResponse(_message.Message):
    __slots__ = ("fires", "tzdata_version")
    FIRES_FIELD_NUMBER: _ClassVar[int]
    TZDATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    fires: _containers.RepeatedCompositeFieldContainer[_job_pb2.ScheduledFire]
    tzdata_version: str
    def __init__(self, fires: _Optional[_Iterable[_Union[_job_pb2.ScheduledFire, _Mapping]]] = ..., tzdata_version: _Optional[str] = ...) -> None: ...

class GetExecutionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetExecutionResponse(_message.Message):
    __slots__ = ("execution",)
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    execution: _execution_pb2.Execution
    def __init__(self, execution: _Optional[_Union[_execution_pb2.Execution, _Mapping]] = ...) -> None: ...

class ListExecutionsRequest(_message.Message):
    __slots__ = ("job_id", "page_size", "page_token", "statuses", "from_at", "to_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    FROM_AT_FIELD_NUMBER: _ClassVar[int]
    TO_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    page_size: int
    page_token: str
    statuses: _containers.RepeatedScalarFieldContainer[_job_pb2.ExecutionStatus]
    from_at: _timestamp_pb2.Timestamp
    to_at: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[_job_pb2.ExecutionStatus, str]]] = ..., from_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., to_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListExecutionsResponse(_message.Message):
    __slots__ = ("executions", "skips", "next_page_token")
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    SKIPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    executions: _containers.RepeatedCompositeFieldContainer[_execution_pb2.Execution]
    skips: _containers.RepeatedCompositeFieldContainer[_execution_pb2.SkipRange]
    next_page_token: str
    def __init__(self, executions: _Optional[_Iterable[_Union[_execution_pb2.Execution, _Mapping]]] = ..., skips: _Optional[_Iterable[_Union[_execution_pb2.SkipRange, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelExecutionRequest(_message.Message):
    __slots__ = ("id", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelExecutionResponse(_message.Message):
    __slots__ = ("execution",)
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    execution: _execution_pb2.Execution
    def __init__(self, execution: _Optional[_Union[_execution_pb2.Execution, _Mapping]] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ("job_id", "page_size", "page_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    page_size: int
    page_token: str
    def __init__(self, job_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ("executions", "next_page_token")
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    executions: _containers.RepeatedCompositeFieldContainer[_execution_pb2.Execution]
    next_page_token: str
    def __init__(self, executions: _Optional[_Iterable[_Union[_execution_pb2.Execution, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ReplayDeadLetterRequest(_message.Message):
    __slots__ = ("execution_id",)
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    def __init__(self, execution_id: _Optional[str] = ...) -> None: ...

class ReplayDeadLetterResponse(_message.Message):
    __slots__ = ("execution",)
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    execution: _execution_pb2.Execution
    def __init__(self, execution: _Optional[_Union[_execution_pb2.Execution, _Mapping]] = ...) -> None: ...
