"""SchedulerService's calendar calls: the checks of a Calendar, and the five RPCs over the calendar store.

:func:`normalise_calendar` is the whole contract of a calendar's definition
(``proto/tickwheel/v1/calendar.proto``): every field checked, every
violation named (``calendar.holidays[3]``), duplicates folded, lists sorted.
:class:`CalendarCalls` serves the five calendar RPCs, which the
SchedulerService servicer delegates to it.
"""

from __future__ import annotations

import asyncio
import re
from datetime import date

from google.protobuf import field_mask_pb2
from tickwheel.v1 import calendar_pb2

from tickwheel.shared.ids import from_us

from ..auth.authenticator import Authenticator
from ..auth.ratelimit import to_its_end
from ..errors import FieldViolation, InvalidArgument, VersionConflict
from ..schedule import businessdays, zones
from ..store.calendars import CalendarDefinition, CalendarRecord, CalendarStore
from ..store.calendaruse import RunChange
from . import convert, validate
from .status import rpc
from .text import shown

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
MAX_DATES = 10_000
"""The most entries ``holidays`` (and, apart, ``half_days``) may hold."""
MAX_WEEKDAY_ENTRIES = 32
"""The most entries ``business_days`` may hold, repeats included (each
weekday once is 7; repeats are folded). A packed int32 is a byte an entry:
a 4 MiB calendar held 4 million, each read in Python on the event loop,
and as many bad ones made a violation each: 7 s and 700 MB a call."""
MUTABLE_FIELDS = ("time_zone", "business_days", "holidays", "half_days")
"""What an empty UpdateCalendar mask means."""
OUTPUT_ONLY_FIELDS = frozenset({"tenant", "version", "created_at", "updated_at", "holiday_count", "half_day_count"})
_WEEKDAYS = range(1, 8)  # calendar_pb2.Weekday values, ISO numbering


def check_name(value: str, field: str) -> str:
    if not NAME.match(value):
        raise InvalidArgument.field(
            field, "required: 1 to 64 characters of [A-Za-z0-9_.-] starting with a letter or a digit"
        )
    return value


def _dates(values, field: str, violations: list[FieldViolation]) -> list[date]:
    """The dates of ``values`` (entries ``YYYY-MM-DD`` within the bounds),
    sorted, duplicates folded; a violation per bad entry."""
    if len(values) > MAX_DATES:
        violations.append(FieldViolation(field, f"at most {MAX_DATES} entries, not {len(values)}"))
        return []
    found: set[date] = set()
    for index, text in enumerate(values):
        try:
            day = date.fromisoformat(text) if DATE.match(text) else None
        except ValueError:
            day = None
        if day is None:
            violations.append(FieldViolation(f"{field}[{index}]", "not a date YYYY-MM-DD"))
        elif not businessdays.MIN_DATE <= day <= businessdays.MAX_DATE:
            violations.append(FieldViolation(
                f"{field}[{index}]",
                f"{text} is outside {businessdays.MIN_DATE.isoformat()} to {businessdays.MAX_DATE.isoformat()}",
            ))  # fmt: skip
        else:
            found.add(day)
    return sorted(found)


def normalise_calendar(message: calendar_pb2.Calendar, field: str = "calendar") -> calendar_pb2.Calendar:
    """The definition ``message`` states, as stored: zone checked against
    the pinned tzdata, business weekdays folded and in order (empty: Monday
    to Friday), dates folded and sorted, name and output-only fields
    cleared. INVALID_ARGUMENT naming every field (``<field>.holidays[i]``)
    that breaks the contract otherwise."""
    violations: list[FieldViolation] = []
    zone = message.time_zone
    if not zone:
        violations.append(FieldViolation(f"{field}.time_zone", "required: an IANA time zone"))
    elif len(zone) > 64 or zone not in zones.default_registry().keys():
        violations.append(FieldViolation(f"{field}.time_zone", f"unknown time zone {shown(zone)!r}"))
    weekdays = set()
    listed = message.business_days
    if len(listed) > MAX_WEEKDAY_ENTRIES:
        violations.append(
            FieldViolation(f"{field}.business_days", f"at most {MAX_WEEKDAY_ENTRIES} entries, not {len(listed)}")
        )
        listed = ()
    for index, value in enumerate(listed):
        if value in _WEEKDAYS:
            weekdays.add(value)
        else:
            violations.append(FieldViolation(f"{field}.business_days[{index}]", "not a weekday (1 Monday to 7 Sunday)"))
    holidays = _dates(message.holidays, f"{field}.holidays", violations)
    half_days = _dates(message.half_days, f"{field}.half_days", violations)
    chosen = weekdays or set(businessdays.MONDAY_TO_FRIDAY)
    closed = set(holidays)
    positions = {text: index for index, text in enumerate(message.half_days)} if half_days else {}
    for day in half_days:
        if day in closed or day.isoweekday() not in chosen:
            index = positions.get(day.isoformat(), 0)
            reason = "is a holiday" if day in closed else "does not fall on a business weekday"
            violations.append(FieldViolation(f"{field}.half_days[{index}]", f"{day.isoformat()} {reason}"))
    if violations:
        raise InvalidArgument(violations)
    return calendar_pb2.Calendar(
        time_zone=zone, business_days=sorted(chosen),
        holidays=[d.isoformat() for d in holidays], half_days=[d.isoformat() for d in half_days],
    )  # fmt: skip


def definition_of(spec: calendar_pb2.Calendar) -> CalendarDefinition:
    """What the store keeps of a normalised definition."""
    return CalendarDefinition(
        spec=spec.SerializeToString(deterministic=True), time_zone=spec.time_zone,
        business_days=sum(1 << (day - 1) for day in spec.business_days),
        holiday_count=len(spec.holidays), half_day_count=len(spec.half_days),
    )  # fmt: skip


def business_calendar(spec: calendar_pb2.Calendar) -> businessdays.BusinessCalendar:
    """A stored definition as :mod:`~tickwheel_server.schedule.businessdays` computes with it."""
    return businessdays.calendar(
        spec.time_zone, spec.business_days,
        [date.fromisoformat(d) for d in spec.holidays], [date.fromisoformat(d) for d in spec.half_days],
    )  # fmt: skip


def calendar_to_proto(record: CalendarRecord) -> calendar_pb2.Calendar:
    """The calendar as the API answers it: with its dates when ``record``
    holds its definition (GetCalendar), without them (ListCalendars)
    otherwise."""
    message = calendar_pb2.Calendar()
    if record.spec:
        message.ParseFromString(record.spec)
    else:
        message.time_zone = record.time_zone
        message.business_days.extend(day for day in _WEEKDAYS if record.business_days & (1 << (day - 1)))
    message.name = record.name
    message.tenant = record.tenant
    message.version = record.version
    message.holiday_count = record.holiday_count
    message.half_day_count = record.half_day_count
    convert.set_timestamp(message.created_at, record.created_at)
    convert.set_timestamp(message.updated_at, record.updated_at)
    return message


def update_paths(mask: field_mask_pb2.FieldMask) -> tuple[str, ...]:
    """The Calendar fields an update replaces: the mask's, or
    :data:`MUTABLE_FIELDS` when it is empty. INVALID_ARGUMENT
    ``update_mask`` naming every other path, or past
    :data:`~.convert.MAX_MASK_PATHS`."""
    if not mask.paths:
        return MUTABLE_FIELDS
    convert.check_mask_size(mask.paths)
    problems = []
    for path in mask.paths:
        if path == "name":
            problems.append("'name' is the calendar's key: create another calendar instead")
        elif path in OUTPUT_ONLY_FIELDS:
            problems.append(f"{shown(path)!r} is output only")
        elif path not in MUTABLE_FIELDS:
            problems.append(f"{shown(path)!r} is not a Calendar field that can change")
    if problems:
        raise InvalidArgument.field("update_mask", "; ".join(problems))
    return tuple(dict.fromkeys(mask.paths))


def merged_definition(stored: bytes, patch: calendar_pb2.Calendar, paths: tuple[str, ...]) -> calendar_pb2.Calendar:
    """The stored definition with the fields at ``paths`` replaced by
    ``patch``'s, normalised (INVALID_ARGUMENT naming the field otherwise)."""
    merged = calendar_pb2.Calendar()
    merged.ParseFromString(stored)
    for path in paths:
        merged.ClearField(path)
        if path == "time_zone":
            merged.time_zone = patch.time_zone
        else:
            getattr(merged, path).extend(getattr(patch, path))
    return normalise_calendar(merged)


def _run_change(change: RunChange) -> calendar_pb2.CalendarRunChange:
    message = calendar_pb2.CalendarRunChange(execution_id=change.execution_id, job_id=change.job_id)
    convert.set_timestamp(message.nominal_at, from_us(change.nominal_at_us))
    convert.set_timestamp(message.old_due_at, from_us(change.old_due_at_us))
    if change.new_due_at_us is not None:
        convert.set_timestamp(message.new_due_at, from_us(change.new_due_at_us))
    return message


class CalendarCalls:
    """CreateCalendar, GetCalendar, ListCalendars, UpdateCalendar and
    DeleteCalendar, each scoped to the caller's tenant; the SchedulerService
    servicer delegates them here."""

    def __init__(self, auth: Authenticator, store: CalendarStore) -> None:
        self._auth = auth
        self._store = store

    @property
    def store(self) -> CalendarStore:
        """The calendar store (the job calls check the calendars a job names through it)."""
        return self._store

    @rpc
    async def CreateCalendar(self, request, context):
        tenant = await self._auth.tenant(context)
        request_id = validate.check_request_id(request.request_id)
        name = check_name(request.calendar.name, "calendar.name")
        spec = await asyncio.to_thread(normalise_calendar, request.calendar)
        record, created = await self._store.create(tenant.name, name, definition_of(spec), request_id)
        return calendar_pb2.CreateCalendarResponse(calendar=calendar_to_proto(record), created=created)

    @rpc
    async def GetCalendar(self, request, context):
        tenant = await self._auth.tenant(context)
        record = await self._store.get(tenant.name, check_name(request.name, "name"))
        return calendar_pb2.GetCalendarResponse(calendar=calendar_to_proto(record))

    @rpc
    async def ListCalendars(self, request, context):
        tenant = await self._auth.tenant(context)
        size = convert.page_size(request.page_size, default=100, maximum=1000)
        after = convert.parse_page_token(request.page_token)
        found = await self._store.list(tenant.name, after_name=after, limit=size + 1)
        token = convert.page_token(found[size - 1].name) if len(found) > size else ""
        return calendar_pb2.ListCalendarsResponse(
            calendars=[calendar_to_proto(c) for c in found[:size]], next_page_token=token
        )

    @rpc
    async def UpdateCalendar(self, request, context):
        """Merge, validate and store at ``calendar.version`` + 1 (see
        :meth:`CalendarStore.update_with_runs`); a request that changes
        nothing returns the calendar as it is. The definition commits first;
        the store's re-decision of the created runs of every job naming the
        calendar (its walk, a page of jobs per transaction) is metered
        (:meth:`Authenticator.metered`): ten fires per job walked, one per
        run decided (:data:`~..store.calendaruse.FIRES_PER_JOB`), charged to
        the tenant's request rate when the walk ends; refused
        RESOURCE_EXHAUSTED, before anything is written, while earlier
        metered calls of the tenant are not paid back. A client that hangs
        up still waits for, and pays, the walk it started. The response
        counts what this call's walk changed: all of it, or, when a newer
        update superseded the walk meanwhile, what it changed until then
        (the newer walk decides every run again). A walk whose server died
        is finished by the reaper's duty, unmetered."""
        tenant = await self._auth.tenant(context)
        paths = update_paths(request.update_mask)
        name = check_name(request.calendar.name, "calendar.name")
        version = request.calendar.version
        if version <= 0:
            raise InvalidArgument.field("calendar.version", "required: the version last read")
        record = await self._store.get(tenant.name, name)
        if record.version != version:
            raise VersionConflict(f"calendar {name!r}", version, record.version)
        spec = await asyncio.to_thread(merged_definition, record.spec, request.calendar, paths)
        definition = definition_of(spec)
        if definition.spec == record.spec:
            return calendar_pb2.UpdateCalendarResponse(calendar=calendar_to_proto(record))
        async with self._auth.metered(tenant) as meter:
            updated, report = await to_its_end(
                self._store.update_with_runs(tenant.name, name, version, definition, counted=meter.count)
            )
        return calendar_pb2.UpdateCalendarResponse(
            calendar=calendar_to_proto(updated), changed_run_count=report.changed_count,
            changed_runs=[_run_change(change) for change in report.first], job_count=report.job_count,
        )  # fmt: skip

    @rpc
    async def DeleteCalendar(self, request, context):
        tenant = await self._auth.tenant(context)
        name = check_name(request.name, "name")
        if request.version < 0:
            raise InvalidArgument.field("version", "must be >= 0 (0: any version)")
        await self._store.delete(tenant.name, name, request.version)
        return calendar_pb2.DeleteCalendarResponse()
