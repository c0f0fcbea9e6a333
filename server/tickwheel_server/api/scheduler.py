"""SchedulerService: tenants' calls. Thin: proto in, domain call, proto out.

Every call is scoped to the caller's tenant. Which fields an update mask
changes is decided here (:func:`update_paths`, :func:`merge_job`: the
request's shape). Where an updated or resumed job's cursor goes, what a
paused span holds and what a change does to the executions not started are
:mod:`tickwheel_server.policy.jobchanges`' plans; :func:`update_plan` and
:func:`resume_span` decode the definitions and call them (see
``docs/architecture.md``, "Job changes").
TriggerJob and BackfillJob create executions through
:class:`~tickwheel_server.store.manual.ManualStore`; ``on_ready`` tells this
server's gateway that something is ready now, and ``on_due`` (``ready=True``)
the gateway of the server owning the job's partition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Protocol

from google.protobuf import field_mask_pb2
from google.protobuf.message import Message
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import new_job_ids, to_us
from tickwheel.shared.targets import DEFAULT_POLICY, TargetPolicy

from ..auth.authenticator import Authenticator, api_key_actor
from ..auth.ratelimit import Meter, to_its_end, to_thread_to_its_end
from ..coalescer import CreateCoalescer
from ..errors import (
    FailedPrecondition, FieldViolation, InvalidArgument, NotFound, QuotaExceeded, TickwheelError, VersionConflict,
)
from ..policy import jobchanges
from ..policy.calendarplan import resume_instants
from ..policy.jobchanges import PausedSpan, UpdatePlan, resume_late_limit
from ..jobspec import CALENDAR_NAME, JobDefinition, calendar_column, schedule_of
from ..schedule import Schedule, ScheduleError, next_fire, tzdata_version
from ..schedule import validate as validate_schedule
from ..schedule.businessdays import BusinessCalendar
from ..store.alerts import AlertStore
from ..store.calendars import CalendarStore
from ..store.deadletters import DeadLetterStore
from ..store.history import HistoryStore
from ..store.jobbatch import Decide, JobChange
from ..store.jobcreate import CREATED
from ..store.jobrecords import JobRecord, NewJobs
from ..store.jobs import JobStore
from ..store.manual import ManualStore
from ..store.revisions import RevisionStore
from ..store.tenants import Tenant
from . import convert, dryrun, nextruns, revisionview, validate
from .batchanswer import CreatedAnswers, batch_create_response
from .batchview import AnswerBudget, create_check, full_view, job_bound, job_in_view
from .calendars import CalendarCalls
from .nextruns import fire_to_proto, upcoming
from .text import shown
from .status import rpc, status_for

OUTPUT_ONLY_FIELDS = frozenset(
    {"id", "tenant", "state", "next_run_at", "next_due_at", "run_count", "version", "tzdata_version", "last_run",
     "created_at", "updated_at", "pause_reason"}
)  # fmt: skip
MUTABLE_FIELDS = tuple(f.name for f in job_pb2.Job.DESCRIPTOR.fields if f.name not in OUTPUT_ONLY_FIELDS)
"""What an empty update mask means: every field the caller may set."""
MAX_REASON = 1024
RESUME_TRIES = 3
MAX_BACKFILL = 10_000
"""Occurrences one BackfillJob call may cover (the CLI splits larger windows)."""
MAX_BATCH = 1000
"""Items one batch call (BatchCreateJobs, BatchUpdateJobs, BatchDeleteJobs,
BatchPauseJobs, BatchResumeJobs) may hold."""


def backfill_occurrences(
    schedule: Schedule, start: datetime, end: datetime, limit: int = MAX_BACKFILL, meter: Meter | None = None
) -> list[datetime]:
    """The nominal instants of ``schedule`` in ``[start, end)``, oldest first;
    InvalidArgument ``to_at`` when there are more than ``limit``. Each fire
    computed is counted in ``meter`` (the tenant pays for it, refused or not)."""
    found: list[datetime] = []
    after = start - timedelta(microseconds=1)
    meter = meter if meter is not None else Meter()
    while True:
        meter.fires += 1
        fire = next_fire(schedule, after)
        if fire is None or fire.nominal_at >= end:
            return found
        if len(found) == limit:
            raise InvalidArgument.field("to_at", f"the window holds more than {limit} occurrences: split it")
        found.append(fire.nominal_at)
        after = fire.nominal_at


def _required(value: str, field: str) -> str:
    return validate.check_id(value, field)


def _delete_version(version: int) -> int:
    if version < 0:
        raise InvalidArgument.field("version", "must be >= 0 (0: any version)")
    return version


def _reason(value: str) -> str:
    return validate.check_text(value, "reason", MAX_REASON)


# --- UpdateJob: the mask and the merge (pure) ------------------------------------------------


def update_paths(mask: field_mask_pb2.FieldMask) -> tuple[str, ...]:
    """The ``Job`` paths an update changes: the mask's, or every mutable field
    when it is empty. INVALID_ARGUMENT ``update_mask`` naming every path that
    is output only or not a ``Job`` field (map keys cannot be addressed),
    or past :data:`~.convert.MAX_MASK_PATHS`. Each path once, in order."""
    if not mask.paths:
        return MUTABLE_FIELDS
    convert.check_mask_size(mask.paths)
    paths = tuple(dict.fromkeys(mask.paths))
    problems = []
    for path in paths:
        if path.split(".", 1)[0] in OUTPUT_ONLY_FIELDS:
            problems.append(f"{shown(path)!r} is output only")
        elif not field_mask_pb2.FieldMask(paths=[path]).IsValidForDescriptor(job_pb2.Job.DESCRIPTOR):
            problems.append(f"{shown(path)!r} is not a Job field")
    if problems:
        raise InvalidArgument.field("update_mask", "; ".join(problems))
    return paths


def merge_job(stored: job_pb2.Job, patch: job_pb2.Job, paths: tuple[str, ...]) -> job_pb2.Job:
    """``stored`` with the fields at ``paths`` replaced by ``patch``'s; a path
    whose field is unset in ``patch`` clears it (its default then applies),
    also when ``patch`` leaves one of the path's parents unset
    (``schedule.cron.time_zone`` with no ``schedule``: the zone is cleared)."""
    merged = job_pb2.Job()
    merged.CopyFrom(stored)
    field_mask_pb2.FieldMask(paths=list(paths)).MergeMessage(
        patch, merged, replace_message_field=True, replace_repeated_field=True
    )
    for path in paths:
        _clear_under_unset_parent(merged, patch, path.split("."))
    return merged


def _clear_under_unset_parent(merged: Message, patch: Message, names: list[str]) -> None:
    """Clear ``merged``'s field at the path ``names`` when one of its parents
    is unset in ``patch``: protobuf's ``MergeMessage`` skips such a path,
    which would leave the field as stored while the call reports success.
    A parent unset in ``merged`` as well leaves nothing to clear (and is not
    created). ``update_paths`` has checked that every parent is a singular
    message field."""
    *parents, leaf = names
    source = patch
    for name in parents:
        if not source.HasField(name):
            break
        source = getattr(source, name)
    else:
        return  # every parent set in the patch: MergeMessage copied the field
    target = merged
    for name in parents:
        if not target.HasField(name):
            return
        target = getattr(target, name)
    target.ClearField(leaf)


def update_plan(record: JobRecord, stored: job_pb2.Job, job: job_pb2.Job, now: datetime) -> UpdatePlan:
    """Decode ``record``'s definition ``stored`` and the new (normalised)
    ``job``, check the new schedule can fire (INVALID_ARGUMENT otherwise),
    then :func:`~tickwheel_server.policy.jobchanges.plan_update`. CPU-bound
    when a paused span is long: run it off the loop."""
    changed = schedule_of(job, record.id)
    try:
        validate_schedule(changed, now)
    except ScheduleError as error:
        raise validate.schedule_error(error) from None
    return jobchanges.plan_update(record, schedule_of(stored, record.id), changed, now, tzdata=tzdata_version())


def update_change(
    record: JobRecord, patch: job_pb2.Job, paths: tuple[str, ...], now: datetime, target_policy: TargetPolicy,
    *, changed_by: str = "", update_mask: tuple[str, ...] = (),
) -> JobChange | None:
    """What UpdateJob's ``patch`` at ``paths`` writes to ``record``: the
    merged definition validated as CreateJob validates (INVALID_ARGUMENT
    naming the field otherwise) and its :func:`update_plan`; None when it
    changes nothing. ``changed_by`` and ``update_mask`` (the request's, as
    given) go to the revision the change keeps. CPU-bound when a paused
    span is long: run it off the loop (a batch runs it in the store's
    transaction thread)."""
    stored = convert.stored_job(record)
    job = validate.normalise_job(merge_job(stored, patch, paths), now, target_policy=target_policy)
    if job == stored:
        return None
    plan = update_plan(record, stored, job, now)
    return JobChange(
        name=job.name, spec=job.SerializeToString(), time_zone=validate.zone_of(schedule_of(job, record.id)),
        tzdata_version=plan.tzdata_version, payload_size=len(job.payload), reschedule=plan.reschedule,
        skipped=plan.skipped, changed_by=changed_by, update_mask=update_mask,
    )


def batch_items(items) -> None:
    """INVALID_ARGUMENT ``items`` unless a batch holds 1 to :data:`MAX_BATCH` items."""
    if not 1 <= len(items) <= MAX_BATCH:
        raise InvalidArgument([FieldViolation("items", f"must hold 1 to {MAX_BATCH} items, not {len(items)}")])


async def apply_batch(
    items, result_type, decode: Callable, apply: Callable, answer: Callable, bound: Callable | None = None
) -> tuple[list, list]:
    """The shared body of the batch changes (update, delete, pause, resume):
    each item ``decode``d (a TickwheelError is that item's answer), the
    decoded ones ``apply``-ed in one store call that returns an outcome per
    item (an Exception or the single call's result), each outcome turned
    into its ``result_type`` by ``answer``. Returns the results, one per
    item in order, and the successful outcomes. With ``bound`` (an upper
    bound of a successful outcome's answer), ``apply`` takes a second
    argument, the store's check (:class:`.batchview.AnswerBudget`) that
    refuses, before the commit, an answer larger than a default client reads."""
    results: list = [None] * len(items)
    accepted: list[int] = []
    work = []
    for index, item in enumerate(items):
        try:
            work.append(decode(item))
            accepted.append(index)
        except TickwheelError as error:
            results[index] = result_type(error=status_for(error)[1])
    if not work:  # every item refused: nothing to write, but the answer is still bounded
        outcomes = []
        if bound is not None:
            AnswerBudget(results, bound)(outcomes)
    elif bound is None:
        outcomes = await apply(work)
    else:
        outcomes = await apply(work, AnswerBudget(results, bound))
    done = []
    for index, outcome in zip(accepted, outcomes):
        if isinstance(outcome, Exception):
            results[index] = result_type(error=status_for(outcome)[1])
        else:
            results[index] = answer(outcome)
            done.append(outcome)
    return results, done


def _skip_bound(skip) -> int:
    """The bytes a resumed job's skip range adds to its answer."""
    return 0 if skip is None else convert.skip_to_proto(skip).ByteSize() + 8


def named_calendar(job: job_pb2.Job, paths: tuple[str, ...] | None = None) -> str:
    """The calendar name ``job`` sets ('' for none), counting only when
    ``paths`` (an update's) reach ``calendar``; None paths: a create."""
    if paths is not None and not any(p == "calendar" or p.startswith("calendar.") for p in paths):
        return ""
    return job.calendar.name if job.HasField("calendar") else ""


def updated_calendar(request) -> str:
    """The calendar name an UpdateJob ``request`` sets ('' for none, or for a mask that is refused anyway)."""
    try:
        return named_calendar(request.job, update_paths(request.update_mask))
    except InvalidArgument:
        return ""


def missing_calendar(name: str) -> FailedPrecondition:
    """The answer to a job naming ``name`` when the caller's tenant has no such calendar."""
    return FailedPrecondition(
        "job.calendar.name", f"the tenant has no calendar {shown(name)!r}: create it first", kind="CALENDAR_NOT_FOUND"
    )


def update_item(
    request, now: datetime, target_policy: TargetPolicy, *, changed_by: str = "", in_batch: bool = False
) -> tuple[str, int, Decide]:
    """An UpdateJob ``request`` as the store applies it: (job id, expected
    version, the decision from the job as stored, which records
    ``changed_by`` and the request's mask for the revision). INVALID_ARGUMENT
    ``update_mask``, ``job.id`` or ``job.version`` when it cannot be one;
    ``validate_only`` or ``diff_window`` when a batch item (``in_batch``)
    sets them."""
    if in_batch:
        refused = [name for name, set_ in (("validate_only", request.validate_only),
                                            ("diff_window", request.HasField("diff_window"))) if set_]
        if refused:
            raise InvalidArgument(
                [FieldViolation(name, "not in a batch: preview changes one at a time with UpdateJob") for name in refused]
            )
    paths = update_paths(request.update_mask)
    validate.check_counts(request.job, "job")  # before the patch is merged: a copy of each of its maps
    mask = paths if request.update_mask.paths else ()  # as the revision records it (empty: every field)
    job_id, version = request.job.id, request.job.version
    missing = [name for name, value in (("id", job_id), ("version", version)) if not value]
    if missing:
        raise InvalidArgument([FieldViolation(f"job.{name}", "required") for name in missing])
    patch = request.job
    return job_id, version, lambda record: update_change(
        record, patch, paths, now, target_policy, changed_by=changed_by, update_mask=mask
    )


def resume_span(
    record: JobRecord, now: datetime, meter: Meter | None = None, calendar: BusinessCalendar | None = None
) -> PausedSpan:
    """Decode a paused job's schedule, then
    :func:`~tickwheel_server.policy.jobchanges.resume_plan`, its
    occurrences' lateness judged by the instants ``calendar`` (the one the
    job names, None when it names none or it is gone) moves them to
    (:func:`~tickwheel_server.policy.calendarplan.resume_instants`).
    CPU-bound for long spans: with ``meter``, a job with a span to count is
    refused (QuotaExceeded) when its call's earlier work has used up what
    the tenant's bucket held (:meth:`Meter.admit`), and the fires counted
    are added to it."""
    if meter is not None and has_span(record, now):
        meter.admit()
    job = convert.stored_job(record)
    schedule = schedule_of(job, record.id)
    definition = JobDefinition.parse(record.id, record.version, record.spec)
    due_of = reach_of = None
    if calendar is not None and definition.calendar is not None:
        due_of, reach_of = resume_instants(calendar, definition.calendar, schedule)
    try:
        span = jobchanges.resume_plan(
            schedule, record, now, threshold=job.misfire_threshold.ToTimedelta(),
            late_limit=resume_late_limit(definition.misfire_policy, definition.run_all_limit),
            due_of=due_of, reach_of=reach_of,
        )
    except ScheduleError as error:
        raise validate.schedule_error(error) from None
    if meter is not None:
        meter.fires += span.counted + 1  # the span, then the cursor
    return span


def has_span(record: JobRecord, now: datetime) -> bool:
    """True when ``record`` is paused with occurrences due by ``now``: a
    resume, or a change of its schedule, counts them (pure)."""
    return record.state == "paused" and record.next_run_at is not None and record.next_run_at <= now


def metered_change(decide: Decide, meter: Meter, now: datetime) -> Decide:
    """``decide`` (an update's decision at ``now``) charged to ``meter``: a
    job with a paused span (:func:`has_span`) is refused (QuotaExceeded)
    when its call's earlier work has used up what the tenant's bucket held
    (:meth:`Meter.admit`); the span a change of its schedule counted is
    added to the meter. Any other job's change counts no span and is
    never refused for it."""

    def decided(record: JobRecord) -> JobChange | None:
        if has_span(record, now):
            meter.admit()
        change = decide(record)
        if change is not None and change.skipped is not None:
            meter.fires += change.skipped.count
        return change

    return decided


# --- ListExecutions -------------------------------------------------------------------------


def _statuses(values) -> list[str]:
    return convert.enum_filter(values, convert.EXECUTION_STATUS_FROM_PROTO, "statuses", "unknown values")


def _window(request) -> tuple[datetime | None, datetime | None]:
    from_at = convert.instant(request.from_at, "from_at") if request.HasField("from_at") else None
    to_at = convert.instant(request.to_at, "to_at") if request.HasField("to_at") else None
    if from_at is not None and to_at is not None and to_at <= from_at:
        raise InvalidArgument.field("to_at", "must be after from_at")
    return from_at, to_at


class OnDue(Protocol):
    """Told after a write committed: (job id, next due instant in µs or
    None) of each job it wrote, so a due-now one is claimed at once;
    ``ready``: executions of them are ready now, to hand out at once
    (:meth:`~tickwheel_server.dispatcher.wakeup.Wakeup.due`)."""

    def __call__(self, dues: Iterable[tuple[str, int | None]], *, ready: bool = False) -> None: ...


def record_dues(records: Iterable[JobRecord]) -> list[tuple[str, int | None]]:
    """(job id, next due µs) of each of ``records``."""
    return [(r.id, None if r.next_due_at is None else to_us(r.next_due_at)) for r in records]


class _Pending:
    """A CreateJob call's job waiting for its group: what the coalescer
    reads of it (tenant, and ``spec`` for its size: the job's bytes) and
    the instant the call arrived (its schedule's first fire is after it,
    as a lone call's would be, however long it waited)."""

    __slots__ = ("tenant", "job", "spec", "at")

    def __init__(self, tenant: str, job: job_pb2.Job, at: datetime) -> None:
        self.tenant = tenant
        self.job = job
        self.spec = job.SerializeToString()
        self.at = at


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(
        self,
        auth: Authenticator,
        jobs: JobStore,
        clock: Clock,
        history: HistoryStore | None = None,
        dead_letters: DeadLetterStore | None = None,
        *,
        manual: ManualStore | None = None,
        target_policy: TargetPolicy = DEFAULT_POLICY,
        on_ready: Callable[[], None] | None = None,
        creates: CreateCoalescer | None = None,
        calendars: CalendarStore | None = None,
        on_due: OnDue | None = None,
    ) -> None:
        self._auth = auth
        self._on_due: OnDue = on_due or (lambda _dues, *, ready=False: None)
        self._calendars = CalendarCalls(
            auth, calendars or CalendarStore(jobs.engine, jobs.clock, alerts=AlertStore(jobs.engine, jobs.clock))
        )
        self._jobs = jobs
        # Concurrent CreateJob calls of a tenant share one transaction
        # (docs/architecture.md, "Job writes at scale").
        self._creates = creates or CreateCoalescer(self._write_group)
        self._clock = clock
        self._target_policy = target_policy
        self._manual = manual or ManualStore(jobs.engine, jobs.clock)
        self._on_ready = on_ready or (lambda: None)
        # Without one given, history and dead letters go through the jobs
        # store's engine and clock (replays then resolve alerts through an
        # alert store of their own, which the server's watchers see at their
        # next poll rather than at once).
        self._history = history or HistoryStore(jobs.engine, jobs.clock)
        self._dead_letters = dead_letters or DeadLetterStore(
            jobs.engine, jobs.clock, AlertStore(jobs.engine, jobs.clock)
        )
        self._revisions = RevisionStore(jobs.engine, jobs.clock)

    @property
    def creates(self) -> CreateCoalescer:
        """The coalescer CreateJob calls are grouped in (tests read its counts)."""
        return self._creates

    async def _calendar_of(self, tenant: str, record: JobRecord) -> BusinessCalendar | None:
        """The calendar ``record`` names, decoded; None when it names none or
        the calendar is gone (its claim then quarantines the job)."""
        name = calendar_column(record.spec)
        if not name:
            return None
        try:
            return await self._calendars.store.decoded(tenant, name)
        except NotFound:
            return None

    async def _absent_calendars(self, tenant: str, names: list[str]) -> set[str]:
        """Those of ``names`` (empty ones ignored) that are not calendars of ``tenant``: one store read."""
        wanted = {name for name in names if CALENDAR_NAME.match(name)}  # a malformed one is refused by validation
        if not wanted:
            return set()
        return wanted - await self._calendars.store.present(tenant, wanted)

    @rpc
    async def CreateJob(self, request, context):
        """Authenticated and its request id checked here; validated, stored
        and answered with the tenant's concurrent calls, per group
        (:meth:`_write_group`)."""
        tenant = await self._auth.tenant(context)
        request_id = validate.check_request_id(request.request_id)
        return await self._creates.create(_Pending(tenant.name, request.job, self._clock.now()), request_id)

    async def _new_jobs(
        self, tenant: str, items: Sequence[tuple[job_pb2.Job, str, datetime]], *, separate_calls: bool = False
    ) -> tuple[NewJobs, list[int], dict[int, Exception]]:
        """``items`` (job, request id, the instant its call arrived) of
        ``tenant`` validated each on its own, at its call's instant: the
        valid ones in a batch (and their indices), the refused ones' errors
        by index (a named calendar the tenant lacks: FAILED_PRECONDITION,
        after the job's own violations). With ``separate_calls`` (each item
        is a CreateJob call of a group), an unexpected error validating one
        is that item's error too, so it fails its call alone (INTERNAL, as
        it would alone); otherwise it is raised. One store read for the
        calendars the jobs name, none when they name none."""
        if not items:
            return NewJobs(tenant), [], {}
        now = items[0][2]
        refused: dict[int, Exception] = {}
        accepted: list[int] = []
        rows: list[tuple] = []
        job_ids = new_job_ids(now, len(items))
        tzdata, policy = tzdata_version(), self._target_policy
        named = [named_calendar(job) for job, _, _ in items if job.HasField("calendar")]
        absent = await self._absent_calendars(tenant, named) if named else set()
        # The usual call's ids all valid: checked in one match, not one each.
        ids_valid = validate.request_ids_valid([raw_request_id for _, raw_request_id, _ in items])
        for index, (job, raw_request_id, at) in enumerate(items):
            try:
                request_id = raw_request_id if ids_valid else validate.check_request_id(raw_request_id)
                spec, next_run, next_due, zone, key_limits = validate.new_definition(
                    job, at, job_ids[index], target_policy=policy
                )
                if absent and named_calendar(job) in absent:
                    raise missing_calendar(named_calendar(job))
            except TickwheelError as error:
                refused[index] = error
                continue
            except Exception as error:
                if not separate_calls:
                    raise
                refused[index] = error
                continue
            accepted.append(index)
            rows.append((job_ids[index], request_id, job.name, spec, zone, next_run, next_due, len(job.payload),
                         key_limits))  # fmt: skip
        return NewJobs.of_rows(tenant, rows, tzdata), accepted, refused

    async def _write_group(self, tenant: str, items: Sequence[tuple[_Pending, str]]) -> list:
        """A group of CreateJob calls (``_Pending`` jobs and their request
        ids): validated as BatchCreateJobs' items are (:meth:`_new_jobs`; a
        refused one answers its error, nothing stored), the valid ones stored
        in one :meth:`JobStore.create_batch`; each call's answer: its job
        created (serialized), an earlier call's job, or its error (an
        unexpected one raised validating a call's job is that call's
        alone)."""
        batch, accepted, refused = await self._new_jobs(
            tenant, [(pending.job, rid, pending.at) for pending, rid in items], separate_calls=True
        )
        answers: list = [refused.get(index) for index in range(len(items))]
        if accepted:
            outcomes, created_at = await self._jobs.create_batch(batch)
            created = CreatedAnswers(batch, created_at)
            dues = []
            for k, (index, outcome) in enumerate(zip(accepted, outcomes)):
                if outcome is CREATED:
                    answers[index] = created.answer(k)
                    dues.append((batch.ids[k], batch.next_dues[k]))
                elif isinstance(outcome, tuple):
                    record, _ = outcome
                    response = scheduler_pb2.CreateJobResponse(created=False)
                    convert.fill_job(response.job, record)
                    answers[index] = response
                else:
                    answers[index] = outcome
            if dues:
                self._on_due(dues)
        return answers

    def _metered(self, tenant: Tenant, work: bool) -> AbstractAsyncContextManager[Meter]:
        """:meth:`Authenticator.metered` when the call has schedule ``work``
        to do; otherwise a meter nothing charges (the call neither waits
        for the tenant's metered calls nor is refused for its debt)."""
        return self._auth.metered(tenant) if work else contextlib.nullcontext(Meter())

    @rpc
    async def BatchCreateJobs(self, request, context):
        """Each item validated on its own (a refused one is answered with
        its violations and stored nothing), the valid ones created in one
        store call (:meth:`JobStore.create_batch`), column by column, and
        answered from what was stored (:mod:`.batchanswer`)."""
        tenant = await self._auth.tenant(context)
        items = request.items
        batch_items(items)
        full = full_view(request)
        now = self._clock.now()
        batch, accepted, refused = await self._new_jobs(
            tenant.name, [(item.job, item.request_id, now) for item in items]
        )
        outcomes, created_at = await self._jobs.create_batch(batch, create_check(batch, refused.values(), full))
        self._on_due([(batch.ids[i], batch.next_dues[i]) for i, outcome in enumerate(outcomes) if outcome is CREATED])
        return batch_create_response(len(items), refused, accepted, batch, outcomes, created_at, full)

    @rpc
    async def GetJob(self, request, context):
        tenant = await self._auth.tenant(context)
        _required(request.id, "id")
        count = convert.page_size(request.next_runs, default=5, maximum=100, field="next_runs")
        if request.revision < 0:
            raise InvalidArgument.field("revision", "must be >= 0 (0: the job as it is now)")
        record = await self._jobs.get(tenant.name, request.id)
        if request.revision and request.revision != record.version:
            revision = await self._revisions.get(tenant.name, record.id, request.revision)
            return scheduler_pb2.GetJobResponse(job=revisionview.revision_job(revision, record))
        job = convert.job_to_proto(record)
        # An unparsable definition comes back without its schedule (job_to_proto): no next runs.
        next_runs = await nextruns.next_runs(self._calendars.store, tenant.name, record, job, count)
        last = await self._history.last_run(tenant.name, record.id)
        if last is not None:
            job.last_run.CopyFrom(convert.last_run_to_proto(last))
        return scheduler_pb2.GetJobResponse(job=job, next_runs=next_runs)

    @rpc
    async def TriggerJob(self, request, context):
        tenant = await self._auth.tenant(context)
        job_id = _required(request.id, "id")
        request_id = validate.check_request_id(request.request_id)
        payload = request.payload if request.payload else None
        if payload is not None and len(payload) > tenant.max_payload_bytes:
            raise QuotaExceeded(tenant.name, "max_payload_bytes", tenant.max_payload_bytes,
                                f"payload of {len(payload)} bytes is over the limit")
        execution, created = await self._manual.trigger(
            tenant.name, job_id, request_id, payload, allow_overlap=request.allow_overlap
        )
        if created:
            self._on_ready()
            self._on_due([(job_id, to_us(self._clock.now()))], ready=True)
        return scheduler_pb2.TriggerJobResponse(execution=convert.execution_to_proto(execution), created=created)

    @rpc
    async def BackfillJob(self, request, context):
        tenant = await self._auth.tenant(context)
        job_id = _required(request.id, "id")
        start, end = validate.backfill_window(request, self._clock.now())
        record = await self._jobs.get(tenant.name, job_id)
        schedule = schedule_of(convert.stored_job(record), record.id)
        async with self._auth.metered(tenant) as meter:
            nominals = await to_thread_to_its_end(backfill_occurrences, schedule, start, end, meter=meter)
        result = await self._manual.backfill(
            tenant.name, job_id, nominals, dry_run=request.dry_run, allow_overlap=request.allow_overlap
        )
        if result.created and not request.dry_run:
            self._on_ready()
            self._on_due([(job_id, to_us(self._clock.now()))], ready=True)  # the first are ready now
        return scheduler_pb2.BackfillJobResponse(
            occurrences=[
                scheduler_pb2.BackfillOccurrence(
                    execution_id=item.execution_id,
                    nominal_at=convert.timestamp(item.nominal_at),
                    already_exists=item.already_exists,
                )
                for item in result.occurrences
            ],
            created_count=result.created,
            existing_count=result.existing,
        )

    @rpc
    async def ListJobs(self, request, context):
        tenant = await self._auth.tenant(context)
        size = convert.page_size(request.page_size, default=100, maximum=1000)
        if request.state not in convert.JOB_STATE_FROM_PROTO and request.state != job_pb2.JOB_STATE_UNSPECIFIED:
            raise InvalidArgument.field("state", "unknown value")
        page = await self._jobs.page(
            tenant=tenant.name,
            after_id=convert.parse_page_token(request.page_token),
            limit=size + 1,
            state=convert.JOB_STATE_FROM_PROTO.get(request.state, ""),
            name_prefix=validate.check_text(request.name_prefix, "name_prefix", validate.NAME_MAX),
        )
        jobs, token = convert.jobs_answer(page, size)
        return scheduler_pb2.ListJobsResponse(jobs=jobs, next_page_token=token)

    @rpc
    async def PreviewSchedule(self, request, context):
        tenant = await self._auth.tenant(context)
        count = convert.page_size(request.count, default=5, maximum=1000, field="count")
        after = validate.bounded_instant(request.after, "after") if request.HasField("after") else self._clock.now()
        source = request.WhichOneof("source")
        if source == "job_id":
            record = await self._jobs.get(tenant.name, request.job_id)
            schedule = schedule_of(convert.stored_job(record), record.id)
            runs_so_far = record.run_count
        elif source == "job":
            if request.job.id:
                validate.check_id(request.job.id, "job.id")
            schedule = schedule_of(request.job, request.job.id)
            runs_so_far = 0
        else:
            raise InvalidArgument.field("source", "set job_id or job")
        async with self._auth.metered(tenant) as meter:
            meter.fires = count
            fires = upcoming(schedule, after, count, runs_so_far=runs_so_far)
        return scheduler_pb2.PreviewScheduleResponse(
            fires=[fire_to_proto(f) for f in fires], tzdata_version=tzdata_version()
        )

    @rpc
    async def UpdateJob(self, request, context):
        """Apply the mask to the stored definition, validate the result as
        CreateJob does, and store it at ``job.version`` + 1 (see
        :meth:`JobStore.update`). The cursor and the pending occurrences are
        re-planned only when the schedule changed (:func:`plan_update`);
        otherwise the executions not started stay, with the new payload or
        handler if those changed. A request that changes nothing returns the
        job as it is: no new version. With ``validate_only`` every check is
        made and nothing written: the answer holds the run diff
        (:mod:`.dryrun`)."""
        tenant = await self._auth.tenant(context)
        now = self._clock.now()
        window = dryrun.diff_window(request)
        job_id, version, decide = update_item(request, now, self._target_policy, changed_by=api_key_actor(context))
        for name in await self._absent_calendars(tenant.name, [updated_calendar(request)]):
            raise missing_calendar(name)
        record = await self._jobs.get(tenant.name, job_id)
        if record.version != version:
            raise VersionConflict(f"job {job_id!r}", version, record.version)
        async with self._metered(tenant, request.validate_only or has_span(record, now)) as meter:
            change = await to_thread_to_its_end(metered_change(decide, meter, now), record)
            if request.validate_only:  # its diff is the same call's work: not refused for the span's fires
                specs = [record.spec] + ([change.spec] if change is not None else [])
                calendars = await nextruns.named_calendars(self._calendars.store, tenant.name, specs)
                return await to_thread_to_its_end(
                    dryrun.dry_run, record, change, max_payload_bytes=tenant.max_payload_bytes, now=now,
                    window=window, calendars=calendars, meter=meter,
                )
        if change is None:
            return scheduler_pb2.UpdateJobResponse(job=convert.job_to_proto(record))
        updated, _ = await self._jobs.update(
            tenant.name, job_id, version, name=change.name, spec=change.spec, time_zone=change.time_zone,
            tzdata_version=change.tzdata_version, payload_size=change.payload_size, reschedule=change.reschedule,
            skipped=change.skipped, changed_by=change.changed_by, update_mask=change.update_mask,
        )
        if change.reschedule is not None:
            self._on_due(record_dues((updated,)))
        return scheduler_pb2.UpdateJobResponse(job=convert.job_to_proto(updated))

    @rpc
    async def BatchUpdateJobs(self, request, context):
        """Each item as :meth:`UpdateJob` would apply it alone, in request
        order, in one transaction (:meth:`JobStore.update_many`): the
        decisions run under the jobs' row locks, against each job as the
        batch's earlier items left it."""
        tenant = await self._auth.tenant(context)
        batch_items(request.items)
        full = full_view(request)
        now = self._clock.now()
        actor = api_key_actor(context)
        absent = await self._absent_calendars(tenant.name, [updated_calendar(item) for item in request.items])

        def decode(item, meter: Meter):
            job_id, version, decide = update_item(item, now, self._target_policy, changed_by=actor, in_batch=True)
            if absent and updated_calendar(item) in absent:
                raise missing_calendar(updated_calendar(item))
            return job_id, version, metered_change(decide, meter, now)

        async with self._auth.metered(tenant) as meter:
            results, done = await to_its_end(apply_batch(
                request.items, scheduler_pb2.BatchUpdateJobsResult,
                lambda item: decode(item, meter),
                lambda work, check: self._jobs.update_many(tenant.name, work, check),
                lambda outcome: scheduler_pb2.BatchUpdateJobsResult(
                    job=scheduler_pb2.UpdateJobResponse(job=job_in_view(outcome[0], full))
                ),
                lambda outcome: job_bound(outcome[0], full),
            ))  # fmt: skip
        self._on_due(record_dues(outcome[0] for outcome in done))
        return scheduler_pb2.BatchUpdateJobsResponse(
            results=results, updated_count=len(done), failed_count=len(results) - len(done)
        )

    @rpc
    async def ListJobRevisions(self, request, context):
        """A job's revisions, newest first, paged by version
        (:class:`~tickwheel_server.store.revisions.RevisionStore`)."""
        tenant = await self._auth.tenant(context)
        job_id = _required(request.id, "id")
        size = convert.page_size(request.page_size, default=20, maximum=100)
        before = revisionview.parse_page_token(request.page_token)
        record = await self._jobs.get(tenant.name, job_id)
        found = await self._revisions.list(tenant.name, job_id, before_version=before, limit=size + 1)
        token = revisionview.page_token(found[size - 1].version) if len(found) > size else ""
        revisions = [revisionview.revision_to_proto(r, record) for r in found[:size]]
        kept = convert.fitting(revisions)  # definitions of up to 64 KiB each
        if kept < len(revisions):
            revisions, token = revisions[:kept], revisionview.page_token(found[kept - 1].version)
        return scheduler_pb2.ListJobRevisionsResponse(revisions=revisions, next_page_token=token)

    @rpc
    async def DeleteJob(self, request, context):
        tenant = await self._auth.tenant(context)
        version = _delete_version(request.version)
        canceled = await self._jobs.delete(tenant.name, _required(request.id, "id"), version)
        return scheduler_pb2.DeleteJobResponse(canceled_executions=canceled)

    @rpc
    async def BatchDeleteJobs(self, request, context):
        """Each item as :meth:`DeleteJob` would delete it alone, in request
        order, in one transaction (:meth:`JobStore.delete_many`)."""
        tenant = await self._auth.tenant(context)
        batch_items(request.items)
        results, done = await apply_batch(
            request.items, scheduler_pb2.BatchDeleteJobsResult,
            lambda item: (_required(item.id, "id"), _delete_version(item.version)),
            lambda work: self._jobs.delete_many(tenant.name, work),
            lambda canceled: scheduler_pb2.BatchDeleteJobsResult(
                deleted=scheduler_pb2.DeleteJobResponse(canceled_executions=canceled)
            ),
        )  # fmt: skip
        return scheduler_pb2.BatchDeleteJobsResponse(
            results=results, deleted_count=len(done), failed_count=len(results) - len(done)
        )

    @rpc
    async def PauseJob(self, request, context):
        tenant = await self._auth.tenant(context)
        record, held = await self._jobs.pause(tenant.name, _required(request.id, "id"), _reason(request.reason))
        return scheduler_pb2.PauseJobResponse(job=convert.job_to_proto(record), held_executions=held)

    @rpc
    async def BatchPauseJobs(self, request, context):
        """Each item as :meth:`PauseJob` would pause it alone, in request
        order, in one transaction (:meth:`JobStore.pause_many`)."""
        tenant = await self._auth.tenant(context)
        batch_items(request.items)
        full = full_view(request)
        results, done = await apply_batch(
            request.items, scheduler_pb2.BatchPauseJobsResult,
            lambda item: (_required(item.id, "id"), _reason(item.reason)),
            lambda work, check: self._jobs.pause_many(tenant.name, work, check),
            lambda outcome: scheduler_pb2.BatchPauseJobsResult(
                job=scheduler_pb2.PauseJobResponse(job=job_in_view(outcome[0], full), held_executions=outcome[1])
            ),
            lambda outcome: job_bound(outcome[0], full),
        )  # fmt: skip
        return scheduler_pb2.BatchPauseJobsResponse(
            results=results, paused_count=len(done), failed_count=len(results) - len(done)
        )

    @rpc
    async def BatchResumeJobs(self, request, context):
        """Each item as :meth:`ResumeJob` would resume it alone, in request
        order, in one transaction (:meth:`JobStore.resume_many`): each span
        is counted under the job's lock (in the store's transaction thread),
        so no version can move between counting and writing. The spans'
        fires are charged to the tenant's request rate (:meth:`Meter.admit`
        before each item): an item reached once they exceed what its bucket
        held is refused alone, RESOURCE_EXHAUSTED, and not written."""
        tenant = await self._auth.tenant(context)
        batch_items(request.items)
        full = full_view(request)
        now = self._clock.now()

        def answer(outcome) -> scheduler_pb2.BatchResumeJobsResult:
            record, skip, count = outcome
            resumed = scheduler_pb2.ResumeJobResponse(job=job_in_view(record, full), released_executions=count)
            if skip is not None:
                resumed.skipped.CopyFrom(convert.skip_to_proto(skip))
            return scheduler_pb2.BatchResumeJobsResult(job=resumed)

        async with self._auth.metered(tenant) as meter:
            results, done = await to_its_end(apply_batch(
                request.items, scheduler_pb2.BatchResumeJobsResult,
                lambda item: (_required(item.id, "id"), lambda record, cal: resume_span(record, now, meter, cal)),
                lambda work, check: self._jobs.resume_many(
                    tenant.name, work, now=now, tzdata_version=tzdata_version(), check=check
                ),
                answer,
                lambda outcome: job_bound(outcome[0], full) + _skip_bound(outcome[1]),
            ))  # fmt: skip
        if any(count for _, _, count in done):
            self._on_ready()
        self._on_due(record_dues(record for record, _, _ in done))
        return scheduler_pb2.BatchResumeJobsResponse(
            results=results, resumed_count=len(done), failed_count=len(results) - len(done)
        )

    @rpc
    async def ResumeJob(self, request, context):
        """Resume at the earliest occurrence of the paused span still within
        the misfire threshold (a bounded few run late), else the next future
        one; the older occurrences become one skip range, counted with the
        engine up to
        :data:`~tickwheel_server.policy.jobchanges.MAX_COUNTED_SKIPS` (a
        longer span records that many; see
        :func:`~tickwheel_server.policy.jobchanges.paused_span`), with
        the held occurrences past their misfire threshold; the other held
        executions are released (:meth:`JobStore.resume`) and the gateway
        told. The span is counted off the event loop and outside the
        transaction, metered (its fires charged to the tenant's request
        rate; refused before counting when that is in debt); if the job
        changed meanwhile (VersionConflict) it is counted again, up to
        :data:`RESUME_TRIES` times."""
        tenant = await self._auth.tenant(context)
        job_id = _required(request.id, "id")
        for attempt in range(1, RESUME_TRIES + 1):
            record = await self._jobs.get(tenant.name, job_id)
            if record.state != "paused":
                return scheduler_pb2.ResumeJobResponse(job=convert.job_to_proto(record))
            now = self._clock.now()
            cal = await self._calendar_of(tenant.name, record)
            async with self._metered(tenant, has_span(record, now)) as meter:
                span = await to_thread_to_its_end(resume_span, record, now, meter, cal)
            try:
                resumed, skip, released = await self._jobs.resume(
                    tenant.name, job_id, expected_version=record.version, span=span,
                    tzdata_version=tzdata_version(), now=now,
                )
            except VersionConflict:
                if attempt == RESUME_TRIES:
                    raise
                continue
            if released:
                self._on_ready()
            self._on_due(record_dues((resumed,)))
            response = scheduler_pb2.ResumeJobResponse(
                job=convert.job_to_proto(resumed), released_executions=released
            )
            if skip is not None:
                response.skipped.CopyFrom(convert.skip_to_proto(skip))
            return response
        raise AssertionError("unreachable")

    @rpc
    async def GetExecution(self, request, context):
        tenant = await self._auth.tenant(context)
        execution = await self._history.get_execution(tenant.name, _required(request.id, "id"))
        return scheduler_pb2.GetExecutionResponse(execution=convert.execution_to_proto(execution))

    @rpc
    async def ListExecutions(self, request, context):
        tenant = await self._auth.tenant(context)
        job_id = _required(request.job_id, "job_id")
        size = convert.page_size(request.page_size, default=50, maximum=500)
        before = convert.parse_execution_page_token(request.page_token)
        from_at, to_at = _window(request)
        page = await self._history.list_executions(
            tenant.name, job_id, before_key=before, limit=size, statuses=_statuses(request.statuses),
            from_at=from_at, to_at=to_at,
        )
        answer, cut = convert.executions_answer(page)
        # A cut page's span ends at its oldest execution kept: the ranges wholly older are the next page's.
        skips = page.skips if cut is page else [s for s in page.skips if s.to_at >= cut.executions[-1].nominal_at]
        return scheduler_pb2.ListExecutionsResponse(
            executions=answer,
            skips=[convert.skip_to_proto(s) for s in skips],
            next_page_token=convert.execution_page_token(cut.next_key),
        )

    @rpc
    async def CancelExecution(self, request, context):
        tenant = await self._auth.tenant(context)
        execution = await self._history.cancel_execution(
            tenant.name, _required(request.id, "id"), _reason(request.reason)
        )
        return scheduler_pb2.CancelExecutionResponse(execution=convert.execution_to_proto(execution))

    @rpc
    async def ListDeadLetters(self, request, context):
        tenant = await self._auth.tenant(context)
        size = convert.page_size(request.page_size, default=50, maximum=500)
        before = convert.parse_execution_page_token(request.page_token)
        page = await self._dead_letters.list(tenant.name, job_id=request.job_id, before_key=before, limit=size)
        answer, cut = convert.executions_answer(page)
        return scheduler_pb2.ListDeadLettersResponse(
            executions=answer,
            next_page_token=convert.execution_page_token(cut.next_key),
        )

    @rpc
    async def ReplayDeadLetter(self, request, context):
        """A fresh attempt series, same id (see :meth:`DeadLetterStore.replay`);
        the next hand-out round (at most a sweep interval away) takes it."""
        tenant = await self._auth.tenant(context)
        execution = await self._dead_letters.replay(tenant.name, _required(request.execution_id, "execution_id"))
        return scheduler_pb2.ReplayDeadLetterResponse(execution=convert.execution_to_proto(execution))

    # --- calendars: served by api/calendars.py ---------------------------------------------

    async def CreateCalendar(self, request, context):
        return await self._calendars.CreateCalendar(request, context)

    async def GetCalendar(self, request, context):
        return await self._calendars.GetCalendar(request, context)

    async def ListCalendars(self, request, context):
        return await self._calendars.ListCalendars(request, context)

    async def UpdateCalendar(self, request, context):
        return await self._calendars.UpdateCalendar(request, context)

    async def DeleteCalendar(self, request, context):
        return await self._calendars.DeleteCalendar(request, context)
