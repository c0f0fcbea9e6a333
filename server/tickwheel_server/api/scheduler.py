"""SchedulerService: tenants' calls. Thin: proto in, domain call, proto out.

Every call is scoped to the caller's tenant. RPCs whose machinery arrives
with the dispatcher and the workers (update, pause, trigger, backfill,
executions, dead letters) are not overridden here and answer UNIMPLEMENTED.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc

from ..auth.authenticator import Authenticator
from ..clock import Clock
from ..errors import InvalidArgument
from ..ids import new_job_id
from ..jobspec import schedule_of
from ..schedule import Fire, Schedule, ScheduleError, ScheduleKind, preview, tzdata_version, zones
from ..schedule import validate as validate_schedule
from ..store.jobs import JobStore, NewJob
from . import convert, validate
from .status import rpc

def fire_to_proto(fire: Fire) -> job_pb2.ScheduledFire:
    return job_pb2.ScheduledFire(
        nominal_at=convert.timestamp(fire.nominal_at),
        due_at=convert.timestamp(fire.due_at),
        local_time=fire.local_text,
        note=fire.note,
    )


def upcoming(schedule: Schedule, after: datetime, count: int, *, runs_so_far: int = 0) -> list[Fire]:
    """Up to ``count`` fires strictly after ``after``, with DST notes."""
    try:
        return preview(schedule, after, count, runs_so_far)
    except ScheduleError as error:
        raise validate.schedule_error(error) from None


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(self, auth: Authenticator, jobs: JobStore, clock: Clock) -> None:
        self._auth = auth
        self._jobs = jobs
        self._clock = clock

    @rpc
    async def CreateJob(self, request, context):
        tenant = await self._auth.tenant(context)
        request_id = validate.check_request_id(request.request_id)
        now = self._clock.now()
        job = validate.normalise_job(request.job, now)
        job_id = new_job_id(now)
        schedule = schedule_of(job, job_id)
        try:
            fire = validate_schedule(schedule, now)
        except ScheduleError as error:
            raise validate.schedule_error(error) from None
        record, created = await self._jobs.create(
            NewJob(
                id=job_id,
                tenant=tenant.name,
                name=job.name,
                spec=job.SerializeToString(),
                time_zone=validate.zone_of(schedule),
                next_run_at=fire.nominal_at,
                next_due_at=fire.due_at,
                tzdata_version=tzdata_version(),
                payload_size=len(job.payload),
            ),
            request_id,
        )
        return scheduler_pb2.CreateJobResponse(job=convert.job_to_proto(record), created=created)

    @rpc
    async def GetJob(self, request, context):
        tenant = await self._auth.tenant(context)
        if not request.id:
            raise InvalidArgument.field("id", "required")
        count = convert.page_size(request.next_runs, default=5, maximum=100, field="next_runs")
        record = await self._jobs.get(tenant.name, request.id)
        job = convert.job_to_proto(record)
        next_runs = []
        if record.state == "active" and record.next_run_at is not None:
            schedule = schedule_of(job, record.id)
            later = upcoming(schedule, record.next_run_at, count - 1, runs_so_far=record.run_count + 1)
            first = Fire(record.next_run_at, record.next_due_at or record.next_run_at, _offset(schedule, record.next_run_at))
            next_runs = [fire_to_proto(f) for f in [first, *later]]
        return scheduler_pb2.GetJobResponse(job=job, next_runs=next_runs)

    @rpc
    async def ListJobs(self, request, context):
        tenant = await self._auth.tenant(context)
        size = convert.page_size(request.page_size, default=100, maximum=1000)
        if request.state not in convert.JOB_STATE_FROM_PROTO and request.state != job_pb2.JOB_STATE_UNSPECIFIED:
            raise InvalidArgument.field("state", "unknown value")
        found = await self._jobs.list(
            tenant.name,
            after_id=convert.parse_page_token(request.page_token),
            limit=size + 1,
            state=convert.JOB_STATE_FROM_PROTO.get(request.state, ""),
            name_prefix=request.name_prefix,
        )
        token = convert.page_token(found[size - 1].id) if len(found) > size else ""
        return scheduler_pb2.ListJobsResponse(jobs=[convert.job_to_proto(j) for j in found[:size]], next_page_token=token)

    @rpc
    async def PreviewSchedule(self, request, context):
        tenant = await self._auth.tenant(context)
        count = convert.page_size(request.count, default=5, maximum=1000, field="count")
        after = convert.instant(request.after) if request.HasField("after") else self._clock.now()
        source = request.WhichOneof("source")
        if source == "job_id":
            record = await self._jobs.get(tenant.name, request.job_id)
            schedule = schedule_of(convert.job_to_proto(record), record.id)
            runs_so_far = record.run_count
        elif source == "job":
            schedule = schedule_of(request.job, request.job.id)
            runs_so_far = 0
        else:
            raise InvalidArgument.field("source", "set job_id or job")
        fires = upcoming(schedule, after, count, runs_so_far=runs_so_far)
        return scheduler_pb2.PreviewScheduleResponse(
            fires=[fire_to_proto(f) for f in fires], tzdata_version=tzdata_version()
        )


def _offset(schedule: Schedule, at: datetime) -> int:
    if schedule.kind is ScheduleKind.ONCE:
        return 0
    offset = at.astimezone(zones.zoneinfo(schedule.zone)).utcoffset() or timedelta(0)
    return int(offset.total_seconds())
