"""The console's JSON endpoints, under ``/api/``. Read-only.

Scoped exactly like the gRPC API, through the same Authenticator and the
same tenant-scoped store reads: a tenant sees only its own jobs, history and
dead letters (another tenant's job is 404 "not found", as a missing one);
the cluster view needs the admin token (a tenant key there is 403); a
missing or unknown credential is 401.

Bodies are the JSON mapping of the gRPC messages (``ListJobsResponse``,
``GetJobResponse``, ``ListExecutionsResponse``, ``ListDeadLettersResponse``,
``ClusterStatusResponse``), the shape ``tickwheel --json`` prints, minus
payloads (the console never shows them, and they can be large). Every page
is bounded; page tokens are the gRPC API's. Errors are
``{"error": {"code": 404, "message": "...", "fields": [...]}}``. Until the
server's start is done every route answers 503 with ``Retry-After`` and the
start's refusal ("starting: waiting for etcd at …"), as the gRPC API
answers UNAVAILABLE (:mod:`tickwheel_server.waiting`).

| route | what |
| --- | --- |
| ``/api/session`` | who the credential is: ``{"kind": "tenant", "tenant": name}`` or ``{"kind": "admin"}`` |
| ``/api/jobs`` | the tenant's jobs, by id, each with its last run (``page_size``, ``page_token``) |
| ``/api/jobs/{id}`` | the job and its next runs |
| ``/api/jobs/{id}/executions`` | its history, newest first, with attempts and skip ranges |
| ``/api/jobs/{id}/lateness`` | a histogram of its recent attempts' lateness |
| ``/api/jobs/{id}/preview`` | what a change of its schedule to ``cron`` and ``time_zone`` would do to its runs over the next ``days`` (UpdateJob's ``validate_only`` answer; nothing written) |
| ``/api/deadletters`` | the tenant's dead letters, newest first (``job_id`` optional: an id, else 400) |
| ``/api/cluster`` | ClusterStatus: servers, partitions per owner, the deepest queues (``top``) |
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from google.protobuf import field_mask_pb2, json_format
from google.protobuf.message import Message
from tickwheel.shared.clock import Clock
from tickwheel.shared.targets import TargetPolicy
from tickwheel.v1 import job_pb2, scheduler_pb2

from .. import errors
from ..api import convert, dryrun, validate
from ..api.decoding import STARTED, Starting
from ..api.nextruns import named_calendars, next_runs
from ..api.scheduler import metered_change, update_item
from ..api.status import store_unavailable
from ..auth.authenticator import Authenticator
from ..auth.ratelimit import to_thread_to_its_end
from ..store.calendars import CalendarStore
from ..store.deadletters import DeadLetterStore
from ..store.errors import StoreUnavailableError, TransactionConflictError
from ..store.history import HistoryStore
from ..store.jobs import JobStore
from ..telemetry.outages import OutageLog
from .auth import RETRY_AFTER, principal_of, require_admin, tenant_of
from .call import CallAborted
from .cluster import ClusterView
from .lateness import histogram
from .router import HttpError, Request, Response, Router

log = logging.getLogger(__name__)

NEXT_RUNS = 10
LATENESS_EXECUTIONS = 200
"""The lateness chart covers the attempts of the job's most recent executions, at most this many."""
JOBS_PAGE = (50, 100)
"""(default, maximum) page sizes."""
LAST_RUN_SCAN = 100
"""In the job list, a job's last run is looked for among its this many most recent executions."""
EXECUTIONS_PAGE = (25, 200)
DEAD_LETTERS_PAGE = (25, 200)
TOP_TENANTS = (10, 100)
PREVIEW_DAYS = (30, 366)
"""(default, maximum) days of runs a schedule-change preview compares, as UpdateJob's ``diff_window``."""


def _error(code: int, message: str, fields: list[dict] | None = None, headers=()) -> Response:
    body: dict = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    return Response.json({"error": body}, code, headers)


def json_endpoint(method: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[Response]]:
    """Wrap a handler returning a JSON-able value: domain errors become
    statuses as the gRPC API maps them (404, 400 with the fields, 503 with
    Retry-After while the store is unavailable), the rest 500 (logged).
    Refusals for want of the store are logged as an outage of this
    endpoint (:class:`~tickwheel_server.telemetry.outages.OutageLog`), not
    one line a request."""
    outages = OutageLog(log, f"console {method.__name__}", time, then="answered 503")

    @functools.wraps(method)
    async def wrapper(self, request: Request) -> Response:
        if not self._starting.done:
            return _error(503, self._starting.refusal(), headers=(("Retry-After", "1"),))
        try:
            answer = Response.json(await method(self, request))
        except HttpError as error:
            return _error(error.status, error.message, headers=error.headers)
        except CallAborted as error:
            return _error(error.http_status, error.details, error.fields)
        except errors.NotFound as error:
            return _error(404, str(error))
        except errors.InvalidArgument as error:
            fields = [{"field": v.field, "description": v.description} for v in error.violations]
            return _error(400, str(error), fields)
        except errors.QuotaExceeded as error:  # the tenant's rate, its schedule work paid (a preview)
            return _error(429, str(error), headers=RETRY_AFTER)
        except (StoreUnavailableError, TransactionConflictError) as error:
            outages.failed("a request", error, retryable=True)
            return _error(503, store_unavailable(error), headers=(("Retry-After", "1"),))
        except Exception:
            log.exception("console %s failed", request.path)
            return _error(500, "internal error")
        outages.ok()
        return answer

    return wrapper


def _to_json(message: Message) -> dict:
    return json_format.MessageToDict(message)


def page_size(request: Request, sizes: tuple[int, int], name: str = "page_size") -> int:
    """The ``name`` query parameter: a whole number 1 to the maximum, or the default when absent."""
    default, maximum = sizes
    text = request.query.get(name, "")
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= maximum:  # isdigit alone: "²", "٣"
        raise errors.InvalidArgument.field(name, f"a whole number from 1 to {maximum}")
    return int(text)


def _without_payload(execution) -> None:
    execution.ClearField("payload")


class ConsoleApi:
    def __init__(
        self,
        auth: Authenticator,
        jobs: JobStore,
        history: HistoryStore,
        dead_letters: DeadLetterStore,
        cluster: ClusterView,
        clock: Clock,
        target_policy: TargetPolicy,
        starting: Starting = STARTED,
    ) -> None:
        self._auth = auth
        self._starting = starting
        """The server's start: every route answers 503 until it is done."""
        self._jobs = jobs
        self._history = history
        self._dead_letters = dead_letters
        self._cluster = cluster
        self._clock = clock
        self._target_policy = target_policy
        # A job's next runs show what its calendar does to them, as GetJob shows them.
        self._calendars = CalendarStore(jobs.engine, jobs.clock) if jobs is not None else None

    def routes(self, router: Router) -> None:
        router.get("/api/session", self.session)
        router.get("/api/jobs", self.list_jobs)
        router.get("/api/jobs/{job_id}", self.get_job)
        router.get("/api/jobs/{job_id}/executions", self.list_executions)
        router.get("/api/jobs/{job_id}/lateness", self.lateness)
        router.get("/api/jobs/{job_id}/preview", self.preview_change)
        router.get("/api/deadletters", self.list_dead_letters)
        router.get("/api/cluster", self.cluster)

    @json_endpoint
    async def session(self, request: Request) -> dict:
        principal = await principal_of(self._auth, request)
        return {"kind": principal.kind, "tenant": principal.tenant} if principal.tenant else {"kind": principal.kind}

    @json_endpoint
    async def list_jobs(self, request: Request) -> dict:
        """A page of the tenant's jobs by id, each with its last run: one
        read per job, as GetJob makes, over at most :data:`LAST_RUN_SCAN`
        of its executions."""
        tenant = await tenant_of(self._auth, request)
        size = page_size(request, JOBS_PAGE)
        after = convert.parse_page_token(request.query.get("page_token", ""))
        found = await self._jobs.list(tenant.name, after_id=after, limit=size + 1)
        reply = scheduler_pb2.ListJobsResponse(
            next_page_token=convert.page_token(found[size - 1].id) if len(found) > size else ""
        )
        for record in found[:size]:
            job = convert.job_to_proto(record)
            job.ClearField("payload")
            last = await self._history.last_run(tenant.name, record.id, scan=LAST_RUN_SCAN)
            if last is not None:
                job.last_run.CopyFrom(convert.last_run_to_proto(last))
            reply.jobs.append(job)
        return _to_json(reply)

    @json_endpoint
    async def get_job(self, request: Request) -> dict:
        tenant = await tenant_of(self._auth, request)
        record = await self._jobs.get(tenant.name, request.params["job_id"])
        job = convert.job_to_proto(record)
        job.ClearField("payload")
        runs = await next_runs(self._calendars, tenant.name, record, job, NEXT_RUNS)
        last = await self._history.last_run(tenant.name, record.id)
        if last is not None:
            job.last_run.CopyFrom(convert.last_run_to_proto(last))
        return _to_json(scheduler_pb2.GetJobResponse(job=job, next_runs=runs))

    @json_endpoint
    async def list_executions(self, request: Request) -> dict:
        tenant = await tenant_of(self._auth, request)
        size = page_size(request, EXECUTIONS_PAGE)
        before = convert.parse_execution_page_token(request.query.get("page_token", ""))
        page = await self._history.list_executions(
            tenant.name, request.params["job_id"], before_key=before, limit=size
        )
        reply = scheduler_pb2.ListExecutionsResponse(
            executions=[convert.execution_to_proto(e) for e in page.executions],
            skips=[convert.skip_to_proto(s) for s in page.skips],
            next_page_token=convert.execution_page_token(page.next_key),
        )
        for execution in reply.executions:
            _without_payload(execution)
        return _to_json(reply)

    @json_endpoint
    async def lateness(self, request: Request) -> dict:
        """The lateness of every attempt of the job's :data:`LATENESS_EXECUTIONS`
        most recent executions, as a histogram (see :mod:`.lateness`)."""
        tenant = await tenant_of(self._auth, request)
        page = await self._history.list_executions(
            tenant.name, request.params["job_id"], limit=LATENESS_EXECUTIONS
        )
        values = [attempt.lateness.total_seconds() for e in page.executions for attempt in e.attempts]
        return {"executions": len(page.executions), **histogram(values).to_json()}

    @json_endpoint
    async def preview_change(self, request: Request) -> dict:
        """What UpdateJob with ``validate_only`` answers for a change of the
        job's schedule to the cron expression ``cron`` in ``time_zone`` (each
        the job's own when absent and the job is a cron job): the changed job
        (without payload) and the run diff over the next ``days`` days. The
        change is checked exactly as UpdateJob checks it (400 naming the
        field), against the job as stored now; nothing is written. Changing
        the job is the API's and the CLI's (``tickwheel job update``): the
        console stays read-only."""
        tenant = await tenant_of(self._auth, request)
        days = page_size(request, PREVIEW_DAYS, "days")
        record = await self._jobs.get(tenant.name, request.params["job_id"])
        schedule = job_pb2.Schedule()
        schedule.cron.CopyFrom(convert.stored_job(record).schedule.cron)
        if "cron" in request.query:
            schedule.cron.expression = request.query["cron"]
        if "time_zone" in request.query:
            schedule.cron.time_zone = request.query["time_zone"]
        update = scheduler_pb2.UpdateJobRequest(
            job=job_pb2.Job(id=record.id, version=record.version, schedule=schedule),
            update_mask=field_mask_pb2.FieldMask(paths=["schedule"]),
            validate_only=True,
        )
        now = self._clock.now()
        _, _, decide = update_item(update, now, self._target_policy)
        calendars = await named_calendars(self._calendars, tenant.name, [record.spec])
        async with self._auth.metered(tenant) as meter:
            change = await to_thread_to_its_end(metered_change(decide, meter, now), record)
            answer = await to_thread_to_its_end(
                dryrun.dry_run, record, change, max_payload_bytes=tenant.max_payload_bytes, now=now,
                window=timedelta(days=days), calendars=calendars, meter=meter,
            )
        answer.job.ClearField("payload")
        return _to_json(answer)

    @json_endpoint
    async def list_dead_letters(self, request: Request) -> dict:
        tenant = await tenant_of(self._auth, request)
        size = page_size(request, DEAD_LETTERS_PAGE)
        before = convert.parse_execution_page_token(request.query.get("page_token", ""))
        job_id = request.query.get("job_id", "")
        if job_id:  # a NUL reached PostgreSQL, which refuses it (500): gRPC's decoding refuses one there
            validate.check_id(job_id, "job_id")
        page = await self._dead_letters.list(tenant.name, job_id=job_id, before_key=before, limit=size)
        reply = scheduler_pb2.ListDeadLettersResponse(
            executions=[convert.execution_to_proto(e) for e in page.executions],
            next_page_token=convert.execution_page_token(page.next_key),
        )
        for execution in reply.executions:
            _without_payload(execution)
        return _to_json(reply)

    @json_endpoint
    async def cluster(self, request: Request) -> dict:
        await require_admin(self._auth, request)
        return await self._cluster.status(request, page_size(request, TOP_TENANTS, "top"))
