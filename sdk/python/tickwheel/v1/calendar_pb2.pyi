import datetime

from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Weekday(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WEEKDAY_UNSPECIFIED: _ClassVar[Weekday]
    WEEKDAY_MONDAY: _ClassVar[Weekday]
    WEEKDAY_TUESDAY: _ClassVar[Weekday]
    WEEKDAY_WEDNESDAY: _ClassVar[Weekday]
    WEEKDAY_THURSDAY: _ClassVar[Weekday]
    WEEKDAY_FRIDAY: _ClassVar[Weekday]
    WEEKDAY_SATURDAY: _ClassVar[Weekday]
    WEEKDAY_SUNDAY: _ClassVar[Weekday]
WEEKDAY_UNSPECIFIED: Weekday
WEEKDAY_MONDAY: Weekday
WEEKDAY_TUESDAY: Weekday
WEEKDAY_WEDNESDAY: Weekday
WEEKDAY_THURSDAY: Weekday
WEEKDAY_FRIDAY: Weekday
WEEKDAY_SATURDAY: Weekday
WEEKDAY_SUNDAY: Weekday

class Calendar(_message.Message):
    __slots__ = ("name", "tenant", "time_zone", "business_days", "holidays", "half_days", "version", "created_at", "updated_at", "holiday_count", "half_day_count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    BUSINESS_DAYS_FIELD_NUMBER: _ClassVar[int]
    HOLIDAYS_FIELD_NUMBER: _ClassVar[int]
    HALF_DAYS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    HOLIDAY_COUNT_FIELD_NUMBER: _ClassVar[int]
    HALF_DAY_COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    tenant: str
    time_zone: str
    business_days: _containers.RepeatedScalarFieldContainer[Weekday]
    holidays: _containers.RepeatedScalarFieldContainer[str]
    half_days: _containers.RepeatedScalarFieldContainer[str]
    version: int
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    holiday_count: int
    half_day_count: int
    def __init__(self, name: _Optional[str] = ..., tenant: _Optional[str] = ..., time_zone: _Optional[str] = ..., business_days: _Optional[_Iterable[_Union[Weekday, str]]] = ..., holidays: _Optional[_Iterable[str]] = ..., half_days: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., holiday_count: _Optional[int] = ..., half_day_count: _Optional[int] = ...) -> None: ...

class CreateCalendarRequest(_message.Message):
    __slots__ = ("calendar", "request_id")
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    calendar: Calendar
    request_id: str
    def __init__(self, calendar: _Optional[_Union[Calendar, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateCalendarResponse(_message.Message):
    __slots__ = ("calendar", "created")
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    calendar: Calendar
    created: bool
    def __init__(self, calendar: _Optional[_Union[Calendar, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetCalendarRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetCalendarResponse(_message.Message):
    __slots__ = ("calendar",)
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    calendar: Calendar
    def __init__(self, calendar: _Optional[_Union[Calendar, _Mapping]] = ...) -> None: ...

class ListCalendarsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCalendarsResponse(_message.Message):
    __slots__ = ("calendars", "next_page_token")
    CALENDARS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    calendars: _containers.RepeatedCompositeFieldContainer[Calendar]
    next_page_token: str
    def __init__(self, calendars: _Optional[_Iterable[_Union[Calendar, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateCalendarRequest(_message.Message):
    __slots__ = ("calendar", "update_mask")
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    calendar: Calendar
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, calendar: _Optional[_Union[Calendar, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateCalendarResponse(_message.Message):
    __slots__ = ("calendar", "changed_run_count", "changed_runs", "job_count")
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    CHANGED_RUN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHANGED_RUNS_FIELD_NUMBER: _ClassVar[int]
    JOB_COUNT_FIELD_NUMBER: _ClassVar[int]
    calendar: Calendar
    changed_run_count: int
    changed_runs: _containers.RepeatedCompositeFieldContainer[CalendarRunChange]
    job_count: int
    def __init__(self, calendar: _Optional[_Union[Calendar, _Mapping]] = ..., changed_run_count: _Optional[int] = ..., changed_runs: _Optional[_Iterable[_Union[CalendarRunChange, _Mapping]]] = ..., job_count: _Optional[int] = ...) -> None: ...

class CalendarRunChange(_message.Message):
    __slots__ = ("execution_id", "job_id", "nominal_at", "old_due_at", "new_due_at")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_AT_FIELD_NUMBER: _ClassVar[int]
    OLD_DUE_AT_FIELD_NUMBER: _ClassVar[int]
    NEW_DUE_AT_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    job_id: str
    nominal_at: _timestamp_pb2.Timestamp
    old_due_at: _timestamp_pb2.Timestamp
    new_due_at: _timestamp_pb2.Timestamp
    def __init__(self, execution_id: _Optional[str] = ..., job_id: _Optional[str] = ..., nominal_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., old_due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., new_due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeleteCalendarRequest(_message.Message):
    __slots__ = ("name", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class DeleteCalendarResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
