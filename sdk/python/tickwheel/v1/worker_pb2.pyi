import datetime

from google.protobuf import duration_pb2 as _duration_pb2
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

class ResultOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESULT_OUTCOME_UNSPECIFIED: _ClassVar[ResultOutcome]
    RESULT_OUTCOME_SUCCEEDED: _ClassVar[ResultOutcome]
    RESULT_OUTCOME_FAILED_RETRYABLE: _ClassVar[ResultOutcome]
    RESULT_OUTCOME_FAILED_PERMANENT: _ClassVar[ResultOutcome]
    RESULT_OUTCOME_TIMED_OUT: _ClassVar[ResultOutcome]
    RESULT_OUTCOME_CANCELED: _ClassVar[ResultOutcome]
RESULT_OUTCOME_UNSPECIFIED: ResultOutcome
RESULT_OUTCOME_SUCCEEDED: ResultOutcome
RESULT_OUTCOME_FAILED_RETRYABLE: ResultOutcome
RESULT_OUTCOME_FAILED_PERMANENT: ResultOutcome
RESULT_OUTCOME_TIMED_OUT: ResultOutcome
RESULT_OUTCOME_CANCELED: ResultOutcome

class PullRequest(_message.Message):
    __slots__ = ("hello", "credit", "heartbeat", "result")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    hello: WorkerHello
    credit: WorkerCredit
    heartbeat: WorkerHeartbeat
    result: WorkerResults
    def __init__(self, hello: _Optional[_Union[WorkerHello, _Mapping]] = ..., credit: _Optional[_Union[WorkerCredit, _Mapping]] = ..., heartbeat: _Optional[_Union[WorkerHeartbeat, _Mapping]] = ..., result: _Optional[_Union[WorkerResults, _Mapping]] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("welcome", "assignment", "cancel", "ack", "drain", "heartbeat")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    welcome: ServerWelcome
    assignment: Assignments
    cancel: CancelExecutions
    ack: ResultAcks
    drain: ServerDrain
    heartbeat: ServerHeartbeat
    def __init__(self, welcome: _Optional[_Union[ServerWelcome, _Mapping]] = ..., assignment: _Optional[_Union[Assignments, _Mapping]] = ..., cancel: _Optional[_Union[CancelExecutions, _Mapping]] = ..., ack: _Optional[_Union[ResultAcks, _Mapping]] = ..., drain: _Optional[_Union[ServerDrain, _Mapping]] = ..., heartbeat: _Optional[_Union[ServerHeartbeat, _Mapping]] = ...) -> None: ...

class WorkerHello(_message.Message):
    __slots__ = ("worker_id", "version", "handlers", "http", "slots", "in_flight")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HANDLERS_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    version: str
    handlers: _containers.RepeatedScalarFieldContainer[str]
    http: bool
    slots: int
    in_flight: _containers.RepeatedCompositeFieldContainer[InFlightExecution]
    def __init__(self, worker_id: _Optional[str] = ..., version: _Optional[str] = ..., handlers: _Optional[_Iterable[str]] = ..., http: _Optional[bool] = ..., slots: _Optional[int] = ..., in_flight: _Optional[_Iterable[_Union[InFlightExecution, _Mapping]]] = ...) -> None: ...

class InFlightExecution(_message.Message):
    __slots__ = ("execution_id", "delivery")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    delivery: int
    def __init__(self, execution_id: _Optional[str] = ..., delivery: _Optional[int] = ...) -> None: ...

class WorkerCredit(_message.Message):
    __slots__ = ("credits",)
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    credits: int
    def __init__(self, credits: _Optional[int] = ...) -> None: ...

class WorkerHeartbeat(_message.Message):
    __slots__ = ("executions",)
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    executions: _containers.RepeatedCompositeFieldContainer[ExecutionProgress]
    def __init__(self, executions: _Optional[_Iterable[_Union[ExecutionProgress, _Mapping]]] = ...) -> None: ...

class ExecutionProgress(_message.Message):
    __slots__ = ("execution_id", "delivery", "progress")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    delivery: int
    progress: str
    def __init__(self, execution_id: _Optional[str] = ..., delivery: _Optional[int] = ..., progress: _Optional[str] = ...) -> None: ...

class WorkerResults(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ExecutionResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ExecutionResult, _Mapping]]] = ...) -> None: ...

class ExecutionResult(_message.Message):
    __slots__ = ("execution_id", "delivery", "attempt", "outcome", "error", "output", "retry_after", "started_at", "finished_at")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    delivery: int
    attempt: int
    outcome: ResultOutcome
    error: str
    output: bytes
    retry_after: _duration_pb2.Duration
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    def __init__(self, execution_id: _Optional[str] = ..., delivery: _Optional[int] = ..., attempt: _Optional[int] = ..., outcome: _Optional[_Union[ResultOutcome, str]] = ..., error: _Optional[str] = ..., output: _Optional[bytes] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ServerWelcome(_message.Message):
    __slots__ = ("server_id", "session_id", "heartbeat_interval", "heartbeat_timeout", "reattached", "rejected")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    REATTACHED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    session_id: str
    heartbeat_interval: _duration_pb2.Duration
    heartbeat_timeout: _duration_pb2.Duration
    reattached: _containers.RepeatedCompositeFieldContainer[InFlightExecution]
    rejected: _containers.RepeatedCompositeFieldContainer[InFlightExecution]
    def __init__(self, server_id: _Optional[str] = ..., session_id: _Optional[str] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., reattached: _Optional[_Iterable[_Union[InFlightExecution, _Mapping]]] = ..., rejected: _Optional[_Iterable[_Union[InFlightExecution, _Mapping]]] = ...) -> None: ...

class Assignments(_message.Message):
    __slots__ = ("assignments",)
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    assignments: _containers.RepeatedCompositeFieldContainer[Assignment]
    def __init__(self, assignments: _Optional[_Iterable[_Union[Assignment, _Mapping]]] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("execution_id", "job_id", "tenant", "nominal_at", "due_at", "attempt", "delivery", "payload", "target", "deadline_at", "traceparent", "missed_count", "origin")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_AT_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    MISSED_COUNT_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    job_id: str
    tenant: str
    nominal_at: _timestamp_pb2.Timestamp
    due_at: _timestamp_pb2.Timestamp
    attempt: int
    delivery: int
    payload: bytes
    target: _job_pb2.Target
    deadline_at: _timestamp_pb2.Timestamp
    traceparent: str
    missed_count: int
    origin: _execution_pb2.ExecutionOrigin
    def __init__(self, execution_id: _Optional[str] = ..., job_id: _Optional[str] = ..., tenant: _Optional[str] = ..., nominal_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempt: _Optional[int] = ..., delivery: _Optional[int] = ..., payload: _Optional[bytes] = ..., target: _Optional[_Union[_job_pb2.Target, _Mapping]] = ..., deadline_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., traceparent: _Optional[str] = ..., missed_count: _Optional[int] = ..., origin: _Optional[_Union[_execution_pb2.ExecutionOrigin, str]] = ...) -> None: ...

class CancelExecutions(_message.Message):
    __slots__ = ("executions", "reason")
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    executions: _containers.RepeatedCompositeFieldContainer[InFlightExecution]
    reason: str
    def __init__(self, executions: _Optional[_Iterable[_Union[InFlightExecution, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class ResultAcks(_message.Message):
    __slots__ = ("acks",)
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[ResultAck]
    def __init__(self, acks: _Optional[_Iterable[_Union[ResultAck, _Mapping]]] = ...) -> None: ...

class ResultAck(_message.Message):
    __slots__ = ("execution_id", "delivery", "accepted", "reason")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    delivery: int
    accepted: bool
    reason: str
    def __init__(self, execution_id: _Optional[str] = ..., delivery: _Optional[int] = ..., accepted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class ServerDrain(_message.Message):
    __slots__ = ("deadline_at", "reason")
    DEADLINE_AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    deadline_at: _timestamp_pb2.Timestamp
    reason: str
    def __init__(self, deadline_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ServerHeartbeat(_message.Message):
    __slots__ = ("sent_at",)
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
